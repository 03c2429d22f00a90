"""Peer: a JMS transacted session in its own process (killed with SIGKILL by the tests).

Usage: ``jms_transactor.py DOMAIN NAMESPACE IN OUT COUNT COMMIT``. As client id
``tx-peer`` (1 s consumer timeout) it consumes COUNT messages of durable
subscription ``in`` on topic IN and publishes, for each, ``seq + 100`` to topic
OUT, in one transaction; with COMMIT ``1`` it commits (printing ``committed``).
Then it prints ``holding`` and waits until killed. With ``DCPS_TEST_CRASH_AT=
jms-before-commit`` in its environment it dies inside ``commit`` just before the
store is asked to commit (everything staged and enlisted).
"""

import faulthandler
import signal
import sys
import threading
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project, for its tests

from jms_types import Quote

from dcps.jms import AcknowledgeMode, Connection


def main() -> None:
    faulthandler.register(signal.SIGUSR1)  # the tests ask for its stacks when it hangs
    domain, namespace, in_name, out_name, count, commit = sys.argv[1:7]
    connection = Connection(
        "tx-peer",
        domain_id=int(domain),
        namespace=namespace,
        channel_count=1,
        consumer_timeout=timedelta(seconds=1),
        connect_timeout=timedelta(seconds=60),  # (a loaded test machine)
    )
    connection.start()
    session = connection.create_topic_session(AcknowledgeMode.TRANSACTED)
    sub = session.create_durable_subscriber(session.create_topic(in_name, Quote), "in")
    pub = session.create_publisher(session.create_topic(out_name, Quote))
    print("ready", flush=True)
    for _ in range(int(count)):
        message = sub.receive()
        assert message is not None
        pub.publish(Quote("out", message.body.price, message.body.seq + 100))
        print(f"got {message.body.seq}", flush=True)
    if commit == "1":
        session.commit()
        print("committed", flush=True)
    print("holding", flush=True)
    threading.Event().wait()  # until SIGKILL


if __name__ == "__main__":
    main()
