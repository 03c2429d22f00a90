"""Conversion to and from the cyclonedds binding, checked on real entities."""

import time
from dataclasses import dataclass
from datetime import timedelta

import pytest
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl.annotations import key
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.qos import Policy, Qos
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from idl._errors import BadParameterError
from qos import (
    INFINITE,
    DataReaderQos,
    DataRepresentation,
    DataRepresentationId,
    DataWriterQos,
    Deadline,
    DestinationOrder,
    DomainParticipantQos,
    Durability,
    DurabilityService,
    EntityName,
    GroupData,
    History,
    IgnoreLocal,
    LatencyBudget,
    Lifespan,
    Liveliness,
    Ownership,
    OwnershipStrength,
    Partition,
    Presentation,
    PresentationAccessScope,
    Properties,
    Property,
    PublisherQos,
    QosSet,
    ReaderDataLifecycle,
    Reliability,
    ResourceLimits,
    SubscriberQos,
    SubscriptionKeys,
    TimeBasedFilter,
    TopicData,
    TopicQos,
    TransportPriority,
    TypeConsistencyEnforcement,
    TypeConsistencyKind,
    UserData,
    WriterDataLifecycle,
    from_cyclone,
    to_cyclone,
)

MS = timedelta(milliseconds=1)


@dataclass
class Sample(IdlStruct, typename="qos_test.Sample"):
    id: int
    key("id")
    value: int


def assert_carried(sent: QosSet, back: QosSet) -> None:
    """Every policy given explicitly comes back from Cyclone with the same value."""
    for cls, policy in sent.explicit.items():
        if cls is SubscriptionKeys:
            continue
        assert back[cls] == policy, cls.__name__


@pytest.fixture
def participant(domain_id: int) -> DomainParticipant:
    return DomainParticipant(domain_id)


WRITER = DataWriterQos(
    Reliability.reliable(250 * MS),
    Durability.TRANSIENT_LOCAL,
    History.keep_last(7),
    ResourceLimits(100, 20, 10),
    Deadline(timedelta(seconds=3)),
    LatencyBudget(5 * MS),
    Liveliness.manual_by_participant(timedelta(seconds=4)),
    DestinationOrder.BY_SOURCE_TIMESTAMP,
    TransportPriority(3),
    Lifespan(timedelta(minutes=2)),
    UserData(b"writer"),
    Ownership.EXCLUSIVE,
    OwnershipStrength(9),
    WriterDataLifecycle(False),
    IgnoreLocal.PROCESS,
    EntityName("the writer"),
    DataRepresentation([DataRepresentationId.XCDR2]),
)

READER = DataReaderQos(
    Reliability.RELIABLE,
    Durability.TRANSIENT_LOCAL,
    History.KEEP_ALL,
    ResourceLimits(max_samples=1000),
    Deadline(timedelta(seconds=5)),
    LatencyBudget(10 * MS),
    Liveliness.manual_by_participant(timedelta(seconds=6)),
    DestinationOrder.BY_SOURCE_TIMESTAMP,
    UserData(b"reader"),
    Ownership.EXCLUSIVE,
    TimeBasedFilter(20 * MS),
    ReaderDataLifecycle(timedelta(seconds=30), timedelta(seconds=40)),
    SubscriptionKeys.of("value"),
    TypeConsistencyEnforcement(TypeConsistencyKind.DISALLOW_TYPE_COERCION),
    IgnoreLocal.PARTICIPANT,
    DataRepresentation([DataRepresentationId.XCDR1, DataRepresentationId.XCDR2]),
)

TOPIC = TopicQos(
    TopicData(b"topic"),
    Reliability.RELIABLE,
    Durability.TRANSIENT_LOCAL,
    DurabilityService(timedelta(seconds=1), History.keep_last(3), 30, 10, 3),
    History.keep_last(3),
    Deadline(timedelta(seconds=9)),
    Lifespan(timedelta(hours=1)),
    TransportPriority(1),
)


