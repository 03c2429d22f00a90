"""Older store files, made from a current one: for the migration tests."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dcps.store._log import FORMAT_VERSION, STORE_FILE, ChannelLog

__all__ = ["downgrade_to_v3", "migrated"]


@contextmanager
def migrated(data_dir: Path, version: int, *statements: str) -> Iterator[sqlite3.Connection]:
    """A new store file in ``data_dir`` turned into a version-``version`` file by the SQL
    ``statements``, then opened (so migrated) and closed by a store's log: yields a
    connection to the file, which says the current format version."""
    ChannelLog.in_dir(data_dir).close()
    db = sqlite3.connect(data_dir / STORE_FILE)
    for statement in statements:
        db.execute(statement)
    db.execute("UPDATE dcps_format SET value = ? WHERE key = 'version'", (str(version),))
    db.commit()
    db.close()
    ChannelLog.in_dir(data_dir).close()
    db = sqlite3.connect(data_dir / STORE_FILE)
    try:
        found = db.execute("SELECT value FROM dcps_format WHERE key = 'version'").fetchone()
        assert found == (str(FORMAT_VERSION),), f"migrated from {version}, the file says {found}"
        yield db
    finally:
        db.close()


def downgrade_to_v3(path: Path, stamps: list[tuple[int, int, int]] | None = None) -> None:
    """Turn the (closed) format-4 store file ``path`` into a format-3 one.

    Drops the segment columns (every body must be inline) and, when given,
    sets ``(channel, first_offset, ts)`` stamps on batches of topic id 1, as a
    version-3 store shared one timestamp per batch.
    """
    db = sqlite3.connect(path)
    try:
        if db.execute("SELECT count(*) FROM batches WHERE segment IS NOT NULL").fetchone()[0]:
            raise ValueError(f"{path} has segment bodies: a version-3 file cannot hold them")
        db.execute("DROP INDEX batches_segment")
        for column in ("segment", "pos", "crc"):
            db.execute(f"ALTER TABLE batches DROP COLUMN {column}")
        for channel, first, ts in stamps or []:
            db.execute(
                "UPDATE batches SET ts = ? WHERE topic_id = 1 AND channel = ? AND first_offset = ?",
                (ts, channel, first),
            )
        db.execute("UPDATE dcps_format SET value = '3' WHERE key = 'version'")
        db.commit()
    finally:
        db.close()
