"""Durable subscriptions on the wire: request kinds 20-39, their replies, kinds and statuses.

A durable is a named consumer of one channelled topic kept by the store
(seeds 001 and 002): its acknowledgement floor and the acknowledged offsets
above it, its subscribers, their windows of unacknowledged elements. Each
request is a frozen value with ``to_wire`` (client) and ``from_wire`` (store,
validating it whole, like ``_requests.py``); each reply a frozen value with
``to_wire`` (store) and ``from_wire`` (client).

Acknowledged positions travel as runs of consecutive offsets (a window of
64 elements of one channel is one run), and a poll carries the
acknowledgements made since the previous one, so one round trip both
settles a window and fetches the next (``DurablePollRequest.acks``).

=======================  =====================================================
request (Op)             fields of :class:`~dcps.wire._messages.Request`
=======================  =====================================================
DURABLE_SUBSCRIBE (20)   topic, group = durable name, member = subscriber id,
                         number = window (0: unlimited), flag = persistent | 2 *
                         anonymous | 4 * replace, text = filter, sizes = [kind, start mode,
                         timeout ms], offsets = [ttl ms, start offsets...],
                         channels = the start offsets' channels, blob = the
                         subscriber's key-exchange offer (with a namespace key)
DURABLE_POLL (21)        topic, group, member, number = most elements,
                         sizes = [wait ms, run lengths...], channels[i],
                         offsets[i] = the runs of elements acknowledged with
                         the poll (run i: sizes[i + 1] offsets from offsets[i])
DURABLE_ACK (22)         topic, group, member, runs: channels[i], offsets[i]
                         (first offset), sizes[i] (run length)
DURABLE_ROLLBACK (23)    the same as DURABLE_ACK
DURABLE_CLOSE (24)       topic, group, member
DURABLE_UNSUBSCRIBE (25) topic, group, flag = 1: whatever its topic (topic may be empty)
DURABLE_INFO (26)        topic, group
TEMPORARY_TOPIC (27)     topic (named :data:`TEMPORARY_TOPIC_PREFIX` ...), flag =
                         :class:`TemporaryAction`, number = lease ms (CLAIM),
                         member = the subscriber id a GRANT lets consume
DURABLE_TX_ACK (28)      as DURABLE_ACK, text = transaction query, number = epoch
TX_COMMIT (29)           group = transaction query, number = epoch, blob = the
                         stages as JSON ``[[topic, stage, chunks(, digest)], ...]``,
                         text = the transaction key's proof (with a namespace key:
                         :func:`tx_signed`)
TX_ABORT (30)            the same as TX_COMMIT
=======================  =====================================================
"""

from __future__ import annotations

import enum
import json
import re
from typing import ClassVar, Self

import attrs

from idl._errors import BadParameterError

from ._codes import Op
from ._limits import MAX_CHANNELS, MAX_ELEMENT_SIZE, check_channels, check_wire_name
from ._messages import Reply, Request

__all__ = [
    "DURABLE_GROUP_PREFIX",
    "DURABLE_REQUESTS",
    "MAX_DURABLE_ACKS",
    "MAX_DURABLE_POLL",
    "MAX_DURABLE_WAIT_MS",
    "MAX_DURABLE_WINDOW",
    "MAX_TX_PROOF",
    "MAX_TX_STAGES",
    "TEMPORARY_TOPIC_PREFIX",
    "AckStatus",
    "DurableAckRequest",
    "DurableAcked",
    "DurableCloseRequest",
    "DurableDelivery",
    "DurableInfo",
    "DurableInfoRequest",
    "DurableKind",
    "DurablePollRequest",
    "DurableRequest",
    "DurableRollbackRequest",
    "DurableSubscribeRequest",
    "DurableSubscribed",
    "DurableTxAckRequest",
    "DurableUnsubscribeRequest",
    "DurableUnsubscribed",
    "Notice",
    "StartMode",
    "TemporaryAction",
    "TemporaryTopicRequest",
    "TxAbortRequest",
    "TxCommitRequest",
    "TxCommitted",
    "to_runs",
    "tx_signed",
]

