"""What a durability service keeps, rule by rule (issue 20's mutation run).

``HistoryStore`` applies a topic's DurabilityService limits (KEEP_LAST depth, KEEP_ALL
with per-instance, instance and sample limits), keeps each sample once, disposes and
forgets instances after the cleanup delay, serves pages in arrival order within a size
and count, and keeps PERSISTENT topics in the store's file across restarts. The tests
call it as the service does and check what a late joiner would be served.
tests/durability/ checks the same rules end to end with Cyclone writers and readers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

import qos as q
from dcps.store._durability_history import HistoryStore, Limits
from dcps.store._log import ChannelLog
from dcps.wire._durability import FLAG_DISPOSED, FLAG_DISPOSES, FLAG_PERSISTENT, StoredSample

W = b"\x07" * 16
KEEP_ALL = Limits(depth=None)


def body(n: int) -> bytes:
    return b"\x00\x01\x00\x00" + n.to_bytes(4, "little")


def add(
    h: HistoryStore,
    key: bytes,
    n: int,
    ts: int | None = None,
    *,
    topic: str = "T",
    partition: str = "p",
    disposes: bool = False,
    now: int = 0,
) -> StoredSample | None:
    return h.add(topic, partition, key, W, n if ts is None else ts, body(n), disposes, now)


def served(h: HistoryStore, topic: str = "", partitions: tuple[str, ...] = ()) -> list[int]:
    """The sample numbers a late joiner gets, in order."""
    samples, _, more = h.page(topic, partitions, 0, 10_000, 1 << 30)
    assert not more
    return [int.from_bytes(s.payload[4:], "little") for s in samples]


def store(
    limits: Limits, db: sqlite3.Connection | None = None, persistent: bool = False
) -> HistoryStore:
    h = HistoryStore(db)
    h.serve("T", "p", limits, persistent)
    return h


@pytest.fixture
def db(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    """The durability tables of a real store file."""
    ChannelLog.in_dir(tmp_path / "data").close()
    conn = sqlite3.connect(tmp_path / "data" / "channels.db", check_same_thread=False)
    try:
        yield conn
    finally:
        conn.close()


class TestLimits:
    def test_of_a_policy(self) -> None:
        policy = q.DurabilityService(
            service_cleanup_delay=timedelta(seconds=2),
            history=q.History.keep_last(3),
            max_samples=10,
            max_instances=4,
            max_samples_per_instance=5,
        )
        assert Limits.of(policy) == Limits(3, 10, 4, 5, 2_000_000_000)
        unlimited = q.DurabilityService(history=q.History.KEEP_ALL)
        assert Limits.of(unlimited) == Limits(None, None, None, None, 0)

    def test_an_endless_cleanup_delay(self) -> None:
        policy = q.DurabilityService(service_cleanup_delay=timedelta.max)
        assert Limits.of(policy).cleanup_delay_ns == 2**62

    def test_text_round_trip(self) -> None:
        assert Limits().to_text() == "1,-1,-1,-1,0"
        limits = Limits(None, 10, 4, 5, 7)
        assert limits.to_text() == "-1,10,4,5,7"
        assert Limits.from_text(limits.to_text()) == limits
        assert Limits.from_text("2,0,0,0,-5") == Limits(2, 0, 0, 0, 0)


class TestKeeping:
    def test_each_sample_once_with_growing_seqs(self) -> None:
        h = store(KEEP_ALL)
        first = add(h, b"a", 1)
        assert first is not None
        assert (first.topic, first.partition, first.key, first.writer) == ("T", "p", b"a", W)
        assert (first.timestamp, first.seq, first.flags) == (1, 1, 0)
        assert add(h, b"a", 1) is None  # the same writer, time and bytes
        second = add(h, b"b", 2, disposes=True)
        assert second is not None
        assert (second.seq, second.flags) == (2, FLAG_DISPOSES)
        assert add(h, b"a", 3, topic="other") is None  # not served
        assert h.count() == h.count("T") == 2
        assert h.count("other") == 0
        assert served(h) == [1, 2]

    def test_a_sample_in_two_partitions_is_kept_in_each(self, db: sqlite3.Connection) -> None:
        """A writer in partitions pa and pb reaches the late joiners of both (the same
        writer, time and bytes are one sample per topic and partition, not per service)."""
        h = HistoryStore(db)
        for partition in ("pa", "pb"):
            h.serve("T", partition, KEEP_ALL, True)
        for partition in ("pa", "pb"):
            assert add(h, b"a", 1, partition=partition) is not None
            assert add(h, b"a", 1, partition=partition) is None  # still once per partition
        assert h.count("T") == 2
        assert served(h, "T", ("pa",)) == served(h, "T", ("pb",)) == [1]
        again = HistoryStore(db)  # a restarted service reads both back from the file
        for partition in ("pa", "pb"):
            again.serve("T", partition, KEEP_ALL, True)
        assert served(again, "T", ("pa",)) == served(again, "T", ("pb",)) == [1]
        assert add(again, b"a", 1, partition="pb") is None

    def test_keep_last_keeps_the_newest_of_each_instance(self) -> None:
        h = store(Limits(depth=2))
        for n in range(1, 5):
            add(h, b"a", n)
        add(h, b"b", 10)
        assert served(h) == [3, 4, 10]
        assert h.count() == 3
        add(h, b"a", 0, ts=1)  # older than all it keeps: not kept, not a rejection
        assert served(h) == [3, 4, 10]
        assert h.rejected == 0
        add(h, b"a", 5, ts=3)  # as old as the oldest kept: kept, the oldest goes
        assert served(h) == [4, 10, 5]

    def test_a_batch_pushing_out_its_own_samples_returns_only_those_kept(self) -> None:
        h = store(Limits(depth=1))
        kept = h.add_batch("T", "p", [(b"a", W, n, body(n), False) for n in (1, 2, 3)], 0)
        assert [s[5] for s in kept] == [3]
        assert served(h) == [3]
        assert h.add_batch("X", "p", [(b"a", W, 9, body(9), False)], 0) == []

    def test_keep_all_per_instance_limit(self) -> None:
        h = store(Limits(depth=None, max_samples_per_instance=2))
        for n in (1, 2, 3):
            add(h, b"a", n)
        add(h, b"b", 4)
        assert served(h) == [1, 2, 4]
        assert h.rejected == 1

    def test_instance_limit(self) -> None:
        h = store(Limits(depth=None, max_instances=2))
        add(h, b"a", 1)
        add(h, b"b", 2)
        add(h, b"c", 3)
        add(h, b"a", 4)
        assert served(h) == [1, 2, 4]
        assert h.rejected == 1

    def test_sample_limit_rejects_and_keeps_no_empty_instance(self) -> None:
        h = store(Limits(depth=None, max_samples=2, max_instances=2))
        add(h, b"a", 1)
        add(h, b"a", 2)
        add(h, b"b", 3)  # over max_samples: rejected, and b is not an instance
        assert h.rejected == 1
        h.dispose("T", "p", b"a", 0)
        assert h.cleanup(0) == 1
        add(h, b"c", 4)
        add(h, b"d", 5)  # two instances: c and d (b would have made it three)
        assert served(h) == [4, 5]
        assert h.rejected == 1

    def test_a_sample_limit_with_keep_last(self) -> None:
        h = store(Limits(depth=5, max_samples=2))
        add(h, b"a", 1)
        add(h, b"b", 2)
        add(h, b"a", 3)
        assert served(h) == [1, 2]
        assert h.rejected == 1

    def test_late_samples_are_kept_in_source_time_order(self) -> None:
        h = store(Limits(depth=2))
        add(h, b"a", 1, ts=30)
        add(h, b"a", 2, ts=10)  # older: inserted before (the instance keeps 10, 30)
        add(h, b"a", 3, ts=20)  # the oldest (10) goes
        add(h, b"a", 4, ts=20)  # as old as the oldest kept (20): kept after it, 20 goes
        samples, _, _ = h.page("T", (), 0, 100, 1 << 30)
        assert sorted(s.timestamp for s in samples) == [20, 30]
        assert served(h) == [1, 4]

    def test_an_older_dispose_does_not_dispose_a_newer_instance(self) -> None:
        h = store(KEEP_ALL)
        add(h, b"a", 1, ts=20)
        add(h, b"a", 2, ts=10, disposes=True)  # older than the newest: state unchanged
        assert h.disposed() == 0
        add(h, b"a", 3, ts=30, disposes=True, now=5)
        assert h.disposed() == h.disposed("T") == 1
        assert h.disposed("other") == 0
        add(h, b"a", 4, ts=40)  # a newer write revives it
        assert h.disposed() == 0


class TestDispose:
    def test_dispose_and_cleanup_after_the_delay(self) -> None:
        h = store(Limits(depth=None, cleanup_delay_ns=100))
        add(h, b"a", 1)
        add(h, b"b", 2)
        h.dispose("T", "p", b"a", 1000)
        h.dispose("T", "p", b"a", 1050)  # already disposed: the first time counts
        h.dispose("T", "p", b"zz", 1000)  # unknown instance
        h.dispose("X", "p", b"a", 1000)  # unknown topic
        assert h.disposed() == 1
        samples, _, _ = h.page("T", (), 0, 10, 1 << 30)
        assert [s.flags for s in samples] == [FLAG_DISPOSED, 0]
        assert h.cleanup(1099) == 0
        assert h.cleanup(1100) == 1
        assert served(h) == [2]
        assert h.count() == 1
        assert h.disposed() == 0
        assert add(h, b"a", 1) is not None  # forgotten: the same sample is new again

    def test_dispose_unless_a_newer_sample_is_kept(self) -> None:
        h = store(KEEP_ALL)
        add(h, b"a", 1, ts=20)
        h.dispose("T", "p", b"a", 0, unless_newer_than=10)
        assert h.disposed() == 0
        h.dispose("T", "p", b"a", 0, unless_newer_than=20)
        assert h.disposed() == 1


class TestPages:
    def test_pages_follow_the_cursor_within_count_and_bytes(self) -> None:
        h = store(KEEP_ALL)
        for n in range(1, 6):
            add(h, b"a", n)
        samples, cursor, more = h.page("T", (), 0, 2, 1 << 30)
        assert ([s.seq for s in samples], cursor, more) == ([1, 2], 2, True)
        samples, cursor, more = h.page("T", (), cursor, 10, 1 << 30)
        assert ([s.seq for s in samples], cursor, more) == ([3, 4, 5], 5, False)
        assert h.page("T", (), 5, 10, 1 << 30) == ([], 5, False)
        size = len(body(1)) + 64  # a sample's share of a page
        samples, cursor, more = h.page("T", (), 0, 10, 2 * size + len(body(1)))
        assert ([s.seq for s in samples], more) == ([1, 2, 3], True)
        samples, _, more = h.page("T", (), 0, 10, 2 * size + len(body(1)) - 1)
        assert ([s.seq for s in samples], more) == ([1, 2], True)
        samples, _, more = h.page("T", (), 0, 10, 1)  # the first always goes
        assert ([s.seq for s in samples], more) == ([1], True)

    def test_topics_and_partitions_merge_in_arrival_order(self) -> None:
        h = HistoryStore()
        for topic, partition in (("T", "p"), ("T", "q1"), ("U", "p")):
            h.serve(topic, partition, KEEP_ALL, False)
        assert h.topics() == [("T", "p"), ("T", "q1"), ("U", "p")]
        add(h, b"a", 1, partition="q1")
        add(h, b"a", 2, topic="U")
        add(h, b"a", 3)
        add(h, b"a", 4, partition="q1")
        assert served(h) == [1, 2, 3, 4]
        assert served(h, "T") == [1, 3, 4]
        assert served(h, "T", ("q*",)) == [1, 4]
        assert served(h, "", ("p", "zz")) == [2, 3]
        assert served(h, "V") == []


class TestAlignment:
    def test_add_many_serves_new_topics_and_counts_new_samples(self) -> None:
        h = HistoryStore()
        records = [
            StoredSample("T", "p", b"a", W, 10, 1, 0, body(1)),
            StoredSample("T", "p", b"a", W, 10, 1, 0, body(1)),  # again
            StoredSample("T", "p", b"b", W, 11, 2, FLAG_DISPOSED, body(2)),
            StoredSample("U", "p", b"a", W, 12, 3, FLAG_PERSISTENT, body(3)),
        ]
        assert h.add_many(records, 0) == 3
        assert served(h) == [1, 2, 3]
        assert h.disposed("T") == 1  # disposed after its sample
        samples, _, _ = h.page("U", (), 0, 10, 1 << 30)
        assert samples[0].flags == FLAG_PERSISTENT

    def test_a_served_dispose_does_not_hide_a_newer_sample(self) -> None:
        h = store(KEEP_ALL)
        add(h, b"a", 5, ts=50)
        h.add_many([StoredSample("T", "p", b"a", W, 40, 1, FLAG_DISPOSED, body(4))], 0)
        assert h.disposed() == 0
        assert served(h) == [5, 4]


class TestPersistent:
    def test_persistent_samples_survive_a_restart(self, db: sqlite3.Connection) -> None:
        h = store(Limits(depth=2, cleanup_delay_ns=100), db, persistent=True)
        for n in (1, 2, 3):
            add(h, b"a", n)
        add(h, b"b", 4)
        add(h, b"c", 5)
        h.dispose("T", "p", b"b", 10)
        h.dispose("T", "p", b"c", 1000)
        assert h.cleanup(110) == 1  # b goes
        again = HistoryStore(db)
        assert again.topics() == [("T", "p")]
        assert served(again) == [2, 3, 5]
        assert again.count() == 3
        assert again.disposed() == 1
        samples, _, _ = again.page("T", (), 0, 10, 1 << 30)
        assert [s.flags for s in samples] == [FLAG_PERSISTENT] * 2 + [
            FLAG_PERSISTENT | FLAG_DISPOSED
        ]
        assert add(again, b"a", 3) is None  # still known
        assert add(again, b"a", 6).seq == 6  # type: ignore[union-attr]  # after the last kept
        assert again.cleanup(1100) == 1
        assert served(HistoryStore(db)) == [3, 6]

    def test_limits_and_a_late_persistent_writer_are_saved(self, db: sqlite3.Connection) -> None:
        h = store(KEEP_ALL, db)
        add(h, b"a", 1)
        h.serve("T", "p", Limits(depth=3), True)  # a PERSISTENT writer came: saved now
        add(h, b"a", 2)
        assert served(HistoryStore(db)) == [1, 2]
        h.serve("T", "p", Limits(depth=1), False)  # new limits, still persistent
        again = HistoryStore(db)
        for n in (3, 4):
            add(again, b"b", n)
        assert served(again) == [1, 2, 4]  # depth 1 for the new instance

    def test_transient_topics_are_not_saved(self, db: sqlite3.Connection) -> None:
        h = store(KEEP_ALL, db)
        add(h, b"a", 1)
        h.dispose("T", "p", b"a", 0)
        assert HistoryStore(db).topics() == []

    def test_many_pushed_out_samples_leave_the_right_page(self) -> None:
        h = store(Limits(depth=1))
        for n in range(1, 3001):
            add(h, b"a" if n % 2 else b"b", n)
        assert served(h) == [2999, 3000]
        assert h.count() == 2


def rows(h: HistoryStore, *items: tuple[bytes, int, int]) -> list[int]:
    """Keep (key, n, ts) rows as one take; the seqs kept."""
    batch = [(key, W, ts, body(n), False) for key, n, ts in items]
    return [s[5] for s in h.add_batch("T", "p", batch, 0)]


def file_rows(db: sqlite3.Connection, table: str) -> int:
    return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


class TestOneTake:
    """A sample skipped in a take (known, over a limit, too old) never hides the rest."""

    def test_a_known_sample(self) -> None:
        h = store(KEEP_ALL)
        add(h, b"a", 1)
        rows(h, (b"a", 1, 1), (b"a", 2, 2))
        assert served(h) == [1, 2]

    def test_over_the_instance_limit(self) -> None:
        h = store(Limits(depth=None, max_instances=1))
        rows(h, (b"a", 1, 1), (b"b", 2, 2), (b"c", 3, 3), (b"a", 4, 4))
        assert served(h) == [1, 4]
        assert h.rejected == 2

    def test_over_the_per_instance_limit(self) -> None:
        h = store(Limits(depth=None, max_samples_per_instance=1))
        rows(h, (b"a", 1, 1), (b"a", 2, 2), (b"a", 3, 3), (b"b", 4, 4))
        assert served(h) == [1, 4]
        assert h.rejected == 2

    def test_older_than_all_kept(self) -> None:
        h = store(Limits(depth=1))
        add(h, b"a", 5, ts=50)
        rows(h, (b"a", 1, 10), (b"b", 2, 20))
        assert served(h) == [5, 2]

    def test_over_the_sample_limit(self) -> None:
        h = store(Limits(depth=None, max_samples=1))
        rows(h, (b"a", 1, 1), (b"b", 2, 2), (b"a", 3, 3))
        assert served(h) == [1]
        assert h.rejected == 2
        h.dispose("T", "p", b"a", 0)
        assert h.cleanup(0) == 1
        rows(h, (b"c", 4, 4))
        assert served(h) == [4]


class TestSourceTimeOrder:
    """An instance keeps its samples oldest first, whatever order they came in: KEEP_LAST
    pushes out the oldest by source time."""

    def test_a_sample_older_than_all_goes_first(self) -> None:
        h = store(Limits(depth=3))
        add(h, b"a", 1, ts=10)
        add(h, b"a", 2, ts=30)
        add(h, b"a", 3, ts=5)  # room left: kept, the oldest now
        add(h, b"a", 4, ts=40)  # full: 5 goes
        assert served(h) == [1, 2, 4]

    def test_a_sample_between_goes_between(self) -> None:
        h = store(Limits(depth=4))
        for n, ts in ((1, 10), (2, 20), (3, 30), (4, 25), (5, 40), (6, 50)):
            add(h, b"a", n, ts=ts)  # 40 pushes out 10, 50 pushes out 20 (not 25)
        samples, _, _ = h.page("T", (), 0, 100, 1 << 30)
        assert sorted(s.timestamp for s in samples) == [25, 30, 40, 50]

    def test_a_sample_just_after_the_oldest_goes_second(self) -> None:
        h = store(Limits(depth=4))
        for n, ts in ((1, 10), (2, 20), (3, 30), (4, 15), (5, 40), (6, 50)):
            add(h, b"a", n, ts=ts)  # 40 pushes out 10, 50 pushes out 15
        samples, _, _ = h.page("T", (), 0, 100, 1 << 30)
        assert sorted(s.timestamp for s in samples) == [20, 30, 40, 50]

    def test_equal_times_keep_their_arrival_order(self) -> None:
        h = store(Limits(depth=3))
        add(h, b"a", 1, ts=20)
        add(h, b"a", 2, ts=30)
        add(h, b"a", 3, ts=20)  # after the first 20
        add(h, b"a", 4, ts=40)  # the first 20 goes
        assert served(h) == [2, 3, 4]


class TestCounts:
    def test_cleanup_counts_every_instance_it_forgets(self) -> None:
        h = store(KEEP_ALL)
        for key in (b"a", b"b", b"c"):
            add(h, key, key[0])
            h.dispose("T", "p", key, 0)
        assert h.cleanup(0) == 3
        assert h.count() == 0


class TestAlignmentRecords:
    def test_a_served_write_dispose_keeps_its_writer_and_disposes(self) -> None:
        h = HistoryStore()
        other = b"\x09" * 16
        record = StoredSample("T", "p", b"a", other, 10, 1, FLAG_DISPOSES | FLAG_DISPOSED, body(1))
        assert h.add_many([record], 77) == 1
        (sample,) = h.page("T", (), 0, 10, 1 << 30)[0]
        assert sample.writer == other
        assert sample.flags == FLAG_DISPOSES | FLAG_DISPOSED
        assert h.disposed() == 1
        h.serve("T", "p", Limits(depth=None, cleanup_delay_ns=100), False)
        assert h.cleanup(176) == 0  # disposed at 77, when it came
        assert h.cleanup(177) == 1


class TestPersistentState:
    def test_a_persistent_write_dispose_is_disposed_after_a_restart(
        self, db: sqlite3.Connection
    ) -> None:
        h = store(KEEP_ALL, db, persistent=True)
        add(h, b"a", 1)
        add(h, b"b", 2, disposes=True, now=5)
        assert h.disposed() == 1
        again = HistoryStore(db)
        assert again.disposed() == 1
        assert served(again) == [1, 2]

    def test_keep_all_without_limits_survives_a_restart(self, db: sqlite3.Connection) -> None:
        h = store(KEEP_ALL, db, persistent=True)
        add(h, b"a", 1)
        again = HistoryStore(db)
        for n in (2, 3, 4):
            add(again, b"a", n)
        assert served(again) == [1, 2, 3, 4]
        assert again.rejected == 0

    def test_a_persistent_writer_with_the_same_limits_saves_the_topic(
        self, db: sqlite3.Connection
    ) -> None:
        h = store(KEEP_ALL, db)
        add(h, b"a", 1)
        h.serve("T", "p", KEEP_ALL, True)
        assert served(HistoryStore(db)) == [1]

    def test_nothing_transient_reaches_the_file(self, db: sqlite3.Connection) -> None:
        h = store(Limits(depth=1), db)
        add(h, b"a", 1)
        add(h, b"a", 2, disposes=True)
        add(h, b"b", 3)
        h.dispose("T", "p", b"b", 0)
        tables = ("durability_topics", "durability_instances", "durability_samples")
        assert [file_rows(db, t) for t in tables] == [0, 0, 0]
