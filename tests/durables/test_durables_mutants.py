"""The store's durables rule by rule, driven directly (issue 20's mutation run of
``dcps/store/_durables.py``).

``DurableService`` is the store's part of durable subscriptions: it is driven here as the
store drives it, with typed requests from a client, a real store log in a temporary
directory, a clock the test moves, and the answers collected as the store would send
them. Each test checks what a subscriber or an administrator would see: the elements it
gets and in which order, redelivery counts, refusals and their messages, what survives a
store restart. ``tests/durables/test_durables.py`` checks the same end to end over DDS.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

import dcps.store._durables as durables_module
from dcps.store._durables import DURABLE_HANDLERS, DurableService, secret_ident, siblings
from dcps.store._log import ChannelLog, SyncMode
from dcps.wire._admin_objects import DurableDeleted
from dcps.wire._durables import (
    DURABLE_GROUP_PREFIX,
    AckStatus,
    DurableAcked,
    DurableAckRequest,
    DurableCloseRequest,
    DurableDelivery,
    DurableInfo,
    DurableInfoRequest,
    DurableKind,
    DurablePollRequest,
    DurableRollbackRequest,
    DurableSubscribed,
    DurableSubscribeRequest,
    DurableTxAckRequest,
    DurableUnsubscribed,
    DurableUnsubscribeRequest,
    Notice,
    StartMode,
)
from idl._errors import (
    BadParameterError,
    DcpsError,
    InconsistentPolicyError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

T = "orders"


@attrs.define
class Call:
    request: Any
    client: str = "c1"
    request_id: int = 1


class Store:
    """A store's durables on a real log; answers are kept per call, in order."""

    def __init__(self, path: Path, *, split: bool = False, channels: int = 2) -> None:
        self.path = path
        self.now = 1000.0
        self.answers: list[tuple[Call, Any]] = []
        self.secrets: list[tuple[tuple[str, str, str], Any]] = []
        self.log = ChannelLog.in_dir(path, sync=SyncMode.NORMAL)
        self.log.ensure_topic(T, channels)
        self.svc = DurableService(
            self.log,
            self._reply,
            self._fail,
            split=split,
            clock=lambda: self.now,
            secrets=lambda ident, secret: self.secrets.append((ident, secret)),
        )

    def _reply(self, call: Call, answer: Any) -> None:
        self.answers.append((call, answer))

    def _fail(self, call: Call, exc: BaseException) -> None:
        self.answers.append((call, exc))

    def restart(self) -> Store:
        self.log.close()
        return Store(self.path)

    def close(self) -> None:
        self.log.close()

    def ask(self, request: Any, client: str = "c1", *, round_end: bool = False) -> Any:
        """Handle ``request``; its answer (None while a poll waits), raising what the store
        would answer as an error. ``round_end``: end the store's round first if it is not
        answered (a redelivery is answered once its count is written, at the round's end)."""
        call = Call(request, client)
        self.svc.handle(call)
        if round_end and self.answer_of(call) is None:
            self.svc.tick()
        return self.answer_of(call)

    def answer_of(self, call: Call) -> Any:
        mine = [a for c, a in self.answers if c is call]
        return mine[-1] if mine else None

    def subscribe(
        self, name: str = "d", subscriber: str = "s1", client: str = "c1", **kw: Any
    ) -> DurableSubscribed:
        kw.setdefault("kind", DurableKind.SHARED)
        got = self.ask(DurableSubscribeRequest(T, name, subscriber, **kw), client)
        assert isinstance(got, DurableSubscribed)
        return got

    def poll(
        self,
        name: str = "d",
        subscriber: str = "s1",
        count: int = 100,
        client: str = "c1",
        **kw: Any,
    ) -> DurableDelivery:
        request = DurablePollRequest(T, name, subscriber, count, **kw)
        got = self.ask(request, client, round_end=True)
        assert isinstance(got, DurableDelivery), got
        return got

    def publish(self, channel: int, *values: int) -> list[tuple[int, int]]:
        payloads = [v.to_bytes(4, "little") for v in values]
        placed = self.log.append(T, channel, payloads)
        self.svc.published(T, channel, placed[0][0], placed[0][1], payloads)
        return [(channel, offset) for offset, _ in placed]

    def ack(
        self, *positions: tuple[int, int], name: str = "d", subscriber: str = "s1"
    ) -> list[AckStatus]:
        got = self.ask(DurableAckRequest(T, name, subscriber, tuple(positions)))
        assert isinstance(got, DurableAcked)
        return list(got.statuses)


def values(d: DurableDelivery) -> list[int]:
    out, at = [], 0
    for size in d.sizes:
        out.append(int.from_bytes(d.data[at : at + size], "little"))
        at += size
    return out


def positions(d: DurableDelivery) -> list[tuple[int, int]]:
    return list(zip(d.channels, d.offsets, strict=True))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "store")
    try:
        yield s
    finally:
        s.close()


class TestNames:
    def test_siblings_share_a_parent_and_a_depth(self) -> None:
        assert siblings("foo.1", "foo.2")
        assert siblings("foo", "bar")
        assert not siblings("foo.1", "foo.1.2")
        assert not siblings("foo.1", "bar.1")

    def test_a_subscribers_secret_is_kept_under_the_durables_group(self) -> None:
        assert secret_ident("t", "d", "s") == ("t", DURABLE_GROUP_PREFIX + "d", "s")

    def test_every_durable_request_is_handled(self) -> None:
        assert len(DURABLE_HANDLERS) == 11


