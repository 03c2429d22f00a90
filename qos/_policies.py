"""The DCPS QoS policies as frozen attrs values.

Every policy is immutable and validated at construction: a bad field raises
:class:`~idl._errors.BadParameterError` naming the policy and the field.
Copy-and-modify with :meth:`QosPolicy.with_` or the policy's own ``with_*``
methods; parameterless variants are singletons (``Reliability.BEST_EFFORT``,
``Durability.TRANSIENT_LOCAL``, ``History.KEEP_ALL``).

Defaults are those of the DDS 1.4 specification. The one default that depends
on the entity kind (Reliability: RELIABLE for writers) lives in the QoS sets.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any, ClassVar, Self

import attrs

from idl._errors import BadParameterError
from qos._duration import INFINITE

__all__ = [
    "LENGTH_UNLIMITED",
    "DataRepresentation",
    "DataRepresentationId",
    "Deadline",
    "DestinationOrder",
    "DestinationOrderKind",
    "Durability",
    "DurabilityKind",
    "DurabilityService",
    "EntityFactory",
    "EntityName",
    "GroupData",
    "History",
    "HistoryKind",
    "IgnoreLocal",
    "IgnoreLocalKind",
    "LatencyBudget",
    "Lifespan",
    "Liveliness",
    "LivelinessKind",
    "Ownership",
    "OwnershipKind",
    "OwnershipStrength",
    "Partition",
    "Presentation",
    "PresentationAccessScope",
    "Properties",
    "Property",
    "QosPolicy",
    "ReaderDataLifecycle",
    "Reliability",
    "ReliabilityKind",
    "ResourceLimits",
    "SubscriptionKeys",
    "TimeBasedFilter",
    "TopicData",
    "TransportPriority",
    "TypeConsistencyEnforcement",
    "TypeConsistencyKind",
    "UserData",
    "WriterDataLifecycle",
]

#: ``ResourceLimits`` / ``DurabilityService`` value meaning "no limit" (DDS ``LENGTH_UNLIMITED``).
LENGTH_UNLIMITED = -1


# --------------------------------------------------------------------------- kinds


class DurabilityKind(enum.Enum):
    """How long data outlives its writer; ordered VOLATILE < ... < PERSISTENT."""

    VOLATILE = 0
    TRANSIENT_LOCAL = 1
    TRANSIENT = 2
    PERSISTENT = 3


class PresentationAccessScope(enum.Enum):
    """The scope of coherent/ordered access; ordered INSTANCE < TOPIC < GROUP."""

    INSTANCE = 0
    TOPIC = 1
    GROUP = 2


class OwnershipKind(enum.Enum):
    """Whether several writers may update one instance (SHARED) or only the strongest."""

    SHARED = 0
    EXCLUSIVE = 1


class LivelinessKind(enum.Enum):
    """Who asserts liveliness; ordered AUTOMATIC < MANUAL_BY_PARTICIPANT < MANUAL_BY_TOPIC."""

    AUTOMATIC = 0
    MANUAL_BY_PARTICIPANT = 1
    MANUAL_BY_TOPIC = 2


class ReliabilityKind(enum.Enum):
    """Delivery guarantee; ordered BEST_EFFORT < RELIABLE."""

    BEST_EFFORT = 0
    RELIABLE = 1


class DestinationOrderKind(enum.Enum):
    """Which timestamp orders the samples of an instance."""

    BY_RECEPTION_TIMESTAMP = 0
    BY_SOURCE_TIMESTAMP = 1


class HistoryKind(enum.Enum):
    """Keep the last ``depth`` samples per instance, or all of them."""

    KEEP_LAST = 0
    KEEP_ALL = 1


class IgnoreLocalKind(enum.Enum):
    """Cyclone DDS extension: do not match entities of the same participant/process."""

    NOTHING = 0
    PARTICIPANT = 1
    PROCESS = 2


class DataRepresentationId(enum.Enum):
    """DDS-XTypes data representations Cyclone DDS supports."""

    XCDR1 = 0
    XCDR2 = 2


class TypeConsistencyKind(enum.Enum):
    """DDS-XTypes type consistency enforcement kind."""

    DISALLOW_TYPE_COERCION = 0
    ALLOW_TYPE_COERCION = 1


# --------------------------------------------------------------------- validators


def _where(instance: object, attribute: attrs.Attribute[Any]) -> str:
    return f"{type(instance).__name__}.{attribute.name}"


def _duration(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, timedelta):
        raise BadParameterError(
            f"{_where(instance, attribute)} must be a datetime.timedelta, got {value!r}"
        )
    if value < timedelta(0):
        raise BadParameterError(f"{_where(instance, attribute)} must not be negative, got {value}")


def _repr_duration(value: object) -> str:
    return "INFINITE" if value == INFINITE else repr(value)


def _int(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadParameterError(f"{_where(instance, attribute)} must be an int, got {value!r}")
    if not -(2**31) <= value < 2**31:
        raise BadParameterError(f"{_where(instance, attribute)} must fit 32 bits, got {value}")


def _limit(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    _int(instance, attribute, value)
    if value != LENGTH_UNLIMITED and value <= 0:  # type: ignore[operator]
        raise BadParameterError(
            f"{_where(instance, attribute)} must be positive or LENGTH_UNLIMITED (-1), got {value}"
        )


def _bool(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise BadParameterError(f"{_where(instance, attribute)} must be a bool, got {value!r}")


def _bytes(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bytes):
        raise BadParameterError(f"{_where(instance, attribute)} must be bytes, got {value!r}")


def _kind(enum_type: type[enum.Enum]) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, enum_type):
            names = ", ".join(member.name for member in enum_type)
            raise BadParameterError(
                f"{_where(instance, attribute)} must be a {enum_type.__name__} ({names}), "
                f"got {value!r}"
            )

    return check


def _type_names(expected: type | tuple[type, ...]) -> str:
    if isinstance(expected, tuple):
        return " or ".join(t.__name__ for t in expected)
    return expected.__name__


def _instance(expected: type | tuple[type, ...]) -> Any:
    def check(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
        if not isinstance(value, expected):
            raise BadParameterError(
                f"{_where(instance, attribute)} must be a {_type_names(expected)}, got {value!r}"
            )

    return check


def _to_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, Iterable) else value


def _to_bytes(value: object) -> object:
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return value


def _to_str_tuple(value: object) -> object:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Iterable) and not isinstance(value, bytes | bytearray):
        return tuple(value)
    return value


def _str_tuple(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(item, str) for item in value):
        raise BadParameterError(
            f"{_where(instance, attribute)} must be a sequence of str, got {value!r}"
        )


def _representations(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    items = value if isinstance(value, tuple) else ()
    for item in items:
        _kind(DataRepresentationId)(instance, attribute, item)
    if len(set(items)) != len(items):
        raise BadParameterError(f"{_where(instance, attribute)} repeats a value: {value}")


# --------------------------------------------------------------------- base class


class _PolicyMeta(type):
    """Turns a constructor call with unknown or missing fields into BadParameterError."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().__call__(*args, **kwargs)
        except TypeError as exc:
            # attrs' __init__ says e.g. "got an unexpected keyword argument 'dept'".
            raise BadParameterError(f"{cls.__name__}: {exc}") from exc


