"""Channelled topics end to end in one process: embedded store, publishers, subscribers."""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    InconsistentPolicyError,
    PreconditionNotMetError,
)
from dcps import channels as channels_pkg
from dcps._cyclone.binding import matched_readers
from dcps.channels import (
    ChannelledTopic,
    ChannelOwnershipListener,
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    Element,
    OrderBy,
    Position,
    destroy_subscriber_group,
)
from dcps.store import Store
from tests.support.peers.channels_types import Msg, receive_n, wait_until

TIMEOUT = 10.0


@pytest.fixture
def topic(topic_name: str) -> ChannelledTopic:
    """A four-channel topic that does not retain consumed elements."""
    return ChannelledTopic(topic_name, Msg, channel_count=4)


@pytest.fixture
def retained(topic_name: str) -> ChannelledTopic:
    """A three-channel topic that retains consumed elements."""
    return ChannelledTopic(topic_name + "_r", Msg, channel_count=3, retain_consumed=True)


class Entities:
    """Opens publishers/subscribers on the test's store and closes them afterwards."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        self.kw = {"domain_id": domain_id, "namespace": namespace}
        self.opened: list[ChannelPublisher[Msg] | ChannelSubscriber[Msg]] = []

    def pub(self, topic: ChannelledTopic, **kw: object) -> ChannelPublisher[Msg]:
        p: ChannelPublisher[Msg] = ChannelPublisher(topic, **self.kw, **kw)  # type: ignore[arg-type]
        self.opened.append(p)
        return p

    def sub(self, topic: ChannelledTopic, **kw: object) -> ChannelSubscriber[Msg]:
        s: ChannelSubscriber[Msg] = ChannelSubscriber(topic, **self.kw, **kw)  # type: ignore[arg-type]
        self.opened.append(s)
        return s

    def close(self) -> None:
        for entity in reversed(self.opened):
            entity.close()


@pytest.fixture
def dds(store: Store, domain_id: int, namespace: str) -> Iterator[Entities]:
    """A factory of publishers and subscribers on the test's store."""
    entities = Entities(domain_id, namespace)
    try:
        yield entities
    finally:
        entities.close()


def publish_all(pub: ChannelPublisher[Msg], samples: list[Msg]) -> list[Position | None]:
    """Publish samples and wait for every confirmation."""
    futures = [pub.publish(s) for s in samples]
    pub.flush()
    return [f.result(TIMEOUT) for f in futures]


class TestPublicApi:
    def test_all_is_sorted_and_complete(self) -> None:
        """``dcps.channels.__all__`` is sorted and names only public attributes."""
        assert channels_pkg.__all__ == sorted(channels_pkg.__all__)
        for name in channels_pkg.__all__:
            assert not name.startswith("_")
            assert hasattr(channels_pkg, name)


