"""An exclusive durable (Universal Messaging "named"), then an FTL standard durable.

    python -m examples.durable_exclusive --domain 0

Exclusive: one subscriber reads and acknowledges jobs one at a time and stops
halfway; a second subscriber is refused while the first is active; a new
subscriber later resumes at the first unacknowledged job. Standard: a second
subscriber takes over from the first instead of being refused.
"""

from __future__ import annotations

import argparse
import tempfile

from dcps import AlreadyClosedError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableKind, DurableSubscriber
from dcps.store import Store
from examples.jobs import Job


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    args = parser.parse_args(argv)
    kw = {"domain_id": args.domain, "namespace": "durable_exclusive_demo"}
    topic = ChannelledTopic("orders", Job, channel_count=1)
    with tempfile.TemporaryDirectory() as data, Store(data, **kw):
        first = DurableSubscriber(topic, "billing", kind=DurableKind.EXCLUSIVE, window=1, **kw)
        with ChannelPublisher(topic, **kw) as pub:
            for seq in range(6):
                pub.publish(Job(seq, seq, f"order {seq}"))
            pub.flush()
        for _ in range(3):
            e = first.receive(timeout=10)
            e.ack()
            print(f"billing read order {e.value.seq} and acknowledged it")
        try:
            DurableSubscriber(topic, "billing", kind=DurableKind.EXCLUSIVE, **kw)
        except PreconditionNotMetError as exc:
            print(f"a second subscriber is refused: {type(exc).__name__}")
        first.close()
        with DurableSubscriber(topic, "billing", kind=DurableKind.EXCLUSIVE, **kw) as again:
            e = again.receive(timeout=10)
            print(f"a new subscriber resumes at order {e.value.seq}")

        old = DurableSubscriber(topic, "audit", kind=DurableKind.STANDARD, **kw)
        new = DurableSubscriber(topic, "audit", kind=DurableKind.STANDARD, **kw)
        try:
            while True:
                old.receive(timeout=10)
        except AlreadyClosedError:
            print("standard durable: the second subscriber took over, the first was closed")
        print(f"the new one reads order {new.receive(timeout=10).value.seq}")
        new.close()
        old.close()


if __name__ == "__main__":
    main()
