"""The dcps sink's own functions, without a JVM, against one embedded store (issue 20).

A Spark task runs ``stage_rows`` and the driver ``commit_stages`` / ``abort_stages``;
here the test calls them as Spark's Python workers would, with Arrow record batches, and
reads the store's file back: which channel each row landed in (the same as a
``ChannelPublisher`` with ``OrderBy.key()``), in what order, how many chunks a task
staged, that nothing is visible before the commit and that a repeated commit or an
aborted stage adds nothing. tests/spark/test_sink_2pc.py runs the same rules end to end
under Spark with task retries and driver kills.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa
from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

import idl
from dcps import BadParameterError, PreconditionNotMetError
from dcps.spark import _access
from dcps.spark._options import SourceOptions
from dcps.spark._sink import (
    BatchWriter,
    StagedMessage,
    StreamWriter,
    _prepare,
    abort_stages,
    commit_stages,
    stage_rows,
)
from dcps.store import Store, SyncMode
from tests.support.embedded_store import module_store


class Tagged(idl.Struct, typename="sink_test::Tagged"):
    """A keyed variable-size sample (encoded row by row)."""

    name: idl.key[idl.string]
    seq: idl.int64


class Pair(idl.Struct, typename="sink_test::Pair"):
    """Two key fields, fixed size (encoded in bulk)."""

    a: idl.key[idl.int32]
    b: idl.key[idl.int32]
    seq: idl.int64


class Plain(idl.Struct, typename="sink_test::Plain"):
    """A keyless sample: spread round robin by row index."""

    seq: idl.int64


class Reading(idl.Struct, typename="sink_test::Reading"):
    """One fixed-size key field (the dictionary path, encoded in bulk)."""

    sensor: idl.key[idl.int32]
    seq: idl.int64


HERE = __name__


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store for the module, and the keywords that reach it."""
    with module_store(tmp_path_factory, worker_id, "sinkstore") as (store, domain, namespace):
        try:
            yield {"store": store, "domain": domain, "namespace": namespace}
        finally:
            # the sink's connections are kept per process: closed here, so no DDS
            # participant outlives the module (a process forked later, as a mutation
            # run's workers are, would hang on the parent's Cyclone domain)
            for key in [k for k in _access._cache if k[1] == namespace]:
                _access._cache.pop(key).close()


@pytest.fixture
def store(served: dict[str, Any]) -> Store:
    return served["store"]  # type: ignore[no-any-return]


def options(served: dict[str, Any], topic: str, kind: type, **extra: str) -> SourceOptions:
    return SourceOptions.parse(
        {
            "topic": topic,
            "type": f"{HERE}:{kind.__name__}",
            "domain": str(served["domain"]),
            "namespace": served["namespace"],
            "retainConsumed": "true",  # no group reads: the store must keep what it gets
            **extra,
        }
    )


def schema_of(kind: type) -> StructType:
    types = {
        Tagged: [("name", StringType()), ("seq", LongType())],
        Wide: [("seq", LongType()), ("pad", IntegerType())],
    }
    fields = types.get(kind) or [(n, LongType()) for n in kind.__annotations__]
    return StructType([StructField(n, t) for n, t in fields])


def prepared(served: dict[str, Any], topic: str, kind: type, **extra: str) -> SourceOptions:
    opts = options(served, topic, kind, **extra)
    _prepare(opts, schema_of(kind))
    return opts


def tagged(names: list[str], first: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "name": pa.array(names, pa.string()),
            "seq": pa.array(range(first, first + len(names)), pa.int64()),
        }
    )


def readings(sensors: list[int], first: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "sensor": pa.array(sensors, pa.int32()),
            "seq": pa.array(range(first, first + len(sensors)), pa.int64()),
        }
    )


def pairs(keys: list[tuple[int, int]], first: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "a": pa.array([a for a, _ in keys], pa.int32()),
            "b": pa.array([b for _, b in keys], pa.int32()),
            "seq": pa.array(range(first, first + len(keys)), pa.int64()),
        }
    )


def plain(n: int, first: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"seq": pa.array(range(first, first + n), pa.int64())})


