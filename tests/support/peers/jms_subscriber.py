"""Peer: a JMS durable subscriber in its own process (killed with SIGKILL by the JMS tests).

Usage: ``jms_subscriber.py DOMAIN NAMESPACE TOPIC CLIENT_ID NAME MODE RECEIVE ACK_AT``.
It connects (a 1 s consumer timeout, so the store soon notices its death),
creates durable subscription NAME in a session of acknowledgement MODE,
prints ``ready``, then receives RECEIVE messages, printing ``got SEQ
DELIVERY_COUNT`` for each; in client mode it acknowledges (``acked SEQ``
once done) when it has received ACK_AT of them, in transacted mode it
commits then. Then it waits, holding the rest, until it is killed.
"""

import sys
import threading
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project, for its tests

from jms_types import Quote

from dcps.jms import AcknowledgeMode, Connection


def main() -> None:
    domain, namespace, topic_name, client_id, name, mode, receive, ack_at = sys.argv[1:9]
    connection = Connection(
        client_id,
        domain_id=int(domain),
        namespace=namespace,
        channel_count=1,
        consumer_timeout=timedelta(seconds=1),
    )
    connection.start()
    session = connection.create_topic_session(AcknowledgeMode(mode))
    topic = session.create_topic(topic_name, Quote)
    sub = session.create_durable_subscriber(topic, name)
    print("ready", flush=True)
    for count in range(1, int(receive) + 1):
        message = sub.receive()
        assert message is not None
        print(f"got {message.body.seq} {message.delivery_count}", flush=True)
        if count == int(ack_at):
            if session.transacted:
                session.commit()
            else:
                message.acknowledge()
            print(f"acked {message.body.seq}", flush=True)
    print("holding", flush=True)
    threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main()