class QosPolicy(metaclass=_PolicyMeta):
    """Base of every QoS policy value.

    ``policy_name`` is the DDS name of the policy (as used in error messages),
    ``changeable`` whether the spec allows changing it on an enabled entity.
    """

    __slots__ = ()

    policy_name: ClassVar[str]
    changeable: ClassVar[bool]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.policy_name = cls.__name__

    def with_(self, **changes: Any) -> Self:
        """A copy with the given fields replaced (validated like a new policy)."""
        try:
            return attrs.evolve(self, **changes)  # type: ignore[misc]
        except TypeError as exc:
            raise BadParameterError(f"{type(self).__name__}: {exc}") from exc


# ------------------------------------------------------------------------ policies


@attrs.frozen
class UserData(QosPolicy):
    """Opaque application data attached to a participant, writer or reader."""

    changeable: ClassVar[bool] = True

    value: bytes = attrs.field(default=b"", converter=_to_bytes, validator=_bytes)


@attrs.frozen
class TopicData(QosPolicy):
    """Opaque application data attached to a topic."""

    changeable: ClassVar[bool] = True

    value: bytes = attrs.field(default=b"", converter=_to_bytes, validator=_bytes)


@attrs.frozen
class GroupData(QosPolicy):
    """Opaque application data attached to a publisher or subscriber."""

    changeable: ClassVar[bool] = True

    value: bytes = attrs.field(default=b"", converter=_to_bytes, validator=_bytes)


