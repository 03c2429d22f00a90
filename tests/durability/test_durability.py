"""TRANSIENT and PERSISTENT durability through the store's durability service (issue 16).

Real processes throughout: writers that die, store processes killed with
SIGKILL and restarted on their data directory, redundant services.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TypeVar

import pytest

import dcps
import qos as q
from dcps.store import DurabilityService, Store, SyncMode
from tests.support.topic_types import Reading
from tests.support.waiting import eventually as _eventually

PEERS = Path(__file__).parent.parent / "support" / "peers"

T = TypeVar("T")


def eventually(probe: Callable[[], T], timeout: float = 30.0, what: str = "condition") -> T:
    """``tests.support.waiting.eventually`` with room for several processes on a loaded host."""
    return _eventually(probe, timeout, what)


@pytest.fixture(autouse=True)
def _durability_namespace(namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers (and peer processes) ask the durability services of the test's namespace."""
    monkeypatch.setenv("DCPS_DURABILITY_NAMESPACE", namespace)


def _peer_env() -> dict[str, str]:
    """This environment, with the checkout importable (peers import ``tests.support``)."""
    env = os.environ.copy()
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    return env


class _Process:
    """A peer program; ``wait_for(word)`` reads its stdout until a line starts with it."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_peer_env(),
        )

    def wait_for(self, word: str) -> str:
        assert self.process.stdout is not None
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise RuntimeError(f"peer exited ({self.process.wait()}) before {word!r}")
            if line.startswith(word):
                return line

    def kill(self) -> None:
        """kill -9, and reap it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


@pytest.fixture
def processes() -> Iterator[list[_Process]]:
    started: list[_Process] = []
    yield started
    for p in started:
        p.kill()


def _writer(
    processes: list[_Process],
    domain_id: int,
    topic: str,
    kind: str,
    sensors: int,
    rounds: int,
    dispose: int | None = None,
) -> _Process:
    args = [str(PEERS / "durability_writer.py"), str(domain_id), topic, kind]
    args += [str(sensors), str(rounds)] + ([] if dispose is None else [str(dispose)])
    p = _Process(*args)
    processes.append(p)
    p.wait_for("written")
    return p


def _service_process(
    processes: list[_Process], data: Path, domain_id: int, namespace: str, mode: str
) -> _Process:
    p = _Process(str(PEERS / "durability_store.py"), str(data), str(domain_id), namespace, mode)
    processes.append(p)
    p.wait_for("dcps store ready" if mode == "store" else "durability ready")
    return p


def _late_reader(
    participant: dcps.DomainParticipant, topic: dcps.Topic[Reading], kind: q.Durability
) -> dcps.DataReader[Reading]:
    reader = dcps.DataReader(participant, topic, qos=q.DataReaderQos(kind, q.History.KEEP_ALL))
    reader.wait_for_historical_data(20)
    return reader


def _no_writers_left(reader: dcps.DataReader[Reading]) -> None:
    """Wait until a killed writer's lease expired: till then DDS holds it (and its
    instances) alive."""
    eventually(
        lambda: reader.subscription_matched_status.current_count == 0,
        timeout=30,
        what="the killed writer's lease expiring",
    )


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as dp:
        yield dp


@pytest.fixture
def service(tmp_path: Path, domain_id: int, namespace: str) -> Iterator[Store]:
    with Store(
        tmp_path / "store",
        domain_id=domain_id,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        durability=("*",),
    ) as store:
        yield store


def _kept(store: Store, topic: str) -> int:
    assert store.durability is not None
    return store.durability.history.count(topic)


