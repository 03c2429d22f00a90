"""Temporary topics are owned at the store, not only by the client (issue 15, seed 004).

The store serves a temporary topic while the connection that claimed it
holds its lease; it lets only the consumers that connection granted
subscribe; it refuses a delete while consumers are open; it ends the topic
(closing its consumers, refusing publishes) when the connection closes or
its lease runs out (the process died). Other connections run in other
processes; an attacker is a raw cyclonedds participant writing requests by
hand, bypassing every client check.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import timedelta

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic as DdsTopic

from dcps import InvalidDestinationError, PreconditionNotMetError
from dcps.jms import Connection, Topic
from dcps.store import Store
from dcps.wire._codes import ErrorCode
from dcps.wire._durables import (
    DurableKind,
    DurableSubscribeRequest,
    TemporaryAction,
    TemporaryTopicRequest,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._names import REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from tests.jms.conftest import Connections
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.jms_types import Quote
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 20.0


@pytest.fixture
def peers() -> Iterator[list[LinePeer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


def _peer(peers: list[LinePeer], domain_id: int, namespace: str, *args: str) -> LinePeer:
    peer = LinePeer([str(PEERS_DIR / "jms_temporary.py"), str(domain_id), namespace, *args])
    peers.append(peer)
    return peer


def _publish_refused(connection: Connection, name: str) -> bool:
    """Whether the store refuses a publish to temporary topic ``name`` (as not existing)."""
    pub = connection.create_topic_session().create_publisher(Topic(name, Quote))
    try:
        pub.publish(Quote("x", 1.0, 1), timeout=TIMEOUT)
    except InvalidDestinationError as exc:
        why = str(exc)
    else:
        why = ""
    finally:
        pub.close()
    return "does not exist" in why


def test_another_connection_in_another_process_cannot_consume_or_delete(
    connect: Connections, peers: list[LinePeer], domain_id: int, namespace: str
) -> None:
    """Another connection's consumer is refused by the client and, around the client's
    check, by the store; it cannot delete the topic; the owner's consumer goes on."""
    session = connect().create_topic_session()
    temp = session.create_temporary_topic(Quote)
    sub = session.create_subscriber(temp)
    peer = _peer(peers, domain_id, namespace, "steal", temp.name)
    peer.wait_line(lambda line: line == "done", TIMEOUT)
    assert "client-refused InvalidDestinationError" in peer.lines
    store_line = next(x for x in peer.lines if x.startswith("store-"))
    assert store_line.startswith("store-refused InvalidDestinationError")
    assert "another connection" in store_line
    delete_line = next(x for x in peer.lines if x.startswith("delete-"))
    assert delete_line.startswith("delete-refused InvalidDestinationError")
    session.create_publisher(temp).publish(Quote("still", 2.0, 7))
    message = sub.receive(TIMEOUT)
    assert message is not None
    assert message.body.seq == 7


