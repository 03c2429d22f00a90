"""QoS sets per entity kind: construction, effective values, consistency and changes."""

from __future__ import annotations

import pickle
from datetime import timedelta

import pytest

from idl._errors import BadParameterError, ImmutablePolicyError, InconsistentPolicyError
from qos import (
    DataReaderQos,
    DataRepresentation,
    DataRepresentationId,
    DataWriterQos,
    Deadline,
    DestinationOrder,
    DomainParticipantQos,
    Durability,
    DurabilityService,
    EntityFactory,
    GroupData,
    History,
    LatencyBudget,
    Lifespan,
    Liveliness,
    Ownership,
    OwnershipStrength,
    Partition,
    Presentation,
    PresentationAccessScope,
    PublisherQos,
    ReaderDataLifecycle,
    Reliability,
    ResourceLimits,
    SubscriberQos,
    SubscriptionKeys,
    TimeBasedFilter,
    TopicData,
    TopicQos,
    TransportPriority,
    UserData,
    WriterDataLifecycle,
    check_change,
)


class TestConstruction:
    def test_positional_and_keyword_policies(self) -> None:
        """A set is built from policies, keywords, or both, and returns them by class."""
        by_position = DataReaderQos(Reliability.RELIABLE, History.keep_last(10))
        by_keyword = DataReaderQos(reliability=Reliability.RELIABLE, history=History.keep_last(10))
        mixed = DataReaderQos(Reliability.RELIABLE, history=History.keep_last(10))
        assert by_position == by_keyword == mixed
        assert by_position[History].depth == 10
        assert by_position.get(Reliability) is Reliability.RELIABLE

    def test_unset_policy_gives_the_kind_default(self) -> None:
        """Unset policies read as the DDS default for the entity kind."""
        assert DataReaderQos()[Reliability] == Reliability.BEST_EFFORT
        assert TopicQos()[Reliability] == Reliability.BEST_EFFORT
        writer = DataWriterQos()[Reliability]
        assert writer == Reliability.RELIABLE
        assert writer.max_blocking_time == timedelta(milliseconds=100)
        assert DataWriterQos().is_set(Reliability) is False
        assert DataWriterQos.default(History) == History.keep_last(1)

    @pytest.mark.parametrize(
        ("set_class", "policy", "kind"),
        [
            (DataReaderQos, OwnershipStrength(3), "DataReader"),
            (DataReaderQos, Partition("a"), "DataReader"),
            (DataWriterQos, TimeBasedFilter(), "DataWriter"),
            (DataWriterQos, SubscriptionKeys.of("id"), "DataWriter"),
            (TopicQos, UserData(b"x"), "Topic"),
            (PublisherQos, Reliability.RELIABLE, "Publisher"),
            (SubscriberQos, History.KEEP_ALL, "Subscriber"),
            (DomainParticipantQos, Partition("a"), "DomainParticipant"),
            (DataWriterQos, TopicData(b"x"), "DataWriter"),
            (TopicQos, GroupData(b"x"), "Topic"),
        ],
    )
    def test_policy_of_another_kind_is_rejected(self, set_class, policy, kind) -> None:  # type: ignore[no-untyped-def]
        """A policy that does not apply to the entity kind raises naming both."""
        with pytest.raises(
            BadParameterError, match=rf"{type(policy).__name__} does not apply to a {kind}"
        ):
            set_class(policy)

    def test_lookup_of_foreign_policy_is_rejected(self) -> None:
        """Asking a set for a policy its kind does not have raises naming it."""
        with pytest.raises(
            BadParameterError, match="TimeBasedFilter does not apply to a DataWriter"
        ):
            DataWriterQos()[TimeBasedFilter]

    def test_unknown_keyword_is_rejected(self) -> None:
        """An unknown keyword raises naming the keyword."""
        with pytest.raises(BadParameterError, match="'relyability'"):
            DataReaderQos(relyability=Reliability.RELIABLE)

    def test_keyword_of_wrong_policy_type_is_rejected(self) -> None:
        """A keyword given a policy of another class raises naming the keyword."""
        with pytest.raises(BadParameterError, match="'history' takes a History"):
            DataReaderQos(history=Reliability.RELIABLE)

    def test_duplicate_policy_is_rejected(self) -> None:
        """The same policy class given twice raises."""
        with pytest.raises(BadParameterError, match="History given twice"):
            DataReaderQos(History.keep_last(1), History.KEEP_ALL)

    def test_non_policy_is_rejected(self) -> None:
        """Something that is not a policy raises naming it."""
        with pytest.raises(BadParameterError, match="'reliable' is not a QoS policy"):
            DataReaderQos("reliable")  # type: ignore[arg-type]

    def test_sets_are_immutable(self) -> None:
        """A set cannot be modified in place."""
        qos = DataReaderQos()
        with pytest.raises(AttributeError):
            qos.foo = 1  # type: ignore[attr-defined]

    def test_equality_is_by_effective_value_and_sets_pickle(self) -> None:
        """Explicitly giving a default equals leaving it out; sets survive pickling."""
        assert DataReaderQos(Reliability.BEST_EFFORT) == DataReaderQos()
        assert hash(DataReaderQos(Reliability.BEST_EFFORT)) == hash(DataReaderQos())
        assert DataReaderQos() != DataWriterQos()
        qos = DataWriterQos(History.keep_last(4))
        assert pickle.loads(pickle.dumps(qos)) == qos

    def test_iteration_yields_every_effective_policy(self) -> None:
        """Iterating a set yields the effective value of every applicable policy."""
        qos = PublisherQos(Partition("p"))
        policies = {type(p): p for p in qos}
        assert policies[Partition] == Partition("p")
        assert policies[Presentation] == Presentation()
        assert set(policies) == set(PublisherQos.applicable())


