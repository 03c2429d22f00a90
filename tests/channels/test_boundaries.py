"""Where a subscriber group resumes, exactly: right after its committed element, on a
topic that retains consumed elements (so the store still holds the committed one and
only the subscriber's arithmetic keeps it from being delivered again)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    OrderBy,
    Position,
)
from dcps.store import Store
from tests.support.peers.channels_types import Msg, receive_n

TIMEOUT = 10.0


@pytest.fixture
def retained(topic_name: str) -> ChannelledTopic:
    """A one-channel topic that retains consumed elements."""
    return ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)


@pytest.fixture
def opened(store: Store) -> Iterator[list[ChannelPublisher[Msg] | ChannelSubscriber[Msg]]]:
    """Entities a test opens, closed (last first) when it ends."""
    entities: list[ChannelPublisher[Msg] | ChannelSubscriber[Msg]] = []
    try:
        yield entities
    finally:
        for entity in reversed(entities):
            entity.close()


class TestResumeAfterCommit:
    def publish(
        self, opened: list, topic: ChannelledTopic, kw: dict[str, object], seqs: range
    ) -> None:
        pub: ChannelPublisher[Msg] = ChannelPublisher(topic, order_by=OrderBy.fixed(0), **kw)  # type: ignore[arg-type]
        opened.append(pub)
        futures = [pub.publish(Msg(0, i)) for i in seqs]
        pub.flush()
        for f in futures:
            f.result(TIMEOUT)

    def member(
        self, opened: list, topic: ChannelledTopic, kw: dict[str, object]
    ) -> ChannelSubscriber[Msg]:
        sub: ChannelSubscriber[Msg] = ChannelSubscriber(topic, group="g", **kw)  # type: ignore[arg-type]
        opened.append(sub)
        return sub

    def test_a_new_member_resumes_after_the_committed_element(
        self, opened: list, retained: ChannelledTopic, domain_id: int, namespace: str
    ) -> None:
        """Commit offset 3 of 0..9 and close: the next member's first element is offset 4."""
        kw: dict[str, object] = {"domain_id": domain_id, "namespace": namespace}
        first = self.member(opened, retained, kw)
        self.publish(opened, retained, kw, range(10))
        got = receive_n(first, 6)
        assert got[3].position == Position(0, 3)
        assert first.commit(0, got[3].position).status is CommitStatus.COMMITTED
        first.close()
        second = self.member(opened, retained, kw)
        again = receive_n(second, 6)
        assert [e.position.offset for e in again] == [4, 5, 6, 7, 8, 9]
        assert [e.value.seq for e in again] == [4, 5, 6, 7, 8, 9]

    def test_a_member_resumes_after_a_commit_at_the_tail(
        self, opened: list, retained: ChannelledTopic, domain_id: int, namespace: str
    ) -> None:
        """Commit the tail and close: the next member gets only what is published later."""
        kw: dict[str, object] = {"domain_id": domain_id, "namespace": namespace}
        first = self.member(opened, retained, kw)
        self.publish(opened, retained, kw, range(5))
        got = receive_n(first, 5)
        assert first.commit(0, got[-1].position).status is CommitStatus.COMMITTED
        first.close()
        second = self.member(opened, retained, kw)
        assert second.last_committed() == {0: Position(0, 4)}
        self.publish(opened, retained, kw, range(5, 7))
        assert [e.position.offset for e in receive_n(second, 2)] == [5, 6]
