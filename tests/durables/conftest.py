"""Fixtures of the durable tests: a topic, publishers and durable subscribers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dcps.channels import ChannelledTopic, ChannelPublisher, Position
from dcps.durables import DurableSubscriber
from dcps.store import Store
from tests.support.peers.channels_types import Msg

TIMEOUT = 10.0


@pytest.fixture
def topic(topic_name: str) -> ChannelledTopic:
    """A one-channel topic (total order) that does not retain consumed elements."""
    return ChannelledTopic(topic_name, Msg, channel_count=1)


class Durables:
    """Opens publishers and durable subscribers on the test's store; closes them afterwards."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        self.kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        self.opened: list[Any] = []

    def pub(self, topic: ChannelledTopic, **kw: Any) -> ChannelPublisher[Msg]:
        p: ChannelPublisher[Msg] = ChannelPublisher(topic, **self.kw, **kw)
        self.opened.append(p)
        return p

    def sub(self, topic: ChannelledTopic, name: str | None, **kw: Any) -> DurableSubscriber[Msg]:
        s: DurableSubscriber[Msg] = DurableSubscriber(topic, name, **self.kw, **kw)
        self.opened.append(s)
        return s

    def publish(self, topic: ChannelledTopic, seqs: range | list[int], key: int = 0) -> None:
        """Publish ``Msg(key, seq)`` for each seq, confirmed."""
        pub = self.pub(topic)
        futures = [pub.publish(Msg(key, s)) for s in seqs]
        pub.flush()
        positions: list[Position | None] = [f.result(TIMEOUT) for f in futures]
        assert all(p is not None for p in positions)

    def close(self) -> None:
        for entity in reversed(self.opened):
            entity.close()


@pytest.fixture
def durables(store: Store, domain_id: int, namespace: str) -> Iterator[Durables]:
    """A factory of publishers and durable subscribers on the test's embedded store."""
    factory = Durables(domain_id, namespace)
    try:
        yield factory
    finally:
        factory.close()
