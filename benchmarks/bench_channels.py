"""Channelled topics through the store against raw Cyclone DDS: throughput, latency, failover, RSS.

Run: ``python -m benchmarks.bench_channels [--quick] [--runs N] [--rss-minutes M]``.
Traffic stays on loopback. The store runs in its own process (``python -m
dcps.store``, synchronous=NORMAL); publishers and subscribers run in
this process, as does the raw-DDS baseline (one DDS sample per message, same
payload), measured alternately with the store cases in every run.

Payloads: the raw baseline sends the binding's own ``IdlStruct`` (``key``,
``seq``, ``sent_ns`` and a string of 64 or 4096 characters): that is what "the
raw binding" is. The dcps side sends an ``idl.Struct`` of exactly the same wire
size (the string replaced by a ``uint8`` array), which the compiled codec
serialises and the subscriber decodes a whole batch at a time. Every scenario
checks that each message arrived (distinct ``seq`` values == messages sent) and,
confirmed, that every publish future holds a distinct position; a loss aborts.

Printed: per case the median msgs/s over ``--runs``, its ratio to the raw
median, and the median CPU us per message of this process (publisher and
subscribers, or the raw writer and reader) and of the store process (CPU
numbers depend less on the machine's load than rates); p50/p99
publish->receive latency at 1000 msgs/s; seconds from a member's SIGKILL to
its channels flowing again; the store process's RSS (``/proc/<pid>/status``)
sampled every 2 s during ``--rss-minutes`` of steady publishing (5000 msgs/s,
64 B) to an anonymous subscriber and a committing two-member group: start,
peak, end and growth.

Where the time goes (see ``benchmarks/README.md``): the client process,
holding publisher and subscribers under one GIL, is the limit at ~7-8 us
per 64 B message (publishing ~2.5 us, the subscriber's delivery thread
~2.4 us, sending and confirming batches ~1.2 us); the store costs ~2-3.5 us
on the other core. Raw costs ~44-52 us per message in one process, so the
store path runs at ~6-8x raw.
"""

import argparse
import contextlib
import gc
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import CancelledError
from dataclasses import dataclass
from datetime import timedelta
from functools import cache
from typing import Any

import numpy as np
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl.annotations import key
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

import idl
from benchmarks._store_process import StoreProcess
from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    OrderBy,
)


@dataclass
class Payload(IdlStruct, typename="dcps_bench.Payload"):
    """A benchmark message: ``key`` spreads channels, ``sent_ns`` measures latency."""

    key: t.int32
    key("key")
    seq: t.int64
    sent_ns: t.int64
    text: str


QUICK_ARGS = ["--quick"]

RELIABLE = Qos(
    Policy.Reliability.Reliable(max_blocking_time=duration(seconds=10)),
    Policy.History.KeepAll,
)


def make(i: int, size: int) -> Payload:
    return Payload(i % 64, i, time.time_ns(), "x" * size)


@cache
def fast_type(size: int) -> Any:
    """The dcps payload type with the wire size of ``Payload`` carrying ``size`` characters.

    ``Payload``'s string costs 4 (length) + size + 1 (NUL) bytes; a final
    ``idl.Struct`` with a ``uint8[size + 5]`` array in its place has the same
    layout otherwise, so the same CDR length.
    """
    cls = idl.make_struct(
        f"Fast{size}",
        {
            "key": idl.int32,
            "seq": idl.int64,
            "sent_ns": idl.int64,
            "data": idl.array[idl.uint8, size + 5],
        },
        typename=f"dcps_bench::Fast{size}",
        keys=("key",),
        module=__name__,
    )
    raw, fast = len(make(0, size).serialize()), len(cls(0, 0, 0, bytes(size + 5)).serialize())
    if raw != fast:
        raise RuntimeError(f"payload sizes differ: raw {raw} B, dcps {fast} B")
    return cls


def make_fast(i: int, size: int) -> Any:
    return fast_type(size)(i % 64, i, time.time_ns(), _filler(size))