class TestLateJoiners:
    def test_writer_dies_and_a_late_joiner_gets_the_last_state_with_no_writers(
        self,
        service: Store,
        participant: dcps.DomainParticipant,
        processes: list[_Process],
        domain_id: int,
        topic_name: str,
    ) -> None:
        """A TRANSIENT writer process writes 3 rounds for 4 sensors and is killed; a reader
        created afterwards gets each sensor's last reading, NOT_ALIVE_NO_WRITERS."""
        writer = _writer(processes, domain_id, topic_name, "TRANSIENT", 4, 3)
        eventually(lambda: _kept(service, topic_name) == 4, what="service keeps 4 samples")
        writer.kill()
        topic = dcps.Topic(participant, topic_name, Reading)
        reader = _late_reader(participant, topic, q.Durability.TRANSIENT)
        _no_writers_left(reader)
        samples = eventually(lambda: reader.take(), what="history")
        assert sorted((s.data.sensor, s.data.value) for s in samples) == [
            (0, 2.0),
            (1, 2.0),
            (2, 2.0),
            (3, 2.0),
        ]
        assert {s.info.instance_state for s in samples} == {dcps.InstanceState.NOT_ALIVE_NO_WRITERS}
        assert {s.info.view_state for s in samples} == {dcps.ViewState.NEW}

    def test_no_duplicates_while_the_writer_is_alive(
        self,
        service: Store,
        participant: dcps.DomainParticipant,
        processes: list[_Process],
        domain_id: int,
        topic_name: str,
    ) -> None:
        """With its writer alive, a late joiner gets each sample once although the writer
        (its TRANSIENT history) and the service both deliver it; instances are ALIVE."""
        _writer(processes, domain_id, topic_name, "TRANSIENT", 5, 1)
        eventually(lambda: _kept(service, topic_name) == 5, what="service keeps 5 samples")
        topic = dcps.Topic(participant, topic_name, Reading)
        reader = _late_reader(participant, topic, q.Durability.TRANSIENT)
        reader.wait_for_writers(1)
        eventually(lambda: len(reader.read()) >= 5, what="five samples")
        # the writer's own history arrives too; give it every chance to duplicate
        reader.wait_for_historical_data(10)
        samples = reader.take()
        assert sorted(s.data.sensor for s in samples) == [0, 1, 2, 3, 4]
        eventually(
            lambda: {s.info.instance_state for s in reader.read()} <= {dcps.InstanceState.ALIVE}
        )

    def test_disposed_instance_arrives_disposed_within_the_cleanup_delay(
        self,
        participant: dcps.DomainParticipant,
        processes: list[_Process],
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
    ) -> None:
        """A writer disposes sensor 1 and dies: within the service cleanup delay a late
        joiner sees sensor 1 NOT_ALIVE_DISPOSED (others NO_WRITERS); after it, sensor 1
        is gone from the service."""
        topic = dcps.Topic(participant, topic_name, Reading)
        delay = timedelta(seconds=2)
        writer_qos = q.DataWriterQos(
            q.Durability.TRANSIENT,
            q.DurabilityService(service_cleanup_delay=delay, history=q.History.keep_last(1)),
            # the writer going away must not dispose the other sensors
            q.WriterDataLifecycle(autodispose_unregistered_instances=False),
        )
        with DurabilityService(domain_id=domain_id, namespace=namespace) as svc:
            with dcps.DomainParticipant(domain_id) as wp:
                wtopic = dcps.Topic(wp, topic_name, Reading)
                writer = dcps.DataWriter(wp, wtopic, qos=writer_qos)
                for s in range(3):
                    writer.write(Reading(s, 1.0, "x"))
                eventually(lambda: svc.history.count(topic_name) == 3)
                writer.dispose(Reading(1, 0.0, ""))
                eventually(lambda: svc.history.disposed(topic_name) == 1, what="dispose kept")
            reader = _late_reader(participant, topic, q.Durability.TRANSIENT)
            states = {s.data.sensor: s.info.instance_state for s in eventually(reader.take)}
            assert states == {
                0: dcps.InstanceState.NOT_ALIVE_NO_WRITERS,
                1: dcps.InstanceState.NOT_ALIVE_DISPOSED,
                2: dcps.InstanceState.NOT_ALIVE_NO_WRITERS,
            }
            eventually(lambda: svc.history.count(topic_name) == 2, what="cleanup after delay")
            later = _late_reader(participant, topic, q.Durability.TRANSIENT)
            assert sorted(s.data.sensor for s in eventually(later.take)) == [0, 2]


