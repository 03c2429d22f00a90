"""Reading the store's log: every query a reader of the file needs, in one place.

A :class:`LogReader` is a read-only SQLite connection to a store file. The
store's fetch threads get theirs from :meth:`ChannelLog.reader`; the Spark
source and batch reader open one from a data directory with
:meth:`LogReader.open` (no store needs to run). Every read runs in one SQLite
snapshot, so it sees a committed batch whole or not at all, together with the
channel head and tail of that moment (WAL mode lets it read while the store
writes).

Large batch bodies live in segment files (``_log_segments``); a reader reads
them with ``pread`` and checks their CRC. Files older than format 4 are read
as they are: their elements share their batch's timestamp.

Nothing read is skipped silently: a stored batch whose sizes do not add up, a
segment body missing or not matching its CRC, or an element missing between a
channel's head and tail, raises
:class:`~dcps.PreconditionNotMetError` naming the topic, channel and offset
(and is logged at ERROR on the ``dcps.store`` logger), as does a damaged page.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dcps.wire._batches import ELEMENT_STEP_NS, ElementRun
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    PreconditionNotMetError,
    UnsupportedError,
)

from ._log_format import (
    OLDEST_READABLE_VERSION,
    SEGMENTS_VERSION,
    STORE_FILE,
    inspect_file,
    sql_error,
)
from ._log_records import ChannelState, TopicInfo
from ._log_segments import SegmentFiles, crc_of

__all__ = ["LogReader", "find_timestamp", "read_run"]

_log = logging.getLogger("dcps.store")

#: Bytes of the store file a LogReader maps: reads copy pages out of the
#: mapping instead of a read() system call per 4 KiB page of a stored batch.
_READER_MMAP = 1 << 30


class LogReader:
    """A read-only view of a store file, usable from any one thread at a time.

    Open one with :meth:`open` (a data directory) or
    :meth:`ChannelLog.reader`; close it when done (or use ``with``). The
    format is checked at open (a version-1 file must be opened by a store
    once, which migrates it); ``verify`` also runs ``PRAGMA quick_check``.
    Unknown topics raise ``BadParameterError``; channels outside a topic's
    range too.
    """

    def __init__(self, path: str | os.PathLike[str], *, verify: bool = False) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._topics: dict[str, tuple[int, TopicInfo]] = {}
        uri = f"{self.path.resolve().as_uri()}?mode=ro"
        if not os.access(self.path.parent, os.W_OK) and not Path(f"{self.path}-wal").exists():
            uri += "&immutable=1"  # a read-only copy: no -shm file can be made, none is needed
        try:
            db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise sql_error(exc, self.path, "opening the store file to read") from exc
        try:
            version = inspect_file(db, self.path, verify=verify)
            if version == 0:
                raise BadParameterError(f"{self.path} is an empty SQLite file, not a dcps store")
            if version < OLDEST_READABLE_VERSION:
                raise UnsupportedError(
                    f"{self.path} has store format version {version}; it is read directly from "
                    f"version {OLDEST_READABLE_VERSION} on (a dcps store migrates the file when "
                    "it opens it; or read it over DDS from a running store)"
                )
            db.execute(f"PRAGMA mmap_size={_READER_MMAP}")
        except BaseException:
            db.close()
            raise
        self._version = version
        self._segments = SegmentFiles(self.path)
        self._db: sqlite3.Connection | None = db

    @classmethod
    def open(cls, data_dir: str | os.PathLike[str], *, verify: bool = True) -> LogReader:
        """A reader of the store file in ``data_dir`` (a store's ``--data`` directory).

        A missing file raises ``BadParameterError`` naming the path; a damaged
        one too (with ``verify``, the default; pass False to skip the full
        check of a huge file).
        """
        path = Path(data_dir) / STORE_FILE
        if not path.is_file():
            raise BadParameterError(f"no dcps store file at {path}")
        return cls(path, verify=verify)

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
                self._segments.close()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- topics and channels ------------------------------------------------------

    def topics(self) -> list[TopicInfo]:
        """Every topic in the file, by name."""
        with self._snapshot("listing topics") as db:
            for row in db.execute(f"SELECT {self._topic_columns} FROM topics"):
                self._remember(row)
        return sorted((info for _, info in self._topics.values()), key=lambda t: t.name)

    def topic(self, name: str) -> TopicInfo:
        """One topic's configuration."""
        with self._snapshot(f"reading topic {name!r}") as db:
            return self._topic(db, name)[1]

    def channel_state(self, topic: str, channel: int) -> ChannelState:
        """Head and tail of one channel."""
        with self._snapshot(f"reading topic {topic!r} channel {channel}") as db:
            tid = self._channel(db, topic, channel)
            head, nxt, _ = _channel_row(db, tid, channel)
        return ChannelState(head, nxt - 1)

    def channel_states(self, topic: str) -> list[ChannelState]:
        """Head and tail of every channel of ``topic``, by channel, in one snapshot."""
        with self._snapshot(f"reading the channels of topic {topic!r}") as db:
            tid, info = self._topic(db, topic)
            rows = db.execute(
                "SELECT channel, head, next_offset FROM channels WHERE topic_id = ?"
                " ORDER BY channel",
                (tid,),
            ).fetchall()
        states = {int(c): ChannelState(int(h), int(n) - 1) for c, h, n in rows}
        if sorted(states) != list(range(info.channel_count)):
            raise self._damaged(topic, None, None, "its channel rows are incomplete")
        return [states[c] for c in range(info.channel_count)]

    def time_range(self, topic: str, channel: int) -> tuple[int, int] | None:
        """Accept timestamps (ns) of the first and last available element; None if empty."""
        with self._snapshot(f"reading topic {topic!r} channel {channel}") as db:
            tid = self._channel(db, topic, channel)
            head, nxt, last_ts = _channel_row(db, tid, channel)
            if head >= nxt:
                return None
            row = db.execute(
                "SELECT ts, first_offset FROM batches WHERE topic_id = ? AND channel = ?"
                " AND first_offset <= ? ORDER BY first_offset DESC LIMIT 1",
                (tid, channel, head),
            ).fetchone()
        if row is None:
            raise self._damaged(topic, channel, head, "the element at the head is missing")
        step = ELEMENT_STEP_NS if self._version >= SEGMENTS_VERSION else 0
        return int(row[0]) + (head - int(row[1])) * step, last_ts

    def find_timestamp(self, topic: str, channel: int, timestamp_ns: int) -> int:
        """Offset of the first available element accepted at or after ``timestamp_ns``.

        Returns ``tail + 1`` when every element is older.
        """
        with self._snapshot(f"searching topic {topic!r} channel {channel} by time") as db:
            tid = self._channel(db, topic, channel)
            head, nxt, _ = _channel_row(db, tid, channel)
            if self._version < SEGMENTS_VERSION:
                return _find_timestamp_shared(db, tid, channel, head, nxt, timestamp_ns)
            return find_timestamp(db, tid, channel, head, nxt, timestamp_ns)

    # -- elements -------------------------------------------------------------------

    def fetch(
        self, topic: str, channel: int, offset: int, max_count: int
    ) -> tuple[ElementRun, ChannelState]:
        """Up to ``max_count`` elements from ``offset`` (or the head if later) and the state.

        Like :meth:`ChannelLog.fetch_run`; the channel state is the one the
        run was read in.
        """
        if max_count < 1:
            raise BadParameterError(f"max_count must be >= 1, got {max_count}")
        with self._snapshot(f"reading topic {topic!r} channel {channel} at offset {offset}") as db:
            tid = self._channel(db, topic, channel)
            head, nxt, _ = _channel_row(db, tid, channel)
            run = read_run(
                db,
                self.path,
                topic,
                tid,
                channel,
                max(offset, head),
                nxt,
                max_count,
                self._segments if self._version >= SEGMENTS_VERSION else None,
            )
        return run, ChannelState(head, nxt - 1)

    def read_range(self, topic: str, channel: int, start: int, end: int) -> ElementRun:
        """Exactly the elements ``start .. end - 1`` of ``channel``, in bulk.

        Raises ``PreconditionNotMetError`` naming the range unless all of it
        is stored: retention released its beginning, or its end is past the
        tail. A reader never skips data silently.
        """
        if end <= start:
            return ElementRun(start)
        run, state = self.fetch(topic, channel, start, end - start)
        if run.count != end - start or run.first != start:
            why = (
                "the store's retention released them"
                if start < state.head
                else f"the channel's tail is {state.tail}"
            )
            raise PreconditionNotMetError(
                f"topic {topic!r} channel {channel}: elements {start}..{end - 1} are not all "
                f"stored (got {run.count}); {why}"
            )
        return run

    def runs(
        self, topic: str, channel: int, start: int, end: int, step: int
    ) -> Iterator[ElementRun]:
        """Exactly the elements ``start .. end - 1``, in runs of up to ``step`` elements."""
        step = max(1, step)
        for pos in range(start, end, step):
            yield self.read_range(topic, channel, pos, min(end, pos + step))

    # -- internals ----------------------------------------------------------------

    @property
    def _topic_columns(self) -> str:
        identity = "type_identity" if self._version >= 3 else "''"
        return f"id, name, channel_count, retain_consumed, type_name, {identity}"

    def _remember(self, row: Any) -> tuple[int, TopicInfo]:
        tid, name, count, retain, type_name, identity = row
        entry = int(tid), TopicInfo(name, int(count), bool(retain), type_name, identity)
        self._topics[name] = entry
        return entry

    def _topic(self, db: sqlite3.Connection, name: str) -> tuple[int, TopicInfo]:
        entry = self._topics.get(name)  # topics are only ever added, never changed
        if entry is None:
            row = db.execute(
                f"SELECT {self._topic_columns} FROM topics WHERE name = ?", (name,)
            ).fetchone()
            if row is None:
                raise BadParameterError(f"no channelled topic {name!r} in the store ({self.path})")
            entry = self._remember(row)
        return entry

    def _channel(self, db: sqlite3.Connection, topic: str, channel: int) -> int:
        tid, info = self._topic(db, topic)
        if not isinstance(channel, int) or not 0 <= channel < info.channel_count:
            raise BadParameterError(
                f"topic {topic!r} has channels 0..{info.channel_count - 1}, not {channel!r}"
            )
        return tid

    def _damaged(
        self, topic: str, channel: int | None, offset: int | None, why: str
    ) -> PreconditionNotMetError:
        where = f"topic {topic!r}" + ("" if channel is None else f" channel {channel}")
        where += "" if offset is None else f" offset {offset}"
        error = PreconditionNotMetError(f"{self.path} is damaged at {where}: {why}")
        _log.error("dcps store: %s", error)
        return error

    def _snapshot(self, doing: str) -> _Snapshot:
        return _Snapshot(self, doing)


class _Snapshot:
    """One read transaction of a :class:`LogReader`; SQLite errors become typed errors."""

    def __init__(self, reader: LogReader, doing: str) -> None:
        self._reader = reader
        self._doing = doing
        self._db: sqlite3.Connection | None = None

    def __enter__(self) -> sqlite3.Connection:
        reader = self._reader
        reader._lock.acquire()
        db = reader._db
        if db is None:
            reader._lock.release()
            raise AlreadyClosedError(f"the reader of the store file {reader.path} is closed")
        try:
            db.execute("BEGIN")
        except sqlite3.Error as exc:
            reader._lock.release()
            raise _logged(sql_error(exc, reader.path, self._doing)) from exc
        self._db = db
        return db

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        db = self._db
        assert db is not None
        try:
            if db.in_transaction:
                db.execute("COMMIT")
        except sqlite3.Error:
            pass  # a read transaction: nothing to lose
        finally:
            self._reader._lock.release()
        if isinstance(exc, sqlite3.Error):
            raise _logged(sql_error(exc, self._reader.path, self._doing)) from exc


def _logged(error: DcpsError) -> DcpsError:
    _log.error("dcps store: %s", error)
    return error


def _channel_row(db: sqlite3.Connection, tid: int, channel: int) -> tuple[int, int, int]:
    row = db.execute(
        "SELECT head, next_offset, last_ts FROM channels WHERE topic_id = ? AND channel = ?",
        (tid, channel),
    ).fetchone()
    if row is None:
        raise PreconditionNotMetError(f"the store has no row for channel {channel} of its topic")
    return int(row[0]), int(row[1]), int(row[2])


def find_timestamp(
    db: sqlite3.Connection, tid: int, channel: int, head: int, nxt: int, timestamp_ns: int
) -> int:
    """Offset of the first element accepted at or after ``timestamp_ns`` (``nxt`` if none).

    Element ``i`` of a stored batch was accepted at its ``ts`` plus ``i``
    steps, and timestamps increase strictly with the offset: the batch with
    the last ``ts`` at or before the time holds the answer, or the next
    batch does.
    """
    row = db.execute(
        "SELECT first_offset, count, ts FROM batches WHERE topic_id = ? AND channel = ?"
        " AND ts <= ? ORDER BY ts DESC, first_offset DESC LIMIT 1",
        (tid, channel, timestamp_ns),
    ).fetchone()
    if row is not None:
        first, count, ts = (int(v) for v in row)
        index = -(-(timestamp_ns - ts) // ELEMENT_STEP_NS)  # first element at or after
        if index < count:
            return max(first + index, head)
    later = db.execute(
        "SELECT first_offset FROM batches WHERE topic_id = ? AND channel = ? AND ts > ?"
        " ORDER BY ts, first_offset LIMIT 1",
        (tid, channel, timestamp_ns),
    ).fetchone()
    return nxt if later is None else max(int(later[0]), head)


def _find_timestamp_shared(
    db: sqlite3.Connection, tid: int, channel: int, head: int, nxt: int, timestamp_ns: int
) -> int:
    """:func:`find_timestamp` in a file older than format 4 (a batch's elements share its ts)."""
    row = db.execute(
        "SELECT first_offset FROM batches WHERE topic_id = ? AND channel = ? AND ts >= ?"
        " ORDER BY ts, first_offset LIMIT 1",
        (tid, channel, timestamp_ns),
    ).fetchone()
    return nxt if row is None else max(int(row[0]), head)


def read_run(
    db: sqlite3.Connection,
    path: Path,
    topic: str,
    tid: int,
    channel: int,
    start: int,
    end: int,
    max_count: int,
    segments: SegmentFiles | None,
) -> ElementRun:
    """Up to ``max_count`` stored elements of a channel from ``start`` (``end``: next offset).

    ``start`` is at or above the channel's head. Every available element in
    range must be there and every row consistent: otherwise the file is
    damaged, and ``PreconditionNotMetError`` names topic, channel and offset
    (logged at ERROR). ``segments`` reads the bodies kept in segment files;
    None for a file older than format 4 (no segments; its elements share
    their batch's timestamp, so the run has one count per element).
    """
    if start >= end:
        return ElementRun(end)
    # Bounded above: every row the cursor steps over has its whole blob read.
    columns = "first_offset, count, ts, sizes, data" + (
        ", segment, pos, crc" if segments is not None else ""
    )
    cur = db.execute(
        f"SELECT {columns} FROM batches"
        " WHERE topic_id = ?1 AND channel = ?2 AND first_offset < ?4"
        " AND first_offset >= coalesce((SELECT max(first_offset) FROM batches"
        " WHERE topic_id = ?1 AND channel = ?2 AND first_offset <= ?3), ?3)"
        " ORDER BY first_offset",
        (tid, channel, start, start + max_count),
    )
    try:
        if segments is None:
            run = _shared_stamps(ElementRun.from_rows(cur, start, max_count, step=0))
        else:
            bodies = _with_bodies(cur, segments, path, topic, tid, channel)
            run = ElementRun.from_rows(bodies, start, max_count)
    finally:
        cur.close()
    want = min(max_count, end - start)
    if run.count != want or run.first != start:
        missing = start if run.first != start or not run.count else run.end
        raise _damaged_run(
            path,
            topic,
            channel,
            missing,
            f"elements {start}..{start + want - 1} should be stored, {run.count} were found",
        )
    # One check per run, not per row (the hot path): the sizes must add up to the data.
    if len(run.sizes) != 4 * run.count or _total(run.sizes) != len(run.data):
        bad = _first_inconsistent_row(db, tid, channel, start, start + want)
        raise _damaged_run(
            path, topic, channel, bad, "the stored batch's element sizes do not match its data"
        )
    return run


def _with_bodies(
    rows: Iterable[Any],
    segments: SegmentFiles,
    path: Path,
    topic: str,
    tid: int,
    channel: int,
) -> Iterator[tuple[int, int, int, bytes, bytes]]:
    """Stored rows with each segment body read in (and checked against its CRC)."""
    for first, count, ts, sizes, data, segment, pos, crc in rows:
        if segment is not None:
            # the size check first: a blob that is no whole number of sizes would make
            # _total fail untyped (numpy), not name the damaged batch
            ok = isinstance(sizes, bytes) and len(sizes) == 4 * count
            length = _total(sizes) if ok else -1
            if length < 0:
                raise _damaged_run(
                    path, topic, channel, first, "the stored batch's element sizes are damaged"
                )
            try:
                data = segments.read(tid, segment, pos, length)
            except OSError as exc:
                raise _damaged_run(
                    path,
                    topic,
                    channel,
                    first,
                    f"its segment {segments.path(tid, segment)} cannot be read ({exc})",
                ) from exc
            if len(data) != length or crc_of(data) != crc:
                raise _damaged_run(
                    path,
                    topic,
                    channel,
                    first,
                    f"its body in segment {segments.path(tid, segment)} at {pos} is "
                    + ("cut short" if len(data) != length else "damaged (CRC mismatch)"),
                )
        yield first, count, ts, sizes, data


def _shared_stamps(run: ElementRun) -> ElementRun:
    """A run of a file older than format 4: one count per element, sharing its batch's ts."""
    if all(c == 1 for c in run.counts):
        return run
    stamps = tuple(int(t) for t in np.repeat(np.asarray(run.stamps, np.int64), run.counts))
    return ElementRun(run.first, (1,) * run.count, stamps, run.sizes, run.data)


def _total(sizes: bytes) -> int:
    each = np.frombuffer(sizes, dtype="<i4")
    return -1 if each.size and int(each.min()) < 0 else int(each.sum())


def _first_inconsistent_row(
    db: sqlite3.Connection, tid: int, channel: int, start: int, end: int
) -> int:
    """The first offset of the first stored batch in range whose sizes do not add up."""
    for first, count, sizes, data in db.execute(
        "SELECT first_offset, count, sizes, data FROM batches"
        " WHERE topic_id = ? AND channel = ? AND first_offset < ? AND first_offset + count > ?"
        " ORDER BY first_offset",
        (tid, channel, end, start),
    ):
        if not isinstance(sizes, bytes) or not isinstance(data, bytes):
            return int(first)
        if len(sizes) != 4 * count or _total(sizes) != len(data):
            return int(first)
    return start


def _damaged_run(
    path: Path, topic: str, channel: int, offset: int, why: str
) -> PreconditionNotMetError:
    error = PreconditionNotMetError(
        f"{path} is damaged at topic {topic!r} channel {channel} offset {offset}: {why}"
    )
    _log.error("dcps store: %s", error)
    return error
