"""Elements of 64 B to 1 MiB: plain topics (dcps, the raw binding, C ddsperf) and through the store.

Run: ``python -m benchmarks.bench_sizes [--quick] [--runs N] [--sizes 4KiB,1MiB] [--json F]``.
Traffic stays on loopback (``benchmarks/__init__.py``). Sizes are payload
bytes: 64 B, 1 KiB, 4 KiB, 64 KiB, 1 MiB.

Plain topics (all in the same run, alternating per size):

* **raw**: the ``cyclonedds`` binding with ``struct { int64 seq; int64 stamp;
  uint8 data[N]; }``, the payload given as ``bytes`` (its fast path: the array
  machine packs ``bytes`` with one ``struct`` call and reads back ``bytes``);
* **dcps**: the same IDL as an ``idl.Struct``, the payload a numpy array;
* **ddsperf**: Debian's C ``ddsperf`` (``pub size N`` and ``sub`` as two
  processes; its KS topic, a sequence of octets), the physical limit of this
  machine: the median of its per-second rates after the first second.

Network settings: the raw binding and ``ddsperf`` run with Cyclone's own
defaults (``CYCLONEDDS_URI``, pinned to loopback by ``benchmarks/__init__.py``).
Every dcps process (plain dcps, the store, its publisher and subscribers) runs
with dcps's loopback defaults, as a user's loopback ``NetworkConfig`` gets them
(``DCPS_INTERFACES=lo``: 60000-byte fragments and a 4 MiB socket receive
buffer, see ``dcps.NetworkConfig``); ``--cyclone-defaults`` runs them with
Cyclone's defaults instead (the comparison of ``docs/large-payloads.md``).

Writer and reader are separate processes (one long-lived pair per API, fed
commands over stdin), RELIABLE (max_blocking_time 10 s) and KEEP_ALL; the
reader checks every sequence number arrived once. Rate = N / (the reader's
time of the last sample - the writer's time before the first write) on the
system-wide monotonic clock.

Through the store (its own process, ``benchmarks/_store_process.py``,
synchronous=NORMAL): one ``ChannelPublisher`` with the default settings in a
peer process, confirmed or unconfirmed, to an anonymous subscriber or a
4-member group in this process (17 channels, ordered by key over 64 keys);
the same element type as the plain ``dcps`` case. Rate = N / (time of the
last element received - the publisher's time before its first publish).

Per case: elements/s, MB/s (payload bytes), CPU us per element of the
writing/publishing process (``w cpu``), of the reading/subscribing process
(``r cpu``) and of the store (``store cpu``; every thread of each process,
Cyclone's included), and the store's bytes per element: written to the disk
(``/proc/<pid>/io`` ``write_bytes``: SQLite's WAL and checkpoints) and kept
(growth of its data directory).

Also, same run: the disk's own sequential write speed with fsync (64 MiB in
1 MiB chunks, ``fsync`` after each, on the filesystem of the store's data),
and publish->receive latency at 1,000 elements/s of 64 B (p50, p99, p99.9):
raw binding, plain dcps, the store with the publisher's defaults and with
``linger=0``.

``--profile DIR`` instead samples the store, the publisher and the subscriber
process with ``py-spy`` (``py-spy`` must be on PATH) during a confirmed
anonymous store case per size, and prints CPU us per element per thread,
grouped by the thread's entry function (see ``docs/large-payloads.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

#: What ``python -m benchmarks --quick`` passes to this benchmark.
QUICK_ARGS = ["--quick"]

SIZES = {"64B": 64, "1KiB": 1024, "4KiB": 4096, "64KiB": 65536, "1MiB": 1 << 20}
#: elements per case (plain topics, through the store): ~1-3 s each at this machine's rates
PLAIN_COUNTS = {64: 20_000, 1024: 20_000, 4096: 10_000, 65536: 2_000, 1 << 20: 200}
STORE_COUNTS = {64: 100_000, 1024: 50_000, 4096: 20_000, 65536: 2_000, 1 << 20: 200}
STORE_CASES = [(True, 0), (True, 4), (False, 0), (False, 4)]  # (confirmed, members)
KEYS = 64
CHANNELS = 17
TAKE_MAX = 1000
WAIT_S = 120.0
#: ChannelPublisher options of the store cases besides the defaults, from
#: ``DCPS_BENCH_PUBLISHER="batch_bytes=262144,max_in_flight=4"`` (to try settings)
PUBLISHER_OPTIONS = {
    k: int(v)
    for k, _, v in (
        o.partition("=") for o in os.environ.get("DCPS_BENCH_PUBLISHER", "").split(",") if o
    )
}
#: py-spy samples per second in ``--profile`` (DCPS_PROFILE_RATE overrides)
PROFILE_RATE = int(os.environ.get("DCPS_PROFILE_RATE", "200"))
#: ``--profile`` samples C frames too (py-spy ``--native``) when DCPS_PROFILE_NATIVE=1
PROFILE_NATIVE = os.environ.get("DCPS_PROFILE_NATIVE") == "1"


def label(size: int) -> str:
    return next(k for k, v in SIZES.items() if v == size)


def size_of(name: str) -> int:
    """A size of ``--sizes``: a label (``64B``, ``4KiB``) or its bytes (``64``, ``4096``)."""
    if name in SIZES:
        return SIZES[name]
    if name.isdigit() and int(name) in SIZES.values():
        return int(name)
    raise SystemExit(f"--sizes: unknown size {name!r}; one of {', '.join(SIZES)} (or its bytes)")


# ---------------------------------------------------------------------- types


@cache
def raw_type(size: int) -> Any:
    """The raw binding's ``bench_sizes::Raw<N>``: seq, stamp and a ``uint8[N]`` array."""
    from dataclasses import dataclass

    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl import types as t

    ns: dict[str, Any] = {"t": t, "IdlStruct": IdlStruct, "__name__": __name__}
    source = (
        f"class Raw{size}(IdlStruct, typename='bench_sizes::Raw{size}'):\n"
        f"    seq: t.int64\n    stamp: t.int64\n    data: t.array[t.uint8, {size}]\n"
    )
    # a class per size needs its annotation spelled out; evaluated annotations
    # (dont_inherit: not this module's ``from __future__ import annotations``)
    exec(compile(source, __file__, "exec", dont_inherit=True), ns)
    return dataclass(ns[f"Raw{size}"])