def channel_of(sample: Any, count: int) -> int:
    """The channel a ChannelPublisher with OrderBy.key() picks for ``sample``."""
    return zlib.crc32(type(sample).__idl__.serialize_key(sample)) % count


def stored(store: Store, topic: str, kind: type, channel: int) -> list[int]:
    """``seq`` of every element visible in ``channel``, in offset order."""
    try:
        run, _ = store.log.reader().fetch(topic, channel, 0, 1_000_000)
    except BadParameterError:
        return []
    return [kind.deserialize(bytes(p)).seq for p in run.payloads()]


def everything(store: Store, topic: str, kind: type, channels: int) -> list[list[int]]:
    return [stored(store, topic, kind, c) for c in range(channels)]


def staged_chunks(store: Store, topic: str) -> int:
    """Chunks staged for ``topic`` and neither committed nor dropped."""
    db = sqlite3.connect(f"file:{store.log.path}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT count(*) FROM staged JOIN topics ON topics.id = topic_id WHERE name = ?",
            (topic,),
        ).fetchone()
        return int(row[0])
    finally:
        db.close()


def batch_counts(store: Store, topic: str, channel: int) -> list[int]:
    run, _ = store.log.reader().fetch(topic, channel, 0, 1_000_000)
    return list(run.counts)


