"""A last-value durable (FTL "lastvalue"): a late subscriber starts from the newest price.

    python -m examples.durable_last_value --domain 0

A last-value durable created on ``prices.ACME`` keeps the last element of each
sibling topic (``prices.INIT``, ...), so a subscriber that starts late on
``prices.INIT`` gets its last price at once, then every update.
"""

from __future__ import annotations

import argparse
import tempfile

from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableKind, DurableSubscriber
from dcps.store import Store
from examples.jobs import Job


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    args = parser.parse_args(argv)
    kw = {"domain_id": args.domain, "namespace": "durable_last_value_demo"}
    acme = ChannelledTopic("prices.ACME", Job, channel_count=1)
    init = ChannelledTopic("prices.INIT", Job, channel_count=1)
    with tempfile.TemporaryDirectory() as data, Store(data, **kw):
        keeper = DurableSubscriber(acme, "ticker", kind=DurableKind.LAST_VALUE, **kw)
        with ChannelPublisher(init, **kw) as pub:
            for price in (100, 101, 102):
                pub.publish(Job(1, price, "INIT"))
            pub.flush()
            with DurableSubscriber(init, "ticker", kind=DurableKind.LAST_VALUE, **kw) as late:
                print(f"late subscriber starts at INIT {late.receive(timeout=10).value.seq}")
                pub.publish(Job(1, 103, "INIT"))
                pub.flush()
                print(f"then gets the update INIT {late.receive(timeout=10).value.seq}")
        keeper.close()


if __name__ == "__main__":
    main()
