"""Channelled topic demo: three workers in a subscriber group on an embedded store.

A publisher sends jobs through a store embedded in this process; three worker
processes share the topic's channels. Half-way, one worker is killed with
SIGKILL: after its heartbeat timeout its channels move to the others, which
resume from its last commit. The tally at the end counts what was published
(confirmed by the store), processed, processed twice (at-least-once across the
rebalance) and lost, which must be 0.

    python -m examples.channels_demo
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter

if not any(name.startswith("DCPS_") for name in os.environ):  # stay on loopback
    os.environ["DCPS_INTERFACES"] = "lo"
    os.environ["DCPS_MULTICAST_INTERFACES"] = "lo"

from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.store import Store
from examples.jobs import Job


class Worker:
    """A worker process and what it reported."""

    def __init__(self, name: str, domain: int, namespace: str, timeout: float) -> None:
        self.name = name
        self.done: list[int] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "examples.channel_worker",
                "--domain",
                str(domain),
                "--namespace",
                namespace,
                "--timeout",
                str(timeout),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("done "):
                self.done.append(int(line.split()[1]))
            elif line.startswith("ready"):
                self.ready.set()
            elif line.startswith("owns "):
                print(f"  {self.name} {line.strip()}", flush=True)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            self.process.wait()


def _processed(workers: list[Worker]) -> Counter[int]:
    return Counter(seq for w in workers for seq in list(w.done))


def _wait_for(predicate: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def main(argv: list[str] | None = None) -> dict[str, int]:
    """Run the demo; return the tally."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=43)
    parser.add_argument("--jobs", type=int, default=600)
    args = parser.parse_args(argv)
    namespace = f"demo-{uuid.uuid4().hex[:6]}"
    with tempfile.TemporaryDirectory(prefix="dcps-demo-store-") as data:
        topic = ChannelledTopic("demo/jobs", Job, channel_count=6)
        with Store(data, domain_id=args.domain, namespace=namespace, topics=[topic]):
            print("4. Channels: a store (embedded), 3 workers in group 'workers', 6 channels.")
            workers = [Worker(f"worker-{i}", args.domain, namespace, 1.5) for i in (1, 2, 3)]
            try:
                for w in workers:
                    if not w.ready.wait(30):
                        raise TimeoutError(f"{w.name} did not start")
                half = args.jobs // 2
                with ChannelPublisher(topic, domain_id=args.domain, namespace=namespace) as pub:
                    confirmed = [
                        pub.publish(Job(seq % 24, seq, f"job {seq}")) for seq in range(half)
                    ]
                    pub.flush()
                    for future in confirmed:
                        future.result(30)
                    _wait_for(lambda: len(_processed(workers)) >= half // 2, 60, "work to start")
                    victim = workers[1]
                    print(
                        f"   kill -9 {victim.name} mid-run; "
                        "its channels move after its 1.5 s timeout"
                    )
                    victim.kill()
                    more = [
                        pub.publish(Job(seq % 24, seq, f"job {seq}"))
                        for seq in range(half, args.jobs)
                    ]
                    pub.flush()
                    for future in more:
                        future.result(30)
                published = len(confirmed) + len(more)
                _wait_for(
                    lambda: set(_processed(workers)) >= set(range(args.jobs)),
                    90,
                    "every job processed",
                )
            finally:
                for w in workers:
                    w.stop()
    processed = _processed(workers)
    tally = {
        "published": published,
        "processed": len(processed),
        "redelivered": sum(n - 1 for n in processed.values()),
        "lost": len(set(range(args.jobs)) - set(processed)),
    }
    print("   tally: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    return tally


if __name__ == "__main__":
    main()
