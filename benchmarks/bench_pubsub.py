"""Pub/sub throughput and latency between two processes: dcps next to the raw binding.

Run: ``python -m benchmarks.bench_pubsub [--quick]`` (or ``./dev bench pubsub``).

Four peer processes are started (a writer and a reader process for dcps, the
same for the raw ``cyclonedds`` binding; the raw ones never import dcps) and
driven from this process over their stdin/stdout. Two topic types:

* ``small keyed``: ``struct Small { @key int32 id; int64 seq; int64 stamp; double value; }``
* ``4 KiB keyed``: ``struct Payload { @key int32 id; int64 seq; int64 stamp;
  sequence<octet> payload; }``
  with 4096 payload bytes: a numpy array in dcps, a ``list`` of ints in the raw
  binding (its ``sequence<uint8>`` machine packs ``*value`` with ``struct``:
  list, bytes, bytearray and array.array cost the same within noise, numpy
  arrays are refused, and reads come back as lists, so the pong echoes a list).

Both use reliable KEEP_ALL QoS (max_blocking_time 10 s), 16 instances (``id =
seq % 16``), loopback only (``CYCLONEDDS_URI`` pins Cyclone to ``lo`` unless the
caller set it).

* throughput: the writer writes N samples as fast as it can (a new sample object
  per write), the reader waits on a WaitSet and takes them, checking every
  sequence number arrived exactly once. Rate = N / (reader's time of the last
  sample - writer's time before the first write), on the shared monotonic
  clock. Repeated, dcps and raw interleaved (order alternating); medians.
* latency: ping-pong at a moderate rate (one ping per ``--interval`` ms): the
  writer process writes a ping, the reader process takes it and writes it back
  on a second topic, the writer waits for it; one-way latency = round trip / 2.
  p50 and p99 over all pings of all repetitions.
* CPU: CPU time of the writing and the taking thread per sample (and of both
  threads per ping-pong), which depends far less on machine load than rates.

Ratios are dcps/raw: throughput >= 0.9x and p50 latency <= 1/0.9 = 1.11x are
the targets.
"""

import argparse
import json
import os
import queue
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: Cyclone configuration for the benchmark processes unless CYCLONEDDS_URI is set.
LOOPBACK_URI = (
    '<CycloneDDS><Domain id="any"><General><Interfaces>'
    '<NetworkInterface name="lo" multicast="true"/>'
    "</Interfaces></General></Domain></CycloneDDS>"
)

CASES = ("small", "4k")
CASE_LABELS = {"small": "small keyed", "4k": "4 KiB keyed"}
IMPLS = ("raw", "dcps")
PAYLOAD_BYTES = 4096
INSTANCES = 16
TAKE_MAX = 1000
WAIT_S = 30.0

#: What ``python -m benchmarks --quick`` passes to this benchmark.
QUICK_ARGS = ["--quick"]


# --------------------------------------------------------------------- peers
# Everything below up to the controller runs in the peer processes.


def _payload_array() -> Any:
    import numpy as np

    return np.arange(PAYLOAD_BYTES, dtype=np.uint32).astype(np.uint8)


def _raw_types() -> dict[str, type]:
    """The topic types declared the way a user of the plain binding declares them."""
    from dataclasses import dataclass

    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl import types as t
    from cyclonedds.idl.annotations import key

    @dataclass
    class Small(IdlStruct, typename="bench::Small"):
        id: t.int32
        key("id")
        seq: t.int64
        stamp: t.int64
        value: t.float64

    @dataclass
    class Payload(IdlStruct, typename="bench::Payload"):
        id: t.int32
        key("id")
        seq: t.int64
        stamp: t.int64
        payload: t.sequence[t.uint8]

    return {"small": Small, "4k": Payload}


def _dcps_types() -> dict[str, type]:
    """The same topic types declared with ``idl``."""
    import idl

    class Small(idl.Struct, typename="bench::Small"):
        id: idl.key[idl.int32]
        seq: idl.int64
        stamp: idl.int64
        value: idl.float64

    class Payload(idl.Struct, typename="bench::Payload"):
        id: idl.key[idl.int32]
        seq: idl.int64
        stamp: idl.int64
        payload: idl.sequence[idl.uint8]

    return {"small": Small, "4k": Payload}


