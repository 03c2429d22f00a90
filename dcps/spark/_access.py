"""Reading a channelled topic's stored elements: over DDS from the store, or from its file.

Either way elements come in bulk, as :class:`~dcps.wire._batches.ElementRun`
(the stored batches' sizes and payload blobs), never one Python object per
element: over DDS with bulk-form FETCH requests, from the file through the
store's own :class:`~dcps.store._log_reader.LogReader` (opened from the data
directory; it holds every query of the file, so none is repeated here).

``StoreAccess`` is what the Spark readers use on the driver (channel heads
and tails) and in tasks (a channel's offset range). ``connect_store`` keeps
one connection per process and store, since Spark reuses its Python workers
across tasks.
"""

from __future__ import annotations

import threading
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, TypeVar

from dcps.wire._batches import ElementRun
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)

if TYPE_CHECKING:
    from dcps.channels._client import StoreClient
    from dcps.store._log_reader import LogReader
    from dcps.wire._replies import Fetched, Published
    from dcps.wire._staging import Staged, StagedAborted, StagedCommitted
    from dcps.wire._transport import Endpoint

__all__ = ["StoreAccess", "cached_store", "connect_store"]

_R = TypeVar("_R")

#: Elements per FETCH request: a reply of 64-byte elements is then ~1.4 MB (the
#: store's reply writer keeps its last 64 replies per client).
FETCH_CHUNK = 20_000
#: FETCH requests one range read keeps in flight.
FETCH_WINDOW = 3


