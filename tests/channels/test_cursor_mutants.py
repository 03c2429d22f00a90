"""Positions and one channel's cursor, unit level (issue 20: mutation testing of
``dcps/channels/_position.py`` and ``dcps/channels/_cursors.py``).

A :class:`Position`'s checks, JSON form and text; a commit result's success; the seek
timestamps' conversion to and from nanoseconds; and where a :class:`ChannelCursor`
puts the live batches that arrive (buffered when they follow on, kept when a fetch must
come first, trimmed where they overlap). Everything is built directly, so each case is
exact and takes microseconds; ``tests/channels/test_subscriber_mutants.py`` checks the
same cursors through a subscriber and a store. The tail poll (the safety net for live
batches lost before discovery) is checked on a real subscriber's cursors, its delivery
thread held by the subscriber's lock.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from dcps import BadParameterError
from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    CommitResult,
    CommitStatus,
    OrderBy,
    Position,
    UndecodableElementError,
    _cursors,
)
from dcps.channels._cursors import (
    FETCH_MAX,
    LIVE_KEPT,
    ChannelCursor,
    _Run,
    _steps,
    from_ns,
    to_ns,
)
from dcps.channels._position import trusted_position
from dcps.store import Store
from dcps.wire._batches import ELEMENT_STEP_NS
from dcps.wire._messages import LiveBatch
from tests.support.embedded_store import module_store
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually


class TestPosition:
    def test_fields_text_and_order(self) -> None:
        p = Position(3, 7)
        assert (p.channel, p.offset) == (3, 7)
        assert repr(p) == "Position(channel=3, offset=7)"
        assert str(p) == "3:7"
        assert Position(0, -1).offset == -1
        assert Position(0, 0) == Position(0, 0)
        assert Position(0, 9) < Position(1, 0) < Position(1, 1)

    @pytest.mark.parametrize("bad", [-1, True, False, 1.0, "1", None])
    def test_a_bad_channel_is_refused(self, bad: Any) -> None:
        with pytest.raises(BadParameterError) as caught:
            Position(bad, 0)
        assert str(caught.value) == f"Position channel must be an int >= 0, got {bad!r}"

    @pytest.mark.parametrize("bad", [-2, True, False, 0.0, "0", None])
    def test_a_bad_offset_is_refused(self, bad: Any) -> None:
        with pytest.raises(BadParameterError) as caught:
            Position(0, bad)
        assert str(caught.value) == f"Position offset must be an int >= -1, got {bad!r}"

    def test_json_round_trip(self) -> None:
        p = Position(2, 41)
        assert p.to_json() == {"channel": 2, "offset": 41}
        back = Position.from_json({"channel": 2, "offset": 41})
        assert back == p
        assert type(back) is Position
        with pytest.raises(BadParameterError, match="offset must be an int >= -1"):
            Position.from_json({"channel": 2, "offset": -5})

    @pytest.mark.parametrize(
        "bad", [[2, 41], {"channel": 2}, {"channel": 2, "offset": 1, "x": 0}, None, "2:41"]
    )
    def test_json_of_another_shape_is_refused(self, bad: Any) -> None:
        with pytest.raises(BadParameterError) as caught:
            Position.from_json(bad)
        assert str(caught.value) == (
            f"a Position is a JSON object with keys 'channel' and 'offset', got {bad!r}"
        )

    def test_a_trusted_position_is_a_position(self) -> None:
        p = trusted_position(4, 5)
        assert p == Position(4, 5)
        assert type(p) is Position


class TestCommitResult:
    def test_success_is_committed_now(self) -> None:
        p = Position(0, 1)
        success = {s: CommitResult(0, p, s).is_success for s in CommitStatus}
        assert success == {
            s: s in (CommitStatus.COMMITTED, CommitStatus.ALREADY_COMMITTED) for s in CommitStatus
        }
        assert CommitResult(0, p, CommitStatus.COMMITTED).message == ""


class TestSeekTimestamps:
    def test_to_ns_counts_from_the_epoch(self) -> None:
        assert to_ns(datetime(1970, 1, 1, tzinfo=UTC)) == 0
        when = datetime(2021, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
        assert to_ns(when) == 1_614_834_367_891_011_000
        # another zone names the same instant
        plus2 = timezone(timedelta(hours=2))
        assert to_ns(when.astimezone(plus2)) == 1_614_834_367_891_011_000
        assert to_ns(datetime(1969, 12, 31, 23, 59, 59, 500000, tzinfo=UTC)) == -500_000_000

    def test_to_ns_refuses_what_is_not_an_aware_datetime(self) -> None:
        with pytest.raises(BadParameterError) as caught:
            to_ns(1234)  # type: ignore[arg-type]
        assert str(caught.value) == "a seek timestamp must be a datetime, got 1234"
        with pytest.raises(BadParameterError) as caught:
            to_ns(datetime(2021, 1, 1))  # naive: refused
        assert str(caught.value) == "a seek timestamp must be timezone-aware (e.g. UTC)"

    def test_from_ns_keeps_microseconds(self) -> None:
        assert from_ns(1_614_834_367_891_011_999) == datetime(
            2021, 3, 4, 5, 6, 7, 891011, tzinfo=UTC
        )
        assert from_ns(0) == datetime(1970, 1, 1, tzinfo=UTC)
        assert from_ns(999) == datetime(1970, 1, 1, tzinfo=UTC)
        assert from_ns(1_000_001_000) == datetime(1970, 1, 1, 0, 0, 1, 1, tzinfo=UTC)
        assert from_ns(to_ns(datetime(2030, 5, 6, 7, 8, 9, 10, tzinfo=UTC))) == datetime(
            2030, 5, 6, 7, 8, 9, 10, tzinfo=UTC
        )


def batch(first: int, count: int, stamp: int = 5) -> LiveBatch:
    """A live batch of ``count`` one-byte elements: element ``o`` is the byte ``o``."""
    return LiveBatch("t", 0, first, stamp, [1] * count, bytes(range(first, first + count)), b"")


def buffered(ch: ChannelCursor) -> list[tuple[int, bytes, list[int], int]]:
    """The runs a cursor buffers: (first offset, bytes, sizes, stamps)."""
    return [(r.first, r.blob, r.sizes, r.stamps) for r in ch.runs]  # type: ignore[misc]


def ready(next_offset: int) -> ChannelCursor:
    """A cursor that fetched up to ``next_offset`` and waits for the live tail."""
    ch = ChannelCursor(reader=None, next=next_offset)
    ch.need_fetch = False
    return ch


class TestChannelCursor:
    def test_a_new_cursor_fetches_first(self) -> None:
        ch = ChannelCursor(reader="r")
        assert ch.next is None
        assert ch.need_fetch is True
        assert list(ch.runs) == []
        assert list(ch.live) == []
        assert LIVE_KEPT == 64
        assert FETCH_MAX == 512

    def test_end_follows_the_last_run(self) -> None:
        ch = ready(10)
        assert ch.end == 10
        ch.runs.append(_Run(10, 5, b"abc", [1, 2]))
        ch.runs.append(_Run(12, 5, b"xyz", [1, 1, 1]))
        assert ch.end == 15

    def test_reset_forgets_the_buffer_and_fetches(self) -> None:
        ch = ready(10)
        ch.add_live(batch(10, 2))
        ch.reset(4)
        assert (ch.next, list(ch.runs), ch.need_fetch) == (4, [], True)

    def test_a_batch_before_any_position_is_ignored(self) -> None:
        ch = ChannelCursor(reader=None)
        ch.add_live(batch(0, 3))
        assert list(ch.runs) == []
        assert list(ch.live) == []

    def test_a_batch_that_follows_on_is_buffered(self) -> None:
        ch = ready(10)
        ch.add_live(batch(10, 3, stamp=77))
        assert buffered(ch) == [(10, bytes([10, 11, 12]), [1, 1, 1], 77)]
        assert ch.need_fetch is False
        assert ch.end == 13
        assert list(ch.live) == []

    def test_an_overlapping_batch_is_trimmed(self) -> None:
        ch = ready(10)
        ch.add_live(batch(8, 4))
        # trimmed by two elements: the run starts two element steps after the batch's time
        assert buffered(ch) == [(10, bytes([10, 11]), [1, 1], 5 + 2 * ELEMENT_STEP_NS)]
        ch.add_live(batch(11, 2))
        assert buffered(ch)[-1] == (12, bytes([12]), [1], 5 + ELEMENT_STEP_NS)
        assert ch.end == 13

    def test_a_batch_already_buffered_adds_nothing(self) -> None:
        ch = ready(10)
        ch.add_live(batch(7, 3))  # 7, 8, 9: before the next
        ch.add_live(batch(6, 1))
        assert list(ch.runs) == []
        assert ch.end == 10
        assert ch.need_fetch is False

    def test_a_gap_keeps_the_batch_and_asks_for_a_fetch(self) -> None:
        ch = ready(10)
        ch.add_live(batch(11, 2))
        assert list(ch.runs) == []
        assert [b.first for b in ch.live] == [11]
        assert ch.need_fetch is True

    def test_while_a_fetch_is_due_batches_are_kept(self) -> None:
        ch = ChannelCursor(reader=None, next=10)  # need_fetch
        ch.add_live(batch(10, 2))
        assert list(ch.runs) == []
        assert [b.first for b in ch.live] == [10]
        assert ch.need_fetch is True

    def test_kept_batches_that_follow_on_are_drained_in_order(self) -> None:
        ch = ChannelCursor(reader=None, next=10)
        for first in (8, 10, 12, 13, 16):
            ch.add_live(batch(first, 2))
        ch.drain_live()
        # 8-9 covered, 10-11, 12-13, then 13-14 trimmed to 14; 16 leaves a gap at 15
        assert buffered(ch) == [
            (10, bytes([10, 11]), [1, 1], 5),
            (12, bytes([12, 13]), [1, 1], 5),
            (14, bytes([14]), [1], 5 + ELEMENT_STEP_NS),
        ]
        assert [b.first for b in ch.live] == [16]
        ch.runs.append(_Run(15, 5, b"\x0f", [1]))  # what a fetch of the gap brings
        ch.drain_live()
        assert buffered(ch)[-1] == (16, bytes([16, 17]), [1, 1], 5)
        assert list(ch.live) == []

    def test_drain_stops_at_a_batch_starting_past_the_end(self) -> None:
        ch = ChannelCursor(reader=None, next=10)
        ch.add_live(batch(11, 1))
        ch.drain_live()
        assert list(ch.runs) == []
        assert len(ch.live) == 1

    def test_only_the_latest_batches_are_kept(self) -> None:
        ch = ChannelCursor(reader=None, next=0)
        for first in range(100, 100 + LIVE_KEPT + 1):
            ch.add_live(batch(first, 1))
        assert len(ch.live) == LIVE_KEPT
        assert ch.live[0].first == 101


@pytest.fixture(scope="module")
def embedded(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[tuple[Store, dict[str, Any]]]:
    """One embedded store for the module, and the keywords that reach it."""
    with module_store(tmp_path_factory, worker_id, "cursors") as (store, domain, namespace):
        yield store, {"domain_id": domain, "namespace": namespace}


@pytest.fixture(scope="module")
def served(embedded: tuple[Store, dict[str, Any]]) -> dict[str, Any]:
    """The keywords that reach the module's store."""
    return embedded[1]


