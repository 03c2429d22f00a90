"""QoS behaviour a user relies on, on real Cyclone DDS (writers in other processes)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest

import dcps
import qos
from tests.support.peer import Peer
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Reading
from tests.support.waiting import eventually


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


@pytest.fixture
def topic(participant: dcps.DomainParticipant, topic_name: str) -> dcps.Topic[Reading]:
    return dcps.Topic(participant, topic_name, Reading)


@pytest.fixture
def peers(domain_id: int, topic_name: str) -> Iterator[list[Peer]]:
    started: list[Peer] = []

    def start() -> Peer:
        p = Peer(domain_id, topic_name)
        started.append(p)
        return p

    yield start  # type: ignore[misc]
    for p in started:
        p.close()


class IncompatibleQosListener(dcps.Listener):
    def __init__(self) -> None:
        self.event = threading.Event()
        self.status: dcps.RequestedIncompatibleQosStatus | None = None

    def on_requested_incompatible_qos(
        self, reader: dcps.DataReader[Reading], status: dcps.RequestedIncompatibleQosStatus
    ) -> None:
        self.status = status
        self.event.set()


class TestReliability:
    def test_best_effort_writer_does_not_match_reliable_reader(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
    ) -> None:
        """A RELIABLE reader never matches a BEST_EFFORT writer; both sides report the policy."""
        listener = IncompatibleQosListener()
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True}), listener=listener
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": False}))
        assert listener.event.wait(10)
        assert listener.status is not None
        assert listener.status.last_policy_name == "Reliability"
        assert reader.requested_incompatible_qos_status.total_count >= 1
        status = eventually(
            lambda: (
                writer.offered_incompatible_qos_status.total_count
                and writer.offered_incompatible_qos_status
            )
        )
        assert status.last_policy_name == "Reliability"
        assert reader.matched_publications == []
        assert writer.matched_subscriptions == []

    def test_compatibility_check_explains_the_mismatch(self) -> None:
        """The offline check names the incompatible policy, as the status does on the wire."""
        reasons = qos.compatibility(writer_qos({"reliable": False}), reader_qos({"reliable": True}))
        assert [r.policy for r in reasons] == [qos.Reliability]
        assert reasons[0].reason == "reader requests RELIABLE, writer offers BEST_EFFORT"
        assert str(reasons[0]) == "Reliability: reader requests RELIABLE, writer offers BEST_EFFORT"


class TestDurability:
    @pytest.mark.multiprocess
    def test_late_joiner_gets_transient_local_history(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading], peers
    ) -> None:
        """A reader created after the writer wrote gets the last `depth` samples per instance."""
        writer = peers()
        writer.call("writer", qos={"reliable": True, "transient_local": True, "depth": 3})
        for i in range(5):
            writer.call("write", sensor=1, value=float(i))
        writer.call("write", sensor=2, value=10.0)
        reader = dcps.DataReader(
            participant,
            topic,
            qos=reader_qos({"reliable": True, "transient_local": True, "keep_all": True}),
        )
        reader.wait_for_historical_data(10)
        got = eventually(lambda: len(reader.read()) >= 4 and reader.read())
        by_sensor = {s: [x.data.value for x in got if x.data.sensor == s] for s in (1, 2)}
        assert by_sensor == {1: [2.0, 3.0, 4.0], 2: [10.0]}

    def test_volatile_reader_of_transient_local_writer_gets_no_history(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
    ) -> None:
        """Only readers that ask for TRANSIENT_LOCAL get old samples."""
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=writer_qos({"reliable": True, "transient_local": True, "depth": 3}),
        )
        writer.write(Reading(1, 1.0, "old"))
        reader = dcps.DataReader(participant, topic, qos=reader_qos({"reliable": True}))
        writer.wait_for_readers()
        writer.write(Reading(1, 2.0, "new"))
        reader.wait_for_data()
        assert [s.data.label for s in reader.take()] == ["new"]


class TestServicedDurability:
    @pytest.mark.parametrize("durability", [qos.Durability.TRANSIENT, qos.Durability.PERSISTENT])
    def test_writer_and_reader_accept_durability_kept_by_a_service(
        self,
        participant: dcps.DomainParticipant,
        topic: dcps.Topic[Reading],
        durability: qos.Durability,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """TRANSIENT/PERSISTENT writers and readers are created and exchange live data; with
        no durability service running, waiting for historical data times out naming it."""
        monkeypatch.setattr("dcps._history.HISTORY_WAIT", 0.5)
        writer = dcps.DataWriter(participant, topic, qos=qos.DataWriterQos(durability))
        reader = dcps.DataReader(participant, topic, qos=qos.DataReaderQos(durability))
        with pytest.raises(dcps.DcpsTimeoutError, match="no durability service"):
            reader.wait_for_historical_data(2.0)
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, "live"))
        eventually(lambda: [s.data.label for s in reader.take()] == ["live"])

    def test_transient_reader_does_not_match_a_transient_local_writer(
        self, participant: dcps.DomainParticipant, unique: str
    ) -> None:
        """A TRANSIENT reader requests more than a TRANSIENT_LOCAL writer offers: no match,
        the reader reports the Durability policy as incompatible."""
        topic = dcps.Topic(participant, f"dur_{unique}", Reading)
        offered = qos.DataWriterQos(qos.Durability.TRANSIENT_LOCAL)
        requested = qos.DataReaderQos(qos.Durability.TRANSIENT)
        assert [i.policy for i in qos.compatibility(offered, requested)] == [qos.Durability]
        dcps.DataWriter(participant, topic, qos=offered)
        reader = dcps.DataReader(participant, topic, qos=requested)
        eventually(lambda: reader.requested_incompatible_qos_status.total_count >= 1)
        assert reader.requested_incompatible_qos_status.last_policy_name == "Durability"
        assert reader.subscription_matched_status.current_count == 0


class TestEntityFactory:
    def test_autoenable_false_is_refused_for_participant_publisher_and_subscriber(
        self, participant: dcps.DomainParticipant, domain_id: int
    ) -> None:
        """dcps has no enable(): EntityFactory(autoenable_created_entities=False) raises
        UnsupportedError naming it, at creation and when set later."""
        off = qos.EntityFactory(autoenable_created_entities=False)
        match = r"EntityFactory\(autoenable_created_entities=False\) is not supported"
        with pytest.raises(dcps.UnsupportedError, match=match):
            dcps.DomainParticipant(domain_id, qos=qos.DomainParticipantQos(off))
        with pytest.raises(dcps.UnsupportedError, match=match):
            dcps.Publisher(participant, qos=qos.PublisherQos(off))
        with pytest.raises(dcps.UnsupportedError, match=match):
            dcps.Subscriber(participant, qos=qos.SubscriberQos(off))
        publisher = dcps.Publisher(participant, qos=qos.PublisherQos(qos.EntityFactory()))
        with pytest.raises(dcps.UnsupportedError, match=match):
            publisher.set_qos(qos.PublisherQos(off))
        subscriber = dcps.Subscriber(participant)
        with pytest.raises(dcps.UnsupportedError, match=match):
            subscriber.set_qos(qos.SubscriberQos(off, qos.Partition("elsewhere")))
        assert publisher.qos[qos.EntityFactory].autoenable_created_entities is True
        assert subscriber.partitions == ()


class TestPartitions:
    def test_partitions_isolate_and_can_change_at_run_time(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading], unique: str
    ) -> None:
        """Writer and reader in different partitions do not match until a partition changes."""
        pub = dcps.Publisher(participant, partitions=[f"{unique}/a"])
        sub = dcps.Subscriber(participant, partitions=[f"{unique}/b"])
        writer = dcps.DataWriter(pub, topic, qos=writer_qos({"reliable": True}))
        reader = dcps.DataReader(sub, topic, qos=reader_qos({"reliable": True, "keep_all": True}))
        other = dcps.DataReader(dcps.Subscriber(participant, partitions=[f"{unique}/b"]), topic)
        writer.write(Reading(1, 1.0, "a-only"))
        assert writer.matched_subscriptions == []
        sub.set_partitions([f"{unique}/*"])  # wildcard covers a
        assert sub.partitions == (f"{unique}/*",)
        writer.wait_for_readers(1)
        writer.write(Reading(1, 2.0, "seen"))
        reader.wait_for_data()
        assert [s.data.label for s in reader.take()] == ["seen"]
        assert other.read() == []

    def test_publisher_partition_change_keeps_writer_and_conditions_working(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading], unique: str
    ) -> None:
        """After a publisher moves partitions, the same writer object reaches the new readers,
        and a wait set on the reader's condition still wakes up after the subscriber moves."""
        pub = dcps.Publisher(participant, partitions=[f"{unique}/x"])
        writer = dcps.DataWriter(pub, topic, qos=writer_qos({"reliable": True}))
        sub = dcps.Subscriber(participant, partitions=[f"{unique}/y"])
        reader = dcps.DataReader(sub, topic, qos=reader_qos({"reliable": True}))
        cond = dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ)
        ws = dcps.WaitSet(participant)
        ws.attach(cond)
        pub.set_partitions([f"{unique}/z"])
        sub.set_partitions([f"{unique}/z"])
        writer.wait_for_readers(1)
        writer.write(Reading(3, 3.0, "moved"))
        assert ws.wait(10) == [cond]
        assert [s.data.label for s in reader.take(condition=cond)] == ["moved"]


