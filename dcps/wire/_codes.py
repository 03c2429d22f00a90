"""Numbers on the wire: request kinds, seek modes, commit statuses and error codes.

Every value here is an explicit integer that never changes meaning: a new
kind, status or error gets a new number, and an old number is never reused
(``tests/wire/test_wire_codes.py`` pins them all). Nothing depends on the
order in which members are declared.
"""

from __future__ import annotations

import enum

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

__all__ = [
    "CommitStatus",
    "ErrorCode",
    "Op",
    "SeekMode",
    "error_code",
    "error_from_code",
]


class Op(enum.IntEnum):
    """Store request kinds (``Request.op``)."""

    PING = 0
    ENSURE_TOPIC = 1
    PUBLISH = 2
    FETCH = 3
    COMMIT = 4
    SEEK = 5
    STATE = 6
    JOIN = 7
    LEAVE = 8
    HEARTBEAT = 9
    DESTROY_GROUP = 10
    # durable subscriptions (dcps/wire/_durables.py): 20-39
    DURABLE_SUBSCRIBE = 20
    DURABLE_POLL = 21
    DURABLE_ACK = 22
    DURABLE_ROLLBACK = 23
    DURABLE_CLOSE = 24
    DURABLE_UNSUBSCRIBE = 25
    DURABLE_INFO = 26
    # key-value maps (dcps/wire/_maps.py): 40-49
    MAP_OPEN = 40
    MAP_PUT = 41
    MAP_GET = 42
    MAP_DELETE = 43
    MAP_LIST = 44
    MAP_DROP = 45
    MAP_CHANGES = 46
    # queues (dcps/wire/_queues.py): 50-59
    QUEUE_PUBLISH = 50
    QUEUE_SUBSCRIBE = 51
    QUEUE_RECEIVE = 52
    QUEUE_ACK = 53
    QUEUE_LEAVE = 54
    QUEUE_DELETE = 55
    QUEUE_STATE = 56
    QUEUE_HEARTBEAT = 57
    # store administration (dcps/wire/_admin.py): 70-89
    DESCRIBE_TOPICS = 70
    DESCRIBE_GROUPS = 71
    RESET_GROUP = 72
    DELETE_GROUP = 73
    STORE_STATUS = 74
    DESCRIBE_DURABLES = 75
    DELETE_DURABLE = 76
    RESET_DURABLE = 77
    DESCRIBE_QUEUES = 78
    DELETE_QUEUE = 79
    DESCRIBE_MAPS = 80
    DELETE_MAP = 81
    HISTORY_FETCH = 90  # the durability service (dcps/wire/_durability.py)
    # 60-69: staged publishing (two-phase commit of the Spark sink, _staging.py)
    STAGE = 60
    COMMIT_STAGED = 61
    ABORT_STAGED = 62


class SeekMode(enum.IntEnum):
    """Where a SEEK moves each channel to: a position, a timestamp, the head or the tail."""

    POSITION = 0
    TIMESTAMP = 1
    HEAD = 2
    TAIL = 3


class CommitStatus(enum.Enum):
    """The outcome of committing one channel's position.

    Shared by the store (which decides it) and its clients (which report it);
    it travels as :attr:`code`.
    """

    COMMITTED = "committed"
    """The position (and every earlier one in the channel) is now committed."""
    ALREADY_COMMITTED = "already_committed"
    """The group had already committed this position or a later one."""
    NOTHING_TO_COMMIT = "nothing_to_commit"
    """The channel holds nothing at or before the position (empty, or removed)."""
    REJECTED = "rejected"
    """The position does not exist yet in the channel (beyond its tail)."""
    UNOWNED = "unowned"
    """The committing subscriber does not own the channel."""

    @property
    def code(self) -> int:
        """The status's number on the wire."""
        return _COMMIT_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> CommitStatus:
        """The status a wire number stands for; an unknown number raises ``BadParameterError``."""
        try:
            return _COMMIT_STATUSES[code]
        except KeyError:
            raise BadParameterError(f"unknown commit status code {code!r} on the wire") from None


_COMMIT_CODES: dict[CommitStatus, int] = {
    CommitStatus.COMMITTED: 0,
    CommitStatus.ALREADY_COMMITTED: 1,
    CommitStatus.NOTHING_TO_COMMIT: 2,
    CommitStatus.REJECTED: 3,
    CommitStatus.UNOWNED: 4,
}
_COMMIT_STATUSES = {code: status for status, code in _COMMIT_CODES.items()}


class ErrorCode(enum.IntEnum):
    """``Reply.status``: 0 for success, otherwise the dcps error class of the failure."""

    OK = 0
    ERROR = 1
    BAD_PARAMETER = 2
    PRECONDITION_NOT_MET = 3
    UNSUPPORTED = 4
    ILLEGAL_OPERATION = 5
    OUT_OF_RESOURCES = 6
    INCONSISTENT_POLICY = 7
    ALREADY_CLOSED = 8
    TIMEOUT = 9
    IMMUTABLE_POLICY = 10
    INCOMPATIBLE_QOS = 11
    NOT_ENABLED = 12
    IDL = 13
    IDL_SYNTAX = 14
    FILTER_SYNTAX = 15
    INVALID_DESTINATION = 16
    INVALID_SELECTOR = 17


_ERROR_CLASSES: dict[ErrorCode, type[DcpsError]] = {
    ErrorCode.ERROR: DcpsError,
    ErrorCode.BAD_PARAMETER: BadParameterError,
    ErrorCode.PRECONDITION_NOT_MET: PreconditionNotMetError,
    ErrorCode.UNSUPPORTED: UnsupportedError,
    ErrorCode.ILLEGAL_OPERATION: IllegalOperationError,
    ErrorCode.OUT_OF_RESOURCES: OutOfResourcesError,
    ErrorCode.INCONSISTENT_POLICY: InconsistentPolicyError,
    ErrorCode.ALREADY_CLOSED: AlreadyClosedError,
    ErrorCode.TIMEOUT: DcpsTimeoutError,
    ErrorCode.IMMUTABLE_POLICY: ImmutablePolicyError,
    ErrorCode.INCOMPATIBLE_QOS: IncompatibleQosError,
    ErrorCode.NOT_ENABLED: NotEnabledError,
    ErrorCode.IDL: IdlError,
    ErrorCode.IDL_SYNTAX: IdlSyntaxError,
    ErrorCode.FILTER_SYNTAX: FilterSyntaxError,
    ErrorCode.INVALID_DESTINATION: InvalidDestinationError,
    ErrorCode.INVALID_SELECTOR: InvalidSelectorError,
}
_ERROR_CODES = {cls: code for code, cls in _ERROR_CLASSES.items()}


def error_code(exc: BaseException) -> ErrorCode:
    """The wire code of an exception: its most specific dcps class (``ERROR`` for others)."""
    for cls in type(exc).__mro__:
        code = _ERROR_CODES.get(cls)
        if code is not None:
            return code
    return ErrorCode.ERROR


def error_from_code(code: int, message: str) -> DcpsError:
    """The dcps error a failed reply's ``status`` names (the base class for unknown codes)."""
    try:
        cls = _ERROR_CLASSES[ErrorCode(code)]
    except (ValueError, KeyError):
        cls = DcpsError
    try:
        return cls(message)
    except TypeError:  # a class with structured arguments: the message already says it all
        error = cls.__new__(cls)
        Exception.__init__(error, message)
        return error
