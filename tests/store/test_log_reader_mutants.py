"""The direct reader of a store file, exact: messages naming path, topic, channel and
offset, every edge of the time search and of exact ranges, and damage it must not skip
(issue 20: the mutants of ``dcps/store/_log_reader.py`` these tests kill went unseen).

Damage is made as another program would make it: a second SQLite connection changes
the file.
"""

from __future__ import annotations

import logging
import re
import sqlite3
from pathlib import Path

import pytest

from dcps import AlreadyClosedError, BadParameterError, PreconditionNotMetError
from dcps.store._log import STORE_FILE, ChannelLog, ChannelState, LogReader
from tests.store.test_store_log import US, Clock


def store(tmp_path: Path, *, retained: bool = True) -> Path:
    """Topic 'a' (2 channels): channel 0 has batches of 3, 2 and 4 elements accepted at 10,
    20 and 40 µs (each element 1 µs after the one before); channel 1 is empty."""
    clock = Clock()
    with ChannelLog.in_dir(tmp_path, clock=clock) as log:
        log.ensure_topic("a", 2, retain_consumed=retained)
        for ts, n in ((10, 3), (20, 2), (40, 4)):
            clock.now = ts * US
            log.append("a", 0, [b"e%d-%d" % (ts, i) for i in range(n)])
    return tmp_path


def change(data_dir: Path, sql: str) -> None:
    db = sqlite3.connect(data_dir / STORE_FILE)
    db.execute(sql)
    db.commit()
    db.close()


def exactly(text: str) -> str:
    return "^" + re.escape(text) + "$"


class TestOpen:
    def test_no_file(self, tmp_path: Path) -> None:
        with pytest.raises(
            BadParameterError, match=exactly(f"no dcps store file at {tmp_path}/{STORE_FILE}")
        ):
            LogReader.open(tmp_path)

    def test_an_empty_sqlite_file_is_no_store(self, tmp_path: Path) -> None:
        path = tmp_path / STORE_FILE
        path.write_bytes(b"")
        with pytest.raises(
            BadParameterError, match=exactly(f"{path} is an empty SQLite file, not a dcps store")
        ):
            LogReader.open(tmp_path)

    def test_closed(self, tmp_path: Path) -> None:
        reader = LogReader.open(store(tmp_path))
        reader.close()
        message = f"the reader of the store file {tmp_path / STORE_FILE} is closed"
        with pytest.raises(AlreadyClosedError, match=exactly(message)):
            reader.channel_state("a", 0)
        # the reader is not left locked by the refusal
        with pytest.raises(AlreadyClosedError):
            reader.topic("a")


class TestNames:
    def test_unknown_topic_and_channels(self, tmp_path: Path) -> None:
        with LogReader.open(store(tmp_path)) as reader:
            path = tmp_path / STORE_FILE
            with pytest.raises(
                BadParameterError, match=exactly(f"no channelled topic 'zz' in the store ({path})")
            ):
                reader.channel_states("zz")
            for bad in (-1, 2, "0"):
                with pytest.raises(
                    BadParameterError, match=exactly(f"topic 'a' has channels 0..1, not {bad!r}")
                ):
                    reader.channel_state("a", bad)  # type: ignore[arg-type]
            assert reader.channel_state("a", 1) == ChannelState(0, -1)

    def test_topics_are_listed_by_name_with_their_configuration(self, tmp_path: Path) -> None:
        with ChannelLog.in_dir(tmp_path) as log:
            log.ensure_topic("z", 3, retain_consumed=False, type_name="Z", type_identity="Z#1")
            log.ensure_topic("b", 1, retain_consumed=True)
        with LogReader.open(tmp_path) as reader:
            b, z = reader.topics()
            assert (b.name, b.channel_count, b.retain_consumed) == ("b", 1, True)
            assert (z.name, z.channel_count, z.retain_consumed) == ("z", 3, False)
            assert (z.type_name, z.type_identity) == ("Z", "Z#1")
            assert reader.topic("z") == z


