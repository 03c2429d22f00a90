"""Durable requests on the wire: each travels whole, and a malformed one is refused naming why."""

from __future__ import annotations

import dataclasses

import pytest

from dcps import BadParameterError
from dcps.wire._durables import (
    AckStatus,
    DurableAckRequest,
    DurableCloseRequest,
    DurableDelivery,
    DurableInfoRequest,
    DurableKind,
    DurablePollRequest,
    DurableRollbackRequest,
    DurableSubscribeRequest,
    DurableUnsubscribeRequest,
    StartMode,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._requests import decode_request

REQUESTS = [
    DurableSubscribeRequest(
        "t",
        "d",
        "s",
        DurableKind.SERIAL,
        8,
        False,
        True,
        "x > 1",
        StartMode.POSITIONS,
        ((0, 5), (2, 7)),
        3000,
        60000,
    ),
    DurableSubscribeRequest("t", "d", "s", DurableKind.LAST_VALUE),
    DurablePollRequest("t", "d", "s", 64, 1000),
    DurablePollRequest("t", "d", "s", 64, 1000, ((0, 1), (0, 2), (0, 3), (2, 9), (0, 4))),
    DurableSubscribeRequest("t", "d", "s", DurableKind.SHARED, offer=bytes(range(256))),
    DurableAckRequest("t", "d", "s", ((0, 1), (0, 2), (3, 9))),
    DurableRollbackRequest("t", "d", "s", ((1, 1),)),
    DurableCloseRequest("t", "d", "s"),
    DurableUnsubscribeRequest("t", "d"),
    DurableInfoRequest("t", "d"),
]


class TestDurableRequests:
    @pytest.mark.parametrize("request_", REQUESTS, ids=lambda r: type(r).__name__)
    def test_round_trip(self, request_: object) -> None:
        """decode_request(to_wire(r)) == r for every durable request kind."""
        wire = request_.to_wire("client1", 7)  # type: ignore[attr-defined]
        assert decode_request(Request.deserialize(wire.serialize())) == request_

    @pytest.mark.parametrize(
        ("change", "why"),
        [
            ({"sizes": [9, 0, 1000]}, "durable kind"),
            ({"sizes": [0, 7, 1000]}, "start mode"),
            ({"sizes": [0, 0, 0]}, "timeout_ms"),
            ({"number": -1}, "window"),
            ({"offsets": [-5]}, "TTL"),
            ({"group": "a*b"}, "durable name"),
            ({"channels": [0]}, "differ in length"),
        ],
    )
    def test_bad_subscribe_is_refused(self, change: dict[str, object], why: str) -> None:
        """A malformed DURABLE_SUBSCRIBE raises BadParameterError naming the field."""
        wire = DurableSubscribeRequest("t", "d", "s", DurableKind.SHARED).to_wire("c", 1)
        with pytest.raises(BadParameterError, match=why):
            decode_request(dataclasses.replace(wire, **change))

    def test_bad_poll_and_ack_are_refused(self) -> None:
        """Counts and waits out of bounds, ragged or negative positions are refused."""
        poll = DurablePollRequest("t", "d", "s", 1, 0).to_wire("c", 1)
        with pytest.raises(BadParameterError, match="count"):
            decode_request(dataclasses.replace(poll, number=0))
        with pytest.raises(BadParameterError, match="wait_ms"):
            decode_request(dataclasses.replace(poll, sizes=[10**6]))
        ack = DurableAckRequest("t", "d", "s", ((0, 1),)).to_wire("c", 1)
        with pytest.raises(BadParameterError, match="differ in length"):
            decode_request(dataclasses.replace(ack, offsets=[1, 2]))
        with pytest.raises(BadParameterError, match="offsets"):
            decode_request(dataclasses.replace(ack, offsets=[-1]))
        with pytest.raises(BadParameterError, match="length >= 1"):
            decode_request(dataclasses.replace(ack, sizes=[0]))
        with pytest.raises(BadParameterError, match="limit"):
            decode_request(dataclasses.replace(ack, sizes=[10**6]))
        with pytest.raises(BadParameterError, match="run lengths differ"):
            decode_request(dataclasses.replace(poll, channels=[0], offsets=[1]))

    def test_acknowledgements_travel_as_runs(self) -> None:
        """A window of one channel is one run on the wire, whatever its size."""
        positions = tuple((0, o) for o in range(100, 164))
        wire = DurablePollRequest("t", "d", "s", 64, 1000, positions).to_wire("c", 1)
        assert (list(wire.channels), list(wire.offsets), list(wire.sizes)) == (
            [0],
            [100],
            [1000, 64],
        )
        assert decode_request(wire).acks == positions  # type: ignore[union-attr]


class TestDurableReplies:
    def test_a_delivery_names_the_refused_acknowledgements(self) -> None:
        """Refused acks come back with their positions and statuses; a bad status is refused."""
        d = DurableDelivery(
            (0,),
            (5,),
            (1,),
            (123,),
            (3,),
            b"abc",
            outstanding=4,
            refused=((0, 2, AckStatus.ALREADY_ACKED), (1, 9, AckStatus.NOT_HELD)),
        )
        wire = d.to_wire("c", 1)
        assert DurableDelivery.from_wire(Reply.deserialize(wire.serialize())) == d
        with pytest.raises(BadParameterError, match="unknown status"):
            DurableDelivery.from_wire(dataclasses.replace(wire, sizes=[1, 99]))
        with pytest.raises(BadParameterError, match="sizes do not match"):
            DurableDelivery.from_wire(dataclasses.replace(wire, blob=b"abcd"))
