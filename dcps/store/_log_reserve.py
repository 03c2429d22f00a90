"""Disk space set aside so that a store on a full disk keeps working.

A store file in WAL mode needs new disk space for every write transaction,
even a commit that changes one row. So the log keeps a reserve file
(``channels.db-reserve``, 1 MiB by default) next to its file. When the disk is
full, publishing fails with ``OutOfResourcesError``; an operation that needs
little space (a commit, a seek, a join, dropping a group, opening the store)
that fails for lack of space releases the reserve and is retried once, so it
goes through. While the reserve is released, appends are refused before
they are tried (they would eat the space the small operations need); each
append first tries to make the reserve again, so publishing resumes by
itself once space is freed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from pathlib import Path

__all__ = ["DEFAULT_RESERVE_BYTES", "SpaceReserve"]

_log = logging.getLogger("dcps.store")

#: Bytes a store keeps in reserve for commits, joins and group changes on a full disk.
DEFAULT_RESERVE_BYTES = 1 << 20


class SpaceReserve:
    """The reserve file of one store file (``<file>-reserve``)."""

    def __init__(self, store_file: Path, size: int = DEFAULT_RESERVE_BYTES) -> None:
        self.path = Path(f"{store_file}-reserve")
        self.size = size
        self.held = size <= 0 or self._has_full_size()

    def _has_full_size(self) -> bool:
        try:
            return self.path.stat().st_blocks * 512 >= self.size
        except OSError:
            return False

    def ensure(self) -> bool:
        """Make the reserve if it is not held; True if it is held now."""
        if self.held:
            return True
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError:
            return False
        try:
            try:
                os.posix_fallocate(fd, 0, self.size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                    raise
                os.ftruncate(fd, 0)  # no fallocate here: write real blocks
                chunk = b"\0" * 65536
                for _ in range(0, self.size, len(chunk)):
                    os.write(fd, chunk)
        except OSError:
            os.close(fd)
            self._remove()
            return False
        os.close(fd)
        self.held = True
        _log.info("dcps store: disk space reserve %s is held again", self.path)
        return True

    def release(self) -> bool:
        """Free the reserve for an operation that must go through; False if none was held."""
        if not self.held or self.size <= 0:
            return False
        self._remove()
        self.held = False
        _log.warning(
            "dcps store: the disk of %s is full; released its %d-byte reserve so commits, "
            "joins and group changes go on; publishing is refused until space is freed",
            self.path,
            self.size,
        )
        return True

    def _remove(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
