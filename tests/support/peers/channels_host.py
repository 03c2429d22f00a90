"""Peer: one channel-layer process on a test host (a store, a publisher or a group member).

Usage: ``channels_host.py CONFIG_JSON``. Started by ``tests/test_multihost_channels.py``
and ``benchmarks/bench_multihost.py`` inside network namespaces (``netns.Host.python``)
or over loopback, it talks JSON lines like the peers of ``tests/netns.py``: commands
on stdin, events on stdout; every event carries ``t``, this machine's monotonic clock,
so the test can order events of several processes.

The process applies ``CONFIG["network"]`` (a :class:`dcps.NetworkConfig` mapping) to
its domain before the channel layer creates any participant, so every DDS entity of
the process uses that host's interface.

Roles (``CONFIG["role"]``):

``store``
    Runs a :class:`~dcps.store.Store` on ``CONFIG["data"]``.
``publisher``
    A confirmed :class:`~dcps.channels.ChannelPublisher` (round robin; ``timeout``
    seconds for flow control and confirmations, default 20). Command
    ``{"op": "stream", "rate": R}`` publishes ``Msg(seq % 16, seq)`` for seq = F, F + 1,
    ... (F is ``CONFIG["first_seq"]``, default 0, so several publishers can number their
    elements apart) at R per second until ``{"op": "stop"}``, which flushes and emits
    ``published`` with ``sent`` (how many), ``confirmed`` (``[seq, channel, offset]``
    each) and ``failed`` (``[seq, error]``).
``member``
    A :class:`~dcps.channels.ChannelSubscriber` in group ``CONFIG["group"]``. It receives
    up to ``batch`` elements at a time, emits ``got`` (``[channel, offset, seq]`` each),
    commits the last position of each channel and emits ``commit`` (``[channel, offset,
    status]``) or ``commit_error``; ownership changes emit ``owned`` (all owned channels)
    with ``why`` (``assigned``, ``revoked``, ``lost``). Command ``report`` emits the
    group's commits and the tails of the owned channels.
``bench_source`` / ``bench_sink``
    Benchmark pair: ``{"op": "burst", "count": N, "size": S}`` makes the source publish
    N elements (S-byte text), emitting ``burst_start`` first; the sink, told
    ``{"op": "expect", "count": N}``, emits ``throughput`` once it received N elements
    (count, seconds from its first to its last element; the event's ``t`` is the
    monotonic time of the last one). Latency pair: ``{"op": "pace", "count": N, "rate":
    R, "size": S}`` makes the source publish N elements at R per second through a second
    publisher with a 1 ms linger, each stamped with ``time.time_ns()`` at publish (the
    first 20 characters of its text); the sink, told ``{"op": "latency", "count": N,
    "skip": K}``, emits ``latency`` once it received N elements: one-way latency
    percentiles (``p50_us``, ``p90_us``, ``p99_us``, ``max_us``) from publish to
    receipt, and ``accept_p50_us``, from publish to the store's accept timestamp
    (``Element.timestamp``, the store's ``time.time_ns()``), over all but the first K (a
    warm-up). Network namespaces share the machine's clocks (CLOCK_REALTIME, and
    CLOCK_MONOTONIC too: ``ip netns`` makes no time namespace), so the stamps of
    processes on different test hosts compare.
"""

import json
import queue
import sys
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from channels_types import Msg

_out = threading.Lock()


def emit(**event: Any) -> None:
    """Write one JSON event line (thread-safe)."""
    event["t"] = time.monotonic()
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def _commands(stop: threading.Event) -> "queue.Queue[dict[str, Any]]":
    commands: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                command = json.loads(line)
                commands.put(command)
                if command.get("op") == "exit":
                    break
        stop.set()

    threading.Thread(target=read, daemon=True).start()
    return commands


def _next(commands: "queue.Queue[dict[str, Any]]", timeout: float) -> dict[str, Any] | None:
    try:
        return commands.get(timeout=timeout)
    except queue.Empty:
        return None


def run_store(config: dict[str, Any], stop: threading.Event) -> None:
    """The store role: serve until told to exit."""
    from dcps.store import Store, SyncMode

    with Store(
        config["data"],
        domain_id=config["domain"],
        namespace=config["namespace"],
        sync=SyncMode(config.get("sync", SyncMode.NORMAL.value)),
    ):
        emit(ev="ready", role="store")
        stop.wait()


