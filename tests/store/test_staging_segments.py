"""Staged chunks whose bodies sit in segment files (format version 12).

A large staged chunk is written once, to its topic's segment file; the commit
moves the reference into ``batches``. These tests check what a user of the
sink would notice: the elements read back intact after a commit, after the
store process is killed between staging and commit, after retention released
the batches sharing the segment, and that aborted bodies do not stay on disk.
"""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import dcps.store._log as log_module
from dcps.store._log import FORMAT_VERSION, STORE_FILE, ChannelLog
from dcps.store._log_segments import INLINE_MAX, segment_dir
from dcps.store._staging import staging_of
from dcps.wire._staging import StageRequest

#: Elements of a large staged chunk: 64 elements of 1 KiB (twice INLINE_MAX in all).
_N, _SIZE = 64, 1024
assert _N * _SIZE >= INLINE_MAX


def _payloads(tag: int) -> list[bytes]:
    return [bytes([tag, i]) * (_SIZE // 2) for i in range(_N)]


def _chunk(topic: str, query: str, epoch: int, stage: str, seq: int, tag: int) -> StageRequest:
    body = _payloads(tag)
    return StageRequest(
        topic, query, epoch, 0, stage, seq, 0, [len(p) for p in body], b"".join(body)
    )


def _segment_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in segment_dir(path).rglob("*.seg"))


def test_a_large_chunk_is_written_once_and_committed_by_reference(tmp_path: Path) -> None:
    """The body lands in a segment file at staging; the commit copies no payload byte."""
    path = tmp_path / STORE_FILE
    with ChannelLog(path) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
        staging = staging_of(log)
        staging.stage(_chunk("t", "q", 0, "s", 0, 1))
        assert _segment_bytes(path) == _N * _SIZE  # the body, once
        done, placed = staging.commit("t", "q", 0, [("s", 1)])
        assert (done.elements, len(placed)) == (_N, 1)
        assert _segment_bytes(path) == _N * _SIZE  # still once: moved by reference
        assert [e.data for e in log.fetch("t", 0, 0, _N)] == _payloads(1)
        assert staging.chunk_payloads("t", placed[0]).blob == b"".join(_payloads(1))
    db = sqlite3.connect(path)
    try:
        rows = db.execute("SELECT length(data), segment FROM batches").fetchall()
    finally:
        db.close()
    assert rows == [(0, 0)]  # the row refers to segment 0, its data column is empty


def test_a_killed_store_keeps_staged_bodies_for_the_commit(tmp_path: Path) -> None:
    """A store process killed (SIGKILL) after staging: the restarted store commits intact data,
    and the open-time tidy of segment files keeps the staged bodies past the last batch."""
    path = tmp_path / STORE_FILE
    with ChannelLog(path) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parents[2])!r})
        from dcps.store._log import ChannelLog
        from dcps.store._staging import staging_of
        from tests.store.test_staging_segments import _chunk
        log = ChannelLog({str(path)!r})
        log.append("t", 0, [b"published"])  # a committed batch before the staged bodies
        log.append("t", 0, [b"x" * 40000])  # a large one: in the segment too
        staging_of(log).stage(_chunk("t", "q", 5, "s", 0, 2))
        staging_of(log).stage(_chunk("t", "q", 5, "s", 1, 3))
        print("staged", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.stdout.strip() == "staged", proc.stderr
    assert proc.returncode == -signal.SIGKILL
    with ChannelLog(path) as log:  # the restarted store
        done, _ = staging_of(log).commit("t", "q", 5, [("s", 2)])
        assert done.elements == 2 * _N
        got = [e.data for e in log.fetch("t", 0, 0, 2 + 2 * _N)]
        assert got == [b"published", b"x" * 40000, *_payloads(2), *_payloads(3)]


def test_retention_keeps_a_segment_that_staged_chunks_still_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Batches released by retention share a segment with chunks staged meanwhile: the
    segment stays until those chunks are committed and read."""
    monkeypatch.setattr(log_module, "_SEGMENT_GRACE", 0.0)  # released files go at once
    path = tmp_path / STORE_FILE
    with ChannelLog(path) as log:
        log.ensure_topic("t", 1)  # no groups, no retention: released once pushed
        staging = staging_of(log)
        staging.stage(_chunk("t", "a", 0, "s", 0, 4))
        staging.commit("t", "a", 0, [("s", 1)])
        staging.stage(_chunk("t", "b", 0, "s", 0, 5))  # same segment, not committed yet
        assert log.trim("t") == _N  # the first transaction's elements are released
        log.append("t", 0, [b"tick"])  # a later commit deletes what was released
        staging.commit("t", "b", 0, [("s", 1)])
        assert [e.data for e in log.fetch("t", 0, _N + 1, _N)] == _payloads(5)


def test_an_aborted_bodys_segment_file_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bodies only an aborted transaction referred to do not stay on disk."""
    monkeypatch.setattr(log_module, "_SEGMENT_GRACE", 0.0)
    path = tmp_path / STORE_FILE
    with ChannelLog(path) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
        staging = staging_of(log)
        staging.stage(_chunk("t", "q", 0, "s", 0, 6))
        assert _segment_bytes(path) == _N * _SIZE
        assert staging.abort("t", "q", 0) == 1
        log.append("t", 0, [b"small"])  # the next commit deletes the released file
        assert _segment_bytes(path) == 0
        staging.stage(_chunk("t", "q", 1, "s", 0, 7))  # staging goes on in a new segment
        staging.commit("t", "q", 1, [("s", 1)])
        assert [e.data for e in log.fetch("t", 0, 0, 1 + _N)] == [b"small", *_payloads(7)]


def test_a_version_9_file_gains_the_columns_and_its_staged_chunks_commit(tmp_path: Path) -> None:
    """Opening a version-9 file adds staged.segment/pos/crc; chunks staged before (inline)
    still commit, and new large chunks go to segment files."""
    path = tmp_path / STORE_FILE
    with ChannelLog(path) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
    db = sqlite3.connect(path)
    try:  # the file as a version-9 store left it, with a chunk staged inline
        for column in ("segment", "pos", "crc"):
            db.execute(f"ALTER TABLE staged DROP COLUMN {column}")
        body = _payloads(8)
        db.execute(
            "INSERT INTO staged VALUES (1, 'q', 0, 's', 0, 0, 0, ?, 0, ?, ?)",
            (_N, np.full(_N, _SIZE, dtype="<i4").tobytes(), b"".join(body)),
        )
        db.execute("UPDATE dcps_format SET value = '9' WHERE key = 'version'")
        db.commit()
    finally:
        db.close()
    with ChannelLog(path) as log:
        staging = staging_of(log)
        staging.stage(_chunk("t", "q", 0, "s", 1, 9))
        done, _ = staging.commit("t", "q", 0, [("s", 2)])
        assert done.elements == 2 * _N
        assert [e.data for e in log.fetch("t", 0, 0, 2 * _N)] == [*_payloads(8), *_payloads(9)]
    db = sqlite3.connect(path)
    try:
        version = db.execute("SELECT value FROM dcps_format WHERE key = 'version'").fetchone()
        rows = db.execute("SELECT length(data) > 0, segment FROM batches ORDER BY 2").fetchall()
    finally:
        db.close()
    assert version == (str(FORMAT_VERSION),)
    assert rows == [(1, None), (0, 0)]  # the old chunk copied inline, the new one by reference
