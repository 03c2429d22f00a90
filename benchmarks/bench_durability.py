"""The durability service: a late joiner's history, and what the service costs a live writer.

Run: ``python -m benchmarks.bench_durability [--quick] [--count N] [--runs N]``.

A standalone :class:`~dcps.store.DurabilityService` runs in a process of its
own (this module with ``--serve``), on loopback.

1. **Late joiner.** A TRANSIENT writer (DurabilityService KEEP_ALL) writes
   ``count`` readings (100 sensors); once the service keeps them all, a
   TRANSIENT KEEP_ALL reader is created and the time until it has taken every
   one is measured: stored samples/s delivered to a late joiner (target >=
   200 k/s).
2. **Cost to a live writer.** Throughput of a TRANSIENT writer to a plain
   reader in this process, with and without the service process matched
   (alternating, same run; median msgs/s; target ratio >= 0.9).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from datetime import timedelta

import dcps
import idl
import qos as q

QUICK_ARGS = ["--quick"]


class Reading(idl.Struct, typename="bench::DurableReading"):
    sensor: idl.key[idl.int32]
    value: idl.float64
    seq: idl.int64


def serve(domain: int, namespace: str) -> None:
    """The service process: answers ``count TOPIC`` lines on stdin with the kept count."""
    from dcps.store import DurabilityService

    topics = ("durable_*", "served_*")  # not plain_*: the runs without the service
    with DurabilityService(
        domain_id=domain, namespace=namespace, topics=topics, align=False
    ) as svc:
        svc.wait_aligned(10)
        print("ready", flush=True)
        for line in sys.stdin:
            _, topic = line.split()
            print(svc.history.count(topic), flush=True)


class _Service:
    def __init__(self, domain: int, namespace: str) -> None:
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "benchmarks.bench_durability",
                "--serve",
                str(domain),
                namespace,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError("the durability service process did not start")

    def count(self, topic: str) -> int:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"count {topic}\n")
        self.process.stdin.flush()
        return int(self.process.stdout.readline())

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


def late_joiner(dp: dcps.DomainParticipant, service: _Service, count: int) -> float:
    """Stored samples per second a new TRANSIENT reader receives."""
    name = f"durable_{uuid.uuid4().hex[:8]}"
    topic = dcps.Topic(dp, name, Reading)
    keep_all = q.DurabilityService(history=q.History.KEEP_ALL)
    writer = dcps.DataWriter(
        dp,
        topic,
        qos=q.DataWriterQos(
            q.Durability.TRANSIENT,
            q.Reliability.RELIABLE,
            q.History.KEEP_ALL,
            keep_all,
            # closing it must not dispose the instances (the service would forget them)
            q.WriterDataLifecycle(autodispose_unregistered_instances=False),
        ),
    )
    for i in range(count):
        writer.write(Reading(i % 100, float(i), i))
    deadline = time.monotonic() + 600
    while service.count(name) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the service did not keep every sample")
        time.sleep(0.2)  # polling another process's count; not a synchronisation
    writer.close()
    start = time.perf_counter()
    reader = dcps.DataReader(
        dp, topic, qos=q.DataReaderQos(q.Durability.TRANSIENT, q.History.KEEP_ALL)
    )
    got = 0
    reader.wait_for_historical_data(timedelta(seconds=120))
    while got < count:
        taken = reader.take()
        if not taken:
            if time.perf_counter() - start > 300:
                raise RuntimeError(f"late joiner got {got} of {count}")
            reader.wait_for_data(timedelta(seconds=10))
        got += len(taken)
    elapsed = time.perf_counter() - start
    reader.close()
    return count / elapsed


def live_throughput(dp: dcps.DomainParticipant, count: int, served: bool) -> float:
    """msgs/s of a TRANSIENT writer to a plain reader in this process (its topic
    ``served_*`` is kept by the service, ``plain_*`` is not)."""
    prefix = "served" if served else "plain"
    os.environ["DCPS_DURABILITY_WRITER_WAIT"] = "5" if served else "0"
    topic = dcps.Topic(dp, f"{prefix}_{uuid.uuid4().hex[:8]}", Reading)
    writer = dcps.DataWriter(
        dp,
        topic,
        qos=q.DataWriterQos(q.Durability.TRANSIENT, q.Reliability.RELIABLE, q.History.KEEP_ALL),
    )
    reader = dcps.DataReader(
        dp, topic, qos=q.DataReaderQos(q.Reliability.RELIABLE, q.History.KEEP_ALL)
    )
    writer.wait_for_readers()
    start = time.perf_counter()
    got = 0
    for i in range(count):
        writer.write(Reading(i % 100, float(i), i))
        if i % 1000 == 999:
            got += len(reader.take())
    while got < count:
        taken = reader.take()
        if not taken:
            reader.wait_for_data(timedelta(seconds=10))
        got += len(taken)
    elapsed = time.perf_counter() - start
    writer.close()
    reader.close()
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", nargs=2, metavar=("DOMAIN", "NAMESPACE"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "44"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--count", type=int, help="stored samples (default 100,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per live case (median)")
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return
    count = args.count or (10_000 if args.quick else 100_000)
    live = 5_000 if args.quick else 30_000
    namespace = f"bench_dur_{uuid.uuid4().hex[:8]}"
    os.environ["DCPS_DURABILITY_NAMESPACE"] = namespace
    plain: list[float] = []
    served: list[float] = []
    with dcps.DomainParticipant(args.domain) as dp:
        service = _Service(args.domain, namespace)
        try:
            live_throughput(dp, 2_000, served=False)  # warm-up
            for _ in range(args.runs):  # alternating, so drift hits both alike
                plain.append(live_throughput(dp, live, served=False))
                served.append(live_throughput(dp, live, served=True))
            rate = late_joiner(dp, service, count)
        finally:
            service.close()
    without, with_ = statistics.median(plain), statistics.median(served)
    print(f"late joiner: {count} stored samples at {rate:,.0f} samples/s (target >= 200,000)")
    print(
        f"live TRANSIENT writer ({live} msgs): without service {without:,.0f} msgs/s, "
        f"with service {with_:,.0f} msgs/s, ratio {with_ / without:.2f} (target >= 0.9)"
    )


if __name__ == "__main__":
    main()
