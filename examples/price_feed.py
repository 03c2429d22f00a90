"""A JMS-style price feed: a durable subscriber with a selector is killed and resumes.

    python -m examples.price_feed --domain 0

A store runs in this process. A child process (this module with
``--watcher``) connects as client ``desk-7``, subscribes durably as
``acme-watch`` with the selector ``symbol = 'ACME' AND price > 100`` in
client-acknowledgement mode, acknowledges the first two quotes it gets and
is then killed with SIGKILL while holding the others. The feed publishes
more quotes; a new connection with the same client id resumes the
subscription: the quotes the watcher held come again (redelivered), then
those published while nobody was connected (one may also show as
redelivered: it reached the dead watcher before the store noticed its
death), and never a quote the selector rejects.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import timedelta

import idl
from dcps import PreconditionNotMetError
from dcps.jms import AcknowledgeMode, Connection, TopicSubscriber
from dcps.store import Store

NAMESPACE = "price_feed_demo"
SELECTOR = "symbol = 'ACME' AND price > 100"


class Quote(idl.Struct, typename="demo::Quote"):
    """A price quote: its members are what selectors test."""

    symbol: idl.bounded_str[8]
    price: idl.float64
    seq: idl.int64


def watcher(domain: int) -> None:
    """The child: subscribe durably, acknowledge two quotes, hold the rest until killed."""
    with Connection(
        "desk-7",
        domain_id=domain,
        namespace=NAMESPACE,
        channel_count=1,
        consumer_timeout=timedelta(seconds=1),
    ) as connection:
        connection.start()
        session = connection.create_topic_session(AcknowledgeMode.CLIENT)
        topic = session.create_topic("quotes", Quote)
        sub = session.create_durable_subscriber(topic, "acme-watch", SELECTOR)
        print("subscribed", flush=True)
        for count in range(1, 5):
            message = sub.receive(timeout=30)
            assert message is not None
            print(f"watcher got quote {message.body.seq} at {message.body.price:.0f}", flush=True)
            if count == 2:
                message.acknowledge()
                print("watcher acknowledged", flush=True)
        print("holding", flush=True)
        sys.stdin.readline()  # until killed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--watcher", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.watcher:
        watcher(args.domain)
        return
    kw = {"domain_id": args.domain, "namespace": NAMESPACE, "channel_count": 1}
    with (
        tempfile.TemporaryDirectory() as data,
        Store(data, domain_id=args.domain, namespace=NAMESPACE),
    ):
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "examples.price_feed",
                "--domain",
                str(args.domain),
                "--watcher",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "subscribed"
        with Connection(**kw) as feed:
            session = feed.create_topic_session()
            pub = session.create_publisher(session.create_topic("quotes", Quote))
            prices = [(s, p) for p in (90, 101, 120, 99, 130, 140) for s in ("ACME", "INIT")]
            for seq, (symbol, price) in enumerate(prices):
                pub.publish(Quote(symbol, float(price), seq))
            for line in iter(child.stdout.readline, ""):
                print(line.rstrip())
                if line.strip() == "holding":
                    break
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            print("watcher killed with SIGKILL")
            for seq, price in enumerate((150, 80, 160), start=len(prices)):
                pub.publish(Quote("ACME", float(price), seq))
        with Connection("desk-7", consumer_timeout=timedelta(seconds=2), **kw) as desk:
            desk.start()
            session = desk.create_topic_session(AcknowledgeMode.CLIENT)
            topic = session.create_topic("quotes", Quote)
            sub: TopicSubscriber[Quote] | None = None
            while sub is None:  # the store frees the subscription once the dead watcher times out
                try:
                    sub = session.create_durable_subscriber(topic, "acme-watch", SELECTOR)
                except PreconditionNotMetError:
                    time.sleep(0.2)  # retry: nothing to wait on in this process
            while (message := sub.receive(timeout=2)) is not None:
                again = " (redelivered)" if message.redelivered else ""
                print(f"resumed: quote {message.body.seq} at {message.body.price:.0f}{again}")
            session.acknowledge()
        print("done")


if __name__ == "__main__":
    main()
