"""Peer: another JMS connection around a temporary topic, in its own process.

Usage: ``jms_temporary.py DOMAIN NAMESPACE own [SECONDS]`` creates a connection (1 s
consumer timeout or SECONDS, its temporary topics' leases) with a temporary
topic and a consumer of it, prints ``topic NAME`` and waits until killed.
``jms_temporary.py DOMAIN NAMESPACE steal NAME`` tries, as another connection,
to consume temporary topic NAME through the JMS API (``client-refused``),
around the client's check straight at the store with a durable subscriber
(``store-refused ERROR``), and to delete it (``delete-refused ERROR``).
"""

import sys
import threading
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project, for its tests

from jms_types import Quote

from dcps import DcpsError
from dcps.channels import ChannelledTopic
from dcps.durables import DurableSubscriber
from dcps.jms import Connection, TemporaryTopic
from dcps.jms._envelope import envelope_of
from dcps.wire._durables import TemporaryAction


def main() -> None:
    domain, namespace, mode = sys.argv[1:4]
    kw = {"domain_id": int(domain), "namespace": namespace}
    lease = float(sys.argv[4]) if mode == "own" and len(sys.argv) > 4 else 1.0
    connection = Connection(channel_count=1, consumer_timeout=timedelta(seconds=lease), **kw)
    connection.start()
    session = connection.create_topic_session()
    if mode == "own":
        temp = session.create_temporary_topic(Quote)
        session.create_subscriber(temp)
        print(f"topic {temp.name}", flush=True)
        threading.Event().wait()  # until SIGKILL
    name = sys.argv[4]
    try:
        session.create_subscriber(TemporaryTopic(name, Quote))
        print("client-accepted", flush=True)
    except DcpsError as exc:
        print(f"client-refused {type(exc).__name__}", flush=True)
    physical = ChannelledTopic(name, envelope_of(Quote), 1)
    try:
        DurableSubscriber(physical, None, persistent=False, start="tail", **kw).close()
        print("store-accepted", flush=True)
    except DcpsError as exc:
        print(f"store-refused {type(exc).__name__}: {exc}", flush=True)
    try:
        connection._temporary_request(name, TemporaryAction.RELEASE)
        print("delete-accepted", flush=True)
    except DcpsError as exc:
        print(f"delete-refused {type(exc).__name__}: {exc}", flush=True)
    connection.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
