"""A durability service never gives one sample number (its fetch cursor) twice, across
restarts of the store it keeps PERSISTENT data in.

A reader pages a service's history by cursor: "the samples above seq N". If a restarted
service numbered new samples from the highest sample it still keeps, the number of a sample
dropped just before the restart (or of a TRANSIENT sample, kept in memory only) came back
for a new sample, and a reader that had paged past it skipped the new sample. The tests open
a real store file in a temporary data directory the way the service does, keep samples,
page, restart (a new service on the same directory) and page on from the cursor.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dcps.store._durability import DurabilityService
from dcps.store._durability_history import HistoryStore, Limits
from dcps.wire._durability import StoredSample
from tests.support.store_files import migrated

W = b"\x07" * 16
KEEP_ALL = Limits(depth=None)


def body(n: int) -> bytes:
    return b"\x00\x01\x00\x00" + n.to_bytes(4, "little")


def numbers(samples: list[StoredSample]) -> list[int]:
    return [int.from_bytes(s.payload[4:], "little") for s in samples]


@contextmanager
def service(data_dir: Path) -> Iterator[HistoryStore]:
    """What a durability service keeps, opened from ``data_dir`` as the service opens it
    (not started: no DDS is needed to keep and page)."""
    svc = DurabilityService(domain_id=0, data_dir=data_dir, key=None)
    try:
        yield svc.history
    finally:
        svc.close()


def add(h: HistoryStore, topic: str, key: bytes, n: int, *, disposes: bool = False) -> None:
    assert h.add(topic, "p", key, W, n, body(n), disposes, 0) is not None


def page_after(h: HistoryStore, cursor: int) -> tuple[list[int], int]:
    samples, cursor, more = h.page("", (), cursor, 10_000, 1 << 30)
    assert not more
    return numbers(samples), cursor


class TestNumberingAcrossRestarts:
    def test_a_transient_samples_number_is_not_given_again(self, tmp_path: Path) -> None:
        with service(tmp_path) as h:
            h.serve("P", "p", KEEP_ALL, True)
            h.serve("T", "p", KEEP_ALL, False)
            add(h, "P", b"a", 1)
            add(h, "T", b"a", 2)  # in memory only: gone with the restart
            seen, cursor = page_after(h, 0)
            assert seen == [1, 2]
        with service(tmp_path) as h:
            h.serve("T", "p", KEEP_ALL, False)
            add(h, "T", b"a", 3)
            seen, after = page_after(h, cursor)
            assert seen == [3], "a reader that paged past the transient sample misses the new one"
            assert after > cursor

    def test_a_dropped_persistent_samples_number_is_not_given_again(self, tmp_path: Path) -> None:
        with service(tmp_path) as h:
            h.serve("P", "p", Limits(depth=None, cleanup_delay_ns=0), True)
            add(h, "P", b"a", 1)
            add(h, "P", b"b", 2, disposes=True)
            seen, cursor = page_after(h, 0)
            assert seen == [1, 2]
            assert h.cleanup(1) == 1  # b, the newest sample, is forgotten
            assert page_after(h, 0)[0] == [1]
        with service(tmp_path) as h:
            add(h, "P", b"c", 3)
            seen, _ = page_after(h, cursor)
            assert seen == [3], "a reader that paged past the dropped sample misses the new one"
            assert page_after(h, 0)[0] == [1, 3]

    def test_a_sample_pushed_out_by_keep_last_leaves_its_number_behind(
        self, tmp_path: Path
    ) -> None:
        with service(tmp_path) as h:
            h.serve("P", "p", Limits(depth=1), True)
            h.serve("T", "p", Limits(depth=1), False)
            add(h, "P", b"a", 1)
            add(h, "T", b"a", 2)
            add(h, "T", b"a", 3)  # pushes 2 out; 3 is in memory only
            seen, cursor = page_after(h, 0)
            assert seen == [1, 3]
        with service(tmp_path) as h:
            add(h, "P", b"a", 4)  # pushes 1 out
            seen, _ = page_after(h, cursor)
            assert seen == [4]

    def test_numbers_keep_growing_over_restarts_without_new_samples(self, tmp_path: Path) -> None:
        with service(tmp_path) as h:
            h.serve("T", "p", KEEP_ALL, False)
            for n in range(1, 6):
                add(h, "T", b"a", n)
            _, cursor = page_after(h, 0)
            assert cursor == 5
        for _ in range(2):  # restarted twice, nothing kept in between
            with service(tmp_path) as h:
                assert h.count() == 0
        with service(tmp_path) as h:
            h.serve("T", "p", KEEP_ALL, False)
            add(h, "T", b"a", 6)
            assert page_after(h, cursor)[0] == [6]

    def test_a_large_batch_of_transient_samples_is_not_renumbered(self, tmp_path: Path) -> None:
        with service(tmp_path) as h:
            h.serve("T", "p", KEEP_ALL, False)
            rows = [(b"a", W, n, body(n), False) for n in range(1, 10_001)]
            assert len(h.add_batch("T", "p", rows, 0)) == 10_000
            _, cursor = page_after(h, 0)
        with service(tmp_path) as h:
            h.serve("T", "p", KEEP_ALL, False)
            add(h, "T", b"a", 10_001)
            assert page_after(h, cursor)[0] == [10_001]


def test_a_migrated_file_numbers_after_the_samples_it_keeps(tmp_path: Path) -> None:
    """A file from before the mark (format 12) has none: numbering goes on after its
    highest kept sample, as before."""
    with service(tmp_path) as h:
        h.serve("P", "p", KEEP_ALL, True)
        add(h, "P", b"a", 1)
        add(h, "P", b"a", 2)
    with migrated(tmp_path, 12, "DROP TABLE durability_sequence"):
        pass
    with service(tmp_path) as h:
        add(h, "P", b"a", 3)
        seen, _ = page_after(h, 2)
        assert seen == [3]


def test_a_mark_that_cannot_be_written_keeps_the_samples_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """TRANSIENT samples never needed the file: one that refuses the mark (here a trigger
    another program left on the table) costs the guarantee across a restart, not the samples."""
    with service(tmp_path) as h:
        other = sqlite3.connect(tmp_path / "channels.db")
        other.execute(
            "CREATE TRIGGER no_mark BEFORE INSERT ON durability_sequence "
            "BEGIN SELECT RAISE(ABORT, 'no room for the mark'); END"
        )
        other.commit()
        other.close()
        h.serve("T", "p", KEEP_ALL, False)
        with caplog.at_level(logging.WARNING, logger="dcps.store.durability"):
            add(h, "T", b"a", 1)
            add(h, "T", b"a", 2)
        assert page_after(h, 0)[0] == [1, 2]
        warnings = [r.getMessage() for r in caplog.records]
        assert len(warnings) == 1  # once per reserved block, not per sample
        assert warnings[0].startswith(
            "durability: could not save the sample numbering mark 4097 (no room for the mark)"
        )