#: Log group name prefix of a durable's floors, and the group its subscribers' secrets are
#: derived for. A backslash never passes a wire name check, so no client can address
#: (commit, seek, read, join) a durable's group as a group.
DURABLE_GROUP_PREFIX = "\\durable\\"
#: Most elements one DURABLE_POLL may ask for.
MAX_DURABLE_POLL = 65_536
#: Largest window a subscriber may ask for (0 stands for unlimited).
MAX_DURABLE_WINDOW = 1_000_000
#: Longest a DURABLE_POLL may wait at the store for elements (well below a request timeout).
MAX_DURABLE_WAIT_MS = 5_000
#: Longest subscriber timeout, in ms (one day).
_MAX_TIMEOUT_MS = 86_400_000
#: Most positions one DURABLE_ACK / DURABLE_ROLLBACK may carry.
MAX_DURABLE_ACKS = 100_000


class DurableKind(enum.Enum):
    """The type of a durable subscription (seeds 001 and 002).

    .. versionadded:: 0.3
    """

    EXCLUSIVE = "exclusive"
    """One active subscriber; a second one is refused (Universal Messaging "named")."""
    SHARED = "shared"
    """Several subscribers served round-robin in windows; per-element ack and rollback."""
    SERIAL = "serial"
    """Several subscribers; only one holds unacknowledged elements at a time, in order."""
    STANDARD = "standard"
    """One subscriber; a second one with the same name takes over (FTL "standard")."""
    LAST_VALUE = "last_value"
    """The last element of each sibling topic, then live updates; no acknowledgements."""

    @property
    def code(self) -> int:
        """The kind's number on the wire."""
        return _KIND_CODES[self]

    @classmethod
    def from_code(cls, code: int) -> DurableKind:
        """The kind a wire number stands for; an unknown one raises ``BadParameterError``."""
        try:
            return _KINDS[code]
        except KeyError:
            raise BadParameterError(f"unknown durable kind code {code!r} on the wire") from None

    @property
    def acknowledged(self) -> bool:
        """Whether its subscribers acknowledge elements (all but last-value)."""
        return self is not DurableKind.LAST_VALUE


_KIND_CODES = {
    DurableKind.EXCLUSIVE: 0,
    DurableKind.SHARED: 1,
    DurableKind.SERIAL: 2,
    DurableKind.STANDARD: 3,
    DurableKind.LAST_VALUE: 4,
}
_KINDS = {code: kind for kind, code in _KIND_CODES.items()}


class StartMode(enum.IntEnum):
    """Where a new durable starts: the head (oldest kept), the tail (only new ones), positions."""

    HEAD = 0
    TAIL = 1
    POSITIONS = 2


class AckStatus(enum.IntEnum):
    """The outcome of acknowledging or rolling back one element (``Reply.codes``)."""

    DONE = 0
    """Acknowledged (DURABLE_ACK) or released for redelivery (DURABLE_ROLLBACK)."""
    ALREADY_ACKED = 1
    """The element was acknowledged before."""
    NOT_HELD = 2
    """The subscriber does not hold the element (another one does, or none)."""
    NO_ELEMENT = 3
    """No such element in the durable (beyond the tail, or released)."""


class Notice(enum.IntFlag):
    """Asynchronous news for a subscriber, carried by its next poll's answer (``Reply.flag``)."""

    NONE = 0
    FILTER_CONFLICT = 1
    """A later subscriber named another filter: it now decides what the durable keeps."""
    CLOSED = 2
    """The subscriber was closed by the store (taken over, expired, or the durable destroyed)."""


def _bounded(value: int, field: str, low: int, high: int) -> int:
    if not low <= value <= high:
        raise BadParameterError(f"request field {field!r} is {value}: it must be {low}..{high}")
    return int(value)