class TestOwnership:
    @pytest.mark.multiprocess
    def test_exclusive_ownership_goes_to_the_strongest_writer(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading], peers
    ) -> None:
        """With EXCLUSIVE ownership the reader only sees the strongest live writer's updates."""
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True, "strength": 0})
        )
        weak, strong = peers(), peers()
        weak.start_writer(
            {
                "reliable": True,
                "keep_all": True,
                "strength": 1,
                "lease": 1.0,
                "keep_instances": True,
            },
            reader,
        )
        strong.start_writer(
            {
                "reliable": True,
                "keep_all": True,
                "strength": 9,
                "lease": 1.0,
                "keep_instances": True,
            },
            reader,
        )
        strong.call("write", sensor=1, value=9.0, label="strong")
        eventually(lambda: reader.read(), what="strong sample")
        weak.call("write", sensor=1, value=1.0, label="weak")
        # Acknowledged: the reader has had the weak sample and dropped it, so
        # "only strong" below is not just the weak sample still in flight.
        weak.call("wait_acks")
        strong.call("write", sensor=1, value=9.5, label="strong")
        eventually(lambda: [s for s in reader.read() if s.data.value == 9.5], what="second strong")
        assert {s.data.label for s in reader.take() if s.valid_data} == {"strong"}
        strong.kill()  # ownership passes to the weak writer once the strong one is gone
        eventually(
            lambda: (
                weak.call("write", sensor=1, value=2.0, label="weak")
                and [s for s in reader.take() if s.valid_data and s.data.label == "weak"]
            ),
            timeout=15,
            what="weak writer taking over",
        )


