"""Conversion between dcps QoS sets and the ``cyclonedds`` binding's ``Qos``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from cyclonedds import qos as cq

from idl._errors import BadParameterError
from qos._duration import from_nanos, to_nanos
from qos._policies import (
    DataRepresentation,
    DataRepresentationId,
    Deadline,
    DestinationOrder,
    DestinationOrderKind,
    Durability,
    DurabilityKind,
    DurabilityService,
    EntityName,
    GroupData,
    History,
    HistoryKind,
    IgnoreLocal,
    IgnoreLocalKind,
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
    QosPolicy,
    ReaderDataLifecycle,
    Reliability,
    ReliabilityKind,
    ResourceLimits,
    TimeBasedFilter,
    TopicData,
    TransportPriority,
    TypeConsistencyEnforcement,
    TypeConsistencyKind,
    UserData,
    WriterDataLifecycle,
)
from qos._sets import (
    DataReaderQos,
    DataWriterQos,
    DomainParticipantQos,
    PublisherQos,
    QosSet,
    SubscriberQos,
    TopicQos,
)

__all__ = ["from_cyclone", "to_cyclone"]

P = cq.Policy

_CYCLONE_SET: dict[type[QosSet], type[cq.Qos]] = {
    DomainParticipantQos: cq.DomainParticipantQos,
    TopicQos: cq.TopicQos,
    PublisherQos: cq.PublisherQos,
    SubscriberQos: cq.SubscriberQos,
    DataWriterQos: cq.DataWriterQos,
    DataReaderQos: cq.DataReaderQos,
}

_KIND_NAMES: dict[str, type[QosSet]] = {
    "participant": DomainParticipantQos,
    "domainparticipant": DomainParticipantQos,
    "topic": TopicQos,
    "publisher": PublisherQos,
    "subscriber": SubscriberQos,
    "writer": DataWriterQos,
    "datawriter": DataWriterQos,
    "reader": DataReaderQos,
    "datareader": DataReaderQos,
}

#: Policies only set on the Cyclone QoS when the user gave them (no useful default).
_ONLY_IF_SET = (DataRepresentation, TypeConsistencyEnforcement, EntityName, Properties)


def _history(policy: History) -> Any:
    if policy.kind is HistoryKind.KEEP_ALL:
        return P.History.KeepAll
    return P.History.KeepLast(policy.depth)


def _durability_service(policy: DurabilityService) -> Any:
    return P.DurabilityService(
        cleanup_delay=to_nanos(policy.service_cleanup_delay),
        history=_history(policy.history),
        max_samples=policy.max_samples,
        max_instances=policy.max_instances,
        max_samples_per_instance=policy.max_samples_per_instance,
    )


def _presentation(policy: Presentation) -> Any:
    scope = {
        PresentationAccessScope.INSTANCE: P.PresentationAccessScope.Instance,
        PresentationAccessScope.TOPIC: P.PresentationAccessScope.Topic,
        PresentationAccessScope.GROUP: P.PresentationAccessScope.Group,
    }[policy.access_scope]
    return scope(coherent_access=policy.coherent_access, ordered_access=policy.ordered_access)


def _liveliness(policy: Liveliness) -> Any:
    kind = {
        LivelinessKind.AUTOMATIC: P.Liveliness.Automatic,
        LivelinessKind.MANUAL_BY_PARTICIPANT: P.Liveliness.ManualByParticipant,
        LivelinessKind.MANUAL_BY_TOPIC: P.Liveliness.ManualByTopic,
    }[policy.kind]
    return kind(lease_duration=to_nanos(policy.lease_duration))


def _reliability(policy: Reliability) -> Any:
    if policy.kind is ReliabilityKind.BEST_EFFORT:
        return P.Reliability.BestEffort
    return P.Reliability.Reliable(max_blocking_time=to_nanos(policy.max_blocking_time))


def _type_consistency(policy: TypeConsistencyEnforcement) -> Any:
    if policy.kind is TypeConsistencyKind.DISALLOW_TYPE_COERCION:
        return P.TypeConsistency.DisallowTypeCoercion(
            force_type_validation=policy.force_type_validation
        )
    return P.TypeConsistency.AllowTypeCoercion(
        ignore_sequence_bounds=policy.ignore_sequence_bounds,
        ignore_string_bounds=policy.ignore_string_bounds,
        ignore_member_names=policy.ignore_member_names,
        prevent_type_widening=policy.prevent_type_widening,
        force_type_validation=policy.force_type_validation,
    )


def _data_representation(policy: DataRepresentation) -> Any:
    return P.DataRepresentation(
        use_cdrv0_representation=DataRepresentationId.XCDR1 in policy.values,
        use_xcdrv2_representation=DataRepresentationId.XCDR2 in policy.values,
    )


_TO: dict[type[QosPolicy], Callable[[Any], Any]] = {
    UserData: lambda p: P.Userdata(p.value) if p.value else None,
    TopicData: lambda p: P.Topicdata(p.value) if p.value else None,
    GroupData: lambda p: P.Groupdata(p.value) if p.value else None,
    Durability: lambda p: {
        DurabilityKind.VOLATILE: P.Durability.Volatile,
        DurabilityKind.TRANSIENT_LOCAL: P.Durability.TransientLocal,
        DurabilityKind.TRANSIENT: P.Durability.Transient,
        DurabilityKind.PERSISTENT: P.Durability.Persistent,
    }[p.kind],
    DurabilityService: _durability_service,
    Presentation: _presentation,
    Deadline: lambda p: P.Deadline(deadline=to_nanos(p.period)),
    LatencyBudget: lambda p: P.LatencyBudget(budget=to_nanos(p.duration)),
    Ownership: lambda p: (
        P.Ownership.Exclusive if p.kind is OwnershipKind.EXCLUSIVE else P.Ownership.Shared
    ),
    OwnershipStrength: lambda p: P.OwnershipStrength(strength=p.value),
    Liveliness: _liveliness,
    TimeBasedFilter: lambda p: P.TimeBasedFilter(filter_time=to_nanos(p.minimum_separation)),
    Partition: lambda p: P.Partition(partitions=list(p.names)) if p.names else None,
    Reliability: _reliability,
    TransportPriority: lambda p: P.TransportPriority(priority=p.value),
    Lifespan: lambda p: P.Lifespan(lifespan=to_nanos(p.duration)),
    DestinationOrder: lambda p: (
        P.DestinationOrder.BySourceTimestamp
        if p.kind is DestinationOrderKind.BY_SOURCE_TIMESTAMP
        else P.DestinationOrder.ByReceptionTimestamp
    ),
    History: _history,
    ResourceLimits: lambda p: P.ResourceLimits(
        max_samples=p.max_samples,
        max_instances=p.max_instances,
        max_samples_per_instance=p.max_samples_per_instance,
    ),
    WriterDataLifecycle: lambda p: P.WriterDataLifecycle(
        autodispose=p.autodispose_unregistered_instances
    ),
    ReaderDataLifecycle: lambda p: P.ReaderDataLifecycle(
        autopurge_nowriter_samples_delay=to_nanos(p.autopurge_nowriter_samples_delay),
        autopurge_disposed_samples_delay=to_nanos(p.autopurge_disposed_samples_delay),
    ),
    IgnoreLocal: lambda p: {
        IgnoreLocalKind.NOTHING: P.IgnoreLocal.Nothing,
        IgnoreLocalKind.PARTICIPANT: P.IgnoreLocal.Participant,
        IgnoreLocalKind.PROCESS: P.IgnoreLocal.Process,
    }[p.kind],
    DataRepresentation: lambda p: _data_representation(p) if p.values else None,
    TypeConsistencyEnforcement: _type_consistency,
    EntityName: lambda p: P.EntityName(name=p.name) if p.name else None,
    Properties: lambda p: [
        P.Property(e.name, e.value, propagate=e.propagate)
        if isinstance(e.value, str)
        else P.BinaryProperty(e.name, e.value, propagate=e.propagate)
        for e in p.entries
    ],
    # Not in the binding: EntityFactory (dcps enables every entity on creation
    # and refuses autoenable_created_entities=False) and SubscriptionKeys
    # (implemented by the dcps reader).
}


def to_cyclone(qos: QosSet) -> cq.Qos:
    """The ``cyclonedds`` QoS for a dcps QoS set (the binding's class for that entity kind).

    Every applicable policy is set to its effective value (explicit or the
    DDS default for the kind), so Cyclone's own defaults and its implicit
    merge of the topic QoS into readers/writers do not leak in. Exceptions:
    DataRepresentation, TypeConsistencyEnforcement and EntityName are only
    set when given (Cyclone then chooses from the topic type), so is
    Properties, an empty
    Partition means Cyclone's default partition, and EntityFactory and
    SubscriptionKeys are not Cyclone policies: the dcps reader implements
    SubscriptionKeys; dcps enables every entity when it is created, so only
    the default EntityFactory is accepted by the entities.

    **TRANSIENT_LOCAL on Cyclone DDS:** a TRANSIENT_LOCAL writer keeps for late
    joiners only what ``DurabilityService.history`` allows (keep-last 1 by
    default), not what ``History`` says. So for a writer or topic QoS with
    durability TRANSIENT_LOCAL (or stronger) and no explicit
    DurabilityService, the Cyclone DurabilityService takes its history and
    limits from the set's History and ResourceLimits: a late joiner gets
    what the DDS specification promises (the writer's history).
    """
    if not isinstance(qos, QosSet):
        raise BadParameterError(f"to_cyclone takes a dcps QoS set, got {qos!r}")
    policies: list[Any] = []
    for policy_class in qos.applicable():
        if policy_class in _ONLY_IF_SET and not qos.is_set(policy_class):
            continue
        convert = _TO.get(policy_class)
        if convert is None:
            continue
        policy = qos[policy_class]
        if policy_class is DurabilityService and not qos.is_set(DurabilityService):
            policy = _durability_service_for(qos)
        converted = convert(policy)
        if isinstance(converted, list):
            policies.extend(converted)
        elif converted is not None:
            policies.append(converted)
    return _CYCLONE_SET[type(qos)](*policies)


def _durability_service_for(qos: QosSet) -> DurabilityService:
    """The implied DurabilityService: the default, or the history's for TRANSIENT_LOCAL+."""
    service = qos[DurabilityService]
    if qos[Durability].kind is DurabilityKind.VOLATILE:
        return service
    limits = qos[ResourceLimits]
    return service.with_(
        history=qos[History],
        max_samples=limits.max_samples,
        max_instances=limits.max_instances,
        max_samples_per_instance=limits.max_samples_per_instance,
    )


def _from_history(policy: Any) -> History:
    if policy == P.History.KeepAll:
        return History.KEEP_ALL
    return History.keep_last(policy.depth)


def _scope(policy: Any) -> str:
    return str(policy.__scope__).split("<")[0]


def _from_presentation(policy: Any) -> Presentation:
    scope = {
        "Instance": PresentationAccessScope.INSTANCE,
        "Topic": PresentationAccessScope.TOPIC,
        "Group": PresentationAccessScope.GROUP,
    }[type(policy).__name__.rsplit(".", 1)[-1]]
    return Presentation(scope, policy.coherent_access, policy.ordered_access)


def _from_liveliness(policy: Any) -> Liveliness:
    kind = {
        "Automatic": LivelinessKind.AUTOMATIC,
        "ManualByParticipant": LivelinessKind.MANUAL_BY_PARTICIPANT,
        "ManualByTopic": LivelinessKind.MANUAL_BY_TOPIC,
    }[type(policy).__name__.rsplit(".", 1)[-1]]
    return Liveliness(kind, from_nanos(policy.lease_duration))


def _from_type_consistency(policy: Any) -> TypeConsistencyEnforcement:
    if isinstance(policy, P.TypeConsistency.DisallowTypeCoercion):
        return TypeConsistencyEnforcement(
            TypeConsistencyKind.DISALLOW_TYPE_COERCION,
            force_type_validation=policy.force_type_validation,
        )
    return TypeConsistencyEnforcement(
        TypeConsistencyKind.ALLOW_TYPE_COERCION,
        ignore_sequence_bounds=policy.ignore_sequence_bounds,
        ignore_string_bounds=policy.ignore_string_bounds,
        ignore_member_names=policy.ignore_member_names,
        prevent_type_widening=policy.prevent_type_widening,
        force_type_validation=policy.force_type_validation,
    )


def _from_data_representation(policy: Any) -> DataRepresentation:
    values = []
    if policy.use_cdrv0_representation:
        values.append(DataRepresentationId.XCDR1)
    if policy.use_xcdrv2_representation:
        values.append(DataRepresentationId.XCDR2)
    return DataRepresentation(values)


_FROM: dict[str, Callable[[Any], QosPolicy]] = {
    "Userdata": lambda p: UserData(p.data),
    "Topicdata": lambda p: TopicData(p.data),
    "Groupdata": lambda p: GroupData(p.data),
    "Durability": lambda p: {
        P.Durability.Volatile: Durability.VOLATILE,
        P.Durability.TransientLocal: Durability.TRANSIENT_LOCAL,
        P.Durability.Transient: Durability.TRANSIENT,
        P.Durability.Persistent: Durability.PERSISTENT,
    }[p],
    "DurabilityService": lambda p: DurabilityService(
        from_nanos(p.cleanup_delay),
        _from_history(p.history),
        p.max_samples,
        p.max_instances,
        p.max_samples_per_instance,
    ),
    "PresentationAccessScope": _from_presentation,
    "Deadline": lambda p: Deadline(from_nanos(p.deadline)),
    "LatencyBudget": lambda p: LatencyBudget(from_nanos(p.budget)),
    "Ownership": lambda p: Ownership.EXCLUSIVE if p == P.Ownership.Exclusive else Ownership.SHARED,
    "OwnershipStrength": lambda p: OwnershipStrength(p.strength),
    "Liveliness": _from_liveliness,
    "TimeBasedFilter": lambda p: TimeBasedFilter(from_nanos(p.filter_time)),
    "Partition": lambda p: Partition(p.partitions),
    "Reliability": lambda p: (
        Reliability.BEST_EFFORT
        if p == P.Reliability.BestEffort
        else Reliability.reliable(from_nanos(p.max_blocking_time))
    ),
    "TransportPriority": lambda p: TransportPriority(p.priority),
    "Lifespan": lambda p: Lifespan(from_nanos(p.lifespan)),
    "DestinationOrder": lambda p: (
        DestinationOrder.BY_SOURCE_TIMESTAMP
        if p == P.DestinationOrder.BySourceTimestamp
        else DestinationOrder.BY_RECEPTION_TIMESTAMP
    ),
    "History": _from_history,
    "ResourceLimits": lambda p: ResourceLimits(
        p.max_samples, p.max_instances, p.max_samples_per_instance
    ),
    "WriterDataLifecycle": lambda p: WriterDataLifecycle(bool(p.autodispose)),
    "ReaderDataLifecycle": lambda p: ReaderDataLifecycle(
        from_nanos(p.autopurge_nowriter_samples_delay),
        from_nanos(p.autopurge_disposed_samples_delay),
    ),
    "IgnoreLocal": lambda p: {
        P.IgnoreLocal.Nothing: IgnoreLocal.NOTHING,
        P.IgnoreLocal.Participant: IgnoreLocal.PARTICIPANT,
        P.IgnoreLocal.Process: IgnoreLocal.PROCESS,
    }[p],
    "TypeConsistency": _from_type_consistency,
    "DataRepresentation": _from_data_representation,
    "EntityName": lambda p: EntityName(p.name),
}


def from_cyclone(cyclone_qos: cq.Qos, kind: type[QosSet] | str) -> QosSet:
    """A dcps QoS set of ``kind`` from a ``cyclonedds`` QoS (e.g. ``entity.get_qos()``).

    ``kind`` is a QoS set class (``DataReaderQos``) or a name (``"reader"``,
    ``"writer"``, ``"topic"``, ``"publisher"``, ``"subscriber"``,
    ``"participant"``). Policies Cyclone reports that do not apply to the kind
    (Cyclone keeps e.g. Presentation on readers) are left out; the binding's
    Property and BinaryProperty policies are gathered into one ``Properties``.
    """
    set_class = _resolve_kind(kind)
    if not isinstance(cyclone_qos, cq.Qos):
        raise BadParameterError(f"from_cyclone takes a cyclonedds Qos, got {cyclone_qos!r}")
    policies: list[QosPolicy] = []
    properties: list[Property] = []
    for cyclone_policy in cyclone_qos:
        if _scope(cyclone_policy) in ("Property", "BinaryProperty"):
            properties.append(
                Property(cyclone_policy.key, cyclone_policy.value, bool(cyclone_policy.propagate))
            )
            continue
        convert = _FROM.get(_scope(cyclone_policy))
        if convert is None:
            continue
        policy = convert(cyclone_policy)
        if set_class.applies(type(policy)):
            policies.append(policy)
    if properties and set_class.applies(Properties):
        policies.append(Properties(properties))
    return set_class(*policies)


def _resolve_kind(kind: type[QosSet] | str) -> type[QosSet]:
    if isinstance(kind, str):
        found = _KIND_NAMES.get(kind.lower().replace("_", ""))
        if found is None:
            raise BadParameterError(
                f"unknown entity kind {kind!r} (one of {', '.join(sorted(_KIND_NAMES))})"
            )
        return found
    if isinstance(kind, type) and issubclass(kind, QosSet) and kind in _CYCLONE_SET:
        return kind
    raise BadParameterError(f"{kind!r} is not a QoS set class")
