"""Immutable QoS sets per entity kind, with the spec's consistency and change rules.

A set holds the policies the user gave explicitly; ``qos[PolicyClass]``
returns the effective value (the explicit one, or the DDS 1.4 default for the
entity kind). Sets are checked for consistency **on construction**: an
inconsistent set cannot exist, so entities need not call :meth:`check` again
(it is public for symmetry and re-validation).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Any, ClassVar, Self, TypeVar

from idl._errors import BadParameterError, ImmutablePolicyError, InconsistentPolicyError
from qos._policies import (
    LENGTH_UNLIMITED,
    DataRepresentation,
    Deadline,
    DestinationOrder,
    Durability,
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
    Ownership,
    OwnershipStrength,
    Partition,
    Presentation,
    Properties,
    QosPolicy,
    ReaderDataLifecycle,
    Reliability,
    ResourceLimits,
    SubscriptionKeys,
    TimeBasedFilter,
    TopicData,
    TransportPriority,
    TypeConsistencyEnforcement,
    UserData,
    WriterDataLifecycle,
)

__all__ = [
    "DataReaderQos",
    "DataWriterQos",
    "DomainParticipantQos",
    "PublisherQos",
    "QosSet",
    "SubscriberQos",
    "TopicQos",
    "check_change",
    "keyword_name",
]

P = TypeVar("P", bound=QosPolicy)


def keyword_name(policy_class: type[QosPolicy]) -> str:
    """The keyword (and profile key) of a policy class: TimeBasedFilter is time_based_filter."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", policy_class.__name__).lower()


_BY_KEYWORD: dict[str, type[QosPolicy]] = {}


