"""The ``dcps`` sink: rows published to a channelled topic through a two-phase commit.

Exactly-once by construction, whatever the order of rows or the number of
task attempts:

1. **Tasks stage.** Each task attempt gets a stage id of its own (random:
   unique across retries, speculative copies and driver restarts) and sends
   its rows to the store as chunks of one channel each (a chunk goes once it
   holds ``batchRows`` rows or :data:`CHUNK_BYTES` bytes; it takes a channel's
   rows of an Arrow batch whole, so it may pass either by up to one Arrow
   batch's rows), staged under the
   transaction ``(query id, epoch)``, where the epoch is the micro-batch id
   (0 for a batch write). Staged elements are invisible. A task holds at
   most one chunk per channel plus :data:`STAGE_WINDOW` chunks in flight, so
   its memory does not grow with its partition. Its commit message
   (:class:`StagedMessage`) names its stage id and chunk count.
2. **The driver commits.** ``commit(messages, batchId)`` sends the stage ids
   of the successful attempts (one per partition) to the store, which appends
   exactly their chunks in one SQLite transaction (offsets assigned then,
   pushed live after), records the transaction and drops every other staged
   chunk of it (failed attempts). ``abort`` drops the transaction's chunks.
3. **Repeats change nothing.** A driver restarted from its checkpoint runs
   the uncommitted micro-batch again with the same query id and batch id; if
   the store had committed it before the crash, the new commit appends
   nothing (the store answers ``already``).

With a namespace key the transaction belongs to the query
(``dcps/wire/_auth_stage.py``): its name on the wire ends with the
fingerprint of a key derived from the query id and the stage secret
(``DCPS_SPARK_STAGE_KEY_FILE``, else the namespace key); each task hashes
what it stages and the driver signs its commit (naming every stage's digest)
and its abort with that key, so another key holder can neither commit nor
abort the query's transactions nor change what a task staged.

Staged chunks that are never committed (a driver gone for good) are dropped
by the next commit of the same query (earlier epochs) or after
``dcps.store._staging.STAGED_TTL_NS``. Rows go to channels by key hash
exactly as ``ChannelPublisher`` with ``OrderBy.key()`` sends them (keyless:
round robin by row index within the task). A row that does not fit the type
fails the task, naming the column; nothing it staged becomes visible.
"""

from __future__ import annotations

import functools
import uuid
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from dcps.wire._auth_stage import (
    QueryKey,
    StageDigest,
    owned_query,
    query_key_from_environment,
)
from idl import describe
from idl._errors import BadParameterError, PreconditionNotMetError

from ._access import StoreAccess, channel_of_key, connect_store
from ._decode import encode_batch, encode_matrix
from ._faults import maybe_fail, maybe_stall
from ._options import SourceOptions

__all__ = [
    "CHUNK_BYTES",
    "STAGE_WINDOW",
    "BatchWriter",
    "StagedMessage",
    "StreamWriter",
    "commit_stages",
    "stage_rows",
]

#: A staged chunk is sent once it holds this many bytes (or ``batchRows`` rows); it takes a
#: channel's rows of an Arrow batch whole, so it may pass this by up to one Arrow batch.
CHUNK_BYTES = 4 * 1024 * 1024
#: Staged chunks a task keeps in flight (unanswered) at once.
STAGE_WINDOW = 4


@dataclass
class StagedMessage(WriterCommitMessage):
    """What one task attempt staged: its stage id, chunk count and rows (and, with a key, the
    digest of its chunks, which the driver's commit names)."""

    query: str
    epoch: int
    partition: int
    stage: str
    chunks: int
    rows: int
    digest: str = ""


@functools.lru_cache(maxsize=64)
def _query_key(query: str) -> QueryKey | None:
    """The query's key (see the module doc; None without any key), derived once per process."""
    return query_key_from_environment(query)


def _prepare(opts: SourceOptions, schema: StructType) -> None:
    """Check the rows' columns, then make sure the store knows the topic (driver side)."""
    info = describe(opts.type())
    names = set(schema.fieldNames())
    missing = [f.name for f in info.fields if f.name not in names]
    if missing:
        raise BadParameterError(
            f"cannot publish to {opts.topic!r}: the rows lack column(s) {missing} of "
            f"{info.typename}"
        )
    access = connect_store(opts.domain_id, opts.namespace, None, opts.timeout)
    access.ensure_topic(opts.topic, opts.channels, opts.retain_consumed, info.typename)


