"""The reader's survivors that test_reader_access_lifecycle_mutants.py left (issue 20,
session 9): rejections on a reader with no listener, the end of an async iteration when
the reader closes, and a TRANSIENT reader's wait for a durability service.

One participant serves the module; each test has its own topic. The writer waits for
the reader's acknowledgement, so every sample is in the reader when the test looks.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest

import dcps
import qos
from tests.support.embedded_store import worker_domain
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Reading

RELIABLE = {"reliable": True, "keep_all": True}


@pytest.fixture(scope="module")
def participant(worker_id: str) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(worker_domain(worker_id)) as p:
        yield p


@pytest.fixture
def made(participant: dcps.DomainParticipant) -> Iterator[list[Any]]:
    """Entities a test makes, closed (last first) when it ends."""
    entities: list[Any] = []
    yield entities
    for entity in reversed(entities):
        entity.close()


def pair(
    participant: dcps.DomainParticipant, made: list[Any], name: str, reader: qos.DataReaderQos
) -> tuple[dcps.DataReader[Reading], dcps.DataWriter[Reading]]:
    topic = dcps.Topic(participant, name, Reading)
    made.append(topic)
    rd: dcps.DataReader[Reading] = dcps.DataReader(participant, topic, qos=reader)
    made.append(rd)
    wr = dcps.DataWriter(participant, topic, qos=writer_qos(RELIABLE))
    made.append(wr)
    wr.wait_for_readers()
    return rd, wr


class TestRejections:
    def test_a_bounded_keyed_reader_without_a_listener_keeps_its_rejection_status(
        self,
        participant: dcps.DomainParticipant,
        made: list[Any],
        topic_name: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Its eager drains find what its limits refuse; with no listener to tell, the
        change count waits for the application's read of the status (nothing consumes
        it, nothing is logged)."""
        caplog.set_level(logging.WARNING)
        limited = reader_qos(RELIABLE).with_(
            qos.SubscriptionKeys(use_key_list=True, key_list=("sensor",)),
            qos.ResourceLimits(max_samples=4),
        )
        reader, writer = pair(participant, made, topic_name, limited)
        for s in range(64):  # two eager drains (every 32 arrivals)
            writer.write(Reading(s, float(s), ""))
        writer.wait_for_acknowledgments(10)
        status = reader.sample_rejected_status
        assert status.total_count >= 1
        assert status.total_count_change == status.total_count
        assert [r.getMessage() for r in caplog.records if r.name.startswith("dcps")] == []


class TestAsyncEnd:
    @pytest.mark.parametrize("keys", [False, True])
    def test_closing_the_reader_ends_an_async_iteration_cleanly(
        self, participant: dcps.DomainParticipant, made: list[Any], topic_name: str, keys: bool
    ) -> None:
        """``async for sample in reader`` stops when the reader closes, without an error."""
        spec = reader_qos(RELIABLE)
        if keys:
            spec = spec.with_(qos.SubscriptionKeys(use_key_list=True, key_list=("sensor",)))
        reader, writer = pair(participant, made, topic_name, spec)

        async def main() -> list[float]:
            got: list[float] = []

            async def iterate() -> None:
                async for sample in reader:
                    if sample.valid_data:
                        got.append(sample.data.value)
                    if got == [1.0]:
                        break_point.set()

            break_point = asyncio.Event()
            task = asyncio.create_task(iterate())
            await asyncio.sleep(0)  # it takes nothing and waits
            writer.write(Reading(1, 1.0, ""))
            await asyncio.wait_for(break_point.wait(), 10)
            reader.close()
            await asyncio.wait_for(task, 10)  # ends, and raises nothing
            return got

        assert asyncio.run(main()) == [1.0]


class TestServicedHistory:
    def test_a_transient_reader_waits_for_a_durability_service(
        self,
        participant: dcps.DomainParticipant,
        made: list[Any],
        topic_name: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """No service keeps the topic's history here: the wait times out naming that,
        rather than returning as Cyclone's own wait (which has no durability service)
        would."""
        monkeypatch.setattr("dcps._history.HISTORY_WAIT", 0.5)
        topic = dcps.Topic(participant, topic_name, Reading)
        made.append(topic)
        reader: dcps.DataReader[Reading] = dcps.DataReader(
            participant, topic, qos=qos.DataReaderQos(qos.Durability.TRANSIENT)
        )
        made.append(reader)
        with pytest.raises(dcps.DcpsTimeoutError, match="no durability service"):
            reader.wait_for_historical_data(1.0)
