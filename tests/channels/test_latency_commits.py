"""The commits that cost the store time on the latency path (issue 19: 64 B at 1,000/s).

At 1,000 elements/s an anonymous subscriber committed after nearly every
element, and the store wrote each commit as one SQLite transaction per
channel: together 30 % of the store's thread, and a publish that found the
store busy with one waited. An anonymous subscriber now commits at most once
per ``ANONYMOUS_COMMIT_INTERVAL`` (the last delivery still gets committed), and
a commit of many channels is one transaction. Counted with the store's own
metrics (requests answered, SQLite COMMITs), against an embedded store.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    Position,
)
from dcps.channels._subscriber import ANONYMOUS_COMMIT_INTERVAL
from dcps.store import Store
from tests.support.channel_entities import publish
from tests.support.embedded_store import served_store
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually

TIMEOUT = 10.0


served = served_store("latcommits")  # one embedded store for the module


@pytest.fixture
def kw(served: dict[str, Any]) -> dict[str, Any]:
    return dict(served["kw"])


def answered(store: Store, kind: str) -> float:
    """The requests of ``kind`` the store answered so far."""
    value = store.metrics.registry.get_sample_value(
        "dcps_store_requests_total", {"kind": kind, "result": "ok"}
    )
    return value or 0.0


def transactions(store: Store) -> float:
    """The SQLite COMMITs of the store's log so far (every write transaction)."""
    value = store.metrics.registry.get_sample_value("dcps_store_sqlite_commit_seconds_count")
    return value or 0.0


class TestAnonymousCommitPace:
    def test_a_stream_received_one_by_one_is_committed_once_per_interval_at_most(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        """200 elements, each published, then received alone (a delivery round each): the
        anonymous subscriber's commits leave an interval apart at least, and the last
        element is committed all the same."""
        store = served["store"]
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        sub = ChannelSubscriber(topic, **kw)
        opened.append(sub)
        pub = ChannelPublisher(topic, **kw)
        opened.append(pub)
        before = answered(store, "commit")
        start = time.monotonic()
        for i in range(200):
            pub.publish(Msg(0, i))
            element = sub.receive().result(TIMEOUT)
            assert element is not None
            assert element.value.seq == i
        eventually(lambda: sub.last_committed(0) == Position(0, 199), timeout=TIMEOUT)
        elapsed = time.monotonic() - start
        commits = answered(store, "commit") - before
        assert 1 <= commits <= elapsed / ANONYMOUS_COMMIT_INTERVAL + 1, (
            f"{commits:.0f} commits in {elapsed:.2f} s"
        )


class TestCommitOfManyChannels:
    def test_a_commit_of_eight_channels_is_one_transaction(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        """A member commits eight channels at once: every channel is committed (and, the
        topic keeping nothing consumed, released up to its commit), in one transaction."""
        store = served["store"]
        topic = ChannelledTopic(topic_name, Msg, channel_count=8)
        sub = ChannelSubscriber(topic, group="g", **kw)
        opened.append(sub)
        eventually(lambda: len(sub.channels) == 8, timeout=TIMEOUT)
        for c in range(8):
            publish(opened, kw, topic, range(3), channel=c)
        got = receive_n(sub, 24, TIMEOUT)
        last = {c: max(e.position for e in got if e.channel == c) for c in range(8)}
        assert last == {c: Position(c, 2) for c in range(8)}
        before = transactions(store)
        results = sub.commit(last)
        assert transactions(store) - before == 1
        assert {c: r.status for c, r in results.items()} == dict.fromkeys(
            range(8), CommitStatus.COMMITTED
        )
        assert sub.last_committed() == last
        assert sub.heads() == {c: Position(c, 3) for c in range(8)}  # released

    def test_each_channel_gets_its_own_status(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        """One commit naming a channel already committed, one committed now and one beyond
        its tail: each answered as a commit of that channel alone would be."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=3, retain_consumed=True)
        sub = ChannelSubscriber(topic, group="g", **kw)
        opened.append(sub)
        eventually(lambda: len(sub.channels) == 3, timeout=TIMEOUT)
        for c in range(3):
            publish(opened, kw, topic, range(2), channel=c)
        receive_n(sub, 6, TIMEOUT)
        assert sub.commit(0, Position(0, 1)).status is CommitStatus.COMMITTED
        results = sub.commit({0: Position(0, 1), 1: Position(1, 0), 2: Position(2, 5)})
        assert {c: r.status for c, r in results.items()} == {
            0: CommitStatus.ALREADY_COMMITTED,
            1: CommitStatus.COMMITTED,
            2: CommitStatus.REJECTED,
        }
        assert sub.last_committed() == {0: Position(0, 1), 1: Position(1, 0)}
