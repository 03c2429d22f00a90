"""Interoperability: a C writer on Debian's Cyclone DDS, kept by the dcps durability service.

The writer (``tests/support/peers/durability_peer.c``) is built at test time with
idlc (with XTypes type information: the service learns the type by type lookup,
it has no Python class for it) and gcc. It writes TRANSIENT or PERSISTENT data
with a DurabilityService QoS and exits; a dcps reader created afterwards gets the
last reading of every sensor from the service, NOT_ALIVE_NO_WRITERS.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import dcps
import qos as q
from dcps.store import Store, SyncMode
from tests.support.c_peers import DURABILITY_PEER, build_c_peer
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

pytestmark = [pytest.mark.multiprocess]


@pytest.fixture(autouse=True)
def _durability_namespace(namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers ask the durability services of the test's namespace."""
    monkeypatch.setenv("DCPS_DURABILITY_NAMESPACE", namespace)


@pytest.fixture(scope="module")
def c_writer() -> Path:
    exe, idl_files, source = DURABILITY_PEER
    return build_c_peer(exe, idl_files, source, type_info=True)


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as dp:
        yield dp


def _store(data: Path, domain_id: int, namespace: str) -> Store:
    return Store(
        data, domain_id=domain_id, namespace=namespace, sync=SyncMode.NORMAL, durability=("*",)
    )


def _write(
    binary: Path, domain_id: int, topic: str, kind: str, sensors: int, rounds: int, readers: int
) -> str:
    """Run the C writer to its end; return what it printed."""
    done = subprocess.run(
        [str(binary), str(domain_id), topic, kind, str(sensors), str(rounds), str(readers)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, f"the C writer failed ({done.returncode}): {done.stderr}"
    return done.stdout.strip()


def _kept(store: Store, topic_name: str, count: int) -> None:
    """Wait until the store's service keeps ``count`` samples (acknowledged is not yet kept)."""
    service = store.durability
    assert service is not None
    try:
        eventually(lambda: service.history.count(topic_name) == count, 20, f"{count} kept")
    except AssertionError as exc:
        kept = service.history.count(topic_name)
        raise AssertionError(f"{exc}: {kept} kept; served {service.history.topics()}") from None


def _late_joiner(
    participant: dcps.DomainParticipant, topic_name: str, kind: q.Durability, count: int
) -> list[dcps.Sample[Reading]]:
    """A reader created now; the first ``count`` samples it gets (the stored history)."""
    topic = dcps.Topic(participant, topic_name, Reading)
    reader = dcps.DataReader(participant, topic, qos=q.DataReaderQos(kind, q.History.KEEP_ALL))
    reader.wait_for_historical_data(20)
    taken: list[dcps.Sample[Reading]] = []

    def all_taken() -> bool:
        taken.extend(reader.take())  # not read(): that would make the instances NOT_NEW
        return len(taken) >= count

    eventually(all_taken, 20, f"{count} stored samples")
    return taken


class TestCWriter:
    def test_transient_c_writer_exits_and_a_dcps_late_joiner_gets_its_last_state(
        self,
        c_writer: Path,
        participant: dcps.DomainParticipant,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
    ) -> None:
        """The C writer waits for the service's reader, writes 3 rounds for 4 sensors
        and exits; the service (which knew the C type only by XTypes lookup) keeps each
        sensor's last reading; a dcps reader created afterwards gets exactly those,
        with the C program's labels, NOT_ALIVE_NO_WRITERS."""
        with _store(tmp_path / "store", domain_id, namespace) as store:
            assert _write(c_writer, domain_id, topic_name, "transient", 4, 3, 1) == "written 12"
            _kept(store, topic_name, 4)
            samples = _late_joiner(participant, topic_name, q.Durability.TRANSIENT, 4)
        assert sorted((s.data.sensor, s.data.value, s.data.label) for s in samples) == [
            (i, 2.0, f"c{i}") for i in range(4)
        ]
        assert {s.info.instance_state for s in samples} == {dcps.InstanceState.NOT_ALIVE_NO_WRITERS}
        assert {s.info.view_state for s in samples} == {dcps.ViewState.NEW}

    def test_persistent_c_writer_data_survives_a_restart_of_the_store(
        self,
        c_writer: Path,
        participant: dcps.DomainParticipant,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
    ) -> None:
        """PERSISTENT data of a C writer is on disk: the store that kept it is closed,
        a new one on the same directory serves it to a dcps late joiner."""
        data = tmp_path / "store"
        with _store(data, domain_id, namespace) as store:
            assert _write(c_writer, domain_id, topic_name, "persistent", 3, 2, 1) == "written 6"
            _kept(store, topic_name, 3)
        with _store(data, domain_id, namespace):
            samples = _late_joiner(participant, topic_name, q.Durability.PERSISTENT, 3)
        got = sorted((s.data.sensor, s.data.value) for s in samples)
        assert got == [(i, 1.0) for i in range(3)]
        assert {s.info.instance_state for s in samples} == {dcps.InstanceState.NOT_ALIVE_NO_WRITERS}

    def test_a_c_writer_that_does_not_wait_for_the_service_is_not_kept(
        self,
        c_writer: Path,
        participant: dcps.DomainParticipant,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
    ) -> None:
        """Why the C writer waits for a match: Cyclone has no durability service, so what
        a TRANSIENT writer writes before the service's reader matched, and takes with it
        when it exits, is lost. A late joiner then gets nothing (and says so by
        wait_for_historical_data returning)."""
        with _store(tmp_path / "store", domain_id, namespace) as store:
            assert _write(c_writer, domain_id, topic_name, "transient", 2, 1, 0) == "written 2"
            topic = dcps.Topic(participant, topic_name, Reading)
            reader = dcps.DataReader(
                participant, topic, qos=q.DataReaderQos(q.Durability.TRANSIENT)
            )
            reader.wait_for_historical_data(20)
            assert reader.take() == []
            assert store.durability is not None
            assert store.durability.history.count(topic_name) == 0
