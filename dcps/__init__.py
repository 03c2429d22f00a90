"""dcps: data-centric publish/subscribe with QoS policies, on Eclipse Cyclone DDS.

The entities are named as the DDS specification names them::

    participant = dcps.DomainParticipant(0)
    topic = dcps.Topic(participant, "Readings", Reading)
    writer = dcps.DataWriter(participant, topic, qos=qos.profile("sensor_data").writer)
    reader = dcps.DataReader(participant, topic)
"""

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
from dcps._reader import LENGTH_UNLIMITED, DataReader
from dcps._sample import InstanceState, Sample, SampleInfo, SampleState, ViewState
from dcps._sql import ContentFilter, QueryExpression
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
    NotEnabledError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

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
    "Topic",
    "UnsupportedError",
    "ViewState",
    "WaitSet",
]
