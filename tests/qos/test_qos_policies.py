"""QoS policies: values, defaults, singletons, copy-and-modify, and validation."""

from __future__ import annotations

from datetime import timedelta

import pytest

import qos
from idl._errors import BadParameterError
from qos import (
    INFINITE,
    LENGTH_UNLIMITED,
    DataRepresentation,
    DataRepresentationId,
    Deadline,
    DestinationOrder,
    DestinationOrderKind,
    Durability,
    DurabilityKind,
    DurabilityService,
    EntityFactory,
    EntityName,
    GroupData,
    History,
    HistoryKind,
    IgnoreLocal,
    LatencyBudget,
    Lifespan,
    Liveliness,
    LivelinessKind,
    Ownership,
    OwnershipKind,
    OwnershipStrength,
    Partition,
    Presentation,
    PresentationAccessScope,
    Properties,
    Property,
    ReaderDataLifecycle,
    Reliability,
    ReliabilityKind,
    ResourceLimits,
    SubscriptionKeys,
    TimeBasedFilter,
    TopicData,
    TransportPriority,
    TypeConsistencyEnforcement,
    UserData,
    WriterDataLifecycle,
)

NEGATIVE = timedelta(seconds=-1)


class TestPublicApi:
    def test_all_is_sorted_and_complete(self) -> None:
        """qos.__all__ is sorted and lists exactly the public names the package defines."""
        public = {
            name
            for name in dir(qos)
            if not name.startswith("_") and not isinstance(getattr(qos, name), type(qos))
        }

        # isort-style, as ruff's RUF022 keeps it: CONSTANTS, then Classes, then functions.
        def rank(name: str) -> tuple[int, str]:
            return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

        assert qos.__all__ == sorted(qos.__all__, key=rank)
        assert set(qos.__all__) == public

    def test_package_doc_examples_run(self) -> None:
        """The examples in the qos package docstring run and print what they show."""
        import doctest

        result = doctest.testmod(qos)
        assert result.attempted > 0
        assert result.failed == 0

    def test_every_public_name_has_a_docstring(self) -> None:
        """Every public class and function of qos documents itself."""
        for name in qos.__all__:
            obj = getattr(qos, name)
            if callable(obj):
                assert obj.__doc__, name


class TestDefaults:
    def test_spec_defaults(self) -> None:
        """Each policy's no-argument value is the DDS 1.4 default."""
        assert Durability().kind is DurabilityKind.VOLATILE
        assert History() == History.keep_last(1)
        assert Reliability().kind is ReliabilityKind.BEST_EFFORT
        assert Reliability().max_blocking_time == timedelta(milliseconds=100)
        assert Deadline().period == INFINITE
        assert LatencyBudget().duration == timedelta(0)
        assert Liveliness() == Liveliness(LivelinessKind.AUTOMATIC, INFINITE)
        assert Lifespan().duration == INFINITE
        assert TimeBasedFilter().minimum_separation == timedelta(0)
        assert ResourceLimits() == ResourceLimits(
            LENGTH_UNLIMITED, LENGTH_UNLIMITED, LENGTH_UNLIMITED
        )
        assert DestinationOrder().kind is DestinationOrderKind.BY_RECEPTION_TIMESTAMP
        assert Presentation().access_scope is PresentationAccessScope.INSTANCE
        assert EntityFactory().autoenable_created_entities is True
        assert WriterDataLifecycle().autodispose_unregistered_instances is True
        assert ReaderDataLifecycle().autopurge_disposed_samples_delay == INFINITE
        assert DurabilityService().history == History.keep_last(1)
        assert Partition().names == ()
        assert UserData().value == b""
        assert OwnershipStrength().value == 0
        assert TransportPriority().value == 0
        assert SubscriptionKeys().use_key_list is False

    def test_singletons(self) -> None:
        """Parameterless variants are shared singletons equal to their constructed values."""
        assert Reliability(ReliabilityKind.RELIABLE) == Reliability.RELIABLE
        assert Durability(DurabilityKind.TRANSIENT_LOCAL) == Durability.TRANSIENT_LOCAL
        assert History.KEEP_ALL.kind is HistoryKind.KEEP_ALL
        assert Ownership(OwnershipKind.EXCLUSIVE) == Ownership.EXCLUSIVE
        assert Ownership.EXCLUSIVE.kind is OwnershipKind.EXCLUSIVE
        assert Ownership.EXCLUSIVE != Ownership.SHARED
        assert Ownership() == Ownership.SHARED
        assert DestinationOrder.BY_SOURCE_TIMESTAMP.kind is DestinationOrderKind.BY_SOURCE_TIMESTAMP
        assert IgnoreLocal.PROCESS != IgnoreLocal.NOTHING

    def test_policies_are_immutable_and_hashable(self) -> None:
        """A policy cannot be changed in place and can key a dict."""
        policy = History.keep_last(3)
        with pytest.raises(AttributeError):
            policy.depth = 4  # type: ignore[misc]
        assert {policy: 1}[History.keep_last(3)] == 1