class TestCopyAndModify:
    def test_with_replaces_policies(self) -> None:
        """with_ returns a copy whose given policies replace those of the same class."""
        base = DataReaderQos(Reliability.RELIABLE, History.keep_last(2))
        changed = base.with_(History.keep_last(8), durability=Durability.TRANSIENT_LOCAL)
        assert changed[History].depth == 8
        assert changed[Reliability] == Reliability.RELIABLE
        assert changed[Durability] == Durability.TRANSIENT_LOCAL
        assert base[History].depth == 2

    def test_with_can_fix_two_policies_at_once(self) -> None:
        """with_ checks consistency after all replacements, not one by one."""
        base = DataReaderQos(History.keep_last(2), ResourceLimits(max_samples_per_instance=2))
        changed = base.with_(History.keep_last(5), ResourceLimits(max_samples_per_instance=5))
        assert changed[History].depth == 5

    def test_without_restores_defaults(self) -> None:
        """without returns a copy with the given policies back at their defaults."""
        qos = DataWriterQos(Reliability.BEST_EFFORT).without(Reliability)
        assert qos[Reliability] == Reliability.RELIABLE
        assert not qos.is_set(Reliability)


class TestFromTopic:
    def test_writer_copies_topic_policies(self) -> None:
        """DataWriterQos.from_topic copies the topic's policies, then applies overrides."""
        topic = TopicQos(
            Reliability.RELIABLE,
            Durability.TRANSIENT_LOCAL,
            History.keep_last(5),
            Deadline(timedelta(seconds=1)),
            TopicData(b"ignored"),
        )
        writer = DataWriterQos.from_topic(topic, OwnershipStrength(7))
        assert writer[Durability] == Durability.TRANSIENT_LOCAL
        assert writer[History].depth == 5
        assert writer[Deadline].period == timedelta(seconds=1)
        assert writer[OwnershipStrength].value == 7

    def test_reader_copies_topic_defaults_too(self) -> None:
        """copy_from_topic_qos copies effective values: a default topic gives best effort."""
        reader = DataReaderQos.from_topic(TopicQos(History.keep_last(3)))
        assert reader[History].depth == 3
        assert reader[Reliability] == Reliability.BEST_EFFORT

    def test_implicit_topic_durability_service_is_not_copied(self) -> None:
        """A topic without an explicit DurabilityService leaves the writer's implicit too."""
        writer = DataWriterQos.from_topic(TopicQos(Durability.TRANSIENT_LOCAL))
        assert not writer.is_set(DurabilityService)
        explicit = DurabilityService(history=History.keep_last(3))
        assert DataWriterQos.from_topic(TopicQos(explicit))[DurabilityService] == explicit

    def test_with_topic_overrides_own_policies(self) -> None:
        """with_topic replaces the endpoint's policies by the topic's."""
        writer = DataWriterQos(History.keep_last(9), OwnershipStrength(2))
        merged = writer.with_topic(TopicQos(History.keep_last(4)))
        assert merged[History].depth == 4
        assert merged[OwnershipStrength].value == 2

    def test_from_topic_rejects_other_sets(self) -> None:
        """from_topic needs a TopicQos."""
        with pytest.raises(BadParameterError, match="TopicQos"):
            DataWriterQos.from_topic(DataReaderQos())  # type: ignore[arg-type]


