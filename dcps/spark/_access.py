"""Reading a channelled topic's stored elements: over DDS from the store, or from its file.

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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from dcps.channels._log import FORMAT_MAGIC
from dcps.channels._protocol import Endpoint, Op, StoreClient, pack, unpack
from idl._errors import BadParameterError, DcpsTimeoutError, PreconditionNotMetError

__all__ = ["Chunk", "StoreAccess", "connect_store"]

FETCH_CHUNK = 20000


@attrs.frozen
class Chunk:
    """Elements of one channel: offsets, store timestamps (ns) and CDR payloads."""

    channel: int
    offsets: list[int]
    stamps: list[int]
    payloads: list[bytes]


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
                magic = self._db.execute(
                    "SELECT value FROM dcps_format WHERE key = 'magic'"
                ).fetchone()
            except sqlite3.DatabaseError as exc:
                raise BadParameterError(f"{path} is not a dcps store: {exc}") from exc
            if not magic or magic[0] != FORMAT_MAGIC:
                raise BadParameterError(f"{path} is not a dcps store")
        else:
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
        reply = self._client.call(Op.STATE, topic=topic)
        return {
            int(c): (int(h), int(t) + 1)
            for c, h, t in zip(reply.channels, reply.heads, reply.tails, strict=True)
        }

    def first_at(self, topic: str, channel: int, timestamp_ns: int, end: int) -> int:
        """Offset of the first element of ``channel`` accepted at or after ``timestamp_ns``."""
        if self._db is not None:
            tid, _ = self._topic_id(topic)
            row = self._db.execute(
                'SELECT min("offset") FROM elements WHERE topic_id = ? AND channel = ? AND ts >= ?',
                (tid, channel, timestamp_ns),
            ).fetchone()
            return end if row[0] is None else int(row[0])
        head = self.bounds(topic)[channel][0]
        lo, hi = head, end  # binary search over fetched timestamps (ts never decreases)
        while lo < hi:
            mid = (lo + hi) // 2
            chunk = self.fetch(topic, channel, mid, mid + 1, strict=False)
            if not chunk.offsets:
                return end
            if chunk.stamps[0] >= timestamp_ns:
                hi = mid
            else:
                lo = mid + 1
        return lo

    # -- elements -----------------------------------------------------------

    def fetch(
        self, topic: str, channel: int, start: int, end: int, *, strict: bool = True
    ) -> Chunk:
        """Elements ``start .. end - 1`` of ``channel``.

        ``strict``: raise ``PreconditionNotMetError`` if any of them is no longer
        stored (retention removed it), so a reader never silently skips data.
        """
        offsets: list[int] = []
        stamps: list[int] = []
        payloads: list[bytes] = []
        if end > start:
            if self._db is not None:
                tid, _ = self._topic_id(topic)
                rows = self._db.execute(
                    "SELECT ts, data FROM elements WHERE topic_id = ? AND channel = ?"
                    ' AND "offset" >= ? AND "offset" < ? ORDER BY "offset"',
                    (tid, channel, start, end),
                ).fetchall()
                if len(rows) == end - start:  # offsets are dense: no need to fetch them
                    offsets = list(range(start, end))
                    stamps, payloads = (list(x) for x in zip(*rows, strict=True))
                elif rows:  # the head moved past start: the stored offsets are the last ones
                    offsets = list(range(end - len(rows), end))
                    stamps, payloads = (list(x) for x in zip(*rows, strict=True))
            else:
                assert self._client is not None
                pos = start
                while pos < end:
                    reply = self._client.call(
                        Op.FETCH,
                        topic=topic,
                        channels=[channel],
                        offsets=[pos],
                        number=min(FETCH_CHUNK, end - pos),
                    )
                    got = list(reply.offsets)
                    if not got:
                        break
                    keep = sum(1 for o in got if o < end)
                    offsets += got[:keep]
                    stamps += list(reply.stamps)[:keep]
                    payloads += unpack(reply)[:keep]
                    pos = got[-1] + 1
        if strict and len(offsets) != end - start:
            raise PreconditionNotMetError(
                f"topic {topic!r} channel {channel}: elements {start}..{end - 1} are no longer "
                f"all stored (got {len(offsets)}); the store's retention removed them"
            )
        return Chunk(channel, offsets, stamps, payloads)

    # -- publishing (the sink) ------------------------------------------------

    def channel_count(self, topic: str) -> int:
        """Number of channels of ``topic``."""
        return len(self.bounds(topic))

    def ensure_topic(self, topic: str, channels: int, retain: bool | None, type_name: str) -> int:
        """Create ``topic`` in the store if new (``channels`` 0: the store's default); its count."""
        if self._client is None:
            raise BadParameterError("publishing needs a DDS store connection (no data_dir)")
        reply = self._client.call(
            Op.ENSURE_TOPIC,
            topic=topic,
            number=channels,
            flag=-1 if retain is None else int(retain),
            text=type_name,
        )
        return int(reply.number)

    def publish_keyed(self, topic: str, channel: int, payloads: Sequence[bytes], key: str) -> Any:
        """Send one idempotent publish batch; returns the reply future."""
        if self._client is None:
            raise BadParameterError("publishing needs a DDS store connection (no data_dir)")
        return self._client.call_async(
            Op.PUBLISH, topic=topic, channels=[channel], text=key, **pack(list(payloads))
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
