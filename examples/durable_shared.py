"""A shared durable: three workers split the jobs in windows, one rolls back, none is lost.

    python -m examples.durable_shared --domain 0

Runs an embedded store in a temporary directory, publishes 30 jobs, and lets
three subscribers of one shared durable (window 4 each) process them; worker
``w1`` rolls back every job it sees first, so those come again (to any worker)
with a redelivery count. Prints who did what, and the outstanding count.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
from collections import Counter

from dcps import DcpsTimeoutError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableElement, DurableKind, DurableSubscriber
from dcps.store import Store
from examples.jobs import Job

JOBS = 30


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    args = parser.parse_args(argv)
    kw = {"domain_id": args.domain, "namespace": "durable_shared_demo"}
    topic = ChannelledTopic("jobs", Job, channel_count=1)
    with tempfile.TemporaryDirectory() as data, Store(data, **kw):
        workers = [
            DurableSubscriber(topic, "jobs", kind=DurableKind.SHARED, window=4, **kw)
            for _ in range(3)
        ]
        done: Counter[str] = Counter()
        lock = threading.Lock()
        processed: set[int] = set()

        def work(name: str, sub: DurableSubscriber[Job]) -> None:
            while True:
                try:
                    e: DurableElement[Job] = sub.receive(timeout=2.0)
                except DcpsTimeoutError:
                    return
                if name == "w1" and e.redelivery_count == 0:
                    e.rollback()  # w1 gives its first look back: someone does it again
                    continue
                e.ack()
                with lock:
                    done[name] += 1
                    processed.add(e.value.seq)
                    if e.redelivered:
                        print(f"{name} did job {e.value.seq} (redelivered {e.redelivery_count}x)")

        threads = [threading.Thread(target=work, args=(f"w{i}", s)) for i, s in enumerate(workers)]
        for t in threads:
            t.start()
        with ChannelPublisher(topic, **kw) as pub:
            for seq in range(JOBS):
                pub.publish(Job(seq, seq, f"job {seq}"))
            pub.flush()
        for t in threads:
            t.join()
        print(f"processed {len(processed)} of {JOBS} jobs: {dict(sorted(done.items()))}")
        print(f"outstanding: {workers[0].info().outstanding}")
        for sub in workers:
            sub.close()


if __name__ == "__main__":
    main()
