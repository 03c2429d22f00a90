"""QoS policies as immutable values, per-entity QoS sets, profiles, and the
consistency and request/offered compatibility checks of DDS 1.4.

Policies are frozen attrs values validated at construction (a bad field raises
``BadParameterError`` naming policy and field); parameterless variants are
singletons (``Reliability.BEST_EFFORT``, ``Durability.TRANSIENT_LOCAL``,
``History.KEEP_ALL``); durations are ``datetime.timedelta`` with ``INFINITE``.

QoS sets (``DomainParticipantQos``, ``TopicQos``, ``PublisherQos``,
``SubscriberQos``, ``DataWriterQos``, ``DataReaderQos``) are immutable, hold
only policies that apply to their entity kind, return the kind's DDS default
for unset policies, and are checked for consistency when built::

    >>> from qos import DataReaderQos, History, Reliability
    >>> reader = DataReaderQos(Reliability.RELIABLE, History.keep_last(10))
    >>> reader[History].depth
    10
    >>> reader.with_(History.KEEP_ALL)[History] == History.KEEP_ALL
    True

Also here: ``check_change`` (immutable policies of enabled entities),
``compatibility``/``check_compatible`` (RxO matching), ``policy_class`` (Cyclone
policy ids), ``profile``/``load_profiles`` (named profiles from TOML, built-ins
in ``qos/profiles.toml``), and ``to_cyclone``/``from_cyclone`` (the binding's
``Qos``; see ``to_cyclone`` for the TRANSIENT_LOCAL history quirk).
"""

from idl._public import show_as as _show_as
from qos._compat import Incompatibility, check_compatible, compatibility, policy_class, policy_id
from qos._cyclone import from_cyclone, to_cyclone
from qos._duration import INFINITE
from qos._policies import (
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
    SubscriptionKeys,
    TimeBasedFilter,
    TopicData,
    TransportPriority,
    TypeConsistencyEnforcement,
    TypeConsistencyKind,
    UserData,
    WriterDataLifecycle,
)
from qos._profiles import Profile, ProfileLibrary, builtin_profiles, load_profiles, profile
from qos._sets import (
    DataReaderQos,
    DataWriterQos,
    DomainParticipantQos,
    PublisherQos,
    QosSet,
    SubscriberQos,
    TopicQos,
    check_change,
    keyword_name,
)

__all__ = [
    "INFINITE",
    "LENGTH_UNLIMITED",
    "DataReaderQos",
    "DataRepresentation",
    "DataRepresentationId",
    "DataWriterQos",
    "Deadline",
    "DestinationOrder",
    "DestinationOrderKind",
    "DomainParticipantQos",
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
    "Incompatibility",
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
    "Profile",
    "ProfileLibrary",
    "Properties",
    "Property",
    "PublisherQos",
    "QosPolicy",
    "QosSet",
    "ReaderDataLifecycle",
    "Reliability",
    "ReliabilityKind",
    "ResourceLimits",
    "SubscriberQos",
    "SubscriptionKeys",
    "TimeBasedFilter",
    "TopicData",
    "TopicQos",
    "TransportPriority",
    "TypeConsistencyEnforcement",
    "TypeConsistencyKind",
    "UserData",
    "WriterDataLifecycle",
    "builtin_profiles",
    "check_change",
    "check_compatible",
    "compatibility",
    "from_cyclone",
    "keyword_name",
    "load_profiles",
    "policy_class",
    "policy_id",
    "profile",
    "to_cyclone",
]

_show_as("qos", *(globals()[_name] for _name in __all__))
