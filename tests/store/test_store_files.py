"""The store file under damage, read-only places and full disks: real files, real filesystems."""

from __future__ import annotations

import logging
import os
import re
import sqlite3
from pathlib import Path

import pytest

from dcps import (
    BadParameterError,
    OutOfResourcesError,
    PreconditionNotMetError,
)
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, CommitStatus
from dcps.store import Store
from dcps.store._log import STORE_FILE, ChannelLog, LogReader
from tests.store.conftest import SmallDisk
from tests.support.peers.channels_types import Msg, receive_n

TIMEOUT = 10.0

PAGE = 4096


def make_store(path: Path, *, batches: int = 200, channels: int = 4) -> None:
    """A store file of about 1 MiB: ``batches`` batches of 50 random 100-byte elements."""
    with ChannelLog(path) as log:
        log.ensure_topic("t", channels, retain_consumed=True)
        for i in range(batches):
            log.append("t", i % channels, [os.urandom(100) for _ in range(50)])


def scribble(path: Path, page: int) -> bytes:
    """Write 4 KiB of random bytes over ``page`` (0-based) of the file; return its new bytes."""
    with open(path, "r+b") as f:
        f.seek(page * PAGE)
        f.write(os.urandom(PAGE))
    return path.read_bytes()


def batch_page(path: Path) -> int:
    """A page (0-based) holding stored element data of channel 1."""
    db = sqlite3.connect(path)
    try:
        (data,) = db.execute("SELECT data FROM batches WHERE channel = 1 LIMIT 1").fetchone()
    finally:
        db.close()
    raw = path.read_bytes()
    at = raw.index(bytes(data[:64]))
    return at // PAGE