@attrs.frozen
class Durability(QosPolicy):
    """Whether and how long samples are kept for late-joining readers.

    VOLATILE and TRANSIENT_LOCAL (history kept by the live writer) are
    Cyclone DDS's own. TRANSIENT and PERSISTENT need a durability service,
    which Cyclone does not have: the dcps store runs one
    (``Store(..., durability=["*"])``, ``dcps store --durability '*'``), and
    dcps readers with these kinds fetch its history when they join (see
    README, "Durability").
    """

    changeable: ClassVar[bool] = False

    kind: DurabilityKind = attrs.field(
        default=DurabilityKind.VOLATILE, validator=_kind(DurabilityKind)
    )

    VOLATILE: ClassVar[Durability]
    TRANSIENT_LOCAL: ClassVar[Durability]
    TRANSIENT: ClassVar[Durability]
    PERSISTENT: ClassVar[Durability]


Durability.VOLATILE = Durability(DurabilityKind.VOLATILE)
Durability.TRANSIENT_LOCAL = Durability(DurabilityKind.TRANSIENT_LOCAL)
Durability.TRANSIENT = Durability(DurabilityKind.TRANSIENT)
Durability.PERSISTENT = Durability(DurabilityKind.PERSISTENT)


@attrs.frozen
class History(QosPolicy):
    """How many samples per instance are kept: the last ``depth`` or all.

    ``depth`` only matters for KEEP_LAST and must be positive.
    """

    changeable: ClassVar[bool] = False

    kind: HistoryKind = attrs.field(default=HistoryKind.KEEP_LAST, validator=_kind(HistoryKind))
    depth: int = attrs.field(default=1, validator=_int)

    KEEP_ALL: ClassVar[History]

    def __attrs_post_init__(self) -> None:
        if self.kind is HistoryKind.KEEP_LAST and self.depth <= 0:
            raise BadParameterError(
                f"History.depth must be positive for KEEP_LAST, got {self.depth}"
            )

    @classmethod
    def keep_last(cls, depth: int) -> History:
        """KEEP_LAST with the given depth."""
        return cls(HistoryKind.KEEP_LAST, depth)

    def with_depth(self, depth: int) -> History:
        """A KEEP_LAST history of ``depth`` samples."""
        return History(HistoryKind.KEEP_LAST, depth)


History.KEEP_ALL = History(HistoryKind.KEEP_ALL, 1)


@attrs.frozen
class DurabilityService(QosPolicy):
    """History and limits of the service keeping TRANSIENT/PERSISTENT data.

    The dcps durability service (``dcps.store.DurabilityService``) honours it
    for TRANSIENT/PERSISTENT topics: history kind and depth,
    ``max_samples``, ``max_instances``, ``max_samples_per_instance`` and
    ``service_cleanup_delay`` (how long a disposed instance is still served).
    On Cyclone it also bounds what a TRANSIENT_LOCAL writer keeps for late
    joiners (see :func:`qos.to_cyclone`).
    """

    changeable: ClassVar[bool] = False

    service_cleanup_delay: timedelta = attrs.field(
        default=timedelta(0), validator=_duration, repr=_repr_duration
    )
    history: History = attrs.field(default=History(), validator=_instance(History))
    max_samples: int = attrs.field(default=LENGTH_UNLIMITED, validator=_limit)
    max_instances: int = attrs.field(default=LENGTH_UNLIMITED, validator=_limit)
    max_samples_per_instance: int = attrs.field(default=LENGTH_UNLIMITED, validator=_limit)


