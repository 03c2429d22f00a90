"""Reader kinds compared: raw binding, plain dcps, SubscriptionKeys and content-filtered readers.

Run: ``python -m benchmarks.bench_readers [--samples N] [--runs R] [--domain D]``.

A writer process (the raw ``cyclonedds`` binding, the same for every case)
writes N small keyed samples as fast as reliable KEEP_ALL allows; this process
reads them with one reader of the kind under test. Two cases:

- **streaming**: take while the writer writes, time first to last sample. The
  writer process is the bottleneck here, so the rates say little about readers.
- **prefilled** (reader-bound): the reader takes nothing until the writer has
  written all N and every sample is acknowledged, then the take loop is timed.
  Alongside, CPU time per sample: of the take loop on its thread, and of the
  whole reader process (all threads: Cyclone's receive thread, listeners, the
  take loop) from reader creation to the last sample. CPU time is steadier
  than wall time on a loaded machine. A SubscriptionKeys reader moves samples out of Cyclone in its
  data-available listener as they arrive, so its take loop finds them already
  decoded: its CPU per sample, not its take-loop rate, is the fair comparison.
  SubscriptionKeys readers run twice: KEEP_ALL without limits (drained on
  access only) and with a resource limit that never bites (``max_instances``
  1000, which makes it drain in a data-available listener as samples arrive).

Cases run interleaved, R times each; the tables show medians and ratios
against the plain dcps reader and the raw binding.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant as RawParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import key
from cyclonedds.idl.types import bounded_str, float64, int32, int64
from cyclonedds.pub import DataWriter as RawWriter
from cyclonedds.sub import DataReader as RawReader
from cyclonedds.topic import Topic as RawTopic

import dcps
import idl
import qos

DOMAIN = 77
QUICK_ARGS = ["--samples", "3000", "--runs", "1"]


@dataclass
class RawVehicle(IdlStruct, typename="bench::Vehicle"):
    """The raw binding's declaration of the benchmark type."""

    id: int32
    key("id")
    seq: int64
    region: bounded_str[16]
    speed: float64


class Vehicle(idl.Struct, typename="bench::Vehicle"):
    """The same type declared with dcps' idl."""

    id: idl.key[idl.int32]
    seq: idl.int64
    region: idl.bounded_str[16]
    speed: idl.float64


def _raw_qos() -> Qos:
    return Qos(Policy.Reliability.Reliable(10**10), Policy.History.KeepAll)


def writer_main(topic: str, count: int, domain: int) -> None:
    """Child process: wait for one reader, write ``count`` samples, wait for acks."""
    participant = RawParticipant(domain)
    writer = RawWriter(participant, RawTopic(participant, topic, RawVehicle), qos=_raw_qos())
    while not writer.get_matched_subscriptions():
        time.sleep(0.01)
    time.sleep(0.2)  # let the reader finish matching the writer too
    regions = ["north", "south", "east", "west"]
    for i in range(count):
        writer.write(RawVehicle(i % 100, i, regions[i % 4], float(i % 50)))
    writer.wait_for_acks(10**10)
    print("done", flush=True)
    sys.stdin.readline()


def _run(
    kind: str, count: int, prefilled: bool = False, domain: int = DOMAIN
) -> tuple[float, float, float]:
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_readers",
            "--writer",
            topic,
            str(count),
            str(domain),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        return _read(kind, topic, count, child, prefilled, domain)
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait()