class TestSubscribe:
    def test_the_first_subscribe_creates_and_the_next_joins(self, store: Store) -> None:
        first = store.subscribe(filter="a > 1")
        assert (first.kind, first.channel_count, first.created, first.filter) == (
            DurableKind.SHARED,
            2,
            True,
            "a > 1",
        )
        again = store.subscribe(subscriber="s2")
        assert (again.created, again.filter) == (False, "a > 1")
        assert store.svc.live("d", "s1")
        assert store.svc.live("d", "s2")
        assert not store.svc.live("d", "s3")
        assert not store.svc.live("x", "s1")

    def test_a_split_store_refuses_durables(self, tmp_path: Path) -> None:
        s = Store(tmp_path / "split", split=True)
        try:
            with pytest.raises(UnsupportedError, match="split stores"):
                s.subscribe()
        finally:
            s.close()

    def test_an_unknown_topic_is_refused(self, store: Store) -> None:
        with pytest.raises(BadParameterError):
            store.ask(DurableSubscribeRequest("nope", "d", "s1", DurableKind.SHARED))

    def test_another_clients_subscriber_name_is_refused(self, store: Store) -> None:
        store.subscribe()
        with pytest.raises(PreconditionNotMetError, match="belongs to another client"):
            store.subscribe(client="c2")
        assert store.svc.reports(T)[0].subscribers[0].name == "s1"

    def test_an_exclusive_durable_refuses_a_second_subscriber(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.EXCLUSIVE)
        store.subscribe(kind=DurableKind.EXCLUSIVE)  # the same one again: fine
        with pytest.raises(PreconditionNotMetError, match="already has an active subscriber"):
            store.subscribe(subscriber="s2", kind=DurableKind.EXCLUSIVE)

    def test_a_standard_durables_newcomer_takes_over(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.STANDARD)
        store.publish(0, 1)
        assert values(store.poll()) == [1]
        store.subscribe(subscriber="s2", kind=DurableKind.STANDARD)
        gone = store.poll()
        assert gone.notice is Notice.CLOSED
        assert "taken over" in gone.message
        assert values(store.poll(subscriber="s2")) == [1]  # redelivered
        assert store.poll(subscriber="s2").redeliveries == ()

    def test_a_taken_over_subscriber_waiting_is_told_at_once(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.STANDARD)
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=5000))
        store.svc.handle(call)
        assert store.answer_of(call) is None
        store.subscribe(subscriber="s2", kind=DurableKind.STANDARD)
        told = store.answer_of(call)
        assert told.notice is Notice.CLOSED
        assert "taken over" in told.message
        with pytest.raises(PreconditionNotMetError, match="not a subscriber"):
            store.poll()  # told once, then forgotten

    def test_another_kind_or_topic_is_inconsistent(self, store: Store) -> None:
        store.subscribe()
        with pytest.raises(InconsistentPolicyError, match="shared durable, not serial"):
            store.subscribe(subscriber="s2", kind=DurableKind.SERIAL)
        store.log.ensure_topic("other", 1)
        with pytest.raises(InconsistentPolicyError, match="durable names are unique"):
            store.ask(DurableSubscribeRequest("other", "d", "s2", DurableKind.SHARED))

    def test_a_new_filter_decides_and_earlier_subscribers_are_told(self, store: Store) -> None:
        store.subscribe(filter="a > 1")
        store.subscribe(subscriber="s2")  # no filter: nothing changes
        assert store.svc.reports(T)[0].filter == "a > 1"
        store.subscribe(subscriber="s3", filter="a > 2")
        told = store.poll()
        assert (told.notice, told.message) == (Notice.FILTER_CONFLICT, "a > 2")
        assert store.poll().notice is Notice.NONE  # told once
        assert store.poll(subscriber="s2").notice is Notice.NONE  # it named no filter
        again = store.restart()
        try:
            assert again.svc.reports(T)[0].filter == "a > 2"  # written
        finally:
            again.close()

    def test_replace_recreates_an_idle_durable_with_another_filter(self, store: Store) -> None:
        store.subscribe(filter="a > 1")
        store.publish(0, 1, 2)
        assert values(store.poll()) == [1, 2]
        with pytest.raises(PreconditionNotMetError, match="cannot be replaced"):
            store.subscribe(subscriber="s2", filter="a > 2", replace=True)
        store.ask(DurableCloseRequest(T, "d", "s1"))
        got = store.subscribe(subscriber="s2", filter="a > 2", replace=True, start=StartMode.TAIL)
        assert got.created
        assert got.filter == "a > 2"
        assert store.poll(subscriber="s2").offsets == ()  # a new durable, at the tail
        same = store.subscribe(subscriber="s3", filter="a > 2", replace=True)
        assert not same.created  # same filter: kept

    def test_start_at_the_tail_or_at_positions(self, store: Store) -> None:
        store.publish(0, 1, 2, 3)
        store.publish(1, 4)
        store.subscribe("tail", start=StartMode.TAIL)
        assert store.poll("tail").offsets == ()
        store.publish(0, 5)
        assert values(store.poll("tail")) == [5]
        store.subscribe("at", start=StartMode.POSITIONS, starts=((0, 2),))
        assert values(store.poll("at")) == [3, 5, 4]  # channel 1 from its head
        store.subscribe("before", start=StartMode.POSITIONS, starts=((0, -5), (1, 99)))
        assert values(store.poll("before")) == [1, 2, 3, 5]  # clamped to head and tail + 1
        with pytest.raises(BadParameterError, match=r"channels 0\.\.1, not 2"):
            store.subscribe("bad", start=StartMode.POSITIONS, starts=((2, 0),))
        assert [r.name for r in store.svc.reports(T)] == ["at", "before", "tail"]