class _Endpoint:
    """One case on one side: the writer, the reader and a WaitSet on its unread data."""

    def __init__(
        self, writer: Any, reader: Any, waitset: Any, make: Callable[[int, int], Any], size: int
    ) -> None:
        self.writer = writer
        self.reader = reader
        self.waitset = waitset
        self.make = make
        self.size = size


class _Impl:
    """What differs between the two implementations; the loops in ``_Peer`` are shared
    except for the per-batch hooks, which use each API the way its users do."""

    endpoints: dict[str, _Endpoint]

    def wait(self, ep: _Endpoint, timeout: float) -> bool:
        raise NotImplementedError

    def take_seqs(self, ep: _Endpoint) -> list[int]:
        raise NotImplementedError

    def echo(self, ep: _Endpoint) -> list[int]:
        """Take what arrived and write every sample back; return their sequence numbers."""
        raise NotImplementedError

    def wait_acks(self, ep: _Endpoint) -> None:
        raise NotImplementedError

    def matched(self) -> bool:
        raise NotImplementedError


class _RawImpl(_Impl):
    def __init__(self, domain: int, prefix: str, role: str) -> None:
        from cyclonedds.core import (
            InstanceState,
            Policy,
            Qos,
            ReadCondition,
            SampleState,
            ViewState,
            WaitSet,
        )
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.pub import DataWriter
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic
        from cyclonedds.util import duration

        self._duration = duration
        types = _raw_types()
        payload = _payload_array().tolist()
        self.participant = DomainParticipant(domain)
        qos = Qos(Policy.Reliability.Reliable(duration(seconds=10)), Policy.History.KeepAll)
        mask = SampleState.NotRead | ViewState.Any | InstanceState.Any
        self.endpoints = {}
        for case in CASES:
            cls = types[case]
            data = Topic(self.participant, f"{prefix}_{case}", cls)
            pong = Topic(self.participant, f"{prefix}_{case}_pong", cls)
            out_topic, in_topic = (data, pong) if role == "writer" else (pong, data)
            writer = DataWriter(self.participant, out_topic, qos=qos)
            reader = DataReader(self.participant, in_topic, qos=qos)
            waitset = WaitSet(self.participant)
            waitset.attach(ReadCondition(reader, mask))
            if case == "small":

                def make(seq: int, stamp: int, cls: Any = cls) -> Any:
                    return cls(seq % INSTANCES, seq, stamp, float(seq))
            else:

                def make(seq: int, stamp: int, cls: Any = cls) -> Any:
                    return cls(seq % INSTANCES, seq, stamp, payload)

            size = len(make(0, 0).serialize())
            self.endpoints[case] = _Endpoint(writer, reader, waitset, make, size)

    def wait(self, ep: _Endpoint, timeout: float) -> bool:
        return bool(ep.waitset.wait(self._duration(seconds=timeout)))

    def take_seqs(self, ep: _Endpoint) -> list[int]:
        return [s.seq for s in ep.reader.take(TAKE_MAX)]

    def echo(self, ep: _Endpoint) -> list[int]:
        seqs = []
        write = ep.writer.write
        for s in ep.reader.take(TAKE_MAX):
            write(s)
            seqs.append(s.seq)
        return seqs

    def wait_acks(self, ep: _Endpoint) -> None:
        if not ep.writer.wait_for_acks(self._duration(seconds=60)):
            raise TimeoutError("raw writer: samples not acknowledged within 60 s")

    def matched(self) -> bool:
        return all(
            ep.writer.get_publication_matched_status().current_count >= 1
            and ep.reader.get_subscription_matched_status().current_count >= 1
            for ep in self.endpoints.values()
        )


