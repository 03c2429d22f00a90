"""Instance lifecycle across processes: dispose, unregister, writer death, rebirth."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dcps
from tests.support.peer import Peer
from tests.support.qos_spec import reader_qos
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

ALIVE = dcps.InstanceState.ALIVE
DISPOSED = dcps.InstanceState.NOT_ALIVE_DISPOSED
NO_WRITERS = dcps.InstanceState.NOT_ALIVE_NO_WRITERS


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


@pytest.fixture
def reader(participant: dcps.DomainParticipant, topic_name: str) -> dcps.DataReader[Reading]:
    topic = dcps.Topic(participant, topic_name, Reading)
    return dcps.DataReader(participant, topic, qos=reader_qos({"reliable": True, "keep_all": True}))


@pytest.fixture
def peer(domain_id: int, topic_name: str) -> Iterator[Peer]:
    p = Peer(domain_id, topic_name)
    try:
        yield p
    finally:
        p.close()


def wait_for_state(
    reader: dcps.DataReader[Reading], sensor: int, state: dcps.InstanceState, timeout: float = 15.0
) -> list[dcps.Sample[Reading]]:
    """Take samples of ``sensor`` until its instance is in ``state``; return all taken."""
    seen: list[dcps.Sample[Reading]] = []
    participant = reader.topic.participant
    with dcps.WaitSet(participant) as ws, dcps.ReadCondition(reader, instance_states=state) as cond:
        ws.attach(cond)
        while True:
            ws.wait(timeout)
            batch = [s for s in reader.take() if s.data.sensor == sensor]
            seen += batch
            if any(s.info.instance_state == state for s in batch):
                return seen


class TestLifecycle:
    def test_dispose_makes_instance_not_alive_disposed(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """A dispose from the writer's process shows up as NOT_ALIVE_DISPOSED."""
        peer.start_writer({"reliable": True, "keep_all": True}, reader)
        peer.call("write", sensor=1, value=1.0)
        peer.call("dispose", sensor=1)
        seen = wait_for_state(reader, 1, DISPOSED)
        assert seen[0].valid_data
        assert seen[0].data.value == 1.0
        assert seen[-1].info.instance_state == DISPOSED

    def test_unregister_last_writer_gives_no_writers(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """Unregistering (without auto-dispose) leaves the instance NOT_ALIVE_NO_WRITERS."""
        peer.start_writer({"reliable": True, "keep_all": True, "keep_instances": True}, reader)
        peer.call("write", sensor=2, value=2.0)
        peer.call("unregister", sensor=2)
        seen = wait_for_state(reader, 2, NO_WRITERS)
        assert seen[-1].info.instance_state == NO_WRITERS

    def test_unregister_with_autodispose_disposes(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """With the default WriterDataLifecycle, unregister also disposes the instance."""
        peer.start_writer({"reliable": True, "keep_all": True}, reader)
        peer.call("write", sensor=3, value=3.0)
        peer.call("unregister", sensor=3)
        assert wait_for_state(reader, 3, DISPOSED)[-1].info.instance_state == DISPOSED

    def test_killed_writer_process_gives_no_writers(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """kill -9 of the only writer's process makes its instances NOT_ALIVE_NO_WRITERS."""
        peer.start_writer(
            {"reliable": True, "keep_all": True, "lease": 1.0, "keep_instances": True}, reader
        )
        peer.call("write", sensor=4, value=4.0)
        reader.wait_for_data()
        peer.kill()
        seen = wait_for_state(reader, 4, NO_WRITERS)
        assert seen[-1].info.instance_state == NO_WRITERS
        eventually(
            lambda: reader.liveliness_changed_status.alive_count == 0, what="writer not alive"
        )

    def test_killed_autodisposing_writer_gives_no_writers(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """A crash is not a dispose: kill -9 of a writer with autodispose on gives NO_WRITERS.

        (Cyclone applies a lost writer's announced autodispose flag; a dcps writer
        announces it off and disposes itself on unregister and close.)
        """
        peer.start_writer({"reliable": True, "keep_all": True, "lease": 1.0}, reader)
        peer.call("write", sensor=7, value=7.0)
        reader.wait_for_data()
        peer.kill()
        states = [s.info.instance_state for s in wait_for_state(reader, 7, NO_WRITERS)]
        assert states[-1] == NO_WRITERS
        assert DISPOSED not in states

    def test_closed_autodisposing_writer_disposes(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """Closing a writer with autodispose on (the default) disposes its instances."""
        peer.start_writer({"reliable": True, "keep_all": True}, reader)
        peer.call("write", sensor=8, value=8.0)
        reader.wait_for_data()
        peer.call("close")
        assert wait_for_state(reader, 8, DISPOSED)[-1].info.instance_state == DISPOSED

    def test_rebirth_after_dispose_is_new_with_generation_counts(
        self, reader: dcps.DataReader[Reading], peer: Peer
    ) -> None:
        """Writing a disposed instance again gives view NEW and disposed_generation_count 1."""
        peer.start_writer({"reliable": True, "keep_all": True}, reader)
        peer.call("write", sensor=5, value=1.0)
        peer.call("dispose", sensor=5)
        wait_for_state(reader, 5, DISPOSED)
        # take() removed the samples but the instance stays known while a writer exists
        peer.call("write", sensor=5, value=2.0)
        reborn = wait_for_state(reader, 5, ALIVE)[-1]
        assert reborn.data.value == 2.0
        assert reborn.info.view_state == dcps.ViewState.NEW
        assert reborn.info.disposed_generation_count == 1
        assert reborn.info.no_writers_generation_count == 0

    def test_rebirth_after_writer_death_counts_no_writers_generation(
        self, domain_id: int, topic_name: str, participant: dcps.DomainParticipant
    ) -> None:
        """A new writer process reviving an instance left by a killed one: NEW, no_writers gen 1."""
        topic = dcps.Topic(participant, topic_name, Reading)
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        first, second = Peer(domain_id, topic_name), Peer(domain_id, topic_name)
        try:
            second.start_writer(
                {"reliable": True, "keep_all": True, "lease": 1.0, "keep_instances": True}, reader
            )
            first.start_writer(
                {"reliable": True, "keep_all": True, "lease": 1.0, "keep_instances": True}, reader
            )
            first.call("write", sensor=6, value=1.0)
            reader.wait_for_data()
            # read (not take) keeps the instance in the reader across the generations
            assert [s.info.view_state for s in reader.read()] == [dcps.ViewState.NEW]
            first.kill()
            # the second writer has not written sensor 6: the instance has no writers now
            states = [s.info.instance_state for s in wait_for_state_read(reader, 6, NO_WRITERS)]
            assert states[-1] == NO_WRITERS
            second.call("write", sensor=6, value=2.0)
            reborn = wait_for_state_read(reader, 6, ALIVE, value=2.0)[-1]
            assert reborn.info.view_state == dcps.ViewState.NEW
            assert reborn.info.no_writers_generation_count == 1
            assert reborn.info.disposed_generation_count == 0
        finally:
            first.close()
            second.close()


def wait_for_state_read(
    reader: dcps.DataReader[Reading],
    sensor: int,
    state: dcps.InstanceState,
    value: float | None = None,
    timeout: float = 15.0,
) -> list[dcps.Sample[Reading]]:
    """Read (not take) until ``sensor``'s instance is in ``state`` (with ``value`` if given)."""
    participant = reader.topic.participant
    with dcps.WaitSet(participant) as ws, dcps.ReadCondition(reader, instance_states=state) as cond:
        ws.attach(cond)
        while True:
            ws.wait(timeout)
            samples = [s for s in reader.read(instance_states=state) if s.data.sensor == sensor]
            if samples and (value is None or samples[-1].data.value == value):
                return samples


class TestReclaim:
    def test_take_lets_a_writerless_instance_be_reclaimed(
        self, domain_id: int, topic_name: str, participant: dcps.DomainParticipant
    ) -> None:
        """After take() of a writerless instance, a new sample starts it anew: generation 0.

        (Where read() keeps the instance and counts the generation: see the test above.)
        """
        topic = dcps.Topic(participant, topic_name, Reading)
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        first, second = Peer(domain_id, topic_name), Peer(domain_id, topic_name)
        try:
            second.start_writer({"reliable": True, "keep_all": True, "lease": 1.0}, reader)
            first.start_writer({"reliable": True, "keep_all": True, "lease": 1.0}, reader)
            first.call("write", sensor=9, value=1.0)
            reader.wait_for_data()
            first.kill()
            wait_for_state(reader, 9, NO_WRITERS)  # takes everything, the last sample too
            second.call("write", sensor=9, value=2.0)
            reborn = wait_for_state(reader, 9, ALIVE)[-1]
            assert reborn.data.value == 2.0
            assert reborn.info.view_state == dcps.ViewState.NEW
            assert reborn.info.no_writers_generation_count == 0
            assert reborn.info.disposed_generation_count == 0
        finally:
            first.close()
            second.close()
