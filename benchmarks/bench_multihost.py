"""Throughput and latency of plain and channelled topics: hosts (network namespaces) vs one host.

Run as root (namespaces need CAP_NET_ADMIN)::

    python -m benchmarks.bench_multihost [--count 20000] [--size 64] [--pings 500] [--repeat 3]
    python -m benchmarks.bench_multihost --what channels --channel-count 20000

Both plain cases run the same two processes (a source and a sink on dcps entities,
or on the raw ``cyclonedds`` binding with ``--api raw``; reliable KEEP_ALL, network
set by ``NetworkConfig``): once both on this host over loopback, once each in its own
namespace joined by a veth bridge. Throughput is what the sink counts from first to
last sample of a burst; latency is the round trip of a ping answered by the sink
(one-way is about half). Without namespace rights only the loopback cases run.

Channelled topics (``--what channels``, also part of the default ``both``) run three
processes of ``tests/support/peers/channels_host.py``: a store (SQLite synchronous=NORMAL),
a confirmed round-robin publisher and an anonymous subscriber. One host: all three
over loopback. Two hosts: store and publisher on one, the subscriber on the other
(the live tail crosses the LAN). Three hosts: the store alone on one host, as
deployed, so both the publish and the live tail cross it. Throughput is what the
subscriber receives per second, from the publish of the first element of a burst
to the receipt of the last. Latency is one-way, publish to receipt, of elements
published at a steady ``--channel-rate`` (1000/s) by a publisher with a 1 ms linger,
each stamped with ``time.time_ns()``: network namespaces share the machine's clocks
(``ip netns`` makes no time namespace), so stamps compare across "hosts". "accept p50"
is the part up to the store's accept timestamp (its ``time.time_ns()``): the rest is
the store's push of the live tail to the subscriber and the subscriber's delivery.

``--repeat N`` runs everything N times in turn and prints the median of each figure,
and the median of each run's ratio to the one-host case of the same run (the machine
is shared, so only figures of the same run compare well). The load average is printed
before and after.
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

from tests.support import netns

#: Arguments for ``python -m benchmarks --quick`` (a smoke run of a few seconds).
QUICK_ARGS = [
    "--count", "500", "--pings", "20", "--channel-count", "1000", "--channel-runs", "1",
    "--channel-pings", "200",
]  # fmt: skip

ONE_HOST_CHANNELS = "channels: one host (loopback)"
CHANNELS_PEER = (
    Path(__file__).resolve().parent.parent / "tests" / "support" / "peers" / "channels_host.py"
)


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
    store: Any, source: Any, sink: Any, count: int, size: int, runs: int, pings: int, rate: float
) -> dict[str, float]:
    """Median elements/s the sink receives from ``runs`` bursts of ``count`` (after a warm-up),
    then one-way latency percentiles of ``pings`` elements paced at ``rate`` per second."""
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
    result = {"samples/s": statistics.median(rates[1:])}
    if pings:
        warmup = max(50, pings // 10)  # the paced publisher is created (and connects) first
        mark = sink.mark()
        sink.send(op="latency", count=warmup + pings, skip=warmup)
        sink.expect(lambda e: e.get("ev") == "expecting", 30, "expecting", since=mark)
        source.send(op="pace", count=warmup + pings, rate=rate, size=max(size, 20))
        timeout = 60 + 2 * (warmup + pings) / rate
        latency = sink.expect(lambda e: e.get("ev") == "latency", timeout, "latency", since=mark)
        result.update({f"{q} us": latency[f"{q}_us"] for q in ("p50", "p90", "p99", "accept_p50")})
    return result


def run_channels(
    count: int,
    size: int,
    domain: int,
    runs: int = 3,
    pings: int = 2000,
    rate: float = 1000.0,
) -> dict[str, dict[str, float]]:
    """Channelled-topic throughput and one-way latency on one, two and three hosts.

    See the module doc; ``pings`` = 0 skips the latency part.
    """
    results: dict[str, dict[str, float]] = {}
    measure = {"count": count, "size": size, "runs": runs, "pings": pings, "rate": rate}

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
            results[ONE_HOST_CHANNELS] = _measure_channels(store, source, sink, **measure)
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
            label = "two hosts (store+pub | sub)" if hosts == 2 else "three hosts (store|pub|sub)"
            results[f"channels: {label}"] = _measure_channels(store, source, sink, **measure)
    return results


def _medians(runs: list[dict[str, dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per case and metric, the median over the runs that have it."""
    cases = list(dict.fromkeys(case for run in runs for case in run))
    return {
        case: {
            metric: statistics.median(run[case][metric] for run in runs if case in run)
            for metric in next(run[case] for run in runs if case in run)
        }
        for case in cases
    }