@cache
def dcps_type(size: int) -> Any:
    """The same IDL in ``idl``: ``bench_sizes::Fast<N>`` with a ``key`` for channels.

    The plain topics use ``key = 0`` throughout (one instance, like the raw type
    which has none); the store spreads 64 keys over its channels.
    """
    import idl

    return idl.make_struct(
        f"Fast{size}",
        {
            "key": idl.int32,
            "seq": idl.int64,
            "stamp": idl.int64,
            "data": idl.array[idl.uint8, size],
        },
        typename=f"bench_sizes::Fast{size}",
        keys=("key",),
        module=__name__,
    )


@cache
def payload(size: int, kind: str) -> Any:
    if kind == "raw":
        return bytes(range(256)) * (size // 256) + bytes(size % 256)
    import numpy as np

    return np.arange(size, dtype=np.uint32).astype(np.uint8)


# ---------------------------------------------------------------------- peers
# The plain writer/reader and the store publisher run as processes of their own,
# fed one JSON command per line on stdin, answering one JSON event per line.


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class _RawEnds:
    def __init__(self, domain: int, prefix: str, role: str, sizes: list[int]) -> None:
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

        self.dp = DomainParticipant(domain)
        qos = Qos(
            Policy.Reliability.Reliable(max_blocking_time=duration(seconds=10)),
            Policy.History.KeepAll,
        )
        self.ends: dict[int, Any] = {}
        self.waitsets: dict[int, Any] = {}
        self._timeout = duration(seconds=1)
        for size in sizes:
            topic = Topic(self.dp, f"{prefix}_raw_{size}", raw_type(size))
            if role == "writer":
                self.ends[size] = DataWriter(self.dp, topic, qos=qos)
            else:
                reader = DataReader(self.dp, topic, qos=qos)
                ws = WaitSet(self.dp)
                mask = SampleState.NotRead | ViewState.Any | InstanceState.Any
                ws.attach(ReadCondition(reader, mask))
                self.ends[size], self.waitsets[size] = reader, ws

    def matched(self) -> bool:
        for end in self.ends.values():
            status = (
                end.get_publication_matched_status()
                if hasattr(end, "write")
                else end.get_subscription_matched_status()
            )
            if status.current_count < 1:
                return False
        return True

    def writer(self, size: int) -> Callable[[int, int], None]:
        cls, data, write = raw_type(size), payload(size, "raw"), self.ends[size].write
        return lambda seq, stamp: write(cls(seq, stamp, data))

    def wait_acks(self, size: int) -> None:
        self.ends[size].wait_for_acks(self._timeout * 60)  # type: ignore[operator]

    def take(self, size: int) -> list[int]:
        self.waitsets[size].wait(self._timeout)
        return [s.seq for s in self.ends[size].take(N=TAKE_MAX)]


class _DcpsEnds:
    def __init__(self, domain: int, prefix: str, role: str, sizes: list[int]) -> None:
        import dcps
        import qos as q

        self._timeout_error = dcps.DcpsTimeoutError
        self.dp = dcps.DomainParticipant(domain)
        reliable = q.Reliability.reliable(timedelta(seconds=10))
        self.ends: dict[int, Any] = {}
        self.waitsets: dict[int, Any] = {}
        for size in sizes:
            topic = dcps.Topic(self.dp, f"{prefix}_dcps_{size}", dcps_type(size))
            if role == "writer":
                wqos = q.DataWriterQos(reliable, q.History.KEEP_ALL)
                self.ends[size] = dcps.DataWriter(self.dp, topic, qos=wqos)
            else:
                rqos = q.DataReaderQos(reliable, q.History.KEEP_ALL)
                reader = dcps.DataReader(self.dp, topic, qos=rqos)
                ws = dcps.WaitSet(self.dp)
                ws.attach(dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ))
                self.ends[size], self.waitsets[size] = reader, ws

    def matched(self) -> bool:
        for end in self.ends.values():
            status = (
                end.publication_matched_status
                if hasattr(end, "write")
                else end.subscription_matched_status
            )
            if status.current_count < 1:
                return False
        return True

    def writer(self, size: int) -> Callable[[int, int], None]:
        cls, data, write = dcps_type(size), payload(size, "dcps"), self.ends[size].write
        return lambda seq, stamp: write(cls(0, seq, stamp, data))

    def wait_acks(self, size: int) -> None:
        self.ends[size].wait_for_acknowledgments(60)

    def take(self, size: int) -> list[int]:
        try:
            self.waitsets[size].wait(1.0)
        except self._timeout_error:
            return []
        return [s.data.seq for s in self.ends[size].take(TAKE_MAX)]


