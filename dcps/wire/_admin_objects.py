"""Administration of the store's durables, queues and maps (request kinds 75-81).

The requests of ``dcps durables``, ``dcps queues`` and ``dcps maps``, as
``dcps/wire/_admin.py`` has those of ``dcps groups``. Looking
(:class:`DescribeDurablesRequest`, :class:`DescribeQueuesRequest`,
:class:`DescribeMapsRequest`) needs only the namespace key and changes
nothing: describing a durable or a queue does not subscribe to it. Changing
(:class:`DeleteDurableRequest`, :class:`ResetDurableRequest`,
:class:`DeleteQueueRequest`, :class:`DeleteMapRequest`) is sealed with the
admin key (``request/delete_durable``, ``request/reset_durable``,
``request/delete_queue``, ``request/delete_map`` in ``DEFAULT_ADMIN_KINDS``).

Durables, queues and maps live in the coordinating store (share 0), so these
requests go to that store only. Reports travel as one JSON document in the
reply's ``blob``, as the group reports do.
"""

from __future__ import annotations

from typing import Any, ClassVar, Self

import attrs

from idl._errors import BadParameterError

from ._admin import ReportList, ResetGroupRequest, build_report
from ._codes import Op
from ._limits import check_wire_name
from ._messages import Reply, Request

__all__ = [
    "AdminObjectRequest",
    "DeleteDurableRequest",
    "DeleteMapRequest",
    "DeleteQueueRequest",
    "DescribeDurablesRequest",
    "DescribeMapsRequest",
    "DescribeQueuesRequest",
    "DurableChannelReport",
    "DurableDeleted",
    "DurableReport",
    "DurableSubscriberReport",
    "DurablesReport",
    "MapReport",
    "MapsReport",
    "QueueConsumerReport",
    "QueueReport",
    "QueuesReport",
    "ResetDurableRequest",
    "admin_object_requests",
]


def _force(r: Request) -> bool:
    if r.flag not in (0, 1):
        raise BadParameterError(f"request field 'flag' (force) is {r.flag}")
    return bool(r.flag)


# -- durables --------------------------------------------------------------------------------


@attrs.frozen
class DescribeDurablesRequest:
    """The durables of the store (of ``topic``; ``name`` of it when given): kind,
    subscribers, outstanding elements, and with ``channels`` the positions per channel.
    Nothing is subscribed.

    ``channels`` is for one durable (``dcps durables describe``): a list of every
    durable with every channel grows as durables times channels (8,000 durables of a
    128-channel topic: 85 MB, over ``MAX_REPORT_BYTES``, and the store's service
    thread busy for a minute and a half).
    """

    op: ClassVar[Op] = Op.DESCRIBE_DURABLES
    topic: str = ""
    name: str = ""
    channels: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.name,
            flag=int(self.channels),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (channels) is {r.flag}")
        topic = check_wire_name("topic", r.topic, required=False)
        name = check_wire_name("group (durable name)", r.group, required=False)
        if name and not topic:
            raise BadParameterError("a DESCRIBE_DURABLES naming a durable must name its topic")
        return cls(topic, name, bool(r.flag))


@attrs.frozen
class DeleteDurableRequest:
    """Delete durable ``name`` of ``topic`` and discard what it has not acknowledged (admin
    key); refused while it has subscribers unless ``force`` (they are then closed)."""

    op: ClassVar[Op] = Op.DELETE_DURABLE
    topic: str
    name: str
    force: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.name,
            flag=int(self.force),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        force = _force(r)
        return cls(
            check_wire_name("topic", r.topic),
            check_wire_name("group (durable name)", r.group),
            force,
        )


@attrs.frozen
class ResetDurableRequest(ResetGroupRequest):
    """Move what durable ``group`` of ``topic`` has acknowledged (admin key), as
    :class:`ResetGroupRequest` moves a group's commits: ``group`` is the durable's name.

    Every element before the new position of a channel counts as acknowledged,
    every one from it on as not (acknowledgements above it are forgotten).
    Refused while the durable has subscribers unless ``force`` (they are then
    closed), and for last-value durables (they acknowledge nothing).
    """

    op: ClassVar[Op] = Op.RESET_DURABLE


