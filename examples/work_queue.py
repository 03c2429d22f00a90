"""Work queue demo: jobs stored before any worker exists, divided among worker processes.

A store is embedded in this process. Jobs are published to the queue
``work`` first (confirm mode: each is on disk when publish returns); then
three worker processes share them, acknowledging each job once done. One
worker takes jobs and is killed with SIGKILL before acknowledging them:
after its timeout the store redelivers them to the others. At the end an
administrator deletes the queue, discarding what is still pending.

    python -m examples.work_queue
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

from dcps.durables._queue import QueuePublisher, QueueSubscriber, delete_queue
from dcps.store import Store, SyncMode
from examples.jobs import Job

JOBS = 30


def work(domain: int, namespace: str, hold: int) -> None:
    """A worker: acknowledge every job received (or, with ``hold``, take that many and hang)."""
    with QueueSubscriber("work", Job, domain_id=domain, namespace=namespace, timeout=1.0) as sub:
        if hold:
            held: list[int] = []
            while len(held) < hold:
                held += [e.value.seq for e in sub.receive(hold - len(held), timeout=10)]
            print("holding " + " ".join(map(str, held)), flush=True)
            threading.Event().wait()  # "crashes" here: killed with SIGKILL
        print("ready", flush=True)
        sys.stdin.readline()  # start together with the other workers
        while True:
            for element in sub.receive(1, timeout=10):
                time.sleep(0.02)  # the work itself
                sub.ack(element)
                print(f"done {element.value.seq} {element.delivery_count}", flush=True)


class Worker:
    """A worker process and the lines it printed."""

    def __init__(self, domain: int, namespace: str, hold: int = 0) -> None:
        self.lines: list[str] = []
        self.changed = threading.Condition()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "examples.work_queue", "--domain", str(domain),
             "--namespace", namespace, "--worker", "--hold", str(hold)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self.changed:
                self.lines.append(line.strip())
                self.changed.notify_all()

    def wait_for(self, probe: object, timeout: float = 60) -> None:
        """Wait until ``probe()`` is true of this worker's lines."""
        with self.changed:
            if not self.changed.wait_for(lambda: probe(self.lines), timeout):  # type: ignore[operator]
                raise TimeoutError("the worker did not get there in time")

    def go(self) -> None:
        """Let the worker start receiving."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()

    def stop(self, sig: int = signal.SIGTERM) -> None:
        self.process.send_signal(sig)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


def main(argv: list[str] | None = None) -> None:
    """Run the demo (or, with --worker, one worker)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--namespace", default="")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hold", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        work(args.domain, args.namespace, args.hold)
        return
    namespace = f"wq_{uuid.uuid4().hex[:8]}"
    where = {"domain_id": args.domain, "namespace": namespace}
    with (
        tempfile.TemporaryDirectory() as data,
        Store(data, sync=SyncMode.NORMAL, **where),
        QueuePublisher("work", Job, **where) as publisher,
    ):
        for seq in range(1, JOBS + 1):
            publisher.publish(Job(seq % 5, seq, f"job {seq}"))
        print(f"published {JOBS} jobs before any worker existed")
        doomed = Worker(args.domain, namespace, hold=5)
        doomed.wait_for(lambda lines: any(x.startswith("holding") for x in lines))
        held = doomed.lines[0].split()[1:]
        print(f"a worker took jobs {' '.join(held)} and is killed with SIGKILL")
        doomed.stop(signal.SIGKILL)
        workers = [Worker(args.domain, namespace) for _ in range(2)]
        for w in workers:
            w.wait_for(lambda lines: "ready" in lines)
        for w in workers:
            w.go()

        def done_lines() -> list[list[str]]:
            return [x.split() for w in workers for x in w.lines if x.startswith("done")]

        for w in workers:
            w.wait_for(lambda _: len({d[1] for d in done_lines()}) >= JOBS)
        done = Counter(int(d[1]) for d in done_lines())
        redelivered = sorted(int(d[1]) for d in done_lines() if d[2] != "1")
        for w in workers:
            w.stop()
        shares = [sum(x.startswith("done") for x in w.lines) for w in workers]
        print(f"the two other workers did {' and '.join(map(str, shares))} jobs")
        print(f"redelivered after the kill: {' '.join(map(str, redelivered))}")
        lost = JOBS - len(done)
        print(f"tally: published {JOBS}, processed {len(done)}, lost {lost}")
        publisher.publish_many([Job(0, n, "never done") for n in range(3)])
        discarded = delete_queue("work", **where)
        print(f"admin deleted the queue: {discarded} pending jobs discarded")


if __name__ == "__main__":
    main()
