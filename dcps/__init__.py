"""dcps: data-centric publish/subscribe with QoS policies, on Eclipse Cyclone DDS.

The entities are named as the DDS specification names them::

    participant = dcps.DomainParticipant(0)
    topic = dcps.Topic(participant, "Readings", Reading)
    writer = dcps.DataWriter(participant, topic, qos=qos.profile("sensor_data").writer)
    reader = dcps.DataReader(participant, topic)

The entity classes are imported on first use (PEP 562), so modules that need
only part of the package (the Spark worker reading a store file, the error
types) do not pay for Cyclone DDS entities, QoS and the SQL grammar.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

# light (idl's errors and the standard library only): imported at once, not lazily
from dcps._timeout import Timeout
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    FilterSyntaxError,
    IdlError,
    IdlSyntaxError,
    IllegalOperationError,
    ImmutablePolicyError,
    IncompatibleQosError,
    InconsistentPolicyError,
    InvalidDestinationError,
    InvalidSelectorError,
    NotEnabledError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

if _typing.TYPE_CHECKING:
    from dcps._condition import (
        Condition,
        GuardCondition,
        QueryCondition,
        ReadCondition,
        StatusCondition,
        WaitSet,
    )
    from dcps._entity import Entity
    from dcps._listener import Listener
    from dcps._network import NetworkConfig, NetworkInterface
    from dcps._participant import DomainParticipant
    from dcps._publisher import Publisher, Subscriber
    from dcps._reader import DataReader
    from dcps._sample import InstanceState, Sample, SampleInfo, SampleState, ViewState
    from dcps._status import (
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
    from dcps._topic import ContentFilteredTopic, Topic
    from dcps._writer import DataWriter
    from dcps.sql._filter import ContentFilter, QueryExpression
    from qos import LENGTH_UNLIMITED

# public name -> defining module, imported by __getattr__ on first access
_LAZY: dict[str, str] = {
    "Condition": "dcps._condition",
    "ContentFilter": "dcps.sql._filter",
    "ContentFilteredTopic": "dcps._topic",
    "DataReader": "dcps._reader",
    "DataWriter": "dcps._writer",
    "DomainParticipant": "dcps._participant",
    "Entity": "dcps._entity",
    "GuardCondition": "dcps._condition",
    "InconsistentTopicStatus": "dcps._status",
    "InstanceState": "dcps._sample",
    "LENGTH_UNLIMITED": "qos",
    "Listener": "dcps._listener",
    "LivelinessChangedStatus": "dcps._status",
    "LivelinessLostStatus": "dcps._status",
    "NetworkConfig": "dcps._network",
    "NetworkInterface": "dcps._network",
    "OfferedDeadlineMissedStatus": "dcps._status",
    "OfferedIncompatibleQosStatus": "dcps._status",
    "PublicationMatchedStatus": "dcps._status",
    "Publisher": "dcps._publisher",
    "QueryCondition": "dcps._condition",
    "QueryExpression": "dcps.sql._filter",
    "ReadCondition": "dcps._condition",
    "RequestedDeadlineMissedStatus": "dcps._status",
    "RequestedIncompatibleQosStatus": "dcps._status",
    "Sample": "dcps._sample",
    "SampleInfo": "dcps._sample",
    "SampleLostStatus": "dcps._status",
    "SampleRejectedReason": "dcps._status",
    "SampleRejectedStatus": "dcps._status",
    "SampleState": "dcps._sample",
    "StatusCondition": "dcps._condition",
    "StatusKind": "dcps._status",
    "Subscriber": "dcps._publisher",
    "SubscriptionMatchedStatus": "dcps._status",
    "Topic": "dcps._topic",
    "ViewState": "dcps._sample",
    "WaitSet": "dcps._condition",
}

__all__ = [
    "LENGTH_UNLIMITED",
    "AlreadyClosedError",
    "BadParameterError",
    "Condition",
    "ContentFilter",
    "ContentFilteredTopic",
    "DataReader",
    "DataWriter",
    "DcpsError",
    "DcpsTimeoutError",
    "DomainParticipant",
    "Entity",
    "FilterSyntaxError",
    "GuardCondition",
    "IdlError",
    "IdlSyntaxError",
    "IllegalOperationError",
    "ImmutablePolicyError",
    "IncompatibleQosError",
    "InconsistentPolicyError",
    "InconsistentTopicStatus",
    "InstanceState",
    "InvalidDestinationError",
    "InvalidSelectorError",
    "Listener",
    "LivelinessChangedStatus",
    "LivelinessLostStatus",
    "NetworkConfig",
    "NetworkInterface",
    "NotEnabledError",
    "OfferedDeadlineMissedStatus",
    "OfferedIncompatibleQosStatus",
    "OutOfResourcesError",
    "PreconditionNotMetError",
    "PublicationMatchedStatus",
    "Publisher",
    "QueryCondition",
    "QueryExpression",
    "ReadCondition",
    "RequestedDeadlineMissedStatus",
    "RequestedIncompatibleQosStatus",
    "Sample",
    "SampleInfo",
    "SampleLostStatus",
    "SampleRejectedReason",
    "SampleRejectedStatus",
    "SampleState",
    "StatusCondition",
    "StatusKind",
    "Subscriber",
    "SubscriptionMatchedStatus",
    "Timeout",
    "Topic",
    "UnsupportedError",
    "ViewState",
    "WaitSet",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dcps' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