class QosSet:
    """Base of the per-entity QoS sets: immutable, built from policies and/or keywords.

    ``DataReaderQos(Reliability.RELIABLE, History.keep_last(10))`` or
    ``DataReaderQos(reliability=Reliability.RELIABLE)``. A policy that does not
    apply to the entity kind, an unknown keyword or a policy given twice raises
    :class:`BadParameterError`; an inconsistent combination raises
    :class:`InconsistentPolicyError`.
    """

    __slots__ = ("_explicit",)

    #: The DDS entity kind ("DataReader", ...), used in error messages.
    entity_kind: ClassVar[str]
    #: Applicable policy classes and their defaults for this kind.
    _defaults: ClassVar[Mapping[type[QosPolicy], QosPolicy]]

    _explicit: Mapping[type[QosPolicy], QosPolicy]

    def __init__(self, *policies: QosPolicy, **keywords: QosPolicy) -> None:
        self._fill(policies, keywords)
        self.check()

    def _fill(self, policies: tuple[QosPolicy, ...], keywords: Mapping[str, QosPolicy]) -> None:
        explicit: dict[type[QosPolicy], QosPolicy] = {}
        for policy in policies:
            self._add(explicit, policy)
        for name, policy in keywords.items():
            expected = _BY_KEYWORD.get(name)
            if expected is None:
                raise BadParameterError(
                    f"{type(self).__name__}: unknown keyword {name!r} "
                    f"(policies of a {self.entity_kind}: "
                    f"{', '.join(sorted(keyword_name(c) for c in self._defaults))})"
                )
            if not isinstance(policy, expected):
                raise BadParameterError(
                    f"{type(self).__name__}: keyword {name!r} takes a {expected.__name__}, "
                    f"got {policy!r}"
                )
            self._add(explicit, policy)
        object.__setattr__(self, "_explicit", MappingProxyType(explicit))

    def _add(self, explicit: dict[type[QosPolicy], QosPolicy], policy: object) -> None:
        if not isinstance(policy, QosPolicy):
            raise BadParameterError(f"{type(self).__name__}: {policy!r} is not a QoS policy")
        cls = type(policy)
        self._require_applicable(cls)
        if cls in explicit:
            raise BadParameterError(f"{type(self).__name__}: {cls.__name__} given twice")
        explicit[cls] = policy

    @classmethod
    def _require_applicable(cls, policy_class: type[QosPolicy]) -> None:
        if policy_class not in cls._defaults:
            raise BadParameterError(
                f"{policy_class.__name__} does not apply to a {cls.entity_kind} ({cls.__name__})"
            )

    # ---------------------------------------------------------------- immutability

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable; use .with_(...)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), tuple(self._explicit.values())))

    # ---------------------------------------------------------------------- access

    @classmethod
    def applicable(cls) -> tuple[type[QosPolicy], ...]:
        """The policy classes that apply to this entity kind."""
        return tuple(cls._defaults)

    @classmethod
    def applies(cls, policy_class: type[QosPolicy]) -> bool:
        """Whether ``policy_class`` applies to this entity kind."""
        return policy_class in cls._defaults

    @classmethod
    def default(cls, policy_class: type[P]) -> P:
        """The DDS default of ``policy_class`` for this entity kind."""
        cls._require_applicable(policy_class)
        return cls._defaults[policy_class]  # type: ignore[return-value]

    def __getitem__(self, policy_class: type[P]) -> P:
        """The effective policy: the one given, else the default for this kind."""
        if not isinstance(policy_class, type) or not issubclass(policy_class, QosPolicy):
            raise BadParameterError(f"{policy_class!r} is not a QoS policy class")
        self._require_applicable(policy_class)
        found = self._explicit.get(policy_class)
        if found is None:
            found = self._defaults[policy_class]
        return found  # type: ignore[return-value]

    def get(self, policy_class: type[P]) -> P:
        """The effective policy (same as ``qos[policy_class]``)."""
        return self[policy_class]

    def is_set(self, policy_class: type[QosPolicy]) -> bool:
        """Whether ``policy_class`` was given explicitly (rather than defaulted)."""
        return policy_class in self._explicit

    @property
    def explicit(self) -> Mapping[type[QosPolicy], QosPolicy]:
        """The explicitly given policies, by class (read-only)."""
        return self._explicit

    def effective(self) -> tuple[QosPolicy, ...]:
        """Every applicable policy's effective value."""
        return tuple(self[cls] for cls in self._defaults)

    def __iter__(self) -> Iterator[QosPolicy]:
        """Iterate over the effective value of every applicable policy."""
        return iter(self.effective())

    # ------------------------------------------------------------- copy-and-modify

    def with_(self, *policies: QosPolicy, **keywords: QosPolicy) -> Self:
        """A copy where the given policies replace those of the same class."""
        probe = type(self)._unchecked(*policies, **keywords)
        merged = dict(self._explicit)
        merged.update(probe._explicit)
        return type(self)(*merged.values())

    def without(self, *policy_classes: type[QosPolicy]) -> Self:
        """A copy where the given policies are back to their defaults."""
        for cls in policy_classes:
            self._require_applicable(cls)
        return type(self)(*(p for c, p in self._explicit.items() if c not in policy_classes))

    @classmethod
    def _unchecked(cls, *policies: QosPolicy, **keywords: QosPolicy) -> Self:
        """Build without the consistency check (for merging in ``with_``)."""
        instance = cls.__new__(cls)
        instance._fill(policies, keywords)
        return instance

    # ------------------------------------------------------------------ comparison

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.effective() == other.effective()

    def __hash__(self) -> int:
        return hash((type(self), self.effective()))

    def __repr__(self) -> str:
        inner = ", ".join(repr(p) for p in self._explicit.values())
        return f"{type(self).__name__}({inner})"

    # ----------------------------------------------------------------- consistency

    def check(self) -> None:
        """Raise :class:`InconsistentPolicyError` naming both policies if two contradict.

        Rules (DDS 1.4 §2.2.3): History depth <= ResourceLimits
        max_samples_per_instance; ResourceLimits max_samples >=
        max_samples_per_instance; Deadline period >= TimeBasedFilter
        minimum_separation; the same two rules inside DurabilityService.
        """
        kinds = self._defaults
        if History in kinds and ResourceLimits in kinds:
            history, limits = self[History], self[ResourceLimits]
            _history_vs_limit(
                history, limits.max_samples_per_instance, "ResourceLimits.max_samples_per_instance"
            )
            _samples_vs_per_instance(limits, "ResourceLimits")
        if Deadline in kinds and TimeBasedFilter in kinds:
            period = self[Deadline].period
            separation = self[TimeBasedFilter].minimum_separation
            if period < separation:
                raise InconsistentPolicyError(
                    f"Deadline.period ({_fmt(period)}) is shorter than "
                    f"TimeBasedFilter.minimum_separation ({_fmt(separation)})"
                )
        if DurabilityService in kinds:
            service = self[DurabilityService]
            _history_vs_limit(
                service.history,
                service.max_samples_per_instance,
                "DurabilityService.max_samples_per_instance",
                history_name="DurabilityService.history",
            )
            _samples_vs_per_instance(service, "DurabilityService")


