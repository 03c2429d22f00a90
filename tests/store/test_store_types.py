"""Each channelled topic keeps the type identity it was created with (format version 3)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dcps import PreconditionNotMetError
from dcps.store._log import FORMAT_VERSION, STORE_FILE, ChannelLog, LogReader
from tests.support.store_files import downgrade_to_v3

JOB = "demo::Job#1f2e3d"
OTHER = "demo::Other#9a8b7c"


def file_rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    """Rows of a query on the file, through a separate connection."""
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def make_v2_store(path: Path) -> None:
    """A version-2 store file (no type identities) holding topic 'jobs' of type 'demo::Job'."""
    with ChannelLog(path) as log:
        log.ensure_topic("jobs", 2, type_name="demo::Job")
        log.append("jobs", 0, [b"a", b"b"])
    downgrade_to_v3(path)
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE topics DROP COLUMN type_identity")
    db.execute("UPDATE dcps_format SET value = '2' WHERE key = 'version'")
    db.commit()
    db.close()


class TestTypeIdentity:
    def test_a_topic_records_its_type_identity(self, tmp_path: Path) -> None:
        """The identity given at creation is kept in the file and read back."""
        path = tmp_path / STORE_FILE
        with ChannelLog(path) as log:
            info = log.ensure_topic("jobs", 2, type_name="demo::Job", type_identity=JOB)
            assert info.type_identity == JOB
        with ChannelLog(path) as log:
            assert log.topic("jobs").type_identity == JOB
            assert log.ensure_topic("jobs", 2, type_identity=JOB).type_identity == JOB
        with LogReader.open(tmp_path) as reader:
            assert reader.topic("jobs").type_identity == JOB

    def test_another_type_is_refused_naming_topic_and_both_types(self, tmp_path: Path) -> None:
        """ensure_topic with another identity raises naming both types and stores nothing."""
        path = tmp_path / STORE_FILE
        with ChannelLog(path) as log:
            log.ensure_topic("jobs", 2, type_identity=JOB)
            log.append("jobs", 0, [b"x"])
            before = file_rows(path, "SELECT * FROM topics")
            with pytest.raises(PreconditionNotMetError) as caught:
                log.ensure_topic("jobs", 2, type_name="demo::Other", type_identity=OTHER)
            message = str(caught.value)
            assert "'jobs'" in message
            assert JOB in message
            assert OTHER in message
            assert log.topic("jobs").type_identity == JOB
            assert file_rows(path, "SELECT * FROM topics") == before
            assert log.channel_state("jobs", 0).count == 1

    def test_an_empty_identity_is_not_checked(self, log_path: Path) -> None:
        """A caller that names no identity (e.g. an admin tool) gets the topic as it is."""
        with ChannelLog(log_path) as log:
            log.ensure_topic("jobs", 2, type_identity=JOB)
            assert log.ensure_topic("jobs").type_identity == JOB

    def test_version_2_file_migrates_and_adopts_the_first_identity(self, tmp_path: Path) -> None:
        """A version-2 file gains the column; its topics take the first identity named."""
        path = tmp_path / STORE_FILE
        make_v2_store(path)
        with LogReader.open(tmp_path) as reader:  # read directly, as it is
            assert reader.topic("jobs").type_identity == ""
            assert reader.fetch("jobs", 0, 0, 10)[0].payloads() == [b"a", b"b"]
        with ChannelLog(path) as log:
            assert log.topic("jobs").type_identity == ""
            with pytest.raises(PreconditionNotMetError, match="demo::Job"):
                log.ensure_topic("jobs", type_name="demo::Other", type_identity=OTHER)
            assert log.ensure_topic("jobs", type_name="demo::Job", type_identity=JOB).type_identity
            with pytest.raises(PreconditionNotMetError, match="Other"):
                log.ensure_topic("jobs", type_identity=OTHER)
            assert [e.data for e in log.fetch("jobs", 0, 0, 10)] == [b"a", b"b"]
        assert file_rows(path, "SELECT value FROM dcps_format WHERE key = 'version'") == [
            (str(FORMAT_VERSION),)
        ]
        assert file_rows(path, "SELECT name, type_name, type_identity FROM topics") == [
            ("jobs", "demo::Job", JOB)
        ]


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    """Where the test's store file goes."""
    return tmp_path / STORE_FILE
