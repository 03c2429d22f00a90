"""The channel subscriber's membership, against embedded stores (issue 20: the survivors
of ``dcps/channels/_subscriber.py`` that test_subscriber_mutants.py left).

What a group member keeps while alive: its channels while it only calls ``heartbeat()``,
or only waits in a receive; what its listeners hear when a rebalance moves channels
away (revoked, not lost); and its commits after a store restart, before it has rejoined
(the restarted store re-admits it with its own member timeout). The store judges
liveness by the clock, so the liveness tests take a few member timeouts (of 1 s); they
wait on what the store answers, never on a sleep.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dcps.channels import (
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    OrderBy,
)
from dcps.store import Store, SyncMode
from tests.support.channel_entities import publish, store_held
from tests.support.channel_entities import retained_topic as topic
from tests.support.embedded_store import served_store
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually

TIMEOUT = 5.0
#: The member timeout of the liveness tests: short, so that a member the store
#: stopped hearing from is expelled within a second.
MEMBER_TIMEOUT = 1.0


served = served_store("substore2")  # one embedded store for the module


@pytest.fixture
def kw(served: dict[str, Any]) -> dict[str, Any]:
    return dict(served["kw"])


class Heard:
    """A ChannelOwnershipListener that records what it is told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []

    def on_channels_assigned(self, sub: Any, channels: frozenset[int]) -> None:
        self.events.append(("assigned", channels))

    def on_channels_revoked(self, sub: Any, channels: frozenset[int]) -> None:
        self.events.append(("revoked", channels))

    def on_channels_lost(self, sub: Any, channels: frozenset[int]) -> None:
        self.events.append(("lost", channels))


def member_timeouts(count: float) -> float:
    """The monotonic time ``count`` member timeouts from now."""
    return time.monotonic() + count * MEMBER_TIMEOUT


