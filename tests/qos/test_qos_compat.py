"""Request/offered compatibility, checked by rule and against Cyclone DDS itself."""

import time
from dataclasses import dataclass
from datetime import timedelta

import pytest
from cyclonedds.core import DDSStatus, WaitSet
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from idl._errors import BadParameterError, IncompatibleQosError
from qos import (
    DataReaderQos,
    DataRepresentation,
    DataRepresentationId,
    DataWriterQos,
    Deadline,
    DestinationOrder,
    Durability,
    DurabilityService,
    History,
    Incompatibility,
    LatencyBudget,
    Liveliness,
    Ownership,
    Partition,
    Presentation,
    PresentationAccessScope,
    PublisherQos,
    Reliability,
    SubscriberQos,
    SubscriptionKeys,
    check_compatible,
    compatibility,
    policy_class,
    policy_id,
    to_cyclone,
)

SECOND = timedelta(seconds=1)


def reasons(offered: DataWriterQos, requested: DataReaderQos, **groups: object) -> list[str]:
    return [str(r) for r in compatibility(offered, requested, **groups)]  # type: ignore[arg-type]


class TestRules:
    def test_defaults_are_compatible(self) -> None:
        """A default writer and a default reader match."""
        assert compatibility(DataWriterQos(), DataReaderQos()) == []
        check_compatible(DataWriterQos(), DataReaderQos())

    def test_reliability(self) -> None:
        """A RELIABLE reader does not match a BEST_EFFORT writer; the reverse matches."""
        assert reasons(
            DataWriterQos(Reliability.BEST_EFFORT), DataReaderQos(Reliability.RELIABLE)
        ) == ["Reliability: reader requests RELIABLE, writer offers BEST_EFFORT"]
        assert (
            reasons(DataWriterQos(Reliability.RELIABLE), DataReaderQos(Reliability.BEST_EFFORT))
            == []
        )

    @pytest.mark.parametrize(
        ("offered", "requested", "ok"),
        [
            (Durability.VOLATILE, Durability.TRANSIENT_LOCAL, False),
            (Durability.TRANSIENT_LOCAL, Durability.TRANSIENT, False),
            (Durability.TRANSIENT, Durability.PERSISTENT, False),
            (Durability.PERSISTENT, Durability.VOLATILE, True),
            (Durability.TRANSIENT_LOCAL, Durability.TRANSIENT_LOCAL, True),
        ],
    )
    def test_durability(self, offered: Durability, requested: Durability, ok: bool) -> None:
        """The writer's durability must be at least what the reader requests."""
        found = reasons(DataWriterQos(offered), DataReaderQos(requested))
        if ok:
            assert found == []
        else:
            assert found == [
                f"Durability: reader requests {requested.kind.name}, "
                f"writer offers {offered.kind.name}"
            ]

    def test_deadline(self) -> None:
        """The writer's deadline period must be no longer than the reader's."""
        found = reasons(DataWriterQos(Deadline(2 * SECOND)), DataReaderQos(Deadline(SECOND)))
        assert len(found) == 1
        assert found[0].startswith("Deadline: reader requests period 0:00:01")
        assert reasons(DataWriterQos(Deadline(SECOND)), DataReaderQos(Deadline(2 * SECOND))) == []
        assert reasons(DataWriterQos(), DataReaderQos(Deadline(SECOND)))[0].endswith(
            "writer offers INFINITE (must be no longer)"
        )

    def test_latency_budget(self) -> None:
        """The writer's latency budget must be no longer than the reader's."""
        found = reasons(
            DataWriterQos(LatencyBudget(SECOND)), DataReaderQos(LatencyBudget(SECOND / 2))
        )
        assert [f.split(":")[0] for f in found] == ["LatencyBudget"]
        assert (
            reasons(DataWriterQos(LatencyBudget(SECOND / 2)), DataReaderQos(LatencyBudget(SECOND)))
            == []
        )

    def test_ownership(self) -> None:
        """Ownership kinds must be equal, in both directions."""
        assert reasons(DataWriterQos(Ownership.EXCLUSIVE), DataReaderQos()) == [
            "Ownership: reader requests SHARED, writer offers EXCLUSIVE"
        ]
        assert reasons(DataWriterQos(), DataReaderQos(Ownership.EXCLUSIVE)) == [
            "Ownership: reader requests EXCLUSIVE, writer offers SHARED"
        ]
        assert reasons(DataWriterQos(Ownership.EXCLUSIVE), DataReaderQos(Ownership.EXCLUSIVE)) == []

    def test_liveliness_kind_and_lease(self) -> None:
        """The writer's liveliness kind must be at least the reader's, its lease no longer."""
        assert reasons(
            DataWriterQos(Liveliness.automatic()), DataReaderQos(Liveliness.manual_by_participant())
        ) == ["Liveliness: reader requests MANUAL_BY_PARTICIPANT, writer offers AUTOMATIC"]
        lease = reasons(
            DataWriterQos(Liveliness.automatic(2 * SECOND)),
            DataReaderQos(Liveliness.automatic(SECOND)),
        )
        assert len(lease) == 1
        assert "lease_duration" in lease[0]
        assert (
            reasons(
                DataWriterQos(Liveliness.manual_by_topic(SECOND)),
                DataReaderQos(Liveliness.manual_by_participant(2 * SECOND)),
            )
            == []
        )

    def test_destination_order(self) -> None:
        """A reader ordering by source timestamp needs a writer that does too."""
        assert reasons(DataWriterQos(), DataReaderQos(DestinationOrder.BY_SOURCE_TIMESTAMP)) == [
            "DestinationOrder: reader requests BY_SOURCE_TIMESTAMP, "
            "writer offers BY_RECEPTION_TIMESTAMP"
        ]
        assert reasons(DataWriterQos(DestinationOrder.BY_SOURCE_TIMESTAMP), DataReaderQos()) == []

    def test_presentation(self) -> None:
        """The publisher's access scope and coherent/ordered access must cover the subscriber's."""
        publisher = PublisherQos(Presentation(PresentationAccessScope.TOPIC))
        subscriber = SubscriberQos(Presentation(PresentationAccessScope.GROUP, True, True))
        found = reasons(
            DataWriterQos(), DataReaderQos(), publisher=publisher, subscriber=subscriber
        )
        assert found == [
            "Presentation: subscriber requests access_scope GROUP, publisher offers TOPIC",
            "Presentation: subscriber requests coherent_access, publisher does not offer it",
            "Presentation: subscriber requests ordered_access, publisher does not offer it",
        ]
        group = PublisherQos(Presentation(PresentationAccessScope.GROUP, True, True))
        assert (
            reasons(DataWriterQos(), DataReaderQos(), publisher=group, subscriber=subscriber) == []
        )

    def test_data_representation(self) -> None:
        """The writer's representation must be one the reader accepts (unset: Cyclone picks)."""
        xcdr1 = DataRepresentation([DataRepresentationId.XCDR1])
        xcdr2 = DataRepresentation([DataRepresentationId.XCDR2])
        assert reasons(DataWriterQos(xcdr2), DataReaderQos(xcdr1)) == [
            "DataRepresentation: reader accepts XCDR1, writer uses XCDR2"
        ]
        assert reasons(DataWriterQos(xcdr2), DataReaderQos()) == []

    def test_check_compatible_lists_every_reason(self) -> None:
        """check_compatible raises IncompatibleQosError naming every incompatible policy."""
        with pytest.raises(IncompatibleQosError) as caught:
            check_compatible(
                DataWriterQos(Reliability.BEST_EFFORT),
                DataReaderQos(
                    Reliability.RELIABLE, Durability.TRANSIENT_LOCAL, Ownership.EXCLUSIVE
                ),
            )
        message = str(caught.value)
        for name in ("Reliability", "Durability", "Ownership"):
            assert f"{name}:" in message

    def test_arguments_must_be_writer_then_reader(self) -> None:
        """Swapping writer and reader QoS raises BadParameterError."""
        with pytest.raises(BadParameterError, match="offered must be a DataWriterQos"):
            compatibility(DataReaderQos(), DataWriterQos())  # type: ignore[arg-type]

    def test_incompatibility_is_a_value(self) -> None:
        """An Incompatibility names its policy class and prints as 'Policy: reason'."""
        item = Incompatibility(Reliability, "why")
        assert item.policy is Reliability
        assert str(item) == "Reliability: why"