class TestRoundTrip:
    def test_participant(self, domain_id: int) -> None:
        """A participant created from a converted QoS reports the same policies."""
        sent = DomainParticipantQos(UserData(b"hello"), IgnoreLocal.PROCESS, EntityName("p"))
        participant = DomainParticipant(domain_id, qos=to_cyclone(sent))
        assert_carried(sent, from_cyclone(participant.get_qos(), DomainParticipantQos))

    def test_default_participant_reports_process_properties(self, domain_id: int) -> None:
        """Cyclone describes a default participant's process in properties we read back."""
        participant = DomainParticipant(domain_id)
        assert "__Pid" in from_cyclone(participant.get_qos(), "participant")[Properties]

    def test_properties(self, domain_id: int, topic_name: str) -> None:
        """Text and binary properties reach Cyclone and come back from participants and writers."""
        props = Properties([Property("site", "lab", True), Property("blob", b"\x01\x02")])
        participant = DomainParticipant(domain_id, qos=to_cyclone(DomainParticipantQos(props)))
        back = from_cyclone(participant.get_qos(), "participant")[Properties]
        assert back["site"] == "lab"
        assert back["blob"] == b"\x01\x02"
        topic = Topic(participant, topic_name, Sample)
        writer = DataWriter(participant, topic, qos=to_cyclone(DataWriterQos(props)))
        assert from_cyclone(writer.get_qos(), "writer")[Properties] == props

    def test_topic(self, participant: DomainParticipant, topic_name: str) -> None:
        """A topic created from a converted QoS reports the same policies."""
        topic = Topic(participant, topic_name, Sample, qos=to_cyclone(TOPIC))
        assert_carried(TOPIC, from_cyclone(topic.get_qos(), "topic"))

    @pytest.mark.parametrize("kind", [PublisherQos, SubscriberQos])
    def test_publisher_and_subscriber(
        self, participant: DomainParticipant, kind: type[QosSet]
    ) -> None:
        """Publishers and subscribers keep partitions, presentation and group data."""
        sent = kind(
            Partition("a", "b*"),
            Presentation(PresentationAccessScope.GROUP, True, True),
            GroupData(b"group"),
            EntityName("g"),
        )
        entity = (Publisher if kind is PublisherQos else Subscriber)(
            participant, qos=to_cyclone(sent)
        )
        assert_carried(sent, from_cyclone(entity.get_qos(), kind))

    def test_writer(self, participant: DomainParticipant, topic_name: str) -> None:
        """A writer created from a converted QoS reports every policy it was given."""
        topic = Topic(participant, topic_name, Sample)
        writer = DataWriter(participant, topic, qos=to_cyclone(WRITER))
        back = from_cyclone(writer.get_qos(), "writer")
        assert_carried(WRITER, back)
        assert back == from_cyclone(to_cyclone(WRITER), DataWriterQos)

    def test_reader(self, participant: DomainParticipant, topic_name: str) -> None:
        """A reader created from a converted QoS reports every Cyclone policy it was given."""
        topic = Topic(participant, topic_name, Sample)
        reader = DataReader(participant, topic, qos=to_cyclone(READER))
        assert_carried(READER, from_cyclone(reader.get_qos(), "reader"))

    def test_defaults_are_spec_defaults_not_topic_values(
        self, participant: DomainParticipant, topic_name: str
    ) -> None:
        """A default reader on a reliable topic is best effort: Cyclone's topic merge stays out."""
        topic = Topic(participant, topic_name, Sample, qos=to_cyclone(TOPIC))
        reader = DataReader(participant, topic, qos=to_cyclone(DataReaderQos()))
        back = from_cyclone(reader.get_qos(), DataReaderQos)
        assert back[Reliability] == Reliability.BEST_EFFORT
        assert back[Durability] == Durability.VOLATILE
        writer = DataWriter(participant, topic, qos=to_cyclone(DataWriterQos()))
        assert from_cyclone(writer.get_qos(), DataWriterQos)[Reliability] == Reliability.RELIABLE

    def test_infinite_durations_survive(self) -> None:
        """INFINITE converts to Cyclone's infinity and back."""
        qos = DataWriterQos(Deadline(INFINITE), Lifespan(INFINITE))
        back = from_cyclone(to_cyclone(qos), "writer")
        assert back[Deadline].period == INFINITE
        assert back[Lifespan].duration == INFINITE


