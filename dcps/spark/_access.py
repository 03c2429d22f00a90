"""Reading a channelled topic's stored elements: over DDS from the store, or from its file.

Either way elements come in bulk, as :class:`~dcps.wire._batches.ElementRun`
(the stored batches' sizes and payload blobs), never one Python object per
element: over DDS with bulk-form FETCH requests, from the file with one
SQLite row per stored batch (store format version 2).

``StoreAccess`` is what the Spark readers use on the driver (channel heads
and tails) and in tasks (a channel's offset range). ``connect_store`` keeps
one DDS connection per process and namespace, since Spark reuses its Python
workers across tasks.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dcps.store._log import FORMAT_MAGIC, FORMAT_VERSION
from dcps.wire._batches import ElementRun
from idl._errors import (
    BadParameterError,
    DcpsTimeoutError,
    PreconditionNotMetError,
    UnsupportedError,
)

if TYPE_CHECKING:
    from dcps.channels._client import StoreClient
    from dcps.wire._replies import Fetched
    from dcps.wire._transport import Endpoint

# dcps.wire._transport (Cyclone DDS) is imported only on the DDS path, so a
# Spark worker reading the store file directly does not load the DDS stack.

__all__ = ["StoreAccess", "connect_store"]

#: Elements per FETCH request: a reply of 64-byte elements is then ~1.4 MB (the
#: store's reply writer keeps its last 64 replies per client).
FETCH_CHUNK = 20_000
#: FETCH requests one range read keeps in flight.
FETCH_WINDOW = 3


class StoreAccess:
    """Heads, tails and element ranges of channelled topics.

    With ``data_dir`` the store's SQLite file is read directly (read-only, on
    this machine); otherwise requests go to the store over DDS (``domain_id``,
    ``namespace``), which works from any host of the domain.
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
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._client: StoreClient | None = None
        self._endpoint: Endpoint | None = None
        if data_dir is not None:
            path = Path(data_dir) / "channels.db"
            if not path.is_file():
                raise BadParameterError(f"no dcps store file at {path} (option data_dir)")
            self._db = sqlite3.connect(
                f"file:{path.resolve()}?mode=ro", uri=True, check_same_thread=False
            )
            try:
                meta = dict(self._db.execute("SELECT key, value FROM dcps_format").fetchall())
            except sqlite3.DatabaseError as exc:
                self.close()
                raise BadParameterError(f"{path} is not a dcps store: {exc}") from exc
            if meta.get("magic") != FORMAT_MAGIC:
                self.close()
                raise BadParameterError(f"{path} is not a dcps store")
            if meta.get("version") != str(FORMAT_VERSION):
                self.close()
                raise UnsupportedError(
                    f"{path} has store format version {meta.get('version')}; this dcps reads "
                    f"version {FORMAT_VERSION} files directly (a version-1 file is migrated "
                    "when a dcps store opens it; or read over DDS without data_dir)"
                )
        else:
            from dcps.channels._client import StoreClient
            from dcps.wire._transport import Endpoint

            self._endpoint = Endpoint(domain_id, namespace)
            self._client = StoreClient(self._endpoint, request_timeout=timeout)
            try:
                self._client.connect(timeout)
            except BaseException:
                self.close()
                raise

    def close(self) -> None:
        """Release the connection (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._endpoint is not None:
            self._endpoint.close()
            self._endpoint = None

    # -- channel states ---------------------------------------------------------

    def _topic_id(self, topic: str) -> tuple[int, int]:
        assert self._db is not None
        row = self._db.execute(
            "SELECT id, channel_count FROM topics WHERE name = ?", (topic,)
        ).fetchone()
        if row is None:
            raise BadParameterError(f"no channelled topic {topic!r} in the store")
        return int(row[0]), int(row[1])

    def bounds(self, topic: str) -> dict[int, tuple[int, int]]:
        """``{channel: (head, next_offset)}`` of every channel of ``topic``.

        An unknown topic raises ``BadParameterError``.
        """
        if self._db is not None:
            tid, _ = self._topic_id(topic)
            rows = self._db.execute(
                "SELECT channel, head, next_offset FROM channels WHERE topic_id = ?"
                " ORDER BY channel",
                (tid,),
            ).fetchall()
            return {int(c): (int(h), int(n)) for c, h, n in rows}
        assert self._client is not None
        states = self._client.state(topic)
        return {
            c: (h, t + 1)
            for c, h, t in zip(states.channels, states.heads, states.tails, strict=True)
        }

    def first_at(self, topic: str, channel: int, timestamp_ns: int, end: int) -> int:
        """Offset of the first element of ``channel`` accepted at or after ``timestamp_ns``."""
        if self._db is not None:
            tid, _ = self._topic_id(topic)
            row = self._db.execute(
                "SELECT first_offset FROM batches WHERE topic_id = ? AND channel = ? AND ts >= ?"
                " ORDER BY ts, first_offset LIMIT 1",
                (tid, channel, timestamp_ns),
            ).fetchone()
            head = self._head(tid, channel)
            return end if row is None else max(int(row[0]), head)
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

    def _head(self, tid: int, channel: int) -> int:
        assert self._db is not None
        row = self._db.execute(
            "SELECT head FROM channels WHERE topic_id = ? AND channel = ?", (tid, channel)
        ).fetchone()
        return 0 if row is None else int(row[0])

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
            if self._db is not None:
                run = self._fetch_file(topic, channel, start, end)
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
        if self._client is None:
            for pos in range(start, end, max(1, step)):
                yield self.fetch(topic, channel, pos, min(end, pos + max(1, step)))
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

    def _fetch_file(self, topic: str, channel: int, start: int, end: int) -> ElementRun:
        assert self._db is not None
        tid, _ = self._topic_id(topic)
        db = self._db
        with self._lock:
            db.execute("BEGIN")  # one snapshot for the head and the batches
            try:
                return self._read_batches(tid, channel, start, end)
            finally:
                db.execute("COMMIT")

    def _read_batches(self, tid: int, channel: int, start: int, end: int) -> ElementRun:
        assert self._db is not None
        begin = max(start, self._head(tid, channel))
        if begin >= end:
            return ElementRun(begin)
        cur = self._db.execute(
            "SELECT first_offset, count, ts, sizes, data FROM batches"
            " WHERE topic_id = ?1 AND channel = ?2 AND first_offset < ?4"
            " AND first_offset >= coalesce((SELECT max(first_offset) FROM batches"
            " WHERE topic_id = ?1 AND channel = ?2 AND first_offset <= ?3), ?3)"
            " ORDER BY first_offset",
            (tid, channel, begin, end),
        )
        try:
            return ElementRun.from_rows(cur, begin, end - begin)
        finally:
            cur.close()

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
        assert self._client is not None
        return self._client.fetch_async(topic, channel, offset, count)

    def _result(self, fut: Future[Fetched]) -> Fetched:
        assert self._client is not None
        try:
            return fut.result(timeout=self._client.request_timeout + 1)
        except TimeoutError as exc:
            if isinstance(exc, DcpsTimeoutError):
                raise
            raise DcpsTimeoutError("the store did not answer FETCH in time") from exc

    # -- publishing (the sink) ------------------------------------------------

    def channel_count(self, topic: str) -> int:
        """Number of channels of ``topic``."""
        return len(self.bounds(topic))

    def ensure_topic(self, topic: str, channels: int, retain: bool | None, type_name: str) -> int:
        """Create ``topic`` in the store if new (``channels`` 0: the store's default); its count."""
        if self._client is None:
            raise BadParameterError("publishing needs a DDS store connection (no data_dir)")
        return self._client.ensure_topic(topic, channels, retain, type_name).channel_count

    def publish_keyed(self, topic: str, channel: int, payloads: Sequence[bytes], key: str) -> Any:
        """Send one idempotent publish batch; returns the reply future."""
        if self._client is None:
            raise BadParameterError("publishing needs a DDS store connection (no data_dir)")
        sizes = [len(p) for p in payloads]
        return self._client.publish_async(topic, channel, sizes, b"".join(payloads), key)


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


def channel_of_key(key_cdr: bytes, channel_count: int) -> int:
    """The channel ``ChannelPublisher`` with ``OrderBy.key()`` picks for a key's CDR."""
    return zlib.crc32(key_cdr) % channel_count


def wait_for(probe: Any, timeout: float, what: str) -> Any:
    """Poll ``probe`` until truthy or raise ``DcpsTimeoutError`` naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise DcpsTimeoutError(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.01)
