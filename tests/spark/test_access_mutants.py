"""The Spark source's and sink's store access at its edges (issue 20's mutation run of
``dcps/spark/_access.py``; no JVM).

One embedded store for the module, reached over DDS by one :class:`StoreAccess` (as a
Spark task reaches it) and through its file (``data_dir``). Each test reads what a
Spark query would get: exact element ranges over several pipelined FETCH requests, runs
split by the step asked for, the first element at a timestamp, the refusal naming a range
that retention removed, and the typed errors of a closed or file-only access.
"""

from __future__ import annotations

import threading
import uuid
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)
from dcps.spark import _access
from dcps.spark._access import StoreAccess, channel_of_key, connect_store
from dcps.store import Store, SyncMode
from dcps.store._log_reader import LogReader
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._auth_stage import QueryKey, StageDigest, owned_query
from tests.support.embedded_store import module_store, worker_domain


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store, one access over DDS and one over its file, for the module."""
    with module_store(tmp_path_factory, worker_id, "accessstore") as (store, domain, namespace):
        dds = StoreAccess(domain_id=domain, namespace=namespace, timeout=20.0)
        try:
            yield {"store": store, "domain": domain, "namespace": namespace, "dds": dds}
        finally:
            dds.close()
            for key in [k for k in _access._cache if k[1] == namespace]:
                _access._cache.pop(key).close()


@pytest.fixture
def dds(served: dict[str, Any]) -> Iterator[StoreAccess]:
    access: StoreAccess = served["dds"]
    access.fetch_chunk = _access.FETCH_CHUNK
    yield access
    access.fetch_chunk = _access.FETCH_CHUNK


def data_dir(served: dict[str, Any]) -> str:
    store: Store = served["store"]
    return str(store.log.path.parent)


def topic_with(access: StoreAccess, batches: list[int], *, retain: bool = True) -> str:
    """A new topic of one channel holding ``batches`` (element counts), elements b"<offset>".

    Without ``retain``, member ``m1`` of group ``g`` holds the channel (joined first):
    the store keeps what the group has not committed."""
    topic = f"t_{uuid.uuid4().hex[:8]}"
    assert access.ensure_topic(topic, 1, retain, "") == 1
    if not retain:
        access.join_group(topic, "g", "m1", 30_000)
    n = 0
    for i, count in enumerate(batches):
        payloads = [b"%d" % (n + j) for j in range(count)]
        done = access.publish_keyed(topic, 0, payloads, f"k{i}").result(20)
        assert (done.first, done.count) == (n, count)
        n += count
    return topic


def offsets(run: Any) -> list[int]:
    return [int(o) for o in run.offsets()]


class TestRangesOverDds:
    def test_an_exact_range_over_many_pipelined_requests(self, dds: StoreAccess) -> None:
        topic = topic_with(dds, [3, 4, 5])
        assert dds.over_dds
        assert dds.bounds(topic) == {0: (0, 12)}
        assert dds.channel_count(topic) == 1
        dds.fetch_chunk = 2
        run = dds.fetch(topic, 0, 1, 12)
        assert offsets(run) == list(range(1, 12))
        assert run.payloads() == [b"%d" % i for i in range(1, 12)]
        assert offsets(dds.fetch(topic, 0, 5, 6)) == [5]
        empty = dds.fetch(topic, 0, 4, 4)
        assert (empty.count, empty.first, empty.end) == (0, 4, 4)

    def test_a_range_past_the_tail_is_refused_by_name(self, dds: StoreAccess) -> None:
        topic = topic_with(dds, [4])
        dds.fetch_chunk = 3
        with pytest.raises(PreconditionNotMetError) as short:
            dds.fetch(topic, 0, 2, 9)
        assert str(short.value) == (
            f"topic {topic!r} channel 0: elements 2..8 are no longer all stored (got 2); "
            "the store's retention removed them"
        )
        assert offsets(dds.fetch(topic, 0, 2, 9, strict=False)) == [2, 3]
        assert dds.fetch(topic, 0, 4, 9, strict=False).count == 0

    def test_a_range_whose_head_moved_starts_at_the_head(self, dds: StoreAccess) -> None:
        """Retention released 0..4: the non-strict read starts at 5, the strict one is refused."""
        topic = topic_with(dds, [10], retain=False)
        dds.commit_group(topic, "g", "m1", {0: 4})
        assert dds.bounds(topic) == {0: (5, 10)}
        dds.fetch_chunk = 2
        assert offsets(dds.fetch(topic, 0, 0, 10, strict=False)) == list(range(5, 10))
        assert offsets(dds.fetch(topic, 0, 3, 8, strict=False)) == [5, 6, 7]
        with pytest.raises(PreconditionNotMetError, match=r"elements 0\.\.9 .*\(got 5\)"):
            dds.fetch(topic, 0, 0, 10)
        with pytest.raises(PreconditionNotMetError) as runs:
            list(dds.fetch_runs(topic, 0, 0, 10, 4))
        assert str(runs.value) == (
            f"topic {topic!r} channel 0: elements 0..1 are no longer all stored (got 2); "
            "the store's retention removed them"
        )
        dds.leave_group(topic, "g", "m1")
        with pytest.raises(PreconditionNotMetError):
            dds.commit_group(topic, "g", "m1", {0: 6})
        assert dds.bounds(topic) == {0: (5, 10)}

    def test_runs_are_joined_up_to_the_step(self, dds: StoreAccess) -> None:
        topic = topic_with(dds, [9])
        dds.fetch_chunk = 2
        runs = list(dds.fetch_runs(topic, 0, 0, 9, 3))
        assert [offsets(r) for r in runs] == [[0, 1, 2, 3], [4, 5, 6, 7], [8]]
        dds.fetch_chunk = 4
        runs = list(dds.fetch_runs(topic, 0, 1, 9, 4))
        assert [offsets(r) for r in runs] == [[1, 2, 3, 4], [5, 6, 7, 8]]
        assert [offsets(r) for r in dds.fetch_runs(topic, 0, 2, 5, 0)] == [[2, 3, 4]]
        assert list(dds.fetch_runs(topic, 0, 5, 5, 3)) == []
        assert b"".join(b"".join(r.payloads()) for r in runs) == b"".join(
            b"%d" % i for i in range(1, 9)
        )

    def test_first_at_finds_the_first_element_at_a_timestamp(self, dds: StoreAccess) -> None:
        topic = topic_with(dds, [2, 3, 1])
        stamps = [int(s) for s in dds.fetch(topic, 0, 0, 6).timestamps()]
        assert stamps == sorted(stamps)
        assert len(set(stamps)) == 6
        for i, ts in enumerate(stamps):
            assert dds.first_at(topic, 0, ts, 6) == i
            assert dds.first_at(topic, 0, ts + 1, 6) == i + 1
        assert dds.first_at(topic, 0, 0, 6) == 0
        assert dds.first_at(topic, 0, stamps[-1] + 1, 6) == 6
        assert dds.first_at(topic, 0, stamps[3], 3) == 3  # the range ends first
        assert dds.first_at(topic, 0, stamps[-1] + 1, 9) == 9  # past the tail: the end

    def test_first_at_starts_at_the_head(self, dds: StoreAccess) -> None:
        topic = topic_with(dds, [6], retain=False)
        stamps = [int(s) for s in dds.fetch(topic, 0, 0, 6).timestamps()]
        dds.commit_group(topic, "g", "m1", {0: 2})
        assert dds.first_at(topic, 0, 0, 6) == 3
        assert dds.first_at(topic, 0, stamps[4], 6) == 4
        dds.leave_group(topic, "g", "m1")


class TestFileAccess:
    def test_the_same_ranges_from_the_file(self, dds: StoreAccess, served: dict[str, Any]) -> None:
        topic = topic_with(dds, [3, 4])
        stamps = [int(s) for s in dds.fetch(topic, 0, 0, 7).timestamps()]
        access = StoreAccess(data_dir=data_dir(served))
        try:
            assert not access.over_dds
            assert access.bounds(topic) == {0: (0, 7)}
            assert offsets(access.fetch(topic, 0, 2, 6)) == [2, 3, 4, 5]
            assert [offsets(r) for r in access.fetch_runs(topic, 0, 0, 7, 3)] == [
                [0, 1, 2],
                [3, 4, 5],
                [6],
            ]
            assert [offsets(r) for r in access.fetch_runs(topic, 0, 0, 2, 0)] == [[0], [1]]
            assert access.first_at(topic, 0, stamps[3], 7) == 3
            assert access.first_at(topic, 0, stamps[3], 2) == 2
            assert access.first_at(topic, 0, stamps[-1] + 1, 9) == 7
            with pytest.raises(PreconditionNotMetError, match=r"elements 5\.\.8 .*\(got 2\)"):
                access.fetch(topic, 0, 5, 9)
            with pytest.raises(PreconditionNotMetError, match=r"elements 5\.\.3 .*\(got 0\)"):
                access.fetch(topic, 0, 5, 4)
        finally:
            access.close()

    @pytest.mark.parametrize(
        ("call", "doing"),
        [
            (lambda a: a.ensure_topic("t", 1, True, ""), "publishing"),
            (lambda a: a.publish_keyed("t", 0, [b"x"], "k"), "publishing"),
            (lambda a: a.stage_async("t", ("q", 0), 0, "s", 0, 0, [1], b"x"), "publishing"),
            (lambda a: a.commit_staged("t", ("q", 0), [("s", 1)]), "committing"),
            (lambda a: a.abort_staged("t", ("q", 0)), "aborting"),
            (lambda a: a.join_group("t", "g", "m", 1000), "a group commit"),
            (lambda a: a.commit_group("t", "g", "m", {0: 1}), "a group commit"),
            (lambda a: a.leave_group("t", "g", "m"), "leaving a group"),
            (lambda a: a._request_fetch("t", 0, 0, 1), "reading"),
        ],
    )
    def test_file_access_refuses_what_needs_the_store(
        self, served: dict[str, Any], call: Any, doing: str
    ) -> None:
        access = StoreAccess(data_dir=data_dir(served))
        try:
            with pytest.raises(BadParameterError) as refused:
                call(access)
            assert str(refused.value) == (
                f"{doing} needs a DDS connection to the store (option data_dir reads its file only)"
            )
        finally:
            access.close()

    def test_a_file_access_defaults_to_domain_0_namespace_dcps(
        self, served: dict[str, Any]
    ) -> None:
        access = StoreAccess(data_dir=data_dir(served))
        access.close()
        assert (access.domain_id, access.namespace) == (0, "dcps")
        with pytest.raises(AlreadyClosedError, match=r"^the connection to dcps store 'dcps' is"):
            access.ensure_topic("t", 1, True, "")

    def test_a_closed_access_says_so(self, served: dict[str, Any]) -> None:
        access = StoreAccess(data_dir=data_dir(served), namespace="nsx")
        access.close()
        access.close()  # idempotent
        with pytest.raises(AlreadyClosedError) as closed:
            access.ensure_topic("t", 1, True, "")
        assert str(closed.value) == "the connection to dcps store 'nsx' is closed"


class TestConnections:
    def test_one_access_per_process_and_store(self, served: dict[str, Any]) -> None:
        domain, namespace, path = served["domain"], served["namespace"], data_dir(served)
        a = connect_store(domain, namespace, path)
        assert connect_store(domain, namespace, path) is a
        assert not a.over_dds
        assert (a.domain_id, a.namespace, a.data_dir) == (domain, namespace, path)
        b = connect_store(domain, namespace)
        assert b is not a
        assert b.over_dds
        assert connect_store(domain, namespace) is b
        assert b._dds().request_timeout == 10.0
        _access._cache.pop((domain, namespace, None)).close()
        c = connect_store(domain, namespace, timeout=15.0)
        assert c._dds().request_timeout == 15.0

    def test_the_timeout_reaches_the_client(self, dds: StoreAccess, served: dict[str, Any]) -> None:
        assert dds._dds().request_timeout == 20.0
        default = StoreAccess(domain_id=served["domain"], namespace=served["namespace"])
        try:
            assert default._dds().request_timeout == 10.0
            assert default.fetch_chunk == _access.FETCH_CHUNK == 20_000
            topic = topic_with(default, [3])
            assert offsets(default.fetch(topic, 0, 0, 3)) == [0, 1, 2]
        finally:
            default.close()
        default.close()  # idempotent
        assert not default.over_dds  # closed: no connection left
        with pytest.raises(AlreadyClosedError):
            default.ensure_topic("t", 1, True, "")

    def test_a_slow_answer_within_the_timeout_is_awaited(self, dds: StoreAccess) -> None:
        """The access waits a second longer than the client's own request timeout."""
        client = dds._dds()
        client.request_timeout = 0.2
        try:
            slow: Future[Any] = Future()
            timer = threading.Timer(0.5, slow.set_result, ("answer",))
            timer.start()
            try:
                assert dds._result(slow) == "answer"
            finally:
                timer.cancel()
        finally:
            client.request_timeout = 20.0

    def test_the_type_name_and_the_idempotence_key_reach_the_store(
        self, dds: StoreAccess, served: dict[str, Any]
    ) -> None:
        topic = f"t_{uuid.uuid4().hex[:8]}"
        dds.ensure_topic(topic, 2, True, "access_test::T")
        first = dds.publish_keyed(topic, 1, [b"a", b"b"], "once").result(20)
        again = dds.publish_keyed(topic, 1, [b"a", b"b"], "once").result(20)
        assert (first.first, again.first, again.duplicate) == (0, 0, True)
        assert dds.bounds(topic) == {0: (0, 0), 1: (0, 2)}
        with LogReader.open(data_dir(served), verify=False) as reader:
            assert reader.topic(topic).type_name == "access_test::T"

    def test_an_unanswered_request_is_a_timeout(self, dds: StoreAccess) -> None:
        client = dds._dds()
        client.request_timeout = 0.05
        try:
            never: Future[Any] = Future()
            with pytest.raises(DcpsTimeoutError, match=r"^the store did not answer in time$"):
                dds._result(never)
            timed_out: Future[Any] = Future()
            timed_out.set_exception(DcpsTimeoutError("FETCH timed out"))
            with pytest.raises(DcpsTimeoutError, match=r"^FETCH timed out$"):
                dds._result(timed_out)
        finally:
            client.request_timeout = 20.0

    def test_staged_publishing_over_dds(self, dds: StoreAccess) -> None:
        topic = topic_with(dds, [1])
        staged = dds.stage_async(topic, ("q", 3), 0, "s", 0, 0, [1, 2], b"abc").result(20)
        assert staged.count == 2
        done = dds.commit_staged(topic, ("q", 3), [("s", 1)])
        assert (done.elements, done.chunks, done.already) == (2, 1, False)
        assert dds.fetch(topic, 0, 1, 3).payloads() == [b"a", b"bc"]
        dds.stage_async(topic, ("q", 4), 0, "s", 0, 0, [1], b"z").result(20)
        assert dds.abort_staged(topic, ("q", 4)).chunks == 1
        assert dds.bounds(topic) == {0: (0, 3)}

    def test_a_key_picks_the_publishers_channel(self) -> None:
        for key, count in [(b"abc", 7), (b"", 3), (b"\x00\x01", 256)]:
            assert channel_of_key(key, count) == zlib.crc32(key) % count
        assert channel_of_key(b"abc", 7) == 5