class TestTime:
    def test_time_range_of_an_empty_and_a_trimmed_channel(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path, retained=False)
        with ChannelLog.in_dir(data_dir) as log:
            log.create_group("a", "g")
            log.commit("a", "g", 0, 3)  # 0..3 consumed: head 4, inside the second batch
        with LogReader.open(data_dir) as reader:
            assert reader.time_range("a", 1) is None
            assert reader.channel_state("a", 0) == ChannelState(4, 8)
            assert reader.time_range("a", 0) == (21 * US, 43 * US)
            # before the head: the head
            assert reader.find_timestamp("a", 0, 0) == 4
            assert reader.find_timestamp("a", 0, 11 * US) == 4

    @pytest.mark.parametrize(
        ("at", "offset"),
        [
            (10 * US - 1, 0),
            (10 * US, 0),
            (10 * US + 1, 1),
            (11 * US, 1),
            (12 * US, 2),
            (12 * US + 1, 3),  # after the first batch, before the second
            (20 * US, 3),
            (21 * US, 4),
            (21 * US + 1, 5),
            (40 * US, 5),
            (43 * US, 8),
            (43 * US + 1, 9),  # after every element: the tail + 1
        ],
    )
    def test_find_timestamp_edges(self, tmp_path: Path, at: int, offset: int) -> None:
        with LogReader.open(store(tmp_path)) as reader:
            assert reader.find_timestamp("a", 0, at) == offset
            assert reader.find_timestamp("a", 1, at) == 0  # empty: its next offset

    def test_missing_head_element_is_damage(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        data_dir = store(tmp_path)
        change(data_dir, "DELETE FROM batches WHERE first_offset = 0")
        caplog.set_level(logging.ERROR, logger="dcps.store")
        with LogReader.open(data_dir) as reader:
            message = (
                f"{data_dir / STORE_FILE} is damaged at topic 'a' channel 0 offset 0: "
                "the element at the head is missing"
            )
            with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                reader.time_range("a", 0)
        assert caplog.messages == [f"dcps store: {message}"]

    def test_incomplete_channel_rows_are_damage(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path)
        change(data_dir, "DELETE FROM channels WHERE channel = 1")
        with LogReader.open(data_dir, verify=False) as reader:
            message = (
                f"{data_dir / STORE_FILE} is damaged at topic 'a': its channel rows are incomplete"
            )
            with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                reader.channel_states("a")
            with pytest.raises(
                PreconditionNotMetError,
                match=exactly("the store has no row for channel 1 of its topic"),
            ):
                reader.channel_state("a", 1)
            assert reader.channel_state("a", 0) == ChannelState(0, 8)


class TestElements:
    def test_fetch_starts_at_the_head_and_stops_at_the_tail(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path, retained=False)
        with ChannelLog.in_dir(data_dir) as log:
            log.create_group("a", "g")
            log.commit("a", "g", 0, 1)
        with LogReader.open(data_dir) as reader:
            run, state = reader.fetch("a", 0, 0, 3)
            assert state == ChannelState(2, 8)
            assert (run.first, run.count) == (2, 3)
            assert run.payloads() == [b"e10-2", b"e20-0", b"e20-1"]
            run, _ = reader.fetch("a", 0, 7, 100)
            assert run.payloads() == [b"e40-2", b"e40-3"]
            run, _ = reader.fetch("a", 0, 9, 100)
            assert (run.first, run.count) == (9, 0)
            run, _ = reader.fetch("a", 0, 8, 1)
            assert run.payloads() == [b"e40-3"]
            with pytest.raises(BadParameterError, match=exactly("max_count must be >= 1, got 0")):
                reader.fetch("a", 0, 0, 0)

    def test_exact_ranges(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path, retained=False)
        with ChannelLog.in_dir(data_dir) as log:
            log.create_group("a", "g")
            log.commit("a", "g", 0, 1)
        with LogReader.open(data_dir) as reader:
            assert reader.read_range("a", 0, 2, 3).payloads() == [b"e10-2"]
            assert reader.read_range("a", 0, 8, 9).payloads() == [b"e40-3"]
            empty = reader.read_range("a", 0, 5, 5)
            assert (empty.first, empty.count) == (5, 0)
            assert reader.read_range("a", 0, 6, 2).count == 0
            with pytest.raises(
                PreconditionNotMetError,
                match=exactly(
                    "topic 'a' channel 0: elements 1..3 are not all stored (got 3); "
                    "the store's retention released them"
                ),
            ):
                reader.read_range("a", 0, 1, 4)
            with pytest.raises(
                PreconditionNotMetError,
                match=exactly(
                    "topic 'a' channel 0: elements 7..9 are not all stored (got 2); "
                    "the channel's tail is 8"
                ),
            ):
                reader.read_range("a", 0, 7, 10)

    def test_runs_cover_the_range_in_steps(self, tmp_path: Path) -> None:
        with LogReader.open(store(tmp_path)) as reader:
            runs = list(reader.runs("a", 0, 1, 8, 3))
            assert [(r.first, r.count) for r in runs] == [(1, 3), (4, 3), (7, 1)]
            ones = list(reader.runs("a", 0, 0, 3, 0))
            assert [(r.first, r.count) for r in ones] == [(0, 1), (1, 1), (2, 1)]
            assert list(reader.runs("a", 0, 3, 3, 2)) == []

    def test_a_missing_batch_names_the_first_missing_offset(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path)
        change(data_dir, "DELETE FROM batches WHERE first_offset = 3")
        with LogReader.open(data_dir) as reader:
            message = (
                f"{data_dir / STORE_FILE} is damaged at topic 'a' channel 0 offset 3: "
                "elements 1..5 should be stored, 2 were found"
            )
            with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                reader.fetch("a", 0, 1, 5)
            message = (
                f"{data_dir / STORE_FILE} is damaged at topic 'a' channel 0 offset 3: "
                "elements 3..4 should be stored, 0 were found"
            )
            with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                reader.fetch("a", 0, 3, 2)
            assert reader.fetch("a", 0, 5, 9)[0].count == 4

    def test_sizes_not_matching_the_data_name_their_batch(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path)
        change(data_dir, "UPDATE batches SET data = substr(data, 1, 3) WHERE first_offset = 5")
        with LogReader.open(data_dir) as reader:
            message = (
                f"{data_dir / STORE_FILE} is damaged at topic 'a' channel 0 offset 5: "
                "the stored batch's element sizes do not match its data"
            )
            with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                reader.fetch("a", 0, 0, 100)
            with pytest.raises(PreconditionNotMetError, match=exactly(message)):
                reader.fetch("a", 0, 6, 1)
            assert reader.fetch("a", 0, 0, 5)[0].count == 5

    def test_negative_sizes_are_damage(self, tmp_path: Path) -> None:
        data_dir = store(tmp_path)
        # sizes of the 2-element batch at offset 3: -1 and 11, which add up to its 10 bytes
        change(
            data_dir,
            "UPDATE batches SET sizes = x'ffffffff0b000000' WHERE first_offset = 3",
        )
        with (
            LogReader.open(data_dir) as reader,
            pytest.raises(PreconditionNotMetError, match="offset 3: the stored batch's"),
        ):
            reader.fetch("a", 0, 0, 100)