def _rebuild(cls: type[QosSet], policies: tuple[QosPolicy, ...]) -> QosSet:
    return cls(*policies)


def _fmt(duration: timedelta) -> str:
    return "INFINITE" if duration == timedelta.max else str(duration)


def _history_vs_limit(
    history: History, limit: int, limit_name: str, history_name: str = "History"
) -> None:
    if (
        history.kind is HistoryKind.KEEP_LAST
        and limit != LENGTH_UNLIMITED
        and history.depth > limit
    ):
        raise InconsistentPolicyError(
            f"{history_name}.depth ({history.depth}) exceeds {limit_name} ({limit})"
        )


def _samples_vs_per_instance(limits: ResourceLimits | DurabilityService, name: str) -> None:
    if (
        limits.max_samples != LENGTH_UNLIMITED
        and limits.max_samples_per_instance != LENGTH_UNLIMITED
        and limits.max_samples < limits.max_samples_per_instance
    ):
        raise InconsistentPolicyError(
            f"{name}.max_samples ({limits.max_samples}) is less than "
            f"{name}.max_samples_per_instance ({limits.max_samples_per_instance})"
        )


def check_change(current: QosSet, new: QosSet, enabled: bool = True) -> None:
    """Check that an entity may go from QoS ``current`` to ``new`` (``set_qos``).

    ``new`` must be of the same kind and consistent. If the entity is enabled,
    a change of a policy the spec marks not changeable raises
    :class:`ImmutablePolicyError` naming the policy.
    """
    if type(current) is not type(new):
        raise BadParameterError(
            f"cannot change a {type(current).__name__} into a {type(new).__name__}"
        )
    new.check()
    if not enabled:
        return
    for cls in current.applicable():
        if not cls.changeable and current[cls] != new[cls]:
            raise ImmutablePolicyError(
                f"{cls.__name__} cannot be changed on an enabled {current.entity_kind}: "
                f"{current[cls]!r} -> {new[cls]!r}"
            )


# ------------------------------------------------------------------------- kinds


def _defaults(*policies: QosPolicy) -> Mapping[type[QosPolicy], QosPolicy]:
    table = {type(p): p for p in policies}
    for cls in table:
        _BY_KEYWORD[keyword_name(cls)] = cls
    return MappingProxyType(table)


class DomainParticipantQos(QosSet):
    """QoS of a DomainParticipant: UserData, EntityFactory (+ IgnoreLocal, EntityName)."""

    __slots__ = ()
    entity_kind = "DomainParticipant"
    _defaults = _defaults(UserData(), EntityFactory(), IgnoreLocal(), EntityName(), Properties())


class TopicQos(QosSet):
    """QoS of a Topic (Reliability defaults to BEST_EFFORT)."""

    __slots__ = ()
    entity_kind = "Topic"
    _defaults = _defaults(
        TopicData(),
        Durability(),
        DurabilityService(),
        Deadline(),
        LatencyBudget(),
        Liveliness(),
        Reliability(),
        DestinationOrder(),
        History(),
        ResourceLimits(),
        TransportPriority(),
        Lifespan(),
        Ownership(),
        DataRepresentation(),
        EntityName(),
    )