def _durable_fields(r: Request, *, member: bool = True) -> tuple[str, str, str]:
    return (
        check_wire_name("topic", r.topic),
        check_wire_name("group (durable name)", r.group),
        check_wire_name("member (subscriber)", r.member) if member else "",
    )


def to_runs(positions: tuple[tuple[int, int], ...]) -> tuple[list[int], list[int], list[int]]:
    """``positions`` as runs of consecutive offsets: (channels, first offsets, lengths).

    Consecutive positions of one channel with consecutive offsets make one
    run; the order of the positions is kept (runs are not merged across it).
    """
    channels: list[int] = []
    firsts: list[int] = []
    lengths: list[int] = []
    last_c = last_o = -2
    for c, o in positions:
        if c == last_c and o == last_o + 1:
            lengths[-1] += 1
        else:
            channels.append(c)
            firsts.append(o)
            lengths.append(1)
        last_c, last_o = c, o
    return channels, firsts, lengths


def _runs(r: Request, lengths: list[int]) -> tuple[tuple[int, int], ...]:
    """The positions of the runs a request carries, validated whole (bounded, in range)."""
    if not len(r.channels) == len(r.offsets) == len(lengths):
        raise BadParameterError(
            f"request fields 'channels', 'offsets' and the run lengths differ in length "
            f"({len(r.channels)}, {len(r.offsets)} and {len(lengths)})"
        )
    if not lengths:
        return ()
    if min(lengths) < 1:
        raise BadParameterError("a run of acknowledged positions has length >= 1")
    total = sum(lengths)
    if total > MAX_DURABLE_ACKS:
        raise BadParameterError(
            f"{total} positions in one request; the limit is {MAX_DURABLE_ACKS}"
        )
    if not (min(r.channels) >= 0 and max(r.channels) < MAX_CHANNELS):
        raise BadParameterError(f"request field 'channels': channels are 0..{MAX_CHANNELS - 1}")
    if min(r.offsets) < 0:
        raise BadParameterError(f"request field 'offsets' holds {min(r.offsets)}: offsets >= 0")
    out: list[tuple[int, int]] = []
    for c, first, n in zip(r.channels, r.offsets, lengths, strict=True):
        c, first = int(c), int(first)
        out.extend((c, o) for o in range(first, first + int(n)))
    return tuple(out)


