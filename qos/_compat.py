"""Request/offered (RxO) compatibility between a writer's and a reader's QoS."""

from __future__ import annotations

from datetime import timedelta

import attrs

from idl._errors import BadParameterError, IncompatibleQosError
from qos._policies import (
    DataRepresentation,
    Deadline,
    DestinationOrder,
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
    Properties,
    QosPolicy,
    ReaderDataLifecycle,
    Reliability,
    ResourceLimits,
    TimeBasedFilter,
    TopicData,
    TransportPriority,
    TypeConsistencyEnforcement,
    UserData,
    WriterDataLifecycle,
)
from qos._sets import DataReaderQos, DataWriterQos, PublisherQos, SubscriberQos

__all__ = ["Incompatibility", "check_compatible", "compatibility", "policy_class", "policy_id"]


@attrs.frozen
class Incompatibility:
    """One reason a writer and a reader do not match: the policy and why."""

    policy: type[QosPolicy]
    reason: str

    def __str__(self) -> str:
        return f"{self.policy.__name__}: {self.reason}"


def _fmt(duration: timedelta) -> str:
    return "INFINITE" if duration == timedelta.max else str(duration)


def compatibility(
    offered: DataWriterQos,
    requested: DataReaderQos,
    publisher: PublisherQos | None = None,
    subscriber: SubscriberQos | None = None,
) -> list[Incompatibility]:
    """Every way the writer's offered QoS fails the reader's requested QoS (empty: compatible).

    Covers the DDS 1.4 RxO policies (Durability, Presentation, Deadline,
    LatencyBudget, Ownership, Liveliness, Reliability, DestinationOrder) and
    DDS-XTypes DataRepresentation. ``publisher``/``subscriber`` default to
    their kind's default QoS (used for Presentation only).
    """
    if not isinstance(offered, DataWriterQos):
        raise BadParameterError(f"offered must be a DataWriterQos, got {offered!r}")
    if not isinstance(requested, DataReaderQos):
        raise BadParameterError(f"requested must be a DataReaderQos, got {requested!r}")
    publisher = PublisherQos() if publisher is None else publisher
    subscriber = SubscriberQos() if subscriber is None else subscriber
    found: list[Incompatibility] = []

    def ordered(policy: type[QosPolicy], offer: object, request: object, name: str) -> None:
        offer_kind = getattr(offer, name)
        request_kind = getattr(request, name)
        if offer_kind.value < request_kind.value:
            found.append(
                Incompatibility(
                    policy,
                    f"reader requests {request_kind.name}, writer offers {offer_kind.name}",
                )
            )

    ordered(Durability, offered[Durability], requested[Durability], "kind")

    pub, sub = publisher[Presentation], subscriber[Presentation]
    if pub.access_scope.value < sub.access_scope.value:
        found.append(
            Incompatibility(
                Presentation,
                f"subscriber requests access_scope {sub.access_scope.name}, "
                f"publisher offers {pub.access_scope.name}",
            )
        )
    for flag in ("coherent_access", "ordered_access"):
        if getattr(sub, flag) and not getattr(pub, flag):
            found.append(
                Incompatibility(
                    Presentation, f"subscriber requests {flag}, publisher does not offer it"
                )
            )

    for policy, field in ((Deadline, "period"), (LatencyBudget, "duration")):
        offer_d, request_d = getattr(offered[policy], field), getattr(requested[policy], field)
        if offer_d > request_d:
            found.append(
                Incompatibility(
                    policy,
                    f"reader requests {field} {_fmt(request_d)}, writer offers {_fmt(offer_d)} "
                    "(must be no longer)",
                )
            )

    if offered[Ownership].kind is not requested[Ownership].kind:
        found.append(
            Incompatibility(
                Ownership,
                f"reader requests {requested[Ownership].kind.name}, "
                f"writer offers {offered[Ownership].kind.name}",
            )
        )

    ordered(Liveliness, offered[Liveliness], requested[Liveliness], "kind")
    offer_lease = offered[Liveliness].lease_duration
    request_lease = requested[Liveliness].lease_duration
    if offer_lease > request_lease:
        found.append(
            Incompatibility(
                Liveliness,
                f"reader requests lease_duration {_fmt(request_lease)}, writer offers "
                f"{_fmt(offer_lease)} (must be no longer)",
            )
        )

    ordered(Reliability, offered[Reliability], requested[Reliability], "kind")
    ordered(DestinationOrder, offered[DestinationOrder], requested[DestinationOrder], "kind")

    writes = offered[DataRepresentation].values
    reads = requested[DataRepresentation].values
    if writes and reads and writes[0] not in reads:
        found.append(
            Incompatibility(
                DataRepresentation,
                f"reader accepts {', '.join(v.name for v in reads)}, writer uses {writes[0].name}",
            )
        )
    return found


def check_compatible(
    offered: DataWriterQos,
    requested: DataReaderQos,
    publisher: PublisherQos | None = None,
    subscriber: SubscriberQos | None = None,
) -> None:
    """Raise :class:`IncompatibleQosError` listing every reason the QoS do not match."""
    reasons = compatibility(offered, requested, publisher, subscriber)
    if reasons:
        raise IncompatibleQosError(
            "writer and reader QoS are incompatible: " + "; ".join(str(r) for r in reasons)
        )


# Cyclone DDS's dds_qos_policy_id_t (dds/ddsc/dds_public_qosdefs.h).
_BY_ID: dict[int, type[QosPolicy]] = {
    1: UserData,
    2: Durability,
    3: Presentation,
    4: Deadline,
    5: LatencyBudget,
    6: Ownership,
    7: OwnershipStrength,
    8: Liveliness,
    9: TimeBasedFilter,
    10: Partition,
    11: Reliability,
    12: DestinationOrder,
    13: History,
    14: ResourceLimits,
    15: EntityFactory,
    16: WriterDataLifecycle,
    17: ReaderDataLifecycle,
    18: TopicData,
    19: GroupData,
    20: TransportPriority,
    21: Lifespan,
    22: DurabilityService,
    23: Properties,
    24: TypeConsistencyEnforcement,
    25: DataRepresentation,
}
_ID_OF = {cls: policy_id for policy_id, cls in _BY_ID.items()}


def policy_class(cyclone_policy_id: int) -> type[QosPolicy]:
    """The policy class for a Cyclone DDS policy id (e.g. ``last_policy_id`` of
    the requested/offered incompatible QoS status)."""
    found = _BY_ID.get(cyclone_policy_id)
    if found is None:
        raise BadParameterError(
            f"no dcps QoS policy has Cyclone DDS policy id {cyclone_policy_id!r}"
        )
    return found


def policy_id(policy: type[QosPolicy] | QosPolicy) -> int:
    """The Cyclone DDS policy id of a policy class (or policy)."""
    cls = policy if isinstance(policy, type) else type(policy)
    found = _ID_OF.get(cls)
    if found is None:
        raise BadParameterError(f"{cls.__name__} has no Cyclone DDS policy id")
    return found
