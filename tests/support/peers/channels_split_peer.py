"""Peer for split-store tests: a paced publisher or a group member that survives store outages.

Usage:
  channels_split_peer.py publish DOMAIN NAMESPACE TOPIC CHANNELS C1,C2,.. PER_CHANNEL RATE
  channels_split_peer.py member DOMAIN NAMESPACE TOPIC CHANNELS GROUP TIMEOUT_S BATCH

``publish`` runs one thread and one fixed-channel publisher per listed
channel (a store that is down then stalls only its own channels), publishes
PER_CHANNEL elements per channel (0: until a line arrives on stdin) at RATE
per second with ``seq = channel * 1_000_000 + k``, prints ``ready`` once
connected, ``confirmed C O SEQ`` or ``failed C SEQ`` per element, and
``done`` when every future has completed.

``member`` prints ``ready`` once joined, ``got C O SEQ`` per received element,
``committed C O`` per successful commit and ``commit-failed`` when the store
did not answer; it runs until killed.
"""

import contextlib
import itertools
import sys
import threading
import time
from datetime import timedelta

from channels_types import Msg

from dcps import DcpsError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, OrderBy

_print_lock = threading.Lock()


def say(*words: object) -> None:
    with _print_lock:
        print(*words, flush=True)


def publish(
    domain: str, namespace: str, topic: str, channels: str, which: str, per_channel: str, rate: str
) -> None:
    t = ChannelledTopic(topic, Msg, channel_count=int(channels), retain_consumed=True)
    pubs = {
        c: ChannelPublisher(
            t,
            domain_id=int(domain),
            namespace=namespace,
            order_by=OrderBy.fixed(c),
            timeout=timedelta(seconds=2),
            linger=timedelta(milliseconds=1),
        )
        for c in (int(x) for x in which.split(","))
    }
    say("ready")
    pending: list[threading.Event] = []
    stop = threading.Event()
    if int(per_channel) == 0:
        threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()

    def run(c: int, pub: ChannelPublisher[Msg]) -> None:
        for k in itertools.count() if int(per_channel) == 0 else range(int(per_channel)):
            if stop.is_set():
                break
            seq = c * 1_000_000 + k
            done = threading.Event()
            pending.append(done)
            try:
                fut = pub.publish(Msg(c, seq))
            except DcpsError:
                say("failed", c, seq)
                done.set()
            else:

                def report(f, c=c, seq=seq, done=done):  # type: ignore[no-untyped-def]
                    if f.exception() is None:
                        say("confirmed", c, f.result().offset, seq)
                    else:
                        say("failed", c, seq)
                    done.set()

                fut.add_done_callback(report)
            time.sleep(1.0 / float(rate))  # pacing the producer, not waiting for anything

    threads = [threading.Thread(target=run, args=item) for item in pubs.items()]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    for pub in pubs.values():
        with contextlib.suppress(DcpsError):
            pub.flush(timedelta(seconds=5))
    for done in pending:
        done.wait(10)
    say("done")
    for pub in pubs.values():
        with contextlib.suppress(DcpsError):
            pub.close()


def member(
    domain: str, namespace: str, topic: str, channels: str, group: str, timeout: str, batch: str
) -> None:
    sub: ChannelSubscriber[Msg] = ChannelSubscriber(
        ChannelledTopic(topic, Msg, channel_count=int(channels), retain_consumed=True),
        group=group,
        domain_id=int(domain),
        namespace=namespace,
        timeout=timedelta(seconds=float(timeout)),
        request_timeout=timedelta(seconds=3),
    )
    say("ready")
    while True:
        elements = sub.receive(int(batch)).result()
        last = {}
        for e in elements:
            say("got", e.channel, e.position.offset, e.value.seq)
            last[e.channel] = e.position
        try:
            results = sub.commit(last)
        except DcpsError:
            say("commit-failed")
            continue
        for c, result in results.items():
            if result.is_success:
                say("committed", c, result.position.offset)


if __name__ == "__main__":
    {"publish": publish, "member": member}[sys.argv[1]](*sys.argv[2:])