class TestPrepare:
    def test_rows_lacking_a_field_are_refused_naming_the_columns(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        opts = options(served, topic_name, Pair)
        schema = StructType([StructField("b", LongType())])
        with pytest.raises(BadParameterError) as info:
            _prepare(opts, schema)
        assert str(info.value) == (
            f"cannot publish to {topic_name!r}: the rows lack column(s) ['a', 'seq'] of "
            "sink_test::Pair"
        )

    def test_the_topic_is_created_with_the_channels_and_retention_asked(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        prepared(served, topic_name, Pair, channels="5")
        prepared(served, f"{topic_name}_r", Pair, channels="2", retainConsumed="false")
        info = {t.name: t for t in store.log.topics()}
        assert info[topic_name].channel_count == 5
        assert info[topic_name].retain_consumed is True
        assert info[f"{topic_name}_r"].channel_count == 2
        assert info[f"{topic_name}_r"].retain_consumed is False


class TestStageAndCommit:
    def test_keyed_rows_land_in_their_keys_channel_in_order_once_committed(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Tagged, channels="3")
        names = ["a", "b", "c", "a", "d", "b", "e", "a"]
        message = stage_rows(opts, iter([tagged(names[:5]), tagged(names[5:], 5)]), ("q", 4), 2)
        assert everything(store, topic_name, Tagged, 3) == [[], [], []]  # staged: invisible
        assert (message.query, message.epoch, message.partition, message.rows) == ("q", 4, 2, 8)
        assert message.digest == ""
        assert commit_stages(opts, [message], 4) == 8
        want: list[list[int]] = [[], [], []]
        for i, n in enumerate(names):
            want[channel_of(Tagged(n, 0), 3)].append(i)
        assert len([w for w in want if w]) > 1
        assert everything(store, topic_name, Tagged, 3) == want
        assert staged_chunks(store, topic_name) == 0

    def test_one_key_column_in_bulk_matches_the_publishers_channels(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        """Fixed-size rows (encoded in bulk), a key repeated within and across batches."""
        opts = prepared(served, topic_name, Reading, channels="4")
        sensors = [5, 1, 5, 9, 2, 1, 7, 5, 3, 9, 11, 0]
        batches = [readings(sensors[:6]), readings(sensors[6:], 6)]
        message = stage_rows(opts, iter(batches), ("q", 0), 0)
        assert commit_stages(opts, [message], 0) == len(sensors)
        want: list[list[int]] = [[], [], [], []]
        for i, s in enumerate(sensors):
            want[channel_of(Reading(s, 0), 4)].append(i)
        assert len([w for w in want if w]) > 2
        assert everything(store, topic_name, Reading, 4) == want

    def test_several_key_columns_hash_together(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Pair, channels="5")
        keys = [(1, 1), (1, 2), (2, 1), (1, 1), (3, 4), (4, 3), (2, 1), (0, 9)]
        message = stage_rows(opts, iter([pairs(keys)]), ("q", 0), 0)
        commit_stages(opts, [message], 0)
        want: list[list[int]] = [[] for _ in range(5)]
        for i, (a, b) in enumerate(keys):
            want[channel_of(Pair(a, b, 0), 5)].append(i)
        assert len([w for w in want if w]) > 2
        assert everything(store, topic_name, Pair, 5) == want

    def test_keyless_rows_go_round_robin_across_batches(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Plain, channels="3")
        batches = [plain(4), plain(0, 4), plain(3, 4)]  # the empty batch is skipped
        message = stage_rows(opts, iter(batches), ("q", 0), 0)
        assert message.rows == 7
        commit_stages(opts, [message], 0)
        assert everything(store, topic_name, Plain, 3) == [[0, 3, 6], [1, 4], [2, 5]]

    def test_chunks_hold_at_most_batch_rows_of_one_channel(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        """``batchRows`` 3: a chunk goes once it holds 3 rows or more (the rows of one channel
        in one Arrow batch are never split), the rest when the task ends; each is a batch."""
        opts = prepared(served, topic_name, Plain, channels="1", batchRows="3")
        batches = [plain(3), plain(1, 3), plain(1, 4), plain(2, 5), plain(1, 7)]
        message = stage_rows(opts, iter(batches), ("q", 0), 0)
        assert (message.chunks, message.rows) == (3, 8)
        assert staged_chunks(store, topic_name) == 3
        commit_stages(opts, [message], 0)
        assert stored(store, topic_name, Plain, 0) == list(range(8))
        assert batch_counts(store, topic_name, 0) == [3, 4, 1]

    def test_variable_size_chunks_hold_at_most_batch_rows(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Tagged, channels="1", batchRows="2")
        message = stage_rows(opts, iter([tagged(["x"]), tagged(["x"] * 4, 1)]), ("q", 0), 0)
        assert message.chunks == 1  # 1 row buffered, then 5: over the limit, one chunk
        commit_stages(opts, [message], 0)
        assert stored(store, topic_name, Tagged, 0) == list(range(5))

    def test_many_chunks_stay_exact_beyond_the_stage_window(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        """More chunks than a task keeps in flight: every one staged and counted once."""
        opts = prepared(served, topic_name, Plain, channels="2", batchRows="1")
        message = stage_rows(opts, iter([plain(3, 3 * i) for i in range(4)]), ("q", 0), 0)
        assert (message.chunks, message.rows) == (8, 12)  # one per channel and batch
        commit_stages(opts, [message], 0)
        assert everything(store, topic_name, Plain, 2) == [[0, 2, 4, 6, 8, 10], [1, 3, 5, 7, 9, 11]]


class TestCommit:
    def test_no_message_commits_nothing(self, served: dict[str, Any], topic_name: str) -> None:
        opts = prepared(served, topic_name, Plain)
        assert commit_stages(opts, [], 0) == 0
        assert commit_stages(opts, [None], 0) == 0

    def test_partitions_commit_in_partition_order_and_a_duplicate_keeps_the_first(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Plain, channels="1")
        second = stage_rows(opts, iter([plain(2, 10)]), ("q", 3), 1)
        first = stage_rows(opts, iter([plain(2, 0)]), ("q", 3), 0)
        retry = stage_rows(opts, iter([plain(2, 20)]), ("q", 3), 1)
        assert commit_stages(opts, [second, None, first, retry], 3) == 4
        assert stored(store, topic_name, Plain, 0) == [0, 1, 10, 11]
        assert staged_chunks(store, topic_name) == 0  # the retry's chunk dropped

    def test_a_repeated_commit_appends_nothing_and_answers_the_first_count(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Plain, channels="1")
        message = stage_rows(opts, iter([plain(3)]), ("q", 0), 0)
        assert commit_stages(opts, [message], 0) == 3
        again = stage_rows(opts, iter([plain(3)]), ("q", 0), 0)
        assert commit_stages(opts, [again], 0) == 3  # the first commit's count, "already"
        assert stored(store, topic_name, Plain, 0) == [0, 1, 2]

    @pytest.mark.parametrize(("query", "epoch"), [("other", 5), ("q", 6)])
    def test_a_message_of_another_transaction_is_refused(
        self, served: dict[str, Any], store: Store, topic_name: str, query: str, epoch: int
    ) -> None:
        opts = prepared(served, topic_name, Plain, channels="1")
        ours = stage_rows(opts, iter([plain(1)]), ("q", 5), 0)
        theirs = StagedMessage(query, epoch, 1, "stage", 1, 1)
        with pytest.raises(PreconditionNotMetError) as info:
            commit_stages(opts, [ours, theirs], 5)
        assert str(info.value) == (
            f"a commit of {topic_name!r} epoch 5 got a message of query {query!r} epoch {epoch}"
        )
        assert stored(store, topic_name, Plain, 0) == []

    def test_abort_drops_what_was_staged(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = prepared(served, topic_name, Plain, channels="1")
        kept = stage_rows(opts, iter([plain(2)]), ("keep", 1), 0)
        messages = [
            stage_rows(opts, iter([plain(2)]), ("q", 1), 0),
            stage_rows(opts, iter([plain(2)]), ("r", 1), 1),
            None,
        ]
        assert staged_chunks(store, topic_name) == 3
        abort_stages(opts, messages, 1)
        assert staged_chunks(store, topic_name) == 1
        assert stored(store, topic_name, Plain, 0) == []
        assert commit_stages(opts, [kept], 1) == 2


class TestWriters:
    def test_a_batch_writer_publishes_once_through_its_own_transaction(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = options(served, topic_name, Plain, channels="1")
        writer = BatchWriter(opts, schema_of(Plain))
        other = BatchWriter(opts, schema_of(Plain))
        assert writer.job != other.job
        message = writer.write(iter([plain(3)]))
        assert (message.query, message.epoch, message.partition) == (writer.job, 0, 0)
        writer.commit([message])
        assert stored(store, topic_name, Plain, 0) == [0, 1, 2]
        dropped = other.write(iter([plain(2, 3)]))
        other.abort([dropped])
        assert staged_chunks(store, topic_name) == 0
        assert stored(store, topic_name, Plain, 0) == [0, 1, 2]

    def test_a_stream_writer_outside_spark_uses_query_and_batch_zero(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        opts = options(served, topic_name, Plain, channels="1")
        writer = StreamWriter(opts, schema_of(Plain))
        message = writer.write(iter([plain(2)]))
        assert (message.query, message.epoch, message.partition) == ("query", 0, 0)
        writer.commit([message], 0)
        assert stored(store, topic_name, Plain, 0) == [0, 1]
        dropped = writer.write(iter([plain(2, 2)]))
        writer.abort([dropped], 0)
        assert staged_chunks(store, topic_name) == 0
        assert stored(store, topic_name, Plain, 0) == [0, 1]

    def test_a_writer_checks_the_rows_columns(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        opts = options(served, topic_name, Pair)
        with pytest.raises(BadParameterError, match=r"lack column\(s\) \['a', 'b', 'seq'\]"):
            StreamWriter(opts, StructType([]))
        with pytest.raises(BadParameterError, match=r"lack column\(s\) \['a', 'b', 'seq'\]"):
            BatchWriter(opts, StructType([]))


class Wide(idl.Struct, typename="sink_test::Wide"):
    """16 bytes stored (4 of header): 262144 rows are exactly one 4 MiB chunk."""

    seq: idl.int64
    pad: idl.int32


class TestChunkBytes:
    def test_a_chunk_goes_once_it_reaches_chunk_bytes(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        """Rows reaching CHUNK_BYTES exactly make a chunk; the next row starts another."""
        from dcps.spark._sink import CHUNK_BYTES

        opts = prepared(served, topic_name, Wide, channels="1", batchRows="1000000")
        rows = CHUNK_BYTES // 16
        assert rows == 262144
        full = pa.RecordBatch.from_pydict(
            {"seq": pa.array(range(rows), pa.int64()), "pad": pa.array([0] * rows, pa.int32())}
        )
        one = pa.RecordBatch.from_pydict(
            {"seq": pa.array([rows], pa.int64()), "pad": pa.array([0], pa.int32())}
        )
        message = stage_rows(opts, iter([full, one]), ("q", 0), 0)
        assert (message.chunks, message.rows) == (2, rows + 1)
        commit_stages(opts, [message], 0)
        assert batch_counts(store, topic_name, 0) == [rows, 1]


@pytest.fixture
def in_task() -> Iterator[Any]:
    """A TaskContext as Spark's Python worker sets one for a write task (partition 3 of
    micro-batch 7 of query ``q-77``), cleared afterwards."""
    from pyspark import TaskContext

    ctx = TaskContext._getOrCreate()
    ctx._partitionId = 3
    ctx._localProperties = {"sql.streaming.queryId": "q-77", "streaming.sql.batchId": "7"}
    try:
        yield ctx
    finally:
        TaskContext._setTaskContext(None)


class TestInsideATask:
    def test_a_stream_writer_names_the_query_batch_and_partition(
        self, served: dict[str, Any], store: Store, topic_name: str, in_task: Any
    ) -> None:
        opts = options(served, topic_name, Plain, channels="1")
        writer = StreamWriter(opts, schema_of(Plain))
        message = writer.write(iter([plain(2)]))
        assert (message.query, message.epoch, message.partition) == ("q-77", 7, 3)
        writer.commit([message], 7)
        assert stored(store, topic_name, Plain, 0) == [0, 1]

    def test_a_batch_writer_names_the_partition(
        self, served: dict[str, Any], topic_name: str, in_task: Any
    ) -> None:
        opts = options(served, topic_name, Plain, channels="1")
        writer = BatchWriter(opts, schema_of(Plain))
        message = writer.write(iter([plain(1)]))
        assert (message.query, message.epoch, message.partition) == (writer.job, 0, 3)


class TestInjectedFaults:
    """The retry tests' hook fires in a write task after staging, once, for its topic."""

    @pytest.mark.parametrize("kind", [StreamWriter, BatchWriter])
    def test_an_armed_write_fails_once_after_staging(
        self,
        served: dict[str, Any],
        store: Store,
        topic_name: str,
        tmp_path: Any,
        monkeypatch: pytest.MonkeyPatch,
        kind: type,
    ) -> None:
        from dcps.spark._faults import FAULTS_ENV, InjectedFaultError, marker

        monkeypatch.setenv(FAULTS_ENV, str(tmp_path))
        armed = marker(tmp_path, topic_name, "write")
        armed.touch()
        marker(tmp_path, topic_name, "read").touch()  # another point: not this one
        marker(tmp_path, "other", "write").touch()  # another topic: not this one
        opts = options(served, topic_name, Plain, channels="1")
        writer = kind(opts, schema_of(Plain))
        with pytest.raises(InjectedFaultError) as info:
            writer.write(iter([plain(2)]))
        assert str(info.value) == (
            f"dcps: injected test failure in a write task of topic {topic_name!r}"
        )
        assert not armed.exists()
        assert marker(tmp_path, topic_name, "read").exists()
        assert marker(tmp_path, "other", "write").exists()
        assert staged_chunks(store, topic_name) == 1  # staged, not visible
        assert stored(store, topic_name, Plain, 0) == []
        retried = writer.write(iter([plain(2)]))  # the retry: no marker left
        assert retried.rows == 2


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """An embedded store of a namespace with a key; this process holds the key (so the
    sink's transactions belong to their query: staged digests, signed commit and abort)."""
    from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file

    base = int(os.environ.get("DCPS_TEST_DOMAIN_BASE", "1"))
    domain = base + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))
    namespace = f"nk_{uuid.uuid4().hex[:10]}"
    where = tmp_path_factory.mktemp("keyedsink")
    key = str(write_key_file(where / "ns.key").source)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_FILE_ENV, key)
        with Store(
            where / "store", domain_id=domain, namespace=namespace, sync=SyncMode.NORMAL, key=key
        ) as store:
            try:
                yield {"store": store, "domain": domain, "namespace": namespace}
            finally:
                for k in [k for k in _access._cache if k[1] == namespace]:
                    _access._cache.pop(k).close()


class TestWithAKey:
    def test_a_keyed_commit_publishes_and_a_keyed_abort_drops(
        self, keyed: dict[str, Any], topic_name: str
    ) -> None:
        store = keyed["store"]
        opts = prepared(keyed, topic_name, Plain, channels="1")
        query = f"query-{uuid.uuid4().hex[:8]}"  # the query's key is derived once per query
        message = stage_rows(opts, iter([plain(3)]), (query, 2), 0)
        assert len(message.digest) == 64
        assert commit_stages(opts, [message], 2) == 3
        assert stored(store, topic_name, Plain, 0) == [0, 1, 2]
        dropped = stage_rows(opts, iter([plain(2, 3)]), (query, 3), 0)
        assert staged_chunks(store, topic_name) == 1
        abort_stages(opts, [dropped], 3)
        assert staged_chunks(store, topic_name) == 0
        assert stored(store, topic_name, Plain, 0) == [0, 1, 2]


class Box(idl.Struct, typename="sink_test::Box"):
    zone: idl.int32
    shelf: idl.int32


class Nested(idl.Struct, typename="sink_test::Nested"):
    """A struct key: its members are key paths ``where.zone`` and ``where.shelf``."""

    where: idl.key[Box]
    seq: idl.int64


class TestKeyColumns:
    def test_every_key_column_counts(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        """Rows sharing their first key field but not the second spread like the publisher."""
        opts = prepared(served, topic_name, Pair, channels="5")
        keys = [(1, b) for b in range(10)]
        commit_stages(opts, [stage_rows(opts, iter([pairs(keys)]), ("q", 0), 0)], 0)
        want: list[list[int]] = [[] for _ in range(5)]
        for i, (a, b) in enumerate(keys):
            want[channel_of(Pair(a, b, 0), 5)].append(i)
        assert len([w for w in want if w]) > 2
        assert everything(store, topic_name, Pair, 5) == want

    def test_a_struct_key_is_read_member_by_member(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        schema = StructType(
            [
                StructField(
                    "where",
                    StructType(
                        [StructField("zone", IntegerType()), StructField("shelf", IntegerType())]
                    ),
                ),
                StructField("seq", LongType()),
            ]
        )
        opts = options(served, topic_name, Nested, channels="5")
        _prepare(opts, schema)
        keys = [(2, s) for s in range(8)] + [(z, 1) for z in range(4)]
        where = pa.array(
            [{"zone": z, "shelf": s} for z, s in keys],
            pa.struct([("zone", pa.int32()), ("shelf", pa.int32())]),
        )
        batch = pa.RecordBatch.from_pydict(
            {"where": where, "seq": pa.array(range(len(keys)), pa.int64())}
        )
        commit_stages(opts, [stage_rows(opts, iter([batch]), ("q", 0), 0)], 0)
        want: list[list[int]] = [[] for _ in range(5)]
        for i, (z, s) in enumerate(keys):
            want[channel_of(Nested(Box(z, s), 0), 5)].append(i)
        assert len([w for w in want if w]) > 2
        assert everything(store, topic_name, Nested, 5) == want

    def test_chunk_bytes_add_up_across_batches_and_start_again_after_a_chunk(
        self, served: dict[str, Any], store: Store, topic_name: str
    ) -> None:
        """Two half chunks make one chunk; the rows after it gather in the next."""
        from dcps.spark._sink import CHUNK_BYTES

        opts = prepared(served, topic_name, Wide, channels="1", batchRows="1000000")
        half = CHUNK_BYTES // 16 // 2

        def rows(first: int, n: int) -> pa.RecordBatch:
            return pa.RecordBatch.from_pydict(
                {
                    "seq": pa.array(range(first, first + n), pa.int64()),
                    "pad": pa.array([0] * n, pa.int32()),
                }
            )

        batches = [rows(0, half), rows(half, half), rows(2 * half, 1), rows(2 * half + 1, 1)]
        message = stage_rows(opts, iter(batches), ("q", 0), 0)
        assert (message.chunks, message.rows) == (2, 2 * half + 2)
        commit_stages(opts, [message], 0)
        assert batch_counts(store, topic_name, 0) == [2 * half, 2]
