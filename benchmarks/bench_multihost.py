"""Throughput of plain and channelled topics: two hosts (network namespaces) vs one host.

Run as root (namespaces need CAP_NET_ADMIN)::

    python -m benchmarks.bench_multihost [--count 20000] [--size 64] [--pings 500]
    python -m benchmarks.bench_multihost --what channels --channel-count 20000

Both cases run the same two processes (a source and a sink on dcps entities, or
on the raw ``cyclonedds`` binding with ``--api raw``; reliable KEEP_ALL, network
set by ``NetworkConfig``): once both on this
host over loopback, once each in its own namespace joined by a veth bridge.
Throughput is what the sink counts from first to last sample of a burst; latency
is the round trip of a ping answered by the sink (one-way is about half).
Without namespace rights only the loopback case runs.

Channelled topics (``--what channels``, also part of the default ``both``) run three
processes of ``tests/peers/channels_host.py``: a store (SQLite synchronous=NORMAL),
a confirmed round-robin publisher and an anonymous subscriber. One host: all three
over loopback. Two hosts: store and publisher on one, the subscriber on the other
(the live tail crosses the LAN). Three hosts: the store alone on one host, as
deployed, so both the publish and the live tail cross it. Throughput is what the
subscriber receives per second, from the publish of the first element of a burst
to the receipt of the last (all processes share the machine's monotonic clock).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import netns

#: Arguments for ``python -m benchmarks --quick`` (a smoke run of a few seconds).
QUICK_ARGS = ["--count", "500", "--pings", "20", "--channel-count", "1000", "--channel-runs", "1"]

CHANNELS_PEER = Path(__file__).resolve().parent.parent / "tests" / "peers" / "channels_host.py"


def _measure(source: Any, sink: Any, count: int, size: int, pings: int) -> dict[str, float]:
    for process in (source, sink):
        process.expect(lambda e: e.get("ev") == "ready", 20, "ready")
    source.expect(
        lambda e: e.get("ev") == "matched" and e["data"] == 1 and e["pong"] == 1, 20, "match"
    )
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
        common = {"domain": domain, "topic": topic, "network": {"interfaces": ["eth0"]}, "api": api}
        sink = b.peer(role="sink", **common)
        source = a.peer(role="source", **common)
        results[f"{api}: two hosts (netns)"] = _measure(source, sink, count, size, pings)
    return results


def _local_channels_peer(config: dict[str, Any], workdir: Path) -> Any:
    """Start ``channels_host.py`` in this namespace (loopback), as a ``netns.PeerProcess``."""
    stderr_path = workdir / f"{config['role']}-{uuid.uuid4().hex[:6]}.stderr"
    env = {k: v for k, v in os.environ.items() if k != "CYCLONEDDS_URI"}
    env["PYTHONUNBUFFERED"] = "1"
    with stderr_path.open("w") as stderr:
        popen = subprocess.Popen(
            [sys.executable, str(CHANNELS_PEER), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=str(CHANNELS_PEER.parent),
        )
    return netns.PeerProcess(popen, stderr_path, f"local {config['role']}")


def _measure_channels(
    store: Any, source: Any, sink: Any, count: int, size: int, runs: int
) -> float:
    """Median elements/s the sink receives from ``runs`` bursts of ``count`` (after a warm-up)."""
    for process in (store, sink, source):
        event = process.expect(lambda e: e.get("ev") in ("ready", "crash"), 30, "ready")
        if event["ev"] == "crash":
            raise RuntimeError(event["error"])
    rates: list[float] = []
    for burst in (min(1000, count), *[count] * runs):  # warm-up, then the measured bursts
        mark, source_mark = sink.mark(), source.mark()
        sink.send(op="expect", count=burst)
        sink.expect(lambda e: e.get("ev") == "expecting", 30, "expecting", since=mark)
        source.send(op="burst", count=burst, size=size)
        start = source.expect(
            lambda e: e.get("ev") == "burst_start", 30, "burst start", since=source_mark
        )
        event = sink.expect(lambda e: e.get("ev") == "throughput", 300, "burst", since=mark)
        # publish of the first element to receipt of the last: the processes share the
        # machine's monotonic clock, namespaces or not
        rates.append(event["count"] / (event["t"] - start["t"]))
    return statistics.median(rates[1:])


def run_channels(count: int, size: int, domain: int, runs: int = 3) -> dict[str, dict[str, float]]:
    """Channelled-topic throughput on one host, two hosts and three hosts (see module doc)."""
    results: dict[str, dict[str, float]] = {}

    def base(case: str) -> dict[str, Any]:
        return {
            "domain": domain,
            "namespace": f"bench_{uuid.uuid4().hex[:8]}",
            "topic": f"bench_{case}",
            "channels": 4,
        }

    with tempfile.TemporaryDirectory(prefix="dcps-bench-") as workdir:
        loopback = {"network": {"interfaces": [{"name": "lo", "multicast": True}]}}
        common = {**base("local"), **loopback}
        processes = [
            _local_channels_peer(
                {"role": "store", "data": f"{workdir}/store", **common}, Path(workdir)
            ),
            _local_channels_peer({"role": "bench_source", **common}, Path(workdir)),
            _local_channels_peer({"role": "bench_sink", **common}, Path(workdir)),
        ]
        try:
            store, source, sink = processes
            rate = _measure_channels(store, source, sink, count, size, runs)
            results["channels: one host (loopback)"] = {"samples/s": rate}
        finally:
            for process in reversed(processes):
                process.close()

    reason = netns.netns_unavailable_reason()
    if reason is not None:
        print(f"channels across hosts: skipped ({reason})", file=sys.stderr)
        return results
    for hosts in (2, 3):
        with netns.lan(hosts) as lan:
            common = {**base(f"{hosts}hosts"), "network": {"interfaces": ["eth0"]}}
            store_host, source_host, sink_host = (
                (lan.hosts[0], lan.hosts[0], lan.hosts[1]) if hosts == 2 else lan.hosts
            )

            def start(host: Any, common: dict[str, Any] = common, **config: Any) -> Any:
                return host.python(str(CHANNELS_PEER), json.dumps({**common, **config}))

            store = start(store_host, role="store", data=str(lan.workdir / "store"))
            sink = start(sink_host, role="bench_sink")
            source = start(source_host, role="bench_source")
            rate = _measure_channels(store, source, sink, count, size, runs)
            label = "two hosts (store+pub | sub)" if hosts == 2 else "three hosts (store|pub|sub)"
            results[f"channels: {label}"] = {"samples/s": rate}
    return results


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point: print a table of the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20000, help="samples in the burst")
    parser.add_argument("--size", type=int, default=64, help="payload bytes per sample")
    parser.add_argument("--pings", type=int, default=500, help="round trips for latency")
    parser.add_argument("--domain", type=int, default=201, help="DDS domain id to use")
    parser.add_argument(
        "--api",
        choices=["dcps", "raw", "both"],
        default="both",
        help="dcps entities, the raw cyclonedds binding, or both",
    )
    parser.add_argument(
        "--what",
        choices=["plain", "channels", "both"],
        default="both",
        help="plain topics, channelled topics (through the store), or both",
    )
    parser.add_argument(
        "--channel-count", type=int, default=20000, help="elements in the channelled-topic burst"
    )
    parser.add_argument(
        "--channel-runs",
        type=int,
        default=3,
        help="measured channelled bursts per case (the median is shown)",
    )
    args = parser.parse_args(argv)
    if args.what in ("plain", "both"):
        results: dict[str, dict[str, float]] = {}
        for api in ["dcps", "raw"] if args.api == "both" else [args.api]:
            results.update(run(args.count, args.size, args.pings, args.domain, api))
        metrics = ["samples/s", "MB/s", "rtt p50 us", "rtt p90 us"]
        print(
            f"plain topic, reliable KEEP_ALL, {args.size}-byte payload, {args.count} samples,"
            f" {args.pings} pings"
        )
        print(f"{'case':28}" + "".join(f"{m:>14}" for m in metrics))
        for case, values in results.items():
            print(f"{case:28}" + "".join(f"{values[m]:>14,.1f}" for m in metrics))
    if args.what in ("channels", "both"):
        channelled = run_channels(args.channel_count, args.size, args.domain, args.channel_runs)
        print(
            f"channelled topic, 4 channels, confirmed round-robin publisher, anonymous"
            f" subscriber, {args.size}-byte text, median of {args.channel_runs} bursts of"
            f" {args.channel_count} elements"
        )
        print(f"{'case':40}{'samples/s':>14}")
        for case, values in channelled.items():
            print(f"{case:40}{values['samples/s']:>14,.1f}")


if __name__ == "__main__":
    main()