def plain_peer(impl: str, role: str, domain: int, prefix: str, sizes: list[int]) -> None:
    """A plain writer or reader process: ``send``/``expect`` commands, one per size and run."""
    ends = (_RawEnds if impl == "raw" else _DcpsEnds)(domain, prefix, role, sizes)
    emit(ev="ready")
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "matched":
            deadline = time.monotonic() + 30
            while not ends.matched() and time.monotonic() < deadline:
                time.sleep(0.01)
            emit(ev="matched", ok=ends.matched())
        elif cmd["op"] == "send":
            size, count = cmd["size"], cmd["count"]
            write, clock = ends.writer(size), time.monotonic_ns
            cpu = time.process_time_ns()
            start = clock()
            for seq in range(count):
                write(seq, clock())
            ends.wait_acks(size)
            emit(ev="sent", start_ns=start, cpu_ns=time.process_time_ns() - cpu)
        elif cmd["op"] == "expect":
            size, count = cmd["size"], cmd["count"]
            emit(ev="expecting")
            cpu = time.process_time_ns()
            seen: set[int] = set()
            last = time.monotonic_ns()
            deadline = time.monotonic() + WAIT_S
            while len(seen) < count and time.monotonic() < deadline:
                got = ends.take(size)
                if got:
                    last = time.monotonic_ns()
                    seen.update(got)
            ok = seen == set(range(count))
            emit(
                ev="received",
                last_ns=last,
                cpu_ns=time.process_time_ns() - cpu,
                ok=ok,
                distinct=len(seen),
            )
        elif cmd["op"] == "quit":
            return


def publisher_peer(domain: int, namespace: str) -> None:
    """The store case's publisher process: ``publish`` commands, one per case."""
    from dcps.channels import ChannelledTopic, ChannelPublisher

    emit(ev="ready")
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["op"] == "quit":
            return
        size, count, confirmed = cmd["size"], cmd["count"], cmd["confirmed"]
        cls, data = dcps_type(size), payload(size, "dcps")
        topic = ChannelledTopic(cmd["topic"], cls, channel_count=CHANNELS)
        kw: dict[str, Any] = {"linger": timedelta(seconds=cmd["linger"])} if "linger" in cmd else {}
        if PUBLISHER_OPTIONS:  # e.g. batch_bytes=262144 (DCPS_BENCH_PUBLISHER)
            kw.update(PUBLISHER_OPTIONS)
        pub = ChannelPublisher(
            topic, domain_id=domain, namespace=namespace, confirmed=confirmed, **kw
        )
        emit(ev="connected")
        sys.stdin.readline()  # "go"
        clock = time.monotonic_ns
        futures = []
        cpu = time.process_time_ns()
        start = clock()
        if cmd.get("rate"):
            rate = cmd["rate"]
            t0 = time.perf_counter()
            for seq in range(count):
                delay = t0 + seq / rate - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pub.publish(cls(seq % KEYS, seq, time.time_ns(), data)))
        else:
            for seq in range(count):
                futures.append(pub.publish(cls(seq % KEYS, seq, clock(), data)))
        pub.flush(timedelta(seconds=WAIT_S))
        cpu = time.process_time_ns() - cpu
        distinct = len({f.result(0) for f in futures}) if confirmed else count
        pub.close()
        emit(ev="published", start_ns=start, cpu_ns=cpu, distinct=distinct)


