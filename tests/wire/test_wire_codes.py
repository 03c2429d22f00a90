"""Every number on the wire is pinned: request kinds, seek modes, commit statuses, error codes."""

from __future__ import annotations

import inspect

import pytest

import idl._errors
from dcps.channels import CommitStatus as PublicCommitStatus
from dcps.wire._codes import (
    CommitStatus,
    ErrorCode,
    Op,
    SeekMode,
    error_code,
    error_from_code,
)
from dcps.wire._messages import Reply
from dcps.wire._replies import error_reply, raise_for_status
from idl._errors import (
    DcpsError,
    DcpsTimeoutError,
    FilterSyntaxError,
    IdlSyntaxError,
    PreconditionNotMetError,
)

ERROR_CLASSES = sorted(
    (
        cls
        for _, cls in inspect.getmembers(idl._errors, inspect.isclass)
        if issubclass(cls, DcpsError)
    ),
    key=lambda cls: cls.__name__,
)


class TestPinnedValues:
    def test_request_kinds(self) -> None:
        """Op values never move (a reordered enum must not change the protocol)."""
        assert {op.name: int(op) for op in Op} == {
            "PING": 0,
            "ENSURE_TOPIC": 1,
            "PUBLISH": 2,
            "FETCH": 3,
            "COMMIT": 4,
            "SEEK": 5,
            "STATE": 6,
            "JOIN": 7,
            "LEAVE": 8,
            "HEARTBEAT": 9,
            "DESTROY_GROUP": 10,
            "DURABLE_SUBSCRIBE": 20,
            "DURABLE_POLL": 21,
            "DURABLE_ACK": 22,
            "DURABLE_ROLLBACK": 23,
            "DURABLE_CLOSE": 24,
            "DURABLE_UNSUBSCRIBE": 25,
            "DURABLE_INFO": 26,
            "MAP_OPEN": 40,
            "MAP_PUT": 41,
            "MAP_GET": 42,
            "MAP_DELETE": 43,
            "MAP_LIST": 44,
            "MAP_DROP": 45,
            "MAP_CHANGES": 46,
            "QUEUE_PUBLISH": 50,
            "QUEUE_SUBSCRIBE": 51,
            "QUEUE_RECEIVE": 52,
            "QUEUE_ACK": 53,
            "QUEUE_LEAVE": 54,
            "QUEUE_DELETE": 55,
            "QUEUE_STATE": 56,
            "QUEUE_HEARTBEAT": 57,
            "DESCRIBE_TOPICS": 70,
            "DESCRIBE_GROUPS": 71,
            "RESET_GROUP": 72,
            "DELETE_GROUP": 73,
            "STORE_STATUS": 74,
            "DESCRIBE_DURABLES": 75,
            "DELETE_DURABLE": 76,
            "RESET_DURABLE": 77,
            "DESCRIBE_QUEUES": 78,
            "DELETE_QUEUE": 79,
            "DESCRIBE_MAPS": 80,
            "DELETE_MAP": 81,
            "HISTORY_FETCH": 90,
            "STAGE": 60,
            "COMMIT_STAGED": 61,
            "ABORT_STAGED": 62,
        }

    def test_seek_modes(self) -> None:
        """SeekMode values never move."""
        assert {m.name: int(m) for m in SeekMode} == {
            "POSITION": 0,
            "TIMESTAMP": 1,
            "HEAD": 2,
            "TAIL": 3,
        }

    def test_commit_statuses(self) -> None:
        """Each CommitStatus travels by its explicit code, not its position in the enum."""
        assert {s.name: s.code for s in CommitStatus} == {
            "COMMITTED": 0,
            "ALREADY_COMMITTED": 1,
            "NOTHING_TO_COMMIT": 2,
            "REJECTED": 3,
            "UNOWNED": 4,
        }
        assert all(CommitStatus.from_code(s.code) is s for s in CommitStatus)

    def test_error_codes(self) -> None:
        """ErrorCode values never move."""
        assert {c.name: int(c) for c in ErrorCode} == {
            "OK": 0,
            "ERROR": 1,
            "BAD_PARAMETER": 2,
            "PRECONDITION_NOT_MET": 3,
            "UNSUPPORTED": 4,
            "ILLEGAL_OPERATION": 5,
            "OUT_OF_RESOURCES": 6,
            "INCONSISTENT_POLICY": 7,
            "ALREADY_CLOSED": 8,
            "TIMEOUT": 9,
            "IMMUTABLE_POLICY": 10,
            "INCOMPATIBLE_QOS": 11,
            "NOT_ENABLED": 12,
            "IDL": 13,
            "IDL_SYNTAX": 14,
            "FILTER_SYNTAX": 15,
            "INVALID_DESTINATION": 16,
            "INVALID_SELECTOR": 17,
        }

    def test_the_commit_status_clients_see_is_the_wire_one(self) -> None:
        """``dcps.channels.CommitStatus`` is the enum store and client share."""
        assert PublicCommitStatus is CommitStatus


def make(cls: type[DcpsError], message: str) -> DcpsError:
    """An instance of ``cls`` (some take structured keyword arguments)."""
    if issubclass(cls, FilterSyntaxError):
        return cls(message, expression="a >", position=3)
    if cls is IdlSyntaxError:
        return IdlSyntaxError(message, file="t.idl", line=1, column=2)
    return cls(message)


class TestErrorsTravel:
    @pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
    def test_every_dcps_error_travels_as_itself(self, cls: type[DcpsError]) -> None:
        """An error reply raises, on the client, the very class the store raised, with its text."""
        wire = Reply.deserialize(error_reply("c", 1, make(cls, "what went wrong")).serialize())
        assert wire.status == error_code(make(cls, "x")) != ErrorCode.OK
        with pytest.raises(cls, match="what went wrong") as caught:
            raise_for_status(wire)
        assert type(caught.value) is cls

    def test_error_codes_are_distinct_per_class(self) -> None:
        """No two dcps error classes share a wire code."""
        codes = [error_code(make(cls, "x")) for cls in ERROR_CLASSES]
        assert len(set(codes)) == len(codes)

    def test_a_timeout_and_a_precondition_keep_their_kind(self) -> None:
        """DcpsTimeoutError is still a TimeoutError after the trip; a precondition stays one."""
        assert isinstance(error_from_code(ErrorCode.TIMEOUT, "late"), TimeoutError)
        assert isinstance(error_from_code(ErrorCode.TIMEOUT, "late"), DcpsTimeoutError)
        assert type(error_from_code(3, "no")) is PreconditionNotMetError

    def test_foreign_exceptions_and_unknown_codes_become_the_base_error(self) -> None:
        """A non-dcps exception travels as ERROR; an unknown code raises the base DcpsError."""
        assert error_code(KeyError("k")) is ErrorCode.ERROR
        assert type(error_from_code(999, "from a newer store")) is DcpsError