class TestConsistency:
    def test_history_depth_above_max_samples_per_instance(self) -> None:
        """History depth > ResourceLimits.max_samples_per_instance is inconsistent, naming both."""
        with pytest.raises(
            InconsistentPolicyError,
            match=r"History\.depth.*ResourceLimits\.max_samples_per_instance",
        ):
            DataReaderQos(History.keep_last(10), ResourceLimits(max_samples_per_instance=5))

    def test_keep_all_ignores_per_instance_limit(self) -> None:
        """KEEP_ALL with a per-instance limit is consistent (the limit bounds it)."""
        qos = DataWriterQos(History.KEEP_ALL, ResourceLimits(max_samples_per_instance=5))
        assert qos[ResourceLimits].max_samples_per_instance == 5

    def test_max_samples_below_per_instance(self) -> None:
        """ResourceLimits.max_samples < max_samples_per_instance is inconsistent."""
        with pytest.raises(
            InconsistentPolicyError, match=r"max_samples \(2\).*max_samples_per_instance \(4\)"
        ):
            TopicQos(ResourceLimits(max_samples=2, max_samples_per_instance=4))

    def test_deadline_shorter_than_time_based_filter(self) -> None:
        """A reader's Deadline period < TimeBasedFilter minimum_separation is inconsistent."""
        with pytest.raises(
            InconsistentPolicyError, match=r"Deadline\.period.*TimeBasedFilter\.minimum_separation"
        ):
            DataReaderQos(Deadline(timedelta(seconds=1)), TimeBasedFilter(timedelta(seconds=2)))

    def test_durability_service_depth_above_its_limit(self) -> None:
        """DurabilityService history depth > its max_samples_per_instance is inconsistent."""
        service = DurabilityService(history=History.keep_last(10), max_samples_per_instance=3)
        with pytest.raises(
            InconsistentPolicyError,
            match=r"DurabilityService\.history\.depth.*DurabilityService\.max_samples_per_instance",
        ):
            DataWriterQos(service)

    def test_durability_service_samples_below_per_instance(self) -> None:
        """DurabilityService max_samples < max_samples_per_instance is inconsistent."""
        service = DurabilityService(max_samples=1, max_samples_per_instance=2)
        with pytest.raises(InconsistentPolicyError, match=r"DurabilityService\.max_samples \(1\)"):
            TopicQos(service)

    def test_with_rejects_an_inconsistent_result(self) -> None:
        """Replacing one policy so the set contradicts itself raises."""
        qos = DataReaderQos(ResourceLimits(max_samples_per_instance=2))
        with pytest.raises(InconsistentPolicyError):
            qos.with_(History.keep_last(3))

    def test_consistent_sets_pass_check(self) -> None:
        """check() accepts a consistent set without raising."""
        DataReaderQos(
            History.keep_last(5),
            ResourceLimits(max_samples=50, max_samples_per_instance=5),
            Deadline(timedelta(seconds=2)),
            TimeBasedFilter(timedelta(seconds=1)),
        ).check()


