"""Durable subscriptions through the store: acknowledged elements per second, against channel
groups and the raw binding in the same run.

Run: ``python -m benchmarks.bench_durables [--count N] [--domain D]``. Traffic stays
on loopback; the store runs in its own process (``python -m dcps.store``, sync
NORMAL). Every case first publishes ``N`` elements of 64 B (a durable or group
exists first, so they are kept), then consumes them in this process and
reports elements per second from the first receive to the store having every
acknowledgement (outstanding 0) or commit:

* shared durable, 4 subscribers, window 64, explicit per-element acks sent
  asynchronously (they ride on the next poll) — the issue's headline case —
  twice: receiving one element at a time (``receive`` + ``ack`` per element),
  and receiving what has arrived (``receive_many(64)``, then ``ack`` of the
  list: each element still acknowledged by its own position);
* exclusive durable, window 64, both ways;
* serial durable, 2 subscribers, window 64, both ways;
* a channel group (one member, commit per received batch);
* raw Cyclone DDS (one writer, one reader, reliable keep-all, same payload).

Each case checks that every element arrived exactly once (by its ``seq``).

Measured on the 2-core development machine, shared with other work (load
average 4-10; 100 000 elements; all subscribers in one process under one
GIL; the rates vary by +-30 % from run to run):

=====================================  ============  ============================
case                                   before (k/s)  batched path (k/s), one run
=====================================  ============  ============================
shared 4x64, receive + ack              29-40         70 (31-70 over runs)
shared 4x64, receive_many + ack(list)   --            111 (86-111 over runs)
exclusive 64, receive + ack             10-12         43
exclusive 64, receive_many + ack(list)  --            51
serial 2x64, receive + ack              10-17         37
serial 2x64, receive_many + ack(list)   --            53
channel group, 1 member                 730-1 090     482 (same run)
raw cyclonedds                          93-190        183 (same run)
=====================================  ============  ============================

Where the time goes: one poll (request + answer, through Python on both
sides) costs the store ~100-200 us, so a window of 64 costs ~2-3 us per
element there, plus ~2 us per element of acknowledgement state; the client
spends ~8 us per element in ``receive`` + ``ack`` one at a time (locks,
element objects), ~3 us in ``receive_many`` + ``ack(list)``. The shared case
reaches the issue's 100 k/s only with ``receive_many``.

Session 7 (redelivery counts kept with a delivered offset per channel instead
of a row per delivery, elements read ahead of the deliveries, acks settled in
bulk), against ``2922a02`` (before the counts were persisted: 118-127 k/s
shared with ``receive_many`` on a quiet machine), interleaved old, new, old,
new with ``--count 100000 --repeat 2``, load average 27-35 (so the rates are
low and noisy; the CPU per element is the steadier figure):

=======================================  ==================  ==================
case (rate k/s; store / subs us/element)  2922a02             this code
=======================================  ==================  ==================
shared 4x64, receive_many                 45, 51; 9.2 / 8.8    57, 62; 6.7 / 8.1
shared 4x64, receive + ack                29, 51; 9.8 / 12.7   39, 49; 6.8 / 12.2
exclusive 64, receive_many                28, 36; 11.2 / 9.2   33, 44; 9.4 / 9.8
exclusive 64, receive + ack               17, 31; 12.4 / 14.3  24, 29; 10.3 / 15.6
serial 2x64, receive_many                 24, 39; 12.1 / 10.3  37, 35; 10.3 / 10.7
serial 2x64, receive + ack                27, 25; 13.3 / 15.0  24, 25; 10.6 / 15.4
=======================================  ==================  ==================

At lower load (15-19) the shared ``receive_many`` case ran 62-74 k/s against
51-60 k/s for ``2922a02`` in the same minutes (ratio 1.2-1.4), store 6.4-7.2
us against 9.0-10.1 us per element. The subscribers' process (~8 us per
element, all four subscribers under one GIL) is now the larger cost: with the
store at ~6.5 us the two processes on two quiet cores bound the rate at
~1 / 8 us = 125 k/s. In the exclusive and serial cases a store round serves
one poll, so the round's write of the acknowledgements (a commit per 64
elements, ~11 % of the store) and the reply's write to Cyclone (~30 %: ~6 KB
in five 1344-byte fragments) dominate.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import timedelta

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

import idl
from dcps import AlreadyClosedError, DcpsTimeoutError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber
from dcps.durables import AckTiming, DurableKind, DurableSubscriber

#: ``python -m benchmarks --quick``: a smoke run.
QUICK_ARGS = ["--count", "2000"]


class Tick(idl.Struct, typename="bench::Tick"):
    """64 bytes on the wire (4 header + 8 seq + 52 payload)."""

    seq: idl.int64
    payload: idl.array[idl.uint8, 52]


def start_store(data: str, domain: int, namespace: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dcps.store",
            "--data",
            data,
            "--domain",
            str(domain),
            "--namespace",
            namespace,
            "--sync",
            "NORMAL",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("dcps store ready"):
            return proc
    raise RuntimeError("the store did not start")


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (Linux ``/proc``; else 0.0)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread name of process ``pid`` (Linux ``/proc``; empty elsewhere)."""
    out: dict[str, float] = {}
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
        except OSError:
            continue
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / os.sysconf(
            "SC_CLK_TCK"
        )
    return out