def test_a_raw_participant_cannot_subscribe_to_a_temporary_topic(
    store: Store, connect: Connections, domain_id: int, namespace: str
) -> None:
    """A raw participant writing DURABLE_SUBSCRIBE and TEMPORARY_TOPIC requests by hand (no
    client check at all) is refused by the store, and changes nothing."""
    session = connect().create_topic_session()
    temp = session.create_temporary_topic(Quote)
    sub = session.create_subscriber(temp)
    client_id = uuid.uuid4().hex
    dp = DomainParticipant(domain_id)
    try:
        writer = DataWriter(
            Publisher(dp, qos=Qos(Policy.Partition([namespace]))),
            DdsTopic(dp, "dcps_channels_request", Request),
            qos=REQUEST_WRITER_QOS,
        )
        reader = DataReader(
            Subscriber(dp, qos=Qos(Policy.Partition([reply_partition(namespace, client_id)]))),
            DdsTopic(dp, "dcps_channels_reply", Reply),
            qos=REPLY_QOS,
        )
        eventually(writer.get_matched_subscriptions, TIMEOUT, "the store's request reader")
        got: dict[int, Reply] = {}

        def send(request: object, request_id: int) -> Reply:
            writer.write(request.to_wire(client_id, request_id))  # type: ignore[attr-defined]

            def answered() -> bool:
                for r in reader.take(N=16):
                    if isinstance(r, Reply):
                        got[r.request_id] = r
                return request_id in got

            eventually(answered, TIMEOUT, f"the answer to request {request_id}")
            return got[request_id]

        steal = DurableSubscribeRequest(
            temp.name,
            "raw",
            uuid.uuid4().hex,
            DurableKind.SHARED,
            persistent=False,
            anonymous=True,
        )
        reply = send(steal, 1)
        assert reply.status == ErrorCode.INVALID_DESTINATION
        assert "another connection" in reply.error
        for n, action in enumerate(
            (TemporaryAction.GRANT, TemporaryAction.DELETE, TemporaryAction.RELEASE), start=2
        ):
            request = TemporaryTopicRequest(
                temp.name, action, subscriber="raw" if action is TemporaryAction.GRANT else ""
            )
            reply = send(request, n)
            assert reply.status == ErrorCode.INVALID_DESTINATION, (action, reply.error)
            assert "another connection" in reply.error
    finally:
        dp.__del__()
    session.create_publisher(temp).publish(Quote("still", 2.0, 8))
    message = sub.receive(TIMEOUT)
    assert message is not None
    assert message.body.seq == 8


def test_the_store_ends_a_temporary_topic_when_its_owner_dies(
    connect: Connections, peers: list[LinePeer], domain_id: int, namespace: str
) -> None:
    """kill -9 of the owning process: once its lease (1 s) runs out, the store deletes the
    topic: publishes to it are refused as to a topic that does not exist."""
    owner = _peer(peers, domain_id, namespace, "own")
    owner.wait_line(lambda line: line.startswith("topic "), TIMEOUT)
    name = next(x for x in owner.lines if x.startswith("topic ")).split()[1]
    other = connect()
    assert not _publish_refused(other, name)  # alive: anyone may publish to it
    owner.kill()
    eventually(lambda: _publish_refused(other, name), TIMEOUT, "the store ending the topic")


def test_closing_the_connection_ends_the_topic_at_the_store(connect: Connections) -> None:
    """close() of the owner: the store ends the topic at once (publishes refused)."""
    owner = connect()
    temp = owner.create_topic_session().create_temporary_topic(Quote)
    other = connect()
    assert not _publish_refused(other, temp.name)
    owner.close()
    assert _publish_refused(other, temp.name)


def test_the_store_refuses_a_delete_while_consumers_are_open(connect: Connections) -> None:
    """The owner's delete, sent straight to the store around the client's own check, is
    refused while a consumer is open; once it closes, the delete goes through."""
    connection = connect()
    session = connection.create_topic_session()
    temp = session.create_temporary_topic(Quote)
    sub = session.create_subscriber(temp)
    with pytest.raises(PreconditionNotMetError, match="active consumer"):
        connection._temporary_request(temp.name, TemporaryAction.DELETE)
    sub.close()
    temp.delete()
    assert _publish_refused(connect(), temp.name)


def test_the_lease_is_renewed_while_the_connection_lives(
    store: Store, domain_id: int, namespace: str
) -> None:
    """A live connection keeps its temporary topic past many leases (its renewals)."""
    connection = Connection(
        domain_id=domain_id,
        namespace=namespace,
        channel_count=1,
        consumer_timeout=timedelta(milliseconds=300),
    )
    try:
        connection.start()
        session = connection.create_topic_session()
        temp = session.create_temporary_topic(Quote)
        sub = session.create_subscriber(temp)
        time.sleep(1.5)  # five leases pass (what is tested, not a wait for something)
        session.create_publisher(temp).publish(Quote("late", 1.0, 9))
        message = sub.receive(TIMEOUT)
        assert message is not None
        assert message.body.seq == 9
    finally:
        connection.close()