class TestDelivery:
    def test_elements_arrive_in_order_with_their_positions(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 10, 11)
        store.publish(1, 20)
        got = store.poll()
        assert values(got) == [10, 11, 20]
        assert positions(got) == [(0, 0), (0, 1), (1, 0)]
        assert got.redeliveries == (0, 0, 0)
        assert got.stamps[0] > 0
        assert got.outstanding == 3
        assert store.poll().offsets == ()

    def test_a_poll_takes_at_most_its_count(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2, 3)
        assert values(store.poll(count=2)) == [1, 2]
        assert values(store.poll(count=2)) == [3]

    def test_acks_are_checked_one_by_one(self, store: Store) -> None:
        store.subscribe()
        store.subscribe(subscriber="s2", window=1)
        store.publish(0, 1, 2, 3)
        assert values(store.poll(count=2)) == [1, 2]
        assert values(store.poll(subscriber="s2")) == [3]
        assert store.ack((0, 0), (0, 0), (0, 2), (0, 9)) == [
            AckStatus.DONE,
            AckStatus.ALREADY_ACKED,
            AckStatus.NOT_HELD,
            AckStatus.NO_ELEMENT,
        ]
        info = store.ask(DurableInfoRequest(T, "d"))
        assert isinstance(info, DurableInfo)
        assert (info.subscribers, info.outstanding, info.kind, info.persistent) == (
            2,
            2,
            DurableKind.SHARED,
            True,
        )

    def test_a_rollback_redelivers_with_a_count(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2)
        store.poll()
        got = store.ask(DurableRollbackRequest(T, "d", "s1", ((0, 1),)))
        assert got == DurableAcked((AckStatus.DONE,))
        call = Call(DurablePollRequest(T, "d", "s1", 10))
        store.svc.handle(call)
        assert store.answer_of(call) is None  # answered once its count is written
        store.svc.tick()
        again = store.answer_of(call)
        assert (values(again), again.redeliveries) == ([2], (1,))
        restarted = store.restart()
        try:
            restarted.subscribe()
            assert restarted.poll().redeliveries == (1, 2)
        finally:
            restarted.close()

    def test_an_in_memory_durables_redelivery_is_answered_at_once(self, store: Store) -> None:
        store.subscribe(persistent=False)
        store.publish(0, 1)
        store.poll()
        store.ask(DurableRollbackRequest(T, "d", "s1", ((0, 0),)))
        got = store.ask(DurablePollRequest(T, "d", "s1", 10))
        assert (values(got), got.redeliveries) == ([1], (1,))

    def test_acks_carried_by_a_poll_are_written_at_the_rounds_end(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2, 3)
        store.poll()
        got = store.poll(acks=((0, 0), (0, 7)))
        assert got.refused == ((0, 7, AckStatus.NO_ELEMENT),)
        store.svc.tick()
        again = store.restart()
        try:
            again.subscribe()
            redelivered = again.poll()
            assert values(redelivered) == [2, 3]
            assert redelivered.redeliveries == (1, 1)  # they went out once before
        finally:
            again.close()

    def test_a_synchronous_ack_is_written_before_its_answer(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2)
        store.poll()
        store.ack((0, 1))
        again = store.restart()  # no tick
        try:
            again.subscribe()
            assert values(again.poll()) == [1]
        finally:
            again.close()

    def test_the_floor_moves_so_retention_drops_what_all_acked(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2)
        store.poll()
        store.ack((0, 0), (0, 1))
        store.svc.tick()
        assert store.log.channel_states(T)[0].head == 2  # trimmed
        assert store.log.committed(T, DURABLE_GROUP_PREFIX + "d", 0)[0] == 1

    def test_last_value_durables_acknowledge_nothing(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE)
        with pytest.raises(PreconditionNotMetError, match="not acknowledged"):
            store.poll(acks=((0, 1),))
        with pytest.raises(PreconditionNotMetError, match="not acknowledged"):
            store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 1),), "q", 1))