def run_publisher(
    config: dict[str, Any],
    topic: Any,
    commands: "queue.Queue[dict[str, Any]]",
    stop: threading.Event,
) -> None:
    """The publisher role: stream confirmed elements on command."""
    from dcps.channels import ChannelPublisher, OrderBy

    confirmed: list[list[int]] = []
    failed: list[list[Any]] = []
    lock = threading.Lock()
    streaming = threading.Event()

    def record(seq: int, future: Any) -> None:
        try:
            position = future.result()
        except Exception as exc:  # a failed confirmation is what the test counts
            with lock:
                failed.append([seq, f"{type(exc).__name__}: {exc}"])
            return
        with lock:
            confirmed.append([seq, position.channel, position.offset])

    sent = [0]

    first_seq = config.get("first_seq", 0)

    def stream(publisher: Any, rate: float) -> None:
        seq, start = first_seq, time.monotonic()
        last_progress = start
        while streaming.is_set():
            due = start + (seq - first_seq) / rate
            delay = due - time.monotonic()
            if delay > 0:
                time.sleep(min(delay, 0.05))
                continue
            try:
                future = publisher.publish(Msg(seq % 16, seq))
            except Exception as exc:
                with lock:
                    failed.append([seq, f"{type(exc).__name__}: {exc}"])
            else:
                future.add_done_callback(lambda f, seq=seq: record(seq, f))
            seq += 1
            sent[0] = seq - first_seq
            if time.monotonic() - last_progress > 0.5:
                last_progress = time.monotonic()
                with lock:
                    emit(ev="progress", sent=sent[0], confirmed=len(confirmed), failed=len(failed))

    with ChannelPublisher[Msg](
        topic,
        domain_id=config["domain"],
        namespace=config["namespace"],
        order_by=OrderBy.round_robin(),
        linger=timedelta(milliseconds=5),
        timeout=timedelta(seconds=config.get("timeout", 20.0)),
    ) as publisher:
        emit(ev="ready", role="publisher", channels=publisher.channel_count)
        thread: threading.Thread | None = None
        while not stop.is_set():
            command = _next(commands, 0.1)
            if command is None:
                continue
            if command["op"] == "stream":
                streaming.set()
                thread = threading.Thread(
                    target=stream, args=(publisher, command["rate"]), daemon=True
                )
                thread.start()
            elif command["op"] == "stop":
                streaming.clear()
                if thread is not None:
                    thread.join()
                try:
                    publisher.flush(timedelta(seconds=30))
                except Exception as exc:
                    emit(ev="flush_error", error=f"{type(exc).__name__}: {exc}")
                with lock:
                    emit(ev="published", sent=sent[0], confirmed=sorted(confirmed), failed=failed)


def run_member(
    config: dict[str, Any],
    topic: Any,
    commands: "queue.Queue[dict[str, Any]]",
    stop: threading.Event,
) -> None:
    """The member role: receive, report, commit; report ownership changes."""
    from dcps.channels import ChannelOwnershipListener, ChannelSubscriber

    class Report(ChannelOwnershipListener):
        def _owned(self, subscriber: Any, why: str, channels: frozenset[int]) -> None:
            emit(ev="owned", why=why, changed=sorted(channels), channels=subscriber.channels)

        def on_channels_assigned(self, subscriber: Any, channels: frozenset[int]) -> None:
            self._owned(subscriber, "assigned", channels)

        def on_channels_revoked(self, subscriber: Any, channels: frozenset[int]) -> None:
            self._owned(subscriber, "revoked", channels)

        def on_channels_lost(self, subscriber: Any, channels: frozenset[int]) -> None:
            self._owned(subscriber, "lost", channels)

    subscriber: Any = ChannelSubscriber(
        topic,
        group=config["group"],
        domain_id=config["domain"],
        namespace=config["namespace"],
        listeners=[Report()],
        timeout=timedelta(seconds=config.get("timeout", 2.0)),
        request_timeout=timedelta(seconds=config.get("request_timeout", 10.0)),
    )
    emit(ev="ready", role="member", member=subscriber.member, channels=subscriber.channels)
    batch = config.get("batch", 32)
    pending = None
    try:
        while not stop.is_set():
            command = _next(commands, 0.0)
            if command is not None and command["op"] == "report":
                emit(ev="reporting")  # its requests go out now
                try:
                    committed = subscriber.last_committed()
                    tails = subscriber.tails()
                except Exception as exc:
                    emit(ev="report_error", error=f"{type(exc).__name__}: {exc}")
                else:
                    emit(
                        ev="report",
                        channels=subscriber.channels,
                        committed={str(c): p.offset for c, p in committed.items()},
                        tails={str(c): p.offset for c, p in tails.items()},
                    )
            if pending is None:
                pending = subscriber.receive(batch)
            try:
                elements = pending.result(timeout=0.1)
            except TimeoutError:
                continue
            pending = None
            if not elements:
                continue
            emit(ev="got", items=[[e.channel, e.position.offset, e.value.seq] for e in elements])
            last = {e.channel: e.position for e in elements}
            try:
                results = subscriber.commit(last)
            except Exception as exc:  # e.g. no answer while cut off: the test counts these
                emit(
                    ev="commit_error",
                    items=[[c, p.offset] for c, p in last.items()],
                    error=f"{type(exc).__name__}: {exc}",
                )
                continue
            emit(
                ev="commit",
                items=[[c, r.position.offset, r.status.value] for c, r in results.items()],
            )
    finally:
        subscriber.close()


