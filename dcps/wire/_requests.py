"""Typed store requests: what each request kind means, and its place in the wire struct.

Each request kind is a frozen value with ``to_wire`` (the client's side) and
``from_wire`` (the store's side, which validates the request whole: types,
names, bounds, parallel lengths) — the only code that knows which
:class:`~dcps.wire._messages.Request` field carries what.
:func:`decode_request` turns any request sample into its typed value or
raises a :class:`~dcps.DcpsError` naming the field at fault.
"""

from __future__ import annotations

from typing import ClassVar, Protocol, Self

import attrs

from idl._errors import BadParameterError

from ._admin import AdminRequest, admin_requests
from ._admin_objects import AdminObjectRequest, admin_object_requests
from ._auth_member import PUBLIC_VALUE_BYTES
from ._codes import Op, SeekMode
from ._durability import HistoryFetchRequest
from ._durables import DURABLE_REQUESTS, DurableRequest
from ._limits import (
    MAX_BATCH_ELEMENTS,
    MAX_ELEMENT_SIZE,
    MAX_FETCH_COUNT,
    check_channel_count,
    check_channels,
    check_client_id,
    check_wire_name,
)
from ._maps import MAP_REQUESTS, AnyMapRequest
from ._messages import Request
from ._queues import QUEUE_REQUESTS, AnyQueueRequest
from ._staging import AbortStagedRequest, CommitStagedRequest, StageRequest

__all__ = [
    "CommitRequest",
    "DestroyGroupRequest",
    "EnsureTopicRequest",
    "FetchRequest",
    "HeartbeatRequest",
    "JoinRequest",
    "LeaveRequest",
    "PingRequest",
    "PublishRequest",
    "SeekRequest",
    "StateRequest",
    "StoreRequest",
    "decode_request",
]

_INT64 = (-(2**63), 2**63 - 1)


class StoreRequest(Protocol):
    """What every typed request offers."""

    op: ClassVar[Op]

    def to_wire(self, client: str, request_id: int) -> Request:
        """The wire struct of this request."""
        ...


def _one(values: list[int], field: str) -> int:
    if len(values) != 1:
        raise BadParameterError(f"request field {field!r} must hold exactly one value")
    return int(values[0])


@attrs.frozen
class PingRequest:
    """Is the store there? (answered with :class:`~dcps.wire._replies.Pong`)."""

    op: ClassVar[Op] = Op.PING

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(client=client, request_id=request_id, op=Op.PING)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls()