class TestWaiting:
    def test_a_waiting_poll_is_answered_by_a_publish(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE)
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(call)
        assert store.answer_of(call) is None
        store.publish(0, 5)
        assert values(store.answer_of(call)) == [5]

    def test_a_waiting_poll_is_answered_empty_at_its_deadline(self, store: Store) -> None:
        store.subscribe()
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(call)
        store.now += 0.5
        store.svc.tick()
        assert store.answer_of(call) is None
        store.now += 0.6
        store.svc.tick()
        got = store.answer_of(call)
        assert isinstance(got, DurableDelivery)
        assert got.offsets == ()

    def test_a_waiting_poll_gets_elements_at_the_next_round(self, store: Store) -> None:
        store.subscribe()
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(call)
        store.log.append(T, 0, [b"\x01\x00\x00\x00"])  # appended without a word
        store.svc.tick()
        assert values(store.answer_of(call)) == [1]

    def test_a_second_poll_answers_the_first_and_waits_in_its_place(self, store: Store) -> None:
        store.subscribe(window=1)
        store.publish(0, 1, 2)
        assert values(store.poll()) == [1]
        first = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(first)
        assert store.answer_of(first) is None  # the window is full
        second = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000, acks=((0, 0),)))
        store.svc.handle(second)
        assert values(store.answer_of(first)) == [2]  # freed by the second's ack
        assert store.answer_of(second) is None

    def test_a_closed_subscribers_waiting_poll_fails(self, store: Store) -> None:
        store.subscribe()
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(call)
        store.ask(DurableCloseRequest(T, "d", "s1"))
        failed = store.answer_of(call)
        assert isinstance(failed, PreconditionNotMetError)
        assert "closed" in str(failed)
        with pytest.raises(PreconditionNotMetError, match="not a subscriber"):
            store.poll()

    def test_an_ack_frees_a_serial_durable_for_the_other(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.SERIAL)
        store.subscribe(subscriber="s2", kind=DurableKind.SERIAL)
        store.publish(0, 1, 2)
        got = store.poll()
        assert values(got) == [1, 2]
        call = Call(DurablePollRequest(T, "d", "s2", 10, wait_ms=1000))
        store.svc.handle(call)
        store.publish(0, 3)
        assert store.answer_of(call) is None  # s1 holds unacknowledged elements
        store.ack((0, 0), (0, 1))
        assert values(store.answer_of(call)) == [3]


class TestSubscribersLeaving:
    def test_a_silent_subscriber_times_out_and_its_elements_go_to_another(
        self, store: Store
    ) -> None:
        store.subscribe(timeout_ms=1000)
        store.subscribe(subscriber="s2", timeout_ms=60_000)
        store.publish(0, 1)
        assert values(store.poll()) == [1]
        store.now += 0.9
        store.svc.tick()
        assert store.svc.live("d", "s1")
        store.now += 0.2
        store.svc.tick()
        assert not store.svc.live("d", "s1")
        assert (("orders", DURABLE_GROUP_PREFIX + "d", "s1"), None) in store.secrets
        with pytest.raises(PreconditionNotMetError, match="not a subscriber"):
            store.poll()  # a time-out is not remembered as a closing by the store
        got = store.poll(subscriber="s2")
        assert (values(got), got.redeliveries) == ([1], (1,))

    def test_a_waiting_poll_keeps_its_subscriber_alive(self, store: Store) -> None:
        store.subscribe(timeout_ms=1000)
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=5000))
        store.svc.handle(call)
        store.now += 2
        store.svc.tick()
        assert store.svc.live("d", "s1")

    def test_an_idle_durable_goes_after_its_ttl(self, store: Store) -> None:
        store.subscribe(ttl_ms=1000)
        store.subscribe("forever")
        store.ask(DurableCloseRequest(T, "d", "s1"))
        store.ask(DurableCloseRequest(T, "forever", "s1"))
        store.now += 0.9
        store.svc.tick()
        assert [r.name for r in store.svc.reports(T)] == ["d", "forever"]
        store.now += 0.2
        store.svc.tick()
        assert [r.name for r in store.svc.reports(T)] == ["forever"]
        assert not store.log.has_group(T, DURABLE_GROUP_PREFIX + "d")

    def test_an_anonymous_durable_goes_with_its_subscriber(self, store: Store) -> None:
        store.subscribe("anon", anonymous=True)
        store.ask(DurableCloseRequest(T, "anon", "s1"))
        assert store.svc.reports(T) == []
        store.subscribe("anon2", anonymous=True, timeout_ms=100)
        store.now += 1
        store.svc.tick()
        assert store.svc.reports(T) == []

    def test_requests_of_a_stranger_are_refused(self, store: Store) -> None:
        store.subscribe()
        with pytest.raises(PreconditionNotMetError, match="belongs to another client"):
            store.poll(client="c2")
        with pytest.raises(PreconditionNotMetError, match="no durable 'x'"):
            store.poll("x")
        with pytest.raises(PreconditionNotMetError, match=r"no durable 'd' of topic 'x\.y'"):
            store.ask(DurablePollRequest("x.y", "d", "s1", 1))


class TestUnsubscribeAndInfo:
    def test_unsubscribe_needs_no_subscribers(self, store: Store) -> None:
        store.subscribe()
        with pytest.raises(PreconditionNotMetError, match=r"1 active subscriber\(s\)"):
            store.ask(DurableUnsubscribeRequest(T, "d"))
        with pytest.raises(PreconditionNotMetError, match="not 'other'"):
            store.ask(DurableUnsubscribeRequest("other", "d"))
        store.ask(DurableCloseRequest(T, "d", "s1"))
        assert store.ask(DurableUnsubscribeRequest("other", "d", any_topic=True)) == (
            DurableUnsubscribed(True)
        )
        assert store.ask(DurableUnsubscribeRequest(T, "d")) == DurableUnsubscribed(False)
        assert not store.log.has_group(T, DURABLE_GROUP_PREFIX + "d")

    def test_info_names_the_topic_unless_any(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE, persistent=False)
        with pytest.raises(PreconditionNotMetError, match="no durable 'd' of topic 'other'"):
            store.ask(DurableInfoRequest("other", "d"))
        info = store.ask(DurableInfoRequest("other", "d", any_topic=True))
        assert (info.topic, info.outstanding, info.persistent) == (T, -1, False)