def run_bench(
    config: dict[str, Any],
    topic: Any,
    commands: "queue.Queue[dict[str, Any]]",
    stop: threading.Event,
) -> None:
    """The benchmark roles: a source publishing bursts, a sink timing them."""
    from dcps.channels import ChannelPublisher, ChannelSubscriber, OrderBy

    kw: dict[str, Any] = {"domain_id": config["domain"], "namespace": config["namespace"]}
    if config["role"] == "bench_source":
        with ChannelPublisher[Msg](topic, order_by=OrderBy.round_robin(), **kw) as publisher:
            paced: Any = None
            emit(ev="ready", role="bench_source")
            try:
                while not stop.is_set():
                    command = _next(commands, 0.1)
                    if command is None:
                        continue
                    if command["op"] == "burst":
                        text = "x" * command.get("size", 0)
                        emit(ev="burst_start")
                        start = time.perf_counter()
                        for seq in range(command["count"]):
                            publisher.publish(Msg(seq % 64, seq, text))
                        publisher.flush(timedelta(seconds=120))
                        emit(ev="burst_done", seconds=time.perf_counter() - start)
                    elif command["op"] == "pace":
                        if paced is None:  # at ~1000/s the linger, not a full batch, sends
                            paced = ChannelPublisher[Msg](
                                topic,
                                order_by=OrderBy.round_robin(),
                                linger=timedelta(milliseconds=1),
                                **kw,
                            )
                        _pace(paced, command)
            finally:
                if paced is not None:
                    paced.close()
        return
    with ChannelSubscriber[Msg](topic, **kw) as subscriber:
        emit(ev="ready", role="bench_sink")
        expected, count, first = 0, 0, 0.0
        latencies: list[int] | None = None
        accepted: list[int] = []
        skip = 0
        pending = None
        while not stop.is_set():
            command = _next(commands, 0.0)
            if command is not None and command["op"] == "expect":
                expected, count, latencies = command["count"], 0, None
                emit(ev="expecting", count=expected)  # send the burst only after this
            elif command is not None and command["op"] == "latency":
                expected, count, latencies, accepted = command["count"], 0, [], []
                skip = command.get("skip", 0)
                emit(ev="expecting", count=expected)
            if pending is None:
                pending = subscriber.receive(1024)
            try:
                elements = pending.result(timeout=0.1)
            except TimeoutError:
                continue
            pending = None
            if latencies is not None:
                now = time.time_ns()
                for element in elements:
                    stamp = element.value.text[:20]
                    if stamp.isdigit():
                        latencies.append(now - int(stamp))
                        accept = round(element.timestamp.timestamp() * 1e6) * 1000
                        accepted.append(accept - int(stamp))
            if elements and count == 0:
                first = time.perf_counter()
            count += len(elements)
            if expected and count >= expected:
                if latencies is None:
                    emit(ev="throughput", count=count, seconds=time.perf_counter() - first)
                else:
                    emit(
                        ev="latency",
                        count=len(latencies) - skip,
                        accept_p50_us=_percentiles(accepted[skip:])["p50_us"],
                        **_percentiles(latencies[skip:]),
                    )
                expected, count, latencies = 0, 0, None


def _pace(publisher: Any, command: dict[str, Any]) -> None:
    """Publish ``count`` stamped elements at ``rate`` per second (a steady schedule)."""
    count, rate = command["count"], command["rate"]
    padding = "x" * max(0, command.get("size", 0) - 20)
    emit(ev="pace_start")
    start = time.monotonic()
    for seq in range(count):
        delay = start + seq / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        publisher.publish(Msg(seq % 64, seq, f"{time.time_ns():020d}{padding}"))
    publisher.flush(timedelta(seconds=60))
    emit(ev="pace_done", seconds=time.monotonic() - start)


def _percentiles(nanoseconds: list[int]) -> dict[str, float]:
    """p50/p90/p99/max in microseconds (nearest rank) of a non-empty list."""
    ordered = sorted(nanoseconds)

    def rank(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(len(ordered) * q))] / 1000

    return {"p50_us": rank(0.5), "p90_us": rank(0.9), "p99_us": rank(0.99), "max_us": rank(1.0)}


def main() -> None:
    """Apply the network settings, then run the configured role until told to exit."""
    config = json.loads(sys.argv[1])
    stop = threading.Event()
    commands = _commands(stop)
    from dcps._network import NetworkConfig
    from dcps.channels import ChannelledTopic

    # The channel layer creates plain cyclonedds participants of this domain: they use
    # the domain created here, with this host's interfaces.
    domain = NetworkConfig.from_mapping(config.get("network", {})).apply(config["domain"])
    try:
        role = config["role"]
        if role == "store":
            run_store(config, stop)
            return
        topic = ChannelledTopic(config["topic"], Msg, channel_count=config.get("channels"))
        if role == "publisher":
            run_publisher(config, topic, commands, stop)
        elif role == "member":
            run_member(config, topic, commands, stop)
        elif role in ("bench_source", "bench_sink"):
            run_bench(config, topic, commands, stop)
        else:
            raise SystemExit(f"unknown role {role!r}")
    except Exception:
        emit(ev="crash", error=traceback.format_exc())
        raise
    finally:
        del domain


if __name__ == "__main__":
    main()