@attrs.frozen
class DurableDeleted:
    """The answer to DELETE_DURABLE: whether it existed, the subscribers it had and the
    elements it had not acknowledged (discarded; -1 for a last-value durable)."""

    existed: bool
    subscribers: int = 0
    discarded: int = 0

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            flag=int(self.existed),
            number=self.discarded,
            offsets=[self.subscribers],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != 1:
            raise BadParameterError("malformed DELETE_DURABLE reply (one subscriber count)")
        return cls(bool(r.flag), int(r.offsets[0]), int(r.number))


@attrs.frozen
class DurableSubscriberReport:
    """A subscriber of a durable: the elements it holds (delivered, not acknowledged),
    its window (0: unlimited), timeout and seconds since it was last heard of."""

    name: str
    held: int
    window: int
    timeout_s: float
    idle_s: float
    filter: str = ""


@attrs.frozen
class DurableChannelReport:
    """A durable in one channel.

    ``acked_through``: every offset up to it is acknowledged (-1: none);
    ``acked_above``: offsets acknowledged above it; ``next_new``: the first
    offset never delivered since the store started; ``head``/``tail``: what
    the channel stores (tail -1: empty).
    """

    channel: int
    acked_through: int
    acked_above: int
    next_new: int
    head: int
    tail: int

    @property
    def position(self) -> int:
        """The first offset not acknowledged (where a reset to it would leave the durable)."""
        return self.acked_through + 1


@attrs.frozen
class DurableReport:
    """A durable of a channelled topic.

    ``outstanding``: elements not acknowledged (delivered or not; -1 for a
    last-value durable); ``unacked``: those of them out with a subscriber;
    ``ttl_ms``: how long it outlives its last subscriber (-1: for ever).
    """

    topic: str
    name: str
    kind: str
    persistent: bool
    filter: str
    ttl_ms: int
    outstanding: int
    unacked: int
    subscribers: tuple[DurableSubscriberReport, ...]
    channels: tuple[DurableChannelReport, ...] = ()
    idle_s: float = 0.0

    @property
    def active(self) -> bool:
        """True while it has subscribers."""
        return bool(self.subscribers)

    @property
    def pending(self) -> int:
        """Elements not delivered to anybody yet (-1 for a last-value durable)."""
        return -1 if self.outstanding < 0 else max(0, self.outstanding - self.unacked)

    @classmethod
    def of(cls, data: dict[str, Any]) -> DurableReport:
        """From its JSON form."""
        subs = tuple(
            build_report(DurableSubscriberReport, s, "durable") for s in data.get("subscribers", ())
        )
        channels = tuple(
            build_report(DurableChannelReport, c, "durable") for c in data.get("channels", ())
        )
        fields = {**data, "subscribers": subs, "channels": channels}
        return build_report(cls, fields, "durable")  # type: ignore[no-any-return]


@attrs.frozen
class DurablesReport(ReportList):
    """The answer to DESCRIBE_DURABLES."""

    report: ClassVar[Any] = DurableReport
    answer_to: ClassVar[str] = "DESCRIBE_DURABLES"
    durables: tuple[DurableReport, ...]


# -- queues ------------------------------------------------------------------------------------


@attrs.frozen
class DescribeQueuesRequest:
    """The queues of the store (``queue``: only that one): stored, pending and unacknowledged
    elements, consumers. Nothing is subscribed."""

    op: ClassVar[Op] = Op.DESCRIBE_QUEUES
    queue: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(client=client, request_id=request_id, op=self.op, topic=self.queue)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(check_wire_name("topic (queue name)", r.topic, required=False))