@attrs.frozen
class DurableSubscribeRequest:
    """Subscribe ``subscriber`` to durable ``name`` of ``topic``, creating it if new.

    ``window`` is the most unacknowledged elements the subscriber holds (0:
    unlimited); ``timeout_ms`` of silence closes it (its elements go back for
    redelivery). A new durable starts at ``start`` (at ``starts`` per channel
    for :attr:`StartMode.POSITIONS`: the first offset to deliver); ``ttl_ms``
    (-1: none) deletes it after that long without a subscriber.
    """

    op: ClassVar[Op] = Op.DURABLE_SUBSCRIBE
    topic: str
    name: str
    subscriber: str
    kind: DurableKind
    window: int = 0
    persistent: bool = True
    anonymous: bool = False
    filter: str = ""
    start: StartMode = StartMode.HEAD
    starts: tuple[tuple[int, int], ...] = ()
    timeout_ms: int = 10_000
    ttl_ms: int = -1
    replace: bool = False
    """An idle durable of this name and kind with another topic or filter is deleted and
    created anew (JMS's rule for unshared durable subscriptions)."""
    #: The subscriber's key-exchange offer (with a namespace key; see ``_auth_member.py``).
    offer: bytes = b""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.DURABLE_SUBSCRIBE,
            blob=self.offer,
            topic=self.topic,
            group=self.name,
            member=self.subscriber,
            number=self.window,
            flag=int(self.persistent) | 2 * int(self.anonymous) | 4 * int(self.replace),
            text=self.filter,
            sizes=[self.kind.code, int(self.start), self.timeout_ms],
            offsets=[self.ttl_ms, *(o for _, o in self.starts)],
            channels=[c for c, _ in self.starts],
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic, name, subscriber = _durable_fields(r)
        if len(r.sizes) != 3:
            raise BadParameterError("request field 'sizes' must hold [kind, start, timeout_ms]")
        kind = DurableKind.from_code(int(r.sizes[0]))
        try:
            start = StartMode(int(r.sizes[1]))
        except ValueError:
            raise BadParameterError(
                f"request field 'sizes' names start mode {r.sizes[1]}"
            ) from None
        timeout_ms = _bounded(int(r.sizes[2]), "sizes (timeout_ms)", 1, _MAX_TIMEOUT_MS)
        window = _bounded(int(r.number), "number (window)", 0, MAX_DURABLE_WINDOW)
        if not 0 <= r.flag <= 7:
            raise BadParameterError(
                f"request field 'flag' (persistent, anonymous, replace) is {r.flag}"
            )
        if not r.offsets:
            raise BadParameterError("request field 'offsets' must start with the durable's TTL")
        ttl_ms = int(r.offsets[0])
        if ttl_ms < -1:
            raise BadParameterError(f"a durable TTL of {ttl_ms} ms: it is >= 0, or -1 for none")
        check_channels(r.channels, parallel=r.offsets[1:])
        if start is not StartMode.POSITIONS and r.channels:
            raise BadParameterError("start offsets are given only with start mode POSITIONS")
        if any(o < 0 for o in r.offsets[1:]):
            raise BadParameterError("a durable's start offsets are >= 0")
        if len(r.text) > 4096:
            raise BadParameterError("a durable filter has at most 4096 characters")
        if len(r.blob) > 1024:
            raise BadParameterError("a key-exchange offer has at most 1024 bytes")
        return cls(
            topic,
            name,
            subscriber,
            kind,
            window,
            bool(r.flag & 1),
            bool(r.flag & 2),
            r.text,
            start,
            tuple(zip((int(c) for c in r.channels), (int(o) for o in r.offsets[1:]), strict=True)),
            timeout_ms,
            ttl_ms,
            bool(r.flag & 4),
            bytes(r.blob),
        )


