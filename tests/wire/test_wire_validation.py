"""Decoding a request validates it whole and names the field at fault; bytes never crash it."""

from __future__ import annotations

from typing import Any

import pytest

from dcps import BadParameterError
from dcps.wire._codes import Op, SeekMode
from dcps.wire._limits import (
    MAX_CHANNELS,
    MAX_CLIENT_ID_LENGTH,
    MAX_ELEMENT_SIZE,
    MAX_FETCH_COUNT,
    MAX_NAME_LENGTH,
)
from dcps.wire._messages import Request, UndecodableRequest
from dcps.wire._requests import (
    CommitRequest,
    EnsureTopicRequest,
    FetchRequest,
    JoinRequest,
    PublishRequest,
    SeekRequest,
    StateRequest,
    decode_request,
)


def wire(op: Op, client: str = "c1", **fields: Any) -> Request:
    return Request(client=client, request_id=1, op=int(op), **fields)


class TestRoundTrip:
    @pytest.mark.parametrize(
        "request_",
        [
            EnsureTopicRequest("t", 4, None, "M::T"),
            EnsureTopicRequest("t", 0, True),
            PublishRequest("t", 3, [2, 1], b"abc"),
            PublishRequest("t", 0, [1], b"x", key="k/1"),
            FetchRequest("t", 2, 10, 512),
            CommitRequest("t", "g", "m", (0, 2), (5, -1), True, "inc", 30_000),
            SeekRequest("t", "g", "m", SeekMode.TIMESTAMP, (1,), (123,)),
            StateRequest("t", "g", (0, 1)),
            JoinRequest("t", "g", "m", 5000, anonymous=True),
        ],
        ids=lambda r: type(r).__name__,
    )
    def test_typed_requests_survive_the_wire(self, request_: Any) -> None:
        """to_wire, CDR bytes, from_wire: the same typed request comes back."""
        data = request_.to_wire("client-1", 9).serialize()
        back = Request.deserialize(data)
        assert (back.client, back.request_id) == ("client-1", 9)
        assert decode_request(back) == request_


class TestRefusals:
    @pytest.mark.parametrize(
        ("request_", "match"),
        [
            (wire(Op.PUBLISH, topic="t", channels=[0], sizes=[0], blob=b""), "at least 1 byte"),
            (
                wire(Op.PUBLISH, topic="t", channels=[0], sizes=[MAX_ELEMENT_SIZE + 1], blob=b""),
                "MAX_ELEMENT_SIZE",
            ),
            (wire(Op.PUBLISH, topic="t", channels=[0], sizes=[3], blob=b"ab"), "add up to 3"),
            (wire(Op.PUBLISH, topic="t", channels=[0, 1], sizes=[], blob=b""), "'channels'"),
            (wire(Op.FETCH, topic="t", channels=[0], offsets=[0], number=0), "MAX_FETCH_COUNT"),
            (
                wire(Op.FETCH, topic="t", channels=[0], offsets=[0], number=MAX_FETCH_COUNT + 1),
                "MAX_FETCH_COUNT",
            ),
            (wire(Op.ENSURE_TOPIC, topic="t", number=1_000_000), "MAX_CHANNELS"),
            (wire(Op.STATE, topic="t", channels=[MAX_CHANNELS]), "'channels'"),
            (
                wire(Op.COMMIT, topic="t", group="g", member="m", channels=[0, 1], offsets=[4]),
                "'offsets' differ in length",
            ),
            (wire(Op.SEEK, topic="t", group="g", member="m", number=9), "seek mode"),
            (wire(Op.JOIN, topic="t", group="", member="m", number=1000), "'group'"),
            (wire(Op.JOIN, topic="t", group="g*", member="m", number=1000), "'group'"),
            (wire(Op.STATE, topic="x" * (MAX_NAME_LENGTH + 1)), "MAX_NAME_LENGTH"),
            (wire(Op.STATE, client="*", topic="t"), "client id"),
            (wire(Op.STATE, client="a/b", topic="t"), "client id"),
            (wire(Op.STATE, client="c" * (MAX_CLIENT_ID_LENGTH + 1), topic="t"), "client id"),
            (wire(99), "unknown store request kind 99"),
        ],
    )
    def test_a_bad_request_is_refused_naming_its_fault(self, request_: Request, match: str) -> None:
        """Each malformed request raises BadParameterError naming the field or limit."""
        with pytest.raises(BadParameterError, match=match):
            decode_request(request_)


class TestUndecodable:
    def test_a_non_utf8_string_becomes_an_undecodable_request(self) -> None:
        """Non-UTF-8 bytes decode to an UndecodableRequest naming the field, not an error."""
        data = wire(Op.STATE, topic="TOPIC!").serialize()
        bad = data.replace(b"TOPIC!", b"\xff\xfe\xfd\xfc\xfb\xfa")
        got = Request.deserialize(bad)
        assert isinstance(got, UndecodableRequest)
        assert (got.client, got.request_id) == ("c1", 1)
        assert "'topic'" in got.problem
        assert "UTF-8" in got.problem

    def test_truncated_bytes_name_nobody(self) -> None:
        """A truncated sample decodes to an UndecodableRequest with no client to answer."""
        data = wire(Op.STATE, topic="t").serialize()
        got = Request.deserialize(data[:9])
        assert isinstance(got, UndecodableRequest)
        assert got.client == ""
