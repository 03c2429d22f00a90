"""Redundant durability services on two hosts: one killed, and a cut link that heals.

Hosts are network namespaces on a bridge (``netns.Lan``); every process is
``tests/support/peers/durability_host.py`` (a service, a TRANSIENT writer or a late
joiner) with its network pinned to the host's ``eth0`` by ``DCPS_*`` variables.
Participants' leases are short (``LEASE``), so a host whose cable is pulled is
forgotten within seconds; the tests wait on what the peers report, never on time.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.netns import Host, Lan, PeerProcess, lan_factory
from tests.support.peers import PEERS_DIR
from tests.support.waiting import eventually

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]

PEER = PEERS_DIR / "durability_host.py"
#: Participant lease (s): a host cut off is forgotten after it.
LEASE = 3.0
SENSORS = 4

Event = dict[str, Any]


@pytest.fixture
def make_lan() -> Iterator[Callable[[int], Lan]]:
    """``make_lan(n)``: n hosts on a bridge, removed after the test (skips without netns)."""
    yield from lan_factory()


class _Peers:
    """Starts durability peers of one test (its domain, namespace and topic) on hosts."""

    def __init__(self, domain_id: int, namespace: str, topic: str) -> None:
        self.base = {"domain": domain_id, "namespace": namespace, "topic": topic}
        self.env = {
            "DCPS_INTERFACES": "eth0",
            "DCPS_LEASE_DURATION": str(LEASE),
            "DCPS_SPDP_INTERVAL": "0.5",
            "DCPS_DURABILITY_NAMESPACE": namespace,
        }

    def start(self, host: Host, role: str) -> PeerProcess:
        config = {"role": role, **self.base}
        peer = host.python(str(PEER), json.dumps(config), env=self.env)
        peer.expect(lambda e: e["ev"] == "ready", 40, f"{role} on host {host.name} ready")
        return peer


@pytest.fixture
def peers(domain_id: int, namespace: str, topic_name: str) -> _Peers:
    return _Peers(domain_id, namespace, topic_name)


def _kill(peer: PeerProcess) -> None:
    """kill -9: no goodbye on the wire."""
    peer.popen.kill()
    peer.popen.wait()


def _kept(service: PeerProcess, count: int, timeout: float = 30) -> None:
    """Wait until ``service`` keeps ``count`` samples of the topic."""
    last: list[Event] = []

    def probe() -> bool:
        since = service.mark()
        service.send(op="count")
        last[:] = [service.expect(lambda e: e["ev"] == "count", 10, "count", since)]
        return bool(last[0]["n"] == count)

    try:
        eventually(probe, timeout, f"{service.label} keeping {count} samples")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; it said {last}") from None


def _write(writer: PeerProcess, samples: list[tuple[int, float]]) -> None:
    """Write ``(sensor, value)`` samples, then wait until every matched reader acked them."""
    for sensor, value in samples:
        writer.send(op="write", sensor=sensor, value=value)
    since = writer.mark()
    writer.send(op="acks")
    writer.expect(lambda e: e["ev"] == "acked", 35, "acknowledgements", since)


def _valid(reader: PeerProcess) -> list[tuple[int, float]]:
    return [(e["sensor"], e["value"]) for e in reader.drain() if e["ev"] == "sample" and e["valid"]]


def _wait_valid(reader: PeerProcess, wanted: set[tuple[int, float]], timeout: float = 30) -> None:
    """Wait until ``reader`` received every ``(sensor, value)`` of ``wanted``."""
    what = f"samples {sorted(wanted)}"
    reader.expect(lambda e: e["ev"] == "historical", timeout, "historical data")
    while not wanted <= set(_valid(reader)):
        reader.expect(lambda e: e["ev"] == "sample", timeout, what, len(reader.events))


def _received_once(reader: PeerProcess, wanted: set[tuple[int, float]]) -> None:
    """``reader`` got every sample of ``wanted``, and each exactly once, nothing else."""
    _wait_valid(reader, wanted)
    got = Counter(_valid(reader))
    assert got == Counter(wanted), f"{reader.label} received {sorted(got.items())}"


class TestTwoHosts:
    def test_two_services_one_killed_late_joiners_on_either_host_get_all_once(
        self, make_lan: Callable[[int], Lan], peers: _Peers
    ) -> None:
        """A service on each host keeps a writer's data. A late joiner gets it once
        although both services answer; the writer and the service on its host are
        killed with SIGKILL; late joiners on both hosts still get every sensor's last
        reading, once, NOT_ALIVE_NO_WRITERS."""
        a, b = make_lan(2).hosts
        service_a = peers.start(a, "service")
        service_b = peers.start(b, "service")
        writer = peers.start(a, "writer")
        writer.send(op="wait_readers", count=2)  # both services: neither misses a write
        writer.expect(lambda e: e["ev"] == "readers", 35, "both services matched")
        _write(writer, [(s, float(r)) for r in range(2) for s in range(SENSORS)])
        _kept(service_a, SENSORS)
        _kept(service_b, SENSORS)
        last = {(s, 1.0) for s in range(SENSORS)}

        both = peers.start(b, "reader")  # both services alive: history once, not twice
        _received_once(both, last)

        _kill(writer)
        _kill(service_a)
        for host in (a, b):
            late = peers.start(host, "reader")
            _received_once(late, last)
            states = {e["state"] for e in late.events if e["ev"] == "sample"}
            assert states == {"NOT_ALIVE_NO_WRITERS"}, f"host {host.name}: {states}"

    def test_cut_link_reader_gets_what_it_missed_once_and_services_realign(
        self, make_lan: Callable[[int], Lan], peers: _Peers
    ) -> None:
        """Host a runs a service and the writer, host b a service and a reader. Host b's
        cable is pulled; the writer goes on (new values, new sensors), only service a
        keeps them, then the writer dies. The cable comes back: the reader receives what
        it missed from service a, each sample once (it asks again when a service
        matches again), and service b aligns with service a: with service a killed, a
        late joiner on b gets the latest values from service b."""
        a, b = make_lan(2).hosts
        service_a = peers.start(a, "service")
        service_b = peers.start(b, "service")
        writer = peers.start(a, "writer")
        reader = peers.start(b, "reader")
        writer.send(op="wait_readers", count=3)  # two services and the reader
        writer.expect(lambda e: e["ev"] == "readers", 35, "services and reader matched")
        before = [(s, 0.0) for s in range(SENSORS)]
        _write(writer, before)
        _wait_valid(reader, set(before))
        _kept(service_b, SENSORS)

        b.link_down()
        mark = writer.mark()  # the writer forgets host b once its lease ran out
        writer.expect(lambda e: e["ev"] == "pub_matched" and e["count"] == 1, 30, "b lost", mark)
        during = [(s, 1.0) for s in range(SENSORS + 2)]  # new values, two new sensors
        _write(writer, during)
        _kept(service_a, SENSORS + 2)
        _kill(writer)  # what b missed now lives only in service a
        _kept(service_b, SENSORS)

        b.link_up()
        _received_once(reader, set(before) | set(during))
        _kept(service_b, SENSORS + 2)  # aligned again with service a

        _kill(service_a)
        late = peers.start(b, "reader")
        _received_once(late, set(during))