@attrs.frozen
class DurablePollRequest:
    """Up to ``count`` elements for ``subscriber``; the store may hold it ``wait_ms``.

    ``acks``: positions the subscriber acknowledges first (as DURABLE_ACK
    would; refusals come back in :attr:`DurableDelivery.refused`), so
    one round trip settles a window and asks for the next.
    """

    op: ClassVar[Op] = Op.DURABLE_POLL
    topic: str
    name: str
    subscriber: str
    count: int
    wait_ms: int = 0
    acks: tuple[tuple[int, int], ...] = ()

    def to_wire(self, client: str, request_id: int) -> Request:
        channels, firsts, lengths = to_runs(self.acks)
        return Request(
            client=client,
            request_id=request_id,
            op=Op.DURABLE_POLL,
            topic=self.topic,
            group=self.name,
            member=self.subscriber,
            number=self.count,
            sizes=[self.wait_ms, *lengths],
            channels=channels,
            offsets=firsts,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic, name, subscriber = _durable_fields(r)
        if len(r.sizes) < 1:
            raise BadParameterError("request field 'sizes' must hold [wait_ms, run lengths...]")
        return cls(
            topic,
            name,
            subscriber,
            _bounded(int(r.number), "number (count)", 1, MAX_DURABLE_POLL),
            _bounded(int(r.sizes[0]), "sizes (wait_ms)", 0, MAX_DURABLE_WAIT_MS),
            _runs(r, list(r.sizes[1:])),
        )


@attrs.frozen
class DurableAckRequest:
    """``subscriber`` acknowledges the elements at ``positions`` ((channel, offset) each)."""

    op: ClassVar[Op] = Op.DURABLE_ACK
    topic: str
    name: str
    subscriber: str
    positions: tuple[tuple[int, int], ...]

    def to_wire(self, client: str, request_id: int) -> Request:
        channels, firsts, lengths = to_runs(self.positions)
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.name,
            member=self.subscriber,
            channels=channels,
            offsets=firsts,
            sizes=lengths,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(*_durable_fields(r), _runs(r, list(r.sizes)))


@attrs.frozen
class DurableRollbackRequest(DurableAckRequest):
    """``subscriber`` gives the elements at ``positions`` back for redelivery."""

    op: ClassVar[Op] = Op.DURABLE_ROLLBACK


@attrs.frozen
class DurableCloseRequest:
    """``subscriber`` leaves the durable (its unacknowledged elements are redelivered)."""

    op: ClassVar[Op] = Op.DURABLE_CLOSE
    topic: str
    name: str
    subscriber: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.name,
            member=self.subscriber,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(*_durable_fields(r))


@attrs.frozen
class DurableUnsubscribeRequest:
    """Destroy durable ``name`` and discard its pending elements (refused while subscribed)."""

    op: ClassVar[Op] = Op.DURABLE_UNSUBSCRIBE
    topic: str
    name: str
    any_topic: bool = False
    """Whatever the durable's topic (``topic`` may be empty): JMS unsubscribes by name."""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.name,
            flag=int(self.any_topic),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (any topic) is {r.flag}")
        any_topic = bool(r.flag)
        topic = check_wire_name("topic", r.topic, required=not any_topic)
        return cls(topic, check_wire_name("group (durable name)", r.group), any_topic)


@attrs.frozen
class DurableInfoRequest(DurableUnsubscribeRequest):
    """The state of durable ``name``: kind, subscribers, outstanding elements."""

    op: ClassVar[Op] = Op.DURABLE_INFO


# -- replies --------------------------------------------------------------------------


@attrs.frozen
class DurableSubscribed:
    """The answer to DURABLE_SUBSCRIBE: the durable's kind, channel count and filter in effect.

    ``created``: the durable is new. ``exchange``: the store's half of the
    subscriber's key exchange (with a namespace key): the member secret it
    completes proves the subscriber's later requests.
    """

    kind: DurableKind
    channel_count: int
    created: bool
    filter: str = ""
    exchange: bytes = b""

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.channel_count,
            flag=int(self.created),
            codes=[self.kind.code],
            text=self.filter,
            blob=self.exchange,
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.codes) != 1:
            raise BadParameterError("malformed DURABLE_SUBSCRIBE reply (no kind)")
        return cls(
            DurableKind.from_code(int(r.codes[0])),
            int(r.number),
            bool(r.flag),
            r.text,
            bytes(r.blob),
        )


@attrs.frozen
class DurableDelivery:
    """The answer to DURABLE_POLL: elements, each with its position and redelivery count.

    ``notice`` and ``message`` carry asynchronous
    news (:class:`Notice`); ``outstanding`` is the durable's count of
    elements not acknowledged yet (-1 for last-value durables).
    ``refused``: acknowledgements a poll carried that were refused, as
    ``(channel, offset, status)``. (A poll waiting at the store is answered
    with the elements a later poll of the same subscriber freed, and the
    later one waits in its place, so the refusals name their positions.)
    """

    channels: tuple[int, ...] = ()
    offsets: tuple[int, ...] = ()
    redeliveries: tuple[int, ...] = ()
    stamps: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()
    data: bytes = b""
    notice: Notice = Notice.NONE
    message: str = ""
    outstanding: int = 0
    refused: tuple[tuple[int, int, AckStatus], ...] = ()

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            sizes=[int(s) for _, _, s in self.refused],
            tails=[v for c, o, _ in self.refused for v in (c, o)],
            channels=list(self.channels),
            offsets=list(self.offsets),
            codes=list(self.redeliveries),
            stamps=list(self.stamps),
            heads=list(self.sizes),
            blob=self.data,
            flag=int(self.notice),
            text=self.message,
            number=self.outstanding,
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        n = len(r.channels)
        if not (len(r.offsets) == len(r.codes) == len(r.stamps) == len(r.heads) == n):
            raise BadParameterError("malformed DURABLE_POLL reply (columns of different lengths)")
        sizes = tuple(r.heads)
        if sum(sizes) != len(r.blob) or (n and (min(sizes) < 1 or max(sizes) > MAX_ELEMENT_SIZE)):
            raise BadParameterError("malformed DURABLE_POLL reply (sizes do not match the data)")
        if len(r.tails) != 2 * len(r.sizes):
            raise BadParameterError("malformed DURABLE_POLL reply (refused acknowledgements)")
        try:
            refused = tuple(
                (int(r.tails[2 * i]), int(r.tails[2 * i + 1]), AckStatus(int(s)))
                for i, s in enumerate(r.sizes)
            )
        except ValueError:
            raise BadParameterError("malformed DURABLE_POLL reply (unknown status)") from None
        return cls(
            tuple(r.channels),
            tuple(r.offsets),
            tuple(r.codes),
            tuple(r.stamps),
            sizes,
            bytes(r.blob),
            Notice(int(r.flag) & 3),
            r.text,
            int(r.number),
            refused,
        )


