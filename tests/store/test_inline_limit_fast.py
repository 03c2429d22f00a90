"""Where a batch body goes by sync mode (issue 19): segment files from 4 KiB with NORMAL,
from 32 KiB with FULL, and every byte reads back either way (real log, real files)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from dcps.store._log import (
    INLINE_MAX,
    NORMAL_INLINE_MAX,
    STORE_FILE,
    ChannelLog,
    LogReader,
    SyncMode,
)
from dcps.store._log_segments import segment_dir


def segment_rows(path: Path) -> list[Any]:
    """(first offset, in a segment) of every stored batch, in offset order."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT first_offset, segment IS NOT NULL FROM batches ORDER BY first_offset"
        ).fetchall()
    finally:
        db.close()


def payloads(size: int, seq: int) -> list[bytes]:
    """Elements of 64 B adding up to ``size`` bytes, each telling its batch apart."""
    assert size % 64 == 0
    return [bytes([seq, i % 256]) * 32 for i in range(size // 64)]


@pytest.mark.parametrize(
    ("sync", "limit"), [(SyncMode.NORMAL, NORMAL_INLINE_MAX), (SyncMode.FULL, INLINE_MAX)]
)
def test_bodies_from_the_limit_go_to_segments_and_read_back(
    tmp_path: Path, sync: SyncMode, limit: int
) -> None:
    path = tmp_path / STORE_FILE
    sizes = [limit - 64, limit, 4 * limit]
    batches = [payloads(size, seq) for seq, size in enumerate(sizes)]
    with ChannelLog(path, sync=sync) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
        for batch in batches:
            log.append("t", 0, batch)
        everything = [p for batch in batches for p in batch]
        assert [e.data for e in log.fetch("t", 0, 0, len(everything))] == everything
    first = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert segment_rows(path) == [(first[0], 0), (first[1], 1), (first[2], 1)]
    assert sum(f.stat().st_size for f in segment_dir(path).rglob("*.seg")) == 5 * limit
    with LogReader.open(tmp_path) as reader:
        run = reader.read_range("t", 0, first[1], first[2] + len(batches[2]))
        assert run.payloads() == batches[1] + batches[2]


def test_normal_keeps_a_body_below_4_kib_inline(tmp_path: Path) -> None:
    """The latency case (one small element per batch) stays a single SQLite row."""
    path = tmp_path / STORE_FILE
    with ChannelLog(path, sync=SyncMode.NORMAL) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
        log.append("t", 0, [b"x" * 92])
    assert segment_rows(path) == [(0, 0)]
    assert not segment_dir(path).exists() or not list(segment_dir(path).rglob("*.seg"))


def test_an_explicit_limit_wins_over_the_sync_mode(tmp_path: Path) -> None:
    path = tmp_path / STORE_FILE
    with ChannelLog(path, sync=SyncMode.NORMAL, inline_max=1 << 20) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
        log.append("t", 0, payloads(64 * 1024, 1))
    assert segment_rows(path) == [(0, 0)]
