"""Queues on the wire: requests ``QUEUE_*`` (Op 50-59) and their replies.

A queue (FTL's point-to-point destination) is a named list of elements in
the store, each numbered by a *sequence number* (dense from 1 per queue, never
reused). Publishing stores elements whether or not a subscriber exists;
subscribers (consumers) ``QUEUE_SUBSCRIBE``, then ``QUEUE_RECEIVE`` elements
(each element goes to one consumer at a time), and ``QUEUE_ACK`` them (an
acknowledged element is deleted) or roll them back (redelivered, to any
consumer, with its delivery count). A consumer silent for its timeout, or
that leaves, gives its unacknowledged elements back. ``QUEUE_DELETE`` is an
admin request (sealed with the admin key when the namespace has a key).
"""

from __future__ import annotations

from typing import ClassVar, Final, Self

import attrs

from idl._errors import BadParameterError

from ._codes import Op
from ._limits import MAX_BATCH_ELEMENTS, MAX_ELEMENT_SIZE, check_wire_name
from ._messages import Reply, Request

__all__ = [
    "MAX_QUEUE_RECEIVE",
    "MAX_RECEIVE_WAIT_MS",
    "QueueAckRequest",
    "QueueAcked",
    "QueueDeleteRequest",
    "QueueDeleted",
    "QueueDelivery",
    "QueueHeartbeatRequest",
    "QueueLeaveRequest",
    "QueuePublishRequest",
    "QueuePublished",
    "QueueReceiveRequest",
    "QueueState",
    "QueueStateRequest",
    "QueueSubscribeRequest",
    "QueueSubscribed",
    "queue_secret_group",
]

#: Most elements one QUEUE_RECEIVE may ask for.
MAX_QUEUE_RECEIVE: Final = 10_000
#: Longest a QUEUE_RECEIVE may wait in the store for elements (ms); below a client's
#: request timeout so the answer always comes in time.
MAX_RECEIVE_WAIT_MS: Final = 5_000
#: Most sequence numbers one QUEUE_ACK carries.
MAX_QUEUE_ACK: Final = 100_000


def queue_secret_group(queue: str) -> str:
    """The group name a queue consumer's secret is derived for (store and consumer alike);
    no channel group can have it (``~`` is reserved)."""
    return f"~queue/{queue}"


def _queue(r: Request) -> str:
    return check_wire_name("topic (queue name)", r.topic)


def _consumer(r: Request) -> tuple[str, str]:
    return _queue(r), check_wire_name("member (consumer)", r.member)


def _request(op: Op, client: str, request_id: int, **fields: object) -> Request:
    return Request(client=client, request_id=request_id, op=op, **fields)  # type: ignore[arg-type]


# -- requests -------------------------------------------------------------------------------


@attrs.frozen
class QueuePublishRequest:
    """Store elements (``sizes`` of the CDR samples concatenated in ``blob``) in ``queue``.

    Creates the queue if needed; ``type_identity`` is recorded by the first
    publisher or subscriber and checked for later ones.
    """

    op: ClassVar[Op] = Op.QUEUE_PUBLISH
    queue: str
    sizes: tuple[int, ...]
    blob: bytes
    type_identity: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.queue,
            text=self.type_identity,
            sizes=list(self.sizes),
            blob=self.blob,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        queue = _queue(r)
        sizes = r.sizes
        if not 1 <= len(sizes) <= MAX_BATCH_ELEMENTS:
            raise BadParameterError(
                f"a QUEUE_PUBLISH to queue {queue!r} carries {len(sizes)} elements: "
                f"1..{MAX_BATCH_ELEMENTS} (MAX_BATCH_ELEMENTS)"
            )
        if min(sizes) < 1 or max(sizes) > MAX_ELEMENT_SIZE:
            raise BadParameterError(
                f"a QUEUE_PUBLISH to queue {queue!r} carries an element of "
                f"{min(sizes) if min(sizes) < 1 else max(sizes)} bytes: "
                f"1..{MAX_ELEMENT_SIZE} (MAX_ELEMENT_SIZE)"
            )
        if sum(sizes) != len(r.blob):
            raise BadParameterError(
                f"a QUEUE_PUBLISH's element sizes add up to {sum(sizes)} bytes, "
                f"but its blob has {len(r.blob)}"
            )
        return cls(
            queue,
            tuple(int(s) for s in sizes),
            bytes(r.blob),
            check_wire_name("text (type identity)", r.text, required=False),
        )


