"""Channelled topics through one store vs 2 and 3 store processes splitting the channels.

Run: ``python -m benchmarks.bench_split [--quick] [--runs N]``. Traffic stays on
loopback. Each configuration runs its store processes (``--share I/N``,
synchronous=NORMAL) in its own namespace for the whole run; the
configurations and the raw-DDS baseline (one DDS sample per message, same
64-byte payload) are measured alternately in each round, so they see the
same machine state, and the medians over rounds are printed with their
ratio to raw and to the single store.

What to expect: per-element CDR in Python at the publisher and the
subscriber (both in this process) dominates, not the store, so splitting
the store pays off only where the store's disk or CPU is the limit (several
hosts, or many publishers); on one small machine it mostly adds processes.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import uuid

from benchmarks.bench_channels import channel_throughput, raw_throughput

QUICK_ARGS = ["--quick"]


class Stores:
    """``count`` store processes sharing one namespace's channels."""

    def __init__(self, domain: int, namespace: str, count: int) -> None:
        self.namespace = namespace
        self.dirs = [tempfile.TemporaryDirectory(prefix="dcps-bench-split-") for _ in range(count)]
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-m", "dcps.store", "--data", d.name,
                 "--domain", str(domain), "--namespace", namespace,
                 "--share", f"{i}/{count}", "--sync", "NORMAL"],
                stdout=subprocess.PIPE, text=True,
            )
            for i, d in enumerate(self.dirs)
        ]  # fmt: skip
        for proc in self.procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if not line.startswith("dcps store ready"):
                raise RuntimeError(f"store did not start: {line!r}")

    def close(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            proc.wait(30)
            if proc.stdout:
                proc.stdout.close()
        for d in self.dirs:
            d.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "42"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer messages and rounds")
    parser.add_argument("--runs", type=int, default=3, help="rounds (medians are printed)")
    parser.add_argument("--count", type=int, default=20_000, help="messages per measurement")
    args = parser.parse_args()
    runs, count = (1, 2_000) if args.quick else (args.runs, args.count)
    configs = (1, 2, 3)
    stores = {n: Stores(args.domain, f"bsplit{n}_{uuid.uuid4().hex[:6]}", n) for n in configs}
    results: dict[str, list[float]] = {"raw": []}
    try:
        for _ in range(runs):
            results["raw"].append(raw_throughput(args.domain, 64, count))
            for n, group in stores.items():
                for members in (0, 2):
                    key = f"{n} store{'s' if n > 1 else ''}, " + (
                        "anonymous" if not members else f"{members}-member group"
                    )
                    rate = channel_throughput(
                        args.domain,
                        group.namespace,
                        64,
                        count,
                        confirmed=True,
                        members=members,
                    )
                    results.setdefault(key, []).append(rate)
    finally:
        for group in stores.values():
            group.close()
    raw = statistics.median(results["raw"])
    print(f"64-byte messages, confirmed publisher, 17 channels, {count} per run, {runs} run(s)")
    print(f"{'case':<36}{'msgs/s (median)':>16}{'vs raw':>9}{'vs 1 store':>12}")
    print(f"{'raw cyclonedds':<36}{raw:>16,.0f}{1.0:>9.2f}{'':>12}")
    for key, rates in results.items():
        if key == "raw":
            continue
        base = statistics.median(results[key.replace(key.split(",")[0], "1 store")])
        rate = statistics.median(rates)
        print(f"{key:<36}{rate:>16,.0f}{rate / raw:>9.2f}{rate / base:>12.2f}")


if __name__ == "__main__":
    main()
