"""Property tests: random QoS sets against the conversion and against Cyclone DDS itself.

The strategies live here (they only serve the qos tests); they could move to
``tests/strategies.py``.
"""

import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from cyclonedds.core import DDSStatus, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from idl._errors import InconsistentPolicyError
from qos import (
    INFINITE,
    LENGTH_UNLIMITED,
    DataReaderQos,
    DataWriterQos,
    Deadline,
    DestinationOrder,
    DestinationOrderKind,
    Durability,
    DurabilityKind,
    DurabilityService,
    History,
    LatencyBudget,
    Lifespan,
    Liveliness,
    LivelinessKind,
    Ownership,
    OwnershipKind,
    OwnershipStrength,
    QosPolicy,
    QosSet,
    ReaderDataLifecycle,
    Reliability,
    ResourceLimits,
    TimeBasedFilter,
    TopicQos,
    TransportPriority,
    UserData,
    WriterDataLifecycle,
    compatibility,
    from_cyclone,
    to_cyclone,
)

# ----------------------------------------------------------------- strategies

durations = st.one_of(
    st.just(INFINITE),
    st.just(timedelta(0)),
    st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=10_000)),
)
short_durations = st.timedeltas(min_value=timedelta(0), max_value=timedelta(seconds=5))
limits = st.one_of(st.just(LENGTH_UNLIMITED), st.integers(1, 1000))
histories = st.one_of(st.just(History.KEEP_ALL), st.integers(1, 100).map(History.keep_last))

POLICIES: dict[type[QosPolicy], st.SearchStrategy[Any]] = {
    Durability: st.sampled_from(DurabilityKind).map(Durability),
    DurabilityService: st.builds(DurabilityService, durations, histories, limits, limits, limits),
    Deadline: durations.map(Deadline),
    LatencyBudget: durations.map(LatencyBudget),
    Liveliness: st.builds(Liveliness, st.sampled_from(LivelinessKind), durations),
    # max_blocking_time only exists for RELIABLE (the binding drops it for BEST_EFFORT)
    Reliability: st.one_of(
        st.just(Reliability.BEST_EFFORT), short_durations.map(Reliability.reliable)
    ),
    DestinationOrder: st.sampled_from(DestinationOrderKind).map(DestinationOrder),
    History: histories,
    ResourceLimits: st.builds(ResourceLimits, limits, limits, limits),
    TransportPriority: st.integers(-(2**31), 2**31 - 1).map(TransportPriority),
    Lifespan: durations.map(Lifespan),
    UserData: st.binary(max_size=40).map(UserData),
    Ownership: st.sampled_from(OwnershipKind).map(Ownership),
    OwnershipStrength: st.integers(-(2**31), 2**31 - 1).map(OwnershipStrength),
    WriterDataLifecycle: st.booleans().map(WriterDataLifecycle),
    TimeBasedFilter: short_durations.map(TimeBasedFilter),
    ReaderDataLifecycle: st.builds(ReaderDataLifecycle, durations, durations),
}


@st.composite
def qos_sets(draw: st.DrawFn, kind: type[QosSet]) -> QosSet:
    """A random consistent QoS set of ``kind`` over the policies Cyclone implements."""
    classes = draw(st.sets(st.sampled_from([c for c in POLICIES if kind.applies(c)])))
    policies = [draw(POLICIES[c]) for c in sorted(classes, key=lambda c: c.__name__)]
    try:
        return kind(*policies)
    except InconsistentPolicyError:
        from hypothesis import reject

        reject()


def _compare(sent: QosSet, back: QosSet) -> None:
    for cls in POLICIES:
        if not sent.applies(cls):
            continue
        if cls is DurabilityService and not sent.is_set(cls):
            continue  # derived from History for TRANSIENT_LOCAL writers: see to_cyclone
        assert back[cls] == sent[cls], cls.__name__


@dataclass
class Thing(IdlStruct, typename="qos_test.Thing"):
    n: int


class TestConversionProperties:
    @settings(max_examples=150, deadline=None)
    @given(st.one_of(qos_sets(DataWriterQos), qos_sets(DataReaderQos), qos_sets(TopicQos)))
    def test_to_and_from_cyclone_round_trip(self, sent: QosSet) -> None:
        """Converting any consistent QoS set to the binding and back loses nothing."""
        _compare(sent, from_cyclone(to_cyclone(sent), type(sent)))

    @settings(max_examples=150, deadline=None)
    @given(qos_sets(DataWriterQos))
    def test_a_reader_asking_what_the_writer_offers_matches(self, writer: QosSet) -> None:
        """A reader requesting exactly the writer's RxO policies is always compatible."""
        reader = (
            DataReaderQos.from_topic(TopicQos())
            .with_(
                *(writer[c] for c in (Durability, Deadline, LatencyBudget, Liveliness, Reliability))
            )
            .with_(writer[Ownership], writer[DestinationOrder])
        )
        assert compatibility(writer, reader) == []  # type: ignore[arg-type]


class TestAgainstCyclone:
    def test_cyclone_accepts_and_reports_every_consistent_qos(
        self, domain_id: int, topic_name: str
    ) -> None:
        """Cyclone creates writers and readers for any QoS check() accepts, and reports it back."""
        participant = DomainParticipant(domain_id)
        topic = Topic(participant, topic_name, Thing)

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        @given(qos_sets(DataWriterQos), qos_sets(DataReaderQos))
        def check(writer_qos: QosSet, reader_qos: QosSet) -> None:
            writer = DataWriter(participant, topic, qos=to_cyclone(writer_qos))
            reader = DataReader(participant, topic, qos=to_cyclone(reader_qos))
            _compare(writer_qos, from_cyclone(writer.get_qos(), DataWriterQos))
            _compare(reader_qos, from_cyclone(reader.get_qos(), DataReaderQos))

        check()

    def test_cyclone_matches_exactly_when_compatibility_says_so(
        self, domain_id: int, topic_name: str
    ) -> None:
        """A random writer and reader match in Cyclone iff compatibility() finds no reason."""
        participant = DomainParticipant(domain_id)
        counter = iter(range(1_000_000))

        @settings(
            max_examples=60,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        )
        @given(qos_sets(DataWriterQos), qos_sets(DataReaderQos))
        def check(writer_qos: DataWriterQos, reader_qos: DataReaderQos) -> None:
            topic = Topic(participant, f"{topic_name}_{next(counter)}", Thing)
            reader = DataReader(participant, topic, qos=to_cyclone(reader_qos))
            reader.set_status_mask(
                DDSStatus.SubscriptionMatched | DDSStatus.RequestedIncompatibleQos
            )
            waitset = WaitSet(participant)
            waitset.attach(reader)
            _writer = DataWriter(participant, topic, qos=to_cyclone(writer_qos))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                matched = reader.get_subscription_matched_status().total_count
                refused = reader.get_requested_incompatible_qos_status().total_count
                if matched or refused:
                    break
                waitset.wait(duration(seconds=deadline - time.monotonic()))
            predicted = compatibility(writer_qos, reader_qos)
            assert bool(matched) == (not predicted), predicted
            waitset.detach(reader)

        check()