@attrs.frozen
class QueueSubscribeRequest:
    """``consumer`` subscribes to ``queue`` (created if needed); expelled after
    ``timeout_ms`` without a request (its elements are then redelivered).

    ``offer``: the consumer's key-exchange offer (with a namespace key; see
    ``_auth_member.py``): its receives, acks, heartbeats and leave then carry
    the proof of the secret agreed, as a group member's commits do."""

    op: ClassVar[Op] = Op.QUEUE_SUBSCRIBE
    queue: str
    consumer: str
    timeout_ms: int
    type_identity: str = ""
    offer: bytes = b""

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.queue,
            member=self.consumer,
            number=self.timeout_ms,
            text=self.type_identity,
            blob=self.offer,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        queue, consumer = _consumer(r)
        if not 0 < r.number <= 2**31:
            raise BadParameterError(f"request field 'number' (consumer timeout) is {r.number}")
        if len(r.blob) > 1024:
            raise BadParameterError("a key-exchange offer has at most 1024 bytes")
        return cls(
            queue,
            consumer,
            int(r.number),
            check_wire_name("text (type identity)", r.text, required=False),
            bytes(r.blob),
        )


@attrs.frozen
class QueueSubscribed:
    """The answer to QUEUE_SUBSCRIBE: ``exchange``, the store's half of the consumer's key
    exchange (empty without a namespace key)."""

    exchange: bytes = b""

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, blob=self.exchange)

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bytes(r.blob))


@attrs.frozen
class QueueReceiveRequest:
    """Up to ``max_count`` elements for ``consumer``, waiting up to ``wait_ms`` for one."""

    op: ClassVar[Op] = Op.QUEUE_RECEIVE
    queue: str
    consumer: str
    max_count: int
    wait_ms: int = 0

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.queue,
            member=self.consumer,
            number=self.max_count,
            flag=self.wait_ms,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        queue, consumer = _consumer(r)
        if not 1 <= r.number <= MAX_QUEUE_RECEIVE:
            raise BadParameterError(
                f"a QUEUE_RECEIVE asks for {r.number} elements: "
                f"1..{MAX_QUEUE_RECEIVE} (MAX_QUEUE_RECEIVE)"
            )
        if not 0 <= r.flag <= MAX_RECEIVE_WAIT_MS:
            raise BadParameterError(
                f"a QUEUE_RECEIVE waits {r.flag} ms: 0..{MAX_RECEIVE_WAIT_MS} (MAX_RECEIVE_WAIT_MS)"
            )
        return cls(queue, consumer, int(r.number), int(r.flag))


@attrs.frozen
class QueueAckRequest:
    """``consumer`` acknowledges (or, ``rollback``, gives back) elements ``seqs``."""

    op: ClassVar[Op] = Op.QUEUE_ACK
    queue: str
    consumer: str
    seqs: tuple[int, ...]
    rollback: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.queue,
            member=self.consumer,
            offsets=list(self.seqs),
            flag=int(self.rollback),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        queue, consumer = _consumer(r)
        if not 1 <= len(r.offsets) <= MAX_QUEUE_ACK:
            raise BadParameterError(
                f"a QUEUE_ACK names {len(r.offsets)} elements: 1..{MAX_QUEUE_ACK}"
            )
        if min(r.offsets) < 1:
            raise BadParameterError(
                f"a QUEUE_ACK names sequence number {min(r.offsets)}: they start at 1"
            )
        if len(set(r.offsets)) != len(r.offsets):
            raise BadParameterError(f"a QUEUE_ACK of queue {queue!r} names an element twice")
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (rollback) is {r.flag}")
        return cls(queue, consumer, tuple(int(s) for s in r.offsets), bool(r.flag))