@pytest.fixture(scope="module")
def keyed(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[tuple[StoreAccess, QueryKey, str]]:
    """A store with a namespace key and an access holding the key (a second embedded
    store of the module: only a keyed store checks a staged commit's digests and proof)."""
    path = tmp_path_factory.mktemp("keyedaccess")
    key = write_key_file(path / "ns.key")
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    domain = worker_domain(worker_id)
    with Store(
        path / "store",
        domain_id=domain,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        key=str(path / "ns.key"),
        admin_key=None,
    ):
        with pytest.MonkeyPatch.context() as env:  # the access reads its key at start
            env.setenv(KEY_FILE_ENV, str(path / "ns.key"))
            access = StoreAccess(domain_id=domain, namespace=namespace, timeout=20.0)
        try:
            own = QueryKey(key.secret, "q")
            yield access, own, owned_query("q", own)
        finally:
            access.close()


class TestKeyedStore:
    def test_digests_and_proofs_reach_the_store(
        self, keyed: tuple[StoreAccess, QueryKey, str]
    ) -> None:
        access, key, query = keyed
        topic = f"t_{uuid.uuid4().hex[:8]}"
        access.ensure_topic(topic, 1, True, "")
        access.stage_async(topic, (query, 0), 0, "s", 0, 0, [1, 1], b"ab").result(20)
        digest = StageDigest()
        digest.add(0, 0, b"\x01\x00\x00\x00\x01\x00\x00\x00", b"ab")
        signed = [("s", 1, digest.hexdigest())]
        proof = key.prove("commit", topic, query, 0, signed)
        done = access.commit_staged(topic, (query, 0), [("s", 1)], [digest.hexdigest()], proof)
        assert (done.elements, done.chunks) == (2, 1)
        access.stage_async(topic, (query, 1), 0, "s", 0, 0, [1], b"c").result(20)
        aborted = access.abort_staged(topic, (query, 1), key.prove("abort", topic, query, 1))
        assert aborted.chunks == 1
        assert access.fetch(topic, 0, 0, 2).payloads() == [b"a", b"b"]
