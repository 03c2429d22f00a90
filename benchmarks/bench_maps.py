"""Key-value maps and queues in the store: latency, pipelined puts, queue throughput.

Run: ``python -m benchmarks.bench_maps [--quick] [--domain N]``.

A store process (``python -m dcps.store``, synchronous=NORMAL) on loopback;
this process is the map client. Measured in the same run:

* map ``get`` and ``put`` round trips, one at a time (p50/p99, us): targets
  get p50 <= 500 us, put p50 <= 1000 us;
* pipelined puts: ``put_many_async`` batches of 1000 keys, 8 in flight
  (puts/s; target >= 50,000), and single ``put_async`` calls, 64 futures
  outstanding (the client gathers them into requests while 4 are in flight);
* a queue with 4 consumer processes: 64 B elements published in batches of
  1000 (confirmed), then consumed and acknowledged (one ack per received
  batch of up to 256) until the queue is empty (elements/s);
* reference: a raw ``cyclonedds`` request/reply round trip (64 B, an echo
  process) on the same machine.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

import idl
from benchmarks._store_process import StoreProcess

QUICK_ARGS = ["--quick"]


class Small(idl.Struct, typename="bench_maps::Small"):
    """A 64 B map value / queue element (CDR header, an int64 and 48 bytes)."""

    n: idl.int64
    payload: idl.array[idl.uint8, 48]


def _raw_type() -> type:
    """The raw binding's message type (defined on first use: the raw side imports no dcps)."""
    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl import types as t

    @dataclass
    class Ping(IdlStruct, typename="bench_maps::Ping"):
        seq: t.int64
        payload: t.sequence[t.uint8]

    return Ping


def raw_echo(domain: int, name: str) -> None:
    """Echo every Ping of topic ``name``/req on ``name``/rep (the raw binding, no dcps)."""
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

    ping = _raw_type()
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=10)), Policy.History.KeepLast(64))
    dp = DomainParticipant(domain)
    reader = DataReader(dp, Topic(dp, f"{name}_req", ping), qos=qos)
    writer = DataWriter(dp, Topic(dp, f"{name}_rep", ping), qos=qos)
    ws = WaitSet(dp)
    ws.attach(ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any))
    print("ready", flush=True)
    while True:
        ws.wait(duration(seconds=1))
        for sample in reader.take(N=64):
            if sample.seq < 0:
                return
            writer.write(sample)


def raw_round_trip(domain: int, count: int) -> list[float]:
    """Round trips (us) of a raw-binding 64 B request/reply with an echo process."""
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

    name = f"bench_maps_{uuid.uuid4().hex[:8]}"
    echo = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_maps", "--domain", str(domain), "--echo", name],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert echo.stdout is not None
    assert echo.stdout.readline().strip() == "ready"
    ping = _raw_type()
    qos = Qos(Policy.Reliability.Reliable(duration(seconds=10)), Policy.History.KeepLast(64))
    dp = DomainParticipant(domain)
    writer = DataWriter(dp, Topic(dp, f"{name}_req", ping), qos=qos)
    reader = DataReader(dp, Topic(dp, f"{name}_rep", ping), qos=qos)
    ws = WaitSet(dp)
    ws.attach(ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Any))
    while not writer.get_matched_subscriptions() or not reader.get_matched_publications():
        ws.wait(duration(milliseconds=20))
    payload = list([0] * 48)
    out = []
    try:
        for seq in range(count + 100):
            start = time.perf_counter()
            writer.write(ping(seq, payload))
            got = False
            while not got:
                ws.wait(duration(seconds=5))
                got = any(s.seq == seq for s in reader.take(N=64))
            if seq >= 100:  # warm-up
                out.append((time.perf_counter() - start) * 1e6)
        writer.write(ping(-1, []))
        echo.wait(10)
    finally:
        echo.kill()
        echo.wait()
        echo.stdout.close()
    return out


def _pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def consume(domain: int, namespace: str, queue: str) -> None:
    """A queue consumer process: on 'go', receive and acknowledge until the queue stays empty."""
    from dcps.durables._queue import QueueSubscriber

    with QueueSubscriber(queue, Small, domain_id=domain, namespace=namespace) as sub:
        print("ready", flush=True)
        sys.stdin.readline()
        n = 0
        while True:
            batch = sub.receive(256, timeout=1.0)
            if not batch:
                break
            sub.ack(batch)
            n += len(batch)
        print(f"consumed {n}", flush=True)


