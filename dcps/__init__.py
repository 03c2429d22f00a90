"""dcps: data-centric publish/subscribe with QoS policies, on Eclipse Cyclone DDS."""

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
    "AlreadyClosedError",
    "BadParameterError",
    "DcpsError",
    "DcpsTimeoutError",
    "FilterSyntaxError",
    "IdlError",
    "IdlSyntaxError",
    "IllegalOperationError",
    "ImmutablePolicyError",
    "IncompatibleQosError",
    "InconsistentPolicyError",
    "NotEnabledError",
    "OutOfResourcesError",
    "PreconditionNotMetError",
    "UnsupportedError",
]
