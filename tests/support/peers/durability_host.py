"""Peer: one durability process on a test host (a service, a TRANSIENT writer or a late joiner).

Usage: ``durability_host.py CONFIG_JSON``. Started by
``tests/durability/test_multihost_durability.py`` inside network namespaces (``netns.Host.python``);
it talks JSON lines like the peers of
``tests/support/netns.py``: commands on stdin, events on stdout. Its network comes from the
``DCPS_*`` environment (``DCPS_INTERFACES=eth0``...), which dcps participants and the
durability service read. Every role exits when stdin closes or on ``{"op": "exit"}``.

``CONFIG``: ``role``, ``domain``, ``namespace`` (of the durability services), ``topic``.

``service``
    A :class:`~dcps.store.DurabilityService` for every topic, in memory. Emits ``ready``
    (with ``aligned``, the samples it got from other services) once its start-up
    alignment is over. ``{"op": "count"}`` emits ``count`` (``n``: samples kept of
    ``topic``; ``aligned``: samples it got from other services so far).
``writer``
    A dcps TRANSIENT writer of ``Reading`` (reliable, KEEP_LAST 1, autodispose off, so its
    instances outlive it NOT_ALIVE_NO_WRITERS). Emits ``pub_matched`` (``count``) when its
    match count changes. ``{"op": "wait_readers", "count": N}`` emits ``readers`` once N
    readers matched; ``{"op": "write", "sensor": S, "value": V}`` emits ``written``;
    ``{"op": "acks"}`` waits until every matched reader acknowledged everything, emits
    ``acked``.
``reader``
    A late joiner: a dcps TRANSIENT KEEP_ALL reader created at start. Emits
    ``historical`` when ``wait_for_historical_data`` returned, then one ``sample`` per
    sample taken (``sensor``, ``value``, ``valid``, ``state``), and ``sub_matched``
    (``count``) when its writer match count changes.
"""

import json
import queue
import sys
import threading
from typing import Any

import dcps
import qos as q
from dcps.store import DurabilityService
from tests.support.topic_types import Reading

_out = threading.Lock()


def emit(**event: Any) -> None:
    """Write one JSON event line (thread-safe)."""
    with _out:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


def _commands(stop: threading.Event) -> "queue.Queue[dict[str, Any]]":
    commands: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        for line in sys.stdin:
            if line.strip():
                command = json.loads(line)
                if command.get("op") == "exit":
                    break
                commands.put(command)
        stop.set()

    threading.Thread(target=read, daemon=True).start()
    return commands


def _next(commands: "queue.Queue[dict[str, Any]]", timeout: float) -> dict[str, Any] | None:
    try:
        return commands.get(timeout=timeout)
    except queue.Empty:
        return None


def run_service(config: dict[str, Any], commands: "queue.Queue[dict[str, Any]]", stop: Any) -> None:
    with DurabilityService(domain_id=config["domain"], namespace=config["namespace"]) as svc:
        svc.wait_aligned(30)
        emit(ev="ready", role="service", aligned=svc.aligned)
        while not stop.is_set():
            command = _next(commands, 0.05)
            if command is not None and command["op"] == "count":
                emit(ev="count", n=svc.history.count(config["topic"]), aligned=svc.aligned)


def run_writer(
    dp: dcps.DomainParticipant, config: dict[str, Any], commands: Any, stop: Any
) -> None:
    topic = dcps.Topic(dp, config["topic"], Reading)
    writer = dcps.DataWriter(
        dp,
        topic,
        qos=q.DataWriterQos(
            q.Durability.TRANSIENT,
            q.Reliability.RELIABLE,
            q.History.keep_last(1),
            q.WriterDataLifecycle(autodispose_unregistered_instances=False),
        ),
    )
    emit(ev="ready", role="writer")
    matched = -1
    while not stop.is_set():
        count = writer.publication_matched_status.current_count
        if count != matched:
            matched = count
            emit(ev="pub_matched", count=count)
        command = _next(commands, 0.02)
        if command is None:
            continue
        op = command["op"]
        if op == "wait_readers":
            writer.wait_for_readers(command["count"], 30)
            emit(ev="readers", count=command["count"])
        elif op == "write":
            sensor = command["sensor"]
            writer.write(Reading(sensor, float(command["value"]), f"s{sensor}"))
            emit(ev="written", sensor=sensor, value=command["value"])
        elif op == "acks":
            writer.wait_for_acknowledgments(30)
            emit(ev="acked")


def run_reader(
    dp: dcps.DomainParticipant, config: dict[str, Any], commands: Any, stop: Any
) -> None:
    topic = dcps.Topic(dp, config["topic"], Reading)
    reader = dcps.DataReader(
        dp, topic, qos=q.DataReaderQos(q.Durability.TRANSIENT, q.History.KEEP_ALL)
    )
    emit(ev="ready", role="reader")
    reader.wait_for_historical_data(30)
    emit(ev="historical")
    matched = -1
    while not stop.is_set():
        count = reader.subscription_matched_status.current_count
        if count != matched:
            matched = count
            emit(ev="sub_matched", count=count)
        for s in reader.take():
            emit(
                ev="sample",
                sensor=s.data.sensor,
                value=s.data.value if s.info.valid_data else None,
                valid=s.info.valid_data,
                state=s.info.instance_state.name,
            )
        stop.wait(0.02)


def main() -> None:
    config = json.loads(sys.argv[1])
    stop = threading.Event()
    commands = _commands(stop)
    role = config["role"]
    if role == "service":
        run_service(config, commands, stop)
        return
    with dcps.DomainParticipant(config["domain"]) as dp:
        if role == "writer":
            run_writer(dp, config, commands, stop)
        elif role == "reader":
            run_reader(dp, config, commands, stop)
        else:
            raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main()
