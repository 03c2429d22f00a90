"""The direct reader's behaviours left unpinned by the earlier mutation passes (docs/mutation.md).

Each test kills mutants of ``dcps/store/_log_reader.py`` listed as "not yet killed":
files of formats 2, 3 and 8 read as they are (shared or stepped timestamps, no type
identity), ``LogReader.open``'s integrity check, a read-only copy of a store on a
read-only file system (read with ``immutable=1``, and refused when a write-ahead log
holds data such a read would miss), a reader used from another thread, and which
offset a run cut short names. Real store files on disk, older formats made from a
current file by the migration tests' helpers, damage done by a second connection.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
from pathlib import Path

import pytest

from dcps import BadParameterError, PreconditionNotMetError, UnsupportedError
from dcps.store._log import STORE_FILE, ChannelLog, LogReader
from dcps.wire._batches import ELEMENT_STEP_NS
from tests.store.conftest import SmallDisk
from tests.store.test_store_files import batch_page, make_store, scribble
from tests.store.test_store_log import make_v1_store
from tests.store.test_store_types import make_v2_store
from tests.support.store_files import downgrade_to_v3

T0 = 1_000_000  # the stamps given to the old files' batches (ns)


def sql(path: Path, statement: str, *args: object) -> None:
    db = sqlite3.connect(path)
    try:
        db.execute(statement, args)
        db.commit()
    finally:
        db.close()


def three_elements(path: Path) -> None:
    """Topic 't' (1 channel, group 'g' past element 0): batches [a, b] and [c], head 1."""
    with ChannelLog(path) as log:
        log.ensure_topic("t", 1, type_name="demo::T", type_identity="id-of-T")
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b"])
        log.append("t", 0, [b"c"])
        log.commit("t", "g", 0, 0)
        assert log.channel_state("t", 0).head == 1


class TestOlderFormats:
    def test_format_3_elements_share_their_batch_stamp(self, tmp_path: Path) -> None:
        """A format-3 file is read as it is: each batch's elements carry its one stamp."""
        path = tmp_path / STORE_FILE
        three_elements(path)
        downgrade_to_v3(path, [(0, 0, T0), (0, 2, T0 + 5000)])
        with LogReader.open(tmp_path) as reader:
            run, state = reader.fetch("t", 0, 0, 10)
            assert (run.first, run.payloads(), state.head) == (1, [b"b", b"c"], 1)
            assert run.timestamps().tolist() == [T0, T0 + 5000]
            first, _ = reader.time_range("t", 0) or (None, None)
            assert first == T0  # element 1 shares element 0's stamp
            assert reader.find_timestamp("t", 0, T0 + 1) == 2
            assert reader.topic("t").type_identity == "id-of-T"  # format 3 has the column

    def test_format_8_elements_are_stepped(self, tmp_path: Path) -> None:
        """From format 8 on each element of a batch is one step later than the one before."""
        path = tmp_path / STORE_FILE
        three_elements(path)
        sql(path, "UPDATE batches SET ts = ? WHERE first_offset = 0", T0)
        sql(path, "UPDATE batches SET ts = ? WHERE first_offset = 2", T0 + 5000)
        sql(path, "UPDATE dcps_format SET value = '8' WHERE key = 'version'")
        with LogReader.open(tmp_path) as reader:
            run, _ = reader.fetch("t", 0, 0, 10)
            assert run.timestamps().tolist() == [T0 + ELEMENT_STEP_NS, T0 + 5000]
            first, _ = reader.time_range("t", 0) or (None, None)
            assert first == T0 + ELEMENT_STEP_NS
            assert reader.find_timestamp("t", 0, T0 + 1) == 1

    def test_format_2_is_read_without_type_identities(self, tmp_path: Path) -> None:
        """The oldest readable format: no type_identity column, read as an empty identity."""
        make_v2_store(tmp_path / STORE_FILE)
        with LogReader.open(tmp_path) as reader:
            info = reader.topic("jobs")
            assert (info.type_name, info.type_identity) == ("demo::Job", "")
            assert reader.fetch("jobs", 0, 0, 10)[0].payloads() == [b"a", b"b"]

    def test_format_1_is_refused_naming_its_version(self, tmp_path: Path) -> None:
        """A format-1 file must be migrated by a store first: one typed error says so."""
        make_v1_store(tmp_path / STORE_FILE)
        with pytest.raises(UnsupportedError, match="format version 1; it is read directly"):
            LogReader.open(tmp_path)


