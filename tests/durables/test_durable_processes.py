"""Durables with the store and subscribers in other processes, killed with SIGKILL:
nothing acknowledged is delivered again, nothing unacknowledged is lost."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import DcpsTimeoutError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableElement, DurableKind, DurableSubscriber, durable_info
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 20.0


@pytest.fixture
def peers() -> Iterator[list[LinePeer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


def start_store(peers: list[LinePeer], data: Path, domain_id: int, namespace: str) -> LinePeer:
    """Run ``python -m dcps.store`` and wait until it serves."""
    args = ["-m", "dcps.store", "--data", str(data), "--domain", str(domain_id)]
    peer = LinePeer([*args, "--namespace", namespace, "--sync", "FULL"])
    peers.append(peer)
    peer.wait_line(lambda line: line.startswith("dcps store ready"))
    return peer


def publish(topic: ChannelledTopic, seqs: range, domain_id: int, namespace: str) -> None:
    with ChannelPublisher(topic, domain_id=domain_id, namespace=namespace) as pub:
        futures = [pub.publish(Msg(0, s)) for s in seqs]
        pub.flush()
        for f in futures:
            assert f.result(TIMEOUT) is not None


def drain(sub: DurableSubscriber[Msg], quiet: float = 4.0) -> list[DurableElement[Msg]]:
    """Receive and acknowledge until nothing comes for ``quiet`` seconds; the acknowledged.

    An ack the store refuses (it restarted and forgot the subscriber meanwhile)
    is not an acknowledgement: that element comes again.
    """
    got = []
    while True:
        try:
            e = sub.receive(timeout=quiet)
        except DcpsTimeoutError:
            return got
        try:
            e.ack()
        except PreconditionNotMetError:
            continue
        got.append(e)


class TestSubscriberKilled:
    @pytest.mark.parametrize("kind", [DurableKind.SHARED, DurableKind.EXCLUSIVE])
    def test_unacknowledged_elements_of_a_killed_subscriber_are_redelivered(
        self,
        kind: DurableKind,
        store: object,
        peers: list[LinePeer],
        topic_name: str,
        domain_id: int,
        namespace: str,
    ) -> None:
        """A subscriber process acks 3, holds 5, is killed: the 5 come again, the 3 never."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        peer = LinePeer(
            [
                str(PEERS_DIR / "durable_subscriber.py"),
                str(domain_id),
                namespace,
                topic_name,
                "d",
                kind.value,
                "8",
                "3",
            ]
        )
        peers.append(peer)
        peer.wait_line(lambda line: line == "ready")
        publish(topic, range(20), domain_id, namespace)
        eventually(lambda: len(peer.records("got")) >= 8 and len(peer.records("acked")) == 3)
        peer.kill()
        acked = {r[0] for r in peer.records("acked")}
        held = {r[0] for r in peer.records("got")} - acked
        assert len(acked) == 3
        assert 5 <= len(held) <= 8

        def subscribe() -> DurableSubscriber[Msg] | None:
            try:  # an exclusive durable refuses us until the store expires the dead one
                return DurableSubscriber(
                    topic, "d", kind=kind, window=8, domain_id=domain_id, namespace=namespace
                )
            except PreconditionNotMetError:
                return None

        with eventually(subscribe, timeout=TIMEOUT) as sub:
            got = drain(sub)
        offsets = [e.offset for e in got]
        assert sorted(offsets) == sorted(set(range(20)) - acked), "lost or duplicated"
        redelivered = {e.offset for e in got if e.redelivered}
        assert held <= redelivered  # (and what reached its buffer unprinted)
        assert not redelivered & acked
        assert (
            sub.outstanding == 0
            or durable_info(topic, "d", domain_id=domain_id, namespace=namespace).outstanding == 0
        )


class TestStoreKilled:
    def test_kill_9_store_keeps_acknowledgements_of_persistent_durables(
        self,
        tmp_path: Path,
        peers: list[LinePeer],
        topic_name: str,
        domain_id: int,
        namespace: str,
    ) -> None:
        """Acks made before a store SIGKILL hold after its restart: delivery resumes at the
        first unacknowledged element, and only unacknowledged ones come again; a
        non-persistent durable is gone."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        kw = {"domain_id": domain_id, "namespace": namespace}
        store = start_store(peers, tmp_path / "data", domain_id, namespace)
        sub: DurableSubscriber[Msg] = DurableSubscriber(
            topic,
            "p",
            kind=DurableKind.EXCLUSIVE,
            window=6,
            request_timeout=timedelta(seconds=2),
            **kw,
        )
        DurableSubscriber(topic, "volatile", persistent=False, **kw).close()
        try:
            publish(topic, range(12), domain_id, namespace)
            first = [sub.receive(TIMEOUT) for _ in range(6)]
            sub.ack([first[0], first[1], first[2], first[4]])  # 3 and 5 stay unacknowledged
            store.kill()
            start_store(peers, tmp_path / "data", domain_id, namespace)
            rest = drain(sub)
        finally:
            sub.close()
        offsets = sorted(e.offset for e in rest)
        assert offsets == [3, 5, 6, 7, 8, 9, 10, 11], offsets
        with pytest.raises(PreconditionNotMetError, match="no durable"):
            durable_info(topic, "volatile", **kw)
