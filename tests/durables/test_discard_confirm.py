"""FTL's confirm of a discard (seed 002, issue 14 "Storage"): a publisher on a topic
with no durable and no group is told the store discarded its element.

The store confirms the publish (the element went to the live subscribers of
that moment) but keeps nothing: the element's future says ``discarded`` and
the publisher counts it. With a durable, a group or retention, elements are
stored and not reported discarded.
"""

from __future__ import annotations

from dcps.channels import ChannelledTopic, ChannelSubscriber, Position
from dcps.channels._batches import ElementFuture
from dcps.durables import DurableSubscriber, unsubscribe
from dcps.store import Store
from tests.durables.conftest import TIMEOUT, Durables
from tests.support.peers.channels_types import Msg


def _publish(durables: Durables, topic: ChannelledTopic, n: int) -> tuple[list[ElementFuture], int]:
    pub = durables.pub(topic)
    futures = [pub.publish(Msg(0, s)) for s in range(n)]
    pub.flush()
    for f in futures:
        assert isinstance(f.result(TIMEOUT), Position)  # confirmed either way
    assert all(isinstance(f, ElementFuture) for f in futures)
    return futures, pub.discarded_count  # type: ignore[return-value]


def test_a_topic_without_durable_or_group_confirms_a_discard(
    durables: Durables, topic: ChannelledTopic
) -> None:
    """No durable, no group: every element is confirmed as discarded, and none is stored."""
    futures, count = _publish(durables, topic, 5)
    assert [f.discarded for f in futures] == [True] * 5
    assert count == 5
    # a durable made now starts at the head: the discarded elements are not there to read
    late = durables.sub(topic, "late", start="head")
    assert late.outstanding == 0


def test_a_durable_makes_the_store_keep_and_not_discard(
    durables: Durables, topic: ChannelledTopic, domain_id: int, namespace: str
) -> None:
    """With a durable the elements are stored (not discarded); once it is unsubscribed, the
    topic discards again."""
    sub: DurableSubscriber[Msg] = durables.sub(topic, "keeper")
    futures, count = _publish(durables, topic, 3)
    assert [f.discarded for f in futures] == [False] * 3
    assert count == 0
    assert [sub.receive(TIMEOUT).value.seq for _ in range(3)] == [0, 1, 2]
    sub.close()
    unsubscribe(topic, "keeper", domain_id=domain_id, namespace=namespace)
    futures, count = _publish(durables, topic, 2)
    assert [f.discarded for f in futures] == [True, True]
    assert count == 2


def test_a_group_makes_the_store_keep(
    durables: Durables, topic: ChannelledTopic, domain_id: int, namespace: str
) -> None:
    """A subscriber group on the topic: stored, not discarded."""
    with ChannelSubscriber(
        topic, group="g", domain_id=domain_id, namespace=namespace
    ) as group_member:
        futures, count = _publish(durables, topic, 2)
        assert [f.discarded for f in futures] == [False, False]
        assert count == 0
        assert group_member is not None


def test_a_retaining_topic_keeps(durables: Durables, store: Store, topic_name: str) -> None:
    """A topic retaining consumed elements keeps everything: nothing is discarded."""
    kept = ChannelledTopic(topic_name + "_kept", Msg, channel_count=1, retain_consumed=True)
    futures, count = _publish(durables, kept, 2)
    assert [f.discarded for f in futures] == [False, False]
    assert count == 0
