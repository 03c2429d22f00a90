"""A JMS durable subscriber in another process killed with SIGKILL, under each
acknowledgement mode: what it acknowledged never comes again, nothing is lost."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from dcps import PreconditionNotMetError
from dcps.jms import AcknowledgeMode, Connection, Message, TopicSubscriber
from dcps.store import Store
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.jms_types import Quote
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 20.0
PUBLISHED = 10
RECEIVED = 6
ACK_AT = 4


@pytest.fixture
def peers() -> Iterator[list[LinePeer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


def drain(sub: TopicSubscriber[Quote], quiet: float = 3.0) -> list[Message[Quote]]:
    out = []
    while (m := sub.receive(quiet)) is not None:
        out.append(m)
    return out


@pytest.mark.parametrize("mode", list(AcknowledgeMode), ids=lambda m: m.value)
def test_killed_durable_subscriber(
    mode: AcknowledgeMode,
    store: Store,
    peers: list[LinePeer],
    topic_name: str,
    domain_id: int,
    namespace: str,
) -> None:
    """The peer receives 6 of 10 messages (acknowledging at the 4th in client and
    transacted modes) and is killed: client/transacted get 5..10 again, auto gets
    7..10 (only what it never received), dups-ok loses nothing (duplicates allowed)."""
    peer = LinePeer(
        [
            str(PEERS_DIR / "jms_subscriber.py"),
            str(domain_id),
            namespace,
            topic_name,
            "client-k",
            "audit",
            mode.value,
            str(RECEIVED),
            str(ACK_AT),
        ]
    )
    peers.append(peer)
    peer.wait_line(lambda line: line == "ready")
    kw = {"domain_id": domain_id, "namespace": namespace, "channel_count": 1}
    with Connection(**kw) as publisher:
        session = publisher.create_topic_session()
        pub = session.create_publisher(session.create_topic(topic_name, Quote))
        for i in range(1, PUBLISHED + 1):
            pub.publish(Quote("A", float(i), i))
    peer.wait_line(lambda line: line == "holding")
    peer.kill()
    peer_got = [r[0] for r in peer.records("got")]
    assert peer_got == list(range(1, RECEIVED + 1))

    with Connection("client-k", consumer_timeout=timedelta(seconds=2), **kw) as again:
        again.start()
        session = again.create_topic_session(AcknowledgeMode.CLIENT)
        topic = session.create_topic(topic_name, Quote)

        def subscribe() -> TopicSubscriber[Quote] | None:
            try:  # refused until the store expires the dead consumer (1 s)
                return session.create_durable_subscriber(topic, "audit")
            except PreconditionNotMetError:
                return None

        sub = eventually(subscribe, timeout=TIMEOUT)
        got = drain(sub)
        session.acknowledge()
    seqs = [m.body.seq for m in got]
    everything = set(range(1, PUBLISHED + 1))
    if mode in (AcknowledgeMode.CLIENT, AcknowledgeMode.TRANSACTED):
        assert seqs == list(range(ACK_AT + 1, PUBLISHED + 1))
        held = [m for m in got if m.body.seq <= RECEIVED]
        assert all(m.redelivered for m in held)  # delivered to the killed peer before
    elif mode is AcknowledgeMode.AUTO:
        assert seqs == list(range(RECEIVED + 1, PUBLISHED + 1))
    else:  # dups-ok: duplicates possible, losses not
        assert set(seqs) | set(peer_got) == everything
        assert set(range(RECEIVED + 1, PUBLISHED + 1)) <= set(seqs)
        assert seqs == sorted(seqs)