@attrs.frozen
class Presentation(QosPolicy):
    """Coherent and ordered access on a publisher/subscriber."""

    changeable: ClassVar[bool] = False

    access_scope: PresentationAccessScope = attrs.field(
        default=PresentationAccessScope.INSTANCE, validator=_kind(PresentationAccessScope)
    )
    coherent_access: bool = attrs.field(default=False, validator=_bool)
    ordered_access: bool = attrs.field(default=False, validator=_bool)


@attrs.frozen
class Deadline(QosPolicy):
    """Each instance is updated at least once per ``period``."""

    changeable: ClassVar[bool] = True

    period: timedelta = attrs.field(default=INFINITE, validator=_duration, repr=_repr_duration)

    def with_period(self, period: timedelta) -> Deadline:
        """A copy with another period."""
        return Deadline(period)


@attrs.frozen
class LatencyBudget(QosPolicy):
    """A hint of the acceptable delay from write to delivery."""

    changeable: ClassVar[bool] = True

    duration: timedelta = attrs.field(
        default=timedelta(0), validator=_duration, repr=_repr_duration
    )


@attrs.frozen
class Ownership(QosPolicy):
    """SHARED: every writer updates an instance; EXCLUSIVE: only the strongest."""

    changeable: ClassVar[bool] = False

    kind: OwnershipKind = attrs.field(default=OwnershipKind.SHARED, validator=_kind(OwnershipKind))

    SHARED: ClassVar[Ownership]
    EXCLUSIVE: ClassVar[Ownership]


Ownership.SHARED = Ownership(OwnershipKind.SHARED)
Ownership.EXCLUSIVE = Ownership(OwnershipKind.EXCLUSIVE)


@attrs.frozen
class OwnershipStrength(QosPolicy):
    """A writer's strength for EXCLUSIVE ownership (higher wins)."""

    changeable: ClassVar[bool] = True

    value: int = attrs.field(default=0, validator=_int)


@attrs.frozen
class Liveliness(QosPolicy):
    """How a writer shows it is alive, and how often (``lease_duration``)."""

    changeable: ClassVar[bool] = False

    kind: LivelinessKind = attrs.field(
        default=LivelinessKind.AUTOMATIC, validator=_kind(LivelinessKind)
    )
    lease_duration: timedelta = attrs.field(
        default=INFINITE, validator=_duration, repr=_repr_duration
    )

    AUTOMATIC: ClassVar[Liveliness]

    @classmethod
    def automatic(cls, lease_duration: timedelta = INFINITE) -> Liveliness:
        """AUTOMATIC liveliness with the given lease."""
        return cls(LivelinessKind.AUTOMATIC, lease_duration)

    @classmethod
    def manual_by_participant(cls, lease_duration: timedelta = INFINITE) -> Liveliness:
        """MANUAL_BY_PARTICIPANT liveliness with the given lease."""
        return cls(LivelinessKind.MANUAL_BY_PARTICIPANT, lease_duration)

    @classmethod
    def manual_by_topic(cls, lease_duration: timedelta = INFINITE) -> Liveliness:
        """MANUAL_BY_TOPIC liveliness with the given lease."""
        return cls(LivelinessKind.MANUAL_BY_TOPIC, lease_duration)

    def with_lease_duration(self, lease_duration: timedelta) -> Liveliness:
        """A copy with another lease duration."""
        return Liveliness(self.kind, lease_duration)


Liveliness.AUTOMATIC = Liveliness()


@attrs.frozen
class TimeBasedFilter(QosPolicy):
    """A reader wants at most one sample per instance per ``minimum_separation``."""

    changeable: ClassVar[bool] = True

    minimum_separation: timedelta = attrs.field(
        default=timedelta(0), validator=_duration, repr=_repr_duration
    )


