"""A new TRANSIENT/PERSISTENT dcps writer can write at once: the durability service keeps it.

Cyclone gives a TRANSIENT writer's earlier samples to no reader that matches later,
so a dcps writer's creation waits until a durability service's reader matched it
(dcps/_history.py ``wait_for_durability_service``). Waiting on the writer's side of
the match is enough: the service's side may still be discovering the writer, but
the reliable protocol repeats what the service's participant dropped meanwhile
(writers in another process, so that discovery really runs both ways).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import dcps
import qos as q
from dcps.store import DurabilityService
from tests.support.raw_durability import TIMEOUT
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "tests" / "support" / "peers" / "new_durable_writers.py"


@pytest.fixture
def service(domain_id: int, namespace: str) -> Iterator[DurabilityService]:
    with DurabilityService(domain_id=domain_id, namespace=namespace, align=False, key=None) as svc:
        yield svc


class TestNewWriters:
    def test_forty_writers_each_writing_at_once_are_all_kept(
        self, service: DurabilityService, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """The service's reader of the topic exists (a first writer made it): 40 new writers
        in another process each write the moment they exist, and the service keeps all 40."""
        with dcps.DomainParticipant(domain_id) as participant:
            first = dcps.DataWriter(
                participant,
                dcps.Topic(participant, topic_name, Reading),
                qos=q.DataWriterQos(q.Durability.TRANSIENT, q.Reliability.RELIABLE),
            )
            first.write(Reading(-1, 0.0, "first"))
            eventually(lambda: service.history.count(topic_name) == 1, TIMEOUT, "first kept")
            env = {
                **os.environ,
                "PYTHONPATH": os.pathsep.join(
                    filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])
                ),
                "DCPS_DURABILITY_NAMESPACE": namespace,
            }
            done = subprocess.run(
                [sys.executable, str(PEER), str(domain_id), topic_name, "40"],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert done.stdout.startswith("written"), done.stderr[-2000:]
            eventually(lambda: service.history.count(topic_name) == 41, TIMEOUT, "41 samples kept")