@pytest.fixture(scope="module")
def counted(embedded: tuple[Store, dict[str, Any]]) -> Store:
    """The module's store, whose metrics count the FETCHes a test's cursors send."""
    return embedded[0]


class TestPollTails:
    def test_a_channel_whose_tail_reaches_the_cursor_is_fetched_again(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        with ChannelPublisher(t, order_by=OrderBy.fixed(0), **served) as pub:
            assert pub.publish_many([Msg(0, s) for s in range(3)]).result(5.0) is not None
        sub: ChannelSubscriber[Msg] = ChannelSubscriber(t, **served)
        try:
            with sub._lock:  # the delivery thread waits: only this test moves the cursors
                cursors = sub._cursors
                at_tail, past_tail = cursors.chans[0], cursors.chans[1]
                at_tail.reset(2)  # the stored tail of channel 0 is offset 2: not buffered
                past_tail.reset(0)  # channel 1 is empty (tail -1)
                for ch in (at_tail, past_tail):
                    ch.need_fetch = False
                cursors.poll_tails()
                assert (at_tail.need_fetch, past_tail.need_fetch) == (True, False)
                at_tail.reset(3)  # past the tail now
                at_tail.need_fetch = False
                unknown = cursors.chans[1]
                unknown.next = None  # a cursor that does not know where it stands yet
                cursors.poll_tails()
                assert (at_tail.need_fetch, unknown.need_fetch) == (False, False)
                at_tail.reset(1)
                at_tail.runs.append(_Run(1, 5, b"\x00\x00", [1, 1]))  # 1 and 2 buffered
                at_tail.need_fetch = False
                cursors.poll_tails()
                assert at_tail.need_fetch is False  # the tail (2) is buffered
                owned = dict(cursors.chans)
                cursors.chans.clear()  # no channel owned: nothing to ask
                cursors.poll_tails()
                cursors.chans.update(owned)
        finally:
            sub.close()


def published(served: dict[str, Any], t: ChannelledTopic, batches: list[range]) -> None:
    """Publish each range as its own batch (each gets its own store timestamp)."""
    with ChannelPublisher(t, order_by=OrderBy.fixed(0), **served) as pub:
        for seqs in batches:
            assert pub.publish_many([Msg(0, s) for s in seqs]).result(5.0) is not None


class TestThroughASubscriber:
    def test_elements_of_two_batches_keep_their_own_timestamps(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(0, 1), range(1, 2)])
        with ChannelSubscriber(t, **served) as sub:
            first, second = sub.receive(2).result(5.0)  # one fetch: one run of both
            assert (first.position.offset, second.position.offset) == (0, 1)
            assert first.timestamp < second.timestamp
            again = ChannelSubscriber(t, **served)
            with again:
                assert [e.timestamp for e in again.receive(2).result(5.0)] == [
                    first.timestamp,
                    second.timestamp,
                ]

    def test_each_element_of_a_batch_has_its_own_time_and_a_seek_resumes_after_it(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        """The store stamps element i of a batch i microseconds after the batch's time: a
        subscriber shows those times (live and fetched), so seeking to an element's own
        time resumes right after it, not after its batch's first element. (20 elements
        published at once: the publisher sends the first alone when idle, and batches
        the rest.)"""
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        with ChannelSubscriber(t, group="g", **served) as sub:
            waiting = sub.receive(20)  # before anything is published: it comes live
            published(served, t, [range(20)])
            got = waiting.result(5.0)
            while len(got) < 20:
                got += sub.receive(20 - len(got)).result(5.0)
            stamps = [e.timestamp for e in got]
            assert all(a < b for a, b in itertools.pairwise(stamps)), stamps
            assert sub.seek(0, stamps[10]) == Position(0, 10)
            (after,) = sub.receive(1).result(5.0)
            assert after.position == Position(0, 11)
        with ChannelSubscriber(t, **served) as again:  # from the head: fetched
            fetched = receive_n(again, 20, 5.0)
            assert [e.timestamp for e in fetched] == stamps

    def test_a_seek_drops_the_elements_kept_for_a_cancelled_receive(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(5)])
        with ChannelSubscriber(t, **served) as sub:
            with sub._lock:  # as the delivery thread does when a receive was cancelled
                taken, _ = sub._cursors.collect(2, 5.0)
                assert [e.position.offset for e in taken] == [0, 1]
                sub._cursors.carry[:0] = taken
            assert sub.seek(0, Position(0, 3)) == Position(0, 3)
            (element,) = sub.receive(1).result(5.0)
            assert element.position == Position(0, 4)

    def test_a_live_batch_is_delivered_one_element_at_a_time(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        """A batch that arrives live (one timestamp for the run) taken part by part."""
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        with ChannelSubscriber(t, **served) as sub:
            first = sub.receive()  # waiting before anything is published: it comes live
            published(served, t, [range(4)])
            got = [first.result(5.0)] + [sub.receive().result(5.0) for _ in range(3)]
            assert [e.position.offset for e in got] == [0, 1, 2, 3]
            assert [e.value.seq for e in got] == [0, 1, 2, 3]


def fetches(store: Store) -> float:
    """The FETCH requests the store answered so far (each is counted before its reply
    leaves, so a reply received is already counted)."""
    value = store.metrics.registry.get_sample_value(
        "dcps_store_requests_total", {"kind": "fetch", "result": "ok"}
    )
    return value or 0.0


def fetched(store: Store, topic: str) -> float:
    """The elements of ``topic`` the store sent in FETCH replies so far."""
    value = store.metrics.registry.get_sample_value(
        "dcps_store_fetched_elements_total", {"topic": topic}
    )
    return value or 0.0


def on_channel(served: dict[str, Any], t: ChannelledTopic, channel: int, seqs: range) -> None:
    """Publish ``Msg(channel, s)`` for each ``s`` of ``seqs`` into ``channel`` (one call)."""
    with ChannelPublisher(t, order_by=OrderBy.fixed(channel), **served) as pub:
        assert pub.publish_many([Msg(channel, s) for s in seqs]).result(5.0) is not None


def where(elements: list[Any]) -> list[tuple[int, int]]:
    """(channel, offset) of each element."""
    return [(e.position.channel, e.position.offset) for e in elements]


def stored_as_live(sub: ChannelSubscriber[Any], t: ChannelledTopic, first: int, count: int) -> Any:
    """Elements ``first .. first + count - 1`` of channel 0 as the live batch the store
    pushed for them (read back from the store: the same bytes and times)."""
    run = sub._client.fetch(t.name, 0, first, count, 5.0).run
    assert (run.first, run.count) == (first, count)
    stamp = int(run.timestamps()[0])
    return LiveBatch(t.name, 0, first, stamp, run.element_sizes().tolist(), run.data, b"")


def without_pushes(sub: ChannelSubscriber[Any], tails: dict[int, int]) -> None:
    """(The subscriber's lock held, its cursors due to fetch.) Wait for the store's pushes
    of what was stored before the subscriber started (a new batch reader gets the last
    ones: TRANSIENT_LOCAL) and forget them, so that the cursors get only what the store's
    FETCHes and the test give them: ``tails`` is each channel's last stored offset."""
    cursors = sub._cursors

    def arrived() -> bool:
        cursors.take_live()
        return all(
            any(b.first + len(b.sizes) == tail + 1 for b in cursors.chans[c].live)
            for c, tail in tails.items()
        )

    eventually(arrived, timeout=5.0, what="the pushes of the stored batches")
    for c in tails:
        cursors.chans[c].live.clear()


class TestRoundRobin:
    def test_each_round_starts_at_the_next_channel(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        """One element per receive: the channels take turns, from the lowest, each round
        starting one channel further (three channels, so a round that went backwards or
        skipped one shows)."""
        t = ChannelledTopic(topic_name, Msg, channel_count=3, retain_consumed=True)
        for c in range(3):
            on_channel(served, t, c, range(3))
        with ChannelSubscriber(t, **served) as sub:
            got = [sub.receive().result(5.0) for _ in range(6)]
            assert where(got) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
            assert [e.value.key for e in got] == [0, 1, 2, 0, 1, 2]
            # a larger receive takes all it can from the channel whose turn it is first
            more = sub.receive(2).result(5.0)
            assert where(more) == [(0, 2), (1, 2)]


class TestResume:
    def test_a_channel_with_nothing_stored_after_the_commit_starts_without_a_fetch(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(3)])
        with ChannelSubscriber(t, group="g", **served) as first:
            receive_n(first, 3, 5.0)  # all three, before committing
            assert first.commit(0, Position(0, 2)).is_success
        before = fetches(counted)
        with ChannelSubscriber(t, group="g", **served) as sub:
            with sub._lock:  # the delivery thread waits: only this test moves the cursor
                cursors = sub._cursors
                ch = cursors.chans[0]
                published(served, t, [range(3, 5)])

                def arrived() -> bool:
                    cursors.take_live()
                    return bool(ch.runs or ch.live)

                eventually(arrived, timeout=5.0, what="the live batch")
                out, committed = cursors.collect(5, 5.0)
            assert where(out) == [(0, 3), (0, 4)]
            assert [e.value.seq for e in out] == [3, 4]
            assert committed == {0: 4}
            assert fetches(counted) == before  # resumed past the tail: all came live

    def test_a_channel_whose_tail_is_the_resume_point_is_fetched_at_once(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(3)])
        with ChannelSubscriber(t, group="g", **served) as first:
            receive_n(first, 3, 5.0)  # all three, before committing
            assert first.commit(0, Position(0, 1)).is_success
        with ChannelSubscriber(t, group="g", **served) as sub:
            with sub._lock:
                before = fetches(counted)
                out, _ = sub._cursors.collect(5, 5.0)  # the first round: no tail poll
                assert fetches(counted) == before + 1
            assert where(out) == [(0, 2)]
            assert [e.value.seq for e in out] == [2]


