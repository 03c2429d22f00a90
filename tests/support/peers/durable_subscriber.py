"""Peer: a durable subscriber in its own process (killed with SIGKILL by the durable tests).

Usage: ``durable_subscriber.py DOMAIN NAMESPACE TOPIC DURABLE KIND WINDOW ACK_FIRST``.
It subscribes (a 1 s subscriber timeout, so the store soon notices its death),
prints ``ready``, then for each element received prints ``got OFFSET SEQ
REDELIVERIES``; the first ACK_FIRST elements are acknowledged synchronously
(``acked OFFSET`` once the store has it), the others are held unacknowledged.
"""

import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project, for its tests

from channels_types import Msg

from dcps.channels import ChannelledTopic
from dcps.durables import DurableKind, DurableSubscriber


def main() -> None:
    domain, namespace, topic, durable, kind, window, ack_first = sys.argv[1:8]
    sub: DurableSubscriber[Msg] = DurableSubscriber(
        ChannelledTopic(topic, Msg, channel_count=1),
        durable,
        kind=DurableKind(kind),
        window=int(window),
        timeout=timedelta(seconds=1),
        domain_id=int(domain),
        namespace=namespace,
    )
    print("ready", flush=True)
    acked = 0
    for element in sub:
        print(f"got {element.offset} {element.value.seq} {element.redelivery_count}", flush=True)
        if acked < int(ack_first):
            element.ack()
            acked += 1
            print(f"acked {element.offset}", flush=True)


if __name__ == "__main__":
    main()
