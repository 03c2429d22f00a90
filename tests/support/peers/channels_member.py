"""Peer: a subscriber-group member that prints what it receives and commits.

Usage: channels_member.py DOMAIN NAMESPACE TOPIC CHANNELS GROUP TIMEOUT_S BATCH

Prints ``ready`` once joined, then for each received batch one line
``got C O SEQ`` per element, then ``committed C O`` per channel after the
commit succeeded. Runs until killed.
"""

import sys
from datetime import timedelta

from channels_types import Msg

from dcps.channels import ChannelledTopic, ChannelSubscriber


def main() -> None:
    domain, namespace, topic, channels, group, timeout, batch = sys.argv[1:8]
    sub: ChannelSubscriber[Msg] = ChannelSubscriber(
        ChannelledTopic(topic, Msg, channel_count=int(channels)),
        group=group,
        domain_id=int(domain),
        namespace=namespace,
        timeout=timedelta(seconds=float(timeout)),
    )
    print("ready", flush=True)
    while True:
        elements = sub.receive(int(batch)).result()
        last = {}
        for e in elements:
            print("got", e.channel, e.position.offset, e.value.seq, flush=True)
            last[e.channel] = e.position
        for c, result in sub.commit(last).items():
            if result.is_success:
                print("committed", c, result.position.offset, flush=True)


if __name__ == "__main__":
    main()