class TestRestart:
    def test_persistent_durables_survive_and_others_do_not(self, store: Store) -> None:
        store.subscribe("kept")
        store.subscribe("gone", persistent=False)
        store.publish(0, 1)
        again = store.restart()
        try:
            assert [r.name for r in again.svc.reports(T)] == ["kept"]
            assert not again.log.has_group(T, DURABLE_GROUP_PREFIX + "gone")
            again.subscribe("kept")
            assert values(again.poll("kept")) == [1]
        finally:
            again.close()

    def test_a_last_value_is_kept_across_a_restart(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE)
        store.publish(0, 1, 2)
        assert values(store.poll()) == [1, 2]
        again = store.restart()
        try:
            again.subscribe(subscriber="s2", kind=DurableKind.LAST_VALUE)
            got = again.poll(subscriber="s2")
            assert (values(got), positions(got), got.outstanding) == ([2], [(0, 1)], -1)
        finally:
            again.close()


class TestLastValue:
    def test_siblings_feed_a_last_value_durable(self, store: Store) -> None:
        assert not store.svc.wants("a.1")
        store.log.ensure_topic("a.1", 1)
        store.log.ensure_topic("a.2", 1)
        store.ask(DurableSubscribeRequest("a.1", "lv", "s1", DurableKind.LAST_VALUE))
        assert store.svc.wants("a.2")
        assert not store.svc.wants("a.2.x")
        store.svc.published("a.2", 0, 1, 5, [b"\x09\x00\x00\x00"])
        store.svc.published("a.2", 0, 2, 5, [])  # nothing
        got = store.ask(DurableSubscribeRequest("a.2", "lv", "s2", DurableKind.LAST_VALUE))
        assert not got.created
        polled = store.ask(DurablePollRequest("a.2", "lv", "s2", 10))
        assert values(polled) == [9]
        assert store.ask(DurablePollRequest("a.1", "lv", "s1", 10)).offsets == ()


class TestAdministration:
    def test_reports_show_subscribers_and_channels(self, store: Store) -> None:
        store.subscribe(window=5, filter="x")
        store.publish(0, 1, 2)
        store.poll()
        store.now += 1.5
        (report,) = store.svc.reports(T, "d", channels=True)
        assert (report.outstanding, report.unacked, report.filter, report.idle_s) == (
            2,
            2,
            "x",
            0.0,
        )
        (sub,) = report.subscribers
        assert (sub.name, sub.held, sub.window, sub.filter) == ("s1", 2, 5, "x")
        assert sub.idle_s == 1.5
        assert [(c.channel, c.head, c.tail) for c in report.channels] == [(0, 0, 1), (1, 0, -1)]
        assert store.svc.reports(T, "d")[0].channels == ()
        assert store.svc.reports("other") == []
        with pytest.raises(PreconditionNotMetError, match="no durable 'x'"):
            store.svc.reports(T, "x")

    def test_delete_refuses_active_subscribers_unless_forced(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2)
        with pytest.raises(PreconditionNotMetError, match="cannot delete durable 'd'"):
            store.svc.delete(T, "d")
        deleted = store.svc.delete(T, "d", force=True)
        assert (deleted.existed, deleted.subscribers, deleted.discarded) == (True, 1, 2)
        with pytest.raises(PreconditionNotMetError, match="no durable 'd'"):
            store.poll()
        assert not store.svc.delete(T, "d").existed

    def test_reset_moves_the_floor_and_forgets_acks(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2, 3)
        store.poll()
        store.ack((0, 2))
        store.svc.reset(T, "d", lambda group: store.log.commit(T, group, 0, 0), force=True)
        store.subscribe()
        assert values(store.poll()) == [2, 3]  # 3's ack is forgotten

    def test_reset_refuses_last_value_and_unknown_durables(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE)
        with pytest.raises(PreconditionNotMetError, match="last-value durable"):
            store.svc.reset(T, "d", lambda group: None, force=True)
        with pytest.raises(PreconditionNotMetError, match="no durable 'x'"):
            store.svc.reset(T, "x", lambda group: None, force=True)


class TestTransactions:
    def test_enlisted_acks_apply_at_the_commit(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2)
        store.poll()
        got = store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 0),), "q", 1))
        assert got == DurableAcked((AckStatus.DONE,))
        bad = store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 9),), "q", 1))
        assert bad == DurableAcked((AckStatus.NO_ELEMENT,))
        acks = store.svc.take_enlisted("q", 1)
        assert acks == [("d", [(0, 0)])]
        assert store.svc.apply_acks(acks) == 1
        assert store.svc.take_enlisted("q", 1) == []
        assert store.ask(DurableInfoRequest(T, "d")).outstanding == 1

    def test_an_enlisted_ack_no_longer_held_refuses_the_commit(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1)
        store.poll()
        store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 0),), "q", 1))
        store.ask(DurableCloseRequest(T, "d", "s1"))
        with pytest.raises(PreconditionNotMetError, match=r"element \(0, 0\) of durable 'd'"):
            store.svc.take_enlisted("q", 1)

    def test_aborted_or_old_enlisted_acks_are_forgotten(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1)
        store.poll()
        store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 0),), "q", 1))
        store.svc.drop_enlisted("q", 1)
        assert store.svc.take_enlisted("q", 1) == []
        store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 0),), "q", 2))
        store.now += 601
        store.svc.tick()
        assert store.svc.take_enlisted("q", 2) == []

    def test_one_transaction_enlists_a_bounded_number(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(durables_module, "_MAX_ENLISTED", 1)
        store.subscribe()
        store.publish(0, 1, 2)
        store.poll()
        store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 0),), "q", 1))
        with pytest.raises(OutOfResourcesError, match="more than 1 acknowledgements"):
            store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 1),), "q", 1))


def logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    """What the store's durables logged (operators read these)."""
    return [r.getMessage() for r in caplog.records if r.name == "dcps.store.durables"]


class TestWhatOperatorsSee:
    def test_delete_logs_what_it_discarded(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store.durables")
        store.subscribe()
        store.publish(0, 1, 2)
        store.svc.delete(T, "d", force=True)
        store.subscribe("lv", kind=DurableKind.LAST_VALUE)
        store.ask(DurableCloseRequest(T, "lv", "s1"))
        deleted = store.svc.delete(T, "lv")
        assert (deleted.existed, deleted.subscribers, deleted.discarded) == (True, 0, -1)
        assert store.svc.delete(T, "lv") == DurableDeleted(False)
        assert [m for m in logged(caplog) if "deleted" in m] == [
            "durable 'd' of topic 'orders' deleted",
            "durable 'd' of topic 'orders' deleted by an administrator (forced): "
            "2 element(s) discarded",
            "durable 'lv' of topic 'orders' deleted",
            "durable 'lv' of topic 'orders' deleted by an administrator: 0 element(s) discarded",
        ]

    def test_reset_and_replace_are_logged(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store.durables")
        store.subscribe(filter="a > 1")
        store.ask(DurableCloseRequest(T, "d", "s1"))
        store.svc.reset(T, "d", lambda group: None, force=False)
        store.subscribe(filter="a > 2", replace=True)
        assert "durable 'd' of topic 'orders' reset by an administrator" in logged(caplog)
        assert "durable 'd': replaced (topic or filter changed)" in logged(caplog)

    def test_a_refusal_names_at_most_five_subscribers(self, store: Store) -> None:
        for n in range(5):
            store.subscribe(subscriber=f"s{n}")
        message = (
            "cannot delete durable 'd' of topic 'orders': it has 5 active subscriber(s) "
            "(s0, s1, s2, s3, s4); close them first, or force it (dcps durables delete ... --force)"
        )
        with pytest.raises(PreconditionNotMetError) as five:
            store.svc.delete(T, "d")
        assert str(five.value) == message
        store.subscribe(subscriber="s5")
        with pytest.raises(PreconditionNotMetError) as six:
            store.svc.reset(T, "d", lambda group: None, force=False)
        assert "6 active subscriber(s) (s0, s1, s2, s3, s4 ...); close" in str(six.value)
        assert "cannot reset durable 'd'" in str(six.value)

    def test_a_forced_reset_tells_the_subscribers_why(self, store: Store) -> None:
        store.subscribe()
        store.svc.reset(T, "d", lambda group: None, force=True)
        told = store.poll()
        assert (told.notice, told.message) == (
            Notice.CLOSED,
            "an administrator ran reset on durable 'd'",
        )

    def test_a_reset_serial_durable_stays_serial_and_idles_from_the_reset(
        self, store: Store
    ) -> None:
        store.subscribe(kind=DurableKind.SERIAL, ttl_ms=1000)
        store.publish(0, 1, 2, 3)
        store.now += 5
        store.svc.reset(T, "d", lambda group: None, force=True)
        store.now += 0.9
        store.svc.tick()  # idle since the reset, not since it was created
        store.subscribe(kind=DurableKind.SERIAL, window=2)
        store.subscribe(subscriber="s2", kind=DurableKind.SERIAL)
        assert values(store.poll()) == [1, 2]
        assert store.poll(subscriber="s2").offsets == ()  # serial: one holder at a time

    def test_the_ttl_counts_from_the_time_out_of_the_last_subscriber(self, store: Store) -> None:
        store.subscribe(ttl_ms=1000, timeout_ms=1000)
        store.now += 1.1
        store.svc.tick()
        assert not store.svc.live("d", "s1")
        store.now += 0.9
        store.svc.tick()
        assert [r.name for r in store.svc.reports(T)] == ["d"]
        store.now += 0.2
        store.svc.tick()
        assert store.svc.reports(T) == []

    def test_the_store_remembers_a_bounded_number_of_closings(
        self, store: Store, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(durables_module, "_CLOSED_KEPT", 2)
        store.subscribe(kind=DurableKind.STANDARD)
        for n in (2, 3):
            store.subscribe(subscriber=f"s{n}", kind=DurableKind.STANDARD)
        # s1 and s2 were taken over: both are told so
        assert store.poll(subscriber="s2").notice is Notice.CLOSED
        assert store.poll().notice is Notice.CLOSED
        store.subscribe(subscriber="s4", kind=DurableKind.STANDARD)
        store.subscribe(subscriber="s5", kind=DurableKind.STANDARD)
        # s3, s4 are the two remembered; s1 and s2 were told already
        assert store.poll(subscriber="s3").notice is Notice.CLOSED
        assert store.poll(subscriber="s4").notice is Notice.CLOSED
        store.subscribe(subscriber="s6", kind=DurableKind.STANDARD)
        store.subscribe(subscriber="s7", kind=DurableKind.STANDARD)
        store.subscribe(subscriber="s8", kind=DurableKind.STANDARD)  # s5, s6, s7 closed
        with pytest.raises(PreconditionNotMetError, match="not a subscriber"):
            store.poll(subscriber="s5")  # the oldest of three is forgotten
        assert store.poll(subscriber="s6").notice is Notice.CLOSED
        assert store.poll(subscriber="s7").notice is Notice.CLOSED

    def test_closing_forgets_the_secret_and_answers_ok(self, store: Store) -> None:
        store.subscribe()
        answer = store.ask(DurableCloseRequest(T, "d", "s1"))
        reply = answer.to_wire("c1", 9)
        assert (reply.status, reply.client, reply.request_id) == (0, "c1", 9)
        assert ((T, DURABLE_GROUP_PREFIX + "d", "s1"), None) in store.secrets

    def test_info_and_reports_are_complete(self, store: Store) -> None:
        store.subscribe(filter="x > 1")
        store.publish(0, 1, 2)
        store.poll()
        store.ack((0, 1))
        info = store.ask(DurableInfoRequest(T, "d"))
        assert info == DurableInfo("d", T, DurableKind.SHARED, True, 1, 1, "x > 1")
        (report,) = store.svc.reports(T, "d", channels=True)
        assert [attrs.astuple(c) for c in report.channels] == [
            (0, -1, 1, 2, 0, 1),
            (1, -1, 0, 0, 0, -1),
        ]

    def test_a_transaction_over_two_durables_counts_both(self, store: Store) -> None:
        for name in ("d1", "d2"):
            store.subscribe(name)
        store.publish(0, 1)
        for name in ("d1", "d2"):
            store.poll(name)
            store.ask(DurableTxAckRequest(T, name, "s1", ((0, 0),), "q", 1))
        assert store.svc.apply_acks(store.svc.take_enlisted("q", 1)) == 2
        store.svc.drop_enlisted("never", 1)  # nothing to forget: no error

    def test_a_refused_commit_names_the_state_of_the_element(self, store: Store) -> None:
        store.subscribe()
        store.subscribe(subscriber="s2")
        store.publish(0, 1)
        store.poll()
        store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 0),), "q", 1))
        store.ask(DurableCloseRequest(T, "d", "s1"))
        store.poll(subscriber="s2")  # now s2 holds it
        with pytest.raises(PreconditionNotMetError) as refused:
            store.svc.take_enlisted("q", 1)
        assert "element (0, 0) of durable 'd' is not held for subscriber 's1'" in str(refused.value)

    def test_refusals_say_exactly_why(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE)
        with pytest.raises(PreconditionNotMetError) as refused:
            store.ask(DurableTxAckRequest(T, "d", "s1", ((0, 1),), "q", 1))
        assert str(refused.value) == "last-value durables are not acknowledged"


