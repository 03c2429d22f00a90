"""KEEP_LAST keeps the newest samples whatever order they arrive in (alignment brings old ones).

Found by the cut-link test: after a partition, a service that kept the newer values
aligned from one that kept only older ones, and its KEEP_LAST(1) history let the
older sample push out the newer one; both services then served the old value.
"""

from __future__ import annotations

from dcps.store._durability_history import HistoryStore, Limits

WRITER = b"w" * 16


def _values(store: HistoryStore, topic: str) -> list[bytes]:
    samples, _, _ = store.page(topic, (), 0, 100, 1 << 20)
    return [s.payload for s in sorted(samples, key=lambda s: s.timestamp)]


def test_an_older_sample_does_not_push_out_a_newer_one_in_keep_last_1() -> None:
    store = HistoryStore()
    store.serve("t", "", Limits(depth=1), persistent=False)
    assert store.add("t", "", b"k", WRITER, 200, b"new", False, 0) is not None
    assert store.add("t", "", b"k", WRITER, 100, b"old", False, 0) is None
    assert _values(store, "t") == [b"new"]
    assert store.count("t") == 1


def test_keep_last_n_keeps_the_n_newest_by_source_timestamp() -> None:
    store = HistoryStore()
    store.serve("t", "", Limits(depth=2), persistent=False)
    for ts, value in ((100, b"a"), (300, b"c"), (200, b"b"), (50, b"z")):
        store.add("t", "", b"k", WRITER, ts, value, False, 0)
    assert _values(store, "t") == [b"b", b"c"]
    store.add("t", "", b"k", WRITER, 400, b"d", False, 0)  # pushes out the oldest, b
    assert _values(store, "t") == [b"c", b"d"]


def test_an_older_sample_does_not_revive_a_disposed_instance() -> None:
    """An instance whose newest sample disposes it stays disposed when an older
    (non-disposing) sample of it arrives afterwards."""
    store = HistoryStore()
    store.serve("t", "", Limits(depth=None), persistent=False)
    store.add("t", "", b"k", WRITER, 200, b"gone", True, 0)
    store.add("t", "", b"k", WRITER, 100, b"before", False, 0)
    assert store.disposed("t") == 1
    assert _values(store, "t") == [b"before", b"gone"]