class TestFetch:
    def test_a_fetch_asks_only_for_the_gap_before_kept_live_batches(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(10)])
        with ChannelSubscriber(t, **served) as sub, sub._lock:
            cursors = sub._cursors
            ch = cursors.chans[0]
            assert (ch.next, ch.need_fetch) == (0, True)
            without_pushes(sub, {0: 9})
            ch.add_live(stored_as_live(sub, t, 5, 5))  # came live while a fetch was due
            before, sent = fetches(counted), fetched(counted, t.name)
            out, committed = cursors.collect(20, 5.0)
            assert where(out) == [(0, o) for o in range(10)]
            assert [e.value.seq for e in out] == list(range(10))
            assert committed == {0: 9}
            # one FETCH, of the five elements before the kept batch
            assert (fetches(counted) - before, fetched(counted, t.name) - sent) == (1, 5)

    def test_kept_live_batches_after_a_second_gap_are_reached_in_the_same_round(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(20)])
        with ChannelSubscriber(t, **served) as sub, sub._lock:
            cursors = sub._cursors
            ch = cursors.chans[0]
            without_pushes(sub, {0: 19})
            ch.add_live(stored_as_live(sub, t, 5, 5))
            ch.add_live(stored_as_live(sub, t, 15, 5))  # the push of 10-14 was missed
            before, sent = fetches(counted), fetched(counted, t.name)
            out, _ = cursors.collect(30, 5.0)
            assert where(out) == [(0, o) for o in range(20)]
            assert [e.value.seq for e in out] == list(range(20))
            assert (fetches(counted) - before, fetched(counted, t.name) - sent) == (2, 10)
            assert (list(ch.live), ch.need_fetch) == ([], False)

    def test_a_full_fetch_is_followed_by_another_in_the_same_round(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        stored = FETCH_MAX + 88
        published(served, t, [range(stored)])
        with ChannelSubscriber(t, **served) as sub, sub._lock:
            cursors = sub._cursors
            without_pushes(sub, {0: stored - 1})
            before, sent = fetches(counted), fetched(counted, t.name)
            out, committed = cursors.collect(2 * FETCH_MAX, 5.0)
            assert [e.position.offset for e in out] == list(range(stored))
            assert [e.value.seq for e in out] == list(range(stored))
            assert committed == {0: stored - 1}
            # FETCH_MAX, then the 88 left: no third, empty fetch
            assert (fetches(counted) - before, fetched(counted, t.name) - sent) == (2, stored)
            assert cursors.chans[0].need_fetch is False

    def test_a_fetch_of_exactly_fetch_max_asks_again(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        """A full reply may not be the end: the cursor asks once more (and gets nothing)."""
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(FETCH_MAX)])
        with ChannelSubscriber(t, **served) as sub, sub._lock:
            cursors = sub._cursors
            without_pushes(sub, {0: FETCH_MAX - 1})
            before = fetches(counted)
            out, _ = cursors.collect(2 * FETCH_MAX, 5.0)
            assert len(out) == FETCH_MAX
            assert fetches(counted) - before == 2


