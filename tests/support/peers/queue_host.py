"""Peer: a queue publisher or consumer on a test host (tests/durables/test_multihost_queue.py).

argv: one JSON object: ``role`` ("publisher" or "consumer"), ``domain``, ``namespace``,
``queue``. Prints one JSON event per line: ``{"ev": "ready"}`` once created; a
publisher then reads commands ``{"seqs": [..]}`` from stdin, publishes each (confirmed)
and prints ``{"ev": "published"}``; a consumer receives (long polls of up to 10
elements; ``{"ev": "polling"}`` before each), prints ``{"ev": "got", "seq": n}`` per
element and acknowledges them.
The DDS network comes from the ``DCPS_*`` variables.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from dcps.durables._queue import QueuePublisher, QueueSubscriber
from tests.support.peers.maps_queues_peer import Task


def emit(**event: Any) -> None:
    print(json.dumps(event), flush=True)


def main() -> None:
    config = json.loads(sys.argv[1])
    where = {"domain_id": config["domain"], "namespace": config["namespace"]}
    if config["role"] == "consumer":
        consumer = QueueSubscriber(config["queue"], Task, **where)
        emit(ev="ready")
        while True:
            emit(ev="polling")
            try:
                got = consumer.receive(max_count=10, timeout=30)
            except Exception as exc:  # no answer while cut off: counted by the test
                emit(ev="error", error=f"{type(exc).__name__}: {exc}")
                continue
            for element in got:
                emit(ev="got", seq=element.value.n)
            if got:
                consumer.ack(got)
    publisher = QueuePublisher(config["queue"], Task, **where)
    emit(ev="ready")
    for line in sys.stdin:
        for seq in json.loads(line)["seqs"]:
            publisher.publish(Task(seq, f"t{seq}"), confirm=True)
        emit(ev="published")


if __name__ == "__main__":
    main()