@attrs.frozen
class Partition(QosPolicy):
    """The partitions (names or wildcard patterns) of a publisher/subscriber.

    No names means the default partition ``""``.
    """

    changeable: ClassVar[bool] = True

    names: tuple[str, ...] = attrs.field(default=(), converter=_to_str_tuple, validator=_str_tuple)

    def __init__(self, *args: str | Iterable[str], names: Iterable[str] = ()) -> None:
        flat: list[object] = []
        for item in (*args, names):
            if isinstance(item, str):
                flat.append(item)
            else:
                converted = _to_str_tuple(item)
                if isinstance(converted, tuple):
                    flat.extend(converted)
                else:
                    flat.append(converted)
        self.__attrs_init__(tuple(flat))  # type: ignore[attr-defined]

    def with_names(self, *names: str) -> Partition:
        """A partition policy with other names."""
        return Partition(*names)


@attrs.frozen
class Reliability(QosPolicy):
    """BEST_EFFORT or RELIABLE delivery; a reliable writer with a full history
    blocks up to ``max_blocking_time``.

    ``max_blocking_time`` only means something for RELIABLE; the cyclonedds
    binding does not carry it for BEST_EFFORT (it reads back as the default).
    """

    changeable: ClassVar[bool] = False

    kind: ReliabilityKind = attrs.field(
        default=ReliabilityKind.BEST_EFFORT, validator=_kind(ReliabilityKind)
    )
    max_blocking_time: timedelta = attrs.field(
        default=timedelta(milliseconds=100), validator=_duration, repr=_repr_duration
    )

    BEST_EFFORT: ClassVar[Reliability]
    RELIABLE: ClassVar[Reliability]

    @classmethod
    def reliable(cls, max_blocking_time: timedelta = timedelta(milliseconds=100)) -> Reliability:
        """RELIABLE with the given maximum blocking time."""
        return cls(ReliabilityKind.RELIABLE, max_blocking_time)

    def with_max_blocking_time(self, max_blocking_time: timedelta) -> Reliability:
        """A copy with another maximum blocking time."""
        return Reliability(self.kind, max_blocking_time)


Reliability.BEST_EFFORT = Reliability(ReliabilityKind.BEST_EFFORT)
Reliability.RELIABLE = Reliability(ReliabilityKind.RELIABLE)


@attrs.frozen
class TransportPriority(QosPolicy):
    """A hint to the transport of the priority of the data."""

    changeable: ClassVar[bool] = True

    value: int = attrs.field(default=0, validator=_int)


@attrs.frozen
class Lifespan(QosPolicy):
    """Samples expire ``duration`` after their source timestamp."""

    changeable: ClassVar[bool] = True

    duration: timedelta = attrs.field(default=INFINITE, validator=_duration, repr=_repr_duration)


@attrs.frozen
class DestinationOrder(QosPolicy):
    """Order instance updates by reception or by source timestamp."""

    changeable: ClassVar[bool] = False

    kind: DestinationOrderKind = attrs.field(
        default=DestinationOrderKind.BY_RECEPTION_TIMESTAMP, validator=_kind(DestinationOrderKind)
    )

    BY_RECEPTION_TIMESTAMP: ClassVar[DestinationOrder]
    BY_SOURCE_TIMESTAMP: ClassVar[DestinationOrder]


DestinationOrder.BY_RECEPTION_TIMESTAMP = DestinationOrder(
    DestinationOrderKind.BY_RECEPTION_TIMESTAMP
)
DestinationOrder.BY_SOURCE_TIMESTAMP = DestinationOrder(DestinationOrderKind.BY_SOURCE_TIMESTAMP)


@attrs.frozen
class ResourceLimits(QosPolicy):
    """Bounds on samples, instances and samples per instance (-1: unlimited)."""

    changeable: ClassVar[bool] = False

    max_samples: int = attrs.field(default=LENGTH_UNLIMITED, validator=_limit)
    max_instances: int = attrs.field(default=LENGTH_UNLIMITED, validator=_limit)
    max_samples_per_instance: int = attrs.field(default=LENGTH_UNLIMITED, validator=_limit)


