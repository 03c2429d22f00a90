"""QoS sets: exact messages and boundaries of the consistency checks (found by mutation testing).

A user fixes an inconsistent QoS from its message alone, so each message is pinned
whole; each rule's boundary (equal values are consistent) has its exact case.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from idl._errors import BadParameterError, ImmutablePolicyError, InconsistentPolicyError
from qos import (
    DataReaderQos,
    DataWriterQos,
    Deadline,
    Durability,
    DurabilityService,
    History,
    PublisherQos,
    Reliability,
    ResourceLimits,
    SubscriberQos,
    TimeBasedFilter,
    TopicQos,
    check_change,
    keyword_name,
)

SECOND = timedelta(seconds=1)


class TestKeywords:
    def test_keyword_names_are_snake_case(self) -> None:
        """Policy classes map to lower snake_case keywords (TimeBasedFilter: time_based_filter)."""
        assert keyword_name(TimeBasedFilter) == "time_based_filter"
        assert keyword_name(Reliability) == "reliability"
        assert keyword_name(DurabilityService) == "durability_service"

    def test_unknown_keyword_lists_the_kinds_policies(self) -> None:
        """An unknown keyword names the set and lists every keyword of its kind, sorted."""
        with pytest.raises(BadParameterError) as caught:
            PublisherQos(bogus=Reliability.RELIABLE)
        assert str(caught.value) == (
            "PublisherQos: unknown keyword 'bogus' (policies of a Publisher: "
            "entity_factory, entity_name, group_data, ignore_local, partition, presentation)"
        )

    def test_keyword_of_the_wrong_type_names_the_set(self) -> None:
        """A keyword given another policy names the set, the keyword and the expected class."""
        with pytest.raises(BadParameterError) as caught:
            DataWriterQos(reliability=Durability.VOLATILE)
        assert str(caught.value).startswith(
            "DataWriterQos: keyword 'reliability' takes a Reliability, got "
        )

    def test_non_policy_and_duplicate_name_the_set(self) -> None:
        """A non-policy and a policy given twice are refused naming the set."""
        with pytest.raises(BadParameterError) as caught:
            DataWriterQos(5)  # type: ignore[arg-type]
        assert str(caught.value) == "DataWriterQos: 5 is not a QoS policy"
        with pytest.raises(BadParameterError) as caught:
            DataWriterQos(Reliability.RELIABLE, Reliability.BEST_EFFORT)
        assert str(caught.value) == "DataWriterQos: Reliability given twice"

    def test_lookup_of_a_non_policy_class(self) -> None:
        """qos[int] and qos['name'] raise BadParameterError, not a TypeError."""
        qos = DataWriterQos()
        for key in (int, "reliability"):
            with pytest.raises(BadParameterError, match="is not a QoS policy class"):
                qos[key]  # type: ignore[index]

    def test_from_topic_applies_keyword_overrides(self) -> None:
        """from_topic's keyword overrides win over the topic's policies."""
        qos = DataWriterQos.from_topic(
            TopicQos(Reliability.RELIABLE), reliability=Reliability.BEST_EFFORT
        )
        assert qos[Reliability] is Reliability.BEST_EFFORT


class TestValueBehaviour:
    def test_repr_lists_the_explicit_policies(self) -> None:
        """repr names the set and its explicit policies in order, comma-separated."""
        qos = DataWriterQos(Reliability.BEST_EFFORT, Durability.TRANSIENT_LOCAL)
        assert repr(qos) == (
            f"DataWriterQos({Reliability.BEST_EFFORT!r}, {Durability.TRANSIENT_LOCAL!r})"
        )
        assert repr(SubscriberQos()) == "SubscriberQos()"

    def test_different_sets_hash_apart(self) -> None:
        """Different QoS do not all share one hash (sets are usable as dict keys at speed)."""
        sets = [DataWriterQos(History.keep_last(n)) for n in range(1, 21)]
        assert len({hash(s) for s in sets}) > 1


class TestConsistencyMessages:
    def test_history_above_the_per_instance_limit(self) -> None:
        """The message names both values and both fields."""
        with pytest.raises(InconsistentPolicyError) as caught:
            DataReaderQos(History.keep_last(5), ResourceLimits(max_samples_per_instance=3))
        assert str(caught.value) == (
            "History.depth (5) exceeds ResourceLimits.max_samples_per_instance (3)"
        )

    def test_samples_below_per_instance(self) -> None:
        """max_samples below max_samples_per_instance names both ResourceLimits fields."""
        with pytest.raises(InconsistentPolicyError) as caught:
            TopicQos(ResourceLimits(max_samples=2, max_samples_per_instance=4))
        assert str(caught.value) == (
            "ResourceLimits.max_samples (2) is less than "
            "ResourceLimits.max_samples_per_instance (4)"
        )

    def test_equal_samples_and_per_instance_are_consistent(self) -> None:
        """max_samples equal to max_samples_per_instance is allowed (the boundary)."""
        qos = TopicQos(ResourceLimits(max_samples=3, max_samples_per_instance=3))
        assert qos[ResourceLimits].max_samples == 3

    def test_durability_service_depth_above_its_limit(self) -> None:
        """The DurabilityService rule names the DurabilityService fields."""
        service = DurabilityService(history=History.keep_last(10), max_samples_per_instance=3)
        with pytest.raises(InconsistentPolicyError) as caught:
            DataWriterQos(service)
        assert str(caught.value) == (
            "DurabilityService.history.depth (10) exceeds "
            "DurabilityService.max_samples_per_instance (3)"
        )

    def test_deadline_shorter_than_the_filter(self) -> None:
        """Both durations are printed; an infinite one as INFINITE."""
        with pytest.raises(InconsistentPolicyError) as caught:
            DataReaderQos(Deadline(SECOND), TimeBasedFilter(2 * SECOND))
        assert str(caught.value) == (
            "Deadline.period (0:00:01) is shorter than TimeBasedFilter.minimum_separation (0:00:02)"
        )
        with pytest.raises(InconsistentPolicyError) as caught:
            DataReaderQos(Deadline(SECOND), TimeBasedFilter(timedelta.max))
        assert str(caught.value) == (
            "Deadline.period (0:00:01) is shorter than "
            "TimeBasedFilter.minimum_separation (INFINITE)"
        )

    def test_deadline_equal_to_the_filter_is_consistent(self) -> None:
        """A deadline period equal to the minimum separation is allowed (the boundary)."""
        qos = DataReaderQos(Deadline(SECOND), TimeBasedFilter(SECOND))
        assert qos[Deadline].period == SECOND


class TestChangeDefaults:
    def test_check_change_treats_the_entity_as_enabled_by_default(self) -> None:
        """Without ``enabled``, changing an immutable policy raises."""
        with pytest.raises(ImmutablePolicyError, match="Durability"):
            check_change(DataWriterQos(), DataWriterQos(Durability.TRANSIENT_LOCAL))