class CpuMeter:
    """CPU microseconds per element spent by the store and by this (the subscribers') process
    over one case: less sensitive to the machine's load than the rate."""

    def __init__(self, store_pid: int, *, threads: bool = False) -> None:
        self.store_pid = store_pid
        self.store_us: list[float] = []
        self.client_us: list[float] = []
        self._start = (0.0, 0.0)
        #: with ``threads``: per process and thread name, CPU us per element of each run
        self.threads: list[dict[str, float]] | None = [] if threads else None
        self._threads: dict[str, float] = {}

    def _by_thread(self) -> dict[str, float]:
        return {
            **{f"store {k}": v for k, v in thread_cpu(self.store_pid).items()},
            **{f"subs {k}": v for k, v in thread_cpu(os.getpid()).items()},
        }

    def start(self) -> None:
        self._start = (process_cpu(self.store_pid), time.process_time())
        if self.threads is not None:
            self._threads = self._by_thread()

    def stop(self, count: int) -> None:
        store, client = process_cpu(self.store_pid), time.process_time()
        self.store_us.append((store - self._start[0]) / count * 1e6)
        self.client_us.append((client - self._start[1]) / count * 1e6)
        if self.threads is not None:
            now = self._by_thread()
            self.threads.append(
                {k: (v - self._threads.get(k, 0.0)) / count * 1e6 for k, v in now.items()}
            )


def publish(topic: ChannelledTopic, count: int, kw: dict[str, object]) -> None:
    with ChannelPublisher(topic, **kw) as pub:  # type: ignore[arg-type]
        payload = bytes(52)
        pub.publish_many([Tick(seq=i, payload=payload) for i in range(count)]).result(120)


def bench_durable(
    kind: DurableKind,
    subscribers: int,
    count: int,
    kw: dict[str, object],
    *,
    batch: bool = False,
    cpu: CpuMeter | None = None,
) -> float:
    topic = ChannelledTopic(f"d_{uuid.uuid4().hex[:8]}", Tick, channel_count=1)
    subs = [
        DurableSubscriber(
            topic,
            topic.name,
            kind=kind,
            window=64,
            ack_timing=AckTiming.ASYNC,
            ack_interval=timedelta(milliseconds=5),
            **kw,  # type: ignore[arg-type]
        )
        for _ in range(subscribers)
    ]
    publish(topic, count, kw)
    seen: list[int] = []
    lock = threading.Lock()
    start = [0.0]

    def work(sub: DurableSubscriber[Tick]) -> None:
        while True:
            try:
                e = sub.receive(timeout=2.0)
            except (DcpsTimeoutError, AlreadyClosedError):
                return
            if not start[0]:
                start[0] = time.perf_counter()
            e.ack()
            with lock:
                seen.append(e.value.seq)

    def work_batches(sub: DurableSubscriber[Tick]) -> None:
        while True:
            try:
                elements = sub.receive_many(64, timeout=2.0)
            except (DcpsTimeoutError, AlreadyClosedError):
                return
            if not start[0]:
                start[0] = time.perf_counter()
            sub.ack(elements)  # each element acknowledged on its own (by position)
            with lock:
                seen.extend(e.value.seq for e in elements)

    threads = [threading.Thread(target=work_batches if batch else work, args=(s,)) for s in subs]
    if cpu is not None:
        cpu.start()
    for t in threads:
        t.start()
    deadline = time.monotonic() + 300
    while subs[0].info().outstanding and time.monotonic() < deadline:
        time.sleep(0.005)
    elapsed = time.perf_counter() - start[0]
    if cpu is not None:
        cpu.stop(count)
    for s in subs:
        s.close()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(count)), "lost or duplicated elements"
    return count / elapsed


def bench_group(count: int, kw: dict[str, object]) -> float:
    topic = ChannelledTopic(f"g_{uuid.uuid4().hex[:8]}", Tick, channel_count=1)
    with ChannelSubscriber(topic, group="bench", **kw) as sub:  # type: ignore[arg-type]
        publish(topic, count, kw)
        got = 0
        start = 0.0
        seen = set()
        while got < count:
            batch = sub.receive(4096).result(30)
            start = start or time.perf_counter()
            got += len(batch)
            seen.update(e.value.seq for e in batch)
            batch[-1].commit()
        elapsed = time.perf_counter() - start
    assert len(seen) == count
    return count / elapsed