class PublisherQos(QosSet):
    """QoS of a Publisher: Presentation, Partition, GroupData, EntityFactory."""

    __slots__ = ()
    entity_kind = "Publisher"
    _defaults = _defaults(
        Presentation(), Partition(), GroupData(), EntityFactory(), IgnoreLocal(), EntityName()
    )


class SubscriberQos(QosSet):
    """QoS of a Subscriber: Presentation, Partition, GroupData, EntityFactory."""

    __slots__ = ()
    entity_kind = "Subscriber"
    _defaults = _defaults(
        Presentation(), Partition(), GroupData(), EntityFactory(), IgnoreLocal(), EntityName()
    )


_TOPIC_TO_ENDPOINT = (
    Durability,
    DurabilityService,
    Deadline,
    LatencyBudget,
    Liveliness,
    Reliability,
    DestinationOrder,
    History,
    ResourceLimits,
    TransportPriority,
    Lifespan,
    Ownership,
    DataRepresentation,
)


class _EndpointQos(QosSet):
    __slots__ = ()

    @classmethod
    def from_topic(cls, topic_qos: TopicQos, *overrides: QosPolicy, **keywords: QosPolicy) -> Self:
        """``copy_from_topic_qos``: the topic's policies (effective values) that apply
        to this kind, then ``overrides`` on top.

        DurabilityService is copied only if the topic sets it explicitly.
        """
        if not isinstance(topic_qos, TopicQos):
            raise BadParameterError(f"from_topic takes a TopicQos, got {topic_qos!r}")
        return cls._unchecked(*_copied(topic_qos, cls)).with_(*overrides, **keywords)

    def with_topic(self, topic_qos: TopicQos) -> Self:
        """A copy where the topic's policies replace this set's (``copy_from_topic_qos``)."""
        if not isinstance(topic_qos, TopicQos):
            raise BadParameterError(f"with_topic takes a TopicQos, got {topic_qos!r}")
        return self.with_(*_copied(topic_qos, type(self)))


def _copied(topic_qos: TopicQos, kind: type[QosSet]) -> list[QosPolicy]:
    # DurabilityService only when the topic gives it: left implicit, the
    # endpoint's own History decides what a TRANSIENT_LOCAL writer keeps.
    return [
        topic_qos[c]
        for c in _TOPIC_TO_ENDPOINT
        if kind.applies(c) and (c is not DurabilityService or topic_qos.is_set(c))
    ]


class DataWriterQos(_EndpointQos):
    """QoS of a DataWriter (Reliability defaults to RELIABLE, max_blocking_time 100 ms)."""

    __slots__ = ()
    entity_kind = "DataWriter"
    _defaults = _defaults(
        Durability(),
        DurabilityService(),
        Deadline(),
        LatencyBudget(),
        Liveliness(),
        Reliability.RELIABLE,
        DestinationOrder(),
        History(),
        ResourceLimits(),
        TransportPriority(),
        Lifespan(),
        UserData(),
        Ownership(),
        OwnershipStrength(),
        WriterDataLifecycle(),
        DataRepresentation(),
        IgnoreLocal(),
        EntityName(),
        Properties(),
    )


class DataReaderQos(_EndpointQos):
    """QoS of a DataReader (Reliability defaults to BEST_EFFORT; SubscriptionKeys only here)."""

    __slots__ = ()
    entity_kind = "DataReader"
    _defaults = _defaults(
        Durability(),
        Deadline(),
        LatencyBudget(),
        Liveliness(),
        Reliability(),
        DestinationOrder(),
        History(),
        ResourceLimits(),
        UserData(),
        Ownership(),
        TimeBasedFilter(),
        ReaderDataLifecycle(),
        SubscriptionKeys(),
        DataRepresentation(),
        TypeConsistencyEnforcement(),
        IgnoreLocal(),
        EntityName(),
        Properties(),
    )