class StoreAccess:
    """Heads, tails and element ranges of channelled topics; publishing and group commits.

    With ``data_dir`` the store's file is read directly (read-only, on this
    machine, through :meth:`LogReader.open`); otherwise requests go to the
    store over DDS (``domain_id``, ``namespace``), which works from any host
    of the domain. Publishing and group commits need the DDS connection.
    """

    def __init__(
        self,
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        data_dir: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.domain_id = domain_id
        self.namespace = namespace
        self.data_dir = data_dir
        self.fetch_chunk = FETCH_CHUNK
        self._reader: LogReader | None = None
        self._client: StoreClient | None = None
        self._endpoint: Endpoint | None = None
        if data_dir is not None:
            # No full integrity check at open: every Spark worker opens the file, and
            # a check of a large file costs each of them minutes. Reads still check
            # each run they return and fail on a damaged page or batch.
            # Imported here, not at the top: Spark starts a new Python process for each
            # streaming query's reader, which over DDS then does not load the log's modules.
            from dcps.store._log_reader import LogReader

            self._reader = LogReader.open(data_dir, verify=False)
            return
        # Imported here, not at the top, to keep the DDS transport (Cyclone entities)
        # out of a Spark worker that reads the store file (data_dir) only
        # (tests/spark/test_spark_import.py pins it).
        from dcps.channels._client import StoreClient
        from dcps.wire._transport import Endpoint

        self._endpoint = Endpoint(domain_id, namespace)
        self._client = StoreClient(self._endpoint, request_timeout=timeout)
        try:
            self._client.connect(timeout)
        except BaseException:
            self.close()
            raise

    @property
    def over_dds(self) -> bool:
        """True when requests go to a store over DDS (False: its file is read directly)."""
        return self._client is not None

    def close(self) -> None:
        """Release the connection (idempotent)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None

    # -- channel states ---------------------------------------------------------

    def bounds(self, topic: str, timeout: float | None = None) -> dict[int, tuple[int, int]]:
        """``{channel: (head, next_offset)}`` of every channel of ``topic``.

        An unknown topic raises ``BadParameterError``; ``timeout`` (s, over DDS)
        bounds the wait instead of the connection's request timeout.
        """
        if self._reader is not None:
            states = self._reader.channel_states(topic)
            return {c: (s.head, s.tail + 1) for c, s in enumerate(states)}
        reply = self._dds().state(topic, timeout=timeout)
        return {
            c: (h, t + 1) for c, h, t in zip(reply.channels, reply.heads, reply.tails, strict=True)
        }

    def first_at(self, topic: str, channel: int, timestamp_ns: int, end: int) -> int:
        """Offset of the first element of ``channel`` accepted at or after ``timestamp_ns``.

        ``end`` (exclusive) when every element below it is older.
        """
        if self._reader is not None:
            return min(self._reader.find_timestamp(topic, channel, timestamp_ns), end)
        head = self.bounds(topic)[channel][0]
        lo, hi = head, end  # binary search over fetched timestamps (ts never decreases)
        while lo < hi:
            mid = (lo + hi) // 2
            run = self.fetch(topic, channel, mid, mid + 1, strict=False)
            if not run.count:
                return end
            if run.stamps[0] >= timestamp_ns:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # -- elements -----------------------------------------------------------

    def fetch(
        self, topic: str, channel: int, start: int, end: int, *, strict: bool = True
    ) -> ElementRun:
        """Elements ``start .. end - 1`` of ``channel``, in bulk.

        ``strict``: raise ``PreconditionNotMetError`` unless exactly that range
        is returned (retention removed part of it), so a reader never silently
        skips data. Otherwise the run may start later (at the head) or end
        earlier (at the tail).
        """
        run = ElementRun(start)
        if end > start:
            if self._reader is not None:
                run, _ = self._reader.fetch(topic, channel, start, end - start)
            else:
                run = self._fetch_dds(topic, channel, start, end)
        if strict and (run.count != end - start or (run.count and run.first != start)):
            raise _retained(topic, channel, start, end, run.count)
        return run

    def fetch_runs(
        self, topic: str, channel: int, start: int, end: int, step: int
    ) -> Iterator[ElementRun]:
        """Elements ``start .. end - 1`` of ``channel``, exactly, in runs of up to ``step``.

        Over DDS, ``FETCH_WINDOW`` requests stay in flight the whole time,
        also while the caller works on a run, so the store and the transport
        never wait for it. Raises ``PreconditionNotMetError`` if retention
        removed part of the range (as :meth:`fetch` does).
        """
        step = max(1, step)
        if self._client is None:
            for pos in range(start, end, step):
                yield self.fetch(topic, channel, pos, min(end, pos + step))
            return
        pending: deque[tuple[int, int, Future[Fetched]]] = deque()
        pos = expect = start
        runs: list[ElementRun] = []
        while expect < end:
            while pos < end and len(pending) < FETCH_WINDOW:
                count = min(self.fetch_chunk, end - pos)
                pending.append((pos, count, self._request_fetch(topic, channel, pos, count)))
                pos += count
            at, count, fut = pending.popleft()
            run = self._result(fut).run
            if run.count != count or run.first != at:
                raise _retained(topic, channel, at, at + count, run.count)
            runs.append(run)
            expect = run.end
            if expect >= end or sum(r.count for r in runs) >= step:
                yield ElementRun.join(runs)
                runs = []

    def _fetch_dds(self, topic: str, channel: int, start: int, end: int) -> ElementRun:
        """Bulk FETCHes of ``fetch_chunk`` elements, up to ``FETCH_WINDOW`` in flight.

        Offsets are dense, so the chunks of an exact range are known up front;
        once a reply is short or starts elsewhere (the tail, or retention
        moved the head), the rest is fetched one request at a time.
        """
        runs: list[ElementRun] = []
        pending: deque[tuple[int, int, Future[Fetched]]] = deque()
        pos = expect = start
        pipelined = True
        while True:
            while pipelined and pos < end and len(pending) < FETCH_WINDOW:
                count = min(self.fetch_chunk, end - pos)
                pending.append((pos, count, self._request_fetch(topic, channel, pos, count)))
                pos += count
            if pending:
                at, count, fut = pending.popleft()
                if not pipelined:
                    continue  # a chunk asked for before the plan changed: not needed
            elif expect < end and not pipelined:
                at, count = expect, min(self.fetch_chunk, end - expect)
                fut = self._request_fetch(topic, channel, at, count)
            else:
                break
            run = self._result(fut).run
            if not run.count or (runs and run.first != expect):
                break  # the tail, or a gap (retention moved the head meanwhile)
            runs.append(run)
            expect = run.end
            if run.first != at or run.count != count:
                pipelined = False
        return ElementRun.join(runs)

    def _request_fetch(self, topic: str, channel: int, offset: int, count: int) -> Future[Fetched]:
        return self._dds().fetch_async(topic, channel, offset, count)

    def _result(self, fut: Future[_R]) -> _R:
        try:
            return fut.result(timeout=self._dds().request_timeout + 1)
        except TimeoutError as exc:
            if isinstance(exc, DcpsTimeoutError):
                raise
            raise DcpsTimeoutError("the store did not answer in time") from exc

    def _dds(self, doing: str = "reading") -> StoreClient:
        if self._client is None:
            if self._reader is None:
                raise AlreadyClosedError(
                    f"the connection to dcps store {self.namespace!r} is closed"
                )
            raise BadParameterError(
                f"{doing} needs a DDS connection to the store (option data_dir reads its file only)"
            )
        return self._client

    # -- publishing (the sink) ------------------------------------------------

    def channel_count(self, topic: str) -> int:
        """Number of channels of ``topic``."""
        return len(self.bounds(topic))

    def ensure_topic(self, topic: str, channels: int, retain: bool | None, type_name: str) -> int:
        """Create ``topic`` in the store if new (``channels`` 0: the store's default); its count."""
        client = self._dds("publishing")
        return client.ensure_topic(topic, channels, retain, type_name).channel_count

    def publish_keyed(
        self, topic: str, channel: int, payloads: Sequence[bytes], key: str
    ) -> Future[Published]:
        """Send one idempotent publish batch; returns the reply future."""
        sizes = [len(p) for p in payloads]
        return self._dds("publishing").publish_async(topic, channel, sizes, b"".join(payloads), key)

    # -- staged publishing (the sink's two-phase commit, see _sink.py) -------------

    def stage_async(
        self,
        topic: str,
        txn: tuple[str, int],
        partition: int,
        stage: str,
        seq: int,
        channel: int,
        sizes: list[int],
        blob: bytes,
    ) -> Future[Staged]:
        """Stage chunk ``seq`` of ``stage`` for ``channel`` in transaction ``(query, epoch)``."""
        from dcps.wire._staging import Staged, StageRequest  # with the DDS transport (above)

        request = StageRequest(topic, txn[0], txn[1], partition, stage, seq, channel, sizes, blob)
        # StoreClient has no public call for request kinds it does not know (yet): its
        # _call sends any typed request and decodes the reply.
        return self._dds("publishing").request_async(request, Staged.from_wire)

    def commit_staged(
        self,
        topic: str,
        txn: tuple[str, int],
        stages: Sequence[tuple[str, int]],
        digests: Sequence[str] = (),
        proof: str = "",
    ) -> StagedCommitted:
        """Make ``stages`` (stage id, chunk count) of ``(query, epoch)`` visible at once
        (``digests``, ``proof``: the query key's, with a namespace key; see ``_sink.py``)."""
        from dcps.wire._staging import CommitStagedRequest, StagedCommitted

        request = CommitStagedRequest(topic, txn[0], txn[1], tuple(stages), tuple(digests), proof)
        fut = self._dds("committing").request_async(request, StagedCommitted.from_wire)
        return self._result(fut)

    def abort_staged(self, topic: str, txn: tuple[str, int], proof: str = "") -> StagedAborted:
        """Drop the staged chunks of ``(query, epoch)`` (``proof``: with a namespace key)."""
        from dcps.wire._staging import AbortStagedRequest, StagedAborted

        fut = self._dds("aborting").request_async(
            AbortStagedRequest(topic, *txn, proof), StagedAborted.from_wire
        )
        return self._result(fut)

    # -- subscriber groups (the streaming source's commits) -------------------------

    def join_group(self, topic: str, group: str, member: str, member_timeout_ms: int) -> None:
        """Join ``group`` of ``topic`` as ``member`` (expelled after the timeout without commit)."""
        self._dds("a group commit").join(topic, group, member, member_timeout_ms)

    def commit_group(self, topic: str, group: str, member: str, offsets: dict[int, int]) -> None:
        """Commit ``offsets`` (channel -> last consumed offset) for ``member`` of ``group``.

        Raises ``PreconditionNotMetError`` when the membership expired.
        """
        self._dds("a group commit").commit(topic, group, member, offsets)

    def leave_group(self, topic: str, group: str, member: str) -> None:
        """Leave ``group`` of ``topic`` (``member`` no longer holds channels)."""
        self._dds("leaving a group").leave(topic, group, member)


def _retained(topic: str, channel: int, start: int, end: int, got: int) -> PreconditionNotMetError:
    return PreconditionNotMetError(
        f"topic {topic!r} channel {channel}: elements {start}..{end - 1} are no longer "
        f"all stored (got {got}); the store's retention removed them"
    )


_cache: dict[tuple[int, str, str | None], StoreAccess] = {}
_cache_lock = threading.Lock()


def connect_store(
    domain_id: int, namespace: str, data_dir: str | None = None, timeout: float = 10.0
) -> StoreAccess:
    """The process's shared :class:`StoreAccess` for a store (created on first use)."""
    key = (domain_id, namespace, data_dir)
    with _cache_lock:
        access = _cache.get(key)
        if access is None:
            access = _cache[key] = StoreAccess(
                domain_id=domain_id, namespace=namespace, data_dir=data_dir, timeout=timeout
            )
        return access


def cached_store(domain_id: int, namespace: str, data_dir: str | None = None) -> StoreAccess | None:
    """The process's shared :class:`StoreAccess` for a store if it has one already, else None.

    Never waits: not even for a connection being made meanwhile.
    """
    return _cache.get((domain_id, namespace, data_dir))


def channel_of_key(key_cdr: bytes, channel_count: int) -> int:
    """The channel ``ChannelPublisher`` with ``OrderBy.key()`` picks for a key's CDR."""
    return zlib.crc32(key_cdr) % channel_count
