"""The Spark source's direct file access goes through the store's own LogReader (no JVM, no DDS)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from dcps import BadParameterError, PreconditionNotMetError
from dcps.spark._access import StoreAccess
from dcps.store._log import ChannelLog
from dcps.store._log_format import STORE_FILE


def make_store(data: Path) -> Path:
    """A store file in ``data`` with topic 't': batches at offsets 0 (5 elements) and 5 (3)."""
    data.mkdir(parents=True, exist_ok=True)
    with ChannelLog.in_dir(data) as log:
        log.ensure_topic("t", 2, retain_consumed=True)
        log.append("t", 0, [b"%d" % i for i in range(5)])
        log.append("t", 0, [b"%d" % i for i in range(5, 8)])
    return data / STORE_FILE


class TestFileAccess:
    def test_missing_store_file_names_its_path(self, tmp_path: Path) -> None:
        """A data_dir without a store file fails naming the file it looked for."""
        with pytest.raises(BadParameterError, match=re.escape(str(tmp_path / STORE_FILE))):
            StoreAccess(data_dir=str(tmp_path))

    def test_reads_bounds_and_exact_ranges(self, tmp_path: Path) -> None:
        """Heads and next offsets of every channel, and exact ranges across stored batches."""
        make_store(tmp_path)
        access = StoreAccess(data_dir=str(tmp_path))
        try:
            assert access.bounds("t") == {0: (0, 8), 1: (0, 0)}
            assert access.fetch("t", 0, 3, 7).payloads() == [b"3", b"4", b"5", b"6"]
            runs = list(access.fetch_runs("t", 0, 1, 8, 3))
            assert [r.offsets().tolist() for r in runs] == [[1, 2, 3], [4, 5, 6], [7]]
            with pytest.raises(PreconditionNotMetError, match=r"elements 6\.\.8"):
                access.fetch("t", 0, 6, 9)  # one past the tail
            with pytest.raises(BadParameterError, match="no channelled topic 'u'"):
                access.bounds("u")
        finally:
            access.close()

    def test_a_damaged_batch_names_topic_channel_and_offset(self, tmp_path: Path) -> None:
        """A stored batch whose sizes do not add up is reported, never read short or skipped."""
        path = make_store(tmp_path)
        db = sqlite3.connect(path)
        try:
            with db:
                db.execute("UPDATE batches SET sizes = ? WHERE first_offset = 5", (b"\x09" * 12,))
        finally:
            db.close()
        access = StoreAccess(data_dir=str(tmp_path))
        try:
            assert access.fetch("t", 0, 0, 5).payloads() == [b"%d" % i for i in range(5)]
            with pytest.raises(
                PreconditionNotMetError, match=r"damaged at topic 't' channel 0 offset 5"
            ):
                list(access.fetch_runs("t", 0, 0, 8, 100))
        finally:
            access.close()

    def test_publishing_and_group_commits_need_dds(self, tmp_path: Path) -> None:
        """The file is read only: publishing or committing through it says what it needs."""
        make_store(tmp_path)
        access = StoreAccess(data_dir=str(tmp_path))
        try:
            assert not access.over_dds
            with pytest.raises(BadParameterError, match="publishing needs a DDS connection"):
                access.publish_keyed("t", 0, [b"x"], "k")
            with pytest.raises(BadParameterError, match="group commit needs a DDS connection"):
                access.commit_group("t", "g", "m", {0: 3})
        finally:
            access.close()
