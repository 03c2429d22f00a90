"""Peer: publish spark_types.Reading samples to a channelled topic, confirmed.

Usage: spark_publisher.py DOMAIN NAMESPACE TOPIC CHANNELS FIRST COUNT
Reading i: sensor = i % 7, seq = i, value = i / 4. Prints ``published N``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from spark_types import Reading

from dcps.channels import ChannelledTopic, ChannelPublisher


def main() -> None:
    """Publish the requested readings and wait for every confirmation."""
    domain, namespace, topic, channels, first, count = sys.argv[1:7]
    t = ChannelledTopic(topic, Reading, channel_count=int(channels), retain_consumed=True)
    with ChannelPublisher(t, domain_id=int(domain), namespace=namespace) as pub:
        futures = [
            pub.publish(Reading(sensor=i % 7, seq=i, value=i / 4))
            for i in range(int(first), int(first) + int(count))
        ]
        pub.flush()
        for f in futures:
            f.result(30)
    print(f"published {count}", flush=True)


if __name__ == "__main__":
    main()
