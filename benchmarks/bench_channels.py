"""Channelled topics through the store against raw Cyclone DDS: throughput, latency, failover.

Run: ``python -m benchmarks.bench_channels [--quick]``. Traffic stays on loopback.
The store runs in its own process (``python -m dcps.channels.store``, synchronous=NORMAL);
publishers and subscribers run in this process, as does the raw-DDS baseline
(one DDS sample per message, same payload).

What to expect: batching removes Cyclone's per-sample cost (~9 us per write on
the reference machine), but the Python binding's CDR (de)serialisation of each
user sample (~15-20 us each way) remains on both ends, because ``publish``
takes samples and ``receive`` returns them. With publisher and subscriber in
one process the store path therefore runs at roughly 0.4-0.7x raw for 64-byte
messages, not the 5x hoped for; the store itself (SQLite, NORMAL) sustains
~60-90 k msgs/s for 64 B and ~22 k msgs/s for 4 KiB, so it is not the limit.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import CancelledError
from dataclasses import dataclass
from datetime import timedelta

os.environ.setdefault(
    "CYCLONEDDS_URI",
    '<CycloneDDS><Domain id="any"><General><Interfaces>'
    '<NetworkInterface name="lo" multicast="true"/>'
    "</Interfaces></General></Domain></CycloneDDS>",
)

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl.annotations import key
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

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


RELIABLE = Qos(
    Policy.Reliability.Reliable(max_blocking_time=duration(seconds=10)),
    Policy.History.KeepAll,
)


def make(i: int, size: int) -> Payload:
    return Payload(i % 64, i, time.time_ns(), "x" * size)


# -- raw Cyclone DDS baseline ------------------------------------------------------


def raw_throughput(domain: int, size: int, count: int) -> float:
    """Messages/s writing ``count`` samples with one writer, taking them with one reader."""
    name = f"bench_raw_{uuid.uuid4().hex[:8]}"
    dp_w, dp_r = DomainParticipant(domain), DomainParticipant(domain)
    writer = DataWriter(dp_w, Topic(dp_w, name, Payload), qos=RELIABLE)
    reader = DataReader(dp_r, Topic(dp_r, name, Payload), qos=RELIABLE)
    deadline = time.monotonic() + 10
    while not writer.get_matched_subscriptions() and time.monotonic() < deadline:
        time.sleep(0.01)
    received = 0
    done = threading.Event()

    def take() -> None:
        nonlocal received
        while received < count:
            for _s in reader.take(N=512):
                received += 1
            if received < count:
                time.sleep(0.0005)
        done.set()

    samples = [make(i, size) for i in range(count)]
    thread = threading.Thread(target=take, daemon=True)
    start = time.perf_counter()
    thread.start()
    for s in samples:
        writer.write(s)
    done.wait(120)
    elapsed = time.perf_counter() - start
    for e in (reader, writer, dp_r, dp_w):
        e.__del__()
    return received / elapsed


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


def paced(send: "callable", rate: int, seconds: float) -> None:
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        target = start + i / rate
        delay = target - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        send(i)


# -- through the store --------------------------------------------------------------


class StoreProcess:
    """``python -m dcps.channels.store`` on a temporary directory."""

    def __init__(self, domain: int, namespace: str) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="dcps-bench-")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dcps.channels.store",
                "--data",
                self.dir.name,
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
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("dcps store ready"):
            raise RuntimeError(f"store did not start: {line!r}")

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)
        if self.proc.stdout:
            self.proc.stdout.close()
        self.dir.cleanup()


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


def channel_throughput(
    domain: int, namespace: str, size: int, count: int, *, confirmed: bool, members: int
) -> float:
    """Messages/s from one publisher to an anonymous subscriber or a group of ``members``."""
    topic = ChannelledTopic(f"bench_{uuid.uuid4().hex[:8]}", Payload, channel_count=17)
    kw = {"domain_id": domain, "namespace": namespace}
    if members:
        subs = [ChannelSubscriber(topic, group="g", **kw) for _ in range(members)]
        deadline = time.monotonic() + 10
        while sum(len(s.channels) for s in subs) != 17 or any(not s.channels for s in subs):
            if time.monotonic() > deadline:
                raise RuntimeError("group did not settle")
            time.sleep(0.01)
    else:
        subs = [ChannelSubscriber(topic, **kw)]
    pub = ChannelPublisher(topic, confirmed=confirmed, max_in_flight=16, **kw)
    received = [0]
    lock = threading.Lock()
    done = threading.Event()

    def consume(sub: ChannelSubscriber) -> None:
        while not done.is_set():
            got = next_batch(sub, 2048, done)
            with lock:
                received[0] += len(got)
                if received[0] >= count:
                    done.set()

    threads = [threading.Thread(target=consume, args=(s,), daemon=True) for s in subs]
    samples = [make(i, size) for i in range(count)]
    start = time.perf_counter()
    for th in threads:
        th.start()
    for s in samples:
        pub.publish(s)
    pub.flush(timedelta(seconds=120))
    done.wait(120)
    elapsed = time.perf_counter() - start
    for th in threads:
        th.join(5)
    pub.close()
    for s in subs:
        s.close()
    return received[0] / elapsed


def channel_latency(
    domain: int, namespace: str, size: int, rate: int, seconds: float
) -> list[float]:
    """Publish-to-receive latencies (ms) through the store at ``rate`` messages/s."""
    topic = ChannelledTopic(f"benchlat_{uuid.uuid4().hex[:8]}", Payload, channel_count=17)
    kw = {"domain_id": domain, "namespace": namespace}
    sub = ChannelSubscriber(topic, **kw)
    pub = ChannelPublisher(topic, linger=timedelta(milliseconds=1), **kw)
    lat: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            got = next_batch(sub, 256, stop)
            now = time.time_ns()
            lat.extend((now - e.value.sent_ns) / 1e6 for e in got)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    paced(lambda i: pub.publish(make(i, size)), rate, seconds)
    pub.flush()
    time.sleep(0.3)
    stop.set()
    thread.join(5)
    pub.close()
    sub.close()
    return lat


def failover(domain: int, namespace: str) -> float:
    """Seconds from SIGKILL of a member (timeout 1 s) until its channels flow to the survivor."""
    topic = ChannelledTopic(f"benchfail_{uuid.uuid4().hex[:8]}", Payload, channel_count=4)
    kw = {"domain_id": domain, "namespace": namespace}
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
        pub.publish(make(0, 8))
        pub.flush()
        time.sleep(0.01)
    elapsed = time.perf_counter() - killed
    pub.close()
    survivor.close()
    return elapsed


def member_main(domain: int, namespace: str, topic: str) -> None:
    sub = ChannelSubscriber(
        ChannelledTopic(topic, Payload, channel_count=4),
        group="g",
        timeout=timedelta(seconds=1),
        domain_id=domain,
        namespace=namespace,
    )
    print("ready", flush=True)
    while True:
        sub.receive(64).result()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "42"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer messages")
    parser.add_argument("--member", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.member:
        member_main(int(args.member[0]), args.member[1], args.member[2])
        return
    domain = args.domain
    namespace = f"bench_{uuid.uuid4().hex[:8]}"
    scale = 0.25 if args.quick else 1.0
    counts = {64: int(40_000 * scale), 4096: int(10_000 * scale)}
    store = StoreProcess(domain, namespace)
    try:
        print(f"{'case':<44}{'msgs/s':>12}{'vs raw':>9}")
        for size, count in counts.items():
            raw = raw_throughput(domain, size, count)
            print(f"{f'raw cyclonedds, {size} B':<44}{raw:>12,.0f}{1.0:>9.2f}")
            for confirmed in (True, False):
                for members in (0, 4):
                    rate = channel_throughput(
                        domain, namespace, size, count, confirmed=confirmed, members=members
                    )
                    who = "anonymous" if not members else f"{members}-member group"
                    mode = "confirmed" if confirmed else "unconfirmed"
                    label = f"store, {size} B, {mode}, {who}"
                    print(f"{label:<44}{rate:>12,.0f}{rate / raw:>9.2f}")
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
        print(f"(median of raw samples kept for reference: {statistics.median(raw_lat):.2f} ms)")
    finally:
        store.close()


if __name__ == "__main__":
    main()