class TestCopyAndModify:
    def test_with_methods_return_modified_copies(self) -> None:
        """with_* methods leave the original unchanged and return the new value."""
        history = History.keep_last(1)
        assert history.with_depth(7) == History.keep_last(7)
        assert history.depth == 1
        assert Reliability.RELIABLE.with_max_blocking_time(
            timedelta(seconds=1)
        ) == Reliability.reliable(timedelta(seconds=1))
        assert Liveliness.manual_by_topic().with_lease_duration(timedelta(seconds=2)) == Liveliness(
            LivelinessKind.MANUAL_BY_TOPIC, timedelta(seconds=2)
        )
        assert Deadline().with_period(timedelta(seconds=1)).period == timedelta(seconds=1)
        assert Partition("a").with_names("b", "c").names == ("b", "c")
        assert SubscriptionKeys().with_key("id").key_list == ("id",)

    def test_generic_with_validates(self) -> None:
        """with_(...) replaces fields and validates like a constructor."""
        assert ResourceLimits().with_(max_samples=10).max_samples == 10
        with pytest.raises(BadParameterError, match=r"ResourceLimits\.max_samples"):
            ResourceLimits().with_(max_samples=-5)
        with pytest.raises(BadParameterError, match="depht"):
            History().with_(depht=3)

    @pytest.mark.parametrize(
        "build",
        [
            lambda: History(dept=3),  # type: ignore[call-arg]
            lambda: History().with_(dept=3),
        ],
    )
    def test_unknown_field_raises_bad_parameter_naming_it(self, build) -> None:  # type: ignore[no-untyped-def]
        """An unknown field is a BadParameterError naming the policy and the field,
        whether given to the constructor or to with_()."""
        with pytest.raises(BadParameterError, match=r"History.*'dept'"):
            build()

    def test_wrong_argument_count_raises_bad_parameter(self) -> None:
        """Too many positional fields is a BadParameterError naming the policy."""
        with pytest.raises(BadParameterError, match=r"^Reliability: .*positional"):
            Reliability(ReliabilityKind.RELIABLE, timedelta(1), 3)  # type: ignore[call-arg]

    def test_partition_accepts_names_and_iterables(self) -> None:
        """Partition takes names as arguments, one iterable, or the names keyword."""
        assert Partition("a", "b") == Partition(["a", "b"]) == Partition(names=("a", "b"))

    def test_properties(self) -> None:
        """Properties are built from a mapping or entries, looked up by name, and replaced."""
        props = Properties({"site": "lab"}).with_property("blob", b"\x00\x01", propagate=True)
        assert props["site"] == "lab"
        assert props["blob"] == b"\x00\x01"
        assert "blob" in props
        assert props.with_property("site", "field")["site"] == "field"
        with pytest.raises(KeyError):
            props["missing"]

    def test_subscription_keys_of(self) -> None:
        """SubscriptionKeys.of(...) uses the given field paths as the reader's keys."""
        keys = SubscriptionKeys.of("id", "pos.x")
        assert keys.use_key_list is True
        assert keys.key_list == ("id", "pos.x")