class _Channels:
    """The channel of every row: by key hash (memoised per key value) or round robin."""

    def __init__(self, t: type, count: int) -> None:
        self.t = t
        self.count = count
        self.keys = describe(t).keys
        self.memo: dict[Any, int] = {}
        self.rows = 0

    def of(self, batch: Any, payload: Any) -> np.ndarray:
        """Channel per row of ``batch``; ``bytes(payload[i])`` is row ``i``'s CDR."""
        n = batch.num_rows
        first, self.rows = self.rows, self.rows + n
        if not self.keys:
            return np.asarray((np.arange(n, dtype=np.int64) + first) % self.count)
        if len(self.keys) == 1:
            encoded = _key_column(batch, self.keys[0]).dictionary_encode()
            indices = np.asarray(encoded.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            values = encoded.dictionary.to_pylist()
            memo = self.memo
            table = np.fromiter(
                (memo.get(v, -1) for v in values), dtype=np.int64, count=len(values)
            )
            missing = np.flatnonzero(table < 0)
            if len(missing):  # keys new to this task: hash one row of each
                _, firsts = np.unique(indices, return_index=True)
                row_of = dict(zip(indices[firsts].tolist(), firsts.tolist(), strict=True))
                for j in missing.tolist():
                    if j in row_of:
                        table[j] = self._channel(values[j], payload, row_of[j])
            return np.asarray(table[indices])
        columns = [_key_column(batch, path).to_pylist() for path in self.keys]
        return np.fromiter(
            (self._channel(v, payload, i) for i, v in enumerate(zip(*columns, strict=True))),
            dtype=np.int64,
            count=n,
        )

    def _channel(self, value: Any, payload: Any, row: int) -> int:
        channel = self.memo.get(value, -1)
        if channel < 0:  # hash the key exactly as ChannelPublisher does
            sample = self.t.deserialize(bytes(payload[row]))  # type: ignore[attr-defined]
            key_cdr = self.t.__idl__.serialize_key(sample)  # type: ignore[attr-defined]
            channel = self.memo[value] = channel_of_key(key_cdr, self.count)
        return channel


def _key_column(batch: Any, path: str) -> Any:
    steps = path.split(".")
    col = batch.column(steps[0])
    for step in steps[1:]:
        col = col.field(step)
    return col


class _Stager:
    """Sends one task attempt's chunks to the store, a bounded number in flight."""

    def __init__(
        self, access: StoreAccess, opts: SourceOptions, txn: tuple[str, int], partition: int
    ) -> None:
        self.access = access
        self.opts = opts
        self.txn = txn
        self.partition = partition
        self.stage = uuid.uuid4().hex
        self.buffers: dict[int, tuple[list[bytes], list[int]]] = {}
        self.buffered: dict[int, int] = {}
        self.pending: deque[tuple[int, Future[Any]]] = deque()
        self.chunks = 0
        self.rows = 0
        self.digest = StageDigest() if _query_key(txn[0]) is not None else None
        self.wire_query = owned_query(txn[0], _query_key(txn[0]))

    def add(self, channel: int, blob: bytes, sizes: list[int]) -> None:
        """Buffer elements of ``channel``; send a chunk once the buffer is full."""
        blobs, all_sizes = self.buffers.setdefault(channel, ([], []))
        blobs.append(blob)
        all_sizes.extend(sizes)
        self.buffered[channel] = self.buffered.get(channel, 0) + len(blob)
        if len(all_sizes) >= self.opts.batch_rows or self.buffered[channel] >= CHUNK_BYTES:
            self._send(channel)

    def _send(self, channel: int) -> None:
        blobs, sizes = self.buffers.pop(channel)
        self.buffered.pop(channel, None)
        if not sizes:
            return
        while len(self.pending) >= STAGE_WINDOW:
            self._settle()
        blob = b"".join(blobs)
        if self.digest is not None:
            self.digest.add(self.chunks, channel, np.asarray(sizes, dtype="<i4").tobytes(), blob)
        fut = self.access.stage_async(
            self.opts.topic,
            (self.wire_query, self.txn[1]),
            self.partition,
            self.stage,
            self.chunks,
            channel,
            sizes,
            blob,
        )
        self.pending.append((len(sizes), fut))
        self.chunks += 1

    def _settle(self) -> None:
        count, fut = self.pending.popleft()
        staged = fut.result(timeout=self.opts.timeout + 1)
        if staged.count != count:
            raise PreconditionNotMetError(
                f"the store staged {staged.count} of {count} elements for {self.opts.topic!r}"
            )
        self.rows += count

    def finish(self) -> StagedMessage:
        """Send what is buffered and wait for every chunk; the task's commit message."""
        for channel in sorted(self.buffers):
            self._send(channel)
        while self.pending:
            self._settle()
        query, epoch = self.txn
        digest = "" if self.digest is None else self.digest.hexdigest()
        return StagedMessage(
            query, epoch, self.partition, self.stage, self.chunks, self.rows, digest
        )


def stage_rows(
    opts: SourceOptions, batches: Iterator[Any], txn: tuple[str, int], partition: int
) -> StagedMessage:
    """Stage one task's Arrow record batches in transaction ``txn``; its commit message."""
    t = opts.type()
    access = connect_store(opts.domain_id, opts.namespace, None, opts.timeout)
    stager = _Stager(access, opts, txn, partition)
    channels = _Channels(t, access.channel_count(opts.topic))
    for batch in batches:
        if not batch.num_rows:
            continue
        matrix = encode_matrix(t, batch)
        if matrix is not None:
            fixed = matrix
            chan = channels.of(batch, fixed)
            order = np.argsort(chan, kind="stable")
            ordered = np.ascontiguousarray(fixed[order])
            cuts = np.searchsorted(chan[order], np.arange(channels.count + 1))
            size = fixed.shape[1]
            for c in range(channels.count):
                lo, hi = int(cuts[c]), int(cuts[c + 1])
                if hi > lo:
                    stager.add(c, ordered[lo:hi].tobytes(), [size] * (hi - lo))
            continue
        payloads = encode_batch(t, batch)
        chan = channels.of(batch, payloads)
        for c in np.unique(chan).tolist():
            part = [payloads[i] for i in np.flatnonzero(chan == c).tolist()]
            stager.add(int(c), b"".join(part), [len(p) for p in part])
    return stager.finish()


def commit_stages(
    opts: SourceOptions, messages: list[WriterCommitMessage | None], epoch: int
) -> int:
    """Commit the stages of ``messages`` (driver side); the elements made visible.

    Spark's commit coordinator lets one attempt per partition commit; should
    two messages name the same partition, the first is kept.
    """
    staged = [m for m in messages if isinstance(m, StagedMessage)]
    if not staged:
        return 0
    query = staged[0].query
    stages: dict[int, StagedMessage] = {}
    for m in staged:
        if m.query != query or m.epoch != epoch:
            raise PreconditionNotMetError(
                f"a commit of {opts.topic!r} epoch {epoch} got a message of query "
                f"{m.query!r} epoch {m.epoch}"
            )
        stages.setdefault(m.partition, m)
    access = connect_store(opts.domain_id, opts.namespace, None, opts.timeout)
    maybe_stall(opts.topic, "commit")  # test-only hook (see _faults): the driver dies here
    ordered = [m for _, m in sorted(stages.items())]
    key = _query_key(query)
    wire = owned_query(query, key)
    digests = [m.digest for m in ordered] if key is not None else []
    proof = (
        ""
        if key is None
        else key.prove(
            "commit", opts.topic, wire, epoch, [(m.stage, m.chunks, m.digest) for m in ordered]
        )
    )
    done = access.commit_staged(
        opts.topic, (wire, epoch), [(m.stage, m.chunks) for m in ordered], digests, proof
    )
    maybe_stall(opts.topic, "committed")  # test-only hook: dies after the store committed
    return done.elements


def abort_stages(
    opts: SourceOptions, messages: list[WriterCommitMessage | None], epoch: int
) -> None:
    """Drop what the tasks of ``messages`` staged (driver side)."""
    staged = [m for m in messages if isinstance(m, StagedMessage)]
    access = connect_store(opts.domain_id, opts.namespace, None, opts.timeout)
    for query in sorted({m.query for m in staged}):
        key = _query_key(query)
        wire = owned_query(query, key)
        proof = "" if key is None else key.prove("abort", opts.topic, wire, epoch)
        access.abort_staged(opts.topic, (wire, epoch), proof)


def _partition() -> int:
    ctx = TaskContext.get()
    return ctx.partitionId() if ctx is not None else 0


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("dcps")``: each micro-batch through the two-phase commit."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        _prepare(opts, schema)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> StagedMessage:
        ctx = TaskContext.get()
        query = (ctx.getLocalProperty("sql.streaming.queryId") if ctx else None) or "query"
        batch = int((ctx.getLocalProperty("streaming.sql.batchId") if ctx else None) or "0")
        message = stage_rows(self.opts, iterator, (query, batch), _partition())
        maybe_fail(self.opts.topic, "write")  # test-only hook (see _faults): after staging
        return message

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        commit_stages(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        abort_stages(self.opts, messages, batchId)


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("dcps")``: publishes a DataFrame once, through the two-phase commit."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        _prepare(opts, schema)
        self.opts = opts
        self.job = f"write-{uuid.uuid4().hex}"  # pickled into every task: one transaction

    def write(self, iterator: Iterator[Any]) -> StagedMessage:
        message = stage_rows(self.opts, iterator, (self.job, 0), _partition())
        maybe_fail(self.opts.topic, "write")  # test-only hook (see _faults): after staging
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        commit_stages(self.opts, messages, 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        abort_stages(self.opts, messages, 0)
