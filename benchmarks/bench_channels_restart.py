"""Store request/reply under stress: publishing right after a store restart, commit bursts.

``python -m benchmarks.bench_channels_restart [--runs 3] [--domain 42]``

Scenario ``restart``: a store process, a running confirmed publisher (1 KiB
samples); the store is killed with SIGKILL and restarted on its data dir,
then the publisher publishes ``--publishes`` samples at once: prints the time
until every one is confirmed and how many failed. Scenario ``burst``: a group
member commits each of ``--commits`` received elements with ``commit_async``
in a tight loop: prints the time until every result is in and how many
failed. Medians over ``--runs`` runs. There is no raw-binding ratio: the raw
binding has no store to restart or commit to.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from peers.channels_types import Msg  # noqa: E402

from benchmarks._store_process import StoreProcess  # noqa: E402
from dcps.channels import (  # noqa: E402
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    OrderBy,
)


def wait_all(futures: list) -> int:  # type: ignore[type-arg]
    """Wait for every future; return how many failed."""
    failed = 0
    for f in futures:
        try:
            f.result(60)
        except Exception:
            failed += 1
    return failed


def run_restart(domain: int, publishes: int) -> tuple[float, int]:
    """Seconds until ``publishes`` confirmations after a kill -9 and restart; failures."""
    namespace = "bench_" + os.urandom(4).hex()
    data = tempfile.mkdtemp(prefix="dcps-restart-")
    store = StoreProcess(domain, namespace, data)
    topic = ChannelledTopic("t", Msg, channel_count=1)
    kw = {"domain_id": domain, "namespace": namespace}
    pub: ChannelPublisher[Msg] = ChannelPublisher(topic, batch_count=64, **kw)  # type: ignore[arg-type]
    try:
        pub.publish(Msg(0, 0)).result(10)
        store.kill()
        store = StoreProcess(domain, namespace, data)
        start = time.monotonic()
        futures = [pub.publish(Msg(0, i, "x" * 1024)) for i in range(publishes)]
        failed = wait_all(futures)
        return time.monotonic() - start, failed
    finally:
        pub.close()
        store.kill()


def run_burst(domain: int, commits: int) -> tuple[float, int]:
    """Seconds until ``commits`` commit_async results are in; failures."""
    namespace = "bench_" + os.urandom(4).hex()
    store = StoreProcess(domain, namespace)
    topic = ChannelledTopic("t", Msg, channel_count=1, retain_consumed=True)
    kw = {"domain_id": domain, "namespace": namespace}
    pub: ChannelPublisher[Msg] = ChannelPublisher(topic, order_by=OrderBy.fixed(0), **kw)  # type: ignore[arg-type]
    sub: ChannelSubscriber[Msg] = ChannelSubscriber(topic, group="g", **kw)  # type: ignore[arg-type]
    try:
        for i in range(commits):
            pub.publish(Msg(0, i))
        pub.flush()
        got: list = []  # type: ignore[type-arg]
        while len(got) < commits:
            got += sub.receive(commits).result(30)
        start = time.monotonic()
        failed = wait_all([e.commit_async() for e in got])
        return time.monotonic() - start, failed
    finally:
        sub.close()
        pub.close()
        store.kill()


def main() -> None:
    """Run both scenarios ``--runs`` times and print medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--domain", type=int, default=42)
    parser.add_argument("--publishes", type=int, default=600)
    parser.add_argument("--commits", type=int, default=5000)
    args = parser.parse_args()
    for name, run, n in (
        ("restart", run_restart, args.publishes),
        ("burst", run_burst, args.commits),
    ):
        results = [run(args.domain, n) for _ in range(args.runs)]
        seconds = [r[0] for r in results]
        failed = [r[1] for r in results]
        print(
            f"{name:8} n={n:<5} median {statistics.median(seconds):6.2f} s "
            f"(runs: {', '.join(f'{s:.2f}' for s in seconds)})  "
            f"failed per run: {failed}",
            flush=True,
        )


if __name__ == "__main__":
    main()
