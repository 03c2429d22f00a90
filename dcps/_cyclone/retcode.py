"""One place that turns Cyclone DDS return codes into dcps exceptions."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from cyclonedds.core import DDSException

from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    IllegalOperationError,
    ImmutablePolicyError,
    InconsistentPolicyError,
    NotEnabledError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

_BY_CODE: dict[int, type[DcpsError]] = {
    DDSException.DDS_RETCODE_BAD_PARAMETER: BadParameterError,
    DDSException.DDS_RETCODE_UNSUPPORTED: UnsupportedError,
    DDSException.DDS_RETCODE_PRECONDITION_NOT_MET: PreconditionNotMetError,
    DDSException.DDS_RETCODE_OUT_OF_RESOURCES: OutOfResourcesError,
    DDSException.DDS_RETCODE_NOT_ENABLED: NotEnabledError,
    DDSException.DDS_RETCODE_IMMUTABLE_POLICY: ImmutablePolicyError,
    DDSException.DDS_RETCODE_INCONSISTENT_POLICY: InconsistentPolicyError,
    DDSException.DDS_RETCODE_ALREADY_DELETED: AlreadyClosedError,
    DDSException.DDS_RETCODE_TIMEOUT: DcpsTimeoutError,
    DDSException.DDS_RETCODE_ILLEGAL_OPERATION: IllegalOperationError,
}


def error_for(code: int, action: str) -> DcpsError:
    """The most specific dcps exception for a (negative) Cyclone return code."""
    cls = _BY_CODE.get(code, DcpsError)
    name = DDSException.error_message_mapping.get(code, ("DDS_RETCODE_ERROR",))[0]
    return cls(f"{action} failed: {name} ({code})")


@contextmanager
def cyclone_call(action: str) -> Iterator[None]:
    """Translate a ``DDSException`` raised inside the block into a dcps error."""
    try:
        yield
    except DDSException as exc:
        raise error_for(exc.code, action) from exc
