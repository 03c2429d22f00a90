"""The durability service: a late joiner's history, and what the service costs a live writer.

Run: ``python -m benchmarks.bench_durability [--quick] [--count N] [--runs N]``.

A standalone :class:`~dcps.store.DurabilityService` runs in a process of its
own (this module with ``--serve``), on loopback.

1. **Late joiner.** A TRANSIENT writer (DurabilityService KEEP_ALL) writes
   ``count`` readings (100 sensors); once the service keeps them all, a
   TRANSIENT KEEP_ALL reader is created and the time until it has taken every
   one is measured: stored samples/s delivered to a late joiner (target >=
   200 k/s; median of ``--late-runs``). The service process's CPU time per
   kept sample is printed too (Linux: from ``/proc``), and this process's CPU
   from the reader's creation to its last take, per 100 k samples.
2. **Cost to a live writer.** Throughput of a TRANSIENT writer to a plain
   reader in this process, with and without the service process matched
   (alternating, same run; median msgs/s; target ratio >= 0.9). The writers
   batch (the default for TRANSIENT writers, see
   :mod:`dcps._write_batching`); the same served case with ``batching=False``
   runs in the same rounds, to show what batching moves. For reference, a
   fourth case replaces the service by a plain reliable KEEP_ALL reader in
   another process that never takes (this module with ``--listen``): what
   the transport to any remote subscriber costs the writer (each packet goes
   out as a UDP datagram and must be acknowledged), so the service's own
   share can be told apart. The writer process's CPU per message is printed
   for each case: on a loaded machine the rates swing with the scheduler, the
   CPU much less.
3. **What batching costs in latency.** Round trips of a reliable writer's
   pings to an echo in another process (this module with ``--echo``), with
   batching on and off (alternating): idle pings (the next one once the
   echo came back, a 2 ms pause between) and a stream of pings 0.2 ms apart,
   both of which batching sends at once (each write comes 50 us or more after
   the one before), and bursts of ``BURST`` pings written back to back (then
   a 2 ms pause), whose second to last pings batching holds until the burst
   ends (see :mod:`dcps._write_batching`). p50 and p99 round trip in
   microseconds.

``--only late``, ``--only live`` or ``--only latency`` runs one part.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from datetime import timedelta

import dcps
import idl
import qos as q

QUICK_ARGS = ["--quick"]
#: Pings per burst in the latency part (written back to back).
BURST = 10


class Reading(idl.Struct, typename="bench::DurableReading"):
    sensor: idl.key[idl.int32]
    value: idl.float64
    seq: idl.int64


def listen(domain: int) -> None:
    """The reference process: for each topic name on stdin, a plain reliable KEEP_ALL
    reader (answers ``ok`` once it exists). It never takes: Cyclone acknowledges what
    it keeps all the same, so the writer pays only the transport, the least that any
    remote subscriber costs it (a reader that also decodes costs its host more CPU)."""
    with dcps.DomainParticipant(domain) as dp:
        print("ready", flush=True)
        readers = []
        for line in sys.stdin:
            topic = dcps.Topic(dp, line.strip(), Reading)
            qos = q.DataReaderQos(q.Reliability.RELIABLE, q.History.KEEP_ALL)
            readers.append(dcps.DataReader(dp, topic, qos=qos))
            print("ok", flush=True)


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


def echo(domain: int) -> None:
    """The latency peer: takes every ping (topic ``bench_ping``) and writes it back
    (``bench_pong``) at once, without batching."""
    with dcps.DomainParticipant(domain) as dp:
        reliable = q.Reliability.reliable(timedelta(seconds=10))
        pings = dcps.DataReader(
            dp,
            dcps.Topic(dp, "bench_ping", Reading),
            qos=q.DataReaderQos(reliable, q.History.KEEP_ALL),
        )
        pongs = dcps.DataWriter(
            dp,
            dcps.Topic(dp, "bench_pong", Reading),
            qos=q.DataWriterQos(reliable, q.History.KEEP_ALL),
            batching=False,
        )
        pongs.wait_for_readers()
        done = threading.Event()  # set when stdin closes: the benchmark is over
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        waiter = _Waiter(dp, pings)
        print("ready", flush=True)
        while not done.is_set():
            for ping in pings.take():
                pongs.write(ping.data)
            waiter.wait(0.2)


class _Waiter:
    """Waits for unread samples of one reader (one wait set for every wait)."""

    def __init__(self, dp: dcps.DomainParticipant, reader: dcps.DataReader[Reading]) -> None:
        self.waitset = dcps.WaitSet(dp)
        self.waitset.attach(dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ))

    def wait(self, seconds: float) -> None:
        with contextlib.suppress(dcps.DcpsTimeoutError):
            self.waitset.wait(seconds)


class _Peer:
    """This module in another process (``--serve`` or ``--listen``), spoken to by lines."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.bench_durability", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the benchmark's {args[0]} process did not start")

    def ask(self, line: str) -> str:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(f"{line}\n")
        self.process.stdin.flush()
        return self.process.stdout.readline().strip()

    def cpu_seconds(self) -> float | None:
        """The process's CPU time so far (None where /proc is not available)."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(30)


class _Service(_Peer):
    def __init__(self, domain: int, namespace: str) -> None:
        super().__init__("--serve", str(domain), namespace)

    def count(self, topic: str) -> int:
        return int(self.ask(f"count {topic}"))


def late_joiner(
    dp: dcps.DomainParticipant, service: _Service, count: int
) -> tuple[float, float | None, float]:
    """Stored samples per second a new TRANSIENT reader receives, the service's CPU
    seconds per sample it kept (None if unknown), and this process's CPU seconds from
    the reader's creation until it took everything (every thread: Cyclone's receive
    threads too; on a loaded machine a steadier figure than the rate)."""
    name = f"durable_{uuid.uuid4().hex[:8]}"
    topic = dcps.Topic(dp, name, Reading)
    # the writer waits for the service's reader: what it writes before that is not kept
    os.environ["DCPS_DURABILITY_WRITER_WAIT"] = "5"
    keep_all = q.DurabilityService(history=q.History.KEEP_ALL)
    writer = dcps.DataWriter(
        dp,
        topic,
        qos=q.DataWriterQos(
            q.Durability.TRANSIENT,
            # it writes 100 k samples as fast as it can: under load the service's receive
            # thread may not acknowledge within the default 100 ms; not what is measured
            q.Reliability.reliable(timedelta(seconds=30)),
            q.History.KEEP_ALL,
            keep_all,
            # closing it must not dispose the instances (the service would forget them)
            q.WriterDataLifecycle(autodispose_unregistered_instances=False),
        ),
    )
    cpu_before = service.cpu_seconds()
    for i in range(count):
        writer.write(Reading(i % 100, float(i), i))
    deadline = time.monotonic() + 600
    while service.count(name) < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the service did not keep every sample")
        time.sleep(0.05)  # polling another process's count; not a synchronisation
    cpu_after = service.cpu_seconds()
    cpu = None if cpu_before is None or cpu_after is None else (cpu_after - cpu_before) / count
    writer.close()
    start = time.perf_counter()
    cpu_start = time.process_time()
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
    reader_cpu = time.process_time() - cpu_start
    reader.close()
    return count / elapsed, cpu, reader_cpu


def live_throughput(
    dp: dcps.DomainParticipant,
    count: int,
    served: bool,
    listener: _Peer | None = None,
    batching: bool = True,
) -> tuple[float, float]:
    """msgs/s of a TRANSIENT writer to a plain reader in this process (its topic
    ``served_*`` is kept by the service, ``plain_*`` is not; ``listener``: a plain
    reader in that process reads it too), and this process's CPU us per msg (writer
    and reader: on a loaded machine steadier than the rate, which also counts the
    time the other processes take the CPU away)."""
    prefix = "served" if served else "plain"
    os.environ["DCPS_DURABILITY_WRITER_WAIT"] = "5" if served else "0"
    topic = dcps.Topic(dp, f"{prefix}_{uuid.uuid4().hex[:8]}", Reading)
    if listener is not None and listener.ask(topic.name) != "ok":
        raise RuntimeError("the listening process did not create its reader")
    writer = dcps.DataWriter(
        dp,
        topic,
        qos=q.DataWriterQos(
            q.Durability.TRANSIENT,
            # under load a remote reader may not acknowledge within the default 100 ms,
            # and a full history cache then fails the write: it waits instead (as above)
            q.Reliability.reliable(timedelta(seconds=30)),
            q.History.KEEP_ALL,
        ),
        batching=batching,
    )
    reader = dcps.DataReader(
        dp, topic, qos=q.DataReaderQos(q.Reliability.RELIABLE, q.History.KEEP_ALL)
    )
    # the service's reader matched the writer at its creation (DCPS_DURABILITY_WRITER_WAIT)
    writer.wait_for_readers(2 if served or listener is not None else 1)
    start = time.perf_counter()
    cpu_start = time.process_time()
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
    cpu = time.process_time() - cpu_start
    writer.close()
    reader.close()
    return count / elapsed, cpu / count * 1e6


def round_trips(
    dp: dcps.DomainParticipant, pongs: dcps.DataReader[Reading], batching: bool, count: int
) -> tuple[list[float], list[float], list[float]]:
    """Round trips in us through the ``--echo`` process: idle pings, a stream, bursts."""
    reliable = q.Reliability.reliable(timedelta(seconds=10))
    writer = dcps.DataWriter(
        dp,
        dcps.Topic(dp, "bench_ping", Reading),
        qos=q.DataWriterQos(reliable, q.History.KEEP_ALL),
        batching=batching,
    )
    writer.wait_for_readers()
    waiter = _Waiter(dp, pongs)
    pongs.take()  # late answers of the run before

    def answers(into: list[float], wanted: int) -> None:
        """Wait until ``into`` holds ``wanted`` round trips (at most 10 s)."""
        deadline = time.monotonic() + 10
        while len(into) < wanted and time.monotonic() < deadline:
            waiter.wait(1)
            now = time.perf_counter()
            into += [(now - pong.data.value) * 1e6 for pong in pongs.take()]

    idle: list[float] = []
    for i in range(count):
        writer.write(Reading(0, time.perf_counter(), i))
        answers(idle, i + 1)
        time.sleep(0.002)  # the pause that makes the next ping an idle one
    stream: list[float] = []
    for i in range(count):
        writer.write(Reading(1, time.perf_counter(), i))
        time.sleep(0.0002)
        now = time.perf_counter()
        stream += [(now - pong.data.value) * 1e6 for pong in pongs.take()]
    answers(stream, count)
    bursts: list[float] = []
    for start in range(0, count, BURST):
        for i in range(start, min(start + BURST, count)):
            writer.write(Reading(2, time.perf_counter(), i))
        answers(bursts, min(start + BURST, count))
        time.sleep(0.002)
    writer.close()
    waiter.waitset.close()
    return idle, stream, bursts


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    if not ordered:
        return "no answers"
    p50 = ordered[len(ordered) // 2]
    p99 = ordered[min(len(ordered) - 1, len(ordered) * 99 // 100)]
    return f"p50 {p50:,.0f} us, p99 {p99:,.0f} us, max {ordered[-1]:,.0f} us"


def latency(domain: int, count: int, runs: int) -> None:
    """Print the round trips with batching on and off (alternating runs, pooled)."""
    results: dict[bool, tuple[list[float], list[float], list[float]]] = {
        True: ([], [], []),
        False: ([], [], []),
    }
    with dcps.DomainParticipant(domain) as dp:
        pongs = dcps.DataReader(
            dp,
            dcps.Topic(dp, "bench_pong", Reading),
            qos=q.DataReaderQos(q.Reliability.RELIABLE, q.History.KEEP_ALL),
        )
        peer = _Peer("--echo", str(domain))
        try:
            for _ in range(runs):
                for batching in (False, True):
                    for pooled, got in zip(
                        results[batching], round_trips(dp, pongs, batching, count), strict=True
                    ):
                        pooled.extend(got)
        finally:
            peer.close()
    for batching in (False, True):
        idle, stream, bursts = results[batching]
        print(
            f"ping round trip, batching {'on ' if batching else 'off'}: idle {_percentiles(idle)}"
            f" ({len(idle)} pings); stream every 0.2 ms {_percentiles(stream)} ({len(stream)});"
            f" bursts of {BURST} {_percentiles(bursts)} ({len(bursts)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--serve", nargs=2, metavar=("DOMAIN", "NAMESPACE"), help=argparse.SUPPRESS)
    parser.add_argument("--listen", type=int, metavar="DOMAIN", help=argparse.SUPPRESS)
    parser.add_argument("--echo", type=int, metavar="DOMAIN", help=argparse.SUPPRESS)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "44"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--count", type=int, help="stored samples (default 100,000)")
    parser.add_argument("--runs", type=int, default=3, help="runs per live case (median)")
    parser.add_argument("--late-runs", type=int, default=3, help="late joiner runs (median)")
    parser.add_argument("--only", choices=("late", "live", "latency"), help="run one part only")
    parser.add_argument("--pings", type=int, help="pings per latency run (default 300)")
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1])
        return
    if args.listen is not None:
        listen(args.listen)
        return
    if args.echo is not None:
        echo(args.echo)
        return
    count = args.count or (10_000 if args.quick else 100_000)
    live = 5_000 if args.quick else 30_000
    namespace = f"bench_dur_{uuid.uuid4().hex[:8]}"
    os.environ["DCPS_DURABILITY_NAMESPACE"] = namespace
    plain: list[tuple[float, float]] = []
    served: list[tuple[float, float]] = []
    unbatched: list[tuple[float, float]] = []
    remote: list[tuple[float, float]] = []
    late: list[tuple[float, float | None, float]] = []
    with dcps.DomainParticipant(args.domain) as dp:
        service = _Service(args.domain, namespace)
        listener = _Peer("--listen", str(args.domain)) if args.only in (None, "live") else None
        try:
            if listener is not None:
                live_throughput(dp, 2_000, served=False)  # warm-up
                for _ in range(args.runs):  # alternating, so drift hits all alike
                    plain.append(live_throughput(dp, live, served=False))
                    served.append(live_throughput(dp, live, served=True))
                    unbatched.append(live_throughput(dp, live, served=True, batching=False))
                    remote.append(live_throughput(dp, live, served=False, listener=listener))
            if args.only in (None, "late"):
                late = [late_joiner(dp, service, count) for _ in range(args.late_runs)]
        finally:
            service.close()
            if listener is not None:
                listener.close()
    if args.only in (None, "latency"):
        latency(args.domain, args.pings or (100 if args.quick else 300), args.runs)
    if late:
        rates = sorted(rate for rate, _, _ in late)
        cpus = [cpu for _, cpu, _ in late if cpu is not None]
        reader_cpu = statistics.median(r for _, _, r in late) * 100_000 / count
        kept = (
            f"; service CPU {statistics.median(cpus) * 1e6:.1f} us per kept sample" if cpus else ""
        )
        print(
            f"late joiner: {count} stored samples at {statistics.median(rates):,.0f} samples/s "
            f"median of {len(rates)} (runs: {', '.join(f'{r:,.0f}' for r in rates)}; "
            f"target >= 200,000); reader process CPU {reader_cpu:.2f} s per 100 k{kept}"
        )
    if plain:
        without, with_, off = (
            statistics.median(r for r, _ in case) for case in (plain, served, unbatched)
        )
        reference = statistics.median(r for r, _ in remote)
        cpu = [statistics.median(c for _, c in case) for case in (plain, served, unbatched, remote)]
        print(
            f"live TRANSIENT writer, batching on (default) ({live} msgs, median of {len(plain)}): "
            f"without service "
            f"{without:,.0f} msgs/s, with service {with_:,.0f} msgs/s, ratio "
            f"{with_ / without:.2f} (target >= 0.9); per run "
            f"{', '.join(f'{s[0] / p[0]:.2f}' for s, p in zip(served, plain, strict=True))}"
        )
        print(
            f"  the same with batching off: {off:,.0f} msgs/s, ratio "
            f"{off / without:.2f}; per run "
            f"{', '.join(f'{s[0] / p[0]:.2f}' for s, p in zip(unbatched, plain, strict=True))}"
        )
        print(
            f"  reference, a plain reader in another process instead of the service: "
            f"{reference:,.0f} msgs/s, ratio {reference / without:.2f}; service vs that "
            f"reader {with_ / reference:.2f}"
        )
        print(
            f"  writer process CPU per msg: without service {cpu[0]:.1f} us, with service "
            f"{cpu[1]:.1f} us (ratio {cpu[0] / cpu[1]:.2f}), batching off {cpu[2]:.1f} us "
            f"(ratio {cpu[0] / cpu[2]:.2f}), with the plain remote reader "
            f"{cpu[3]:.1f} us (ratio {cpu[0] / cpu[3]:.2f})"
        )


if __name__ == "__main__":
    main()