class TestConversionDetails:
    def test_result_is_the_binding_class_for_the_kind(self) -> None:
        """to_cyclone returns the binding's QoS class of the same entity kind."""
        from cyclonedds import qos as cq

        assert isinstance(to_cyclone(DataReaderQos()), cq.DataReaderQos)
        assert isinstance(to_cyclone(DataWriterQos()), cq.DataWriterQos)
        assert isinstance(to_cyclone(TopicQos()), cq.TopicQos)
        assert isinstance(to_cyclone(PublisherQos()), cq.PublisherQos)

    def test_implicit_durability_service_follows_history_for_transient_local(self) -> None:
        """A TRANSIENT_LOCAL writer without DurabilityService gets one from History and limits."""
        cyclone = to_cyclone(
            DataWriterQos(
                Durability.TRANSIENT_LOCAL,
                History.keep_last(5),
                ResourceLimits(max_samples=50, max_samples_per_instance=5),
            )
        )
        service = cyclone[Policy.DurabilityService]
        assert service.history == Policy.History.KeepLast(5)
        assert service.max_samples == 50
        assert service.max_samples_per_instance == 5

    def test_explicit_durability_service_is_kept(self) -> None:
        """An explicit DurabilityService is passed on unchanged."""
        explicit = DurabilityService(history=History.keep_last(2))
        cyclone = to_cyclone(
            DataWriterQos(Durability.TRANSIENT_LOCAL, History.keep_last(5), explicit)
        )
        assert cyclone[Policy.DurabilityService].history == Policy.History.KeepLast(2)

    def test_volatile_writer_keeps_default_durability_service(self) -> None:
        """A VOLATILE writer's DurabilityService stays at the default."""
        cyclone = to_cyclone(DataWriterQos(History.keep_last(5)))
        assert cyclone[Policy.DurabilityService].history == Policy.History.KeepLast(1)

    def test_from_cyclone_drops_policies_of_other_kinds(self) -> None:
        """Policies Cyclone keeps that do not apply to the kind are left out."""
        cyclone = Qos(
            Policy.Partition(["x"]), Policy.Reliability.Reliable(0), Policy.Property("k", "v")
        )
        back = from_cyclone(cyclone, "reader")
        assert back[Reliability].max_blocking_time == timedelta(0)
        assert not DataReaderQos.applies(Partition)

    def test_bad_arguments(self) -> None:
        """Wrong argument types and unknown kind names raise BadParameterError."""
        with pytest.raises(BadParameterError, match="QoS set"):
            to_cyclone(Reliability.RELIABLE)  # type: ignore[arg-type]
        with pytest.raises(BadParameterError, match="'gadget'"):
            from_cyclone(Qos(), "gadget")
        with pytest.raises(BadParameterError, match="cyclonedds Qos"):
            from_cyclone(DataReaderQos(), "reader")  # type: ignore[arg-type]


class TestTransientLocalLateJoiner:
    def test_late_joiner_gets_the_writers_history(
        self, participant: DomainParticipant, topic_name: str
    ) -> None:
        """A reader joining after 8 writes to a TL keep-last-5 writer receives the last 5."""
        topic = Topic(participant, topic_name, Sample)
        writer_qos = DataWriterQos(Durability.TRANSIENT_LOCAL, History.keep_last(5))
        writer = DataWriter(participant, topic, qos=to_cyclone(writer_qos))
        for n in range(8):
            writer.write(Sample(id=1, value=n))
        reader_qos = DataReaderQos(
            Reliability.RELIABLE, Durability.TRANSIENT_LOCAL, History.keep_last(10)
        )
        reader = DataReader(participant, topic, qos=to_cyclone(reader_qos))
        received: list[int] = []
        deadline = time.monotonic() + 10
        while len(received) < 5 and time.monotonic() < deadline:
            received += [s.value for s in reader.take(N=100)]
            time.sleep(0.01)
        assert received == [3, 4, 5, 6, 7]