class Peer:
    """A peer process of this module, driven over stdin/stdout."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_sizes", "--peer", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.expect("ready", timeout=60)

    def send(self, **cmd: Any) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()

    def expect(self, ev: str, timeout: float = WAIT_S) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the peer itself gives up after WAIT_S
        if not line:
            raise RuntimeError(f"peer {self.proc.args} died (exit {self.proc.wait(10)})")
        event = json.loads(line)
        if event.get("ev") != ev:
            raise RuntimeError(f"peer sent {event}, expected {ev!r}")
        return event

    def close(self) -> None:
        try:
            self.send(op="quit")
            self.proc.wait(30)
        except (BrokenPipeError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------------- measurements


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far, from ``/proc``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def write_bytes(pid: int) -> int:
    """Bytes the process caused to be written to storage so far (``/proc/<pid>/io``)."""
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise RuntimeError("no write_bytes in /proc io")


def dir_bytes(path: str) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def disk_write_speed(directory: str, mib: int = 64) -> float:
    """MB/s writing ``mib`` MiB in 1 MiB chunks with ``fsync`` after each, in ``directory``."""
    chunk = os.urandom(1 << 20)
    path = os.path.join(directory, f"disk-probe-{uuid.uuid4().hex[:8]}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        for _ in range(mib):
            os.write(fd, chunk)
            os.fsync(fd)
        elapsed = time.perf_counter() - start
    finally:
        os.close(fd)
        os.unlink(path)
    return mib * (1 << 20) / elapsed / 1e6


class Result(dict[str, float]):
    """One case's figures: ``rate``, ``mb_s``, ``w_cpu``, ``r_cpu``, ``store_cpu``, ..."""


def plain_case(writer: Peer, reader: Peer, size: int, count: int) -> Result:
    reader.send(op="expect", size=size, count=count)
    reader.expect("expecting")
    writer.send(op="send", size=size, count=count)
    sent = writer.expect("sent")
    got = reader.expect("received")
    if not got["ok"]:
        raise RuntimeError(f"plain {size} B: {count} sent, {got['distinct']} distinct received")
    elapsed = (got["last_ns"] - sent["start_ns"]) / 1e9
    rate = count / elapsed
    return Result(
        rate=rate,
        mb_s=rate * size / 1e6,
        w_cpu=sent["cpu_ns"] / count / 1e3,
        r_cpu=got["cpu_ns"] / count / 1e3,
    )


_DDSPERF_SUB = re.compile(r"size (\d+) total (\d+) lost (\d+) delta (\d+)")


def ddsperf_case(domain: int, size: int, seconds: float) -> Result:
    """Debian's ``ddsperf``: ``pub size N`` for ``seconds`` to ``sub``, two processes."""
    exe = shutil.which("ddsperf")
    if exe is None:
        raise RuntimeError("ddsperf not found (Debian package cyclonedds-tools)")
    secs = max(3, round(seconds))
    sub = subprocess.Popen(
        [exe, "-i", str(domain), "-D", str(secs + 4), "sub"],
        stdout=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)  # the publisher waits for a match (-Qminmatch, -Qinitwait); sub first
    pub = subprocess.Popen(
        [
            exe,
            "-i",
            str(domain),
            "-D",
            str(secs),
            "-Qminmatch:1",
            "-Qinitwait:20",
            "pub",
            "size",
            str(max(12, size)),
        ],
        stdout=subprocess.DEVNULL,
    )
    _, _, pub_usage = os.wait4(pub.pid, 0)
    pub.returncode = 0
    sub.send_signal(2)  # SIGINT: ddsperf prints its last line and exits
    assert sub.stdout is not None
    out = sub.stdout.read()
    _, _, sub_usage = os.wait4(sub.pid, 0)
    sub.returncode = 0
    rows = [tuple(map(int, m.groups())) for m in _DDSPERF_SUB.finditer(out)]
    deltas = [d for _, _, _, d in rows if d > 0]
    total = max((t for _, t, _, _ in rows), default=0)
    if len(deltas) < 3 or total == 0:
        raise RuntimeError(f"ddsperf {size} B: too few samples in its output:\n{out}")
    rate = statistics.median(deltas[1:-1])  # whole seconds only
    return Result(
        rate=rate,
        mb_s=rate * size / 1e6,
        w_cpu=(pub_usage.ru_utime + pub_usage.ru_stime) / total * 1e6,
        r_cpu=(sub_usage.ru_utime + sub_usage.ru_stime) / total * 1e6,
    )


