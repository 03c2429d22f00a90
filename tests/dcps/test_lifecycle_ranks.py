"""Generation counts, ranks (DDS 1.4, 2.2.2.5.5) and ReaderDataLifecycle autopurge,
transition by transition, on plain readers and on SubscriptionKeys readers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest

import dcps
import qos
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

ALIVE = dcps.InstanceState.ALIVE
DISPOSED = dcps.InstanceState.NOT_ALIVE_DISPOSED


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


@pytest.fixture
def topic(participant: dcps.DomainParticipant, topic_name: str) -> dcps.Topic[Reading]:
    return dcps.Topic(participant, topic_name, Reading)


def ranks(samples: list[dcps.Sample[Reading]]) -> list[tuple[float, int, int, int, int, int]]:
    """(value, disposed gen, no-writers gen, sample rank, generation rank, absolute rank)."""
    return [
        (
            s.data.value,
            s.info.disposed_generation_count,
            s.info.no_writers_generation_count,
            s.info.sample_rank,
            s.info.generation_rank,
            s.info.absolute_generation_rank,
        )
        for s in samples
        if s.valid_data
    ]


class TestPlainReader:
    def test_generations_and_ranks_across_dispose_and_unregister(self, participant, topic) -> None:
        """write, write, dispose, write, unregister, write: counts and ranks per the spec."""
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=writer_qos({"reliable": True, "keep_all": True, "keep_instances": True}),
        )
        writer.wait_for_readers()
        key = Reading(1, 0.0, "")
        writer.write(Reading(1, 1.0, ""))
        writer.write(Reading(1, 2.0, ""))
        writer.dispose(key)  # disposed generation ends
        writer.write(Reading(1, 3.0, ""))  # reborn: disposed_generation_count 1
        writer.unregister_instance(key)  # no writers
        writer.write(Reading(1, 4.0, ""))  # reborn: no_writers_generation_count 1
        writer.wait_for_acknowledgments(10)
        everything = reader.read()
        assert ranks(everything) == [
            (1.0, 0, 0, 3, 2, 2),
            (2.0, 0, 0, 2, 2, 2),
            (3.0, 1, 0, 1, 1, 1),
            (4.0, 1, 1, 0, 0, 0),
        ]
        # ranks are relative to the collection returned: the first two alone
        first_two = reader.take(2)
        assert ranks(first_two) == [(1.0, 0, 0, 1, 0, 2), (2.0, 0, 0, 0, 0, 2)]

    def test_autopurge_nowriter_removes_samples_after_the_delay(self, participant, topic) -> None:
        """With autopurge_nowriter_samples_delay, samples of a writer-less instance disappear."""

        def purging(delay: timedelta) -> dcps.DataReader[Reading]:
            return dcps.DataReader(
                participant,
                topic,
                qos=reader_qos({"reliable": True, "keep_all": True}).with_(
                    qos.ReaderDataLifecycle(autopurge_nowriter_samples_delay=delay)
                ),
            )

        reader = purging(timedelta(milliseconds=200))
        slow = purging(timedelta(hours=1))  # its delay cannot run out during the test
        keep = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "keep_instances": True})
        )
        writer.wait_for_readers(3)
        writer.write(Reading(1, 1.0, ""))
        writer.write(Reading(2, 2.0, ""))
        writer.unregister_instance(Reading(1, 0.0, ""))
        writer.wait_for_acknowledgments(10)
        eventually(lambda: {s.data.sensor for s in reader.read()} == {2}, what="purge of sensor 1")
        assert {s.data.sensor for s in slow.read()} == {1, 2}  # not before its delay
        assert {s.data.sensor for s in keep.read()} == {1, 2}  # nor without the policy

    def test_autopurge_disposed_removes_samples_after_the_delay(self, participant, topic) -> None:
        """With autopurge_disposed_samples_delay, samples of a disposed instance disappear."""
        reader = dcps.DataReader(
            participant,
            topic,
            qos=reader_qos({"reliable": True, "keep_all": True}).with_(
                qos.ReaderDataLifecycle(
                    autopurge_disposed_samples_delay=timedelta(milliseconds=200)
                )
            ),
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, ""))
        writer.write(Reading(2, 2.0, ""))
        writer.wait_for_acknowledgments(10)
        assert {s.data.sensor for s in reader.read()} == {1, 2}
        disposed_at = time.monotonic()
        writer.dispose(Reading(2, 0.0, ""))
        eventually(lambda: {s.data.sensor for s in reader.read()} == {1}, what="purge of sensor 2")
        assert time.monotonic() - disposed_at >= 0.2  # after the delay, not before

    def test_rebirth_cancels_the_disposed_purge(self, participant, topic) -> None:
        """A disposed instance written again before its purge keeps its new sample."""
        reader = dcps.DataReader(
            participant,
            topic,
            qos=reader_qos({"reliable": True, "keep_all": True}).with_(
                qos.ReaderDataLifecycle(autopurge_disposed_samples_delay=timedelta(seconds=1))
            ),
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, ""))
        writer.dispose(Reading(1, 0.0, ""))
        eventually(
            lambda: any(s.info.instance_state == DISPOSED for s in reader.read()),
            what="sensor 1 disposed",
        )
        writer.write(Reading(1, 2.0, ""))  # reborn
        writer.write(Reading(2, 1.0, ""))
        writer.dispose(Reading(2, 0.0, ""))  # disposed after sensor 1: purged after it
        writer.wait_for_acknowledgments(10)
        eventually(lambda: 2 not in {s.data.sensor for s in reader.read()}, what="purge of 2")
        reborn = [s for s in reader.read() if s.valid_data and s.data.value == 2.0]
        assert [(s.data.sensor, s.info.instance_state) for s in reborn] == [(1, ALIVE)]


class TestSubscriptionKeysReader:
    def keyed(self, participant, topic, **lifecycle: timedelta) -> dcps.DataReader[Reading]:
        rq = reader_qos({"reliable": True, "keep_all": True}).with_(
            qos.SubscriptionKeys.of("label")
        )
        if lifecycle:
            rq = rq.with_(qos.ReaderDataLifecycle(**lifecycle))
        return dcps.DataReader(participant, topic, qos=rq)

    def test_ranks_and_disposed_generations(self, participant, topic) -> None:
        """write_dispose then write on a reader instance: generation counts and ranks per spec."""
        reader = self.keyed(participant, topic)
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "keep_all": True})
        )
        writer.wait_for_readers()
        reader.wait_for_writers()
        writer.write(Reading(1, 1.0, "a"))
        eventually(lambda: reader.read())
        writer.write_dispose(Reading(2, 2.0, "a"))
        eventually(lambda: len(reader.read()) == 2)
        writer.write(Reading(3, 3.0, "a"))
        eventually(lambda: len(reader.read()) == 3)
        assert ranks(reader.read()) == [
            (1.0, 0, 0, 2, 1, 1),
            (2.0, 0, 0, 1, 1, 1),
            (3.0, 1, 0, 0, 0, 0),
        ]

    def test_autopurge_disposed_applies_to_reader_instances(self, participant, topic) -> None:
        """A reader instance disposed by write_dispose is purged after the delay."""
        reader = self.keyed(
            participant, topic, autopurge_disposed_samples_delay=timedelta(milliseconds=200)
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        reader.wait_for_writers()
        writer.write(Reading(1, 1.0, "keep"))
        writer.write(Reading(2, 1.0, "gone"))
        eventually(lambda: len(reader.read()) == 2)
        disposed_at = time.monotonic()
        writer.write_dispose(Reading(2, 2.0, "gone"))
        eventually(
            lambda: any(
                s.info.instance_state == dcps.InstanceState.NOT_ALIVE_DISPOSED
                for s in reader.read()
            )
        )
        eventually(lambda: {s.data.label for s in reader.read()} == {"keep"}, what="purge")
        assert time.monotonic() - disposed_at >= 0.2  # after the delay, not before

    def test_rebirth_cancels_the_disposed_purge(self, participant, topic) -> None:
        """A reader instance written again after write_dispose keeps its new sample."""
        reader = self.keyed(
            participant, topic, autopurge_disposed_samples_delay=timedelta(seconds=1)
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        reader.wait_for_writers()
        writer.write_dispose(Reading(1, 1.0, "back"))
        eventually(
            lambda: any(s.info.instance_state == DISPOSED for s in reader.read()),
            what="'back' disposed",
        )
        writer.write(Reading(1, 2.0, "back"))  # reborn
        writer.write_dispose(Reading(2, 1.0, "gone"))  # disposed later: purged later
        eventually(lambda: "gone" not in {s.data.label for s in reader.read()}, what="purge")
        reborn = [s for s in reader.read() if s.data.value == 2.0]
        assert [(s.data.label, s.info.instance_state) for s in reborn] == [("back", ALIVE)]
