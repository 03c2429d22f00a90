"""Segment files: where the store's log keeps the bodies of large batches.

SQLite copies a blob into 4 KiB overflow pages, writes it to the WAL, writes it
again at the checkpoint and walks the page chain again to delete it: 2-4 bytes
written per byte stored, and ~12 ms of the store's one thread per 1 MiB (see
``docs/large-payloads.md``). So a batch whose payloads reach
:data:`INLINE_MAX` bytes keeps only its index row in SQLite (offsets, count,
timestamp, sizes) and its body goes, with one ``write``, to the end of the
topic's current segment file::

    <store file>-segments/<topic id>/<sequence, 10 digits>.seg

The row records the segment's sequence number, the body's position in it and
its CRC-32. A topic's segment is rolled at :data:`SEGMENT_BYTES`; a segment no
row refers to any more (retention released every batch in it) is deleted
after the transaction that released them commits.

Durability follows the log's ``SyncMode``: with ``FULL`` every segment written
in a transaction is ``fdatasync``-ed before the transaction commits (and a new
segment's directory entry once), so a confirmed batch survives a power loss;
with ``NORMAL`` a process crash loses nothing (the bytes are in the page
cache before the row commits). When the log opens, segment files no row
refers to (the bodies of transactions that never committed) are deleted and
the others are cut to the end of their last committed body. A row whose body
is missing or does not match its CRC is a damaged batch, reported by the
reader naming topic, channel and offset.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterable
from pathlib import Path

try:  # the same CRC-32 as zlib's, 10-15x faster (folding with carry-less multiplies)
    from zlib_ng.zlib_ng import crc32 as _crc32
except ImportError:  # pragma: no cover - zlib-ng is a dependency; zlib gives the same values
    from zlib import crc32 as _crc32

__all__ = ["INLINE_MAX", "SEGMENT_BYTES", "SegmentFiles", "segment_dir"]

#: Batches with at least this many payload bytes are kept in a segment file
#: (smaller ones stay inline in their SQLite row, where small rows are cheap).
INLINE_MAX = 32 * 1024
#: A topic's segment file is rolled once it holds this many bytes.
SEGMENT_BYTES = 64 * 1024 * 1024
#: Segment files a reader keeps open at most (then it closes them all and reopens).
_OPEN_READERS = 64


def segment_dir(store_file: Path) -> Path:
    """The directory of the segment files of the store file ``store_file``."""
    return Path(f"{store_file}-segments")


def crc_of(data: bytes | memoryview) -> int:
    """The CRC-32 (zlib's) a segment row records for its body; computed by zlib-ng
    when installed (~45 us per MiB on the benchmark machine, zlib 430-660 us)."""
    return _crc32(data)


class SegmentFiles:
    """The segment files of one store file: appends (the store's thread) and reads (any).

    Reads open each file once and ``pread`` from it (thread-safe); appends go to
    one open file per topic. With ``durable``, :meth:`sync` makes every append
    since the last call durable (a segment rolled meanwhile is synced as it is
    closed); without, nothing is ever synced. :meth:`close` closes every file.
    """

    def __init__(
        self, store_file: Path, *, roll_bytes: int = SEGMENT_BYTES, durable: bool = False
    ) -> None:
        self.root = segment_dir(store_file)
        self.roll_bytes = roll_bytes
        self.durable = durable
        self._writing: dict[int, tuple[int, int, int]] = {}  # tid -> (seq, fd, size)
        self._dirty: set[int] = set()  # fds written since the last sync
        self._new_dirs: set[Path] = set()
        self._readers: dict[tuple[int, int], int] = {}
        self._last_seq: dict[int, int] = {}  # highest segment number seen, per topic
        self._lock = threading.Lock()

    def path(self, tid: int, seq: int) -> Path:
        """The file of segment ``seq`` of topic ``tid``."""
        return self.root / str(tid) / f"{seq:010d}.seg"

    # -- writing (the store's thread) ---------------------------------------------

    def append(self, tid: int, body: bytes | memoryview) -> tuple[int, int]:
        """Write ``body`` at the end of topic ``tid``'s segment; return ``(seq, pos)``.

        The first append of a topic after :meth:`tidy` starts a new segment, so
        bodies are only ever appended to files this object created. Nothing is
        synced: see :meth:`sync`.
        """
        current = self._writing.get(tid)
        if current is None or current[2] >= self.roll_bytes:
            if current is not None:
                self._close_writer(tid)
            seq = self._last_seq.get(tid, -1) + 1
            self._last_seq[tid] = seq
            directory = self.root / str(tid)
            if not directory.is_dir():
                directory.mkdir(parents=True, exist_ok=True)
                self._new_dirs.update((directory, self.root, self.root.parent))
            fd = os.open(self.path(tid, seq), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            self._new_dirs.add(directory)
            current = (seq, fd, os.fstat(fd).st_size)
        seq, fd, size = current
        view = memoryview(body)
        done = 0
        try:
            while done < len(view):
                done += os.write(fd, view[done:])
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)  # leave no half body behind
            raise
        self._writing[tid] = (seq, fd, size + done)
        if self.durable:
            self._dirty.add(fd)
        return seq, size

    def sync(self) -> None:
        """``fdatasync`` every segment written since the last call, and new directories."""
        for fd in self._dirty:
            os.fdatasync(fd)
        self._dirty.clear()
        for directory in sorted(self._new_dirs, key=lambda p: -len(p.parts)):
            if not self.durable:
                continue
            with contextlib.suppress(FileNotFoundError):
                dfd = os.open(directory, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        self._new_dirs.clear()

    def forget_unsynced(self) -> None:
        """After a rolled-back transaction: what was written is unreferenced (cut at next open)."""
        self._dirty.clear()

    def _close_writer(self, tid: int) -> None:
        current = self._writing.pop(tid, None)
        if current is not None:
            fd = current[1]
            try:
                if fd in self._dirty:  # rolled inside a transaction: its bytes must be synced
                    self._dirty.discard(fd)
                    os.fdatasync(fd)
            finally:
                os.close(fd)

    def retire(self, tid: int, seq: int) -> None:
        """No more appends to segment ``seq`` of topic ``tid`` (its rows are being released)."""
        current = self._writing.get(tid)
        if current is not None and current[0] == seq:
            self._close_writer(tid)

    def delete(self, tid: int, seqs: Iterable[int]) -> None:
        """Delete segments of topic ``tid`` no row refers to any more."""
        for seq in seqs:
            current = self._writing.get(tid)
            if current is not None and current[0] == seq:
                self._close_writer(tid)
            with self._lock:
                fd = self._readers.pop((tid, seq), None)
            if fd is not None:
                os.close(fd)
            with contextlib.suppress(FileNotFoundError):
                self.path(tid, seq).unlink()

    def tidy(self, ends: dict[tuple[int, int], int]) -> None:
        """At open: delete segment files not in ``ends``; cut the others to their end.

        ``ends`` maps ``(topic id, seq)`` to the end of the last body a
        committed row names in that segment.
        """
        if not self.root.is_dir():
            return
        for topic_dir in self.root.iterdir():
            try:
                tid = int(topic_dir.name)
            except ValueError:
                continue
            for file in topic_dir.glob("*.seg"):
                try:
                    seq = int(file.stem)
                except ValueError:
                    continue
                self._last_seq[tid] = max(self._last_seq.get(tid, -1), seq)
                end = ends.get((tid, seq))
                if end is None:
                    file.unlink()
                elif file.stat().st_size > end:
                    os.truncate(file, end)

    # -- reading (any thread) --------------------------------------------------------

    def read(self, tid: int, seq: int, pos: int, length: int) -> bytes:
        """``length`` bytes at ``pos`` of a segment (fewer when the file is shorter).

        A missing file raises ``FileNotFoundError``.
        """
        key = (tid, seq)
        with self._lock:
            fd = self._readers.get(key)
            if fd is None:
                if len(self._readers) >= _OPEN_READERS:  # segments deleted meanwhile
                    for old in self._readers.values():
                        os.close(old)
                    self._readers.clear()
                fd = self._readers[key] = os.open(self.path(tid, seq), os.O_RDONLY)
        return os.pread(fd, length, pos)

    def close(self) -> None:
        """Close every open file (idempotent)."""
        for tid in list(self._writing):
            self._close_writer(tid)
        with self._lock:
            fds = list(self._readers.values())
            self._readers.clear()
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