def store_case(
    store: Any,
    publisher: Peer,
    domain: int,
    namespace: str,
    size: int,
    count: int,
    *,
    confirmed: bool,
    members: int,
) -> Result:
    """One publisher (peer process) to an anonymous subscriber or a group, through the store."""
    from benchmarks.bench_channels import next_batch, open_subscribers
    from dcps.channels import ChannelledTopic

    name = f"sizes_{uuid.uuid4().hex[:8]}"
    topic = ChannelledTopic(name, dcps_type(size), channel_count=CHANNELS)
    subs = open_subscribers(topic, members, {"domain_id": domain, "namespace": namespace})
    publisher.send(op="publish", topic=name, size=size, count=count, confirmed=confirmed)
    publisher.expect("connected")
    seqs: list[int] = []
    last = [0]
    lock = threading.Lock()
    done = threading.Event()

    def consume(sub: Any) -> None:
        while not done.is_set():
            got = next_batch(sub, 2048, done)
            if got:
                with lock:
                    seqs.extend(e.value.seq for e in got)
                    last[0] = time.monotonic_ns()
                    if len(seqs) >= count:
                        done.set()

    threads = [threading.Thread(target=consume, args=(s,), daemon=True) for s in subs]
    for th in threads:
        th.start()
    pid = store.proc.pid
    before = (cpu_seconds(os.getpid()), cpu_seconds(pid), write_bytes(pid), dir_bytes(store.data))
    publisher.send(op="go")
    published = publisher.expect("published")
    done.wait(WAIT_S)
    after = (cpu_seconds(os.getpid()), cpu_seconds(pid), write_bytes(pid), dir_bytes(store.data))
    for th in threads:
        th.join(5)
    for s in subs:
        s.close()
    case = f"store {size} B, {'confirmed' if confirmed else 'unconfirmed'}, {members} members"
    if set(seqs) != set(range(count)):
        raise RuntimeError(f"{case}: {count} published, {len(set(seqs))} distinct received")
    if published["distinct"] != count:
        raise RuntimeError(f"{case}: {count} published, {published['distinct']} positions")
    rate = count / ((last[0] - published["start_ns"]) / 1e9)
    return Result(
        rate=rate,
        mb_s=rate * size / 1e6,
        w_cpu=published["cpu_ns"] / count / 1e3,
        r_cpu=(after[0] - before[0]) / count * 1e6,
        store_cpu=(after[1] - before[1]) / count * 1e6,
        disk_written=(after[2] - before[2]) / count,
        disk_kept=(after[3] - before[3]) / count,
    )


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def plain_latency(impl: str, domain: int, rate: int, seconds: float) -> list[float]:
    """One-way latencies (ms) of 64 B at ``rate``/s, writer and reader in this process."""
    prefix = f"lat_{uuid.uuid4().hex[:8]}"
    w = (_RawEnds if impl == "raw" else _DcpsEnds)(domain, prefix, "writer", [64])
    r = (_RawEnds if impl == "raw" else _DcpsEnds)(domain, prefix, "reader", [64])
    while not (w.matched() and r.matched()):
        time.sleep(0.01)
    lat: list[float] = []
    stop = threading.Event()
    reader = r.ends[64]

    def take() -> None:
        while not stop.is_set():
            if impl == "raw":
                r.waitsets[64].wait(r._timeout)  # type: ignore[attr-defined]
                got = [s.stamp for s in reader.take(N=64)]
            else:
                try:
                    r.waitsets[64].wait(0.2)
                except Exception:  # DcpsTimeoutError: nothing within 0.2 s
                    continue
                got = [s.data.stamp for s in reader.take(64)]
            now = time.time_ns()
            lat.extend((now - stamp) / 1e6 for stamp in got)

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    write = w.writer(64)
    start = time.perf_counter()
    for i in range(int(rate * seconds)):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        write(i, time.time_ns())
    deadline = time.monotonic() + 5
    while len(lat) < int(rate * seconds) and time.monotonic() < deadline:
        time.sleep(0.01)
    stop.set()
    thread.join(5)
    return lat