class TestPolicyIds:
    def test_ids_map_to_classes_and_back(self) -> None:
        """Cyclone policy ids map to our classes and back."""
        assert policy_class(11) is Reliability
        assert policy_class(2) is Durability
        assert policy_class(22) is DurabilityService
        assert policy_class(3) is Presentation
        assert policy_class(25) is DataRepresentation
        assert policy_id(Reliability.RELIABLE) == 11
        assert policy_id(History) == 13
        assert all(
            policy_class(policy_id(policy_class(i))) is policy_class(i) for i in range(1, 23)
        )

    def test_unknown_id_raises(self) -> None:
        """An id no policy has raises BadParameterError naming it."""
        with pytest.raises(BadParameterError, match="999"):
            policy_class(999)
        with pytest.raises(BadParameterError, match="SubscriptionKeys"):
            policy_id(SubscriptionKeys)


@dataclass
class Reading(IdlStruct, typename="qos_test.Reading"):
    value: int


CYCLONE_CASES = [
    (DataWriterQos(Reliability.BEST_EFFORT), DataReaderQos(Reliability.RELIABLE), None, None),
    (DataWriterQos(), DataReaderQos(Durability.TRANSIENT_LOCAL), None, None),
    (DataWriterQos(Deadline(2 * SECOND)), DataReaderQos(Deadline(SECOND)), None, None),
    (DataWriterQos(LatencyBudget(SECOND)), DataReaderQos(LatencyBudget(SECOND / 10)), None, None),
    (DataWriterQos(Ownership.EXCLUSIVE), DataReaderQos(), None, None),
    (DataWriterQos(), DataReaderQos(Liveliness.manual_by_topic()), None, None),
    (DataWriterQos(), DataReaderQos(DestinationOrder.BY_SOURCE_TIMESTAMP), None, None),
    (
        DataWriterQos(),
        DataReaderQos(),
        PublisherQos(Presentation(PresentationAccessScope.INSTANCE)),
        SubscriberQos(Presentation(PresentationAccessScope.TOPIC)),
    ),
]