@attrs.frozen
class EntityFactory(QosPolicy):
    """Whether child entities are enabled as soon as they are created.

    dcps enables every entity when it is created (there is no ``enable()``):
    ``autoenable_created_entities=False`` raises
    :class:`~idl._errors.UnsupportedError` when a participant, publisher or
    subscriber is created or changed with it.
    """

    changeable: ClassVar[bool] = True

    autoenable_created_entities: bool = attrs.field(default=True, validator=_bool)


@attrs.frozen
class WriterDataLifecycle(QosPolicy):
    """Whether unregistering an instance, or deleting its writer, also disposes it.

    ``autodispose_unregistered_instances=True`` (the DDS default): a dcps writer's
    ``unregister_instance``, ``close()`` and the end of its ``with`` block make
    the instances it wrote NOT_ALIVE_DISPOSED at the readers. ``False``: they
    become NOT_ALIVE_NO_WRITERS (once no other writer is left); only ``dispose``
    and ``write_dispose`` dispose.

    Either way a dcps writer whose process dies or which loses its liveliness
    leaves its instances NOT_ALIVE_NO_WRITERS, as DDS says: dcps announces
    ``False`` to Cyclone (which would otherwise apply the flag to a lost writer)
    and disposes explicitly instead, so other DDS readers see this policy as
    ``False`` in the writer's discovery data. A foreign (non-dcps) writer with
    ``True`` that dies still shows NOT_ALIVE_DISPOSED at every Cyclone reader.
    """

    changeable: ClassVar[bool] = True

    autodispose_unregistered_instances: bool = attrs.field(default=True, validator=_bool)


@attrs.frozen
class ReaderDataLifecycle(QosPolicy):
    """How long a reader keeps instances with no writers / disposed instances."""

    changeable: ClassVar[bool] = True

    autopurge_nowriter_samples_delay: timedelta = attrs.field(
        default=INFINITE, validator=_duration, repr=_repr_duration
    )
    autopurge_disposed_samples_delay: timedelta = attrs.field(
        default=INFINITE, validator=_duration, repr=_repr_duration
    )


_FIELD_PATH = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@attrs.frozen
class SubscriptionKeys(QosPolicy):
    """OpenSplice extension: a DataReader keys instances by its own key list.

    ``key_list`` holds field names or dotted paths into nested structs. With
    ``use_key_list`` the reader tracks instances by these keys instead of the
    topic's: taking all samples of an instance removes it (its next sample is
    NEW again), invalid samples (unregister, dispose without data) are skipped,
    and only ``write_dispose`` disposes. DataReader only; immutable once enabled.
    """

    changeable: ClassVar[bool] = False

    key_list: tuple[str, ...] = attrs.field(
        default=(), converter=_to_str_tuple, validator=_str_tuple
    )
    use_key_list: bool = attrs.field(default=False, validator=_bool)

    NONE: ClassVar[SubscriptionKeys]

    def __attrs_post_init__(self) -> None:
        for name in self.key_list:
            if not _FIELD_PATH.match(name):
                raise BadParameterError(
                    f"SubscriptionKeys.key_list: {name!r} is not a field name or dotted path"
                )
        if len(set(self.key_list)) != len(self.key_list):
            raise BadParameterError(f"SubscriptionKeys.key_list repeats a key: {self.key_list}")
        if self.use_key_list and not self.key_list:
            raise BadParameterError("SubscriptionKeys.key_list must not be empty with use_key_list")

    @classmethod
    def of(cls, *keys: str) -> SubscriptionKeys:
        """Use the given key fields (``use_key_list=True``)."""
        return cls(keys, True)

    def with_key(self, *keys: str) -> SubscriptionKeys:
        """A copy using the given key fields (``use_key_list=True``)."""
        return SubscriptionKeys(keys, True)


SubscriptionKeys.NONE = SubscriptionKeys()


@attrs.frozen
class DataRepresentation(QosPolicy):
    """DDS-XTypes data representations: a writer uses the first, a reader accepts any.

    Empty (the default) lets Cyclone DDS choose from the topic type.
    """

    changeable: ClassVar[bool] = False

    values: tuple[DataRepresentationId, ...] = attrs.field(
        default=(), converter=_to_tuple, validator=_representations
    )