def store_latency(
    publisher: Peer,
    domain: int,
    namespace: str,
    rate: int,
    seconds: float,
    linger: float | None,
    stages: tuple[list[float], list[float]] | None = None,
) -> list[float]:
    """Publish->receive latencies (ms) of 64 B at ``rate``/s through the store (publisher peer).

    ``stages`` gets each element's publish->accept and accept->receive times
    (ms; the store's accept timestamp, whole microseconds, on the same clock).
    """
    from benchmarks.bench_channels import next_batch
    from dcps.channels import ChannelledTopic, ChannelSubscriber

    name = f"sizeslat_{uuid.uuid4().hex[:8]}"
    count = int(rate * seconds)
    sub = ChannelSubscriber(
        ChannelledTopic(name, dcps_type(64), channel_count=CHANNELS),
        domain_id=domain,
        namespace=namespace,
    )
    cmd: dict[str, Any] = {"op": "publish", "topic": name, "size": 64, "count": count}
    cmd.update(confirmed=True, rate=rate)
    if linger is not None:
        cmd["linger"] = linger
    publisher.send(**cmd)
    publisher.expect("connected")
    lat: list[float] = []
    stop = threading.Event()
    epoch = datetime(1970, 1, 1, tzinfo=UTC)

    def consume() -> None:
        while not stop.is_set() and len(lat) < count:
            got = next_batch(sub, 256, stop)
            now = time.time_ns()
            lat.extend((now - e.value.stamp) / 1e6 for e in got)
            if stages is not None:  # publish -> the store's accept time -> received
                for e in got:
                    accepted = (e.timestamp - epoch) // timedelta(microseconds=1) * 1000
                    stages[0].append((accepted - e.value.stamp) / 1e6)
                    stages[1].append((now - accepted) / 1e6)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    publisher.send(op="go")
    publisher.expect("published")
    thread.join(10)
    stop.set()
    sub.close()
    if len(lat) != count:
        raise RuntimeError(f"store latency: {count} published, {len(lat)} received")
    return lat


# ---------------------------------------------------------------------- profile


def profile(args: argparse.Namespace, sizes: list[int]) -> None:
    """py-spy the store, publisher and subscriber processes during a store case per size."""
    from benchmarks._store_process import StoreProcess

    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    out = Path(args.profile)
    out.mkdir(parents=True, exist_ok=True)
    namespace = f"sizes_{uuid.uuid4().hex[:8]}"
    store = StoreProcess(args.domain, namespace)
    publisher = Peer("publisher", str(args.domain), namespace)
    try:
        store_case(store, publisher, args.domain, namespace, 64, 5000, confirmed=True, members=0)
        for size in sizes:
            count = STORE_COUNTS[size] * 2
            procs = {
                "store": store.proc.pid,
                "publisher": publisher.proc.pid,
                "subscriber": os.getpid(),
            }
            spies = {
                who: subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(pid),
                        "--rate",
                        str(PROFILE_RATE),
                        "--threads",
                        "--format",
                        "raw",
                        # C frames need the process paused while py-spy unwinds them
                        "--native" if PROFILE_NATIVE else "--nonblocking",
                        "-o",
                        str(out / f"{label(size)}-{who}.txt"),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                for who, pid in procs.items()
            }
            time.sleep(1.0)  # py-spy attaches
            result = store_case(
                store, publisher, args.domain, namespace, size, count, confirmed=True, members=0
            )
            for s in spies.values():
                s.send_signal(2)
                s.wait(30)
            print(
                f"\n{label(size)}: {count} elements, {result['rate']:,.0f}/s, "
                f"{result['mb_s']:.1f} MB/s (py-spy attached)"
            )
            for who in procs:
                report_profile(out / f"{label(size)}-{who}.txt", who, count, PROFILE_RATE)
    finally:
        publisher.close()
        store.close()


def report_profile(path: Path, who: str, count: int, rate: int, top: int = 7) -> None:
    """CPU us per element per thread (by name) and its heaviest functions (inclusive).

    ``py-spy record --threads --format raw`` writes one collapsed stack per
    line, ``thread (TID): NAME;frame;...;frame COUNT``, active samples only.
    """
    if not path.exists():
        print(f"  {who}: no profile ({path})")
        return
    threads: Counter[str] = Counter()
    funcs: dict[str, Counter[str]] = defaultdict(Counter)
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        frames = stack.split(";")
        name = frames[0].partition(": ")[2] or frames[0]
        threads[name] += int(n)
        for f in {f.split(" (")[0] for f in frames[1:]}:
            funcs[name][f] += int(n)
    us = 1e6 / rate / count
    for name, n in threads.most_common(8):
        heavy = [(f, c) for f, c in funcs[name].most_common() if c < n][:top]
        detail = ", ".join(f"{f.rsplit('.', 1)[-1]} {c * us:,.0f}" for f, c in heavy)
        print(f"  {who:<10} {name[:28]:<28} {n * us:>9,.1f} us/elem  [{detail}]")


# ---------------------------------------------------------------------- main