@attrs.frozen
class QueueHeartbeatRequest:
    """``consumer`` of ``queue`` is alive."""

    op: ClassVar[Op] = Op.QUEUE_HEARTBEAT
    queue: str
    consumer: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(self.op, client, request_id, topic=self.queue, member=self.consumer)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(*_consumer(r))


@attrs.frozen
class QueueLeaveRequest:
    """``consumer`` leaves ``queue``; its unacknowledged elements are redelivered."""

    op: ClassVar[Op] = Op.QUEUE_LEAVE
    queue: str
    consumer: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(self.op, client, request_id, topic=self.queue, member=self.consumer)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(*_consumer(r))


@attrs.frozen
class QueueDeleteRequest:
    """Delete ``queue`` and discard its pending elements (an admin request)."""

    op: ClassVar[Op] = Op.QUEUE_DELETE
    queue: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(self.op, client, request_id, topic=self.queue)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(_queue(r))


@attrs.frozen
class QueueStateRequest:
    """How many elements ``queue`` stores, how many are out for acknowledgement, and
    how many consumers it has."""

    op: ClassVar[Op] = Op.QUEUE_STATE
    queue: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(self.op, client, request_id, topic=self.queue)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(_queue(r))


QUEUE_REQUESTS: Final = (
    QueuePublishRequest,
    QueueSubscribeRequest,
    QueueReceiveRequest,
    QueueAckRequest,
    QueueLeaveRequest,
    QueueDeleteRequest,
    QueueStateRequest,
    QueueHeartbeatRequest,
)

AnyQueueRequest = (
    QueuePublishRequest
    | QueueSubscribeRequest
    | QueueReceiveRequest
    | QueueAckRequest
    | QueueLeaveRequest
    | QueueDeleteRequest
    | QueueStateRequest
    | QueueHeartbeatRequest
)


# -- replies --------------------------------------------------------------------------------


@attrs.frozen
class QueuePublished:
    """The answer to QUEUE_PUBLISH: the elements got sequence numbers ``first ..
    first + count - 1``."""

    first: int
    count: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, offsets=[self.first], number=self.count)

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != 1:
            raise BadParameterError("malformed QUEUE_PUBLISH reply (no sequence number)")
        return cls(int(r.offsets[0]), int(r.number))


@attrs.frozen
class QueueDelivery:
    """The answer to QUEUE_RECEIVE: elements (``sizes``/``blob``), their sequence numbers
    and delivery counts (1: first delivery)."""

    seqs: tuple[int, ...]
    deliveries: tuple[int, ...]
    sizes: tuple[int, ...]
    blob: bytes

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            offsets=list(self.seqs),
            codes=list(self.deliveries),
            sizes=list(self.sizes),
            blob=self.blob,
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        n = len(r.offsets)
        if len(r.codes) != n or len(r.sizes) != n or sum(r.sizes) != len(r.blob):
            raise BadParameterError("malformed QUEUE_RECEIVE reply (columns differ)")
        return cls(
            tuple(int(s) for s in r.offsets),
            tuple(int(c) for c in r.codes),
            tuple(int(s) for s in r.sizes),
            bytes(r.blob),
        )


@attrs.frozen
class QueueAcked:
    """The answer to QUEUE_ACK: how many elements were acknowledged or rolled back."""

    count: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, number=self.count)

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number))


@attrs.frozen
class QueueDeleted:
    """The answer to QUEUE_DELETE: whether the queue existed, and how many elements
    were discarded."""

    existed: bool
    discarded: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client, request_id=request_id, flag=int(self.existed), number=self.discarded
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bool(r.flag), int(r.number))


@attrs.frozen
class QueueState:
    """The answer to QUEUE_STATE: elements stored (unacknowledged, delivered or not), those
    out with consumers, and the consumers."""

    stored: int
    in_flight: int
    consumers: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            offsets=[self.stored, self.in_flight, self.consumers],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != 3:
            raise BadParameterError("malformed QUEUE_STATE reply")
        return cls(int(r.offsets[0]), int(r.offsets[1]), int(r.offsets[2]))
