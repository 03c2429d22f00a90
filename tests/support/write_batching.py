"""Helpers of the write-batching tests (``tests/durability/test_write_batching*.py``).

A batching writer (``DataWriter(batching=...)``) holds what it writes in a burst and
sends it in shared packets (dcps/_write_batching.py decides the flushes). Only a
reader in another process sees that: the remote reader here is
``tests/support/peers/plain_reader.py``, driven as a ``LinePeer`` that prints a
line a sample it takes. The tests stretch the flush delays (``hold_for_a_minute``)
so that a held sample and a sent one can be told apart without timing.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

import dcps
import qos as q
from dcps import _write_batching
from tests.support.line_peer import LinePeer
from tests.support.peers import PEERS_DIR
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

__all__ = [
    "MINUTE_NS",
    "PROBE",
    "batching_delays",
    "batching_writer",
    "hold_for_a_minute",
    "probed",
    "received",
    "remote_reader",
    "still_missing",
    "values",
]

MINUTE_NS = 60_000_000_000

PROBE = -1.0  # the value of the samples that check a best-effort reader matched


def remote_reader(domain_id: int, topic_name: str, *args: str) -> Iterator[LinePeer]:
    """A reader of ``topic_name`` in another process, ready (``args``: "best_effort"),
    killed when the generator is closed: the body of a fixture."""
    peer = LinePeer([str(PEERS_DIR / "plain_reader.py"), str(domain_id), topic_name, *args])
    try:
        peer.wait_line(lambda line: line == "ready")
        yield peer
    finally:
        peer.kill()


def received(peer: LinePeer) -> list[tuple[int, float, str]]:
    """(sensor, value, instance state) of every sample the remote reader took so far."""
    return [
        (int(parts[1]), float(parts[2]), parts[3])
        for parts in (line.split() for line in list(peer.lines))
        if parts[:1] == ["got"] and float(parts[2]) != PROBE
    ]


def probed(peer: LinePeer) -> bool:
    """Whether the remote reader took a probe (``PROBE``) sample."""
    return any(line.split()[2:3] == [f"{PROBE:g}"] for line in list(peer.lines))


def values(peer: LinePeer) -> list[float]:
    """The values of the samples the remote reader took so far, probes left out."""
    return [value for _, value, _ in received(peer)]


def batching_writer(
    participant: dcps.DomainParticipant, topic_name: str, *peers: LinePeer
) -> dcps.DataWriter[Reading]:
    """A batching writer matched with ``peers`` (best effort if they are given)."""
    best_effort = bool(peers)
    topic = dcps.Topic(participant, topic_name, Reading)
    # a reliable writer waits for the reader's acknowledgements when its history cache
    # is full: under load longer than the default 100 ms (not what is tested here)
    reliable = q.Reliability.reliable(timedelta(seconds=30))
    reliability = q.Reliability.BEST_EFFORT if best_effort else reliable
    writer = dcps.DataWriter(
        participant,
        topic,
        qos=q.DataWriterQos(reliability, q.History.KEEP_ALL),
        batching=True,
    )
    writer.wait_for_readers(1, timeout=20)
    if best_effort:
        # the reader drops best-effort samples of a writer it has not discovered yet
        def probe() -> bool:
            writer.write(Reading(0, PROBE, "probe"))
            writer.flush()
            return all(probed(peer) for peer in peers)

        eventually(probe, 20, "the remote reader's match")
    return writer


def batching_delays(
    monkeypatch: pytest.MonkeyPatch,
    *,
    max_delay_ns: int | None = None,
    quiet_ns: int | None = None,
    run_writes: int | None = None,
) -> None:
    """Set the flush policy's ``MAX_DELAY_NS``, ``QUIET_NS`` and ``RUN_WRITES``
    (dcps/_write_batching.py, read at each write) for the test; None: left as it is."""
    for name, value in (
        ("MAX_DELAY_NS", max_delay_ns),
        ("QUIET_NS", quiet_ns),
        ("RUN_WRITES", run_writes),
    ):
        if value is not None:
            monkeypatch.setattr(_write_batching, name, value)


def hold_for_a_minute(monkeypatch: pytest.MonkeyPatch) -> None:
    """Flush delays of a minute, every write of a run held: a write within a minute of
    the previous one is held until flushed."""
    batching_delays(monkeypatch, max_delay_ns=MINUTE_NS, quiet_ns=MINUTE_NS, run_writes=0)


def still_missing(peer: LinePeer, value: float, seconds: float = 0.5) -> bool:
    """Whether ``value`` has not reached the remote reader within ``seconds`` (a bounded
    look for something that must not happen: it can only pass wrongly, never fail)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if value in values(peer):
            return False
        time.sleep(0.02)
    return True