def _consumer(domain: int, namespace: str, queue: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_maps", "--domain", str(domain),
         "--consume", namespace, queue],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--domain", type=int, default=int(os.environ.get("DCPS_BENCH_DOMAIN", "44"))
    )
    parser.add_argument("--quick", action="store_true", help="fewer operations")
    parser.add_argument("--echo", help=argparse.SUPPRESS)
    parser.add_argument("--consume", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.echo:
        raw_echo(args.domain, args.echo)
        return
    if args.consume:
        consume(args.domain, *args.consume)
        return
    from dcps.durables._map import KeyValueMap
    from dcps.durables._queue import QueuePublisher

    ops = 500 if args.quick else 3000
    pipelined = 20_000 if args.quick else 200_000
    queued = 10_000 if args.quick else 100_000
    domain = args.domain
    namespace = f"bench_maps_{uuid.uuid4().hex[:8]}"
    store = StoreProcess(domain, namespace)
    results: dict[str, str] = {}
    try:
        where = {"domain_id": domain, "namespace": namespace}
        with KeyValueMap("bench", Small, **where) as m:
            value = Small(1, [0] * 48)
            for i in range(200):  # warm-up
                m.put(f"k{i % 100}", value)
                m.get(f"k{i % 100}")
            puts, gets = [], []
            for i in range(ops):
                start = time.perf_counter()
                m.put(f"k{i % 100}", value)
                puts.append((time.perf_counter() - start) * 1e6)
            for i in range(ops):
                start = time.perf_counter()
                m.get(f"k{i % 100}")
                gets.append((time.perf_counter() - start) * 1e6)
            results["map get"] = f"p50 {_pct(gets, 0.5):8.0f} us   p99 {_pct(gets, 0.99):8.0f} us"
            results["map put"] = f"p50 {_pct(puts, 0.5):8.0f} us   p99 {_pct(puts, 0.99):8.0f} us"

            start = time.perf_counter()
            in_flight = []
            for b in range(pipelined // 1000):
                batch = {f"p{b % 50}_{i}": value for i in range(1000)}
                in_flight.append(m.put_many_async(batch))
                if len(in_flight) >= 8:
                    in_flight.pop(0).result(60)
            for fut in in_flight:
                fut.result(60)
            rate = pipelined / (time.perf_counter() - start)
            results["map pipelined puts (batches of 1000)"] = f"{rate:12,.0f} puts/s"

            single = pipelined // 10
            start = time.perf_counter()
            window = []
            for i in range(single):
                window.append(m.put_async(f"s{i % 1000}", value))
                if len(window) >= 64:
                    window.pop(0).result(60)
            for fut in window:
                fut.result(60)
            rate = single / (time.perf_counter() - start)
            results["map put_async (gathered behind 4 in flight)"] = f"{rate:12,.0f} puts/s"

        queue = "bench_q"
        with QueuePublisher(queue, Small, **where) as pub:
            start = time.perf_counter()
            for b in range(queued // 1000):
                pub.publish_many([Small(b * 1000 + i, [0] * 48) for i in range(1000)])
            rate = queued / (time.perf_counter() - start)
            results["queue publish (confirmed, batches of 1000)"] = f"{rate:12,.0f} elements/s"
            consumers = [_consumer(domain, namespace, queue) for _ in range(4)]
            try:
                for c in consumers:
                    assert c.stdout is not None
                    assert c.stdout.readline().strip() == "ready"
                start = time.perf_counter()
                for c in consumers:
                    assert c.stdin is not None
                    c.stdin.write("go\n")
                    c.stdin.flush()
                while pub.state().stored:
                    time.sleep(0.005)  # polling the measured quantity, not synchronising
                elapsed = time.perf_counter() - start
                counts = [int(c.communicate(timeout=60)[0].split()[-1]) for c in consumers]
            finally:
                for c in consumers:
                    c.kill()
                    c.wait()
            assert sum(counts) >= queued, counts
            results["queue, 4 consumers (receive 256, ack per batch)"] = (
                f"{queued / elapsed:12,.0f} elements/s  (per consumer {counts})"
            )
    finally:
        store.close()
    raw = raw_round_trip(domain, ops)
    results["raw binding request/reply (reference)"] = (
        f"p50 {_pct(raw, 0.5):8.0f} us   p99 {_pct(raw, 0.99):8.0f} us"
    )
    print(f"maps and queues on loopback; store synchronous=NORMAL; {ops} single ops")
    for name, text in results.items():
        print(f"{name:<52}{text}")
    print(f"median raw round trip {statistics.median(raw):.0f} us")


if __name__ == "__main__":
    main()
