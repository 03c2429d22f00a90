"""The store's on-disk log: SQLite in WAL mode, one file per store.

Every (topic, channel) holds elements at dense offsets from 0, each with the
accept timestamp of the store's clock (nanoseconds since the Unix epoch, never
decreasing within a channel). Each accepted batch is stored as one row (its
elements share the batch's timestamp); each channel keeps its head (first
offset still available) explicitly, since retention can release part of a
batch. Subscriber groups keep one committed offset per channel. The file
layout is documented in ``docs/store-format.md``.

The log is used by one thread at a time (the store's); it does no locking of
its own beyond SQLite's. Other threads read through a :class:`LogReader` each
(:meth:`ChannelLog.reader`): its own read-only connection, every read in one
SQLite snapshot, so it never sees half of a transaction.
"""

from __future__ import annotations

import enum
import math
import os
import sqlite3
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import attrs

from dcps.channels._position import CommitStatus
from dcps.wire._batches import ElementRun, PackedPayloads
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    PreconditionNotMetError,
    UnsupportedError,
)

__all__ = [
    "FORMAT_MAGIC",
    "FORMAT_VERSION",
    "ChannelLog",
    "ChannelState",
    "Element",
    "LogReader",
    "SyncMode",
    "TopicInfo",
    "default_channel_count",
]

FORMAT_MAGIC = "dcps-channel-store"
FORMAT_VERSION = 2
#: Largest batch a version-1 file's elements are regrouped into when it is migrated.
_MIGRATED_BATCH_MAX = 65536

DEFAULT_PARTITION_COUNT = 257


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


@attrs.frozen
class TopicInfo:
    """A channelled topic as the log knows it."""

    name: str
    channel_count: int
    retain_consumed: bool
    type_name: str = ""


@attrs.frozen
class Element:
    """One stored element: its offset, accept timestamp (ns) and payload bytes."""

    offset: int
    timestamp_ns: int
    data: bytes


@attrs.frozen
class ChannelState:
    """The head (first available offset) and tail (last offset, -1 if none) of a channel."""

    head: int
    tail: int

    @property
    def count(self) -> int:
        """Elements currently stored in the channel."""
        return self.tail - self.head + 1


# One row per stored batch (a rowid table: rows are large, see docs/store-format.md).
_BATCHES = """
CREATE TABLE batches (
    topic_id INTEGER NOT NULL,
    channel INTEGER NOT NULL,
    first_offset INTEGER NOT NULL,
    count INTEGER NOT NULL,
    ts INTEGER NOT NULL,
    sizes BLOB NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (topic_id, channel, first_offset)
);
CREATE INDEX batches_ts ON batches (topic_id, channel, ts, first_offset);
"""
_SCHEMA = (
    """
CREATE TABLE dcps_format (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE topics (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    channel_count INTEGER NOT NULL,
    retain_consumed INTEGER NOT NULL,
    type_name TEXT NOT NULL DEFAULT '',
    created_ns INTEGER NOT NULL
);
CREATE TABLE channels (
    topic_id INTEGER NOT NULL REFERENCES topics(id),
    channel INTEGER NOT NULL,
    head INTEGER NOT NULL,
    next_offset INTEGER NOT NULL,
    last_ts INTEGER NOT NULL,
    PRIMARY KEY (topic_id, channel)
) WITHOUT ROWID;
CREATE TABLE groups (
    topic_id INTEGER NOT NULL,
    name TEXT NOT NULL,
    created_ns INTEGER NOT NULL,
    PRIMARY KEY (topic_id, name)
) WITHOUT ROWID;
CREATE TABLE commits (
    topic_id INTEGER NOT NULL,
    grp TEXT NOT NULL,
    channel INTEGER NOT NULL,
    committed INTEGER NOT NULL,
    explicit INTEGER NOT NULL,
    PRIMARY KEY (topic_id, grp, channel)
) WITHOUT ROWID;
"""
    + _BATCHES
)