class _DcpsImpl(_Impl):
    def __init__(self, domain: int, prefix: str, role: str) -> None:
        from datetime import timedelta

        import dcps
        import qos as q

        self._timeout_error = dcps.DcpsTimeoutError
        types = _dcps_types()
        payload = _payload_array()
        self.participant = dcps.DomainParticipant(domain)
        reliable = q.Reliability.reliable(timedelta(seconds=10))
        wqos = q.DataWriterQos(reliable, q.History.KEEP_ALL)
        rqos = q.DataReaderQos(reliable, q.History.KEEP_ALL)
        self.endpoints = {}
        for case in CASES:
            cls = types[case]
            data = dcps.Topic(self.participant, f"{prefix}_{case}", cls)
            pong = dcps.Topic(self.participant, f"{prefix}_{case}_pong", cls)
            out_topic, in_topic = (data, pong) if role == "writer" else (pong, data)
            writer = dcps.DataWriter(self.participant, out_topic, qos=wqos)
            reader = dcps.DataReader(self.participant, in_topic, qos=rqos)
            waitset = dcps.WaitSet(self.participant)
            waitset.attach(dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ))
            if case == "small":

                def make(seq: int, stamp: int, cls: Any = cls) -> Any:
                    return cls(seq % INSTANCES, seq, stamp, float(seq))
            else:

                def make(seq: int, stamp: int, cls: Any = cls) -> Any:
                    return cls(seq % INSTANCES, seq, stamp, payload)

            size = len(make(0, 0).serialize())
            self.endpoints[case] = _Endpoint(writer, reader, waitset, make, size)

    def wait(self, ep: _Endpoint, timeout: float) -> bool:
        try:
            ep.waitset.wait(timeout)
        except self._timeout_error:
            return False
        return True

    def take_seqs(self, ep: _Endpoint) -> list[int]:
        return [s.data.seq for s in ep.reader.take(TAKE_MAX)]

    def echo(self, ep: _Endpoint) -> list[int]:
        seqs = []
        write = ep.writer.write
        for s in ep.reader.take(TAKE_MAX):
            write(s.data)
            seqs.append(s.data.seq)
        return seqs

    def wait_acks(self, ep: _Endpoint) -> None:
        ep.writer.wait_for_acknowledgments(60)

    def matched(self) -> bool:
        return all(
            ep.writer.publication_matched_status.current_count >= 1
            and ep.reader.subscription_matched_status.current_count >= 1
            for ep in self.endpoints.values()
        )


class _Peer:
    """A benchmark process: executes JSON commands from stdin, answers on stdout."""

    def __init__(self, impl: _Impl) -> None:
        self.impl = impl

    @staticmethod
    def emit(**event: Any) -> None:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()

    def drain(self, ep: _Endpoint) -> None:
        while self.impl.take_seqs(ep):
            pass

    def send(self, case: str, count: int) -> None:
        """Write ``count`` samples as fast as possible (throughput, writer side)."""
        ep = self.impl.endpoints[case]
        write, make, clock = ep.writer.write, ep.make, time.monotonic_ns
        cpu, thread_cpu = time.process_time_ns(), time.thread_time_ns()
        start = clock()
        for seq in range(count):
            write(make(seq, clock()))
        written = clock()
        thread_cpu = time.thread_time_ns() - thread_cpu
        self.impl.wait_acks(ep)
        self.emit(
            ev="sent",
            start_ns=start,
            written_ns=written,
            cpu_ns=time.process_time_ns() - cpu,
            thread_cpu_ns=thread_cpu,
        )

    def recv(self, case: str, count: int) -> None:
        """Receive ``count`` samples (throughput, reader side) and check each arrived once."""
        ep = self.impl.endpoints[case]
        self.drain(ep)
        self.emit(ev="armed")
        cpu, thread_cpu = time.process_time_ns(), time.thread_time_ns()
        seen = bytearray(count)
        got = dupes = strays = 0
        first_ns = 0
        wait, take_seqs = self.impl.wait, self.impl.take_seqs
        while got < count:
            if not wait(ep, WAIT_S):
                break
            seqs = take_seqs(ep)
            if seqs and not first_ns:
                first_ns = time.monotonic_ns()
            for seq in seqs:
                if 0 <= seq < count:
                    if seen[seq]:
                        dupes += 1
                    else:
                        seen[seq] = 1
                        got += 1
                else:
                    strays += 1
        end = time.monotonic_ns()
        self.emit(
            ev="received",
            count=got,
            dupes=dupes,
            strays=strays,
            first_ns=first_ns,
            end_ns=end,
            cpu_ns=time.process_time_ns() - cpu,
            thread_cpu_ns=time.thread_time_ns() - thread_cpu,
        )

    def pong(self, case: str, count: int) -> None:
        """Echo ``count`` pings back (latency, reader side)."""
        ep = self.impl.endpoints[case]
        self.drain(ep)
        self.emit(ev="armed")
        done = 0
        wait, echo = self.impl.wait, self.impl.echo
        thread_cpu = time.thread_time_ns()
        while done < count:
            if not wait(ep, WAIT_S):
                break
            done += len(echo(ep))
        self.emit(ev="ponged", count=done, thread_cpu_ns=time.thread_time_ns() - thread_cpu)

    def ping(self, case: str, count: int, interval_s: float) -> None:
        """Send ``count`` pings, one per ``interval_s``, each waiting for its pong."""
        ep = self.impl.endpoints[case]
        self.drain(ep)
        wait, take_seqs, write, make = self.impl.wait, self.impl.take_seqs, ep.writer.write, ep.make
        clock = time.monotonic_ns
        rtts: list[int] = []
        next_at = time.monotonic()
        thread_cpu = time.thread_time_ns()
        for seq in range(count):
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the pings, not waiting for anything
            next_at += interval_s
            sample = make(seq, 0)
            t0 = clock()
            write(sample)
            while True:
                if not wait(ep, WAIT_S):
                    self.emit(ev="error", text=f"no pong for ping {seq} within {WAIT_S} s")
                    return
                if seq in take_seqs(ep):
                    break
            rtts.append(clock() - t0)
        self.emit(ev="pinged", rtts_ns=rtts, thread_cpu_ns=time.thread_time_ns() - thread_cpu)

    def serve(self) -> None:
        deadline = time.monotonic() + 60
        while not self.impl.matched():
            if time.monotonic() > deadline:
                self.emit(ev="error", text="endpoints did not match within 60 s")
                return
            time.sleep(0.01)  # polling the match status with a deadline
        sizes = {case: ep.size for case, ep in self.impl.endpoints.items()}
        self.emit(ev="ready", sizes=sizes)
        for line in sys.stdin:
            cmd = json.loads(line)
            op = cmd.pop("op")
            if op == "quit":
                return
            try:
                getattr(self, op)(**cmd)
            except Exception as exc:  # report to the controller instead of hanging it
                self.emit(ev="error", text=f"{op}: {type(exc).__name__}: {exc}")


