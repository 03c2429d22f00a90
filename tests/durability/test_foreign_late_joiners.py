"""What a non-dcps late joiner sees of TRANSIENT data (README "Durability").

A writer process on the raw ``cyclonedds`` binding keeps a TRANSIENT writer (whose
data the durability service keeps) and a TRANSIENT_LOCAL one alive. Late joiners in
this process: a raw TRANSIENT_LOCAL reader gets the TRANSIENT_LOCAL writer's history
(Cyclone replays it); a raw TRANSIENT reader gets nothing of the TRANSIENT writer's,
neither from Cyclone nor from the service (which answers the dcps history protocol
only); a dcps TRANSIENT reader gets it from the service.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

import dcps
import qos as q
from dcps.store import Store, SyncMode
from tests.support.peers import PEERS_DIR
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

pytestmark = [pytest.mark.multiprocess]

SENSORS = 3


@pytest.fixture(autouse=True)
def _durability_namespace(namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DCPS_DURABILITY_NAMESPACE", namespace)


@pytest.fixture
def raw_writer(
    tmp_path: Path, domain_id: int, namespace: str, topic_name: str
) -> Iterator[tuple[Store, str, str]]:
    """A store with a durability service, and the raw writer process (alive) that wrote."""
    t_topic, tl_topic = f"{topic_name}_t", f"{topic_name}_tl"
    root = str(Path(__file__).resolve().parents[2])
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
    }
    with Store(
        tmp_path / "store",
        domain_id=domain_id,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        durability=("*",),
    ) as store:
        process = subprocess.Popen(
            [
                sys.executable,
                str(PEERS_DIR / "raw_durable_writer.py"),
                str(domain_id),
                t_topic,
                tl_topic,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "written"
            yield store, t_topic, tl_topic
        finally:
            process.kill()
            process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe is not None:
                    pipe.close()


def _raw_reader(dp: DomainParticipant, topic: str, durability: object) -> DataReader[Reading]:
    qos = Qos(durability, Policy.Reliability.Reliable(10**10), Policy.History.KeepAll)
    return DataReader(dp, Topic(dp, topic, Reading), qos)


def test_a_raw_transient_late_joiner_gets_no_history_a_dcps_one_gets_the_services(
    raw_writer: tuple[Store, str, str], domain_id: int
) -> None:
    store, t_topic, tl_topic = raw_writer
    assert store.durability is not None
    service = store.durability
    eventually(lambda: service.history.count(t_topic) == SENSORS, 20, "the service keeps 3")
    raw = DomainParticipant(domain_id)
    foreign = _raw_reader(raw, t_topic, Policy.Durability.Transient)
    eventually(
        lambda: foreign.get_subscription_matched_status().current_count >= 1,
        20,
        "the raw TRANSIENT reader matching the live TRANSIENT writer",
    )
    # the control: a TRANSIENT_LOCAL writer's history is replayed to a late joiner;
    # by the time it arrived, a replay to the earlier-matched TRANSIENT reader would have
    control = _raw_reader(raw, tl_topic, Policy.Durability.TransientLocal)
    got: list[Reading] = []
    eventually(lambda: got.extend(control.take(N=16)) or len(got) >= SENSORS, 20, "TL replay")
    assert sorted(r.sensor for r in got) == list(range(SENSORS))

    with dcps.DomainParticipant(domain_id) as dp:
        reader = dcps.DataReader(
            dp,
            dcps.Topic(dp, t_topic, Reading),
            qos=q.DataReaderQos(q.Durability.TRANSIENT, q.History.KEEP_ALL),
        )
        reader.wait_for_historical_data(20)
        history: list[dcps.Sample[Reading]] = []
        eventually(
            lambda: history.extend(reader.take()) or len(history) >= SENSORS, 20, "dcps history"
        )
        assert sorted((s.data.sensor, s.data.label) for s in history) == [
            (i, "raw") for i in range(SENSORS)
        ]
    assert foreign.take(N=16) == []  # nothing from Cyclone, nothing from the service
