"""Communication statuses (DDS 1.4, 2.2.4.1) as immutable values."""

from __future__ import annotations

import enum
from typing import Any, TypeVar

import attrs

import qos
from idl._public import show_as

S = TypeVar("S")


class StatusKind(enum.IntFlag):
    """Status bits, for status conditions and listener masks."""

    INCONSISTENT_TOPIC = 1
    OFFERED_DEADLINE_MISSED = 2
    REQUESTED_DEADLINE_MISSED = 4
    OFFERED_INCOMPATIBLE_QOS = 8
    REQUESTED_INCOMPATIBLE_QOS = 16
    SAMPLE_LOST = 32
    SAMPLE_REJECTED = 64
    DATA_ON_READERS = 128
    DATA_AVAILABLE = 256
    LIVELINESS_LOST = 512
    LIVELINESS_CHANGED = 1024
    PUBLICATION_MATCHED = 2048
    SUBSCRIPTION_MATCHED = 4096


class SampleRejectedReason(enum.IntEnum):
    """Why the last sample was rejected."""

    NOT_REJECTED = 0
    REJECTED_BY_INSTANCES_LIMIT = 1
    REJECTED_BY_SAMPLES_LIMIT = 2
    REJECTED_BY_SAMPLES_PER_INSTANCE_LIMIT = 3


_U64 = (1 << 64) - 1


def from_cyclone(cls: type[S], struct: Any) -> S:
    """A status value of class ``cls`` from the binding's status struct."""
    values = {f.name: getattr(struct, f.name) for f in attrs.fields(cls)}  # type: ignore[arg-type]
    for name, value in values.items():
        if name.endswith("_handle"):  # the binding declares handles signed; they are uint64
            values[name] = value & _U64
    return cls(**values)


@attrs.frozen
class InconsistentTopicStatus:
    """Another participant announced this topic name with another type."""

    total_count: int
    total_count_change: int


@attrs.frozen
class LivelinessLostStatus:
    """This writer failed to assert its liveliness in time."""

    total_count: int
    total_count_change: int


@attrs.frozen
class LivelinessChangedStatus:
    """A matched writer became alive or not alive."""

    alive_count: int
    not_alive_count: int
    alive_count_change: int
    not_alive_count_change: int
    last_publication_handle: int


@attrs.frozen
class OfferedDeadlineMissedStatus:
    """This writer did not write an instance within its deadline period."""

    total_count: int
    total_count_change: int
    last_instance_handle: int


@attrs.frozen
class RequestedDeadlineMissedStatus:
    """This reader did not receive an instance within its deadline period."""

    total_count: int
    total_count_change: int
    last_instance_handle: int


def _policy_name(policy_id: int) -> str:
    return "" if policy_id == 0 else qos.policy_class(policy_id).__name__


@attrs.frozen
class OfferedIncompatibleQosStatus:
    """A reader requested a QoS this writer does not offer."""

    total_count: int
    total_count_change: int
    last_policy_id: int

    @property
    def last_policy_name(self) -> str:
        """Name of the last incompatible policy, e.g. ``"Reliability"``."""
        return _policy_name(self.last_policy_id)


@attrs.frozen
class RequestedIncompatibleQosStatus:
    """A writer offered a QoS this reader cannot accept."""

    total_count: int
    total_count_change: int
    last_policy_id: int

    @property
    def last_policy_name(self) -> str:
        """Name of the last incompatible policy, e.g. ``"Reliability"``."""
        return _policy_name(self.last_policy_id)


@attrs.frozen
class SampleLostStatus:
    """Samples were lost before reaching this reader."""

    total_count: int
    total_count_change: int


@attrs.frozen
class SampleRejectedStatus:
    """Samples were rejected by this reader's resource limits."""

    total_count: int
    total_count_change: int
    last_reason: SampleRejectedReason = attrs.field(converter=SampleRejectedReason)
    last_instance_handle: int


@attrs.frozen
class PublicationMatchedStatus:
    """This writer matched or unmatched a reader."""

    total_count: int
    total_count_change: int
    current_count: int
    current_count_change: int
    last_subscription_handle: int


@attrs.frozen
class SubscriptionMatchedStatus:
    """This reader matched or unmatched a writer."""

    total_count: int
    total_count_change: int
    current_count: int
    current_count_change: int
    last_publication_handle: int


show_as(
    "dcps",
    InconsistentTopicStatus,
    LivelinessChangedStatus,
    LivelinessLostStatus,
    OfferedDeadlineMissedStatus,
    OfferedIncompatibleQosStatus,
    PublicationMatchedStatus,
    RequestedDeadlineMissedStatus,
    RequestedIncompatibleQosStatus,
    SampleLostStatus,
    SampleRejectedReason,
    SampleRejectedStatus,
    StatusKind,
    SubscriptionMatchedStatus,
)