@attrs.frozen
class EnsureTopicRequest:
    """Create ``topic`` unless it exists; check its configuration if it does.

    ``channel_count`` 0 takes the store's default; ``retain_consumed`` None
    keeps whatever the store has. ``type_name`` is the topic type's name and
    ``type_identity`` its :func:`idl.type_identity` (name and structure hash;
    empty: not checked), travelling in the ``member`` field. The store refuses
    an identity other than the one the topic recorded.
    """

    op: ClassVar[Op] = Op.ENSURE_TOPIC
    topic: str
    channel_count: int = 0
    retain_consumed: bool | None = None
    type_name: str = ""
    type_identity: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        flag = -1 if self.retain_consumed is None else int(self.retain_consumed)
        return Request(
            client=client,
            request_id=request_id,
            op=Op.ENSURE_TOPIC,
            topic=self.topic,
            number=self.channel_count,
            flag=flag,
            text=self.type_name,
            member=self.type_identity,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.flag not in (-1, 0, 1):
            raise BadParameterError(f"request field 'flag' (retain_consumed) is {r.flag}")
        return cls(
            check_wire_name("topic", r.topic),
            check_channel_count(int(r.number)),
            None if r.flag < 0 else bool(r.flag),
            check_wire_name("text", r.text, required=False),
            check_wire_name("member (type identity)", r.member, required=False),
        )


@attrs.frozen
class PublishRequest:
    """Append a batch to one channel: element ``i`` is ``blob[sum(sizes[:i]):][:sizes[i]]``.

    ``key`` (optional) makes the publish idempotent: a repeated key is not appended again.
    """

    op: ClassVar[Op] = Op.PUBLISH
    topic: str
    channel: int
    sizes: list[int]
    blob: bytes
    key: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.PUBLISH,
            topic=self.topic,
            channels=[self.channel],
            text=self.key,
            sizes=self.sizes,
            blob=self.blob,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        channel = _one(r.channels, "channels")
        check_channels(r.channels)
        sizes = r.sizes
        if len(sizes) > MAX_BATCH_ELEMENTS:
            raise BadParameterError(
                f"a PUBLISH carries {len(sizes)} elements; the limit is "
                f"MAX_BATCH_ELEMENTS = {MAX_BATCH_ELEMENTS}"
            )
        if sizes:
            smallest, largest = min(sizes), max(sizes)
            if smallest < 1:
                raise BadParameterError(
                    f"a PUBLISH to topic {r.topic!r} channel {channel} carries an element of "
                    f"{smallest} bytes: an element has at least 1 byte"
                )
            if largest > MAX_ELEMENT_SIZE:
                raise BadParameterError(
                    f"a PUBLISH to topic {r.topic!r} channel {channel} carries an element of "
                    f"{largest} bytes; the limit is MAX_ELEMENT_SIZE = {MAX_ELEMENT_SIZE}"
                )
        if sum(sizes) != len(r.blob):
            raise BadParameterError(
                f"a PUBLISH's element sizes add up to {sum(sizes)} bytes, "
                f"but its blob has {len(r.blob)}"
            )
        return cls(
            check_wire_name("topic", r.topic),
            channel,
            sizes,
            r.blob,
            check_wire_name("text", r.text, required=False),
        )


@attrs.frozen
class FetchRequest:
    """Up to ``count`` stored elements of ``channel`` from ``offset`` (bulk form)."""

    op: ClassVar[Op] = Op.FETCH
    topic: str
    channel: int
    offset: int
    count: int

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.FETCH,
            topic=self.topic,
            channels=[self.channel],
            offsets=[self.offset],
            number=self.count,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        check_channels(r.channels, parallel=r.offsets)
        channel = _one(r.channels, "channels")
        offset = _one(r.offsets, "offsets")
        if not 1 <= r.number <= MAX_FETCH_COUNT:
            raise BadParameterError(
                f"a FETCH asks for {r.number} elements: 1..{MAX_FETCH_COUNT} "
                f"(MAX_FETCH_COUNT) may be fetched at once"
            )
        if offset < 0:
            raise BadParameterError(f"a FETCH starts at offset {offset}: offsets are >= 0")
        return cls(check_wire_name("topic", r.topic), channel, offset, int(r.number))


def _member_fields(r: Request) -> tuple[str, str, str]:
    return (
        check_wire_name("topic", r.topic),
        check_wire_name("group", r.group),
        check_wire_name("member", r.member),
    )


@attrs.frozen
class CommitRequest:
    """Commit ``offsets[i]`` of ``channels[i]`` for ``member`` of ``group``.

    ``allow_unowned`` records commits of channels the member does not own.
    ``incarnation`` (the store incarnation the member joined) and
    ``member_timeout_ms`` let a restarted store re-admit the member.
    """

    op: ClassVar[Op] = Op.COMMIT
    topic: str
    group: str
    member: str
    channels: tuple[int, ...]
    offsets: tuple[int, ...]
    allow_unowned: bool = False
    incarnation: str = ""
    member_timeout_ms: int = 0

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.COMMIT,
            topic=self.topic,
            group=self.group,
            member=self.member,
            channels=list(self.channels),
            offsets=list(self.offsets),
            flag=int(self.allow_unowned),
            text=self.incarnation,
            number=self.member_timeout_ms,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic, group, member = _member_fields(r)
        check_channels(r.channels, parallel=r.offsets)
        if r.offsets and min(r.offsets) < -1:
            raise BadParameterError(f"a COMMIT names offset {min(r.offsets)}: offsets are >= -1")
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (allow_unowned) is {r.flag}")
        if r.number < 0:
            raise BadParameterError(f"request field 'number' (member timeout) is {r.number}")
        return cls(
            topic,
            group,
            member,
            tuple(r.channels),
            tuple(r.offsets),
            bool(r.flag),
            check_wire_name("text", r.text, required=False),
            int(r.number),
        )


@attrs.frozen
class SeekRequest:
    """Move ``channels[i]`` of the group to ``targets[i]``, read as ``mode`` says."""

    op: ClassVar[Op] = Op.SEEK
    topic: str
    group: str
    member: str
    mode: SeekMode
    channels: tuple[int, ...]
    targets: tuple[int, ...]

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.SEEK,
            topic=self.topic,
            group=self.group,
            member=self.member,
            number=int(self.mode),
            channels=list(self.channels),
            offsets=list(self.targets),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic, group, member = _member_fields(r)
        check_channels(r.channels, parallel=r.offsets)
        try:
            mode = SeekMode(r.number)
        except ValueError:
            raise BadParameterError(f"request field 'number' (seek mode) is {r.number}") from None
        if mode is SeekMode.POSITION and r.offsets and min(r.offsets) < -1:
            raise BadParameterError(f"a SEEK names offset {min(r.offsets)}: offsets are >= -1")
        return cls(topic, group, member, mode, tuple(r.channels), tuple(r.offsets))


@attrs.frozen
class StateRequest:
    """Heads, tails (and the group's commits, with ``group``) of ``channels`` (empty: all)."""

    op: ClassVar[Op] = Op.STATE
    topic: str
    group: str = ""
    channels: tuple[int, ...] = ()

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.STATE,
            topic=self.topic,
            group=self.group,
            channels=list(self.channels),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        check_channels(r.channels)
        return cls(
            check_wire_name("topic", r.topic),
            check_wire_name("group", r.group, required=False),
            tuple(r.channels),
        )


@attrs.frozen
class JoinRequest:
    """Join ``group`` as ``member``; the store expels it after ``timeout_ms`` of silence.

    ``offer`` is the member's key-exchange value (``MemberOffer.public``) when
    the namespace has a key, empty otherwise. ``previous_channels`` (a member
    rejoining a restarted store) names the channels it owned before: the store
    keeps them its own unless another rejoining member claimed them first
    (``dcps/store/_groups.py``).
    """

    op: ClassVar[Op] = Op.JOIN
    topic: str
    group: str
    member: str
    timeout_ms: int
    anonymous: bool = False
    offer: bytes = b""
    previous_channels: tuple[int, ...] = ()

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.JOIN,
            topic=self.topic,
            group=self.group,
            member=self.member,
            number=self.timeout_ms,
            flag=int(self.anonymous),
            blob=self.offer,
            channels=list(self.previous_channels),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic, group, member = _member_fields(r)
        if not 0 < r.number <= _INT64[1]:
            raise BadParameterError(f"request field 'number' (member timeout) is {r.number}")
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (anonymous) is {r.flag}")
        if len(r.blob) not in (0, PUBLIC_VALUE_BYTES):
            raise BadParameterError(
                f"request field 'blob' (key-exchange offer) has {len(r.blob)} bytes, "
                f"not {PUBLIC_VALUE_BYTES}"
            )
        check_channels(r.channels)
        return cls(
            topic,
            group,
            member,
            int(r.number),
            bool(r.flag),
            bytes(r.blob),
            tuple(r.channels),
        )


@attrs.frozen
class HeartbeatRequest:
    """``member`` of ``group`` is alive."""

    op: ClassVar[Op] = Op.HEARTBEAT
    topic: str
    group: str
    member: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.HEARTBEAT,
            topic=self.topic,
            group=self.group,
            member=self.member,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(*_member_fields(r))


@attrs.frozen
class LeaveRequest:
    """``member`` leaves ``group``."""

    op: ClassVar[Op] = Op.LEAVE
    topic: str
    group: str
    member: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.LEAVE,
            topic=self.topic,
            group=self.group,
            member=self.member,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(*_member_fields(r))


@attrs.frozen
class DestroyGroupRequest:
    """Delete ``group`` of ``topic`` and its commits."""

    op: ClassVar[Op] = Op.DESTROY_GROUP
    topic: str
    group: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.DESTROY_GROUP,
            topic=self.topic,
            group=self.group,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(check_wire_name("topic", r.topic), check_wire_name("group", r.group))


AnyRequest = (
    PingRequest
    | EnsureTopicRequest
    | PublishRequest
    | FetchRequest
    | CommitRequest
    | SeekRequest
    | StateRequest
    | JoinRequest
    | HeartbeatRequest
    | LeaveRequest
    | DestroyGroupRequest
    | AdminRequest
    | AdminObjectRequest
    | HistoryFetchRequest
    | AnyMapRequest
    | AnyQueueRequest
    | StageRequest
    | CommitStagedRequest
    | AbortStagedRequest
)

_DECODERS: dict[int, type[AnyRequest] | type[DurableRequest]] = {
    cls.op: cls
    for cls in (
        *DURABLE_REQUESTS,
        PingRequest,
        EnsureTopicRequest,
        PublishRequest,
        FetchRequest,
        CommitRequest,
        SeekRequest,
        StateRequest,
        JoinRequest,
        HeartbeatRequest,
        LeaveRequest,
        DestroyGroupRequest,
        *admin_requests(),
        *admin_object_requests(),
        HistoryFetchRequest,
        *MAP_REQUESTS,
        *QUEUE_REQUESTS,
        StageRequest,
        CommitStagedRequest,
        AbortStagedRequest,
    )
}


def decode_request(r: Request) -> AnyRequest | DurableRequest:
    """The typed, validated request a wire request carries.

    Raises :class:`~dcps.BadParameterError` naming the field at fault (the
    caller answers it alone). The client id is checked too, since the reply
    goes to a partition named after it.
    """
    check_client_id(r.client)
    cls = _DECODERS.get(r.op)
    if cls is None:
        raise BadParameterError(f"unknown store request kind {r.op} (request field 'op')")
    return cls.from_wire(r)