class TestPublisher:
    def test_confirmed_positions_are_dense_per_channel(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """Confirmed publishes complete with positions 0, 1, 2, ... in each channel."""
        pub = dds.pub(topic)
        positions = publish_all(pub, [Msg(k % 3, i) for i, k in enumerate(range(30))])
        by_channel: dict[int, list[int]] = defaultdict(list)
        for p in positions:
            assert p is not None
            by_channel[p.channel].append(p.offset)
        for offsets in by_channel.values():
            assert offsets == list(range(len(offsets)))

    def test_ordering_key_keeps_a_key_in_one_channel(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """Samples with the same key land in the same channel."""
        pub = dds.pub(topic)
        positions = publish_all(pub, [Msg(k, i) for i in range(5) for k in range(8)])
        channel_of: dict[int, set[int]] = defaultdict(set)
        for i, p in enumerate(positions):
            assert p is not None
            channel_of[i % 8].add(p.channel)
        assert all(len(c) == 1 for c in channel_of.values())
        assert len({c for cs in channel_of.values() for c in cs}) > 1

    def test_round_robin_and_fixed(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Round robin visits every channel; a fixed channel receives everything."""
        rr = publish_all(
            dds.pub(topic, order_by=OrderBy.round_robin()), [Msg(1, i) for i in range(8)]
        )
        assert {p.channel for p in rr if p} == {0, 1, 2, 3}
        fixed = publish_all(
            dds.pub(topic, order_by=OrderBy.fixed(2)), [Msg(i, i) for i in range(5)]
        )
        assert {p.channel for p in fixed if p} == {2}

    def test_unconfirmed_completes_at_once(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Unconfirmed publishes complete immediately with None and still arrive."""
        sub = dds.sub(topic)
        pub = dds.pub(topic, confirmed=False)
        futures = [pub.publish(Msg(i, i)) for i in range(10)]
        assert all(f.done() and f.result() is None for f in futures)
        assert sorted(e.value.seq for e in receive_n(sub, 10)) == list(range(10))

    def test_wrong_sample_type_and_bad_options(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Publishing another type or pinning a missing channel is refused."""
        pub = dds.pub(topic)
        with pytest.raises(BadParameterError, match="carries Msg"):
            pub.publish("not a Msg")  # type: ignore[arg-type]
        with pytest.raises(InconsistentPolicyError, match="fixed channel 9"):
            dds.pub(topic, order_by=OrderBy.fixed(9))

    def test_channel_count_conflict(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Opening a topic with a different explicit channel count than stored fails."""
        dds.pub(topic)
        with pytest.raises(InconsistentPolicyError, match="4 channels"):
            dds.pub(ChannelledTopic(topic.name, Msg, channel_count=5))

    def test_default_channel_count_is_17(self, dds: Entities, topic_name: str) -> None:
        """A topic first seen without a channel count gets 17 channels."""
        assert dds.pub(ChannelledTopic(topic_name + "_d", Msg)).channel_count == 17

    def test_store_partition_count_sets_the_default(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A store with 100 partitions gives new topics 11 channels (next prime above 10)."""
        with (
            Store(tmp_path / "s", domain_id=domain_id, namespace=namespace, partition_count=100),
            ChannelPublisher(
                ChannelledTopic(topic_name, Msg), domain_id=domain_id, namespace=namespace
            ) as pub,
        ):
            assert pub.channel_count == 11

    def test_flow_control_times_out_when_store_stops(
        self, tmp_path: Path, domain_id: int, namespace: str, topic: ChannelledTopic
    ) -> None:
        """With the store gone and the in-flight window full, publish raises DcpsTimeoutError."""
        store = Store(tmp_path / "s", domain_id=domain_id, namespace=namespace).start()
        pub: ChannelPublisher[Msg] = ChannelPublisher(
            topic,
            domain_id=domain_id,
            namespace=namespace,
            batch_count=1,
            max_in_flight=1,
            timeout=timedelta(milliseconds=300),
        )
        try:
            store.close()
            first = pub.publish(Msg(0, 0))
            with pytest.raises(DcpsTimeoutError, match="falling behind"):
                pub.publish(Msg(0, 1))
            with pytest.raises(DcpsTimeoutError):
                first.result(TIMEOUT)
        finally:
            pub.close()


class TestAnonymousSubscriber:
    def test_receives_everything_in_channel_order(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """An anonymous subscriber owns every channel and sees each channel in order."""
        sub = dds.sub(topic)
        assert sub.channels == [0, 1, 2, 3]
        assert sub.is_owner(3)
        assert sub.channel_count == 4
        pub = dds.pub(topic)
        publish_all(pub, [Msg(i % 5, i) for i in range(200)])
        got = receive_n(sub, 200)
        per_channel: dict[int, list[int]] = defaultdict(list)
        for e in got:
            per_channel[e.channel].append(e.position.offset)
        assert sorted(e.value.seq for e in got) == list(range(200))
        assert all(offs == sorted(offs) for offs in per_channel.values())

    def test_futures_complete_in_call_order(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Receive futures complete in the order the calls were made, on one thread."""
        sub = dds.sub(topic)
        order: list[int] = []
        threads: set[int] = set()
        futures = [sub.receive() for _ in range(5)]
        for i, f in enumerate(futures):
            f.add_done_callback(
                lambda _f, i=i: (order.append(i), threads.add(threading.get_ident()))
            )
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(5)])
        values = [f.result(TIMEOUT).value.seq for f in futures]  # type: ignore[union-attr]
        assert values == list(range(5))
        assert order == list(range(5))
        assert len(threads) == 1

    def test_cancelled_receive_loses_nothing(self, dds: Entities, topic: ChannelledTopic) -> None:
        """A receive cancelled before data arrives is skipped; the next one gets the data."""
        sub = dds.sub(topic)
        abandoned = sub.receive()
        assert abandoned.cancel()
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(3)])
        assert [e.value.seq for e in receive_n(sub, 3)] == [0, 1, 2]

    def test_complete_on_empty(self, dds: Entities, topic: ChannelledTopic) -> None:
        """With complete_on_empty, receive on an empty topic completes with None or []."""
        sub = dds.sub(topic, complete_on_empty=True)
        assert sub.receive().result(TIMEOUT) is None
        assert sub.receive(10).result(TIMEOUT) == []

    def test_filter_and_converter(self, dds: Entities, topic: ChannelledTopic) -> None:
        """A filter drops elements and a converter maps the values delivered."""
        sub = dds.sub(topic, filter=lambda m: m.seq % 2 == 0, converter=lambda m: m.seq * 10)
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(1)), [Msg(0, i) for i in range(10)])
        got = receive_n(sub, 5)
        assert [e.value for e in got] == [0, 20, 40, 60, 80]

    def test_elements_carry_store_timestamps(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Each element carries the store's accept time as an aware datetime."""
        sub = dds.sub(topic)
        before = datetime.now(UTC) - timedelta(seconds=1)
        publish_all(dds.pub(topic), [Msg(1, 1)])
        element = receive_n(sub, 1)[0]
        assert before <= element.timestamp <= datetime.now(UTC) + timedelta(seconds=1)

    def test_nothing_kept_after_anonymous_read(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Without groups or retention, elements an anonymous subscriber read are gone."""
        sub = dds.sub(topic)
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(5)])
        receive_n(sub, 5)
        wait_until(lambda: sub.heads()[0].offset == 5)
        assert sub.tails()[0] == Position(0, 4)

    def test_use_after_close(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Closing cancels pending receives, is idempotent, and later receives raise."""
        sub = dds.sub(topic)
        closed: list[str] = []
        sub.on_close(lambda: closed.append("closed"))
        pending = sub.receive()
        sub.close()
        sub.close()
        assert closed == ["closed"]
        assert pending.cancelled()
        assert sub.closed
        with pytest.raises(AlreadyClosedError):
            sub.receive()
        for call in (
            lambda: sub.commit(0, Position(0, 0)),
            lambda: sub.seek(0, Position(0, 0)),
            sub.heads,
            sub.remaining_messages,
            sub.heartbeat,
        ):
            with pytest.raises(AlreadyClosedError):
                call()


class TestStitching:
    def test_catch_up_meets_live_tail_without_loss_or_duplicates(
        self, dds: Entities, retained: ChannelledTopic
    ) -> None:
        """A member joining mid-stream gets history then live data, each offset exactly once.

        The member must catch up while the publisher still runs (nothing left to receive
        at the store) and then receive elements published after that, so the switch from
        history to the live tail is always crossed, however slow the machine.
        """
        pub = dds.pub(retained, order_by=OrderBy.fixed(0), batch_count=7)
        stop = threading.Event()
        sent: list[int] = []

        def publish() -> None:
            i = 0
            while not stop.is_set():
                last = pub.publish(Msg(0, i))
                sent.append(i)
                i += 1
                if i % 7 == 0:  # paced by the store, so a member can catch up
                    last.result(TIMEOUT)
            pub.flush()

        thread = threading.Thread(target=publish)
        thread.start()
        got: list[Element[Msg]] = []
        live_from: list[int] = []
        try:
            wait_until(lambda: len(sent) > 300)
            sub = dds.sub(retained, group="late")

            def caught_up() -> bool:
                got.extend(sub.receive(500).result(TIMEOUT))
                if not live_from and sub.remaining_messages() == 0 and thread.is_alive():
                    live_from.append(len(sent))  # caught up while the publisher runs
                return bool(live_from) and got[-1].position.offset >= live_from[0] + 100

            wait_until(caught_up, 60)
        finally:
            stop.set()
            thread.join()
        assert live_from[0] > 300  # the member joined with history to catch up
        got += receive_n(sub, len(sent) - len(got))
        offsets = [e.position.offset for e in got]
        assert offsets == list(range(len(sent)))
        assert [e.value.seq for e in got] == sent


class TestGroups:
    def test_members_split_the_channels_and_the_elements(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """Two members own disjoint channels; every element reaches exactly one of them."""
        a = dds.sub(topic, group="g", complete_on_empty=True)
        b = dds.sub(topic, group="g", complete_on_empty=True)
        wait_until(lambda: len(a.channels) == 2 and len(b.channels) == 2)
        assert set(a.channels) | set(b.channels) == {0, 1, 2, 3}
        publish_all(dds.pub(topic), [Msg(i, i) for i in range(40)])
        got_a: list[Element[Msg]] = []
        got_b: list[Element[Msg]] = []

        def drained() -> bool:
            got_a.extend(a.receive(100).result(TIMEOUT))
            got_b.extend(b.receive(100).result(TIMEOUT))
            return len(got_a) + len(got_b) >= 40

        wait_until(drained)
        seqs = sorted(e.value.seq for e in got_a + got_b)
        assert seqs == list(range(40))
        assert {e.channel for e in got_a} <= set(a.channels)

    def test_two_groups_each_see_every_element(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Every group receives every element."""
        g1 = dds.sub(topic, group="one")
        g2 = dds.sub(topic, group="two")
        publish_all(dds.pub(topic), [Msg(i, i) for i in range(30)])
        assert sorted(e.value.seq for e in receive_n(g1, 30)) == list(range(30))
        assert sorted(e.value.seq for e in receive_n(g2, 30)) == list(range(30))

    def test_more_members_than_channels(self, dds: Entities, topic_name: str) -> None:
        """With more members than channels the extra members own nothing."""
        topic = ChannelledTopic(topic_name + "_2", Msg, channel_count=2)
        members = [dds.sub(topic, group="g", complete_on_empty=True) for _ in range(3)]
        wait_until(lambda: sorted(len(m.channels) for m in members) == [0, 1, 1])
        publish_all(dds.pub(topic, order_by=OrderBy.round_robin()), [Msg(0, i) for i in range(6)])
        (extra,) = [m for m in members if not m.channels]
        owners = [m for m in members if m.channels]
        got = [e.value.seq for m in owners for e in receive_n(m, 3)]
        assert sorted(got) == [0, 1, 2, 3, 4, 5]
        assert extra.receive(10).result(TIMEOUT) == []  # owns nothing, receives nothing
        assert extra.remaining_messages() == 0
        assert extra.head(0) is None
        assert extra.last_committed(0) is None

    def test_ownership_listeners(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Listeners hear channels assigned on join and revoked when another member joins."""
        events: list[tuple[str, frozenset[int]]] = []

        class Recorder(ChannelOwnershipListener):
            def on_channels_assigned(self, subscriber: object, channels: frozenset[int]) -> None:
                events.append(("assigned", channels))

            def on_channels_revoked(self, subscriber: object, channels: frozenset[int]) -> None:
                events.append(("revoked", channels))

        a = dds.sub(topic, group="g", listeners=[Recorder()])
        assert events == [("assigned", frozenset({0, 1, 2, 3}))]
        dds.sub(topic, group="g")
        wait_until(lambda: len(events) == 2)
        assert events[1][0] == "revoked"
        assert len(events[1][1]) == 2
        assert set(a.channels) == {0, 1, 2, 3} - events[1][1]

    def test_silent_member_times_out_and_rejoins(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """A member that stops receiving loses its channels (lost) and its next receive rejoins."""
        lost: list[frozenset[int]] = []

        class Recorder(ChannelOwnershipListener):
            def on_channels_lost(self, subscriber: object, channels: frozenset[int]) -> None:
                lost.append(channels)

        quiet = dds.sub(topic, group="g", timeout=timedelta(seconds=1), listeners=[Recorder()])
        busy = dds.sub(topic, group="g", timeout=timedelta(seconds=30))
        wait_until(lambda: len(busy.channels) == 2)
        pending = busy.receive()  # keeps busy alive while it waits
        wait_until(lambda: busy.channels == [0, 1, 2, 3])
        wait_until(lambda: bool(lost))
        assert quiet.channels == []
        assert not quiet.closed
        later = quiet.receive()
        wait_until(lambda: len(quiet.channels) == 2)
        pending.cancel()
        later.cancel()

    def test_heartbeat_keeps_a_member_that_does_not_receive(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """heartbeat() alone keeps a member's channels past its timeout; silence loses them."""
        beating = dds.sub(topic, group="g", timeout=timedelta(seconds=1))
        quiet = dds.sub(topic, group="g", timeout=timedelta(seconds=1))
        wait_until(lambda: len(beating.channels) == 2 and len(quiet.channels) == 2)
        ticks = 0

        def quiet_lost_and_beating_outlived_it() -> bool:
            nonlocal ticks
            beating.heartbeat()
            ticks += 1 if not quiet.channels else 0
            return ticks >= 15  # kept beating ~1.5 s (> timeout) after the silent one left

        wait_until(quiet_lost_and_beating_outlived_it, poll=0.1)
        assert beating.channels == [0, 1, 2, 3]

    def test_members_resume_from_the_last_commit(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """After a member closes, a new member resumes right after the group's commits."""
        first = dds.sub(topic, group="g")
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(10)])
        got = receive_n(first, 6)
        assert first.commit(0, got[3].position).status is CommitStatus.COMMITTED
        first.close()
        second = dds.sub(topic, group="g")
        assert [e.value.seq for e in receive_n(second, 6)] == [4, 5, 6, 7, 8, 9]

    def test_destroy_group(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Destroying a group forgets its commits: a new group of that name starts afresh."""
        member = dds.sub(topic, group="g")
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(3)])
        receive_n(member, 3)
        member.commit(0, Position(0, 2))
        assert member.destroy_group()
        again = dds.sub(topic, group="g")
        assert again.last_committed() == {}

    def test_destroy_group_without_joining_it(
        self, dds: Entities, retained: ChannelledTopic, domain_id: int, namespace: str
    ) -> None:
        """destroy_subscriber_group() deletes a group by name; a new member starts at the head."""
        member = dds.sub(retained, group="g")
        publish_all(dds.pub(retained, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(5)])
        receive_n(member, 3)
        assert member.commit(0, Position(0, 2)).status is CommitStatus.COMMITTED
        member.close()
        kw = {"domain_id": domain_id, "namespace": namespace}
        assert destroy_subscriber_group(retained, "g", **kw)
        assert not destroy_subscriber_group(retained, "g", **kw)  # gone already
        again = dds.sub(retained, group="g")
        assert again.last_committed() == {}
        assert [e.value.seq for e in receive_n(again, 5)] == [0, 1, 2, 3, 4]


class TestStartUp:
    def test_a_member_joining_with_nothing_stored_after_its_commit_fetches_nothing(
        self, store: Store, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """A member whose channels hold nothing after its resume point gets its first
        elements live, with no FETCH: the start-up fetches ran one channel after
        another before anything was delivered (the latency tail of a new subscriber)."""
        sub = dds.sub(topic, group="g")
        pub = dds.pub(topic)
        wait_until(lambda: len(sub.channels) == 4)
        for c in range(4):  # its live readers hear the store's pushes
            wait_until(lambda c=c: matched_readers(store._batch_writers[(topic.name, c)]))
        publish_all(pub, [Msg(i, i) for i in range(8)])
        assert sorted(e.value.seq for e in receive_n(sub, 8)) == list(range(8))
        fetches = store.metrics.registry.get_sample_value(
            "dcps_store_requests_total", {"kind": "fetch", "result": "ok"}
        )
        assert not fetches, f"{fetches} FETCH requests"


class TestCommitAndSeek:
    def test_commit_results(self, dds: Entities, retained: ChannelledTopic) -> None:
        """Commit reports committed, already committed, rejected and unowned."""
        a = dds.sub(retained, group="g")
        publish_all(dds.pub(retained, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(3)])
        receive_n(a, 3)
        assert a.commit(0, Position(0, 1)).status is CommitStatus.COMMITTED
        assert a.commit(0, Position(0, 0)).status is CommitStatus.ALREADY_COMMITTED
        assert a.commit(0, Position(0, 7)).status is CommitStatus.REJECTED
        results = a.commit_async({0: Position(0, 2), 1: Position(1, 0)}).result(TIMEOUT)
        assert results[0].status is CommitStatus.COMMITTED
        assert results[1].status is CommitStatus.NOTHING_TO_COMMIT
        assert a.last_committed(0) == Position(0, 2)
        b = dds.sub(retained, group="g")
        wait_until(lambda: len(b.channels) >= 1)
        other = b.channels[0]
        assert a.commit(other, Position(other, 0)).status is CommitStatus.UNOWNED

    def test_commit_of_another_topics_position(
        self, dds: Entities, topic: ChannelledTopic, topic_name: str
    ) -> None:
        """A position from a topic with more channels is refused as a bad parameter."""
        wide = ChannelledTopic(topic_name + "_w", Msg, channel_count=8)
        positions = publish_all(dds.pub(wide, order_by=OrderBy.fixed(6)), [Msg(0, 0)])
        sub = dds.sub(topic, group="g")
        with pytest.raises(BadParameterError, match="do not exist"):
            sub.commit(6, positions[0])  # type: ignore[arg-type]
        with pytest.raises(BadParameterError, match="not a Position of channel"):
            sub.commit(1, Position(0, 0))

    def test_seek_unowned_channel(self, dds: Entities, topic: ChannelledTopic) -> None:
        """Seeking a channel the member does not own raises PreconditionNotMetError."""
        a = dds.sub(topic, group="g")
        b = dds.sub(topic, group="g")
        wait_until(lambda: len(a.channels) == 2 and len(b.channels) == 2)
        with pytest.raises(PreconditionNotMetError, match="does not own"):
            a.seek(b.channels[0], Position(b.channels[0], 0))

    def test_seek_back_redelivers_and_rolls_back_commit(
        self, dds: Entities, retained: ChannelledTopic
    ) -> None:
        """With retention, seeking before the commit re-delivers and moves the commit back."""
        sub = dds.sub(retained, group="g")
        publish_all(dds.pub(retained, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(6)])
        got = receive_n(sub, 6)
        sub.commit(0, got[-1].position)
        assert sub.seek(0, Position(0, 1)) == Position(0, 1)
        assert sub.last_committed(0) == Position(0, 1)
        assert [e.value.seq for e in receive_n(sub, 4)] == [2, 3, 4, 5]

    def test_seek_forward_does_not_commit(self, dds: Entities, retained: ChannelledTopic) -> None:
        """Seeking forward skips elements but leaves the commit where it was."""
        sub = dds.sub(retained, group="g")
        publish_all(dds.pub(retained, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(6)])
        assert sub.seek(0, Position(0, 3)) == Position(0, 3)
        assert [e.value.seq for e in receive_n(sub, 2)] == [4, 5]
        assert sub.last_committed(0) is None
        assert sub.seek_and_commit(0, Position(0, 4)) == Position(0, 4)
        assert sub.last_committed(0) == Position(0, 4)

    def test_seek_clamps_to_head_and_tail(self, dds: Entities, retained: ChannelledTopic) -> None:
        """Seeks beyond the tail land on the tail, before the head on head - 1."""
        sub = dds.sub(retained, group="g", complete_on_empty=True)
        publish_all(dds.pub(retained, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(3)])
        assert sub.seek(0, Position(0, 50)) == Position(0, 2)
        assert sub.receive().result(TIMEOUT) is None
        assert sub.seek_to_head(0) == {0: Position(0, -1)}
        assert [e.value.seq for e in receive_n(sub, 3)] == [0, 1, 2]
        assert sub.seek_to_tail_and_commit(0) == {0: Position(0, 2)}
        assert sub.last_committed(0) == Position(0, 2)

    def test_seek_by_timestamp(self, dds: Entities, retained: ChannelledTopic) -> None:
        """Seeking to a time resumes at the first element accepted strictly after it (seed
        000): seeking to a received element's own timestamp resumes after that element."""
        sub = dds.sub(retained, group="g")
        pub = dds.pub(retained, order_by=OrderBy.fixed(0))
        publish_all(pub, [Msg(0, i) for i in range(3)])
        first = receive_n(sub, 3)
        wait_until(lambda: datetime.now(UTC) > first[-1].timestamp + timedelta(milliseconds=5))
        publish_all(pub, [Msg(0, i) for i in range(3, 6)])
        later = receive_n(sub, 3)
        before = later[0].timestamp - timedelta(microseconds=1)
        assert sub.seek(0, before) == Position(0, 2)
        assert [e.value.seq for e in receive_n(sub, 3)] == [3, 4, 5]
        assert sub.seek(0, later[0].timestamp) == Position(0, 3)
        assert [e.value.seq for e in receive_n(sub, 2)] == [4, 5]
        assert sub.seek(0, datetime(2000, 1, 1, tzinfo=UTC)) == Position(0, -1)
        with pytest.raises(BadParameterError, match="timezone-aware"):
            sub.seek(0, datetime(2000, 1, 1))

    def test_no_seek_before_commit_without_retention(
        self, dds: Entities, topic: ChannelledTopic
    ) -> None:
        """Without retention, seeking back stops at the group's last commit."""
        sub = dds.sub(topic, group="g")
        publish_all(dds.pub(topic, order_by=OrderBy.fixed(0)), [Msg(0, i) for i in range(4)])
        got = receive_n(sub, 4)
        sub.commit(0, got[1].position)
        assert sub.seek(0, Position(0, -1)) == Position(0, 1)

    def test_remaining_messages_heads_and_tails(
        self, dds: Entities, retained: ChannelledTopic
    ) -> None:
        """Remaining counts drop as elements are received; heads and tails track the channel."""
        sub = dds.sub(retained, group="g")
        publish_all(dds.pub(retained, order_by=OrderBy.fixed(1)), [Msg(0, i) for i in range(5)])
        assert sub.remaining_messages() == 5
        assert sub.remaining_messages(1) == 5
        assert sub.remaining_messages(0) == 0
        receive_n(sub, 2)
        assert sub.remaining_messages(1) == 3
        assert sub.heads()[1] == Position(1, 0)
        assert sub.tails()[1] == Position(1, 4)
        assert sub.tail(2) == Position(2, -1)