@attrs.frozen
class TypeConsistencyEnforcement(QosPolicy):
    """DDS-XTypes rules for matching a reader's type with a writer's."""

    changeable: ClassVar[bool] = False

    kind: TypeConsistencyKind = attrs.field(
        default=TypeConsistencyKind.ALLOW_TYPE_COERCION, validator=_kind(TypeConsistencyKind)
    )
    ignore_sequence_bounds: bool = attrs.field(default=True, validator=_bool)
    ignore_string_bounds: bool = attrs.field(default=True, validator=_bool)
    ignore_member_names: bool = attrs.field(default=False, validator=_bool)
    prevent_type_widening: bool = attrs.field(default=False, validator=_bool)
    force_type_validation: bool = attrs.field(default=False, validator=_bool)


@attrs.frozen
class IgnoreLocal(QosPolicy):
    """Cyclone DDS extension: do not match readers/writers of the same participant or process."""

    changeable: ClassVar[bool] = False

    kind: IgnoreLocalKind = attrs.field(
        default=IgnoreLocalKind.NOTHING, validator=_kind(IgnoreLocalKind)
    )

    NOTHING: ClassVar[IgnoreLocal]
    PARTICIPANT: ClassVar[IgnoreLocal]
    PROCESS: ClassVar[IgnoreLocal]


IgnoreLocal.NOTHING = IgnoreLocal(IgnoreLocalKind.NOTHING)
IgnoreLocal.PARTICIPANT = IgnoreLocal(IgnoreLocalKind.PARTICIPANT)
IgnoreLocal.PROCESS = IgnoreLocal(IgnoreLocalKind.PROCESS)


@attrs.frozen
class EntityName(QosPolicy):
    """Cyclone DDS extension: a name shown by discovery tools (empty: none)."""

    changeable: ClassVar[bool] = False

    name: str = attrs.field(default="", validator=_instance(str))


def _to_properties(value: object) -> object:
    if isinstance(value, Mapping):
        value = [Property(name, item) for name, item in value.items()]
    if isinstance(value, Iterable) and not isinstance(value, str | bytes):
        items = tuple(value)
        if all(isinstance(item, Property) for item in items):
            # Order carries no meaning: keep entries sorted so equal sets compare equal.
            return tuple(sorted(items, key=lambda item: item.name))
        return items
    return value


def _properties(instance: object, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(item, Property) for item in value):
        raise BadParameterError(
            f"{_where(instance, attribute)} must be Property entries or a mapping, got {value!r}"
        )
    names = [item.name for item in value]
    if len(set(names)) != len(names):
        raise BadParameterError(f"{_where(instance, attribute)} repeats a property name: {names}")


@attrs.frozen
class Property:
    """One entry of :class:`Properties`: a name, a text or binary value, and
    whether discovery sends it to other participants (``propagate``)."""

    name: str = attrs.field(validator=_instance(str))
    value: str | bytes = attrs.field(validator=_instance((str, bytes)))
    propagate: bool = attrs.field(default=False, validator=_bool)


@attrs.frozen
class Properties(QosPolicy):
    """Name/value properties (the DDS-Security PropertyQosPolicy; Cyclone DDS also
    reports ``__Hostname``, ``__Pid`` and ``__ProcessName`` of a participant).

    ``Properties({"name": "value"})`` or ``Properties([Property("k", b"raw", True)])``.
    """

    changeable: ClassVar[bool] = False

    entries: tuple[Property, ...] = attrs.field(
        default=(), converter=_to_properties, validator=_properties
    )

    def __getitem__(self, name: str) -> str | bytes:
        """The value of property ``name`` (KeyError if absent)."""
        for entry in self.entries:
            if entry.name == name:
                return entry.value
        raise KeyError(name)

    def __contains__(self, name: object) -> bool:
        return any(entry.name == name for entry in self.entries)

    def with_property(self, name: str, value: str | bytes, propagate: bool = False) -> Properties:
        """A copy with property ``name`` added or replaced."""
        kept = tuple(entry for entry in self.entries if entry.name != name)
        return Properties((*kept, Property(name, value, propagate)))