class TestRetention:
    """A topic that does not retain consumed elements: a commit ahead of what was
    delivered releases them, and the cursor's fetch skips over the gap."""

    def test_elements_released_before_the_cursor_are_skipped(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=False)
        with ChannelSubscriber(t, group="g", **served):
            pass  # the group exists: what is published now is kept for it
        published(served, t, [range(10)])
        with ChannelSubscriber(t, group="g", **served) as sub:
            with sub._lock:  # pushed before the commit, they would be delivered
                without_pushes(sub, {0: 9})
            assert sub.commit(0, Position(0, 4)).is_success  # releases 0-4
            assert sub.head(0) == Position(0, 5)
            got = sub.receive(10).result(5.0)
            while len(got) < 5:
                got += sub.receive(10).result(5.0)
            assert where(got) == [(0, o) for o in range(5, 10)]
            assert [e.value.seq for e in got] == list(range(5, 10))
            assert sub.remaining_messages() == 0

    def test_a_cursor_behind_a_released_channel_moves_to_its_head(
        self, served: dict[str, Any], counted: Store, topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=False)
        with ChannelSubscriber(t, group="g", **served):
            pass
        published(served, t, [range(10)])
        with ChannelSubscriber(t, group="g", **served) as sub:
            assert sub.remaining_messages() == 10
            assert sub.commit(0, Position(0, 9)).is_success  # releases all of it
            with sub._lock:
                without_pushes(sub, {0: 9})
                before = fetches(counted)
                out, _ = sub._cursors.collect(5, 5.0)
                assert out == []
                assert fetches(counted) == before + 1
            assert sub.remaining_messages() == 0
            waiting = sub.receive()
            published(served, t, [range(10, 11)])
            element = waiting.result(5.0)
            assert element.position == Position(0, 10)
            assert element.value.seq == 10


