"""The direct reader's failures, named exactly (issue 20: survivors of the first mutation
run of ``dcps/store/_log_reader.py``).

A SQLite failure in a read names the file and what was being read; a damaged segment body
names its segment, position and whether it is cut short or does not match its CRC; every
such error is also logged at ERROR on the ``dcps.store`` logger. Damage is made as
another program would make it: a second SQLite connection or a write to the segment file.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dcps import DcpsError, PreconditionNotMetError
from dcps.store._log import STORE_FILE, ChannelLog, LogReader
from dcps.store._log_segments import INLINE_MAX
from tests.store.test_log_reader_mutants import change, exactly, store


def errors_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "dcps.store" and r.levelno == logging.ERROR
    ]


READS: list[tuple[str, str, Callable[[LogReader], Any]]] = [
    ("topics", "listing topics", lambda r: r.topics()),
    ("topics", "reading topic 'a'", lambda r: r.topic("a")),
    ("channels", "reading topic 'a' channel 1", lambda r: r.channel_state("a", 1)),
    ("channels", "reading the channels of topic 'a'", lambda r: r.channel_states("a")),
    ("channels", "reading topic 'a' channel 0", lambda r: r.time_range("a", 0)),
    ("batches", "searching topic 'a' channel 0 by time", lambda r: r.find_timestamp("a", 0, 1)),
    ("batches", "reading topic 'a' channel 0 at offset 2", lambda r: r.fetch("a", 0, 2, 3)),
]


class TestSqlFailures:
    @pytest.mark.parametrize(("table", "doing", "read"), READS, ids=[d for _, d, _ in READS])
    def test_a_failed_read_names_the_file_and_what_it_read(
        self,
        tmp_path: Path,
        caplog: pytest.LogCaptureFixture,
        table: str,
        doing: str,
        read: Callable[[LogReader], Any],
    ) -> None:
        data_dir = store(tmp_path)
        with LogReader.open(data_dir) as reader:
            if table != "topics":
                reader.topics()  # the topic is known: the failure is the table's
            change(data_dir, f"ALTER TABLE {table} RENAME TO gone_{table}")
            caplog.clear()
            with pytest.raises(DcpsError) as info:
                read(reader)
            message = (
                f"{data_dir / STORE_FILE}: {doing} failed: no such table: {table} [SQLITE_ERROR]"
            )
            assert str(info.value) == message
            assert errors_logged(caplog) == [f"dcps store: {message}"]
            change(data_dir, f"ALTER TABLE gone_{table} RENAME TO {table}")
            read(reader)  # the reader is usable again (its lock was released)


def blob(n: int) -> bytes:
    return bytes([n]) * (INLINE_MAX + 100)


def segment_store(tmp_path: Path) -> tuple[Path, Path]:
    """Topic 't': element 0 inline, elements 1 and 2 in a segment body; the segment."""
    with ChannelLog.in_dir(tmp_path) as log:
        log.ensure_topic("t", 1, retain_consumed=True)
        log.append("t", 0, [b"small"])
        log.append("t", 0, [blob(1), blob(2)])
    segments = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != STORE_FILE]
    segments = [p for p in segments if not p.name.startswith(STORE_FILE)]
    assert len(segments) == 1, segments
    return tmp_path, segments[0]


class TestSegments:
    def test_a_body_not_matching_its_crc_names_segment_and_position(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        data_dir, segment = segment_store(tmp_path)
        with LogReader.open(data_dir) as reader:
            assert reader.read_range("t", 0, 1, 3).payloads() == [blob(1), blob(2)]
        (pos,) = (
            sqlite3.connect(data_dir / STORE_FILE)
            .execute("SELECT pos FROM batches WHERE first_offset = 1")
            .fetchone()
        )
        with segment.open("r+b") as f:
            f.seek(pos + 10)
            byte = f.read(1)
            f.seek(pos + 10)
            f.write(bytes([byte[0] ^ 0xFF]))
        caplog.clear()
        with LogReader.open(data_dir) as reader:
            with pytest.raises(PreconditionNotMetError) as info:
                reader.fetch("t", 0, 0, 3)
            message = (
                f"{data_dir / STORE_FILE} is damaged at topic 't' channel 0 offset 1: its body "
                f"in segment {segment} at {pos} is damaged (CRC mismatch)"
            )
            assert str(info.value) == message
            assert errors_logged(caplog) == [f"dcps store: {message}"]
            assert reader.fetch("t", 0, 0, 1)[0].payloads() == [b"small"]

    def test_a_cut_body_says_so(self, tmp_path: Path) -> None:
        data_dir, segment = segment_store(tmp_path)
        (pos,) = (
            sqlite3.connect(data_dir / STORE_FILE)
            .execute("SELECT pos FROM batches WHERE first_offset = 1")
            .fetchone()
        )
        with segment.open("r+b") as f:
            f.truncate(pos + 5)
        with LogReader.open(data_dir) as reader, pytest.raises(PreconditionNotMetError) as info:
            reader.read_range("t", 0, 1, 3)
        assert str(info.value) == (
            f"{data_dir / STORE_FILE} is damaged at topic 't' channel 0 offset 1: its body "
            f"in segment {segment} at {pos} is cut short"
        )

    def test_damaged_sizes_of_a_segment_body(self, tmp_path: Path) -> None:
        data_dir, _ = segment_store(tmp_path)
        message = (
            f"{data_dir / STORE_FILE} is damaged at topic 't' channel 0 offset 1: "
            "the stored batch's element sizes are damaged"
        )
        for sizes in ("x'ffffffff01000000'", "x'0100000001000000ff'", "'text'"):
            change(data_dir, f"UPDATE batches SET sizes = {sizes} WHERE first_offset = 1")
            with LogReader.open(data_dir) as reader:
                with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                    reader.fetch("t", 0, 1, 2)
                assert reader.fetch("t", 0, 0, 1)[0].payloads() == [b"small"]


class TestRanges:
    def test_a_range_from_the_head_past_the_tail_names_the_tail(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path, retained=False)
        with LogReader.open(data_dir) as reader:
            head = reader.channel_state("a", 0).head
            with pytest.raises(PreconditionNotMetError) as info:
                reader.read_range("a", 0, head, 12)
        assert str(info.value) == (
            f"topic 'a' channel 0: elements {head}..11 are not all stored (got {9 - head}); "
            "the channel's tail is 8"
        )

    def test_a_damaged_run_is_logged(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        data_dir = store(tmp_path)
        change(data_dir, "DELETE FROM batches WHERE first_offset = 3")
        caplog.clear()
        with LogReader.open(data_dir) as reader, pytest.raises(PreconditionNotMetError) as info:
            reader.fetch("a", 0, 0, 9)
        assert errors_logged(caplog) == [f"dcps store: {info.value}"]
        assert re.search("offset 3: elements 0..8 should be stored, 3 were found", str(info.value))