@attrs.frozen
class DurableAcked:
    """The answer to DURABLE_ACK and DURABLE_ROLLBACK: one status per position, in order."""

    statuses: tuple[AckStatus, ...]

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, codes=[int(s) for s in self.statuses])

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        try:
            return cls(tuple(AckStatus(int(c)) for c in r.codes))
        except ValueError:
            raise BadParameterError("malformed DURABLE_ACK reply (unknown status)") from None


@attrs.frozen
class DurableUnsubscribed:
    """The answer to DURABLE_UNSUBSCRIBE: whether the durable existed."""

    existed: bool

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, flag=int(self.existed))

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bool(r.flag))


@attrs.frozen
class DurableInfo:
    """The answer to DURABLE_INFO (see :meth:`dcps.durables.Durables.info`)."""

    name: str
    topic: str
    kind: DurableKind
    persistent: bool
    subscribers: int
    outstanding: int
    filter: str = ""

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            codes=[self.kind.code, int(self.persistent)],
            number=self.outstanding,
            offsets=[self.subscribers],
            text=self.filter,
        )

    @classmethod
    def from_wire_for(cls, r: Reply, topic: str, name: str) -> DurableInfo:
        """The info of durable ``name`` of ``topic`` a reply carries."""
        if len(r.codes) != 2 or len(r.offsets) != 1:
            raise BadParameterError("malformed DURABLE_INFO reply")
        return cls(
            name,
            topic,
            DurableKind.from_code(int(r.codes[0])),
            bool(r.codes[1]),
            int(r.offsets[0]),
            int(r.number),
            r.text,
        )


#: Any durable request.
class TemporaryAction(enum.IntEnum):
    """What a TEMPORARY_TOPIC request does (only the owning client may ask any of them)."""

    CLAIM = 0
    """Create the temporary topic, owned by the asking client, or renew its lease."""
    DELETE = 1
    """Delete it; refused while a consumer of it is open (JMS ``TemporaryTopic.delete``)."""
    RELEASE = 2
    """Delete it, closing its consumers (the owning connection closes)."""
    GRANT = 3
    """Let subscriber ``subscriber`` (a consumer the owning connection makes) consume it."""


#: Topics named so are temporary: the store serves them only while their owning client holds
#: their lease, and lets only the subscribers that client granted consume them.
TEMPORARY_TOPIC_PREFIX = "jms.temporary."
#: Longest lease of a temporary topic (ms).
MAX_TEMPORARY_LEASE_MS = 600_000