class TestOwnership:
    def test_elements_kept_for_a_cancelled_receive_go_with_their_channel(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        """Elements taken for a receive that was cancelled wait for the next one; if their
        channel is taken away meanwhile they go with it: regained, the channel starts again
        after its last commit, and each element comes once."""
        t = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        for c in range(2):
            on_channel(served, t, c, range(2))
        with ChannelSubscriber(t, **served) as sub:
            with sub._lock:
                cursors = sub._cursors
                taken, _ = cursors.collect(4, 5.0)
                assert where(taken) == [(0, 0), (0, 1), (1, 0), (1, 1)]
                cursors.carry[:0] = taken  # as when the receive was cancelled
                assert cursors.own({0}) == (set(), {1})
                assert where(cursors.carry) == [(0, 0), (0, 1)]
                assert cursors.own({0, 1}) == ({1}, set())
            got = sub.receive(10).result(5.0)
            while len(got) < 4:
                got += sub.receive(10).result(5.0)
            assert sorted(where(got)) == [(0, 0), (0, 1), (1, 0), (1, 1)]


class TestElementTimes:
    def test_element_steps_reach_the_end_of_a_long_batch(self) -> None:
        """Element ``i`` of a batch shows the batch's time plus ``i`` microseconds, however
        long the batch: the kept steps grow to cover it, and are handed out again."""
        n = 4 * max(len(_cursors._STEPS), 1024) + 3
        steps = _steps(n)
        assert len(steps) >= n
        assert steps[:n] == [timedelta(microseconds=i) for i in range(n)]
        assert _steps(n) is steps
        assert _steps(5) is steps  # a shorter batch uses the kept list

    def test_the_first_batch_of_a_process_gets_its_steps(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_cursors, "_STEPS", [])  # as in a process that delivered nothing
        assert _steps(3)[:3] == [timedelta(0), timedelta(microseconds=1), timedelta(microseconds=2)]

    @pytest.mark.parametrize("batches", [2, 3])
    def test_a_fetched_run_of_several_batches_shows_each_elements_own_time(
        self, served: dict[str, Any], topic_name: str, batches: int
    ) -> None:
        """Batches of one element fetched as one run: each element shows its own batch's
        time (not the first's plus a microsecond), so a seek to it resumes right after it."""
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(b, b + 1) for b in range(batches)])
        with ChannelSubscriber(t, group="g", **served) as sub:
            with sub._lock:
                without_pushes(sub, {0: batches - 1})
                out, _ = sub._cursors.collect(10, 5.0)  # one FETCH: one run of them all
            assert where(out) == [(0, o) for o in range(batches)]
            stamps = [e.timestamp for e in out]
            assert all(a < b for a, b in itertools.pairwise(stamps)), stamps
            for k in reversed(range(batches)):
                assert sub.seek(0, stamps[k]) == Position(0, k)
            (after,) = sub.receive(1).result(5.0)
            assert after.position == Position(0, 1)

    def test_a_fetched_single_batch_counts_its_elements_from_its_time(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(0, 1)])
        with ChannelSubscriber(t, group="g", **served) as sub:
            with sub._lock:
                without_pushes(sub, {0: 0})
                (only,), _ = sub._cursors.collect(10, 5.0)
            assert only.position == Position(0, 0)
            assert sub.seek(0, only.timestamp) == Position(0, 0)
            assert sub.seek(0, only.timestamp - timedelta(microseconds=1)) == Position(0, -1)


