"""The cost of authentication: 64 B channel throughput with and without a namespace key.

Run: ``python -m benchmarks.bench_auth [--quick] [--runs N] [--count N]``.

Two store processes (``python -m dcps.store``, synchronous=NORMAL) run side by
side on loopback, one in a namespace with a key (``DCPS_STORE_KEY_FILE``) and
one without; the cases alternate in every run (one publisher, confirmed, to an
anonymous subscriber, 17 channels; the scenario of ``bench_channels.py``,
checked for loss). Printed: the median msgs/s of each, the CPU us per message
of this process and of the store, and the ratio keyed/plain (target >= 0.9).
"""

import argparse
import os
import statistics
import tempfile
import uuid
from pathlib import Path

from benchmarks._store_process import StoreProcess
from benchmarks.bench_channels import channel_throughput
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file


def _with_key(key_file: str | None) -> None:
    """Make the processes started next, and the clients made next, use ``key_file`` (or none)."""
    if key_file is None:
        os.environ.pop(KEY_FILE_ENV, None)
    else:
        os.environ[KEY_FILE_ENV] = key_file


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "43"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer messages")
    parser.add_argument("--runs", type=int, default=3, help="runs per case (median; >= 3)")
    parser.add_argument("--count", type=int, help="messages per run (default 200,000)")
    args = parser.parse_args()
    count = args.count or (50_000 if args.quick else 200_000)
    domain = args.domain
    with tempfile.TemporaryDirectory(prefix="dcps-bench-key-") as tmp:
        key_file = str(write_key_file(Path(tmp) / "ns.key").source)
        cases = {"no key": None, "with key": key_file}
        stores: dict[str, tuple[StoreProcess, str]] = {}
        try:
            for name, key in cases.items():
                _with_key(key)
                namespace = f"bench_auth_{uuid.uuid4().hex[:8]}"
                stores[name] = (StoreProcess(domain, namespace), namespace)
            results: dict[str, list[tuple[float, float, float]]] = {n: [] for n in cases}
            for name, key in cases.items():  # warm-up, not measured
                _with_key(key)
                store, namespace = stores[name]
                channel_throughput(store, domain, namespace, 64, 10_000, confirmed=True, members=0)
            for _ in range(args.runs):
                for name, key in cases.items():
                    _with_key(key)
                    store, namespace = stores[name]
                    results[name].append(
                        channel_throughput(
                            store, domain, namespace, 64, count, confirmed=True, members=0
                        )
                    )
        finally:
            _with_key(None)
            for store, _ in stores.values():
                store.close()
    print(f"64 B, confirmed, anonymous subscriber, {count:,} msgs; median of {args.runs} runs")
    print(f"{'case':<12}{'msgs/s':>12}{'cpu us/msg':>12}{'store':>8}   runs (msgs/s)")
    medians = {}
    for name, values in results.items():
        rate = medians[name] = statistics.median(r for r, _, _ in values)
        cpu = statistics.median(c for _, c, _ in values)
        store_cpu = statistics.median(s for _, _, s in values)
        runs = ", ".join(f"{r:,.0f}" for r, _, _ in values)
        print(f"{name:<12}{rate:>12,.0f}{cpu:>12.1f}{store_cpu:>8.1f}   {runs}")
    ratio = medians["with key"] / medians["no key"]
    print(f"with key / no key: {ratio:.2f}x (target >= 0.90)")


if __name__ == "__main__":
    main()
