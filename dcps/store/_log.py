"""The store's on-disk log: SQLite in WAL mode, one file per store.

Every (topic, channel) holds elements at dense offsets from 0, each with its
own accept timestamp from the store's clock (nanoseconds since the Unix epoch,
whole microseconds, strictly increasing within a channel: a batch's first
element gets the clock rounded up, at least one microsecond after the
channel's previous element, and each next element of the batch one
microsecond more). Each accepted batch is stored as one row; the body of a
large one (``INLINE_MAX`` bytes or more) goes to a segment file
(``_log_segments``) and its row keeps where. Each channel keeps its head
(first offset still available) explicitly, since retention can release part
of a batch. Subscriber groups keep one committed offset per channel. The file
layout is documented in ``docs/store-format.md``.

The log is used by one thread at a time (the store's); it does no locking of
its own beyond SQLite's. Other threads read through a :class:`LogReader` each
(:meth:`ChannelLog.reader`): its own read-only connection, every read in one
SQLite snapshot, so it never sees half of a transaction.

The log's parts live beside it: the file's format, checks and migrations in
``_log_format``, reading in ``_log_reader``, the values it returns in
``_log_records``, the segment files in ``_log_segments`` and the disk space
reserve in ``_log_reserve``. Every SQLite
failure surfaces as a typed :class:`~dcps.DcpsError` naming the path (a full
disk as :class:`~dcps.OutOfResourcesError`).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import numpy as np

from dcps.wire._batches import ELEMENT_STEP_NS, ElementRun, PackedPayloads
from dcps.wire._codes import CommitStatus
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    OutOfResourcesError,
    PreconditionNotMetError,
)

from ._log_checkpoint import Checkpointer
from ._log_format import (
    COMMITS_BY_CHANNEL,
    FORMAT_MAGIC,
    FORMAT_VERSION,
    STORE_FILE,
    check_writable,
    create_schema,
    first_stamp,
    inspect_file,
    migrate,
    os_error,
    prepare_dir,
    sql_error,
)
from ._log_reader import LogReader, find_timestamp, read_run
from ._log_records import ChannelState, Element, TopicInfo
from ._log_reserve import DEFAULT_RESERVE_BYTES, SpaceReserve
from ._log_segments import INLINE_MAX, SEGMENT_BYTES, SegmentFiles, crc_of

__all__ = [
    "DEFAULT_PARTITION_COUNT",
    "DEFAULT_RESERVE_BYTES",
    "FORMAT_MAGIC",
    "FORMAT_VERSION",
    "INLINE_MAX",
    "STORE_FILE",
    "ChannelLog",
    "ChannelState",
    "Element",
    "LogReader",
    "SyncMode",
    "TopicInfo",
    "default_channel_count",
]

_T = TypeVar("_T")
_log = logging.getLogger("dcps.store")

DEFAULT_PARTITION_COUNT = 257
#: A topic without groups releases what was pushed at most this often (seconds) ...
_UNCONSUMED_TRIM_INTERVAL = 0.05
#: ... or once this many bytes were appended to it since its last release.
_UNCONSUMED_TRIM_BYTES = 16 << 20
#: A released segment file is deleted at the first commit this many seconds later.
_SEGMENT_GRACE = 2.0


def default_channel_count(partition_count: int = DEFAULT_PARTITION_COUNT) -> int:
    """Return the next prime above the square root of ``partition_count`` (17 for 257)."""
    if partition_count < 1:
        raise BadParameterError(f"partition_count must be >= 1, got {partition_count}")
    n = math.isqrt(partition_count) + 1
    while any(n % d == 0 for d in range(2, math.isqrt(n) + 1)):
        n += 1
    return n


class SyncMode(enum.Enum):
    """How hard the log pushes each transaction to disk (SQLite ``synchronous``)."""

    FULL = "FULL"
    """fsync at every commit: a confirmed batch survives a power loss."""
    NORMAL = "NORMAL"
    """fsync at WAL checkpoints only: survives a process crash, may lose the last
    transactions on power loss; several times faster."""


class ChannelLog:
    """The persistent log of every channelled topic of one store.

    ``path`` is the SQLite file (created if missing); :meth:`in_dir` opens
    the file of a store's data directory. Opening a file that is not a dcps
    store, is damaged (``verify``: ``PRAGMA quick_check``, skip it for huge
    files), has a newer format, or cannot be written raises one typed
    :class:`~dcps.DcpsError` naming the path and leaves the file untouched.
    An older format is migrated.

    ``reserve_bytes`` of disk are kept in a reserve file (see
    ``_log_reserve``) so that commits, seeks, joins and group changes keep
    working on a full disk, where appends raise ``OutOfResourcesError``.

    Batch bodies of ``inline_max`` bytes or more are written to segment
    files (``<path>-segments/``, rolled at ``segment_bytes``) instead of
    their SQLite row.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sync: SyncMode = SyncMode.FULL,
        clock: Callable[[], int] = time.time_ns,
        verify: bool = True,
        reserve_bytes: int = DEFAULT_RESERVE_BYTES,
        inline_max: int = INLINE_MAX,
        segment_bytes: int = SEGMENT_BYTES,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._inline_max = inline_max
        self._full_sync = SyncMode(sync) is SyncMode.FULL
        self._segments = SegmentFiles(self.path, roll_bytes=segment_bytes, durable=self._full_sync)
        self._released: list[tuple[int, int]] = []  # segments to delete after the commit
        self._doomed: list[tuple[float, int, int]] = []  # (released at, tid, seq), committed
        self._grouped: dict[int, int] = {}  # topic id -> number of groups
        self._unconsumed: dict[int, tuple[float, int]] = {}  # tid -> (last trim, bytes since)
        self._db: sqlite3.Connection | None = None
        self._topics: dict[str, tuple[int, TopicInfo]] = {}
        self._channels: dict[tuple[int, int], list[int]] = {}  # [head, next, last_ts]
        self._has_publish_keys = False
        #: Called with the seconds each COMMIT took (the store's metrics), or None.
        self.commit_observer: Callable[[float], None] | None = None
        parent = self.path.parent
        if not parent.is_dir():
            raise BadParameterError(
                f"cannot create the store file {self.path}: {parent} is not a directory"
            )
        check_writable(self.path)
        self._reserve = SpaceReserve(self.path, reserve_bytes)
        self._reserve.ensure()
        try:
            self._db = self._open(SyncMode(sync), verify)
        except OutOfResourcesError:
            if not self._reserve.release():
                raise
            self._db = self._open(SyncMode(sync), verify=False)  # checked by the first try
        # checkpoints run on a thread of their own, not in the COMMIT (_log_checkpoint.py)
        self._checkpoints = Checkpointer(self.path, SyncMode(sync).value)
        try:
            self._load()
        except sqlite3.Error as exc:
            self.close()
            raise sql_error(exc, self.path, "loading the store file") from exc
        except OSError as exc:
            self.close()
            raise os_error(exc, self.path, "tidying the store's segment files") from exc

    @classmethod
    def in_dir(cls, data_dir: str | os.PathLike[str], **options: object) -> ChannelLog:
        """Open (or create) the log of the store data directory ``data_dir``.

        Creates the directory if needed; a path under a regular file or in a
        read-only place raises one typed error naming the path. ``options``
        are the constructor's.
        """
        return cls(prepare_dir(data_dir), **options)  # type: ignore[arg-type]

    # -- opening -----------------------------------------------------------

    def _open(self, sync: SyncMode, verify: bool) -> sqlite3.Connection:
        """Check, open and (create or migrate) the file; typed errors name the path."""
        doing = "opening the store file"
        try:
            version = 0
            if self.path.exists() and self.path.stat().st_size > 0:
                ro = sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True)
                try:
                    version = inspect_file(ro, self.path, verify=verify)
                finally:
                    ro.close()
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(f"PRAGMA synchronous={sync.value}")
                db.execute("PRAGMA wal_autocheckpoint=0")  # the Checkpointer's job
                if version == 0:
                    if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                        doing = "creating the store file"
                        create_schema(db)
                elif version < FORMAT_VERSION:
                    doing = f"migrating the store file from format version {version}"
                    migrate(db, version)
                if version:  # a no-op once there; an older file gets it now
                    try:
                        db.execute(COMMITS_BY_CHANNEL)
                    except sqlite3.OperationalError as exc:  # e.g. a full disk: start anyway
                        _log.warning(
                            "dcps store: %s: could not index the commits (%s); retention "
                            "of topics with many groups or durables will be slow",
                            self.path,
                            exc,
                        )
            except BaseException:
                db.close()
                raise
        except sqlite3.Error as exc:
            raise sql_error(exc, self.path, doing) from exc
        except OSError as exc:
            raise os_error(exc, self.path, doing) from exc
        return db

    def _load(self) -> None:
        db = self._conn
        for tid, name, count, retain, type_name, identity in db.execute(
            "SELECT id, name, channel_count, retain_consumed, type_name, type_identity FROM topics"
        ):
            self._topics[name] = (tid, TopicInfo(name, count, bool(retain), type_name, identity))
        self._reload_channels()
        self._has_publish_keys = (
            db.execute("SELECT 1 FROM sqlite_master WHERE name = 'publish_keys'").fetchone()
            is not None
        )
        for tid, n in db.execute("SELECT topic_id, count(*) FROM groups GROUP BY topic_id"):
            self._grouped[int(tid)] = int(n)
        # segment files: drop the bodies of transactions that never committed (the
        # bodies of staged chunks, ``_staging``, are kept for their commit)
        ends: dict[tuple[int, int], int] = {}
        for tid, seq, pos, sizes in db.execute(
            "SELECT topic_id, segment, max(pos), sizes FROM (SELECT topic_id, segment, pos,"
            " sizes FROM batches WHERE segment IS NOT NULL UNION ALL SELECT topic_id,"
            " segment, pos, sizes FROM staged WHERE segment IS NOT NULL)"
            " GROUP BY topic_id, segment"
        ):
            ends[(int(tid), int(seq))] = int(pos) + _body_size(sizes)
        self._segments.tidy(ends)

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise AlreadyClosedError(f"the channel log {self.path} is closed")
        return self._db

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._db is not None:
            self._checkpoints.close()  # first: the last connection closed removes the WAL
            self._db.close()
            self._db = None
        self._segments.close()

    def __enter__(self) -> ChannelLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topics ------------------------------------------------------------

    def ensure_topic(
        self,
        name: str,
        channel_count: int | None = None,
        retain_consumed: bool = False,
        type_name: str = "",
        type_identity: str = "",
    ) -> TopicInfo:
        """Create the topic if it is new; return its (existing or new) configuration.

        ``type_identity`` is the caller's opaque identity of the topic's type
        (its name and a hash of its structure). A new topic records it; an
        existing topic without one (created before identities were kept)
        records the first one named. An existing topic recorded with another
        identity raises ``PreconditionNotMetError`` naming the topic and both
        types, and nothing is stored. An empty identity is not checked.
        """
        if not name:
            raise BadParameterError("a channelled topic needs a non-empty name")
        if name in self._topics:
            return self._check_type(name, type_name, type_identity)
        count = channel_count if channel_count else default_channel_count()
        if count < 1:
            raise BadParameterError(f"channel_count must be >= 1, got {count}")
        db = self._conn

        def create() -> int:
            cur = db.execute(
                "INSERT INTO topics (name, channel_count, retain_consumed, type_name, created_ns,"
                " type_identity) VALUES (?, ?, ?, ?, ?, ?)",
                (name, count, int(retain_consumed), type_name, self._clock(), type_identity),
            )
            tid = int(cur.lastrowid or 0)
            db.executemany(
                "INSERT INTO channels VALUES (?, ?, 0, 0, 0)", [(tid, c) for c in range(count)]
            )
            return tid

        tid = self._write(f"creating topic {name!r}", create)
        info = TopicInfo(name, count, bool(retain_consumed), type_name, type_identity)
        self._topics[name] = (tid, info)
        for c in range(count):
            self._channels[(tid, c)] = [0, 0, 0]
        return info

    def _check_type(self, name: str, type_name: str, type_identity: str) -> TopicInfo:
        tid, info = self._topics[name]
        if not type_identity or type_identity == info.type_identity:
            return info
        known = info.type_identity or info.type_name
        if info.type_identity or (info.type_name and type_name and type_name != info.type_name):
            raise PreconditionNotMetError(
                f"topic {name!r} holds elements of type {known!r} in the store ({self.path}), "
                f"not {type_identity!r}: a topic keeps the type it was created with"
            )
        new_name = info.type_name or type_name

        def record() -> None:
            self._conn.execute(
                "UPDATE topics SET type_identity = ?, type_name = ? WHERE id = ?",
                (type_identity, new_name, tid),
            )

        self._write(f"recording the type of topic {name!r}", record)
        info = TopicInfo(name, info.channel_count, info.retain_consumed, new_name, type_identity)
        self._topics[name] = (tid, info)
        return info

    def topic(self, name: str) -> TopicInfo:
        """Return a topic's configuration; unknown topics raise ``BadParameterError``."""
        return self._topic(name)[1]

    def topics(self) -> list[TopicInfo]:
        """Every topic of the store, by name."""
        return [info for _, info in sorted(self._topics.values(), key=lambda t: t[1].name)]

    def _topic(self, name: str) -> tuple[int, TopicInfo]:
        try:
            return self._topics[name]
        except KeyError:
            raise BadParameterError(f"no channelled topic {name!r} in the store") from None

    def _state(self, topic: str, channel: int) -> tuple[int, list[int]]:
        tid, info = self._topic(topic)
        if not isinstance(channel, int) or not 0 <= channel < info.channel_count:
            raise BadParameterError(
                f"topic {topic!r} has channels 0..{info.channel_count - 1}, not {channel!r}"
            )
        return tid, self._channels[(tid, channel)]

    # -- transactions ------------------------------------------------------

    def _write(self, doing: str, body: Callable[[], _T], *, small: bool = True) -> _T:
        """Run ``body`` in one ``BEGIN IMMEDIATE`` transaction; commit, or roll back and raise.

        A SQLite failure raises its typed error naming the path and ``doing``
        (the cache of channel states is reloaded). A ``small`` write that
        fails on a full disk releases the space reserve and is tried once
        more; any other write (an append) is refused at once while the
        reserve is released and cannot be made again.
        """
        if not small and not self._reserve.ensure():
            raise OutOfResourcesError(
                f"{self.path}: the disk is full ({doing} refused: the store keeps its last "
                "free space for commits and joins); publishing resumes once space is freed"
            )
        with self._checkpoints.lock:  # a WAL restart waits for the transaction (_log_checkpoint)
            return self._write_locked(doing, body, small)

    def _write_locked(self, doing: str, body: Callable[[], _T], small: bool) -> _T:
        db = self._conn
        for attempt in (1, 2):
            try:
                db.execute("BEGIN IMMEDIATE")
                result = body()
                started = time.perf_counter()
                db.execute("COMMIT")
                self._checkpoints.committed()
                if self.commit_observer is not None:
                    self.commit_observer(time.perf_counter() - started)
            except BaseException as exc:
                self._released.clear()
                self._segments.forget_unsynced()
                self._roll_back()
                if not isinstance(exc, sqlite3.Error):
                    raise
                error = sql_error(exc, self.path, doing)
                if (
                    small
                    and attempt == 1
                    and isinstance(error, OutOfResourcesError)
                    and self._reserve.release()
                ):
                    continue
                raise error from exc
            if self._released or self._doomed:
                self._delete_released()
            if not self._reserve.held:
                self._checkpoint()
            return result
        raise AssertionError("unreachable")  # pragma: no cover

    def write(self, doing: str, body: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``body(connection)`` in one small transaction of the log; return its result.

        For store modules that keep tables of their own in the file (durables):
        a SQLite failure raises its typed error naming the path and ``doing``.
        """
        db = self._conn
        return self._write(doing, lambda: body(db))

    def read(self, doing: str) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        """The connection for a read of the store's own tables (typed errors name ``doing``)."""
        return self._reading(doing)

    def _delete_released(self) -> None:
        """Delete segment files no committed row has referred to for ``_SEGMENT_GRACE`` s.

        The grace lets a reader whose snapshot began before the release (a
        fetch thread, Spark) still read them; a file left behind by a crash or
        a close is deleted by the next open.
        """
        now = time.monotonic()
        self._doomed += [(now, tid, seq) for tid, seq in self._released]
        self._released.clear()
        due = [d for d in self._doomed if now - d[0] >= _SEGMENT_GRACE]
        if not due:
            return
        self._doomed = [d for d in self._doomed if now - d[0] < _SEGMENT_GRACE]
        by_topic: dict[int, list[int]] = {}
        for _, tid, seq in due:
            by_topic.setdefault(tid, []).append(seq)
        for tid, seqs in by_topic.items():
            try:
                self._segments.delete(tid, seqs)
            except OSError as exc:  # harmless: the next open deletes it
                _log.warning("dcps store: could not delete a released segment: %s", exc)

    def _roll_back(self) -> None:
        db = self._conn
        try:
            if db.in_transaction:
                db.execute("ROLLBACK")
            self._reload_channels()
        except sqlite3.Error:
            pass  # the file is unusable: the error being raised says why

    def _checkpoint(self) -> None:
        """With no reserve, copy the WAL into the file so its space is reused, not grown."""
        with contextlib.suppress(sqlite3.Error):  # best effort: the next write tells
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)")

    def _reload_channels(self) -> None:
        """Read every channel's state again (in place: callers may hold the lists)."""
        for tid, channel, head, nxt, last_ts in self._conn.execute(
            "SELECT topic_id, channel, head, next_offset, last_ts FROM channels"
        ):
            state = self._channels.setdefault((tid, channel), [0, 0, 0])
            state[:] = [head, nxt, last_ts]

    # -- appending and reading ---------------------------------------------

    def append(self, topic: str, channel: int, payloads: Sequence[bytes]) -> list[tuple[int, int]]:
        """Persist one batch in one transaction; return ``(offset, timestamp_ns)`` per element."""
        return self.append_many([(topic, channel, payloads)])[0]

    def append_many(
        self, batches: Iterable[tuple[str, int, Sequence[bytes]]]
    ) -> list[list[tuple[int, int]]]:
        """Persist several batches in one transaction (all or none).

        Returns, per batch, the ``(offset, timestamp_ns)`` of each element.
        """
        placed = self.append_packed((t, c, PackedPayloads.of(p)) for t, c, p in batches)
        return [
            [(first + i, ts + i * ELEMENT_STEP_NS) for i in range(count)]
            for first, count, ts in placed
        ]

    def append_packed(
        self, batches: Iterable[tuple[str, int, PackedPayloads]]
    ) -> list[tuple[int, int, int]]:
        """Persist several packed batches in one transaction (all or none).

        Each batch becomes one stored row. Returns ``(first_offset, count,
        timestamp_ns)`` per batch, the timestamp being the first element's
        (element ``i`` has it plus ``i * ELEMENT_STEP_NS``; an empty batch
        stores nothing).
        """
        db = self._conn
        results: list[tuple[int, int, int]] = []
        rows: list[tuple[int, int, int, int, int, bytes, PackedPayloads]] = []
        touched: dict[tuple[int, int], list[int]] = {}
        plan = [(self._state(t, c), c, p, p.check(), t) for t, c, p in batches]
        now = self._clock()
        for (tid, state), channel, packed, sizes, _ in plan:
            st = touched.setdefault((tid, channel), list(state))
            ts = first_stamp(now, st[2])
            count = len(sizes) // 4
            if count:
                rows.append((tid, channel, st[1], count, ts, sizes, packed))
                st[2] = ts + (count - 1) * ELEMENT_STEP_NS
            results.append((st[1], count, ts))
            st[1] += count

        def insert() -> None:
            db.executemany(
                "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(*row[:6], *self._body(row[0], row[6])) for row in rows],
            )
            if self._full_sync:
                self._sync_segments()
            db.executemany(
                "UPDATE channels SET next_offset = ?, last_ts = ?"
                " WHERE topic_id = ? AND channel = ?",
                [(st[1], st[2], tid, ch) for (tid, ch), st in touched.items()],
            )

        topics = ", ".join(sorted({repr(p[4]) for p in plan}))
        self._write(f"appending to topic {topics}", insert, small=False)
        for key, st in touched.items():
            self._channels[key][:] = st
        for tid, *_, packed in rows:
            self._note_unconsumed(tid, len(packed.blob))
        return results

    def _body(self, tid: int, packed: PackedPayloads) -> tuple[bytes, int | None, int, int]:
        """``(data, segment, pos, crc)`` of a new row: large bodies go to a segment file."""
        return self.store_body(tid, packed.blob, "writing a batch to a segment file")

    def store_body(
        self, tid: int, blob: bytes | memoryview, doing: str
    ) -> tuple[bytes, int | None, int, int]:
        """``(data, segment, pos, crc)`` of a row holding ``blob`` for topic ``tid``: a body of
        ``inline_max`` bytes or more is appended to the topic's segment file (not synced
        here), a smaller one stays inline; ``doing`` names a failed write."""
        if len(blob) < self._inline_max:
            return bytes(blob), None, 0, 0
        try:
            seq, pos = self._segments.append(tid, blob)
        except OSError as exc:
            raise os_error(exc, self._segments.root, doing) from exc
        return b"", seq, pos, crc_of(blob)

    def _sync_segments(self) -> None:
        try:
            self._segments.sync()
        except OSError as exc:
            raise os_error(exc, self._segments.root, "syncing segment files") from exc

    def append_keyed(
        self, topic: str, channel: int, payloads: Sequence[bytes] | PackedPayloads, key: str
    ) -> tuple[list[tuple[int, int]], bool]:
        """Append one batch unless a batch with idempotence ``key`` was appended before.

        Returns ``(placements, duplicate)``: for a new key the batch is appended
        and its key remembered in the same transaction (table ``publish_keys``);
        for a known key nothing is written and the first append's placements
        are returned with ``duplicate`` True. (Used by the Spark sink.)
        """
        tid, state = self._state(topic, channel)
        packed = payloads if isinstance(payloads, PackedPayloads) else PackedPayloads.of(payloads)
        sizes = packed.check()
        db = self._conn
        if self._has_publish_keys:
            try:
                row = db.execute(
                    "SELECT channel, first, count, ts FROM publish_keys"
                    " WHERE topic_id = ? AND key = ?",
                    (tid, key),
                ).fetchone()
            except sqlite3.Error as exc:
                raise sql_error(exc, self.path, f"looking up publish key {key!r}") from exc
            if row is not None:
                return [(row[1] + i, row[3] + i * ELEMENT_STEP_NS) for i in range(row[2])], True
        st = list(state)
        ts = first_stamp(self._clock(), st[2])
        first = st[1]
        count = len(sizes) // 4
        st[1] += count
        if count:
            st[2] = ts + (count - 1) * ELEMENT_STEP_NS

        def insert() -> None:
            db.execute(
                "CREATE TABLE IF NOT EXISTS publish_keys (topic_id INTEGER NOT NULL,"
                " key TEXT NOT NULL, channel INTEGER NOT NULL, first INTEGER NOT NULL,"
                " count INTEGER NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (topic_id, key))"
                " WITHOUT ROWID"
            )
            if count:
                db.execute(
                    "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (tid, channel, first, count, ts, sizes, *self._body(tid, packed)),
                )
                if self._full_sync:
                    self._sync_segments()
            db.execute(
                "UPDATE channels SET next_offset = ?, last_ts = ?"
                " WHERE topic_id = ? AND channel = ?",
                (st[1], st[2], tid, channel),
            )
            db.execute(
                "INSERT INTO publish_keys VALUES (?, ?, ?, ?, ?, ?)",
                (tid, key, channel, first, count, ts),
            )

        self._write(f"appending to topic {topic!r} channel {channel}", insert, small=False)
        self._has_publish_keys = True
        state[:] = st
        self._note_unconsumed(tid, len(packed.blob))
        return [(first + i, ts + i * ELEMENT_STEP_NS) for i in range(count)], False

    def fetch(self, topic: str, channel: int, offset: int, max_count: int) -> list[Element]:
        """Up to ``max_count`` elements from ``offset`` on (or from the head if later)."""
        run = self.fetch_run(topic, channel, offset, max_count)
        stamps = run.timestamps().tolist()
        return [Element(run.first + i, stamps[i], data) for i, data in enumerate(run.payloads())]

    def fetch_run(self, topic: str, channel: int, offset: int, max_count: int) -> ElementRun:
        """Up to ``max_count`` elements from ``offset`` on (or from the head if later), in bulk.

        The result keeps the stored batches' form (sizes and data blobs, the
        first element's timestamp per batch); no Python object is built per
        element.
        """
        tid, st = self._state(topic, channel)
        if max_count < 1:
            raise BadParameterError(f"max_count must be >= 1, got {max_count}")
        start = max(offset, st[0])
        with self._reading(f"reading topic {topic!r} channel {channel} at offset {start}") as db:
            return read_run(
                db, self.path, topic, tid, channel, start, st[1], max_count, self._segments
            )

    def reader(self) -> LogReader:
        """A read-only connection to this log for one other thread (close it when done)."""
        if self._db is None:
            raise AlreadyClosedError(f"the channel log {self.path} is closed")
        return LogReader(self.path)

    @contextlib.contextmanager
    def _reading(self, doing: str) -> Iterator[sqlite3.Connection]:
        """The connection for a read; a SQLite failure raises its typed error (logged at ERROR)."""
        db = self._conn
        try:
            yield db
        except sqlite3.Error as exc:
            error = sql_error(exc, self.path, doing)
            _log.error("dcps store: %s", error)
            raise error from exc

    def channel_state(self, topic: str, channel: int) -> ChannelState:
        """Head and tail of one channel."""
        _, st = self._state(topic, channel)
        return ChannelState(st[0], st[1] - 1)

    def channel_states(self, topic: str) -> list[ChannelState]:
        """Head and tail of every channel of a topic, by channel."""
        tid, info = self._topic(topic)
        return [
            ChannelState(self._channels[(tid, c)][0], self._channels[(tid, c)][1] - 1)
            for c in range(info.channel_count)
        ]

    def find_timestamp(self, topic: str, channel: int, timestamp_ns: int) -> int:
        """Offset of the first available element accepted at or after ``timestamp_ns``.

        Returns ``tail + 1`` when every element is older.
        """
        tid, st = self._state(topic, channel)
        with self._reading(f"searching topic {topic!r} channel {channel} by time") as db:
            return find_timestamp(db, tid, channel, st[0], st[1], timestamp_ns)

    # -- groups and commits --------------------------------------------------

    def groups(self, topic: str) -> list[str]:
        """Names of the topic's subscriber groups, sorted."""
        tid, _ = self._topic(topic)
        with self._reading(f"listing the groups of topic {topic!r}") as db:
            return [
                r[0]
                for r in db.execute(
                    "SELECT name FROM groups WHERE topic_id = ? ORDER BY name", (tid,)
                )
            ]

    def discards(self, topic: str) -> bool:
        """True when ``topic`` keeps nothing once it is pushed live: it has no group (nor
        durable, whose floors are groups) and does not retain consumed elements."""
        tid, info = self._topic(topic)
        return not (info.retain_consumed or self._grouped.get(tid))

    def has_group(self, topic: str, group: str) -> bool:
        """True when ``group`` exists on ``topic``."""
        tid, _ = self._topic(topic)
        with self._reading(f"looking up group {group!r} of topic {topic!r}") as db:
            row = db.execute(
                "SELECT 1 FROM groups WHERE topic_id = ? AND name = ?", (tid, group)
            ).fetchone()
        return row is not None

    def create_group(self, topic: str, group: str) -> bool:
        """Create a group starting at each channel's head; False if it already existed."""
        if not group:
            raise BadParameterError("a subscriber group needs a non-empty name")
        if self.has_group(topic, group):
            return False
        tid, info = self._topic(topic)
        db = self._conn

        def create() -> None:
            db.execute("INSERT INTO groups VALUES (?, ?, ?)", (tid, group, self._clock()))
            db.executemany(
                "INSERT INTO commits VALUES (?, ?, ?, ?, 0)",
                [
                    (tid, group, c, self._channels[(tid, c)][0] - 1)
                    for c in range(info.channel_count)
                ],
            )

        self._write(f"creating group {group!r} of topic {topic!r}", create)
        self._grouped[tid] = self._grouped.get(tid, 0) + 1
        return True

    def destroy_group(self, topic: str, group: str) -> bool:
        """Delete a group and its commits, then drop what no group needs; False if unknown."""
        tid, _ = self._topic(topic)
        db = self._conn

        def destroy() -> bool:
            cur = db.execute("DELETE FROM groups WHERE topic_id = ? AND name = ?", (tid, group))
            db.execute("DELETE FROM commits WHERE topic_id = ? AND grp = ?", (tid, group))
            existed = cur.rowcount > 0
            if existed:
                self._trim(tid)
            return existed

        existed = self._write(f"destroying group {group!r} of topic {topic!r}", destroy)
        if existed:
            self._grouped[tid] = max(0, self._grouped.get(tid, 0) - 1)
        return existed

    def committed(self, topic: str, group: str, channel: int) -> tuple[int, bool]:
        """``(offset, explicit)``: the group's commit point in a channel.

        ``offset`` is the last consumed offset (reading resumes at ``offset + 1``);
        ``explicit`` is False while nothing was committed by a subscriber.
        """
        tid, _ = self._state(topic, channel)
        with self._reading(f"reading the commit of group {group!r} of topic {topic!r}") as db:
            row = db.execute(
                "SELECT committed, explicit FROM commits"
                " WHERE topic_id = ? AND grp = ? AND channel = ?",
                (tid, group, channel),
            ).fetchone()
        if row is None:
            raise PreconditionNotMetError(f"topic {topic!r} has no subscriber group {group!r}")
        return int(row[0]), bool(row[1])

    def commit(self, topic: str, group: str, channel: int, offset: int) -> CommitStatus:
        """Commit ``offset`` (and every earlier one) of ``channel`` for ``group``."""
        return self.commit_many(topic, group, [(channel, offset)])[channel]

    def commit_many(
        self, topic: str, group: str, offsets: Iterable[tuple[int, int]]
    ) -> dict[int, CommitStatus]:
        """Commit an offset (and every earlier one) in each of several channels for ``group``.

        ``offsets`` are ``(channel, offset)`` pairs; each channel's status is the
        one :meth:`commit` would give, in that order. The commits (and the
        release of what they free) are written in one transaction, all or
        none: a subscriber's commit of many channels costs the store one
        transaction, not one per channel. A bad channel or group raises before
        anything is written.
        """
        statuses: dict[int, CommitStatus] = {}
        todo: dict[int, tuple[int, int]] = {}  # channel -> (topic id, offset) to write
        for channel, offset in offsets:
            tid, st = self._state(topic, channel)
            current, explicit = self.committed(topic, group, channel)
            if channel in todo:  # named twice: the first is committed already
                current, explicit = max(current, todo[channel][1]), True
            status = _commit_status(st[0], st[1] - 1, current, explicit, offset)
            statuses[channel] = status
            if status is CommitStatus.COMMITTED:
                todo[channel] = (tid, offset)
        if not todo:
            return statuses

        def commit() -> None:
            for channel, (tid, offset) in todo.items():
                self._set_commit(tid, group, channel, offset, True)
                self._trim(tid, channel)

        if len(todo) == 1:
            ((channel, (_, offset)),) = todo.items()
            doing = f"committing offset {offset} of topic {topic!r} channel {channel}"
        else:
            doing = f"committing offsets of topic {topic!r} channels {sorted(todo)}"
        self._write(doing, commit)
        return statuses

    def _set_commit(self, tid: int, group: str, channel: int, offset: int, explicit: bool) -> None:
        self._conn.execute(
            "UPDATE commits SET committed = ?, explicit = ? WHERE topic_id = ? AND grp = ?"
            " AND channel = ?",
            (offset, int(explicit), tid, group, channel),
        )

    def seek(
        self,
        topic: str,
        group: str,
        channel: int,
        *,
        offset: int | None = None,
        timestamp_ns: int | None = None,
        to: str | None = None,
    ) -> int:
        """Clamp a seek of ``group`` in ``channel`` and apply its commit rules.

        Exactly one of ``offset`` (the position after which reading resumes),
        ``timestamp_ns`` (resume at the first element accepted strictly after
        it, as seed 000 says: seeking to an element's own timestamp resumes
        after that element)
        or ``to`` (``"head"`` / ``"tail"``) is given. Returns the position
        seeked to: reading resumes at its offset + 1. The result is clamped to
        ``[head - 1, tail]`` (and to the last commit when the topic does not
        retain consumed elements). Seeking before the group's commit moves the
        commit back; seeking to the head also clears the commit.
        """
        tid, st = self._state(topic, channel)
        info = self._topic(topic)[1]
        current, explicit = self.committed(topic, group, channel)
        head, tail = st[0], st[1] - 1
        lower = head - 1 if info.retain_consumed else max(head - 1, current)
        if to == "head":
            target = lower
        elif to == "tail":
            target = tail
        elif timestamp_ns is not None:
            target = self.find_timestamp(topic, channel, timestamp_ns + 1) - 1
        elif offset is not None:
            target = offset
        else:
            raise BadParameterError("seek needs an offset, a timestamp, or head/tail")
        target = min(max(target, lower), tail)
        doing = f"seeking group {group!r} of topic {topic!r} channel {channel}"
        if to == "head" and info.retain_consumed:
            self._write(doing, lambda: self._set_commit(tid, group, channel, target, False))
        elif target < current:
            keep = explicit and target >= head
            self._write(doing, lambda: self._set_commit(tid, group, channel, target, keep))
        return target

    # -- retention -----------------------------------------------------------

    def trim(self, topic: str) -> int:
        """Release elements no one needs any more (see :meth:`_trim`); return how many.

        The head moves past every released element; a stored batch is deleted
        once all of its elements are released.
        """
        tid, _ = self._topic(topic)
        doing = f"releasing consumed elements of topic {topic!r}"
        return self._write(doing, lambda: self._trim(tid))

    def _trim(self, tid: int, only_channel: int | None = None) -> int:
        info = next(i for t, i in self._topics.values() if t == tid)
        if info.retain_consumed:
            return 0
        db = self._conn
        channels = range(info.channel_count) if only_channel is None else [only_channel]
        ngroups = db.execute("SELECT count(*) FROM groups WHERE topic_id = ?", (tid,)).fetchone()[0]
        deleted = 0
        for c in channels:
            st = self._channels[(tid, c)]
            if ngroups == 0:
                floor = st[1] - 1
            else:
                floor = db.execute(
                    "SELECT min(committed) FROM commits WHERE topic_id = ? AND channel = ?",
                    (tid, c),
                ).fetchone()[0]
            if floor is None or floor < st[0]:
                continue
            segments = db.execute(
                "SELECT DISTINCT segment FROM batches WHERE topic_id = ? AND channel = ?"
                " AND first_offset + count - 1 <= ? AND segment IS NOT NULL",
                (tid, c, floor),
            ).fetchall()
            db.execute(
                "DELETE FROM batches WHERE topic_id = ? AND channel = ? AND first_offset <= ?"
                " AND first_offset + count - 1 <= ?",
                (tid, c, floor, floor),
            )
            for (seq,) in segments:
                if (
                    db.execute(
                        "SELECT 1 FROM batches WHERE topic_id = ? AND segment = ? UNION ALL"
                        " SELECT 1 FROM staged WHERE topic_id = ? AND segment = ? LIMIT 1",
                        (tid, seq, tid, seq),
                    ).fetchone()
                    is None
                ):
                    self._released.append((tid, int(seq)))
                    self._segments.retire(tid, int(seq))
            deleted += floor + 1 - st[0]
            db.execute(
                "UPDATE channels SET head = ? WHERE topic_id = ? AND channel = ?",
                (floor + 1, tid, c),
            )
            st[0] = floor + 1
        return deleted

    def trim_unconsumed(self, topic: str) -> int:
        """After a publish: release what a topic without groups (nor retention) holds.

        Such a topic keeps nothing once its live tail was pushed, but releasing
        after every publish is a second transaction per publish; so it runs
        at most every 50 ms, or once 16 MiB were appended since the last one
        (``docs/large-payloads.md``). Returns how many elements were released.
        """
        tid, info = self._topic(topic)
        if info.retain_consumed or self._grouped.get(tid):
            return 0
        last, pending = self._unconsumed.get(tid, (0.0, 0))
        now = time.monotonic()
        if now - last < _UNCONSUMED_TRIM_INTERVAL and pending < _UNCONSUMED_TRIM_BYTES:
            return 0
        self._unconsumed[tid] = (now, 0)
        return self.trim(topic)

    def _note_unconsumed(self, tid: int, size: int) -> None:
        last, pending = self._unconsumed.get(tid, (0.0, 0))
        self._unconsumed[tid] = (last, pending + size)


def _commit_status(head: int, tail: int, current: int, explicit: bool, offset: int) -> CommitStatus:
    """What committing ``offset`` does to a channel holding ``head``..``tail``, committed at
    ``current``."""
    if tail < 0:
        return CommitStatus.NOTHING_TO_COMMIT
    if offset > tail:
        return CommitStatus.REJECTED
    if offset <= current:
        return CommitStatus.ALREADY_COMMITTED if explicit else CommitStatus.NOTHING_TO_COMMIT
    if offset < head - 1:
        return CommitStatus.NOTHING_TO_COMMIT
    return CommitStatus.COMMITTED


def _body_size(sizes: bytes) -> int:
    """Total payload bytes of a stored batch (its sizes: one int32 LE each)."""
    return int(np.frombuffer(sizes, dtype="<i4").sum(dtype=np.int64))
