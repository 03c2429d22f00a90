"""Typed store replies: what each answer means, and its place in the wire struct.

The store builds each answer as a typed value and writes it with ``to_wire``;
the client reads it with ``from_wire`` (a failed reply, ``status != 0``,
becomes the :class:`~dcps.DcpsError` its code names: :func:`raise_for_status`).
Only this module knows which :class:`~dcps.wire._messages.Reply` field
carries what.
"""

from __future__ import annotations

from typing import Self

import attrs

from idl._errors import BadParameterError

from ._batches import ElementRun
from ._codes import CommitStatus, ErrorCode, error_code, error_from_code
from ._messages import Reply

__all__ = [
    "ChannelStates",
    "Commits",
    "Fetched",
    "GroupDestroyed",
    "Membership",
    "Pong",
    "Published",
    "Seeked",
    "TopicConfig",
    "error_reply",
    "ok_reply",
    "raise_for_status",
]


def raise_for_status(reply: Reply) -> Reply:
    """Return ``reply`` or raise the dcps error its status names."""
    if reply.status:
        raise error_from_code(reply.status, reply.error)
    return reply


def error_reply(client: str, request_id: int, exc: BaseException) -> Reply:
    """The reply telling ``client`` that its request failed with ``exc``."""
    return Reply(
        client=client,
        request_id=request_id,
        status=int(error_code(exc)),
        error=str(exc) or type(exc).__name__,
    )


def ok_reply(client: str, request_id: int) -> Reply:
    """A success reply without content (LEAVE, a share's JOIN)."""
    return Reply(client=client, request_id=request_id)


def _ints(values: list[int]) -> tuple[int, ...]:
    return tuple(int(v) for v in values)


@attrs.frozen
class Pong:
    """The answer to PING: the store's incarnation and share ``index/count``."""

    incarnation: str
    share_index: int
    share_count: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            text=self.incarnation,
            number=self.share_count,
            flag=self.share_index,
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(r.text, int(r.flag), int(r.number))


@attrs.frozen
class TopicConfig:
    """The answer to ENSURE_TOPIC: the topic's configuration in the store."""

    channel_count: int
    retain_consumed: bool

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.channel_count,
            flag=int(self.retain_consumed),
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number), bool(r.flag))


@attrs.frozen
class Published:
    """The answer to PUBLISH: elements ``first .. first + count - 1``, accepted at ``stamp``.

    ``duplicate``: a keyed publish whose key was already stored (its original placement).
    ``discarded``: the topic has no group nor durable (and no retention): the elements were
    pushed to live subscribers and are not kept (FTL's confirm of a discard).
    """

    first: int
    count: int
    stamp: int
    duplicate: bool = False
    discarded: bool = False

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.count,
            offsets=[self.first],
            stamps=[self.stamp],
            flag=int(self.duplicate) | (int(self.discarded) << 1),
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != 1 or len(r.stamps) != 1:
            raise BadParameterError("malformed PUBLISH reply (no placement)")
        return cls(
            int(r.offsets[0]),
            int(r.number),
            int(r.stamps[0]),
            bool(r.flag & 1),
            bool(r.flag & 2),
        )


@attrs.frozen
class Fetched:
    """The answer to FETCH: a run of stored elements, and the channel's head and tail."""

    channel: int
    run: ElementRun
    head: int
    tail: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            channels=[self.channel],
            heads=[self.head],
            tails=[self.tail],
            **self.run.reply_fields(),
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.channels) != 1 or len(r.heads) != 1 or len(r.tails) != 1:
            raise BadParameterError("malformed FETCH reply (no channel state)")
        return cls(int(r.channels[0]), ElementRun.from_reply(r), int(r.heads[0]), int(r.tails[0]))


@attrs.frozen
class Commits:
    """The answer to COMMIT: the status of each channel's commit."""

    statuses: dict[int, CommitStatus]

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            channels=list(self.statuses),
            codes=[s.code for s in self.statuses.values()],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.codes) != len(r.channels):
            raise BadParameterError("malformed COMMIT reply (a status per channel)")
        return cls(
            {
                int(c): CommitStatus.from_code(code)
                for c, code in zip(r.channels, r.codes, strict=True)
            }
        )


@attrs.frozen
class Seeked:
    """The answer to SEEK: the offset each channel was moved to (-1: before its first)."""

    targets: dict[int, int]

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            channels=list(self.targets),
            offsets=list(self.targets.values()),
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != len(r.channels):
            raise BadParameterError("malformed SEEK reply (an offset per channel)")
        return cls({int(c): int(o) for c, o in zip(r.channels, r.offsets, strict=True)})


@attrs.frozen
class ChannelStates:
    """The answer to STATE: per channel, its head and tail (-1: empty) and, when the
    request named a group that exists, the group's commit (``committed``) and whether
    it was explicit (``explicit``); those two are empty otherwise."""

    channel_count: int
    channels: tuple[int, ...]
    heads: tuple[int, ...]
    tails: tuple[int, ...]
    committed: tuple[int, ...] = ()
    explicit: tuple[bool, ...] = ()

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.channel_count,
            channels=list(self.channels),
            heads=list(self.heads),
            tails=list(self.tails),
            offsets=list(self.committed),
            codes=[int(e) for e in self.explicit],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        n = len(r.channels)
        if len(r.heads) != n or len(r.tails) != n or len(r.offsets) not in (0, n):
            raise BadParameterError("malformed STATE reply (columns of different lengths)")
        return cls(
            int(r.number),
            _ints(r.channels),
            _ints(r.heads),
            _ints(r.tails),
            _ints(r.offsets),
            tuple(bool(c) for c in r.codes) if r.offsets else (),
        )


@attrs.frozen
class Membership:
    """The answer to JOIN and HEARTBEAT: the member's channels in assignment ``generation``
    of store ``incarnation``. ``exchange``: the store's key-exchange value answering a
    JOIN's offer (empty without a key, and in HEARTBEAT answers)."""

    generation: int
    incarnation: str
    channels: tuple[int, ...]
    exchange: bytes = b""

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.generation,
            text=self.incarnation,
            channels=list(self.channels),
            blob=self.exchange,
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number), r.text, _ints(r.channels), bytes(r.blob))


@attrs.frozen
class GroupDestroyed:
    """The answer to DESTROY_GROUP: whether the group existed."""

    existed: bool

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, flag=int(self.existed))

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bool(r.flag))


#: The wire code of a failure the client treats specially (a COMMIT's member refused).
PRECONDITION_NOT_MET = ErrorCode.PRECONDITION_NOT_MET
