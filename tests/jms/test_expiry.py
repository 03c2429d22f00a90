"""Message expiry (issue 15, seed 004: a message is kept "until delivered and acknowledged
... or until it has expired"): JMS ``setTimeToLive`` / ``JMSExpiration``.

An expired message is never delivered, to a durable or a non-durable subscriber, and
does not keep a durable subscription in use. Topics the store holds with the envelope of
dcps before expiry keep working (their messages never expire; a time to live is refused
naming the topic). The store is a real process.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import PreconditionNotMetError, UnsupportedError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.jms import AcknowledgeMode, Connection, TopicSubscriber
from dcps.jms._envelope import envelope_of
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.jms_types import Quote
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 30.0
SHORT = timedelta(milliseconds=400)  # the time to live of the messages that expire


@pytest.fixture
def store(tmp_path: Path, domain_id: int) -> Iterator[StoreProcess]:
    process = StoreProcess(tmp_path / "store", domain_id, f"exp_{uuid.uuid4().hex[:8]}")
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture
def connections(store: StoreProcess) -> Iterator[list[Connection]]:
    opened: list[Connection] = []
    yield opened
    for connection in reversed(opened):
        connection.close()


def _connect(store: StoreProcess, opened: list[Connection], client_id: str = "c") -> Connection:
    connection = Connection(
        client_id,
        domain_id=store.domain_id,
        namespace=store.namespace,
        channel_count=1,
        consumer_timeout=timedelta(seconds=3),
    )
    opened.append(connection)
    connection.start()
    return connection


def _seqs(sub: TopicSubscriber[Quote], quiet: float = 1.0) -> list[int]:
    out = []
    while (m := sub.receive(quiet)) is not None:
        out.append(m.body.seq)
    return out


def _past(expiration_ms: int) -> None:
    """Wait until the wall clock is past ``expiration_ms`` (what the test is about)."""
    eventually(lambda: time.time_ns() // 1_000_000 > expiration_ms, TIMEOUT, "the expiry")


def test_an_expired_message_is_never_delivered_to_any_subscriber(
    store: StoreProcess, connections: list[Connection], topic_name: str
) -> None:
    """1 expires after 0.4 s, 2 never, 3 after a minute: once 1 has expired, neither the
    durable subscriber (inactive while it was published) nor a non-durable subscriber
    (active, not receiving) ever gets it; the others come with their JMSExpiration."""
    connection = _connect(store, connections)
    session = connection.create_topic_session()
    topic = session.create_topic(topic_name, Quote)
    session.create_durable_subscriber(topic, "keep").close()  # accumulates from now on
    live = session.create_subscriber(topic)
    pub = session.create_publisher(topic)
    pub.set_time_to_live(SHORT)
    assert pub.time_to_live == SHORT
    pub.publish(Quote("a", 1.0, 1))
    pub.publish(Quote("a", 1.0, 2), time_to_live=None)
    pub.publish(Quote("a", 1.0, 3), time_to_live=60)
    _past(int(time.time_ns() // 1_000_000 + SHORT.total_seconds() * 1000))
    got = [live.receive(TIMEOUT) for _ in range(2)]
    assert [m.body.seq for m in got if m is not None] == [2, 3]
    assert live.receive(1.0) is None
    never, minute = got
    assert never is not None
    assert minute is not None
    assert never.expiration_ms == 0
    assert never.expiration is None
    assert minute.expiration_ms == minute.timestamp_ms + 60_000
    durable = session.create_durable_subscriber(topic, "keep")
    assert _seqs(durable) == [2, 3]


def test_expired_messages_are_dropped_when_a_consumer_receives_them_late(
    store: StoreProcess, connections: list[Connection], topic_name: str
) -> None:
    """A durable consumer that fetched messages (its buffer) but receives them only after
    they expired gets none of them; they are gone: a new consumer gets nothing either."""
    connection = _connect(store, connections)
    session = connection.create_topic_session()
    topic = session.create_topic(topic_name, Quote)
    sub = session.create_durable_subscriber(topic, "late")
    pub = session.create_publisher(topic)
    for s in (1, 2, 3):
        pub.publish(Quote("a", 1.0, s), time_to_live=SHORT)
    eventually(lambda: len(sub._durable._buffer) == 3, TIMEOUT, "the consumer's fetch")
    _past(int(time.time_ns() // 1_000_000 + SHORT.total_seconds() * 1000))
    pub.publish(Quote("a", 1.0, 4))
    assert _seqs(sub) == [4]
    sub.close()
    assert _seqs(session.create_durable_subscriber(topic, "late")) == []


def test_expired_pending_messages_do_not_block_unsubscribe_or_recreation(
    store: StoreProcess, connections: list[Connection], topic_name: str
) -> None:
    """Client acknowledgement: a closed consumer whose session holds a message
    unacknowledged keeps its subscription in use (unsubscribe raises) until the message
    expires; then unsubscribe and re-creation with another selector go through."""
    connection = _connect(store, connections)
    session = connection.create_topic_session(AcknowledgeMode.CLIENT)
    topic = session.create_topic(topic_name, Quote)
    for name in ("gone", "again"):
        sub = session.create_durable_subscriber(topic, name)
        session.create_publisher(topic).publish(Quote("a", 1.0, 1), time_to_live=SHORT)
        message = sub.receive(TIMEOUT)
        assert message is not None
        sub.close()
        with pytest.raises(PreconditionNotMetError, match="not acknowledged"):
            session.unsubscribe(name)
        _past(message.expiration_ms)
    session.unsubscribe("gone")
    again = session.create_durable_subscriber(topic, "again", "seq > 5")
    assert again.receive(1.0) is None


def test_a_selector_reads_jms_expiration(
    store: StoreProcess, connections: list[Connection], topic_name: str
) -> None:
    """``JMSExpiration = 0`` selects the messages that never expire, ``JMSExpiration > 0``
    those with a time to live."""
    connection = _connect(store, connections)
    session = connection.create_topic_session()
    topic = session.create_topic(topic_name, Quote)
    forever = session.create_subscriber(topic, "JMSExpiration = 0")
    mortal = session.create_subscriber(topic, "JMSExpiration > 0")
    pub = session.create_publisher(topic)
    pub.publish(Quote("a", 1.0, 1), time_to_live=60)
    pub.publish(Quote("a", 1.0, 2))
    assert _seqs(forever) == [2]
    assert _seqs(mortal) == [1]


def test_a_topic_made_before_expiry_keeps_its_envelope(
    store: StoreProcess, connections: list[Connection], topic_name: str
) -> None:
    """The store holds a JMS topic created by dcps before expiry (the version-1 envelope,
    type identity recorded): this dcps publishes to it and receives from it as before,
    its messages never expire (JMSExpiration 0), and a time to live is refused with
    UnsupportedError naming the topic, publishing nothing."""
    old = envelope_of(Quote, version=1)
    physical = ChannelledTopic(topic_name, old, 1)
    connection = _connect(store, connections)
    session = connection.create_topic_session()
    topic = session.create_topic(topic_name, Quote)

    def old_message(seq: int) -> object:
        return old(
            body=Quote("old", 1.0, seq),
            message_id=f"ID:old-{seq}",
            timestamp=time.time_ns() // 1_000_000,
            priority=4,
            correlation_id="",
            jms_type="",
            client_id="",
            connection_id="old",
        )

    with ChannelPublisher(physical, domain_id=store.domain_id, namespace=store.namespace) as legacy:
        legacy.publish(old_message(1)).result(TIMEOUT)  # dcps 0.3 made the topic
        sub = session.create_durable_subscriber(topic, "d", "JMSExpiration = 0")
        legacy.publish(old_message(2)).result(TIMEOUT)  # an old client still publishing
    pub = session.create_publisher(topic)
    with pytest.raises(UnsupportedError, match=topic_name):
        pub.publish(Quote("new", 2.0, 9), time_to_live=60)
    pub.publish(Quote("new", 2.0, 3))
    first = sub.receive(TIMEOUT)
    assert first is not None
    assert first.body.seq == 2
    assert first.message_id == "ID:old-2"
    message = sub.receive(TIMEOUT)
    assert message is not None
    assert message.body.seq == 3
    assert message.expiration_ms == 0
    assert sub.receive(1.0) is None


def test_messages_a_killed_consumer_held_are_not_redelivered_once_expired(
    store: StoreProcess, connections: list[Connection], topic_name: str
) -> None:
    """A client-acknowledgement consumer in another process receives 1-3 (5 s to live) and
    4 (for ever) and is killed with SIGKILL holding them unacknowledged. Once 1-3 have
    expired, the next consumer of the subscription gets only 4, redelivered."""
    connection = _connect(store, connections, "feeder")
    session = connection.create_topic_session()
    topic = session.create_topic(topic_name, Quote)
    with killed_at_exit() as peers:
        peer = LinePeer(
            [
                str(PEERS_DIR / "jms_subscriber.py"),
                str(store.domain_id),
                store.namespace,
                topic_name,
                "client-x",
                "held",
                AcknowledgeMode.CLIENT.value,
                "4",
                "99",  # never acknowledges
            ]
        )
        peers.append(peer)
        peer.wait_line(lambda line: line == "ready", TIMEOUT)
        pub = session.create_publisher(topic)
        for s in (1, 2, 3):
            pub.publish(Quote("a", 1.0, s), time_to_live=5)
        expires = time.time_ns() // 1_000_000 + 5_000
        pub.publish(Quote("a", 1.0, 4))
        peer.wait_line(lambda line: line.startswith("got 4"), TIMEOUT)
        peer.kill()
    _past(expires)
    again = _connect(store, connections, "client-x").create_topic_session()

    def resubscribed() -> TopicSubscriber[Quote] | None:
        try:
            return again.create_durable_subscriber(topic, "held")
        except PreconditionNotMetError:  # the killed consumer is active until its timeout
            return None

    sub = eventually(resubscribed, TIMEOUT, "the store letting the killed consumer go")
    message = sub.receive(TIMEOUT)
    assert message is not None
    assert (message.body.seq, message.redelivered) == (4, True)
    assert sub.receive(1.0) is None
