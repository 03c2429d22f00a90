"""Batching costs no latency on an idle link, and still batches under load (issue 19)."""

from __future__ import annotations

from datetime import timedelta

from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, Position
from dcps.store import Store
from tests.support.peers.channels_types import Msg, receive_n

#: Far longer than any test waits: a sample that lingered would time the test out.
LONG_LINGER = timedelta(seconds=60)


class TestLinger:
    def test_a_sample_on_an_idle_link_goes_out_at_once(
        self, store: Store, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """With nothing in flight, a publish is confirmed without waiting for ``linger``."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        with ChannelPublisher(
            topic, domain_id=domain_id, namespace=namespace, linger=LONG_LINGER
        ) as pub:
            for seq in range(3):  # each waits for the previous: the link is idle every time
                position = pub.publish(Msg(seq, seq, "x")).result(timeout=10)
                assert position == Position(0, seq)

    def test_samples_published_while_one_is_in_flight_share_a_batch(
        self, store: Store, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """Under load samples still batch: many publishes take far fewer store batches."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        count = 2000
        with (
            ChannelSubscriber(topic, domain_id=domain_id, namespace=namespace, group="g") as sub,
            ChannelPublisher(
                topic, domain_id=domain_id, namespace=namespace, linger=timedelta(milliseconds=5)
            ) as pub,
        ):
            futures = [pub.publish(Msg(seq, seq, "x")) for seq in range(count)]
            positions = [f.result(timeout=30) for f in futures]
            assert positions == [Position(0, seq) for seq in range(count)]
            received = receive_n(sub, count)
            assert [e.value.seq for e in received] == list(range(count))
        run, _ = store.log.reader().fetch(topic_name, 0, 0, count)
        assert run.count == count
        assert len(run.counts) < count // 10, f"{len(run.counts)} store batches"  # one per batch