class TestMoreRules:
    def test_one_delivery_reads_each_channels_run_from_its_channel(self, store: Store) -> None:
        store.publish(0, 1, 2, 3)
        store.publish(1, 10, 11, 12, 13)
        store.subscribe(start=StartMode.POSITIONS, starts=((0, 1), (1, 3)))
        got = store.poll()
        assert (positions(got), values(got)) == ([(0, 1), (0, 2), (1, 3)], [2, 3, 13])

    def test_a_failed_create_names_what_it_was_doing(self, store: Store) -> None:
        other = sqlite3.connect(store.log.path)
        other.execute(
            "CREATE TRIGGER no_durables BEFORE INSERT ON durables "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
        other.commit()
        other.close()
        with pytest.raises(DcpsError) as failed:
            store.subscribe()
        assert "creating durable 'd' of topic 'orders'" in str(failed.value)
        assert not store.log.has_group(T, DURABLE_GROUP_PREFIX + "d")  # undone

    def test_a_second_poll_with_nothing_answers_the_first_with_its_refusals(
        self, store: Store
    ) -> None:
        store.subscribe()
        first = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(first)
        second = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000, acks=((0, 9),)))
        store.svc.handle(second)
        answered = store.answer_of(first)
        assert (answered.offsets, answered.refused) == ((), ((0, 9, AckStatus.NO_ELEMENT),))
        assert answered.notice is Notice.NONE
        assert store.answer_of(second) is None  # waits in the first's place

    def test_an_expired_poll_carries_its_refusals(self, store: Store) -> None:
        store.subscribe()
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000, acks=((0, 9),)))
        store.svc.handle(call)
        store.now += 1.5
        store.svc.tick()
        got = store.answer_of(call)
        assert (got.offsets, got.refused) == ((), ((0, 9, AckStatus.NO_ELEMENT),))

    def test_reports_round_times_to_the_millisecond(self, store: Store) -> None:
        store.subscribe(window=1)
        store.subscribe("lv", kind=DurableKind.LAST_VALUE)
        store.ask(DurableCloseRequest(T, "lv", "s1"))
        store.now += 1.23456
        shared, lv = sorted(store.svc.reports(T), key=lambda r: r.name)
        assert shared.subscribers[0].idle_s == 1.235
        assert (lv.idle_s, lv.outstanding) == (1.235, -1)

    def test_creation_is_logged_with_kind_and_persistence(
        self, store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store.durables")
        store.subscribe()
        store.subscribe("m", kind=DurableKind.SERIAL, persistent=False)
        assert logged(caplog) == [
            "durable 'd' of topic 'orders' created (shared, persistent)",
            "durable 'm' of topic 'orders' created (serial, in memory)",
        ]

    def test_a_last_value_durable_after_another_gets_every_update(self, store: Store) -> None:
        store.subscribe("a")  # not last-value: skipped, the next one still served
        store.subscribe("lv", kind=DurableKind.LAST_VALUE)
        store.publish(0, 1, 2, 3)
        got = store.poll("lv")
        assert (positions(got), values(got)) == ([(0, 0), (0, 1), (0, 2)], [1, 2, 3])
        assert got.redeliveries == (0, 0, 0)


class TestSecondSample:
    def test_a_run_in_one_channel_never_runs_on_into_the_next(self, store: Store) -> None:
        store.publish(0, 1, 2)
        store.publish(1, 10, 11, 12)
        store.subscribe(start=StartMode.POSITIONS, starts=((0, 1), (1, 2)))
        got = store.poll()
        assert (positions(got), values(got)) == ([(0, 1), (1, 2)], [2, 12])

    def test_a_serial_durable_is_serial_after_a_restart(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.SERIAL)
        store.publish(0, 1, 2, 3)
        again = store.restart()
        try:
            again.subscribe(kind=DurableKind.SERIAL, window=2)
            again.subscribe(subscriber="s2", kind=DurableKind.SERIAL)
            assert values(again.poll()) == [1, 2]
            assert again.poll(subscriber="s2").offsets == ()
        finally:
            again.close()

    def test_a_second_poll_answers_a_first_with_nothing_empty(self, store: Store) -> None:
        store.subscribe()
        first = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(first)
        second = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(second)
        answered = store.answer_of(first)
        assert (answered.offsets, answered.refused, answered.outstanding) == ((), (), 0)
        assert store.answer_of(second) is None

    def test_acks_carried_by_a_poll_alone_are_written(self, store: Store) -> None:
        store.subscribe(window=2)
        store.publish(0, 1, 2)
        store.poll()
        store.svc.tick()  # the deliveries' round is over
        store.poll(acks=((0, 0), (0, 1)))  # delivers nothing: only the acks to write
        store.svc.tick()
        again = store.restart()
        try:
            again.subscribe()
            assert again.poll().offsets == ()
        finally:
            again.close()

    def test_a_report_says_whether_the_durable_is_persistent(self, store: Store) -> None:
        store.subscribe("p")
        store.subscribe("m", persistent=False)
        assert [(r.name, r.persistent) for r in store.svc.reports(T)] == [
            ("m", False),
            ("p", True),
        ]


class TestThirdSample:
    def test_a_poll_that_delivers_also_carries_its_refusals(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1)
        got = store.poll(acks=((0, 9),))
        assert (values(got), got.refused) == ([1], ((0, 9, AckStatus.NO_ELEMENT),))

    def test_without_a_key_no_secret_is_kept(self, store: Store) -> None:
        store.subscribe()
        assert store.secrets == []

    def test_a_time_out_is_logged(self, store: Store, caplog: pytest.LogCaptureFixture) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store.durables")
        store.subscribe(timeout_ms=100)
        store.now += 1
        store.svc.tick()
        assert "durable 'd': subscriber 's1' timed out" in logged(caplog)


class TestFourthSample:
    def test_a_third_waiting_poll_answers_the_second(self, store: Store) -> None:
        store.subscribe()
        calls = [Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000)) for _ in range(3)]
        for call in calls:
            store.svc.handle(call)
        for answered in (store.answer_of(calls[0]), store.answer_of(calls[1])):
            assert (answered.offsets, answered.refused) == ((), ())
        assert store.answer_of(calls[2]) is None

    def test_a_waiting_poll_is_answered_at_its_deadline_exactly(self, store: Store) -> None:
        store.subscribe()
        call = Call(DurablePollRequest(T, "d", "s1", 10, wait_ms=1000))
        store.svc.handle(call)
        store.now += 1.0
        store.svc.tick()
        assert store.answer_of(call) is not None

    def test_a_last_value_subscriber_is_told_of_a_new_filter_once(self, store: Store) -> None:
        store.subscribe(kind=DurableKind.LAST_VALUE, filter="a > 1")
        store.subscribe(subscriber="s2", kind=DurableKind.LAST_VALUE, filter="a > 2")
        told = store.poll()
        assert (told.notice, told.message) == (Notice.FILTER_CONFLICT, "a > 2")
        store.publish(0, 5)
        after = store.poll()
        assert (after.notice, after.message, values(after)) == (Notice.NONE, "", [5])

    def test_an_ack_after_the_round_is_written(self, store: Store) -> None:
        store.subscribe()
        store.publish(0, 1, 2)
        store.poll()
        store.svc.tick()  # the delivery counts are written
        store.ack((0, 1))  # above the floor: kept as an ack of its own
        again = store.restart()
        try:
            again.subscribe()
            assert values(again.poll()) == [1]
        finally:
            again.close()

    def test_a_subscriber_without_a_window_reports_none(self, store: Store) -> None:
        store.subscribe()
        store.subscribe(subscriber="s2", window=3)
        subs = store.svc.reports(T)[0].subscribers
        assert [(s.name, s.window) for s in subs] == [("s1", 0), ("s2", 3)]