class TestLiveness:
    def test_heartbeats_alone_keep_an_idle_member_its_channels(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        (first,) = publish(opened, kw, t, range(1))
        heard = Heard()
        sub = ChannelSubscriber(t, group="g", timeout=MEMBER_TIMEOUT, listeners=[heard], **kw)
        opened.append(sub)
        eventually(lambda: heard.events == [("assigned", frozenset({0}))], timeout=TIMEOUT)
        # no receive pending, so the delivery thread sends no heartbeat: only these do
        beat = threading.Event()
        end = member_timeouts(3)
        while time.monotonic() < end:
            sub.heartbeat()
            beat.wait(MEMBER_TIMEOUT / 10)  # the pace of the heartbeats
        assert heard.events == [("assigned", frozenset({0}))]
        assert sub.commit(0, first).status is CommitStatus.COMMITTED

    def test_a_member_waiting_in_a_receive_stays_a_member(
        self,
        kw: dict[str, Any],
        opened: list[Any],
        topic_name: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """It heartbeats while it waits; its delivery rounds (with the store polls of a
        waiting receive, and one asked for by ``flush()``) fail nowhere."""
        caplog.set_level(logging.ERROR, logger="dcps.channels.subscriber")
        t = topic(topic_name)
        heard = Heard()
        sub = ChannelSubscriber(t, group="g", timeout=MEMBER_TIMEOUT, listeners=[heard], **kw)
        opened.append(sub)
        eventually(lambda: heard.events == [("assigned", frozenset({0}))], timeout=TIMEOUT)
        waiting = sub.receive()  # nothing published yet: it waits, heartbeating
        # a second member would take the channel if the store dropped the first
        other = ChannelSubscriber(t, group="g", timeout=30.0, **kw)
        opened.append(other)
        end = member_timeouts(3)
        while time.monotonic() < end:
            assert not waiting.done()
            assert other.channels == []
            threading.Event().wait(MEMBER_TIMEOUT / 10)
            if time.monotonic() > end - MEMBER_TIMEOUT:
                sub.flow_control.flush()
        assert heard.events == [("assigned", frozenset({0}))]
        assert [r.getMessage() for r in caplog.records] == []
        (first,) = publish(opened, kw, t, range(1))
        element = waiting.result(TIMEOUT)
        assert element is not None
        assert element.position == first
        assert sub.commit(0, first).status is CommitStatus.COMMITTED

    def test_a_silent_member_loses_its_channels_and_its_listeners_hear_it(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        """The other side of the two tests above: without heartbeats the channel goes."""
        t = topic(topic_name)
        heard = Heard()
        sub = ChannelSubscriber(t, group="g", timeout=MEMBER_TIMEOUT, listeners=[heard], **kw)
        opened.append(sub)
        eventually(lambda: heard.events == [("assigned", frozenset({0}))], timeout=TIMEOUT)
        eventually(lambda: ("lost", frozenset({0})) in heard.events, timeout=TIMEOUT)
        assert sub.channels == []


class TestAnonymousCommits:
    def test_what_is_delivered_during_a_commit_is_committed_after_it(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        """One commit is in flight at a time; what is delivered meanwhile follows it."""
        t = topic(topic_name)
        positions = publish(opened, kw, t, range(2))
        sub = ChannelSubscriber(t, **kw)
        opened.append(sub)
        with store_held(served["store"]):
            first, second = sub.receive(), sub.receive()
            # both delivered from one fetch, while the first commit waits for the store
            assert first.result(TIMEOUT).position == positions[0]
            assert second.result(TIMEOUT).position == positions[1]
        eventually(lambda: sub.last_committed() == {0: positions[1]}, timeout=TIMEOUT)

    def test_the_default_backlog(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        sub = ChannelSubscriber(topic(topic_name), **kw)
        opened.append(sub)
        assert sub.flow_control.max_backlog == 1024


class TestRebalance:
    def test_channels_moved_to_a_new_member_are_revoked_not_lost(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name, 2)
        heard = Heard()
        first = ChannelSubscriber(t, group="g", listeners=[heard], **kw)
        opened.append(first)
        eventually(lambda: heard.events == [("assigned", frozenset({0, 1}))], timeout=TIMEOUT)
        second = ChannelSubscriber(t, group="g", **kw)
        opened.append(second)
        eventually(lambda: len(heard.events) == 2, timeout=TIMEOUT)
        eventually(lambda: len(second.channels) == 1, timeout=TIMEOUT)
        (moved,) = second.channels
        assert heard.events[1] == ("revoked", frozenset({moved}))
        assert first.channels == [1 - moved]
        # what a member reports is about its own channels only
        assert set(first.heads()) == set(first.tails()) == {1 - moved}
        assert set(second.heads()) == set(second.tails()) == {moved}


class TestStoreRestart:
    def test_a_member_commits_to_a_restarted_store_before_it_rejoins(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """The restarted store re-admits the member from its commit (which names the
        store incarnation it joined and its member timeout), and expels it after that
        timeout when it stays silent."""
        path = tmp_path / "store"
        kw = {"domain_id": domain_id, "namespace": namespace}
        t = topic(topic_name)
        store = Store(path, sync=SyncMode.NORMAL, **kw)
        store.start()
        try:
            publish_to = ChannelPublisher(t, order_by=OrderBy.fixed(0), **kw)
            positions = publish_to.publish_many([Msg(0, s) for s in range(3)]).result(TIMEOUT)
            publish_to.close()
            assert positions is not None
            sub = ChannelSubscriber(t, group="g", timeout=MEMBER_TIMEOUT, **kw)
            try:
                receive_n(sub, 3, TIMEOUT)
                assert sub.commit(0, positions[0]).status is CommitStatus.COMMITTED
                # hold the delivery thread: no heartbeat and no rejoin reach the new store
                with sub._lock:
                    store.close()
                    store = Store(path, sync=SyncMode.NORMAL, **kw)
                    store.start()
                    readmitted = sub.commit(0, positions[1])
                    assert readmitted.status is CommitStatus.COMMITTED
                    # re-admitted with its own timeout: silent, it is expelled after it,
                    # and a member that joined meanwhile takes the channel over
                    other = ChannelSubscriber(t, group="g", **kw)
                    try:
                        assert other.channels == []
                        eventually(lambda: other.channels == [0], timeout=TIMEOUT)
                        assert other.last_committed(0) == positions[1]
                    finally:
                        other.close()
            finally:
                sub.close()
        finally:
            store.close()


class TestStoreGone:
    def test_close_leaves_without_the_store_and_without_raising(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """Leaving the group is tried for 2 s; then the member just goes."""
        kw = {"domain_id": domain_id, "namespace": namespace}
        store = Store(tmp_path / "store", sync=SyncMode.NORMAL, **kw)
        store.start()
        try:
            sub = ChannelSubscriber(topic(topic_name), group="g", request_timeout=10.0, **kw)
        finally:
            store.close()
        began = time.monotonic()
        sub.close()
        assert time.monotonic() - began < 6.0  # not the 10 s request timeout
        assert sub.closed