class TestValidation:
    @pytest.mark.parametrize(
        ("build", "where"),
        [
            (lambda: History.keep_last(0), "History.depth"),
            (lambda: History.keep_last(-1), "History.depth"),
            (lambda: History(kind="keep_last"), "History.kind"),  # type: ignore[arg-type]
            (lambda: Durability("transient"), "Durability.kind"),  # type: ignore[arg-type]
            (
                lambda: Reliability(ReliabilityKind.RELIABLE, NEGATIVE),
                "Reliability.max_blocking_time",
            ),
            (lambda: Reliability(ReliabilityKind.RELIABLE, 100), "Reliability.max_blocking_time"),  # type: ignore[arg-type]
            (lambda: Deadline(NEGATIVE), "Deadline.period"),
            (lambda: LatencyBudget(NEGATIVE), "LatencyBudget.duration"),
            (lambda: Lifespan(NEGATIVE), "Lifespan.duration"),
            (lambda: TimeBasedFilter(NEGATIVE), "TimeBasedFilter.minimum_separation"),
            (lambda: Liveliness.automatic(NEGATIVE), "Liveliness.lease_duration"),
            (lambda: Liveliness(3), "Liveliness.kind"),  # type: ignore[arg-type]
            (lambda: ReaderDataLifecycle(NEGATIVE), "ReaderDataLifecycle.autopurge_nowriter"),
            (
                lambda: ReaderDataLifecycle(INFINITE, NEGATIVE),
                "ReaderDataLifecycle.autopurge_disposed",
            ),
            (lambda: ResourceLimits(max_samples=0), "ResourceLimits.max_samples"),
            (lambda: ResourceLimits(max_instances=-2), "ResourceLimits.max_instances"),
            (
                lambda: ResourceLimits(max_samples_per_instance=1.5),  # type: ignore[arg-type]
                "ResourceLimits.max_samples_per_instance",
            ),
            (lambda: DurabilityService(NEGATIVE), "DurabilityService.service_cleanup_delay"),
            (lambda: DurabilityService(history=5), "history"),  # type: ignore[arg-type]
            (lambda: DurabilityService(max_samples=0), "DurabilityService.max_samples"),
            (lambda: Presentation("group"), "Presentation.access_scope"),  # type: ignore[arg-type]
            (lambda: Presentation(coherent_access=1), "Presentation.coherent_access"),  # type: ignore[arg-type]
            (lambda: Ownership("exclusive"), "Ownership.kind"),  # type: ignore[arg-type]
            (lambda: OwnershipStrength(True), "OwnershipStrength.value"),
            (lambda: OwnershipStrength(2**40), "OwnershipStrength.value"),
            (lambda: TransportPriority("high"), "TransportPriority.value"),  # type: ignore[arg-type]
            (lambda: DestinationOrder(1), "DestinationOrder.kind"),  # type: ignore[arg-type]
            (lambda: UserData("text"), "UserData.value"),  # type: ignore[arg-type]
            (lambda: TopicData(5), "TopicData.value"),  # type: ignore[arg-type]
            (lambda: GroupData(None), "GroupData.value"),  # type: ignore[arg-type]
            (lambda: Partition(3), "Partition.names"),  # type: ignore[arg-type]
            (lambda: EntityFactory(0), "EntityFactory.autoenable_created_entities"),  # type: ignore[arg-type]
            (
                lambda: WriterDataLifecycle("yes"),  # type: ignore[arg-type]
                "WriterDataLifecycle.autodispose_unregistered_instances",
            ),
            (lambda: SubscriptionKeys(("a b",), True), "SubscriptionKeys.key_list"),
            (lambda: SubscriptionKeys((), True), "SubscriptionKeys.key_list"),
            (lambda: SubscriptionKeys(("a", "a"), True), "SubscriptionKeys.key_list"),
            (lambda: SubscriptionKeys(("a",), "yes"), "SubscriptionKeys.use_key_list"),  # type: ignore[arg-type]
            (lambda: DataRepresentation(["xcdr2"]), "DataRepresentation.values"),
            (
                lambda: DataRepresentation([DataRepresentationId.XCDR2] * 2),
                "DataRepresentation.values",
            ),
            (
                lambda: TypeConsistencyEnforcement(ignore_member_names=None),  # type: ignore[arg-type]
                "TypeConsistencyEnforcement.ignore_member_names",
            ),
            (lambda: IgnoreLocal("process"), "IgnoreLocal.kind"),  # type: ignore[arg-type]
            (lambda: Property("k", 5), "Property.value"),  # type: ignore[arg-type]
            (lambda: Properties([("k", "v")]), "Properties.entries"),
            (lambda: Properties([Property("k", "1"), Property("k", "2")]), "Properties.entries"),
            (lambda: EntityName(5), "name"),  # type: ignore[arg-type]
        ],
    )
    def test_bad_field_raises_naming_policy_and_field(self, build, where) -> None:  # type: ignore[no-untyped-def]
        """A bad field value raises BadParameterError naming the policy and the field."""
        with pytest.raises(BadParameterError, match=where.replace(".", r"\.")):
            build()

    def test_bad_parameter_error_is_a_value_error(self) -> None:
        """Callers can catch validation errors as plain ValueError."""
        with pytest.raises(ValueError, match=r"History\.depth"):
            History.keep_last(0)

    def test_keep_all_ignores_depth(self) -> None:
        """KEEP_ALL history does not require a positive depth."""
        assert History(HistoryKind.KEEP_ALL, 0).kind is HistoryKind.KEEP_ALL


class TestDurations:
    def test_nanosecond_conversion_round_trips(self) -> None:
        """Durations survive the trip to Cyclone nanoseconds and back; INFINITE stays infinite."""
        from qos._duration import DDS_INFINITY_NS, from_nanos, to_nanos

        for value in (timedelta(0), timedelta(microseconds=1), timedelta(days=3, seconds=7)):
            assert from_nanos(to_nanos(value)) == value
        assert to_nanos(INFINITE) == DDS_INFINITY_NS
        assert from_nanos(DDS_INFINITY_NS) == INFINITE
        assert to_nanos(timedelta(days=200 * 365)) < DDS_INFINITY_NS
