"""Batching costs no latency on an idle link, and still batches under load (issue 19)."""

from __future__ import annotations

import os
import signal
import time
from datetime import timedelta
from pathlib import Path

from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, OrderBy, Position
from dcps.store import Store
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

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

    def test_a_sparse_stream_goes_out_at_once_though_a_batch_is_in_flight(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A sparse stream is not held for ``linger``: a sample coming ``linger``/4 or more
        after the previous publish, itself as far from the one before, is sent at once with
        its channel's queued batch though a batch awaits the store; one coming right after
        another, or after a single pause, lingers."""
        store = StoreProcess(tmp_path / "data", domain_id, namespace)
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        try:
            with ChannelPublisher(
                topic,
                domain_id=domain_id,
                namespace=namespace,
                order_by=OrderBy.round_robin(),  # channels 0, 1, 0, 1
                linger=timedelta(seconds=8),  # sparse: 2 s and more apart
                timeout=timedelta(seconds=30),
            ) as pub:
                os.kill(store.proc.pid, signal.SIGSTOP)  # nothing is confirmed meanwhile
                try:
                    stat = Path(f"/proc/{store.proc.pid}/stat")
                    eventually(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] in "Tt")
                    first = pub.publish(Msg(0, 0, "x"))  # idle link: sent at once
                    assert pub.flow_control.backlog == 1
                    second = pub.publish(Msg(1, 1, "x"))  # right after, one in flight: lingers
                    assert pub.flow_control.backlog == 1
                    time.sleep(2.2)  # the input under test: gaps over linger/4 (2 s)
                    third = pub.publish(Msg(2, 2, "x"))  # one pause only: lingers
                    assert pub.flow_control.backlog == 1
                    time.sleep(2.2)
                    fourth = pub.publish(Msg(3, 3, "x"))  # a sparse stream: sent at once
                    assert pub.flow_control.backlog == 2  # channel 1's batch, not after 8 s
                    assert not third.done()
                finally:
                    os.kill(store.proc.pid, signal.SIGCONT)
                assert first.result(timeout=30) == Position(0, 0)
                assert [second.result(timeout=30), fourth.result(timeout=30)] == [
                    Position(1, 0),
                    Position(1, 1),
                ]
                pub.flush(timedelta(seconds=30))
                assert third.result(timeout=30) == Position(0, 1)
        finally:
            store.kill()