def use_dcps_network(enabled: bool, domain: int) -> Any:
    """Give this process and its dcps children dcps's loopback network defaults.

    Only when the benchmarks' own loopback pin is in force (a ``CYCLONEDDS_URI``
    set by the caller is left alone). Sets ``DCPS_INTERFACES=lo`` (and ``lo``
    as a multicast interface) for the children, and configures ``domain`` in
    this process at once, before its raw-binding latency ends could create it
    with Cyclone's defaults. Returns the participant that keeps it configured.
    """
    from benchmarks import LOOPBACK_URI

    if not enabled or os.environ.get("CYCLONEDDS_URI") != LOOPBACK_URI:
        return None
    os.environ["DCPS_INTERFACES"] = "lo"
    os.environ["DCPS_MULTICAST_INTERFACES"] = "lo"
    import dcps

    return dcps.DomainParticipant(domain)


def fmt(value: float, digits: int = 0) -> str:
    return f"{value:,.{digits}f}" if value == value else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "42"))
    )
    parser.add_argument("--quick", action="store_true", help="64 B, 4 KiB, 1 MiB, few elements")
    parser.add_argument("--runs", type=int, help="runs per case (median; default 3, --quick 1)")
    parser.add_argument(
        "--sizes", help="comma-separated, of " + ", ".join(SIZES) + " (or their bytes: 64,4096)"
    )
    parser.add_argument("--json", help="write every run's figures to this file")
    parser.add_argument("--no-ddsperf", action="store_true", help="skip Debian's ddsperf")
    parser.add_argument(
        "--no-plain-dcps",
        action="store_true",
        help="skip the plain dcps path (the raw binding stays: the store's reference)",
    )
    parser.add_argument(
        "--plain-only", action="store_true", help="plain topics only (e.g. to try Cyclone settings)"
    )
    parser.add_argument(
        "--latency-only", action="store_true", help="only the latency cases (--runs times)"
    )
    parser.add_argument("--no-latency", action="store_true", help="skip the latency cases")
    parser.add_argument(
        "--cyclone-defaults",
        action="store_true",
        help="dcps processes use Cyclone's network defaults, not dcps's loopback ones",
    )
    parser.add_argument("--profile", metavar="DIR", help="py-spy the store path instead (see doc)")
    parser.add_argument("--peer", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        kind, rest = args.peer[0], args.peer[1:]
        if kind == "publisher":
            publisher_peer(int(rest[0]), rest[1])
        else:
            plain_peer(kind, rest[0], int(rest[1]), rest[2], [int(s) for s in rest[3].split(",")])
        return
    names = (
        args.sizes.split(",")
        if args.sizes
        else (["64B", "4KiB", "1MiB"] if args.quick else list(SIZES))
    )
    sizes = [size_of(n) for n in names]
    if args.latency_only:
        sizes = []
    _network = use_dcps_network(not args.cyclone_defaults, args.domain)  # kept alive
    if args.profile:
        profile(args, sizes)
        return
    runs = args.runs or (1 if args.quick else 3)
    scale = 0.1 if args.quick else 1.0
    domain = args.domain
    namespace = f"sizes_{uuid.uuid4().hex[:8]}"
    prefix = f"sizes_{uuid.uuid4().hex[:8]}"
    from benchmarks._store_process import StoreProcess

    csv = ",".join(map(str, sorted({64, *sizes})))  # 64 B: the warm-up
    store = StoreProcess(domain, namespace)
    peers: dict[str, tuple[Peer, Peer]] = {}
    publisher = Peer("publisher", str(domain), namespace)
    results: dict[str, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    try:
        impls = ("raw",) if args.no_plain_dcps else ("raw", "dcps")
        for impl in impls:
            reader = Peer(impl, "reader", str(domain), prefix, csv)
            writer = Peer(impl, "writer", str(domain), prefix, csv)
            for p in (reader, writer):
                p.send(op="matched")
                if not p.expect("matched")["ok"]:
                    raise RuntimeError(f"{impl} writer and reader did not match")
            peers[impl] = (writer, reader)
        disk = [disk_write_speed(store.data, 16 if args.quick else 64)]
        # warm-up, not measured: first-use costs (codec generation, imports, SQLite pages)
        for impl in impls:
            plain_case(*peers[impl], 64, 500)
        if not args.plain_only:
            store_case(store, publisher, domain, namespace, 64, 2000, confirmed=True, members=0)
        for run in range(runs):
            for size in sizes:
                key = label(size)
                plain = max(20, int(PLAIN_COUNTS[size] * scale))
                through = max(20, int(STORE_COUNTS[size] * scale))
                for impl in impls if run % 2 == 0 else impls[::-1]:
                    results[key][impl].append(plain_case(*peers[impl], size, plain))
                if not args.no_ddsperf:
                    results[key]["ddsperf"].append(
                        ddsperf_case(domain, size, 1 if args.quick else 3)
                    )
                for confirmed, members in [] if args.plain_only else STORE_CASES:
                    mode = "conf" if confirmed else "unconf"
                    case = f"store {mode} {'group4' if members else 'anon'}"
                    results[key][case].append(
                        store_case(
                            store,
                            publisher,
                            domain,
                            namespace,
                            size,
                            through,
                            confirmed=confirmed,
                            members=members,
                        )
                    )
            disk.append(disk_write_speed(store.data, 16 if args.quick else 64))
        lat_secs = 1.0 if args.quick else 5.0
        latency: dict[str, list[list[float]]] = defaultdict(list)
        stage_lat: dict[str, list[list[float]]] = defaultdict(list)
        for _ in range(runs if args.latency_only else 1):
            if args.plain_only or args.no_latency:
                break
            latency["raw"].append(plain_latency("raw", domain, 1000, lat_secs))
            if "dcps" in impls:
                latency["dcps plain"].append(plain_latency("dcps", domain, 1000, lat_secs))
            for name, linger in (("store, defaults", None), ("store, linger=0", 0.0)):
                split: tuple[list[float], list[float]] = ([], [])
                latency[name].append(
                    store_latency(publisher, domain, namespace, 1000, lat_secs, linger, split)
                )
                stage_lat[f"{name}: publish->accept"].append(split[0])
                stage_lat[f"{name}: accept->receive"].append(split[1])
    finally:
        publisher.close()
        for pair in peers.values():
            for p in pair:
                p.close()
        store.close()
    disk_mb = statistics.median(disk)
    print(
        f"median of {runs} run(s); load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"disk sequential write with fsync per 1 MiB: {disk_mb:,.0f} MB/s "
        f"(each: {', '.join(f'{d:,.0f}' for d in disk)})"
    )
    head = (
        f"{'size':<6} {'path':<22}{'elem/s':>10}{'MB/s':>9}{'vs raw':>8}{'vs disk':>8}"
        f"{'w cpu':>8}{'r cpu':>8}{'store':>8}{'disk B/el':>11}{'kept B/el':>11}"
    )
    print(head)
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for key, cases in results.items():
        raw_rate = statistics.median(r["rate"] for r in cases["raw"])
        for case, values in cases.items():
            med = {f: statistics.median(v.get(f, float("nan")) for v in values) for f in values[0]}
            summary.setdefault(key, {})[case] = med
            print(
                f"{key:<6} {case:<22}{fmt(med['rate']):>10}{fmt(med['mb_s'], 1):>9}"
                f"{med['rate'] / raw_rate:>8.2f}{med['mb_s'] / disk_mb:>8.2f}"
                f"{fmt(med['w_cpu'], 1):>8}{fmt(med['r_cpu'], 1):>8}"
                f"{fmt(med.get('store_cpu', float('nan')), 1):>8}"
                f"{fmt(med.get('disk_written', float('nan'))):>11}"
                f"{fmt(med.get('disk_kept', float('nan'))):>11}"
            )
    lat_runs = max((len(v) for v in latency.values()), default=0)
    if lat_runs:
        print(
            f"\nlatency at 1,000 elements/s, 64 B (ms; median of {lat_runs} run(s))"
            f"{'p50':>6}{'p99':>8}{'p99.9':>8}   each run's p50 / p99"
        )
        for name, per_run in [*latency.items(), *stage_lat.items()]:
            each = ", ".join(f"{pct(v, 0.5):.2f}/{pct(v, 0.99):.2f}" for v in per_run)
            print(
                f"  {name:<40}{statistics.median(pct(v, 0.5) for v in per_run):>6.2f}"
                f"{statistics.median(pct(v, 0.99) for v in per_run):>8.2f}"
                f"{statistics.median(pct(v, 0.999) for v in per_run):>8.2f}   {each}"
            )
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "disk_mb_s": disk,
                    "runs": {k: {c: list(v) for c, v in cs.items()} for k, cs in results.items()},
                    "medians": summary,
                    "latency_ms": {
                        k: [
                            {"p50": pct(v, 0.5), "p99": pct(v, 0.99), "p999": pct(v, 0.999)}
                            for v in per_run
                        ]
                        for k, per_run in latency.items()
                    },
                    "latency_stages_ms": {
                        k: [{"p50": pct(v, 0.5), "p99": pct(v, 0.99)} for v in per_run]
                        for k, per_run in stage_lat.items()
                    },
                    "loadavg": os.getloadavg(),
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