def _read(
    kind: str,
    topic: str,
    count: int,
    child: "subprocess.Popen[str]",
    prefilled: bool,
    domain: int,
) -> tuple[float, float, float]:
    """(samples/s over the timed take loop, its CPU microseconds per sample on this
    thread, reader-process CPU microseconds per sample)."""
    expected = count if kind != "filtered" else sum(1 for i in range(count) if i % 50 > 25)
    if kind == "raw":
        participant = RawParticipant(domain)
        reader = RawReader(participant, RawTopic(participant, topic, RawVehicle), qos=_raw_qos())
        take = lambda: reader.take(N=1000)  # noqa: E731
    else:
        participant = dcps.DomainParticipant(domain)
        t = dcps.Topic(participant, topic, Vehicle)
        rq = qos.DataReaderQos(qos.Reliability.RELIABLE, qos.History.KEEP_ALL)
        if kind.startswith("keyed"):
            rq = rq.with_(qos.SubscriptionKeys.of("region"))
        if kind == "keyed-bounded":  # limits that never bite, but make it drain eagerly
            rq = rq.with_(qos.ResourceLimits(max_instances=1000))
        source = (
            dcps.ContentFilteredTopic("fast", t, "speed > %0", ["25"]) if kind == "filtered" else t
        )
        dreader = dcps.DataReader(participant, source, qos=rq)
        take = lambda: dreader.take(1000)  # noqa: E731
    cpu_start = time.process_time()
    if prefilled:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "done":  # written and acknowledged
            raise RuntimeError(f"{kind}: the writer process failed")
    got, first, loop_cpu = 0, None, 0.0
    if prefilled:  # the first take, which may find everything, counts too
        first, loop_cpu = time.perf_counter(), time.thread_time()
    deadline = time.monotonic() + 120
    while got < expected and time.monotonic() < deadline:
        batch = take()
        if first is None and batch:
            first, loop_cpu = time.perf_counter(), time.thread_time()
        got += len(batch)
        if not batch:
            time.sleep(0.0005)
    elapsed = time.perf_counter() - (first or time.perf_counter())
    loop_us = (time.thread_time() - loop_cpu) / max(got, 1) * 1e6
    cpu_us = (time.process_time() - cpu_start) / max(got, 1) * 1e6
    if kind != "raw":
        participant.close()
    if got != expected:
        raise RuntimeError(f"{kind}: received {got} of {expected}")
    return (expected / elapsed if elapsed > 0 else float("inf")), loop_us, cpu_us


def _table(title: str, column: str, values: dict[str, float], higher_is_better: bool) -> None:
    names = {
        "raw": "raw cyclonedds",
        "plain": "dcps plain",
        "keyed": "dcps SubscriptionKeys",
        "keyed-bounded": "dcps SubscriptionKeys+limits",
        "filtered": "dcps content-filtered*",
    }
    print(title)
    print(f"{'reader':<28}{column:>14}{'vs plain':>10}{'vs raw':>9}")
    for kind, value in values.items():
        # ratios as speed: above 1 is faster, for rates and CPU costs alike
        vs_plain = value / values["plain"] if higher_is_better else values["plain"] / value
        vs_raw = value / values["raw"] if higher_is_better else values["raw"] / value
        print(f"{names[kind]:<28}{value:>14,.1f}{vs_plain:>9.2f}x{vs_raw:>8.2f}x")


def main(argv: list[str] | None = None) -> None:
    """Run every reader kind ``--runs`` times and print the medians and ratios."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=20000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--domain", type=int, default=DOMAIN)
    parser.add_argument("--writer", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.writer:
        writer_main(args.writer[0], int(args.writer[1]), int(args.writer[2]))
        return
    kinds = ["raw", "plain", "keyed", "keyed-bounded", "filtered"]
    cases = [("streaming", False), ("prefilled", True)]
    rates: dict[tuple[str, str], list[float]] = {}
    cpus: dict[tuple[str, str], list[float]] = {}
    loops: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):
        for case, prefilled in cases:
            for kind in kinds:
                rate, loop, cpu = _run(kind, args.samples, prefilled, args.domain)
                loops.setdefault((case, kind), []).append(loop)
                rates.setdefault((case, kind), []).append(rate)
                cpus.setdefault((case, kind), []).append(cpu)
    med_rate = {k: statistics.median(v) for k, v in rates.items()}
    med_cpu = {k: statistics.median(v) for k, v in cpus.items()}
    med_loop = {k: statistics.median(v) for k, v in loops.items()}
    load = os.getloadavg()
    print(
        f"reader kinds, {args.samples} samples, median of {args.runs}, "
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    _table(
        "streaming (writer-bound): samples/s received, first to last sample",
        "samples/s",
        {k: med_rate[("streaming", k)] for k in kinds},
        True,
    )
    _table(
        "prefilled (reader-bound): take loop over samples already in the reader",
        "samples/s",
        {k: med_rate[("prefilled", k)] for k in kinds},
        True,
    )
    _table(
        "prefilled: take loop CPU per sample on the taking thread, ratio = speed",
        "CPU us/sample",
        {k: med_loop[("prefilled", k)] for k in kinds},
        False,
    )
    _table(
        "prefilled: reader process CPU per sample (receive + listener + take), ratio = speed",
        "CPU us/sample",
        {k: med_cpu[("prefilled", k)] for k in kinds},
        False,
    )
    print(
        "* filtered: samples delivered (about half match; CPU per delivered sample); "
        "target keyed >= 0.8x plain"
    )


if __name__ == "__main__":
    main()