def bench_raw(count: int, domain: int) -> float:
    dp = DomainParticipant(domain)
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=10)), Policy.History.KeepAll)
    topic = Topic(dp, f"raw_{uuid.uuid4().hex[:8]}", Tick)
    reader: DataReader[Tick] = DataReader(dp, topic, qos=qos)
    writer: DataWriter[Tick] = DataWriter(dp, topic, qos=qos)
    while not writer.get_matched_subscriptions():
        time.sleep(0.01)
    payload = bytes(52)
    seen: set[int] = set()
    start = time.perf_counter()

    def read() -> None:
        while len(seen) < count:
            for s in reader.take(N=1024):
                seen.add(s.seq)

    t = threading.Thread(target=read)
    t.start()
    for i in range(count):
        writer.write(Tick(seq=i, payload=payload))
    t.join(120)
    elapsed = time.perf_counter() - start
    assert len(seen) == count
    return count / elapsed


#: Durable cases by name: (label, kind, subscribers, receive_many).
_DURABLE_CASES: dict[str, tuple[str, DurableKind, int, bool]] = {
    "shared": ("shared durable, 4 subs, window 64", DurableKind.SHARED, 4, False),
    "shared-many": ("shared durable, 4 subs, window 64, receive_many", DurableKind.SHARED, 4, True),
    "exclusive": ("exclusive durable, window 64", DurableKind.EXCLUSIVE, 1, False),
    "exclusive-many": (
        "exclusive durable, window 64, receive_many",
        DurableKind.EXCLUSIVE,
        1,
        True,
    ),
    "serial": ("serial durable, 2 subs, window 64", DurableKind.SERIAL, 2, False),
    "serial-many": ("serial durable, 2 subs, window 64, receive_many", DurableKind.SERIAL, 2, True),
}
#: Every case, in the order they run by default.
CASES = (*_DURABLE_CASES, "group", "raw")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=20000)
    parser.add_argument("--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", 0)))
    parser.add_argument(
        "--cases",
        default=",".join(CASES),
        help=f"comma-separated cases to run (default: all of {', '.join(CASES)})",
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each durable case this many times (median)"
    )
    parser.add_argument(
        "--threads", action="store_true", help="also show CPU per element by thread name"
    )
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    kw: dict[str, object] = {"domain_id": args.domain, "namespace": namespace}
    with tempfile.TemporaryDirectory() as data:
        store = start_store(data, args.domain, namespace)
        try:
            rows: list[tuple[str, list[float], CpuMeter | None]] = []
            for case in cases:
                if case in _DURABLE_CASES:
                    label, kind, subs, batch = _DURABLE_CASES[case]
                    cpu = CpuMeter(store.pid, threads=args.threads)
                    rates = [
                        bench_durable(kind, subs, args.count, kw, batch=batch, cpu=cpu)
                        for _ in range(max(1, args.repeat))
                    ]
                    rows.append((label, rates, cpu))
                elif case == "group":
                    rows.append(("channel group, 1 member", [bench_group(args.count, kw)], None))
                else:
                    rows.append(("raw cyclonedds", [bench_raw(args.count, args.domain)], None))
        finally:
            store.terminate()
            try:
                store.wait(60)  # a loaded machine may take long to stop; the results stand anyway
            except subprocess.TimeoutExpired:
                store.kill()
                store.wait()
    head = f"case (64 B, {args.count} elements)"
    print(f"{head:<50} {'acked/s':>9} {'store us':>9} {'subs us':>8}  runs (acked/s)")
    for name, rates, cpu in rows:
        runs = "  ".join(f"{r:,.0f}" for r in rates) if len(rates) > 1 else ""
        store_us = f"{statistics.median(cpu.store_us):9.2f}" if cpu else f"{'':9}"
        client_us = f"{statistics.median(cpu.client_us):8.2f}" if cpu else f"{'':8}"
        print(f"{name:<50} {statistics.median(rates):>9,.0f} {store_us} {client_us}  {runs}")
        for run in (cpu.threads or []) if cpu else []:
            busy = sorted(((v, k) for k, v in run.items() if v >= 0.05), reverse=True)
            print("    by thread (us/element): " + ", ".join(f"{k} {v:.2f}" for v, k in busy))
    print(
        "store us / subs us: CPU microseconds per element of the store process and of the "
        "subscribers' process (median over runs)"
    )


if __name__ == "__main__":
    main()