def test_open_checks_the_whole_file_unless_told_not_to(tmp_path: Path) -> None:
    """LogReader.open (and LogReader(verify=True)) refuse a damaged page; verify=False opens."""
    path = tmp_path / STORE_FILE
    make_store(path, batches=40)
    scribble(path, batch_page(path))
    with pytest.raises(BadParameterError, match=r"damaged \(PRAGMA quick_check"):
        LogReader.open(tmp_path)
    with pytest.raises(BadParameterError, match=r"damaged \(PRAGMA quick_check"):
        LogReader(path, verify=True)
    LogReader.open(tmp_path, verify=False).close()


class TestReadOnlyCopy:
    """A copy of a store on a read-only file system (a backup, a snapshot) is read as it is."""

    def test_a_read_only_copy_is_read(self, small_disk: SmallDisk) -> None:
        """No -shm file can be made there: the reader opens the file immutable and reads it."""
        with ChannelLog(small_disk.path / STORE_FILE, reserve_bytes=0) as log:
            log.ensure_topic("t", 1)
            log.append("t", 0, [b"a", b"b"])
        assert not Path(f"{small_disk.path / STORE_FILE}-wal").exists()
        small_disk.remount("ro")
        try:
            with LogReader.open(small_disk.path) as reader:
                assert reader.fetch("t", 0, 0, 10)[0].payloads() == [b"a", b"b"]
        finally:
            small_disk.remount("rw")

    def test_a_copy_with_a_write_ahead_log_is_refused(
        self, small_disk: SmallDisk, tmp_path: Path
    ) -> None:
        """Data only in the -wal file cannot be read there: refused, never read short."""
        src = tmp_path / "src"
        src.mkdir()
        with ChannelLog(src / STORE_FILE, reserve_bytes=0) as log:
            log.ensure_topic("t", 1)
            log.append("t", 0, [b"a"])
        with ChannelLog(src / STORE_FILE, reserve_bytes=0) as log:
            log.append("t", 0, [b"b"])  # in the -wal file only, while the log is open
            for name in (STORE_FILE, f"{STORE_FILE}-wal"):
                shutil.copy(src / name, small_disk.path / name)
        small_disk.remount("ro")
        try:
            with pytest.raises(PreconditionNotMetError, match="cannot write or open"):
                LogReader.open(small_disk.path)
        finally:
            small_disk.remount("rw")
        with LogReader.open(small_disk.path) as reader:  # writable again: both elements
            assert reader.fetch("t", 0, 0, 10)[0].payloads() == [b"a", b"b"]


def test_a_reader_works_from_another_thread(tmp_path: Path) -> None:
    """A reader opened on one thread reads on another (one thread at a time)."""
    with ChannelLog(tmp_path / STORE_FILE) as log:
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a"])
    seen: list[object] = []
    with LogReader.open(tmp_path) as reader:

        def work() -> None:
            try:
                seen.append(reader.fetch("t", 0, 0, 10)[0].payloads())
            except BaseException as exc:  # reported below, on the test's thread
                seen.append(exc)

        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert seen == [[b"a"]]


class TestWhichOffsetIsMissing:
    """A run cut short by a missing batch names the first element it lacks."""

    @staticmethod
    def damaged(tmp_path: Path, missing_first: int) -> str:
        path = tmp_path / STORE_FILE
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            for batch in ([b"a", b"b"], [b"c"], [b"d", b"e"]):
                log.append("t", 0, batch)
        sql(path, "DELETE FROM batches WHERE first_offset = ?", missing_first)
        with LogReader.open(tmp_path) as reader, pytest.raises(PreconditionNotMetError) as caught:
            reader.fetch("t", 0, 0, 10)
        return str(caught.value)

    def test_the_first_batch_missing_names_the_start(self, tmp_path: Path) -> None:
        message = self.damaged(tmp_path, 0)
        assert "channel 0 offset 0: elements 0..4 should be stored, 3 were found" in message

    def test_a_middle_batch_missing_names_the_gap(self, tmp_path: Path) -> None:
        message = self.damaged(tmp_path, 2)
        assert "channel 0 offset 2: elements 0..4 should be stored, 2 were found" in message
