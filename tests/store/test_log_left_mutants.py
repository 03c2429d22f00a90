"""The store log's behaviours left unpinned by the earlier mutation passes (docs/mutation.md).

Each test kills mutants of ``dcps/store/_log.py`` listed as "not yet killed": what a
failed open says it was doing (opening, creating, migrating), the log used from a
thread other than the one that opened it, the size of the disk-space reserve, keyed
appends (packed payloads, a duplicate key within one session, a full disk), the damage
message of a bulk read, and the default channel count's search. Fast: a real log file
on a tmp dir, a second sqlite3 connection holding a lock or reading the file back, no DDS.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcps import DcpsError, OutOfResourcesError, PreconditionNotMetError
from dcps.store._log import ChannelLog, default_channel_count
from dcps.wire._batches import PackedPayloads
from tests.store.conftest import SmallDisk


def version_of(path: Path) -> str:
    db = sqlite3.connect(path)
    try:
        return str(db.execute("SELECT value FROM dcps_format WHERE key = 'version'").fetchone()[0])
    finally:
        db.close()


@pytest.fixture
def log(tmp_path: Path) -> Iterator[ChannelLog]:
    with ChannelLog(tmp_path / "store.db") as opened:
        yield opened


class TestWhatAFailedOpenSays:
    """A failed open raises one typed error naming the path and the step that failed."""

    def test_migrating_names_the_old_version(self, tmp_path: Path) -> None:
        """A format-2 file whose migration fails: the error names 'migrating ... version 2'."""
        path = tmp_path / "store.db"
        ChannelLog(path).close()
        db = sqlite3.connect(path)  # says format 2 but already has 2 -> 3's column
        db.execute("UPDATE dcps_format SET value = '2' WHERE key = 'version'")
        db.commit()
        db.close()
        with pytest.raises(DcpsError) as caught:
            ChannelLog(path)
        message = str(caught.value)
        assert re.match(
            re.escape(f"{path}: migrating the store file from format version 2 failed: "),
            message,
        ), message
        assert "type_identity" in message
        assert version_of(path) == "2"  # left as it was

    def test_creating_names_the_creation(self, tmp_path: Path) -> None:
        """An empty SQLite file another program holds locked: 'creating the store file'."""
        path = tmp_path / "store.db"
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("PRAGMA journal_mode=WAL")  # an empty SQLite file of one page
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(DcpsError) as caught:
                ChannelLog(path)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert re.match(
            re.escape(f"{path}: creating the store file failed: database is locked"),
            str(caught.value),
        ), str(caught.value)
        with ChannelLog(path) as log:  # and it is created once the lock is gone
            assert log.ensure_topic("t", 1).channel_count == 1

    def test_opening_names_the_opening(self, tmp_path: Path) -> None:
        """A rollback-journal store file another program is writing: 'opening the store file'."""
        path = tmp_path / "store.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            log.append("t", 0, [b"kept"])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("PRAGMA journal_mode=DELETE")  # the switch to WAL needs the file alone
        other.execute("BEGIN IMMEDIATE")
        try:
            with pytest.raises(DcpsError) as caught:
                ChannelLog(path)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert re.match(
            re.escape(f"{path}: opening the store file failed: database is locked"),
            str(caught.value),
        ), str(caught.value)
        with ChannelLog(path) as log:
            assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"kept"]


def test_the_log_works_from_another_thread(log: ChannelLog) -> None:
    """A log opened on one thread appends, fetches and commits on another (the store's)."""
    log.ensure_topic("t", 1)
    log.create_group("t", "g")
    seen: list[object] = []

    def work() -> None:
        try:
            log.append("t", 0, [b"a", b"b"])
            seen.append([e.data for e in log.fetch("t", 0, 0, 10)])
            seen.append(log.commit("t", "g", 0, 0).name)
        except BaseException as exc:  # reported below, on the test's thread
            seen.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert seen == [[b"a", b"b"], "COMMITTED"]


def test_reserve_has_the_size_asked(tmp_path: Path) -> None:
    """``reserve_bytes`` is the size of the reserve file kept next to the store file."""
    path = tmp_path / "store.db"
    with ChannelLog(path, reserve_bytes=3 << 20):
        assert Path(f"{path}-reserve").stat().st_size == 3 << 20
    other = tmp_path / "other.db"
    with ChannelLog(other, reserve_bytes=0):
        assert not Path(f"{other}-reserve").exists()


class TestKeyedAppends:
    def test_packed_payloads_are_appended_as_they_are(self, log: ChannelLog) -> None:
        """append_keyed takes a PackedPayloads as well as a list of payloads."""
        log.ensure_topic("t", 1)
        placed, duplicate = log.append_keyed("t", 0, PackedPayloads.of([b"a", b"bc"]), "k1")
        assert (len(placed), duplicate) == (2, False)
        log.append_keyed("t", 0, [b"def"], "k2")
        assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"a", b"bc", b"def"]

    def test_a_key_repeated_in_the_same_session_appends_nothing(self, log: ChannelLog) -> None:
        """The second append with a key, before any reopen, answers the first's placements."""
        log.ensure_topic("t", 1)
        first, dup1 = log.append_keyed("t", 0, [b"x", b"y"], "key")
        again, dup2 = log.append_keyed("t", 0, [b"x", b"y"], "key")
        assert (dup1, dup2) == (False, True)
        assert again == first
        assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"x", b"y"]

    def test_a_full_disk_refuses_a_keyed_append(self, small_disk: SmallDisk) -> None:
        """On a full disk a keyed append is refused (the reserve is kept for commits)."""
        path = small_disk.path / "store.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            log.create_group("t", "g")
            log.append_keyed("t", 0, [b"before"], "k0")
            small_disk.fill()
            small = [bytes(100) for _ in range(20)]  # inline: SQLite's write fails, not a segment's
            with pytest.raises(OutOfResourcesError, match=re.escape(str(path)) + ".*disk is full"):
                log.append_keyed("t", 0, small, "k1")
            assert Path(f"{path}-reserve").exists()  # still held for what must go on
            assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"before"]
            assert log.commit("t", "g", 0, 0).name == "COMMITTED"
            small_disk.free()
            assert log.append_keyed("t", 0, [b"after"], "k1")[1] is False


def test_a_damaged_bulk_read_names_the_file_and_topic(log: ChannelLog) -> None:
    """fetch_run over a batch row deleted by another program names file, topic and offset."""
    log.ensure_topic("jobs", 1)
    log.append("jobs", 0, [b"a", b"b"])
    log.append("jobs", 0, [b"c"])
    other = sqlite3.connect(log.path, isolation_level=None)
    other.execute("DELETE FROM batches WHERE first_offset = 0")
    other.close()
    with pytest.raises(PreconditionNotMetError) as caught:
        log.fetch_run("jobs", 0, 0, 10)
    assert str(caught.value).startswith(
        f"{log.path} is damaged at topic 'jobs' channel 0 offset 0: "
    ), str(caught.value)


@pytest.mark.timeout(10)
def test_default_channel_count_steps_one_at_a_time() -> None:
    """From an even start the search steps through odd numbers too (9 partitions -> 5)."""
    assert [default_channel_count(p) for p in (9, 35, 48, 120, 257)] == [5, 7, 7, 11, 17]