class ChannelLog:
    """The persistent log of every channelled topic of one store.

    ``path`` is the SQLite file (created if missing). Opening a file that is
    not a dcps store, is corrupt, or has a newer format raises a
    :class:`~dcps.DcpsError` and leaves the file untouched.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        sync: SyncMode = SyncMode.FULL,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._db: sqlite3.Connection | None = None
        existed = self.path.exists() and self.path.stat().st_size > 0
        version = self._check_existing() if existed else FORMAT_VERSION
        db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={SyncMode(sync).value}")
            if db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0:
                db.executescript(
                    "BEGIN IMMEDIATE;"
                    + _SCHEMA
                    + f"INSERT INTO dcps_format VALUES ('magic', '{FORMAT_MAGIC}');"
                    + f"INSERT INTO dcps_format VALUES ('version', '{FORMAT_VERSION}');"
                    + "COMMIT;"
                )
            elif version == 1:
                _migrate_v1(db)
        except BaseException:
            db.close()
            raise
        self._db = db
        self._topics: dict[str, tuple[int, TopicInfo]] = {}
        self._channels: dict[tuple[int, int], list[int]] = {}  # [head, next, last_ts]
        self._load()

    # -- opening -----------------------------------------------------------

    def _check_existing(self) -> int:
        """The format version of an existing file; refuse (untouched) what is not ours."""
        uri = f"file:{self.path.resolve()}?mode=ro"
        try:
            ro = sqlite3.connect(uri, uri=True)
        except sqlite3.Error as exc:
            raise BadParameterError(f"cannot open store file {self.path}: {exc}") from exc
        try:
            try:
                tables = {r[0] for r in ro.execute("SELECT name FROM sqlite_master")}
            except sqlite3.DatabaseError as exc:
                raise BadParameterError(
                    f"{self.path} is corrupt or not a SQLite file ({exc}); it was left untouched"
                ) from exc
            if not tables:
                return FORMAT_VERSION
            if "dcps_format" not in tables:
                raise BadParameterError(
                    f"{self.path} is a SQLite file of something else (no dcps_format table); "
                    "refusing to use it as a dcps store"
                )
            try:
                meta = dict(ro.execute("SELECT key, value FROM dcps_format").fetchall())
            except sqlite3.DatabaseError as exc:
                raise BadParameterError(f"{self.path}: unreadable dcps_format: {exc}") from exc
            if meta.get("magic") != FORMAT_MAGIC:
                raise BadParameterError(
                    f"{self.path} is not a dcps channel store (magic {meta.get('magic')!r})"
                )
            try:
                version = int(meta.get("version", ""))
            except ValueError as exc:
                raise BadParameterError(
                    f"{self.path}: bad format version {meta.get('version')!r}"
                ) from exc
            if version > FORMAT_VERSION:
                raise UnsupportedError(
                    f"{self.path} has store format version {version}, newer than the "
                    f"{FORMAT_VERSION} this dcps reads; upgrade dcps to open it"
                )
            if version < 1:
                raise BadParameterError(f"{self.path}: bad format version {version}")
            return version
        finally:
            ro.close()

    def _load(self) -> None:
        db = self._conn
        for tid, name, count, retain, type_name in db.execute(
            "SELECT id, name, channel_count, retain_consumed, type_name FROM topics"
        ):
            self._topics[name] = (tid, TopicInfo(name, count, bool(retain), type_name))
        for tid, channel, head, nxt, last_ts in db.execute(
            "SELECT topic_id, channel, head, next_offset, last_ts FROM channels"
        ):
            self._channels[(tid, channel)] = [head, nxt, last_ts]

    @property
    def _conn(self) -> sqlite3.Connection:
        if self._db is None:
            raise AlreadyClosedError(f"the channel log {self.path} is closed")
        return self._db

    def close(self) -> None:
        """Close the file (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None

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
    ) -> TopicInfo:
        """Create the topic if it is new; return its (existing or new) configuration."""
        if not name:
            raise BadParameterError("a channelled topic needs a non-empty name")
        if name in self._topics:
            return self._topics[name][1]
        count = channel_count if channel_count else default_channel_count()
        if count < 1:
            raise BadParameterError(f"channel_count must be >= 1, got {count}")
        db = self._conn
        with self._tx():
            cur = db.execute(
                "INSERT INTO topics (name, channel_count, retain_consumed, type_name, created_ns)"
                " VALUES (?, ?, ?, ?, ?)",
                (name, count, int(retain_consumed), type_name, self._clock()),
            )
            tid = int(cur.lastrowid or 0)
            db.executemany(
                "INSERT INTO channels VALUES (?, ?, 0, 0, 0)", [(tid, c) for c in range(count)]
            )
        info = TopicInfo(name, count, bool(retain_consumed), type_name)
        self._topics[name] = (tid, info)
        for c in range(count):
            self._channels[(tid, c)] = [0, 0, 0]
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

    def _tx(self) -> _Transaction:
        return _Transaction(self)

    def _reload_channels(self) -> None:
        self._channels.clear()
        for tid, channel, head, nxt, last_ts in self._conn.execute(
            "SELECT topic_id, channel, head, next_offset, last_ts FROM channels"
        ):
            self._channels[(tid, channel)] = [head, nxt, last_ts]

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
        return [[(first + i, ts) for i in range(count)] for first, count, ts in placed]

    def append_packed(
        self, batches: Iterable[tuple[str, int, PackedPayloads]]
    ) -> list[tuple[int, int, int]]:
        """Persist several packed batches in one transaction (all or none).

        Each batch becomes one stored row. Returns ``(first_offset, count,
        timestamp_ns)`` per batch (an empty batch stores nothing).
        """
        db = self._conn
        results: list[tuple[int, int, int]] = []
        rows: list[tuple[int, int, int, int, int, bytes, bytes]] = []
        touched: dict[tuple[int, int], list[int]] = {}
        plan = [(self._state(t, c), c, p, p.check()) for t, c, p in batches]
        now = self._clock()
        for (tid, state), channel, packed, sizes in plan:
            st = touched.setdefault((tid, channel), list(state))
            ts = max(now, st[2])
            count = len(sizes) // 4
            if count:
                rows.append((tid, channel, st[1], count, ts, sizes, bytes(packed.blob)))
            results.append((st[1], count, ts))
            st[1] += count
            st[2] = ts
        with self._tx():
            db.executemany("INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
            db.executemany(
                "UPDATE channels SET next_offset = ?, last_ts = ?"
                " WHERE topic_id = ? AND channel = ?",
                [(st[1], st[2], tid, ch) for (tid, ch), st in touched.items()],
            )
        for key, st in touched.items():
            self._channels[key][:] = st
        return results

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
        db.execute(
            "CREATE TABLE IF NOT EXISTS publish_keys (topic_id INTEGER NOT NULL,"
            " key TEXT NOT NULL, channel INTEGER NOT NULL, first INTEGER NOT NULL,"
            " count INTEGER NOT NULL, ts INTEGER NOT NULL, PRIMARY KEY (topic_id, key))"
            " WITHOUT ROWID"
        )
        row = db.execute(
            "SELECT channel, first, count, ts FROM publish_keys WHERE topic_id = ? AND key = ?",
            (tid, key),
        ).fetchone()
        if row is not None:
            return [(row[1] + i, row[3]) for i in range(row[2])], True
        st = list(state)
        ts = max(self._clock(), st[2])
        first = st[1]
        count = len(sizes) // 4
        st[1] += count
        st[2] = ts
        with self._tx():
            if count:
                db.execute(
                    "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (tid, channel, first, count, ts, sizes, bytes(packed.blob)),
                )
            db.execute(
                "UPDATE channels SET next_offset = ?, last_ts = ?"
                " WHERE topic_id = ? AND channel = ?",
                (st[1], st[2], tid, channel),
            )
            db.execute(
                "INSERT INTO publish_keys VALUES (?, ?, ?, ?, ?, ?)",
                (tid, key, channel, first, count, ts),
            )
        state[:] = st
        return [(first + i, ts) for i in range(count)], False

    def fetch(self, topic: str, channel: int, offset: int, max_count: int) -> list[Element]:
        """Up to ``max_count`` elements from ``offset`` on (or from the head if later)."""
        run = self.fetch_run(topic, channel, offset, max_count)
        stamps = run.timestamps().tolist()
        return [Element(run.first + i, stamps[i], data) for i, data in enumerate(run.payloads())]

    def fetch_run(self, topic: str, channel: int, offset: int, max_count: int) -> ElementRun:
        """Up to ``max_count`` elements from ``offset`` on (or from the head if later), in bulk.

        The result keeps the stored batches' form (sizes and data blobs, one
        timestamp per batch); no Python object is built per element.
        """
        tid, st = self._state(topic, channel)
        if max_count < 1:
            raise BadParameterError(f"max_count must be >= 1, got {max_count}")
        return _read_run(self._conn, tid, channel, max(offset, st[0]), st[1], max_count)

    def reader(self) -> LogReader:
        """A read-only connection to this log for one other thread (close it when done)."""
        return LogReader(self)

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
        row = self._conn.execute(
            "SELECT first_offset FROM batches WHERE topic_id = ? AND channel = ? AND ts >= ?"
            " ORDER BY ts, first_offset LIMIT 1",
            (tid, channel, timestamp_ns),
        ).fetchone()
        return st[1] if row is None else max(int(row[0]), st[0])

    # -- groups and commits --------------------------------------------------

    def groups(self, topic: str) -> list[str]:
        """Names of the topic's subscriber groups, sorted."""
        tid, _ = self._topic(topic)
        return [
            r[0]
            for r in self._conn.execute(
                "SELECT name FROM groups WHERE topic_id = ? ORDER BY name", (tid,)
            )
        ]

    def has_group(self, topic: str, group: str) -> bool:
        """True when ``group`` exists on ``topic``."""
        tid, _ = self._topic(topic)
        row = self._conn.execute(
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
        with self._tx():
            db.execute("INSERT INTO groups VALUES (?, ?, ?)", (tid, group, self._clock()))
            db.executemany(
                "INSERT INTO commits VALUES (?, ?, ?, ?, 0)",
                [
                    (tid, group, c, self._channels[(tid, c)][0] - 1)
                    for c in range(info.channel_count)
                ],
            )
        return True

    def destroy_group(self, topic: str, group: str) -> bool:
        """Delete a group and its commits, then drop what no group needs; False if unknown."""
        tid, _ = self._topic(topic)
        db = self._conn
        with self._tx():
            cur = db.execute("DELETE FROM groups WHERE topic_id = ? AND name = ?", (tid, group))
            db.execute("DELETE FROM commits WHERE topic_id = ? AND grp = ?", (tid, group))
            existed = cur.rowcount > 0
            if existed:
                self._trim(tid)
        return existed

    def _require_group(self, tid: int, topic: str, group: str) -> None:
        row = self._conn.execute(
            "SELECT 1 FROM groups WHERE topic_id = ? AND name = ?", (tid, group)
        ).fetchone()
        if row is None:
            raise PreconditionNotMetError(f"topic {topic!r} has no subscriber group {group!r}")

    def committed(self, topic: str, group: str, channel: int) -> tuple[int, bool]:
        """``(offset, explicit)``: the group's commit point in a channel.

        ``offset`` is the last consumed offset (reading resumes at ``offset + 1``);
        ``explicit`` is False while nothing was committed by a subscriber.
        """
        tid, _ = self._state(topic, channel)
        row = self._conn.execute(
            "SELECT committed, explicit FROM commits"
            " WHERE topic_id = ? AND grp = ? AND channel = ?",
            (tid, group, channel),
        ).fetchone()
        if row is None:
            raise PreconditionNotMetError(f"topic {topic!r} has no subscriber group {group!r}")
        return int(row[0]), bool(row[1])

    def commit(self, topic: str, group: str, channel: int, offset: int) -> CommitStatus:
        """Commit ``offset`` (and every earlier one) of ``channel`` for ``group``."""
        tid, st = self._state(topic, channel)
        current, explicit = self.committed(topic, group, channel)
        tail = st[1] - 1
        if tail < 0:
            return CommitStatus.NOTHING_TO_COMMIT
        if offset > tail:
            return CommitStatus.REJECTED
        if offset <= current:
            return CommitStatus.ALREADY_COMMITTED if explicit else CommitStatus.NOTHING_TO_COMMIT
        if offset < st[0] - 1:
            return CommitStatus.NOTHING_TO_COMMIT
        with self._tx():
            self._set_commit(tid, group, channel, offset, True)
            self._trim(tid, channel)
        return CommitStatus.COMMITTED

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
        ``timestamp_ns`` (resume at the first element accepted at or after it)
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
            target = self.find_timestamp(topic, channel, timestamp_ns) - 1
        elif offset is not None:
            target = offset
        else:
            raise BadParameterError("seek needs an offset, a timestamp, or head/tail")
        target = min(max(target, lower), tail)
        if to == "head" and info.retain_consumed:
            with self._tx():
                self._set_commit(tid, group, channel, target, False)
        elif target < current:
            with self._tx():
                self._set_commit(tid, group, channel, target, explicit and target >= head)
        return target

    # -- retention -----------------------------------------------------------

    def trim(self, topic: str) -> int:
        """Release elements no one needs any more (see :meth:`_trim`); return how many.

        The head moves past every released element; a stored batch is deleted
        once all of its elements are released.
        """
        tid, _ = self._topic(topic)
        with self._tx():
            return self._trim(tid)

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
            db.execute(
                "DELETE FROM batches WHERE topic_id = ? AND channel = ? AND first_offset <= ?"
                " AND first_offset + count - 1 <= ?",
                (tid, c, floor, floor),
            )
            deleted += floor + 1 - st[0]
            db.execute(
                "UPDATE channels SET head = ? WHERE topic_id = ? AND channel = ?",
                (floor + 1, tid, c),
            )
            st[0] = floor + 1
        return deleted


class LogReader:
    """Reads of a :class:`ChannelLog` from another thread than the log's own.

    Its own read-only SQLite connection (memory-mapped reads): WAL mode lets
    it read while the log's thread writes, and each :meth:`fetch` runs in one
    snapshot, so it sees a committed batch whole or not at all, together with
    the channel head and tail of that moment. Topics are looked up in the
    log's cache (only ever added to, after their transaction committed).
    """

    def __init__(self, log: ChannelLog) -> None:
        self._log = log
        uri = f"{log.path.resolve().as_uri()}?mode=ro"
        self._db: sqlite3.Connection | None = sqlite3.connect(
            uri, uri=True, isolation_level=None, check_same_thread=False
        )
        self._db.execute(f"PRAGMA mmap_size={_READER_MMAP}")

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def fetch(
        self, topic: str, channel: int, offset: int, max_count: int
    ) -> tuple[ElementRun, ChannelState]:
        """Up to ``max_count`` elements from ``offset`` (or the head if later) and the state.

        Like :meth:`ChannelLog.fetch_run`; the channel state is the one the
        run was read in.
        """
        if self._db is None:
            raise AlreadyClosedError(f"the reader of channel log {self._log.path} is closed")
        tid, info = self._log._topic(topic)
        if not isinstance(channel, int) or not 0 <= channel < info.channel_count:
            raise BadParameterError(
                f"topic {topic!r} has channels 0..{info.channel_count - 1}, not {channel!r}"
            )
        if max_count < 1:
            raise BadParameterError(f"max_count must be >= 1, got {max_count}")
        db = self._db
        db.execute("BEGIN")
        try:
            head, nxt = db.execute(
                "SELECT head, next_offset FROM channels WHERE topic_id = ? AND channel = ?",
                (tid, channel),
            ).fetchone()
            run = _read_run(db, tid, channel, max(offset, head), nxt, max_count)
        finally:
            db.execute("COMMIT")
        return run, ChannelState(head, nxt - 1)


#: Bytes of the store file a LogReader maps: reads copy pages out of the
#: mapping instead of a read() system call per 4 KiB page of a stored batch.
_READER_MMAP = 1 << 30


def _read_run(
    db: sqlite3.Connection, tid: int, channel: int, start: int, end: int, max_count: int
) -> ElementRun:
    """Up to ``max_count`` stored elements of a channel from ``start`` (``end``: next offset)."""
    if start >= end:
        return ElementRun(end)
    # Bounded above: every row the cursor steps over has its whole blob read.
    cur = db.execute(
        "SELECT first_offset, count, ts, sizes, data FROM batches"
        " WHERE topic_id = ?1 AND channel = ?2 AND first_offset < ?4"
        " AND first_offset >= coalesce((SELECT max(first_offset) FROM batches"
        " WHERE topic_id = ?1 AND channel = ?2 AND first_offset <= ?3), ?3)"
        " ORDER BY first_offset",
        (tid, channel, start, start + max_count),
    )
    try:
        return ElementRun.from_rows(cur, start, max_count)
    finally:
        cur.close()


def _migrate_v1(db: sqlite3.Connection) -> None:
    """Rewrite a version-1 file (one row per element) as version 2, in one transaction.

    Consecutive elements of a channel with one accept timestamp become one
    stored batch (at most ``_MIGRATED_BATCH_MAX`` elements each).
    """
    db.execute("BEGIN IMMEDIATE")
    try:
        for statement in _BATCHES.split(";"):
            if statement.strip():
                db.execute(statement)
        cur = db.execute(
            'SELECT topic_id, channel, "offset", ts, data FROM elements'
            ' ORDER BY topic_id, channel, "offset"'
        )
        batch: list[tuple[int, int, int, int, bytes]] = []

        def flush() -> None:
            if batch:
                tid, channel, first, ts, _ = batch[0]
                payloads = [bytes(b[4]) for b in batch]
                packed = PackedPayloads.of(payloads)
                db.execute(
                    "INSERT INTO batches VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (tid, channel, first, len(batch), ts, packed.check(), packed.blob),
                )
                batch.clear()

        for row in cur:
            if batch:
                last = batch[-1]
                if (
                    row[0] != last[0]
                    or row[1] != last[1]
                    or row[2] != last[2] + 1
                    or row[3] != last[3]
                    or len(batch) >= _MIGRATED_BATCH_MAX
                ):
                    flush()
            batch.append(row)
        flush()
        db.execute("DROP TABLE elements")
        db.execute("UPDATE dcps_format SET value = ? WHERE key = 'version'", (str(FORMAT_VERSION),))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``, or ``ROLLBACK`` and a cache reload on error."""

    def __init__(self, log: ChannelLog) -> None:
        self._log = log

    def __enter__(self) -> None:
        self._log._conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, *_: object) -> None:
        db = self._log._conn
        if exc_type is None:
            db.execute("COMMIT")
        else:
            db.execute("ROLLBACK")
            self._log._reload_channels()
