"""WAL checkpoints of the store file, on a thread of their own.

SQLite's automatic checkpoint runs inside the COMMIT that crosses 1,000 WAL
pages, on the committing thread: it copies the WAL into the file and syncs
both (two or three ``fdatasync`` calls, 2-10 ms each on these machines) while
the store's one thread waits. A store taking 1,000 single-element batches a
second (each COMMIT adds 3-4 pages) crossed that line every 130-250 ms, so
about one element in a hundred waited a checkpoint out: that was the tail of
the publish->receive latency (measured with ``strace -e fdatasync`` on the
store process during ``bench_sizes``' latency case).

The log's own connection therefore has ``wal_autocheckpoint=0`` and a
:class:`Checkpointer` runs ``PRAGMA wal_checkpoint(PASSIVE)`` on its own
connection after every ``CHECKPOINT_COMMITS`` commits (a commit adds 3-5
pages: about SQLite's own cadence of 1,000 pages), or ``CHECKPOINT_INTERVAL``
seconds after a commit when fewer came. A passive checkpoint never blocks the writer (SQLite
lets a writer append to the WAL while another connection copies it), and
Python's ``sqlite3`` releases the GIL while it runs. Durability does not
change: a commit is in the WAL (synced per ``synchronous``) before it is
confirmed, whatever the checkpoint does.

SQLite starts the WAL over (reuses the file from its beginning) only when a
write transaction begins after a checkpoint that copied every frame; a writer
that keeps appending while another connection checkpoints never sees that, and
the WAL grows without end (measured: 351 MB after 20,000 single-row commits,
against 4.1 MB with the automatic checkpoint). So once the WAL holds
``RESTART_FRAMES`` frames, the checkpoint thread takes :attr:`Checkpointer.lock`,
which the log holds around each write transaction, and checkpoints the few
frames appended since its last pass: the next transaction starts the WAL over.
The log's thread waits for that short pass (a copy of a few pages and the
syncs) once per ``RESTART_FRAMES`` frames (16 MiB of WAL at 4 KiB pages, every
~1 s at 1,000 single-element commits a second), instead of a full checkpoint
every 1,000 pages.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

__all__ = ["CHECKPOINT_COMMITS", "CHECKPOINT_INTERVAL", "RESTART_FRAMES", "Checkpointer"]

_log = logging.getLogger("dcps.store")

#: A checkpoint starts after this many commits ...
CHECKPOINT_COMMITS = 200
#: ... or this many seconds after the first commit not checkpointed yet.
CHECKPOINT_INTERVAL = 1.0
#: A WAL of this many frames is started over (the log's writes wait for a short pass).
RESTART_FRAMES = 4096


class Checkpointer:
    """Checkpoints one store file's WAL from a daemon thread (started on the first commit)."""

    def __init__(
        self,
        path: Path,
        synchronous: str,
        *,
        commits: int = CHECKPOINT_COMMITS,
        interval: float = CHECKPOINT_INTERVAL,
        restart_frames: int = RESTART_FRAMES,
    ) -> None:
        #: Held by the log around each write transaction (see the module).
        self.lock = threading.Lock()
        self._restart_frames = restart_frames
        self._path = path
        self._synchronous = synchronous
        self._commits = commits
        self._interval = interval
        self._since = 0  # commits since the last checkpoint started
        self._due = threading.Event()  # enough commits, or closing
        self._closing = False
        self._thread: threading.Thread | None = None

    def committed(self) -> None:
        """Note a commit (the log's thread, after each COMMIT)."""
        self._since += 1
        if self._since >= self._commits:
            self._due.set()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="dcps-store-checkpoint", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop the thread (after a checkpoint in progress) and close its connection."""
        self._closing = True
        self._due.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        try:
            db = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:  # the log's own connection reports real trouble
            _log.warning("dcps store: %s: no checkpoint thread (%s)", self._path, exc)
            return
        try:
            db.execute(f"PRAGMA synchronous={self._synchronous}")
            while True:
                self._due.wait(self._interval)
                self._due.clear()
                if self._closing:
                    return
                if not self._since:
                    continue
                self._since = 0  # commits counted meanwhile wait for the next one
                try:
                    _, frames, _ = db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
                    if frames >= self._restart_frames:
                        with self.lock:  # no write in between: the next one restarts the WAL
                            db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:  # e.g. a full disk: the next one tries again
                    _log.debug("dcps store: %s: checkpoint failed: %s", self._path, exc)
        finally:
            db.close()