class TestPersistence:
    def test_persistent_history_survives_kill_9_of_service_and_writer(
        self,
        participant: dcps.DomainParticipant,
        processes: list[_Process],
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
    ) -> None:
        """A store process with the durability service keeps a PERSISTENT writer's data;
        both are killed with SIGKILL; a new store on the same directory serves it all
        to a late joiner."""
        data = tmp_path / "data"
        first = _service_process(processes, data, domain_id, namespace, "store")
        writer = _writer(processes, domain_id, topic_name, "PERSISTENT", 6, 2)
        topic = dcps.Topic(participant, topic_name, Reading)
        # the writer dies first: what a reader then gets, only the service can have kept
        eventually(
            lambda: len(_late_reader(participant, topic, q.Durability.PERSISTENT).read()) == 6,
            what="stored before the kill",
        )
        writer.kill()
        probe = _late_reader(participant, topic, q.Durability.PERSISTENT)
        assert len(eventually(probe.read)) == 6
        first.kill()
        _service_process(processes, data, domain_id, namespace, "store")
        reader = _late_reader(participant, topic, q.Durability.PERSISTENT)
        _no_writers_left(reader)
        samples = eventually(lambda: reader.take(), what="history after restart")
        assert sorted((s.data.sensor, s.data.value) for s in samples) == [
            (i, 1.0) for i in range(6)
        ]
        assert {s.info.instance_state for s in samples} == {dcps.InstanceState.NOT_ALIVE_NO_WRITERS}


class TestRedundancy:
    def test_two_services_one_killed_nothing_lost_and_history_once(
        self,
        participant: dcps.DomainParticipant,
        processes: list[_Process],
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
    ) -> None:
        """Two services keep a writer's data; a late joiner gets it once (not once per
        service); one service is killed and the writer dies: a later joiner still gets all;
        a third service started afterwards aligns from the survivor and serves it alone."""
        a = _service_process(processes, tmp_path / "a", domain_id, namespace, "service")
        _service_process(processes, tmp_path / "b", domain_id, namespace, "service")
        with pytest.MonkeyPatch.context() as env:  # both services hear every sample
            env.setenv("DURABILITY_PEER_READERS", "2")
            writer = _writer(processes, domain_id, topic_name, "TRANSIENT", 4, 1)
        topic = dcps.Topic(participant, topic_name, Reading)
        first = _late_reader(participant, topic, q.Durability.TRANSIENT)
        eventually(lambda: len(first.read()) == 4, what="the 4 samples, once each")
        assert sorted(s.data.sensor for s in first.take()) == [0, 1, 2, 3]
        a.kill()
        writer.kill()
        second = _late_reader(participant, topic, q.Durability.TRANSIENT)
        assert sorted(s.data.sensor for s in eventually(second.take)) == [0, 1, 2, 3]
        c = _service_process(processes, tmp_path / "c", domain_id, namespace, "service")
        assert c  # aligned before it said ready
        processes[1].kill()  # b: only the newcomer c is left
        third = _late_reader(participant, topic, q.Durability.TRANSIENT)
        assert sorted(s.data.sensor for s in eventually(third.take)) == [0, 1, 2, 3]


class TestExample:
    def test_sensor_history_monitor_sees_every_dead_sensor(
        self, domain_id: int, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """examples/sensor_history.py: five sensor processes write and exit; the monitor
        started afterwards prints each one's last reading, NOT_ALIVE_NO_WRITERS."""
        monkeypatch.setenv("DCPS_DURABILITY_NAMESPACE", "dcps")  # the example's store
        root = Path(__file__).parent.parent.parent
        result = subprocess.run(
            [sys.executable, "-m", "examples.sensor_history", "--domain", str(domain_id)],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
            env=os.environ.copy(),
        )
        assert result.returncode == 0, result.stderr
        lines = [ln for ln in result.stdout.splitlines() if ln.startswith("sensor ")]
        assert lines == [f"sensor {i}: {22.0 + i:.1f} (NOT_ALIVE_NO_WRITERS)" for i in range(5)]
