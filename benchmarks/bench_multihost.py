"""Throughput and latency of a plain topic: two hosts (network namespaces) vs one host.

Run as root (namespaces need CAP_NET_ADMIN)::

    python -m benchmarks.bench_multihost [--count 20000] [--size 64] [--pings 500]

Both cases run the same two processes (a source and a sink on dcps entities, or
on the raw ``cyclonedds`` binding with ``--api raw``; reliable KEEP_ALL, network
set by ``NetworkConfig``): once both on this
host over loopback, once each in its own namespace joined by a veth bridge.
Throughput is what the sink counts from first to last sample of a burst; latency
is the round trip of a ping answered by the sink (one-way is about half).
Without namespace rights only the loopback case runs.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import netns

#: Arguments for ``python -m benchmarks --quick`` (a smoke run of a few seconds).
QUICK_ARGS = ["--count", "500", "--pings", "20"]


def _measure(source: Any, sink: Any, count: int, size: int, pings: int) -> dict[str, float]:
    for process in (source, sink):
        process.expect(lambda e: e.get("ev") == "ready", 20, "ready")
    source.expect(lambda e: e.get("ev") == "matched" and e["data"] == 1 and e["pong"] == 1,
                  20, "match")
    # A small warm-up burst, then the measured one.
    source.send(op="burst", count=min(1000, count), size=size)
    sink.expect(lambda e: e.get("ev") == "throughput", 60, "warm-up burst")
    mark = sink.mark()
    source.send(op="burst", count=count, size=size)
    burst = sink.expect(lambda e: e.get("ev") == "throughput", 300, "burst", since=mark)
    source.send(op="ping", count=pings)
    latency = source.expect(lambda e: e.get("ev") in ("latency", "error"), 300, "pings")
    if latency["ev"] == "error":
        raise RuntimeError(latency["text"])
    return {
        "samples/s": burst["count"] / burst["seconds"],
        "MB/s": burst["count"] * (size + 24) / burst["seconds"] / 1e6,
        "rtt p50 us": latency["p50_us"],
        "rtt p90 us": latency["p90_us"],
    }


def run(
    count: int, size: int, pings: int, domain: int, api: str = "dcps"
) -> dict[str, dict[str, float]]:
    """Measure both cases with ``api`` (``dcps`` or ``raw``); returns {case: {metric: value}}."""
    results: dict[str, dict[str, float]] = {}
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory(prefix="dcps-bench-") as workdir:
        loopback = {"interfaces": [{"name": "lo", "multicast": True}]}
        common = {"domain": domain, "topic": topic, "network": loopback, "api": api}
        sink = netns.local_peer({"role": "sink", **common}, Path(workdir))
        source = netns.local_peer({"role": "source", **common}, Path(workdir))
        try:
            results[f"{api}: one host (loopback)"] = _measure(source, sink, count, size, pings)
        finally:
            source.close()
            sink.close()

    reason = netns.netns_unavailable_reason()
    if reason is not None:
        print(f"two hosts: skipped ({reason})", file=sys.stderr)
        return results
    with netns.lan(2) as lan:
        a, b = lan.hosts
        common = {"domain": domain, "topic": topic, "network": {"interfaces": ["eth0"]},
                  "api": api}
        sink = b.peer(role="sink", **common)
        source = a.peer(role="source", **common)
        results[f"{api}: two hosts (netns)"] = _measure(source, sink, count, size, pings)
    return results


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point: print a table of the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000, help="samples in the burst")
    parser.add_argument("--size", type=int, default=64, help="payload bytes per sample")
    parser.add_argument("--pings", type=int, default=500, help="round trips for latency")
    parser.add_argument("--domain", type=int, default=201, help="DDS domain id to use")
    parser.add_argument("--api", choices=["dcps", "raw", "both"], default="both",
                        help="dcps entities, the raw cyclonedds binding, or both")
    args = parser.parse_args(argv)
    results: dict[str, dict[str, float]] = {}
    for api in ["dcps", "raw"] if args.api == "both" else [args.api]:
        results.update(run(args.count, args.size, args.pings, args.domain, api))
    metrics = ["samples/s", "MB/s", "rtt p50 us", "rtt p90 us"]
    print(f"plain topic, reliable KEEP_ALL, {args.size}-byte payload, {args.count} samples,"
          f" {args.pings} pings")
    print(f"{'case':28}" + "".join(f"{m:>14}" for m in metrics))
    for case, values in results.items():
        print(f"{case:28}" + "".join(f"{values[m]:>14,.1f}" for m in metrics))


if __name__ == "__main__":
    main()