class TestIntegrityAtOpen:
    def test_garbage_over_a_data_page_is_refused_untouched(self, tmp_path: Path) -> None:
        """4 KiB of garbage over stored elements: opening fails naming the path, bytes kept."""
        path = tmp_path / STORE_FILE
        make_store(path)
        damaged = scribble(path, batch_page(path))
        with pytest.raises(BadParameterError, match=re.escape(str(path))) as caught:
            ChannelLog(path)
        assert "damaged" in str(caught.value) or "corrupt" in str(caught.value)
        assert path.read_bytes() == damaged

    def test_a_damaged_store_does_not_start(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """A Store on a damaged file raises (naming it) instead of serving a channel short."""
        path = tmp_path / STORE_FILE
        make_store(path)
        scribble(path, batch_page(path))
        with pytest.raises(BadParameterError, match=re.escape(str(path))):
            Store(tmp_path, domain_id=domain_id, namespace=namespace)

    @pytest.mark.parametrize("page", [0, 1, 2, 3])
    def test_random_bytes_over_early_pages_give_one_typed_error(
        self, tmp_path: Path, page: int
    ) -> None:
        """Random bytes over the header or the first pages: BadParameterError naming the path."""
        path = tmp_path / STORE_FILE
        make_store(path)
        damaged = scribble(path, page)
        with pytest.raises(BadParameterError, match=re.escape(str(path))):
            ChannelLog(path)
        with pytest.raises(BadParameterError, match=re.escape(str(path))):
            LogReader.open(tmp_path)
        assert path.read_bytes() == damaged

    def test_direct_reader_verifies_too(self, tmp_path: Path) -> None:
        """LogReader.open checks the file; verify=False skips the full check and opens."""
        path = tmp_path / STORE_FILE
        make_store(path)
        scribble(path, batch_page(path))
        with pytest.raises(BadParameterError, match=r"damaged|corrupt"):
            LogReader.open(tmp_path)
        LogReader.open(tmp_path, verify=False).close()

    def test_verify_can_be_skipped_for_huge_files(self, tmp_path: Path) -> None:
        """verify=False opens without reading the whole file (a healthy one either way)."""
        path = tmp_path / STORE_FILE
        make_store(path, batches=8)
        with ChannelLog(path, verify=False) as log:
            assert log.channel_state("t", 0).count == 100


class TestReadErrors:
    def test_a_damaged_page_read_at_run_time_names_topic_channel_offset(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Reading stored data from a damaged page raises a typed error, logged at ERROR."""
        path = tmp_path / STORE_FILE
        make_store(path)
        scribble(path, batch_page(path))
        caplog.set_level(logging.ERROR, logger="dcps.store")
        with ChannelLog(path, verify=False) as log, log.reader() as reader:
            with pytest.raises(PreconditionNotMetError, match=r"topic 't' channel 1 .*offset"):
                log.fetch_run("t", 1, 0, 1_000_000)
            with pytest.raises(PreconditionNotMetError, match=r"topic 't' channel 1 .*offset"):
                reader.fetch("t", 1, 0, 1_000_000)
        errors = [r for r in caplog.records if r.levelno == logging.ERROR]
        assert errors
        assert "channel 1" in errors[0].getMessage()

    def test_a_missing_batch_is_never_skipped(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A stored batch gone from the middle of a channel raises instead of a short run."""
        path = tmp_path / STORE_FILE
        make_store(path, batches=12, channels=1)
        db = sqlite3.connect(path)
        db.execute("DELETE FROM batches WHERE first_offset = 250")
        db.commit()
        db.close()
        caplog.set_level(logging.ERROR, logger="dcps.store")
        with ChannelLog(path) as log, log.reader() as reader:
            assert log.fetch_run("t", 0, 0, 250).count == 250
            with pytest.raises(PreconditionNotMetError, match=r"channel 0 offset 250"):
                log.fetch_run("t", 0, 200, 100)
            with pytest.raises(PreconditionNotMetError, match=r"channel 0 offset 250"):
                reader.fetch("t", 0, 250, 10)
            with pytest.raises(PreconditionNotMetError, match=r"channel 0 offset 250"):
                reader.read_range("t", 0, 0, 600)
        assert any("offset 250" in r.getMessage() for r in caplog.records)

    def test_element_sizes_that_do_not_match_the_data_are_refused(self, tmp_path: Path) -> None:
        """A stored batch whose sizes do not add up raises naming its first offset."""
        path = tmp_path / STORE_FILE
        make_store(path, batches=3, channels=1)
        db = sqlite3.connect(path)
        db.execute("UPDATE batches SET data = substr(data, 1, 10) WHERE first_offset = 50")
        db.commit()
        db.close()
        with ChannelLog(path) as log:
            assert len(log.fetch("t", 0, 0, 50)) == 50
            with pytest.raises(PreconditionNotMetError, match=r"channel 0 offset 50"):
                log.fetch("t", 0, 0, 150)


class TestFileErrors:
    def test_read_only_data_dir_says_so(self, small_disk: SmallDisk) -> None:
        """A healthy store on a read-only filesystem: one error saying read-only, naming it."""
        make_store(small_disk.path / STORE_FILE, batches=4)
        small_disk.remount("ro")
        try:
            with pytest.raises(PreconditionNotMetError, match="read-only") as caught:
                ChannelLog(small_disk.path / STORE_FILE)
            assert str(small_disk.path) in str(caught.value)
            assert "corrupt" not in str(caught.value)
            with LogReader.open(small_disk.path) as reader:  # a read-only copy is still readable
                assert reader.channel_state("t", 0).count == 50
        finally:
            small_disk.remount("rw")

    def test_data_dir_under_a_regular_file(self, tmp_path: Path) -> None:
        """--data below a regular file: BadParameterError naming both, nothing created."""
        afile = tmp_path / "plain"
        afile.write_text("x")
        with pytest.raises(BadParameterError, match=re.escape(str(afile)) + ".*regular file"):
            ChannelLog.in_dir(afile / "data")
        with pytest.raises(BadParameterError, match="not a directory"):
            ChannelLog.in_dir(afile)
        with pytest.raises(BadParameterError, match=re.escape(str(afile))):
            ChannelLog(afile / STORE_FILE)
        assert afile.read_text() == "x"

    def test_in_dir_creates_the_directory(self, tmp_path: Path) -> None:
        """in_dir makes missing directories and opens STORE_FILE in them."""
        with ChannelLog.in_dir(tmp_path / "a" / "b") as log:
            assert log.path == tmp_path / "a" / "b" / STORE_FILE
            log.ensure_topic("t", 1)
        assert (tmp_path / "a" / "b" / STORE_FILE).is_file()

    def test_a_store_on_a_read_only_dir_says_so(
        self, small_disk: SmallDisk, domain_id: int, namespace: str
    ) -> None:
        """An embedded Store on a read-only data dir fails once, saying read-only."""
        make_store(small_disk.path / STORE_FILE, batches=1)
        small_disk.remount("ro")
        try:
            with pytest.raises(PreconditionNotMetError, match="read-only"):
                Store(small_disk.path, domain_id=domain_id, namespace=namespace)
        finally:
            small_disk.remount("rw")


class TestFullDisk:
    def test_full_disk_refuses_appends_and_keeps_the_rest_working(
        self, small_disk: SmallDisk
    ) -> None:
        """On a full disk: appends raise OutOfResourcesError; reads, joins, commits go on."""
        path = small_disk.path / STORE_FILE
        with ChannelLog(path) as log:
            log.ensure_topic("t", 2)
            log.create_group("t", "g")
            log.append("t", 0, [b"%d" % i for i in range(10)])
            small_disk.fill()
            full = re.escape(str(path)) + ".*disk is full"
            for _ in range(3):
                with pytest.raises(OutOfResourcesError, match=full):
                    log.append("t", 0, [os.urandom(1000) for _ in range(200)])
            assert [e.data for e in log.fetch("t", 0, 0, 100)] == [b"%d" % i for i in range(10)]
            assert log.create_group("t", "late") is True
            assert log.commit("t", "g", 0, 4) is CommitStatus.COMMITTED
            assert log.commit("t", "late", 0, 6) is CommitStatus.COMMITTED
            assert log.seek("t", "late", 0, to="tail") == 9
            with log.reader() as reader:
                run, state = reader.fetch("t", 0, 0, 100)
                assert (run.first, run.count, state.head) == (5, 5, 5)
            with pytest.raises(OutOfResourcesError, match=re.escape(str(path))):
                log.append("t", 1, [b"x"])
            small_disk.free()
            assert log.append("t", 1, [b"after"])[0][0] == 0
            assert log.append("t", 1, [b"y"])[0][0] == 1
        with ChannelLog(path) as log:  # nothing half-written
            assert [e.data for e in log.fetch("t", 1, 0, 10)] == [b"after", b"y"]
            assert log.committed("t", "late", 0) == (6, True)

    def test_store_starts_on_a_full_disk_with_an_anonymous_group(
        self, small_disk: SmallDisk, domain_id: int, namespace: str
    ) -> None:
        """A store whose log holds an anonymous group starts on a full disk (and drops it)."""
        with Store(small_disk.path, domain_id=domain_id, namespace=namespace) as store:
            store.log.ensure_topic("t", 2)
            store.log.create_group("t", "~anonymous/abc")
            store.log.create_group("t", "g")
            store.log.append("t", 0, [b"a", b"b"])
        small_disk.fill()
        with Store(small_disk.path, domain_id=domain_id, namespace=namespace) as store:
            assert store.log.groups("t") == ["g"]
            assert store.log.commit("t", "g", 0, 0) is CommitStatus.COMMITTED
            with pytest.raises(OutOfResourcesError):
                store.log.append("t", 0, [b"c"])
            small_disk.free()
            assert store.log.append("t", 0, [b"c"])[0][0] == 2

    def test_full_disk_at_creation(self, small_disk: SmallDisk) -> None:
        """Creating a store on a full disk: one OutOfResourcesError naming the path."""
        small_disk.fill()
        path = small_disk.path / "new" / STORE_FILE
        with pytest.raises(OutOfResourcesError, match=re.escape(str(path))):
            ChannelLog.in_dir(path.parent)
        small_disk.free()
        with ChannelLog.in_dir(path.parent) as log:  # and works once there is space
            assert log.ensure_topic("t", 1).channel_count == 1

    def test_publishers_get_out_of_resources_and_resume(
        self, small_disk: SmallDisk, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """End to end: a full disk fails publishes with OutOfResourcesError; joining a group,
        receiving and committing still work; publishing resumes once space is freed."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        kw = {"domain_id": domain_id, "namespace": namespace}
        with (
            Store(small_disk.path, **kw),  # type: ignore[arg-type]
            ChannelPublisher(topic, **kw) as pub,  # type: ignore[arg-type]
        ):
            for i in range(4):
                pub.publish(Msg(key=0, seq=i)).result(TIMEOUT)
            small_disk.fill()
            with pytest.raises(OutOfResourcesError, match="disk is full"):
                pub.publish(Msg(key=0, seq=4, text="x" * 2000)).result(TIMEOUT)
            with ChannelSubscriber(topic, group="late", **kw) as sub:  # type: ignore[arg-type]
                got = receive_n(sub, 4, TIMEOUT)
                assert sorted(e.value.seq for e in got) == [0, 1, 2, 3]
                last = max(got, key=lambda e: e.position.offset)
                assert sub.commit(last.channel, last.position).is_success
            small_disk.free()
            assert pub.publish(Msg(key=0, seq=5)).result(TIMEOUT) is not None