@attrs.frozen
class TemporaryTopicRequest:
    """Claim, renew, delete or grant a consumer of temporary topic ``topic`` (see
    :class:`TemporaryAction`); answered OK or with the refusal."""

    op: ClassVar[Op] = Op.TEMPORARY_TOPIC
    topic: str
    action: TemporaryAction
    lease_ms: int = 0
    subscriber: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.TEMPORARY_TOPIC,
            topic=self.topic,
            flag=int(self.action),
            number=self.lease_ms,
            member=self.subscriber,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic = check_wire_name("topic", r.topic)
        if not topic.startswith(TEMPORARY_TOPIC_PREFIX):
            raise BadParameterError(
                f"topic {topic!r} is not a temporary topic (named {TEMPORARY_TOPIC_PREFIX}...)"
            )
        try:
            action = TemporaryAction(int(r.flag))
        except ValueError:
            raise BadParameterError(f"request field 'flag' names action {r.flag}") from None
        lease = int(r.number)
        if action is TemporaryAction.CLAIM:
            _bounded(lease, "number (lease ms)", 1, MAX_TEMPORARY_LEASE_MS)
        elif lease:
            raise BadParameterError("a lease is given only to CLAIM")
        subscriber = ""
        if action is TemporaryAction.GRANT:
            subscriber = check_wire_name("member (subscriber)", r.member)
        elif r.member:
            raise BadParameterError("a subscriber is named only by GRANT")
        return cls(topic, action, lease, subscriber)


@attrs.frozen
class DurableTxAckRequest(DurableAckRequest):
    """``subscriber`` enlists its acknowledgement of ``positions`` in transaction
    ``(query, epoch)``: the store checks now that it holds them, and applies the
    acknowledgements with TX_COMMIT, in the transaction that makes the staged publishes
    visible (JMS transacted sessions). Answered like DURABLE_ACK, nothing applied yet."""

    op: ClassVar[Op] = Op.DURABLE_TX_ACK
    query: str = ""
    epoch: int = 0

    def to_wire(self, client: str, request_id: int) -> Request:
        wire = super().to_wire(client, request_id)
        wire.text, wire.number = self.query, self.epoch
        return wire

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic, name, subscriber = _durable_fields(r)
        query = check_wire_name("text (transaction query)", r.text)
        epoch = _bounded(int(r.number), "number (epoch)", 0, 2**62)
        return cls(topic, name, subscriber, _runs(r, list(r.sizes)), query, epoch)


#: Most (topic, stage) entries one transaction commits.
MAX_TX_STAGES = 4096
#: Longest proof text of a TX_COMMIT or TX_ABORT (``_auth_stage.py``'s proofs).
MAX_TX_PROOF = 2048
_DIGEST = re.compile(r"[0-9a-f]{64}")


def tx_signed(
    op: Op, stages: tuple[tuple[str, str, int], ...], digests: tuple[str, ...]
) -> tuple[str, str, list[tuple[str, int, str]]]:
    """What a transaction's proof signs (``_auth_stage.QueryKey.prove``, ``check_proof``):
    the operation, its topics and every stage as ``topic NUL stage`` with its chunk count
    and digest (none for TX_ABORT). A transaction is named ``<query>~<fingerprint>`` of
    its session's key, so only the session that made it can commit or abort it."""
    name = "tx-commit" if op is Op.TX_COMMIT else "tx-abort"
    topics = ",".join(sorted({t for t, _, _ in stages}))
    signed = [
        (f"{t}\x00{s}", n, digests[i] if digests else "") for i, (t, s, n) in enumerate(stages)
    ]
    return name, topics, signed