def _peer_main(args: argparse.Namespace) -> None:
    impl_class = _RawImpl if args.impl == "raw" else _DcpsImpl
    impl: _Impl = impl_class(args.domain, args.prefix, args.peer)
    peer = _Peer(impl)
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.runcall(peer.serve)
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(Path(args.profile) / f"{args.impl}-{args.peer}.pstats"))
    else:
        peer.serve()


# ---------------------------------------------------------------- controller


class _Process:
    """A peer process seen from the controller: send commands, await events."""

    def __init__(
        self,
        impl: str,
        role: str,
        domain: int,
        prefix: str,
        profile: str | None,
        env: dict[str, str],
    ) -> None:
        self.name = f"{impl} {role}"
        argv = [
            sys.executable,
            "-m",
            "benchmarks.bench_pubsub",
            "--peer",
            role,
            "--impl",
            impl,
            "--domain",
            str(domain),
            "--prefix",
            prefix,
        ]
        if profile:
            argv += ["--profile", profile]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=Path(__file__).resolve().parent.parent,
        )
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.events.put(json.loads(line))
            except json.JSONDecodeError:
                print(f"[{self.name}] {line.rstrip()}", file=sys.stderr)
        self.events.put(None)

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def expect(self, ev: str, timeout: float = 120.0) -> dict[str, Any]:
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"{self.name}: no {ev!r} within {timeout} s") from None
        if event is None:
            raise RuntimeError(f"{self.name} exited (code {self.proc.wait()}) before {ev!r}")
        if event.get("ev") != ev:
            raise RuntimeError(f"{self.name}: expected {ev!r}, got {event}")
        return event

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send(op="quit")
                self.proc.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


def _percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


