"""A serial durable: two subscribers, only one holds unacknowledged jobs at a time.

    python -m examples.durable_serial --domain 0

With window 1, a rolled-back job comes back before anything newer, so the
jobs are processed in publish order whichever subscriber gets them.
"""

from __future__ import annotations

import argparse
import tempfile

from dcps import DcpsTimeoutError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableElement, DurableKind, DurableSubscriber
from dcps.store import Store
from examples.jobs import Job


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    args = parser.parse_args(argv)
    kw = {"domain_id": args.domain, "namespace": "durable_serial_demo"}
    topic = ChannelledTopic("steps", Job, channel_count=1)
    with tempfile.TemporaryDirectory() as data, Store(data, **kw):
        subs = {
            name: DurableSubscriber(topic, "steps", kind=DurableKind.SERIAL, window=1, **kw)
            for name in ("s1", "s2")
        }
        with ChannelPublisher(topic, **kw) as pub:
            for seq in range(6):
                pub.publish(Job(seq, seq, f"step {seq}"))
            pub.flush()
        order: list[int] = []
        rolled_back = False
        while len(order) < 6:
            for name, sub in subs.items():
                try:
                    e: DurableElement[Job] = sub.receive(timeout=0.2)
                except DcpsTimeoutError:
                    continue
                if e.value.seq == 3 and not rolled_back:
                    rolled_back = True
                    print(f"{name} rolls back step 3")
                    e.rollback()
                    continue
                print(f"{name} did step {e.value.seq} (redelivered {e.redelivery_count}x)")
                order.append(e.value.seq)
                e.ack()
        print(f"order: {order}")
        for sub in subs.values():
            sub.close()


if __name__ == "__main__":
    main()