@attrs.frozen
class TxCommitRequest:
    """Commit transaction ``(query, epoch)``: the chunks staged (STAGE, under ``query`` and
    ``epoch``) for ``stages`` ((topic, stage, chunk count) each) and the acknowledgements
    its subscribers enlisted (DURABLE_TX_ACK) take effect together, or not at all."""

    op: ClassVar[Op] = Op.TX_COMMIT
    query: str
    epoch: int
    stages: tuple[tuple[str, str, int], ...] = ()
    #: per stage, the SHA-256 of its chunks (``_auth_stage.StageDigest``; with a key)
    digests: tuple[str, ...] = ()
    #: the transaction key's signature of :func:`tx_signed` (with a key)
    proof: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        stages = [
            [*s, self.digests[i]] if self.digests else list(s) for i, s in enumerate(self.stages)
        ]
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            group=self.query,
            number=self.epoch,
            blob=json.dumps(stages).encode(),
            text=self.proof,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        query = check_wire_name("group (transaction query)", r.group)
        epoch = _bounded(int(r.number), "number (epoch)", 0, 2**62)
        if len(r.blob) > MAX_TX_STAGES * 600:
            raise BadParameterError("request field 'blob' (the stages) is too long")
        try:
            raw = json.loads(bytes(r.blob).decode() or "[]")
        except ValueError:
            raise BadParameterError("request field 'blob' is not the stages' JSON") from None
        if not isinstance(raw, list) or len(raw) > MAX_TX_STAGES:
            raise BadParameterError(f"a transaction names a list of <= {MAX_TX_STAGES} stages")
        if len(r.text) > MAX_TX_PROOF:
            raise BadParameterError(f"a transaction's proof has at most {MAX_TX_PROOF} characters")
        stages = []
        digests = []
        for entry in raw:
            if not (
                isinstance(entry, list)
                and len(entry) in (3, 4)
                and isinstance(entry[0], str)
                and isinstance(entry[1], str)
                and isinstance(entry[2], int)
                and not isinstance(entry[2], bool)
                and (len(entry) == 3 or (isinstance(entry[3], str) and _DIGEST.fullmatch(entry[3])))
            ):
                raise BadParameterError(
                    f"a stage is [topic, stage, chunks] or [topic, stage, chunks, sha-256 hex], "
                    f"not {entry!r}"
                )
            if len(entry) == 4:
                digests.append(entry[3])
            stages.append(
                (
                    check_wire_name("stage topic", entry[0]),
                    check_wire_name("stage", entry[1]),
                    _bounded(entry[2], "stage chunks", 1, 1_000_000),
                )
            )
        if len(set((t, s) for t, s, _ in stages)) != len(stages):
            raise BadParameterError("a transaction names a (topic, stage) twice")
        if digests and len(digests) != len(stages):
            raise BadParameterError("a transaction gives a digest for every stage or for none")
        return cls(query, epoch, tuple(stages), tuple(digests), r.text)


@attrs.frozen
class TxAbortRequest(TxCommitRequest):
    """Abort transaction ``(query, epoch)``: its staged chunks and enlisted acknowledgements
    are dropped (the elements stay held by their subscribers, to roll back)."""

    op: ClassVar[Op] = Op.TX_ABORT


@attrs.frozen
class TxCommitted:
    """The answer to TX_COMMIT: how many elements it published and acknowledged."""

    published: int
    acknowledged: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.published,
            offsets=[self.acknowledged],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != 1:
            raise BadParameterError("malformed TX_COMMIT reply")
        return cls(int(r.number), int(r.offsets[0]))


DurableRequest = (
    DurableSubscribeRequest
    | DurablePollRequest
    | DurableAckRequest
    | DurableRollbackRequest
    | DurableCloseRequest
    | DurableUnsubscribeRequest
    | DurableInfoRequest
    | TemporaryTopicRequest
    | DurableTxAckRequest
    | TxCommitRequest
    | TxAbortRequest
)
#: The durable request kinds, for ``_requests._DECODERS``.
DURABLE_REQUESTS: tuple[type[DurableRequest], ...] = (
    DurableSubscribeRequest,
    DurablePollRequest,
    DurableAckRequest,
    DurableRollbackRequest,
    DurableCloseRequest,
    DurableUnsubscribeRequest,
    DurableInfoRequest,
    TemporaryTopicRequest,
    DurableTxAckRequest,
    TxCommitRequest,
    TxAbortRequest,
)
