"""A subscriber-group member: receives jobs, processes them, commits.

    python -m examples.channel_worker --domain 0 --group workers --name w1

Prints ``owns [channels]`` when its channels change and ``done SEQ`` for each
processed job; commits after every batch, so a replacement resumes from there.
"""

from __future__ import annotations

import argparse
from datetime import timedelta
from typing import Any

from dcps.channels import ChannelledTopic, ChannelOwnershipListener, ChannelSubscriber
from examples.jobs import Job


class PrintOwnership(ChannelOwnershipListener):
    """Print every change of this member's channels."""

    def on_channels_assigned(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        print(f"owns {sorted(subscriber.channels)} (+{sorted(channels)})", flush=True)

    def on_channels_revoked(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        print(f"owns {sorted(subscriber.channels)} (-{sorted(channels)})", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Process jobs until killed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--namespace", default="dcps")
    parser.add_argument("--topic", default="demo/jobs")
    parser.add_argument("--group", default="workers")
    parser.add_argument(
        "--timeout", type=float, default=2.0, help="seconds of silence before losing channels"
    )
    args = parser.parse_args(argv)
    topic = ChannelledTopic(args.topic, Job)
    with ChannelSubscriber(
        topic,
        group=args.group,
        domain_id=args.domain,
        namespace=args.namespace,
        timeout=timedelta(seconds=args.timeout),
        listeners=[PrintOwnership()],
    ) as worker:
        print("ready", flush=True)
        while True:
            batch = worker.receive(50).result()
            last = {}
            for element in batch:
                print(f"done {element.value.seq}", flush=True)
                last[element.channel] = element.position
            if last:
                worker.commit(last)


if __name__ == "__main__":
    main()