class TestAgainstCyclone:
    @pytest.mark.parametrize(("offered", "requested", "publisher", "subscriber"), CYCLONE_CASES)
    def test_cyclone_reports_the_policy_we_predict(  # type: ignore[no-untyped-def]
        self, domain_id, topic_name, offered, requested, publisher, subscriber
    ) -> None:
        """Cyclone's requested-incompatible-QoS status names the policy compatibility() reports."""
        predicted = compatibility(offered, requested, publisher, subscriber)
        assert len(predicted) == 1
        participant = DomainParticipant(domain_id)
        topic = Topic(participant, topic_name, Reading)
        publisher = (publisher or PublisherQos()).with_(Partition(topic_name))
        subscriber = (subscriber or SubscriberQos()).with_(Partition(topic_name))
        pub = Publisher(participant, qos=to_cyclone(publisher))
        sub = Subscriber(participant, qos=to_cyclone(subscriber))
        reader = DataReader(sub, topic, qos=to_cyclone(requested))
        reader.set_status_mask(DDSStatus.RequestedIncompatibleQos)
        waitset = WaitSet(participant)
        waitset.attach(reader)
        _writer = DataWriter(pub, topic, qos=to_cyclone(offered))
        deadline = time.monotonic() + 10
        status = reader.get_requested_incompatible_qos_status()
        while status.total_count == 0 and time.monotonic() < deadline:
            waitset.wait(duration(seconds=deadline - time.monotonic()))
            status = reader.get_requested_incompatible_qos_status()
        assert status.total_count == 1
        assert policy_class(status.last_policy_id) is predicted[0].policy