CHANGEABLE_EXAMPLES = [
    (DataWriterQos, Deadline(timedelta(seconds=3))),
    (DataWriterQos, LatencyBudget(timedelta(seconds=1))),
    (DataWriterQos, OwnershipStrength(5)),
    (DataWriterQos, TransportPriority(5)),
    (DataWriterQos, Lifespan(timedelta(seconds=5))),
    (DataWriterQos, UserData(b"x")),
    (DataWriterQos, WriterDataLifecycle(False)),
    (DataReaderQos, TimeBasedFilter(timedelta(milliseconds=1))),
    (DataReaderQos, ReaderDataLifecycle(timedelta(seconds=1))),
    (TopicQos, TopicData(b"x")),
    (PublisherQos, Partition("p")),
    (PublisherQos, GroupData(b"g")),
    (SubscriberQos, EntityFactory(False)),
    (DomainParticipantQos, UserData(b"u")),
]

IMMUTABLE_EXAMPLES = [
    (DataWriterQos, Durability.TRANSIENT_LOCAL),
    (DataWriterQos, DurabilityService(history=History.keep_last(2))),
    (DataWriterQos, Ownership.EXCLUSIVE),
    (DataWriterQos, Liveliness.manual_by_topic(timedelta(seconds=1))),
    (DataWriterQos, Reliability.BEST_EFFORT),
    (DataWriterQos, DestinationOrder.BY_SOURCE_TIMESTAMP),
    (DataWriterQos, History.keep_last(3)),
    (DataWriterQos, ResourceLimits(max_samples=10)),
    (DataWriterQos, DataRepresentation([DataRepresentationId.XCDR2])),
    (DataReaderQos, SubscriptionKeys.of("id")),
    (DataReaderQos, Reliability.RELIABLE),
    (TopicQos, Durability.TRANSIENT_LOCAL),
    (PublisherQos, Presentation(PresentationAccessScope.TOPIC)),
    (SubscriberQos, Presentation(coherent_access=True)),
]


class TestChanges:
    @pytest.mark.parametrize(("set_class", "policy"), CHANGEABLE_EXAMPLES)
    def test_changeable_policy_may_change(self, set_class, policy) -> None:  # type: ignore[no-untyped-def]
        """Changing a policy the spec marks changeable is allowed on an enabled entity."""
        check_change(set_class(), set_class(policy), enabled=True)

    @pytest.mark.parametrize(("set_class", "policy"), IMMUTABLE_EXAMPLES)
    def test_immutable_policy_change_raises(self, set_class, policy) -> None:  # type: ignore[no-untyped-def]
        """Changing an immutable policy of an enabled entity raises naming the policy."""
        with pytest.raises(ImmutablePolicyError, match=type(policy).__name__):
            check_change(set_class(), set_class(policy), enabled=True)

    @pytest.mark.parametrize(("set_class", "policy"), IMMUTABLE_EXAMPLES)
    def test_anything_may_change_before_enable(self, set_class, policy) -> None:  # type: ignore[no-untyped-def]
        """Before the entity is enabled every policy may change."""
        check_change(set_class(), set_class(policy), enabled=False)

    def test_restating_an_immutable_default_is_no_change(self) -> None:
        """Giving an immutable policy its current value explicitly is not a change."""
        check_change(DataWriterQos(), DataWriterQos(Reliability.RELIABLE, History.keep_last(1)))

    def test_kind_mismatch_raises(self) -> None:
        """A writer QoS cannot be changed into a reader QoS."""
        with pytest.raises(BadParameterError, match="DataWriterQos into a DataReaderQos"):
            check_change(DataWriterQos(), DataReaderQos())  # type: ignore[arg-type]