@attrs.frozen
class DeleteQueueRequest:
    """Delete ``queue`` and discard its elements (admin key); refused while it has consumers
    unless ``force`` (their next request is told the queue was deleted). The answer is a
    :class:`~dcps.wire._queues.QueueDeleted`."""

    op: ClassVar[Op] = Op.DELETE_QUEUE
    queue: str
    force: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client, request_id=request_id, op=self.op, topic=self.queue, flag=int(self.force)
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        force = _force(r)
        return cls(check_wire_name("topic (queue name)", r.topic), force)


@attrs.frozen
class QueueConsumerReport:
    """A consumer of a queue: the elements it holds, its timeout and idle seconds."""

    name: str
    held: int
    timeout_s: float
    idle_s: float


@attrs.frozen
class QueueReport:
    """A queue: ``stored`` elements (not acknowledged), of which ``unacked`` are out with a
    consumer; the sequence number of the next element published."""

    name: str
    type_identity: str
    stored: int
    unacked: int
    next_seq: int
    consumers: tuple[QueueConsumerReport, ...]

    @property
    def pending(self) -> int:
        """Elements waiting for a consumer."""
        return self.stored - self.unacked

    @property
    def active(self) -> bool:
        """True while it has consumers."""
        return bool(self.consumers)

    @classmethod
    def of(cls, data: dict[str, Any]) -> QueueReport:
        """From its JSON form."""
        consumers = tuple(
            build_report(QueueConsumerReport, c, "queue") for c in data.get("consumers", ())
        )
        return build_report(cls, {**data, "consumers": consumers}, "queue")  # type: ignore[no-any-return]


@attrs.frozen
class QueuesReport(ReportList):
    """The answer to DESCRIBE_QUEUES."""

    report: ClassVar[Any] = QueueReport
    answer_to: ClassVar[str] = "DESCRIBE_QUEUES"
    queues: tuple[QueueReport, ...]


# -- maps ---------------------------------------------------------------------------------------


@attrs.frozen
class DescribeMapsRequest:
    """The key-value maps of the store (``map``: only that one): keys, revision, size."""

    op: ClassVar[Op] = Op.DESCRIBE_MAPS
    map: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(client=client, request_id=request_id, op=self.op, topic=self.map)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(check_wire_name("topic (map name)", r.topic, required=False))


@attrs.frozen
class DeleteMapRequest:
    """Drop map ``map``: every key goes, watchers are told (admin key). The answer is a
    :class:`~dcps.wire._maps.MapDropped`."""

    op: ClassVar[Op] = Op.DELETE_MAP
    map: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(client=client, request_id=request_id, op=self.op, topic=self.map)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(check_wire_name("topic (map name)", r.topic))


@attrs.frozen
class MapReport:
    """A key-value map: live ``keys``, their values' ``bytes``, the last ``revision``, the
    revision of its last drop (0: never) and the changes its history keeps for watchers."""

    name: str
    type_name: str
    type_identity: str
    keys: int
    bytes: int
    revision: int
    dropped_revision: int
    history: int

    @classmethod
    def of(cls, data: dict[str, Any]) -> MapReport:
        """From its JSON form."""
        return build_report(cls, data, "map")  # type: ignore[no-any-return]


@attrs.frozen
class MapsReport(ReportList):
    """The answer to DESCRIBE_MAPS."""

    report: ClassVar[Any] = MapReport
    answer_to: ClassVar[str] = "DESCRIBE_MAPS"
    maps: tuple[MapReport, ...]


AdminObjectRequest = (
    DescribeDurablesRequest
    | DeleteDurableRequest
    | ResetDurableRequest
    | DescribeQueuesRequest
    | DeleteQueueRequest
    | DescribeMapsRequest
    | DeleteMapRequest
)


def admin_object_requests() -> tuple[type[AdminObjectRequest], ...]:
    """The request classes of this module (registered in ``_requests._DECODERS``)."""
    return (
        DescribeDurablesRequest,
        DeleteDurableRequest,
        ResetDurableRequest,
        DescribeQueuesRequest,
        DeleteQueueRequest,
        DescribeMapsRequest,
        DeleteMapRequest,
    )
