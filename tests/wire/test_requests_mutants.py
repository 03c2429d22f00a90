"""Typed store requests, exact: every refusal's message and every limit's edge, and every
request kind through the wire and back (issue 20: the mutants of ``dcps/wire/_requests.py``
these tests kill went unseen by tests/wire/test_wire_validation.py, which matches
messages loosely and tries no edge).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from dcps import BadParameterError
from dcps.wire._auth_member import PUBLIC_VALUE_BYTES
from dcps.wire._codes import Op, SeekMode
from dcps.wire._limits import MAX_BATCH_ELEMENTS, MAX_ELEMENT_SIZE, MAX_FETCH_COUNT
from dcps.wire._messages import Request
from dcps.wire._requests import (
    CommitRequest,
    DestroyGroupRequest,
    EnsureTopicRequest,
    FetchRequest,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    PingRequest,
    PublishRequest,
    SeekRequest,
    StateRequest,
    decode_request,
)

INT64_MAX = 2**63 - 1
MEMBER = {"topic": "t", "group": "g", "member": "m"}


def wire(op: Op, **fields: Any) -> Request:
    return Request(client="c1", request_id=1, op=int(op), **fields)


def refused(request: Request, message: str) -> None:
    """Decoding ``request`` raises exactly ``message``."""
    with pytest.raises(BadParameterError, match="^" + re.escape(message) + "$"):
        decode_request(request)


class TestEveryKindRoundTrips:
    @pytest.mark.parametrize(
        "request_",
        [
            PingRequest(),
            EnsureTopicRequest("t"),
            EnsureTopicRequest("t", 7, False, "M::T", "M::T#abc"),
            PublishRequest("t", 1, [], b""),
            FetchRequest("t", 0, 0, 1),
            CommitRequest("t", "g", "m", (), ()),
            CommitRequest("t", "g", "m", (3,), (-1,), False, "", 0),
            SeekRequest("t", "g", "m", SeekMode.POSITION, (0, 1), (-1, 7)),
            SeekRequest("t", "g", "m", SeekMode.TAIL, (), ()),
            StateRequest("t"),
            JoinRequest("t", "g", "m", 1),
            JoinRequest("t", "g", "m", INT64_MAX, False, b"k" * PUBLIC_VALUE_BYTES, (2, 0)),
            HeartbeatRequest("t", "g", "m"),
            LeaveRequest("t", "g", "m"),
            DestroyGroupRequest("t", "g"),
        ],
        ids=lambda r: type(r).__name__,
    )
    def test_the_same_request_comes_back(self, request_: Any) -> None:
        back = Request.deserialize(request_.to_wire("client-1", 3).serialize())
        assert back.op == int(request_.op)
        assert decode_request(back) == request_

    def test_fields_travel_where_the_store_reads_them(self) -> None:
        join = JoinRequest("t", "g", "m", 5000, True, b"", (1,)).to_wire("c", 1)
        assert (join.number, join.flag, join.channels) == (5000, 1, [1])
        commit = CommitRequest("t", "g", "m", (0,), (4,), True, "inc", 70).to_wire("c", 1)
        assert (commit.flag, commit.text, commit.number, commit.offsets) == (1, "inc", 70, [4])
        ensure = EnsureTopicRequest("t", 3, None, "T", "T#1").to_wire("c", 1)
        assert (ensure.number, ensure.flag, ensure.text, ensure.member) == (3, -1, "T", "T#1")
        assert EnsureTopicRequest("t", 3, True).to_wire("c", 1).flag == 1
        assert EnsureTopicRequest("t", 3, False).to_wire("c", 1).flag == 0
        seek = SeekRequest("t", "g", "m", SeekMode.HEAD, (2,), (0,)).to_wire("c", 1)
        assert seek.number == int(SeekMode.HEAD)
        fetch = FetchRequest("t", 2, 9, 10).to_wire("c", 1)
        assert (fetch.channels, fetch.offsets, fetch.number) == ([2], [9], 10)
        publish = PublishRequest("t", 5, [1], b"x", "key").to_wire("c", 1)
        assert (publish.channels, publish.text, publish.sizes) == ([5], "key", [1])

    def test_decoded_flags_and_defaults(self) -> None:
        ensure = decode_request(wire(Op.ENSURE_TOPIC, topic="t", flag=-1))
        assert ensure == EnsureTopicRequest("t", 0, None, "", "")
        assert decode_request(wire(Op.ENSURE_TOPIC, topic="t", flag=0)).retain_consumed is False
        assert decode_request(wire(Op.ENSURE_TOPIC, topic="t", flag=1)).retain_consumed is True
        assert decode_request(wire(Op.STATE, topic="t")) == StateRequest("t", "", ())
        join = decode_request(wire(Op.JOIN, **MEMBER, number=10))
        assert join == JoinRequest("t", "g", "m", 10, False, b"", ())


class TestRefusals:
    def test_unknown_kind(self) -> None:
        refused(wire(99), "unknown store request kind 99 (request field 'op')")

    @pytest.mark.parametrize("flag", [-2, 2])
    def test_ensure_topic_flag(self, flag: int) -> None:
        refused(
            wire(Op.ENSURE_TOPIC, topic="t", flag=flag),
            f"request field 'flag' (retain_consumed) is {flag}",
        )

    def test_publish_to_one_channel_only(self) -> None:
        message = "request field 'channels' must hold exactly one value"
        refused(wire(Op.PUBLISH, topic="t", channels=[], sizes=[], blob=b""), message)
        refused(wire(Op.PUBLISH, topic="t", channels=[0, 1], sizes=[], blob=b""), message)

    def test_publish_element_sizes(self) -> None:
        refused(
            wire(Op.PUBLISH, topic="t", channels=[2], sizes=[1, 0, 2], blob=b"abc"),
            "a PUBLISH to topic 't' channel 2 carries an element of 0 bytes: "
            "an element has at least 1 byte",
        )
        refused(
            wire(Op.PUBLISH, topic="t", channels=[2], sizes=[1, MAX_ELEMENT_SIZE + 1], blob=b""),
            f"a PUBLISH to topic 't' channel 2 carries an element of {MAX_ELEMENT_SIZE + 1} "
            f"bytes; the limit is MAX_ELEMENT_SIZE = {MAX_ELEMENT_SIZE}",
        )
        refused(
            wire(Op.PUBLISH, topic="t", channels=[0], sizes=[2, 2], blob=b"abc"),
            "a PUBLISH's element sizes add up to 4 bytes, but its blob has 3",
        )

    def test_publish_limits_are_inclusive(self) -> None:
        one = decode_request(wire(Op.PUBLISH, topic="t", channels=[0], sizes=[1], blob=b"x"))
        assert one == PublishRequest("t", 0, [1], b"x")
        blob = bytes(MAX_ELEMENT_SIZE)
        largest = wire(Op.PUBLISH, topic="t", channels=[0], sizes=[MAX_ELEMENT_SIZE], blob=blob)
        assert decode_request(largest).sizes == [MAX_ELEMENT_SIZE]

    def test_publish_batch_size(self) -> None:
        most = [1] * MAX_BATCH_ELEMENTS
        full = wire(Op.PUBLISH, topic="t", channels=[0], sizes=most, blob=bytes(len(most)))
        assert len(decode_request(full).sizes) == MAX_BATCH_ELEMENTS
        refused(
            wire(Op.PUBLISH, topic="t", channels=[0], sizes=[*most, 1], blob=b""),
            f"a PUBLISH carries {MAX_BATCH_ELEMENTS + 1} elements; the limit is "
            f"MAX_BATCH_ELEMENTS = {MAX_BATCH_ELEMENTS}",
        )

    @pytest.mark.parametrize("count", [0, -1, MAX_FETCH_COUNT + 1])
    def test_fetch_count(self, count: int) -> None:
        refused(
            wire(Op.FETCH, topic="t", channels=[0], offsets=[0], number=count),
            f"a FETCH asks for {count} elements: 1..{MAX_FETCH_COUNT} (MAX_FETCH_COUNT) "
            "may be fetched at once",
        )

    def test_fetch_edges(self) -> None:
        for count in (1, MAX_FETCH_COUNT):
            got = decode_request(wire(Op.FETCH, topic="t", channels=[1], offsets=[0], number=count))
            assert got == FetchRequest("t", 1, 0, count)
        refused(
            wire(Op.FETCH, topic="t", channels=[1], offsets=[-1], number=5),
            "a FETCH starts at offset -1: offsets are >= 0",
        )
        refused(
            wire(Op.FETCH, topic="t", channels=[0, 1], offsets=[0, 0], number=5),
            "request field 'channels' must hold exactly one value",
        )

    def test_commit_fields(self) -> None:
        commit = wire(Op.COMMIT, **MEMBER, channels=[0, 1], offsets=[-1, 0])
        assert decode_request(commit).offsets == (-1, 0)
        refused(
            wire(Op.COMMIT, **MEMBER, channels=[0, 1], offsets=[3, -2]),
            "a COMMIT names offset -2: offsets are >= -1",
        )
        refused(wire(Op.COMMIT, **MEMBER, flag=2), "request field 'flag' (allow_unowned) is 2")
        refused(wire(Op.COMMIT, **MEMBER, flag=-1), "request field 'flag' (allow_unowned) is -1")
        refused(
            wire(Op.COMMIT, **MEMBER, number=-1), "request field 'number' (member timeout) is -1"
        )
        assert decode_request(wire(Op.COMMIT, **MEMBER, number=0)).member_timeout_ms == 0

    def test_seek_fields(self) -> None:
        refused(wire(Op.SEEK, **MEMBER, number=9), "request field 'number' (seek mode) is 9")
        refused(
            wire(Op.SEEK, **MEMBER, number=0, channels=[0, 1], offsets=[5, -2]),
            "a SEEK names offset -2: offsets are >= -1",
        )
        edge = decode_request(wire(Op.SEEK, **MEMBER, number=0, channels=[0], offsets=[-1]))
        assert edge.targets == (-1,)
        # other modes read the targets otherwise: no offset check
        stamp = decode_request(wire(Op.SEEK, **MEMBER, number=1, channels=[0], offsets=[-5]))
        assert stamp == SeekRequest("t", "g", "m", SeekMode.TIMESTAMP, (0,), (-5,))

    @pytest.mark.parametrize("timeout", [0, -1])
    def test_join_timeout_is_positive(self, timeout: int) -> None:
        refused(
            wire(Op.JOIN, **MEMBER, number=timeout),
            f"request field 'number' (member timeout) is {timeout}",
        )

    def test_join_fields(self) -> None:
        refused(wire(Op.JOIN, **MEMBER, number=5, flag=2), "request field 'flag' (anonymous) is 2")
        refused(
            wire(Op.JOIN, **MEMBER, number=5, flag=-1), "request field 'flag' (anonymous) is -1"
        )
        refused(
            wire(Op.JOIN, **MEMBER, number=5, blob=b"k" * (PUBLIC_VALUE_BYTES - 1)),
            f"request field 'blob' (key-exchange offer) has {PUBLIC_VALUE_BYTES - 1} bytes, "
            f"not {PUBLIC_VALUE_BYTES}",
        )
        refused(
            wire(Op.JOIN, **MEMBER, number=5, channels=[-1]),
            decode_error(wire(Op.STATE, topic="t", channels=[-1])),
        )

    @pytest.mark.parametrize(
        ("op", "missing"),
        [
            (Op.HEARTBEAT, "group"),
            (Op.LEAVE, "member"),
            (Op.DESTROY_GROUP, "group"),
            (Op.JOIN, "topic"),
            (Op.COMMIT, "member"),
            (Op.SEEK, "group"),
        ],
    )
    def test_member_requests_name_every_party(self, op: Op, missing: str) -> None:
        fields = {**MEMBER, missing: ""}
        with pytest.raises(BadParameterError, match=f"'{missing}'"):
            decode_request(wire(op, number=5, **fields))

    def test_ensure_topic_names_are_checked(self) -> None:
        for field in ("text", "member"):
            with pytest.raises(BadParameterError, match=re.escape(f"'{field}")):
                decode_request(wire(Op.ENSURE_TOPIC, topic="t", **{field: "a*"}))
        with pytest.raises(BadParameterError, match="'text'"):
            decode_request(wire(Op.PUBLISH, topic="t", channels=[0], text="k?"))
        with pytest.raises(BadParameterError, match="'text'"):
            decode_request(wire(Op.COMMIT, **MEMBER, text="i*"))
        with pytest.raises(BadParameterError, match="'group'"):
            decode_request(wire(Op.STATE, topic="t", group="g*"))


def decode_error(request: Request) -> str:
    """The message decoding ``request`` raises."""
    with pytest.raises(BadParameterError) as caught:
        decode_request(request)
    return str(caught.value)


class TestFieldNames:
    @pytest.mark.parametrize(
        "request_",
        [
            wire(Op.ENSURE_TOPIC, topic="a*"),
            wire(Op.PUBLISH, topic="a*", channels=[0]),
            wire(Op.FETCH, topic="a*", channels=[0], offsets=[0], number=1),
            wire(Op.STATE, topic="a*"),
            wire(Op.DESTROY_GROUP, topic="a*", group="g"),
        ],
        ids=lambda r: Op(r.op).name,
    )
    def test_a_bad_topic_is_named_as_the_topic_field(self, request_: Request) -> None:
        refused(request_, "request field 'topic' ('a*') must not contain '*', '?' or '\\'")

    def test_channels_and_offsets_must_pair_up(self) -> None:
        refused(
            wire(Op.FETCH, topic="t", channels=[0], offsets=[], number=1),
            "request fields 'channels' and 'offsets' differ in length (1 and 0)",
        )
        refused(
            wire(Op.SEEK, **MEMBER, channels=[0, 1], offsets=[5]),
            "request fields 'channels' and 'offsets' differ in length (2 and 1)",
        )
