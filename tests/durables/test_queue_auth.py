"""Queues in a namespace with a key: a consumer is served only to the client that subscribed it."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcps import PreconditionNotMetError
from dcps.channels._client import StoreClient
from dcps.durables._queue import QueuePublisher, QueueSubscriber
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import write_key_file
from dcps.wire._queues import (
    QueueAcked,
    QueueAckRequest,
    QueueLeaveRequest,
    QueueSubscribeRequest,
)
from dcps.wire._transport import Endpoint
from tests.support.peers.maps_queues_peer import Task

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
                with pytest.raises(PreconditionNotMetError, match="another client"):
                    other.wait_for(request.op, other.request_async(request, decode), None)
        finally:
            other.close()
        assert pub.state().in_flight == 1  # still out with its own consumer
        sub.ack(element)
        assert pub.state().stored == 0