def _burst(writer: _Process, reader: _Process, case: str, count: int) -> dict[str, float]:
    """One throughput run: samples/s and CPU us per sample (see ``render``)."""
    reader.send(op="recv", case=case, count=count)
    reader.expect("armed")
    writer.send(op="send", case=case, count=count)
    sent = writer.expect("sent")
    got = reader.expect("received")
    if got["count"] != count or got["dupes"] or got["strays"]:
        raise RuntimeError(
            f"{reader.name}: received {got['count']} of {count} samples "
            f"({got['dupes']} duplicates, {got['strays']} unexpected)"
        )
    return {
        "samples_per_s": count / ((got["end_ns"] - sent["start_ns"]) / 1e9),
        "process_cpu_us": (sent["cpu_ns"] + got["cpu_ns"]) / count / 1e3,
        "write_cpu_us": sent["thread_cpu_ns"] / count / 1e3,
        "take_cpu_us": got["thread_cpu_ns"] / count / 1e3,
    }


def _pings(
    writer: _Process, reader: _Process, case: str, count: int, interval_ms: float
) -> tuple[list[float], float]:
    """One latency run: one-way latencies (round trip / 2) and CPU per round trip, in us."""
    reader.send(op="pong", case=case, count=count)
    reader.expect("armed")
    writer.send(op="ping", case=case, count=count, interval_s=interval_ms / 1e3)
    result = writer.expect("pinged", timeout=count * (interval_ms / 1e3 + WAIT_S))
    ponged = reader.expect("ponged")
    cpu = (result["thread_cpu_ns"] + ponged["thread_cpu_ns"]) / count / 1e3
    return [rtt / 2e3 for rtt in result["rtts_ns"]], cpu


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Start the peers, measure, stop them; returns the results per case and implementation."""
    env = dict(os.environ)
    env.setdefault("CYCLONEDDS_URI", LOOPBACK_URI)
    prefix = f"bench_pubsub_{uuid.uuid4().hex[:8]}"
    impls = [i for i in IMPLS if args.impl in (i, "both")]
    cases = [c for c in CASES if args.case in (c, "both")]
    counts = {"small": args.count_small, "4k": args.count_4k}
    procs: dict[tuple[str, str], _Process] = {}
    results: dict[str, Any] = {"settings": vars(args).copy(), "cases": {}}
    try:
        for impl in impls:
            for role in ("reader", "writer"):
                # One prefix per implementation: both declare bench::Small alike, so
                # with shared topic names a raw writer also fed the dcps reader.
                procs[impl, role] = _Process(
                    impl, role, args.domain, f"{prefix}_{impl}", args.profile, env
                )
        sizes: dict[str, int] = {}
        for proc in procs.values():
            sizes = proc.expect("ready", timeout=90)["sizes"]

        def pair(impl: str) -> tuple[_Process, _Process]:
            return procs[impl, "writer"], procs[impl, "reader"]

        runs: dict[tuple[str, str], list[dict[str, float]]] = {
            (c, i): [] for c in cases for i in impls
        }
        lat: dict[tuple[str, str], list[float]] = {(c, i): [] for c in cases for i in impls}
        rt_cpu: dict[tuple[str, str], list[float]] = {(c, i): [] for c in cases for i in impls}
        for impl in impls:  # warm-up: code paths, buffers, first instances
            for case in cases:
                _burst(*pair(impl), case, max(200, counts[case] // 10))
                _pings(*pair(impl), case, 20, args.interval)
        for rep in range(args.runs):
            order = impls if rep % 2 == 0 else impls[::-1]
            for case in cases:
                for impl in order:
                    runs[case, impl].append(_burst(*pair(impl), case, counts[case]))
        for rep in range(args.latency_runs):
            order = impls if rep % 2 == 0 else impls[::-1]
            for case in cases:
                for impl in order:
                    one_way, cpu = _pings(*pair(impl), case, args.pings, args.interval)
                    lat[case, impl] += one_way
                    rt_cpu[case, impl].append(cpu)
        for case in cases:
            per_impl = {}
            for impl in impls:
                medians = {
                    key: statistics.median(run[key] for run in runs[case, impl])
                    for key in runs[case, impl][0]
                }
                per_impl[impl] = {
                    **medians,
                    "mb_per_s": medians["samples_per_s"] * sizes[case] / 1e6,
                    "runs": runs[case, impl],
                    "p50_us": _percentile(lat[case, impl], 0.5),
                    "p99_us": _percentile(lat[case, impl], 0.99),
                    "pings": len(lat[case, impl]),
                    "round_trip_cpu_us": statistics.median(rt_cpu[case, impl]),
                }
            results["cases"][case] = {"sample_bytes": sizes[case], "impls": per_impl}
    finally:
        for proc in procs.values():
            proc.close()
    return results


def render(results: dict[str, Any]) -> str:
    """The results as a plain-text table with dcps/raw ratios.

    ``w cpu``/``r cpu``: CPU time of the writing and the taking thread (the
    Python side of each API, without Cyclone's own threads) per sample, from
    the throughput runs; unlike rates, they hardly depend on machine load.
    """
    s = results["settings"]
    lines = [
        f"reliable KEEP_ALL, {INSTANCES} instances; throughput: median of {s['runs']} runs "
        f"(small: {s['count_small']}, 4 KiB: {s['count_4k']} samples); latency: "
        f"{s['latency_runs']} x {s['pings']} pings, one every {s['interval']} ms, one-way = "
        f"round trip / 2; w/r cpu: CPU us per sample of the writing/taking thread; "
        f"rt cpu: CPU us of both threads per ping-pong",
        f"{'case':14}{'impl':6}{'samples/s':>11}{'MB/s':>8}{'p50 us':>8}{'p99 us':>8}"
        f"{'w cpu':>7}{'r cpu':>7}{'rt cpu':>8}",
    ]
    for case, data in results["cases"].items():
        impls = data["impls"]
        for impl, r in impls.items():
            line = (
                f"{CASE_LABELS[case]:14}{impl:6}{r['samples_per_s']:>11,.0f}"
                f"{r['mb_per_s']:>8.2f}{r['p50_us']:>8.0f}{r['p99_us']:>8.0f}"
                f"{r['write_cpu_us']:>7.1f}{r['take_cpu_us']:>7.1f}"
                f"{r['round_trip_cpu_us']:>8.1f}"
            )
            if impl == "dcps" and "raw" in impls:
                raw = impls["raw"]
                thr = r["samples_per_s"] / raw["samples_per_s"]
                p50 = r["p50_us"] / raw["p50_us"]
                cpu = (r["write_cpu_us"] + r["take_cpu_us"]) / (
                    raw["write_cpu_us"] + raw["take_cpu_us"]
                )
                rt = r["round_trip_cpu_us"] / raw["round_trip_cpu_us"]
                line += (
                    f"   ratio {thr:.2f}x (target >= 0.9x), p50 {p50:.2f}x "
                    f"(target <= 1.11x), cpu {cpu:.2f}x, rt cpu {rt:.2f}x"
                )
            lines.append(line)
    lines.append(
        "sample sizes (serialized): "
        + ", ".join(f"{CASE_LABELS[c]} {d['sample_bytes']} B" for c, d in results["cases"].items())
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Command line: run the benchmark (or, with ``--peer``, be one of its processes)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a ~15 s smoke run (fewer samples, runs and pings)"
    )
    parser.add_argument("--runs", type=int, help="throughput repetitions per case and impl (5)")
    parser.add_argument("--count-small", type=int, help="samples per small-struct burst (10000)")
    parser.add_argument("--count-4k", type=int, help="samples per 4 KiB burst (3000)")
    parser.add_argument("--latency-runs", type=int, help="latency repetitions (10)")
    parser.add_argument("--pings", type=int, help="pings per latency repetition (150)")
    parser.add_argument("--interval", type=float, default=2.0, help="ms between pings (2)")
    parser.add_argument("--impl", choices=[*IMPLS, "both"], default="both")
    parser.add_argument("--case", choices=[*CASES, "both"], default="both")
    parser.add_argument("--domain", type=int, default=202, help="DDS domain id (202)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="cProfile every peer process; stats go to DIR/<impl>-<role>.pstats",
    )
    parser.add_argument("--peer", choices=["writer", "reader"], help=argparse.SUPPRESS)
    parser.add_argument("--prefix", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.peer:
        _peer_main(args)
        return
    defaults = (
        dict(runs=2, count_small=2000, count_4k=600, latency_runs=2, pings=50)
        if args.quick
        else dict(runs=5, count_small=10000, count_4k=3000, latency_runs=10, pings=150)
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    started = time.monotonic()
    results = run(args)
    results["seconds"] = time.monotonic() - started
    print(render(results))
    print(
        f"took {results['seconds']:.0f} s; load average {os.getloadavg()[0]:.1f} "
        f"on {os.cpu_count()} CPUs"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
