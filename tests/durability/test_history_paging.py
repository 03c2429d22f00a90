"""A durability service's pages: every kept sample served once, in arrival order, whatever
was dropped meanwhile; a paused collector comes back as it was."""

from __future__ import annotations

import gc
import threading

from dcps._gc import paused_gc
from dcps.store._durability_history import HistoryStore, Limits
from dcps.wire._durability import FLAG_DISPOSED, FLAG_PERSISTENT, StoredSample

WRITER = b"w" * 16


def _fill(store: HistoryStore, topic: str, count: int, instances: int, start: int = 0) -> None:
    rows = [
        (b"k%03d" % (i % instances), WRITER, 1_000 + i, b"payload%06d" % i, False)
        for i in range(start, start + count)
    ]
    for at in range(0, count, 500):  # as the service keeps them: a take at a time
        store.add_batch(topic, "", rows[at : at + 500], 0)


def _all_pages(store: HistoryStore, topic: str, page: int) -> list[StoredSample]:
    out: list[StoredSample] = []
    after, more = 0, True
    while more:
        samples, after, more = store.page(topic, (), after, page, 1 << 30)
        out.extend(samples)
    return out


class TestPaging:
    def test_every_kept_sample_once_in_arrival_order(self) -> None:
        """Paged in small pages, a KEEP_ALL topic's samples come each once, oldest first."""
        store = HistoryStore()
        store.serve("t", "", Limits(depth=None), False)
        _fill(store, "t", 5_000, 10)
        got = _all_pages(store, "t", 333)
        assert [s.payload for s in got] == [b"payload%06d" % i for i in range(5_000)]
        assert all(isinstance(s, StoredSample) and s.topic == "t" for s in got)

    def test_samples_pushed_out_are_not_served(self) -> None:
        """KEEP_LAST 3: only each instance's 3 newest samples are served, though most of the
        samples ever kept were dropped since (and forgotten by the page index)."""
        store = HistoryStore()
        store.serve("t", "", Limits(depth=3), False)
        _fill(store, "t", 20_000, 7)
        got = _all_pages(store, "t", 4)
        assert [s.payload for s in got] == [b"payload%06d" % i for i in range(20_000 - 21, 20_000)]
        assert store.count("t") == 21

    def test_a_cursor_after_drops_continues_where_it_was(self) -> None:
        """Samples dropped between two pages do not make the next page skip or repeat any."""
        store = HistoryStore()
        store.serve("t", "", Limits(depth=2), False)
        _fill(store, "t", 10, 5)  # keeps payloads 0..9
        first, cursor, more = store.page("t", (), 0, 4, 1 << 30)
        assert more
        assert [s.payload for s in first] == [b"payload%06d" % i for i in range(4)]
        _fill(store, "t", 5, 5, start=10)  # pushes out 0..4, keeps 5..14
        rest = _all_pages_from(store, "t", cursor)
        assert [s.payload for s in rest] == [b"payload%06d" % i for i in range(5, 15)]

    def test_every_topic_merged_in_arrival_order(self) -> None:
        """An alignment page (topic "") interleaves topics as their samples arrived."""
        store = HistoryStore()
        for name in ("a", "b"):
            store.serve(name, "", Limits(depth=None), False)
        for i in range(6):
            store.add_batch("ab"[i % 2], "", [(b"k", WRITER, i, b"p%d" % i, False)], 0)
        got = _all_pages(store, "", 4)
        assert [(s.topic, s.payload) for s in got] == [("ab"[i % 2], b"p%d" % i) for i in range(6)]

    def test_served_samples_carry_topic_and_instance_flags(self) -> None:
        """A PERSISTENT topic's samples come flagged so, a disposed instance's as disposed."""
        store = HistoryStore()
        store.serve("t", "", Limits(depth=None, cleanup_delay_ns=10**18), True)
        store.add_batch(
            "t", "", [(b"k1", WRITER, 1, b"x", False), (b"k2", WRITER, 2, b"y", False)], 0
        )
        store.dispose("t", "", b"k2", 5)
        got = {s.key: s for s in _all_pages(store, "t", 10)}
        assert got[b"k1"].flags == FLAG_PERSISTENT
        assert got[b"k2"].flags == FLAG_PERSISTENT | FLAG_DISPOSED


def _all_pages_from(store: HistoryStore, topic: str, after: int) -> list[StoredSample]:
    out: list[StoredSample] = []
    more = True
    while more:
        samples, after, more = store.page(topic, (), after, 3, 1 << 30)
        out.extend(samples)
    return out


class TestPausedGc:
    def test_collector_back_on_after_nested_and_concurrent_pauses(self) -> None:
        """Nested pauses and pauses from several threads leave the collector enabled."""
        assert gc.isenabled()
        barrier = threading.Barrier(4)

        def pause() -> None:
            with paused_gc():
                barrier.wait(10)
                with paused_gc():
                    assert not gc.isenabled()
                barrier.wait(10)

        threads = [threading.Thread(target=pause) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert gc.isenabled()

    def test_a_disabled_collector_stays_disabled(self) -> None:
        """An application that turned the collector off finds it still off afterwards."""
        gc.disable()
        try:
            with paused_gc():
                pass
            assert not gc.isenabled()
        finally:
            gc.enable()
