"""The one reader of a store file (LogReader.open): every query the Spark side needs."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    PreconditionNotMetError,
    UnsupportedError,
)
from dcps.store._log import STORE_FILE, ChannelLog, ChannelState, LogReader
from tests.store.test_store_log import US, Clock, make_v1_store


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data dir: topic 'a' (2 channels, retained), 'b' (1 channel, group 'g' committed)."""
    clock = Clock()
    with ChannelLog.in_dir(tmp_path, clock=clock) as log:
        log.ensure_topic("a", 2, retain_consumed=True, type_name="A", type_identity="A#1")
        log.ensure_topic("b", 1)
        log.create_group("b", "g")
        for ts, (channel, n) in enumerate([(0, 3), (0, 2), (1, 1), (0, 4)], start=1):
            clock.now = ts * 10 * US  # batch first elements at 10, 20, 30, 40 µs
            log.append("a", channel, [b"a%d-%d" % (ts, i) for i in range(n)])
        log.append("b", 0, [b"%d" % i for i in range(6)])
        log.commit("b", "g", 0, 2)
    return tmp_path


class TestLogReader:
    def test_opens_a_data_dir_by_its_file_name(self, data_dir: Path) -> None:
        """LogReader.open(data_dir) reads STORE_FILE in it; no store needs to run."""
        with LogReader.open(data_dir) as reader:
            assert reader.path == data_dir / STORE_FILE
            assert [t.name for t in reader.topics()] == ["a", "b"]
            a = reader.topic("a")
            assert (a.channel_count, a.retain_consumed, a.type_name) == (2, True, "A")

    def test_missing_file_and_unknown_names(self, data_dir: Path, tmp_path: Path) -> None:
        """No file, unknown topics and channels raise BadParameterError naming them."""
        empty = tmp_path / "empty"
        empty.mkdir()
        with pytest.raises(BadParameterError, match=re.escape(str(empty / STORE_FILE))):
            LogReader.open(empty)
        with LogReader.open(data_dir) as reader:
            with pytest.raises(BadParameterError, match="'zz'"):
                reader.topic("zz")
            with pytest.raises(BadParameterError, match=r"channels 0\.\.1"):
                reader.channel_state("a", 2)

    def test_a_version_1_file_is_refused_naming_its_version(self, tmp_path: Path) -> None:
        """A not yet migrated file is not read directly."""
        make_v1_store(tmp_path / STORE_FILE)
        with pytest.raises(UnsupportedError, match="version 1"):
            LogReader.open(tmp_path)

    def test_heads_tails_and_time_ranges(self, data_dir: Path) -> None:
        """Channel states in one snapshot; time range of the available elements."""
        with LogReader.open(data_dir) as reader:
            assert reader.channel_states("a") == [ChannelState(0, 8), ChannelState(0, 0)]
            assert reader.channel_states("b") == [ChannelState(3, 5)]
            assert reader.channel_state("b", 0).count == 3
            assert reader.time_range("a", 0) == (10 * US, 43 * US)  # 4 elements from 40 µs
            assert reader.time_range("a", 1) == (30 * US, 30 * US)

    def test_offset_at_or_after_a_timestamp(self, data_dir: Path) -> None:
        """find_timestamp: first offset accepted at or after; tail + 1 when all are older.

        Each element has its own timestamp: a batch's ``ts`` plus 1 µs per element.
        """
        with LogReader.open(data_dir) as reader:
            assert reader.find_timestamp("a", 0, 0) == 0
            assert reader.find_timestamp("a", 0, 10 * US + 1) == 1
            assert reader.find_timestamp("a", 0, 12 * US + 1) == 3
            assert reader.find_timestamp("a", 0, 40 * US) == 5
            assert reader.find_timestamp("a", 0, 41 * US) == 6
            assert reader.find_timestamp("a", 0, 43 * US + 1) == 9

    def test_exact_ranges_or_an_error(self, data_dir: Path) -> None:
        """read_range returns exactly the range, or fails: released or not yet stored."""
        with LogReader.open(data_dir) as reader:
            run = reader.read_range("a", 0, 2, 7)
            assert run.offsets().tolist() == [2, 3, 4, 5, 6]
            assert run.payloads()[:2] == [b"a1-2", b"a2-0"]
            assert run.timestamps().tolist() == [12 * US, 20 * US, 21 * US, 40 * US, 41 * US]
            with pytest.raises(PreconditionNotMetError, match="released"):
                reader.read_range("b", 0, 1, 5)
            with pytest.raises(PreconditionNotMetError, match="tail is 8"):
                reader.read_range("a", 0, 5, 12)
            assert reader.read_range("b", 0, 3, 6).payloads() == [b"3", b"4", b"5"]
            runs = list(reader.runs("a", 0, 0, 9, 4))
            assert [(r.first, r.count) for r in runs] == [(0, 4), (4, 4), (8, 1)]

    def test_reads_while_a_store_writes(self, data_dir: Path) -> None:
        """A reader sees committed batches whole while the log appends from another thread."""
        stop = threading.Event()
        with ChannelLog.in_dir(data_dir) as log, LogReader.open(data_dir) as reader:

            def write() -> None:
                while not stop.is_set():
                    log.append("a", 1, [b"x"] * 7)

            writer = threading.Thread(target=write)
            writer.start()
            try:
                for _ in range(200):
                    run, state = reader.fetch("a", 1, 0, 1_000_000)
                    assert run.count == state.count
                    assert (state.count - 1) % 7 == 0
            finally:
                stop.set()
                writer.join()

    def test_closed_reader(self, data_dir: Path) -> None:
        """A closed reader refuses reads with AlreadyClosedError; close is idempotent."""
        reader = LogReader.open(data_dir)
        reader.close()
        reader.close()
        with pytest.raises(AlreadyClosedError, match=re.escape(str(data_dir))):
            reader.topics()