@cache
def _filler(size: int) -> np.ndarray:
    return np.full(size + 5, ord("x"), dtype=np.uint8)


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU seconds of a process so far (this one by default), from ``/proc``."""
    with open(f"/proc/{pid or os.getpid()}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def samples_out_of_gc() -> Iterator[None]:
    """Keep the objects built so far (the pre-built samples) out of the cyclic collector's way.

    Both the raw and the store cases build all their samples before timing.
    Without this, every full collection during the timed part walks those
    hundreds of thousands of objects: a cost of the benchmark's set-up, not
    of either API. Objects made while timing (received samples, elements,
    publish futures) are collected as usual.
    """
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


class LostError(RuntimeError):
    """A scenario did not deliver every message."""


def check_complete(case: str, count: int, seqs: list[int]) -> None:
    """Raise :class:`LostError` unless ``seqs`` holds each of ``0..count-1``."""
    distinct = set(seqs)
    if len(distinct) != count or min(distinct, default=0) != 0 or max(distinct) != count - 1:
        raise LostError(
            f"{case}: {count} sent, {len(distinct)} distinct received ({len(seqs)} in all)"
        )


# -- raw Cyclone DDS baseline ------------------------------------------------------


def raw_throughput(domain: int, size: int, count: int) -> tuple[float, float, float]:
    """Messages/s writing ``count`` samples with one writer, taking them with one reader.

    Also the process's CPU us per message (and 0.0: no store).
    """
    name = f"bench_raw_{uuid.uuid4().hex[:8]}"
    dp_w, dp_r = DomainParticipant(domain), DomainParticipant(domain)
    writer = DataWriter(dp_w, Topic(dp_w, name, Payload), qos=RELIABLE)
    reader = DataReader(dp_r, Topic(dp_r, name, Payload), qos=RELIABLE)
    deadline = time.monotonic() + 10
    while not writer.get_matched_subscriptions() and time.monotonic() < deadline:
        time.sleep(0.01)
    seqs: list[int] = []
    done = threading.Event()

    def take() -> None:
        while len(seqs) < count:
            got = reader.take(N=512)
            seqs.extend(s.seq for s in got)
            if not got:
                time.sleep(0.0005)
        done.set()

    samples = [make(i, size) for i in range(count)]
    thread = threading.Thread(target=take, daemon=True)
    with samples_out_of_gc():
        cpu = cpu_seconds()
        start = time.perf_counter()
        thread.start()
        for s in samples:
            writer.write(s)
        done.wait(120)
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds() - cpu
    for e in (reader, writer, dp_r, dp_w):
        e.__del__()
    check_complete(f"raw {size} B", count, seqs)
    return len(seqs) / elapsed, cpu / count * 1e6, 0.0


def raw_latency(domain: int, size: int, rate: int, seconds: float) -> list[float]:
    """One-way latencies (ms) at ``rate`` messages/s."""
    name = f"bench_rawlat_{uuid.uuid4().hex[:8]}"
    dp_w, dp_r = DomainParticipant(domain), DomainParticipant(domain)
    writer = DataWriter(dp_w, Topic(dp_w, name, Payload), qos=RELIABLE)
    reader = DataReader(dp_r, Topic(dp_r, name, Payload), qos=RELIABLE)
    while not writer.get_matched_subscriptions():
        time.sleep(0.01)
    lat: list[float] = []
    stop = threading.Event()

    def take() -> None:
        while not stop.is_set():
            for s in reader.take(N=64):
                if isinstance(s, Payload):
                    lat.append((time.time_ns() - s.sent_ns) / 1e6)
            time.sleep(0.0002)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    paced(lambda i: writer.write(make(i, size)), rate, seconds)
    time.sleep(0.2)
    stop.set()
    thread.join()
    for e in (reader, writer, dp_r, dp_w):
        e.__del__()
    return lat


def paced(send: Any, rate: int, seconds: float) -> None:
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        target = start + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(i)


# -- through the store --------------------------------------------------------------


def next_batch(sub: ChannelSubscriber, n: int, stop: threading.Event) -> list:
    """One receive(n), waited for until done or ``stop`` (a receive future is never dropped:
    an abandoned future would still take elements)."""
    fut = sub.receive(n)
    while not stop.is_set():
        try:
            return fut.result(0.5)
        except TimeoutError:
            continue
        except CancelledError:
            return []
    if fut.cancel():
        return []
    try:
        return fut.result(5)
    except (TimeoutError, CancelledError):
        return []


def open_subscribers(
    topic: ChannelledTopic, members: int, kw: dict[str, Any]
) -> list[ChannelSubscriber]:
    """One anonymous subscriber, or a settled group of ``members``."""
    if not members:
        return [ChannelSubscriber(topic, **kw)]
    subs = [ChannelSubscriber(topic, group="g", **kw) for _ in range(members)]
    deadline = time.monotonic() + 10
    count = topic.channel_count
    while sum(len(s.channels) for s in subs) != count or any(not s.channels for s in subs):
        if time.monotonic() > deadline:
            raise RuntimeError("group did not settle")
        time.sleep(0.01)
    return subs


def channel_throughput(
    store: StoreProcess,
    domain: int,
    namespace: str,
    size: int,
    count: int,
    *,
    confirmed: bool,
    members: int,
    many: bool = False,
) -> tuple[float, float, float]:
    """Messages/s from one publisher to an anonymous subscriber or a group of ``members``.

    Also the CPU us per message of this process and of the store's.
    ``many``: publish with ``publish_many`` in slices of 1000 instead of one by one.
    """
    topic = ChannelledTopic(f"bench_{uuid.uuid4().hex[:8]}", fast_type(size), channel_count=17)
    kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
    subs = open_subscribers(topic, members, kw)
    pub = ChannelPublisher(topic, confirmed=confirmed, **kw)  # the default batching and window
    seqs: list[int] = []
    total = [0]
    lock = threading.Lock()
    done = threading.Event()

    def consume(sub: ChannelSubscriber) -> None:
        while not done.is_set():
            got = next_batch(sub, 2048, done)
            with lock:
                seqs.extend(e.value.seq for e in got)
                total[0] += len(got)
                if total[0] >= count:
                    done.set()

    threads = [threading.Thread(target=consume, args=(s,), daemon=True) for s in subs]
    samples = [make_fast(i, size) for i in range(count)]
    futures: list[Any] = []
    with samples_out_of_gc():
        cpu, store_cpu = cpu_seconds(), cpu_seconds(store.proc.pid)
        start = time.perf_counter()
        for th in threads:
            th.start()
        if many:
            for i in range(0, count, 1000):
                futures.append(pub.publish_many(samples[i : i + 1000]))
        else:
            for s in samples:
                futures.append(pub.publish(s))
        pub.flush(timedelta(seconds=120))
        done.wait(120)
        elapsed = time.perf_counter() - start
        cpu, store_cpu = cpu_seconds() - cpu, cpu_seconds(store.proc.pid) - store_cpu
    for th in threads:
        th.join(5)
    pub.close()
    for s in subs:
        s.close()
    case = f"{size} B, {'confirmed' if confirmed else 'unconfirmed'}, {members} members"
    check_complete(case, count, seqs)
    if confirmed:
        results = [f.result(0) for f in futures]
        positions = [p for r in results for p in r] if many else results
        if None in positions or len(set(positions)) != count:
            raise LostError(f"{case}: {count} published, {len(set(positions))} distinct positions")
    return total[0] / elapsed, cpu / count * 1e6, store_cpu / count * 1e6


def channel_latency(
    domain: int, namespace: str, size: int, rate: int, seconds: float
) -> list[float]:
    """Publish-to-receive latencies (ms) through the store at ``rate`` messages/s."""
    topic = ChannelledTopic(f"benchlat_{uuid.uuid4().hex[:8]}", fast_type(size), channel_count=17)
    kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
    sub = ChannelSubscriber(topic, **kw)
    pub = ChannelPublisher(topic, linger=timedelta(milliseconds=1), **kw)
    lat: list[float] = []
    seqs: list[int] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            got = next_batch(sub, 256, stop)
            now = time.time_ns()
            lat.extend((now - e.value.sent_ns) / 1e6 for e in got)
            seqs.extend(e.value.seq for e in got)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    sent = int(rate * seconds)
    paced(lambda i: pub.publish(make_fast(i, size)), rate, seconds)
    pub.flush()
    deadline = time.monotonic() + 10
    while len(seqs) < sent and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    pub.close()
    sub.close()
    check_complete("latency", sent, seqs)
    return lat


def failover(domain: int, namespace: str) -> float:
    """Seconds from SIGKILL of a member (timeout 1 s) until its channels flow to the survivor."""
    topic = ChannelledTopic(f"benchfail_{uuid.uuid4().hex[:8]}", fast_type(8), channel_count=4)
    kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
    victim = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_channels",
            "--member",
            str(domain),
            namespace,
            topic.name,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert victim.stdout is not None
    victim.stdout.readline()
    survivor = ChannelSubscriber(topic, group="g", timeout=timedelta(seconds=30), **kw)
    while len(survivor.channels) != 2:
        time.sleep(0.01)
    theirs = sorted({0, 1, 2, 3} - set(survivor.channels))
    pub = ChannelPublisher(topic, order_by=OrderBy.fixed(theirs[0]), **kw)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    victim.stdout.close()
    killed = time.perf_counter()
    fut = survivor.receive()
    while not fut.done():
        pub.publish(make_fast(0, 8))
        pub.flush()
        time.sleep(0.01)
    elapsed = time.perf_counter() - killed
    pub.close()
    survivor.close()
    return elapsed


def member_main(domain: int, namespace: str, topic: str) -> None:
    sub = ChannelSubscriber(
        ChannelledTopic(topic, fast_type(8), channel_count=4),
        group="g",
        timeout=timedelta(seconds=1),
        domain_id=domain,
        namespace=namespace,
    )
    print("ready", flush=True)
    while True:
        sub.receive(64).result()


def store_rss(
    store: StoreProcess, domain: int, namespace: str, minutes: float, rate: int = 5000
) -> list[tuple[float, int]]:
    """``(seconds, RSS KiB)`` of the store, every 2 s, while ``rate`` msgs/s flow for ``minutes``.

    One publisher (64 B, confirmed, ordered by key over 17 channels) feeds an
    anonymous subscriber and a two-member group that commits what it received,
    so the store keeps trimming what every reader has consumed.
    """
    size = 64
    topic = ChannelledTopic(f"benchrss_{uuid.uuid4().hex[:8]}", fast_type(size), channel_count=17)
    kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
    subs = open_subscribers(topic, 2, kw) + open_subscribers(topic, 0, kw)
    pub = ChannelPublisher(topic, **kw)
    stop = threading.Event()
    counts = [0] * len(subs)
    seqs: list[set[int]] = [set(), set()]  # what the group / the anonymous subscriber saw

    def consume(index: int, sub: ChannelSubscriber) -> None:
        while not stop.is_set():
            got = next_batch(sub, 1024, stop)
            counts[index] += len(got)
            seqs[1 if sub.anonymous else 0].update(e.value.seq for e in got)
            if got and not sub.anonymous:
                last: dict[int, Any] = {}
                for e in got:
                    last[e.channel] = e.position
                sub.commit_async(last)

    threads = [
        threading.Thread(target=consume, args=(i, s), daemon=True) for i, s in enumerate(subs)
    ]
    for th in threads:
        th.start()
    samples: list[tuple[float, int]] = [(0.0, store.rss_kib())]
    start = time.perf_counter()
    end = start + minutes * 60
    next_sample = start + 2.0
    chunk = max(1, rate // 100)  # publish every 10 ms
    sent = 0
    while (now := time.perf_counter()) < end:
        due = int((now - start) * rate)
        if sent < due:
            for _ in range(min(chunk * 4, due - sent)):
                pub.publish(make_fast(sent, size))
                sent += 1
        if now >= next_sample:
            samples.append((now - start, store.rss_kib()))
            next_sample += 2.0
        time.sleep(0.005)
    pub.flush(timedelta(seconds=60))
    deadline = time.monotonic() + 30
    while any(len(s) < sent for s in seqs) and time.monotonic() < deadline:
        time.sleep(0.05)
    samples.append((time.perf_counter() - start, store.rss_kib()))
    stop.set()
    for th in threads:
        th.join(5)
    pub.close()
    for s in subs:
        s.close()
    check_complete("RSS run, group", sent, list(seqs[0]))
    check_complete("RSS run, anonymous", sent, list(seqs[1]))
    print(f"  ({sent:,} messages at {sent / (samples[-1][0] or 1):,.0f} msgs/s, none lost)")
    return samples


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


CASES = [
    # (confirmed, members, publish_many)
    (True, 0, False),
    (True, 4, False),
    (False, 0, False),
    (False, 4, False),
    (True, 0, True),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "42"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer messages, one run")
    parser.add_argument("--runs", type=int, help="throughput runs per case (median; default 3)")
    parser.add_argument(
        "--rss-minutes",
        type=float,
        help="length of the store RSS run (default 5, --quick 0.25; 0 skips it)",
    )
    parser.add_argument("--member", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        member_main(int(args.member[0]), args.member[1], args.member[2])
        return
    domain = args.domain
    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    scale = 0.25 if args.quick else 1.0
    runs = args.runs or (1 if args.quick else 3)
    rss_minutes = args.rss_minutes if args.rss_minutes is not None else 0.25 if args.quick else 5
    # messages per case, (raw, through the store): about 2 s each at the usual rates,
    # so that start and end (threads starting, the last batch's round trip) weigh little
    counts = {64: (int(40_000 * scale), int(200_000 * scale)), 4096: (int(10_000 * scale),) * 2}
    store = StoreProcess(domain, namespace)
    try:
        # warm-up, not measured: first-use costs (codec generation, imports, SQLite pages)
        raw_throughput(domain, 64, 2000)
        channel_throughput(store, domain, namespace, 64, 10_000, confirmed=True, members=0)
        print(f"median of {runs} run(s); every case checked for loss")
        print(f"{'case':<52}{'msgs/s':>10}{'vs raw':>8}{'cpu us/msg':>12}{'store':>7}")
        for size, (raw_count, count) in counts.items():
            results: dict[Any, list[tuple[float, float, float]]] = {"raw": []}
            for _ in range(runs):
                results["raw"].append(raw_throughput(domain, size, raw_count))
                for confirmed, members, many in CASES:
                    if many and size != 64:
                        continue
                    results.setdefault((confirmed, members, many), []).append(
                        channel_throughput(
                            store,
                            domain,
                            namespace,
                            size,
                            count,
                            confirmed=confirmed,
                            members=members,
                            many=many,
                        )
                    )
            raw = statistics.median(r for r, _, _ in results["raw"])
            for case, values in results.items():
                rate = statistics.median(r for r, _, _ in values)
                cpu = statistics.median(c for _, c, _ in values)
                store_cpu = statistics.median(c for _, _, c in values)
                if case == "raw":
                    label = f"raw cyclonedds, {size} B"
                else:
                    confirmed, members, many = case
                    who = "anonymous" if not members else f"{members}-member group"
                    mode = "confirmed" if confirmed else "unconfirmed"
                    label = f"store, {size} B, {mode}, {who}" + (", publish_many" if many else "")
                print(f"{label:<52}{rate:>10,.0f}{rate / raw:>8.2f}{cpu:>12.1f}{store_cpu:>7.1f}")
        rate, secs = 1000, 3.0 * max(scale, 0.5)
        raw_lat = raw_latency(domain, 64, rate, secs)
        ch_lat = channel_latency(domain, namespace, 64, rate, secs)
        print(f"\nlatency at {rate} msgs/s, 64 B (ms):      p50      p99")
        print(
            f"  raw cyclonedds                     "
            f"{pct(raw_lat, 0.5):>8.2f} {pct(raw_lat, 0.99):>8.2f}"
        )
        print(
            f"  through the store (linger 1 ms)    "
            f"{pct(ch_lat, 0.5):>8.2f} {pct(ch_lat, 0.99):>8.2f}"
        )
        fail = failover(domain, namespace)
        print(f"\nmember SIGKILL (timeout 1 s) -> its channels flowing again: {fail:.2f} s")
        if rss_minutes > 0:
            print(f"\nstore RSS over {rss_minutes:g} min at 5000 msgs/s (64 B, 3 readers):")
            samples = store_rss(store, domain, namespace, rss_minutes)
            values = [kib for _, kib in samples]
            growth = (values[-1] - values[0]) / 1024
            print(
                f"  start {values[0] / 1024:.1f} MiB, peak {max(values) / 1024:.1f} MiB, "
                f"end {values[-1] / 1024:.1f} MiB, growth {growth:+.1f} MiB"
            )
            mid = len(samples) // 2
            print(
                f"  second half: {samples[mid][1] / 1024:.1f} -> {values[-1] / 1024:.1f} MiB "
                f"over {samples[-1][0] - samples[mid][0]:.0f} s"
            )
    finally:
        store.close()


if __name__ == "__main__":
    main()
