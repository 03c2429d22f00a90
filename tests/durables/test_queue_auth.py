"""Queues in a namespace with a key: a consumer is served only to the client that subscribed it."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from dcps import PreconditionNotMetError
from dcps.channels._client import StoreClient
from dcps.durables._queue import QueuePublisher, QueueSubscriber
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._auth_member import MemberOffer, MemberSecret
from dcps.wire._codes import ErrorCode, Op
from dcps.wire._queues import (
    QueueAcked,
    QueueAckRequest,
    QueueHeartbeatRequest,
    QueueLeaveRequest,
    QueueReceiveRequest,
    QueueSubscribeRequest,
    queue_secret_group,
)
from dcps.wire._transport import Endpoint
from tests.support.peers.maps_queues_peer import Task
from tests.support.raw_attacker import RawKeyHolder
from tests.support.store_process import StoreProcess

TIMEOUT = 10.0


def test_another_key_holder_cannot_act_for_a_queue_consumer(
    tmp_path: Path, domain_id: int, namespace: str
) -> None:
    """A second key holder naming a live consumer cannot acknowledge (delete) the elements it
    holds, make it leave, or subscribe under its name; the consumer still acks its own."""
    key = write_key_file(tmp_path / "ns.key").source
    kw = {"domain_id": domain_id, "namespace": namespace}
    with (
        Store(tmp_path / "store", sync=SyncMode.NORMAL, key=key, admin_key=None, **kw),
        QueuePublisher("jobs", Task, store_key=key, **kw) as pub,
        QueueSubscriber("jobs", Task, store_key=key, **kw) as sub,
    ):
        pub.publish(Task(n=1, note="a"), confirm=True)
        (element,) = sub.receive(1, TIMEOUT)
        other = StoreClient(Endpoint(domain_id, namespace), request_timeout=5.0, key=key)
        try:
            other.connect(TIMEOUT)
            attacks = [
                (QueueAckRequest("jobs", sub.consumer, (element.seq,)), QueueAcked.from_wire),
                (QueueLeaveRequest("jobs", sub.consumer), bool),
                (QueueSubscribeRequest("jobs", sub.consumer, 60_000, ""), bool),
            ]
            for request, decode in attacks:
                # refused by the store (its own binding to the subscribing client) or, with
                # the per-consumer secret, already when sealing: no proof of it to give
                with pytest.raises(
                    PreconditionNotMetError, match=r"another client|member secret|not the member"
                ):
                    other.wait_for(request.op, other.request_async(request, decode), None)
        finally:
            other.close()
        assert pub.state().in_flight == 1  # still out with its own consumer
        sub.ack(element)
        assert pub.state().stored == 0


def test_a_key_holder_spoofing_the_consumers_client_cannot_act_for_it(
    tmp_path: Path, domain_id: int, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key holder that sends under the consumer's own client id (which binding consumers
    to clients cannot tell apart) but lacks the consumer's secret, agreed at subscribe, has
    every receive, ack, rollback, heartbeat, leave and re-subscribe refused: the consumer
    keeps its element, the queue keeps the next one; the consumer then acks its own.
    A real store process; the attacker is a raw participant."""
    key = str(write_key_file(tmp_path / "ns.key").source)
    monkeypatch.setenv(KEY_FILE_ENV, key)
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    kw = {"domain_id": domain_id, "namespace": namespace}
    attacker = None
    try:
        with (
            QueuePublisher("jobs", Task, **kw) as pub,
            QueueSubscriber("jobs", Task, **kw) as sub,
        ):
            pub.publish(Task(n=1, note="a"), confirm=True)
            (element,) = sub.receive(1, TIMEOUT)
            pub.publish(Task(n=2, note="b"), confirm=True)
            victim = sub._link.client
            incarnation = victim.ping(timeout=TIMEOUT).incarnation
            attacker = RawKeyHolder(domain_id, namespace, key, victim.client_id)
            made_up = MemberSecret(
                secrets.token_bytes(32), queue_secret_group("jobs"), sub.consumer, incarnation
            )
            attacks = [
                QueueReceiveRequest("jobs", sub.consumer, 10, 0),
                QueueAckRequest("jobs", sub.consumer, (element.seq,)),
                QueueAckRequest("jobs", sub.consumer, (element.seq,), rollback=True),
                QueueHeartbeatRequest("jobs", sub.consumer),
                QueueLeaveRequest("jobs", sub.consumer),
                QueueSubscribeRequest("jobs", sub.consumer, 60_000, "", MemberOffer().public),
            ]
            for request in attacks:
                for secret in (made_up, None):  # a wrong proof, and none at all
                    if secret is None and request.op != Op.QUEUE_SUBSCRIBE:
                        with pytest.raises(PreconditionNotMetError, match="member secret"):
                            attacker.send(request, incarnation, None)  # cannot even seal
                        continue
                    reply = attacker.answer(attacker.send(request, incarnation, secret))
                    assert reply.status == ErrorCode.PRECONDITION_NOT_MET, (request, reply)
                    assert "not the member that joined" in reply.error
            state = pub.state()
            assert (state.stored, state.in_flight) == (2, 1)  # nothing taken, acked or freed
            sub.ack(element)
            (second,) = sub.receive(1, TIMEOUT)
            assert second.value == Task(n=2, note="b")
            sub.ack(second)
            assert pub.state().stored == 0
    finally:
        if attacker is not None:
            attacker.close()
        store.kill()