class DeadlineListener(dcps.Listener):
    def __init__(self) -> None:
        self.missed = threading.Event()

    def on_requested_deadline_missed(
        self, reader: dcps.DataReader[Reading], status: dcps.RequestedDeadlineMissedStatus
    ) -> None:
        self.missed.set()


class TestDeadlineAndLiveliness:
    def test_deadline_missed_is_reported_to_reader_and_writer(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
    ) -> None:
        """An instance not updated within the deadline raises deadline-missed on both sides."""
        listener = DeadlineListener()
        reader = dcps.DataReader(
            participant,
            topic,
            qos=reader_qos({"reliable": True, "deadline": 0.2}),
            listener=listener,
        )
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "deadline": 0.2})
        )
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, ""))
        assert listener.missed.wait(10)
        status = reader.requested_deadline_missed_status
        assert status.total_count >= 1
        assert status.last_instance_handle == reader.lookup_instance(Reading(1, 0.0, ""))
        eventually(lambda: writer.offered_deadline_missed_status.total_count >= 1)

    def test_deadline_longer_than_time_based_filter_is_required(self) -> None:
        """A reader deadline shorter than its time-based filter is inconsistent, naming both."""
        with pytest.raises(
            dcps.InconsistentPolicyError,
            match=r"Deadline.*TimeBasedFilter|TimeBasedFilter.*Deadline",
        ):
            reader_qos({"deadline": 0.1, "min_separation": 0.5}).check()

    @pytest.mark.multiprocess
    def test_manual_liveliness_not_asserted_is_lost(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading], peers
    ) -> None:
        """A MANUAL_BY_TOPIC writer that stops asserting loses liveliness until it asserts again."""
        reader = dcps.DataReader(participant, topic, qos=reader_qos({"reliable": True}))
        writer = peers()
        writer.start_writer(
            {"reliable": True, "keep_all": True, "lease": 0.3, "manual": True}, reader
        )
        writer.call("write", sensor=1, value=1.0)  # a write asserts liveliness
        eventually(lambda: reader.liveliness_changed_status.alive_count == 1)
        eventually(lambda: reader.liveliness_changed_status.not_alive_count == 1, what="lost")
        # Cyclone 11 ignores an explicit assert_liveliness on the reader side; a write revives
        writer.call("write", sensor=1, value=2.0)
        eventually(lambda: reader.liveliness_changed_status.alive_count == 1, what="alive again")

    def test_writer_reports_its_own_lost_liveliness(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
    ) -> None:
        """The writer's liveliness-lost status counts the leases it let expire."""
        dcps.DataReader(participant, topic, qos=reader_qos({"reliable": True}))
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "lease": 0.2, "manual": True})
        )
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, ""))
        eventually(lambda: writer.liveliness_lost_status.total_count >= 1, what="liveliness lost")


class TestLifespanAndFilter:
    def test_lifespan_expires_unread_samples(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
    ) -> None:
        """Samples older than the writer's lifespan disappear from the reader unread."""
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "lifespan": 0.3})
        )
        keeper = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        keeper.wait_for_readers()
        writer.write(Reading(1, 1.0, "short-lived"))
        keeper.write(Reading(2, 2.0, "kept"))
        eventually(lambda: len(reader.read(sample_states=dcps.SampleState.ANY)) == 2)
        eventually(
            lambda: [s.data.label for s in reader.read() if s.valid_data] == ["kept"],
            what="expiry of the short-lived sample",
        )

    def test_time_based_filter_thins_out_fast_updates(
        self, participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
    ) -> None:
        """A reader with a minimum separation gets far fewer samples of a fast instance."""
        fast_reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        slow_reader = dcps.DataReader(
            participant,
            topic,
            qos=reader_qos({"reliable": True, "keep_all": True, "min_separation": 10.0}),
        )
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "keep_all": True})
        )
        writer.wait_for_readers(2)
        for i in range(50):
            writer.write(Reading(1, float(i), ""))
        writer.wait_for_acknowledgments(timedelta(seconds=10))
        eventually(lambda: len(fast_reader.read()) == 50)
        assert [s.data.value for s in slow_reader.read()] == [0.0]