class TestFastPath:
    """A live batch (one time for all its elements) is built in one go only when no filter
    or converter has to see each element."""

    @pytest.mark.parametrize(
        ("options", "values"),
        [
            ({"filter": lambda m: m.seq % 2 == 0}, [0, 2, 4]),
            ({"converter": lambda m: m.seq * 10}, [0, 10, 20, 30, 40, 50]),
            ({"filter": lambda m: m.seq % 2 == 0, "converter": lambda m: m.seq * 10}, [0, 20, 40]),
        ],
        ids=["filter", "converter", "both"],
    )
    def test_filter_and_converter_see_each_element_of_a_live_batch(
        self, served: dict[str, Any], topic_name: str, options: dict[str, Any], values: list[int]
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        with ChannelSubscriber(t, **served, **options) as sub:
            with sub._lock:
                cursors = sub._cursors
                ch = cursors.chans[0]
                assert (ch.next, ch.need_fetch) == (0, False)  # nothing stored: all comes live
                published(served, t, [range(6)])

                def arrived() -> bool:
                    cursors.take_live()
                    return ch.end == 6

                eventually(arrived, timeout=5.0, what="the live batches")
                out, committed = cursors.collect(10, 5.0)
            shown = [e.value if isinstance(e.value, int) else e.value.seq for e in out]
            assert shown == values
            assert committed == {0: 5}
            # each element shows its own time (its batch's plus a microsecond per element
            # before it): a seek to that time lands on it
            for e in out:
                assert sub.seek(0, e.timestamp) == e.position


class TestUndecodable:
    def test_the_error_names_the_elements_time_bytes_and_cause(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        published(served, t, [range(2)])
        bad = b"\x00\x01\x00\x00\x07"  # a CDR header and one byte: not a Msg
        with ChannelSubscriber(t, **served) as sub:
            sub._client.publish_async(t.name, 0, [len(bad)], bad).result(5.0)
            published(served, t, [range(2, 3)])
            good = sub.receive(10).result(5.0)
            while len(good) < 2:
                good += sub.receive(10).result(5.0)
            assert where(good) == [(0, 0), (0, 1)]  # the receive stops before the bad one
            with pytest.raises(UndecodableElementError) as caught:
                sub.receive(10).result(5.0)
            error = caught.value
            assert error.position == Position(0, 2)
            assert error.data == bad
            assert isinstance(error.cause, Exception)
            assert type(error.cause).__name__ in str(error)
            assert good[1].timestamp < error.timestamp
            assert sub.seek(0, error.timestamp) == Position(0, 2)  # its own time
            (after,) = sub.receive(1).result(5.0)
            assert (after.position, after.value.seq) == (Position(0, 3), 2)

    def test_a_fetch_that_stops_at_an_undecodable_element_keeps_the_remaining_count(
        self, served: dict[str, Any], topic_name: str
    ) -> None:
        """After a seek back, the fetch brings the undecodable element first: the receive
        fails, and the subscriber still counts what remains from that element on."""
        t = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        bad = b"\x00\x01\x00\x00\x07"
        with ChannelSubscriber(t, **served) as sub:
            published(served, t, [range(2)])
            sub._client.publish_async(t.name, 0, [len(bad)], bad).result(5.0)
            published(served, t, [range(2, 3)])
            good = sub.receive(10).result(5.0)
            while len(good) < 2:
                good += sub.receive(10).result(5.0)
            assert sub.seek(0, Position(0, 1)) == Position(0, 1)  # forgets what was buffered
            with pytest.raises(UndecodableElementError) as caught:
                sub.receive(10).result(5.0)
            assert caught.value.position == Position(0, 2)
            assert sub.remaining_messages() == 2  # offsets 2 and 3
