"""The store file's WAL is checkpointed beside the log's thread, not inside its COMMITs."""

from __future__ import annotations

from pathlib import Path

from dcps.store._log import ChannelLog, SyncMode
from tests.support.waiting import eventually

ELEMENT = bytes(range(256)) * 16  # 4 KiB: stays inline (a row in SQLite, so in the WAL)


def _file_bytes(path: Path) -> int:
    return path.stat().st_size


class TestCheckpoints:
    def test_committed_rows_reach_the_store_file_while_it_is_open(self, tmp_path: Path) -> None:
        """600 KiB of appended rows (~700 WAL pages) reach the file while the log is open.

        SQLite's own automatic checkpoint would wait for 1,000 pages (4 MiB), and run inside
        a COMMIT of the store's thread; the checkpoint thread copies what was committed.
        """
        path = tmp_path / "store.db"
        with ChannelLog(path, sync=SyncMode.NORMAL) as log:
            log.ensure_topic("t", 1)
            empty = _file_bytes(path)
            for _ in range(150):
                log.append("t", 0, [ELEMENT])
            eventually(
                lambda: _file_bytes(path) >= empty + 150 * len(ELEMENT),
                what="the committed rows reached the store file",
            )
            assert log.fetch("t", 0, 0, 1000)[-1].offset == 149

    def test_the_wal_stays_bounded_under_continuous_appends(self, tmp_path: Path) -> None:
        """8,000 single-row commits in a row (~28,000 WAL pages, ~115 MB if the WAL never
        started over) leave a WAL of well under 64 MB: the checkpoint thread lets the
        log's next transaction start it over (without that pass it grew to 351 MB in
        20,000 commits); every element is still there, in order."""
        path = tmp_path / "store.db"
        with ChannelLog(path, sync=SyncMode.NORMAL) as log:
            log.ensure_topic("t", 1)
            for i in range(8000):
                log.append("t", 0, [i.to_bytes(8, "little")])
            assert Path(f"{path}-wal").stat().st_size < 64 << 20
            stored = log.fetch("t", 0, 0, 10_000)
            assert [int.from_bytes(e.data, "little") for e in stored] == list(range(8000))

    def test_closing_leaves_no_wal_behind(self, tmp_path: Path) -> None:
        """Closing the log (checkpoint thread first) folds the WAL into the file and
        removes it; the file reopens with every element."""
        path = tmp_path / "store.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            for _ in range(20):
                log.append("t", 0, [ELEMENT])
        assert not Path(f"{path}-wal").exists()
        with ChannelLog(path) as log:
            assert len(log.fetch("t", 0, 0, 100)) == 20
