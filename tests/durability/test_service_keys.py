"""The service keeps every instance of a writer that left before the service took its data.

Found under load by the C-writer and example tests: the service looked an instance's
key up after taking its samples, and Cyclone forgets an instance (and its key) once
its writer left and everything of it was taken; all such instances then shared one
empty key, and KEEP_LAST(1) kept one sample of them all. Reproduced here without
timing luck: the service's step runs only after the writer is gone.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import peek_infos
from dcps.store import DurabilityService
from dcps.store._durability import _reader_qos, _Served
from dcps.store._durability_history import Limits
from dcps.wire._names import ANY_STATE
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

NO_WRITERS = 64  # DDS_IST_NOT_ALIVE_NO_WRITERS


@pytest.fixture
def service(domain_id: int, namespace: str) -> Iterator[DurabilityService]:
    """A service that is not started: the test runs its take step itself."""
    svc = DurabilityService(domain_id=domain_id, namespace=namespace)
    yield svc
    svc.close()


def _write_and_leave(domain_id: int, topic_name: str) -> None:
    """Write sensors 0-2 from a participant of its own, acknowledged, then delete it."""
    other = DomainParticipant(domain_id)
    writer_qos = Qos(
        Policy.Reliability.Reliable(10**10),
        Policy.History.KeepAll,
        Policy.Durability.Transient,
        Policy.WriterDataLifecycle(autodispose=False),
    )
    writer = DataWriter(other, Topic(other, topic_name, Reading), writer_qos)
    eventually(lambda: writer.get_publication_matched_status().current_count == 1, 20, "match")
    for sensor in range(3):
        writer.write(Reading(sensor, 1.0, "x"))
    writer.wait_for_acks(10**10)
    other.__del__()  # the writer leaves: its instances lose their last writer


def test_instances_of_a_writer_that_left_keep_their_own_keys(
    service: DurabilityService, domain_id: int, topic_name: str
) -> None:
    dp = DomainParticipant(domain_id)
    _, reader_qos = _reader_qos("")
    reader = DataReader(dp, Topic(dp, topic_name, Reading), reader_qos)
    served = _Served(reader, topic_name, "")
    service.history.serve(topic_name, "", Limits(depth=1), persistent=False)

    _write_and_leave(domain_id, topic_name)

    def all_without_writers() -> bool:
        rows = peek_infos(entity_ref(reader), ANY_STATE, 16)
        return len(rows) == 3 and all(row[2] == NO_WRITERS for row in rows)

    eventually(all_without_writers, 20, "the writer's instances without writers")
    service._take(served, time.time_ns())
    assert service.history.count(topic_name) == 3
    assert len(set(served.keys.values())) == 3