def _ratios(
    runs: list[dict[str, dict[str, float]]], metric: str, one_host: dict[str, str]
) -> dict[str, float]:
    """Per case, the median over runs of ``metric`` divided by the same run's one-host case.

    ``one_host`` maps each case to the name of its one-host case.
    """
    ratios: dict[str, list[float]] = {}
    for run in runs:
        for case, values in run.items():
            reference = run.get(one_host[case])
            if reference and metric in values and reference.get(metric):
                ratios.setdefault(case, []).append(values[metric] / reference[metric])
    return {case: statistics.median(values) for case, values in ratios.items()}


def _load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


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
    parser.add_argument(
        "--channel-pings",
        type=int,
        default=2000,
        help="stamped elements for the channelled one-way latency (0: skip it)",
    )
    parser.add_argument(
        "--channel-rate",
        type=float,
        default=1000.0,
        help="elements per second for the channelled latency",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run everything this many times; print medians"
    )
    args = parser.parse_args(argv)
    print(f"load average at start: {_load()}", flush=True)
    plain_runs: list[dict[str, dict[str, float]]] = []
    channel_runs: list[dict[str, dict[str, float]]] = []
    for index in range(args.repeat):
        if args.what in ("plain", "both"):
            results: dict[str, dict[str, float]] = {}
            for api in ["dcps", "raw"] if args.api == "both" else [args.api]:
                results.update(run(args.count, args.size, args.pings, args.domain, api))
            plain_runs.append(results)
        if args.what in ("channels", "both"):
            channel_runs.append(
                run_channels(
                    args.channel_count,
                    args.size,
                    args.domain,
                    args.channel_runs,
                    args.channel_pings,
                    args.channel_rate,
                )
            )
        print(f"run {index + 1}/{args.repeat} done, load average {_load()}", flush=True)
    of = f"median of {args.repeat} runs" if args.repeat > 1 else "one run"
    if plain_runs:
        metrics = ["samples/s", "MB/s", "rtt p50 us", "rtt p90 us"]
        print(
            f"plain topic, reliable KEEP_ALL, {args.size}-byte payload, {args.count} samples,"
            f" {args.pings} pings; {of}; x1 = samples/s vs one host, same api, same run"
        )
        print(f"{'case':28}" + "".join(f"{m:>14}" for m in metrics) + f"{'x1':>7}")
        one_host = {case: f"{case.split(':')[0]}: one host (loopback)" for case in plain_runs[0]}
        ratios = _ratios(plain_runs, "samples/s", one_host)
        for case, values in _medians(plain_runs).items():
            print(
                f"{case:28}"
                + "".join(f"{values[m]:>14,.1f}" for m in metrics)
                + f"{ratios.get(case, float('nan')):>7.2f}"
            )
    if channel_runs:
        metrics = ["samples/s", "p50 us", "p90 us", "p99 us", "accept_p50 us"]
        metrics = [m for m in metrics if m in channel_runs[0][ONE_HOST_CHANNELS]]
        print(
            f"channelled topic, 4 channels, confirmed round-robin publisher, anonymous"
            f" subscriber, {args.size}-byte text; samples/s: median of {args.channel_runs}"
            f" bursts of {args.channel_count}; one-way latency: {args.channel_pings} elements"
            f" at {args.channel_rate:g}/s, 1 ms linger; {of}; x1 = vs one host, same run"
        )
        print(
            f"{'case':40}" + "".join(f"{m:>14}" for m in metrics) + f"{'x1 rate':>9}{'x1 p50':>8}"
        )
        one_host = {case: ONE_HOST_CHANNELS for case in channel_runs[0]}
        rate_ratios = _ratios(channel_runs, "samples/s", one_host)
        p50_ratios = _ratios(channel_runs, "p50 us", one_host)
        for case, values in _medians(channel_runs).items():
            print(
                f"{case:40}"
                + "".join(f"{values[m]:>14,.1f}" for m in metrics)
                + f"{rate_ratios.get(case, float('nan')):>9.2f}"
                + f"{p50_ratios.get(case, float('nan')):>8.2f}"
            )
    print(f"load average at end: {_load()}")


if __name__ == "__main__":
    main()
