"""Durable subscriptions end to end in one process: embedded store, publishers, subscribers."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    FilterSyntaxError,
    InconsistentPolicyError,
    PreconditionNotMetError,
)
from dcps.channels import ChannelledTopic
from dcps.durables import (
    AckMode,
    AckTiming,
    DurableElement,
    DurableKind,
    FilterConflictError,
    durable_info,
    unsubscribe,
)
from dcps.store import Store
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

from .conftest import TIMEOUT, Durables


def seqs(elements: list[DurableElement[Msg]]) -> list[int]:
    return [e.value.seq for e in elements]


class TestExclusive:
    def test_each_read_returns_the_next_element_in_order(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """An exclusive durable hands out elements in publish order, one per receive."""
        sub = durables.sub(topic, "ex", kind=DurableKind.EXCLUSIVE, window=1)
        durables.publish(topic, range(5))
        got = []
        for _ in range(5):
            e = sub.receive(TIMEOUT)
            got.append(e)
            e.ack()
        assert seqs(got) == [0, 1, 2, 3, 4]
        assert [e.redelivery_count for e in got] == [0] * 5

    def test_a_second_subscriber_is_refused(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """A second subscriber of an exclusive durable raises until the first one closes."""
        first = durables.sub(topic, "ex", kind=DurableKind.EXCLUSIVE)
        with pytest.raises(PreconditionNotMetError, match="already has an active subscriber"):
            durables.sub(topic, "ex", kind=DurableKind.EXCLUSIVE)
        first.close()
        durables.sub(topic, "ex", kind=DurableKind.EXCLUSIVE)

    def test_restart_resumes_at_the_first_unacknowledged(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """Closing with unacknowledged elements: the next subscriber starts at the first of them."""
        sub = durables.sub(topic, "ex", kind=DurableKind.EXCLUSIVE, window=4)
        durables.publish(topic, range(6))
        a, _unacked, c = (sub.receive(TIMEOUT) for _ in range(3))
        a.ack()
        c.ack()  # the second one stays unacknowledged
        sub.close()
        again = durables.sub(topic, "ex", kind=DurableKind.EXCLUSIVE, window=4)
        got = [again.receive(TIMEOUT) for _ in range(4)]
        assert seqs(got) == [1, 3, 4, 5]
        assert got[0].redelivery_count == 1  # (3, 4, 5 may have reached the first one's window)


class TestShared:
    def test_subscribers_share_the_elements_in_windows(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """Two subscribers, window 3: each holds at most 3; together they get everything once."""
        a = durables.sub(topic, "sh", window=3)
        b = durables.sub(topic, "sh", window=3)
        durables.publish(topic, range(20))
        seen: list[int] = []
        held_a = [a.receive(TIMEOUT) for _ in range(3)]
        with pytest.raises(DcpsTimeoutError):
            a.receive(timeout=0.3)  # its window is full
        held_b = [b.receive(TIMEOUT) for _ in range(3)]
        a.ack(held_a)
        b.ack(held_b)
        seen += seqs(held_a) + seqs(held_b)
        while len(seen) < 20:
            for s in (a, b):
                try:
                    e = s.receive(timeout=0.2)
                except DcpsTimeoutError:
                    continue
                e.ack()
                seen.append(e.value.seq)
        assert sorted(seen) == list(range(20))
        assert a.outstanding >= 0
        assert eventually(lambda: a.info().outstanding == 0)

    def test_rollback_redelivers_with_a_count(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """A rolled-back element comes again, to any subscriber, its redelivery count raised."""
        a = durables.sub(topic, "sh", window=1)
        durables.publish(topic, range(2))
        e = a.receive(TIMEOUT)
        assert (e.value.seq, e.redelivery_count, e.redelivered) == (0, 0, False)
        e.rollback()
        b = durables.sub(topic, "sh", window=1)
        again = a.receive(timeout=TIMEOUT)
        assert (again.value.seq, again.redelivery_count) == (0, 1)
        other = b.receive(TIMEOUT)
        assert (other.value.seq, other.redelivery_count) == (1, 0)
        again.rollback()
        other.ack()
        third = eventually(lambda: _try(b) or _try(a))
        assert (third.value.seq, third.redelivery_count) == (0, 2)

    def test_misuse_is_refused(self, durables: Durables, topic: ChannelledTopic) -> None:
        """Acking twice, acking another subscriber's element, bad windows: typed errors."""
        a = durables.sub(topic, "sh", window=2)
        b = durables.sub(topic, "sh", window=2)
        durables.publish(topic, range(1))
        e = a.receive(TIMEOUT)
        with pytest.raises(PreconditionNotMetError, match="another subscriber"):
            b.ack(e)
        e.ack()
        with pytest.raises(PreconditionNotMetError, match="already acknowledged"):
            e.ack()
        with pytest.raises(BadParameterError, match="window"):
            durables.sub(topic, "sh", window=0)
        with pytest.raises(InconsistentPolicyError, match="shared durable"):
            durables.sub(topic, "sh", kind=DurableKind.SERIAL)

    def test_outstanding_count(self, durables: Durables, topic: ChannelledTopic) -> None:
        """The outstanding count is what the durable has not had acknowledged."""
        a = durables.sub(topic, "sh", window=10)
        durables.publish(topic, range(7))
        got = [a.receive(TIMEOUT) for _ in range(7)]
        a.ack(got[:3])
        info = a.info()
        assert (info.kind, info.subscribers, info.outstanding) == (DurableKind.SHARED, 1, 4)

    def test_first_filter_decides_and_a_different_one_raises_asynchronously(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """The durable keeps what the first filter selects; a different later filter
        replaces it, and the earlier subscriber gets a FilterConflictError."""
        a = durables.sub(topic, "sh", window=10, filter="seq >= 5")
        durables.publish(topic, range(8))
        got = [a.receive(TIMEOUT) for _ in range(3)]
        assert seqs(got) == [5, 6, 7]
        a.ack(got)
        assert a.filtered == 5
        durables.sub(topic, "sh", window=10, filter="seq < 100")
        with pytest.raises(FilterConflictError, match="seq < 100"):
            eventually(lambda: _try(a))
        with pytest.raises(FilterSyntaxError):
            durables.sub(topic, "sh2", filter="seq >>> 1")


def _try(sub: object) -> DurableElement[Msg] | None:
    try:
        return sub.receive(timeout=0.05)  # type: ignore[attr-defined,no-any-return]
    except DcpsTimeoutError:
        return None


class TestSerial:
    def test_only_one_subscriber_holds_unacknowledged_elements(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """Serial, window 2, two subscribers: the second gets nothing until the first is done."""
        a = durables.sub(topic, "se", kind=DurableKind.SERIAL, window=2)
        b = durables.sub(topic, "se", kind=DurableKind.SERIAL, window=2)
        durables.publish(topic, range(4))
        first = eventually(lambda: _try(a) or _try(b))
        holder, other = (a, b) if first.subscriber is a else (b, a)
        second = holder.receive(TIMEOUT)
        with pytest.raises(DcpsTimeoutError):
            other.receive(timeout=0.3)
        holder.ack([first, second])
        rest = [eventually(lambda: _try(a) or _try(b)) for _ in range(2)]
        assert seqs([first, second, *rest]) == [0, 1, 2, 3]

    def test_window_one_rollback_comes_back_before_anything_newer(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """Serial window 1: 0-3 acked, 4 rolled back, 4 comes again before 5."""
        a = durables.sub(topic, "se", kind=DurableKind.SERIAL, window=1)
        durables.publish(topic, range(6))
        for _ in range(4):
            a.receive(TIMEOUT).ack()
        e = a.receive(TIMEOUT)
        assert e.value.seq == 4
        e.rollback()
        again = a.receive(TIMEOUT)
        assert (again.value.seq, again.redelivery_count) == (4, 1)
        again.ack()
        assert a.receive(TIMEOUT).value.seq == 5


class TestStandardAndAnonymous:
    def test_a_second_standard_subscriber_takes_over(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """FTL standard: the second subscriber closes the first and gets its elements."""
        first = durables.sub(topic, "st", kind=DurableKind.STANDARD, window=5)
        durables.publish(topic, range(3))
        assert first.receive(TIMEOUT).value.seq == 0
        second = durables.sub(topic, "st", kind=DurableKind.STANDARD, window=5)
        buffered: list[int] = []  # what the first had fetched before it heard of the takeover

        def closed() -> bool:
            element = _try(first)
            if element is not None:
                buffered.append(element.value.seq)
            return False  # only the takeover's error ends the wait

        with pytest.raises(AlreadyClosedError, match="taken over"):
            eventually(closed)
        assert set(buffered) <= {1, 2}
        got = [second.receive(TIMEOUT) for _ in range(3)]
        assert seqs(got) == [0, 1, 2]
        assert got[0].redelivery_count == 1

    def test_an_anonymous_durable_goes_with_its_subscriber(
        self,
        durables: Durables,
        topic: ChannelledTopic,
        store: Store,
        domain_id: int,
        namespace: str,
    ) -> None:
        """A durable without a name is deleted when its subscriber closes."""
        sub = durables.sub(topic, None, kind=DurableKind.STANDARD)
        name = sub.name
        info = durable_info(topic, name, domain_id=domain_id, namespace=namespace)
        assert info.subscribers == 1
        sub.close()
        with pytest.raises(PreconditionNotMetError, match="no durable"):
            durable_info(topic, name, domain_id=domain_id, namespace=namespace)


class TestUnsubscribeAndTtl:
    def test_unsubscribe_fails_while_active_and_discards_after(
        self, durables: Durables, topic: ChannelledTopic, domain_id: int, namespace: str
    ) -> None:
        """unsubscribe refuses an active durable; afterwards its pending elements are gone."""
        kw = {"domain_id": domain_id, "namespace": namespace}
        sub = durables.sub(topic, "u", window=10)
        durables.publish(topic, range(3))
        with pytest.raises(PreconditionNotMetError, match="active subscriber"):
            unsubscribe(topic, "u", **kw)
        sub.close()
        assert unsubscribe(topic, "u", **kw) is True
        assert unsubscribe(topic, "u", **kw) is False
        fresh = durables.sub(topic, "u", window=10)
        assert fresh.created
        durables.publish(topic, [99])
        assert fresh.receive(TIMEOUT).value.seq == 99  # the three old ones were discarded

    def test_creation_and_deletion_are_logged_at_info(
        self,
        durables: Durables,
        topic: ChannelledTopic,
        domain_id: int,
        namespace: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """An operator sees a durable come and go in the store's log (``dcps.store.durables``)."""
        caplog.set_level(logging.INFO, logger="dcps.store")
        durables.sub(topic, "logged", window=10).close()
        assert unsubscribe(topic, "logged", domain_id=domain_id, namespace=namespace)
        lines = [r.getMessage() for r in caplog.records if r.name == "dcps.store.durables"]
        assert f"durable 'logged' of topic {topic.name!r} created (shared, persistent)" in lines
        assert f"durable 'logged' of topic {topic.name!r} deleted" in lines

    def test_a_durable_without_subscriber_past_its_ttl_is_deleted(
        self, durables: Durables, topic: ChannelledTopic, domain_id: int, namespace: str
    ) -> None:
        """durable_ttl: no subscriber for longer than the TTL deletes the durable."""
        kw = {"domain_id": domain_id, "namespace": namespace}
        durables.sub(topic, "ttl", ttl=timedelta(milliseconds=300)).close()

        def gone() -> bool:
            try:
                durable_info(topic, "ttl", **kw)
            except PreconditionNotMetError:
                return True
            return False

        eventually(gone, what="the durable's deletion")


class TestAckModes:
    def test_automatic_acks_after_the_callback(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """AUTO with on_element: each element is acknowledged once the callback returns."""
        got: list[int] = []
        sub = durables.sub(
            topic, "auto", ack=AckMode.AUTO, on_element=lambda e: got.append(e.value.seq)
        )
        durables.publish(topic, range(10))
        eventually(lambda: len(got) == 10)
        assert eventually(lambda: sub.info().outstanding == 0)

    def test_asynchronous_acks_reach_the_store_on_a_timer(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """ASYNC: ack() returns at once; the store has the acks shortly after."""
        sub = durables.sub(topic, "async", ack_timing=AckTiming.ASYNC, window=100)
        durables.publish(topic, range(50))
        elements = [sub.receive(TIMEOUT) for _ in range(50)]
        for e in elements:
            e.ack()
        assert eventually(lambda: sub.info().outstanding == 0)


class TestStart:
    def test_tail_skips_what_was_there(self, durables: Durables, topic: ChannelledTopic) -> None:
        """A new durable starting at the tail delivers only later elements."""
        durables.sub(topic, "keep")  # keeps elements in the store
        durables.publish(topic, range(3))
        sub = durables.sub(topic, "late", start="tail")
        durables.publish(topic, [10])
        assert sub.receive(TIMEOUT).value.seq == 10

    def test_positions(self, durables: Durables, topic: ChannelledTopic) -> None:
        """A new durable starting at a position delivers from that offset."""
        durables.sub(topic, "keep")
        durables.publish(topic, range(5))
        sub = durables.sub(topic, "mid", start={0: 3})
        assert sub.receive(TIMEOUT).value.seq == 3


class TestLastValue:
    def test_start_with_the_last_value_then_live_updates_of_siblings(
        self, durables: Durables, topic_name: str
    ) -> None:
        """A last-value durable made on foo.1 keeps foo.2's last value for a subscriber on
        foo.2 (then its live updates), and keeps nothing of bar or foo.1.2."""
        foo1 = ChannelledTopic(f"{topic_name}.1", Msg, channel_count=1)
        foo2 = ChannelledTopic(f"{topic_name}.2", Msg, channel_count=1)
        deeper = ChannelledTopic(f"{topic_name}.1.2", Msg, channel_count=1)
        durables.sub(foo1, "lv", kind=DurableKind.LAST_VALUE)
        durables.publish(foo2, range(3))
        durables.publish(deeper, [50])
        on_foo2 = durables.sub(foo2, "lv", kind=DurableKind.LAST_VALUE)
        first = on_foo2.receive(TIMEOUT)
        assert (first.value.seq, first.topic) == (2, foo2.name)
        with pytest.raises(PreconditionNotMetError, match="not acknowledged"):
            first.ack()
        durables.publish(foo2, [3, 4])
        assert seqs([on_foo2.receive(TIMEOUT) for _ in range(2)]) == [3, 4]
        with pytest.raises(InconsistentPolicyError, match="durable of topic"):
            durables.sub(deeper, "lv", kind=DurableKind.LAST_VALUE)


class TestBatches:
    def test_receive_many_with_asynchronous_acks_delivers_each_element_once(
        self, durables: Durables, topic: ChannelledTopic
    ) -> None:
        """receive_many hands out what has arrived (1..max_count); asynchronous acks ride on
        the polls; every element comes exactly once and the durable ends with none
        outstanding."""
        subs = [durables.sub(topic, "sh", window=8, ack_timing=AckTiming.ASYNC) for _ in range(2)]
        durables.publish(topic, range(100))
        seen: list[int] = []
        rounds = 0
        while len(seen) < 100 and rounds < 2000:
            rounds += 1
            for sub in subs:
                try:
                    batch = sub.receive_many(5, timeout=0.05)
                except DcpsTimeoutError:
                    continue
                assert 1 <= len(batch) <= 5
                sub.ack(batch)
                seen += seqs(batch)
        assert sorted(seen) == list(range(100))
        eventually(lambda: subs[0].info().outstanding == 0, TIMEOUT, "every ack recorded")
        with pytest.raises(BadParameterError, match="max_count"):
            subs[0].receive_many(0)
