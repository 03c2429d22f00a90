"""Store administration over the store protocol (request kinds 70-89): look, reset, delete.

The requests of the ``dcps topics``, ``dcps groups`` and ``dcps store status``
commands. Looking (:class:`DescribeTopicsRequest`,
:class:`DescribeGroupsRequest`, :class:`StoreStatusRequest`) needs only the
namespace key and changes nothing: describing a group does not join it.
Changing (:class:`ResetGroupRequest`, :class:`DeleteGroupRequest`) is sealed
with the admin key (``request/reset_group``, ``request/delete_group`` in
``DEFAULT_ADMIN_KINDS``).

Each store answers for its own share of the channels; a client asking several
stores merges their reports (:func:`merge_topics`, :func:`merge_groups`).
Reports travel as one JSON document in the reply's ``blob``: they are read by
people and scripts, rarely, and their shape grows with the store.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar, Self

import attrs

from idl._errors import BadParameterError, OutOfResourcesError

from ._codes import Op, SeekMode
from ._limits import MAX_CHANNELS, check_channels, check_wire_name
from ._messages import Reply, Request

__all__ = [
    "MAX_REPORT_BYTES",
    "AdminRequest",
    "ChannelReport",
    "DeleteGroupRequest",
    "DescribeGroupsRequest",
    "DescribeTopicsRequest",
    "GroupChannelReport",
    "GroupDeleted",
    "GroupReport",
    "GroupReset",
    "GroupsReport",
    "MemberReport",
    "ReportList",
    "ResetGroupRequest",
    "StoreStatus",
    "StoreStatusRequest",
    "TopicReport",
    "TopicsReport",
    "admin_requests",
    "blob_reply",
    "build_report",
    "channel_lag",
    "merge_groups",
    "merge_topics",
    "owners_of",
    "read_document",
]

#: Largest report a store sends in one reply (a client refuses larger ones as malformed).
MAX_REPORT_BYTES = 64 * 1024 * 1024


# -- requests ----------------------------------------------------------------------------


@attrs.frozen
class DescribeTopicsRequest:
    """The channelled topics of the store (``topic``: only that one), with ``channels`` per
    channel detail (head, tail, time range)."""

    op: ClassVar[Op] = Op.DESCRIBE_TOPICS
    topic: str = ""
    channels: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            flag=int(self.channels),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (channels) is {r.flag}")
        return cls(check_wire_name("topic", r.topic, required=False), bool(r.flag))


@attrs.frozen
class DescribeGroupsRequest:
    """The subscriber groups of the store (of ``topic``, named ``group`` when given):
    members, assignment, commits and lag per channel. The groups are not joined."""

    op: ClassVar[Op] = Op.DESCRIBE_GROUPS
    topic: str = ""
    group: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client, request_id=request_id, op=self.op, topic=self.topic, group=self.group
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic = check_wire_name("topic", r.topic, required=False)
        group = check_wire_name("group", r.group, required=False)
        if group and not topic:
            raise BadParameterError("a DESCRIBE_GROUPS naming a group must name its topic")
        return cls(topic, group)


@attrs.frozen
class ResetGroupRequest:
    """Move the commits of ``group`` of ``topic`` (admin key).

    ``mode``: ``HEAD`` (the oldest stored element is delivered next), ``TAIL``
    (only elements published from now on), ``TIMESTAMP`` (the first element
    accepted at or after ``targets`` ns), ``POSITION`` (``targets`` is the
    offset delivered next). ``channels`` empty: every channel, with one target
    (or none for HEAD and TAIL); else one target per channel (or none).
    Refused while the group has members unless ``force``.
    """

    op: ClassVar[Op] = Op.RESET_GROUP
    topic: str
    group: str
    mode: SeekMode
    channels: tuple[int, ...] = ()
    targets: tuple[int, ...] = ()
    force: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.group,
            number=int(self.mode),
            channels=list(self.channels),
            offsets=list(self.targets),
            flag=int(self.force),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic = check_wire_name("topic", r.topic)
        group = check_wire_name("group", r.group)
        try:
            mode = SeekMode(r.number)
        except ValueError:
            raise BadParameterError(f"request field 'number' (reset mode) is {r.number}") from None
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (force) is {r.flag}")
        check_channels(r.channels)
        needs_target = mode in (SeekMode.POSITION, SeekMode.TIMESTAMP)
        wanted = (len(r.channels) or 1) if needs_target else 0
        if len(r.offsets) != wanted:
            raise BadParameterError(
                f"a {cls.op.name} to {mode.name} of {len(r.channels) or 'every'} channel(s) "
                f"carries {len(r.offsets)} target(s), not {wanted}"
            )
        if mode is SeekMode.POSITION and r.offsets and min(r.offsets) < 0:
            raise BadParameterError(f"a {cls.op.name} names offset {min(r.offsets)}: offsets >= 0")
        return cls(topic, group, mode, tuple(r.channels), tuple(r.offsets), bool(r.flag))


@attrs.frozen
class DeleteGroupRequest:
    """Delete ``group`` of ``topic`` and its commits (admin key); refused while the group
    has members unless ``force`` (its members then lose their channels)."""

    op: ClassVar[Op] = Op.DELETE_GROUP
    topic: str
    group: str
    force: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=self.op,
            topic=self.topic,
            group=self.group,
            flag=int(self.force),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (force) is {r.flag}")
        return cls(
            check_wire_name("topic", r.topic), check_wire_name("group", r.group), bool(r.flag)
        )


@attrs.frozen
class StoreStatusRequest:
    """What a store is: share, process, data directory, uptime, clients, file size."""

    op: ClassVar[Op] = Op.STORE_STATUS

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(client=client, request_id=request_id, op=self.op)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls()


AdminRequest = (
    DescribeTopicsRequest
    | DescribeGroupsRequest
    | ResetGroupRequest
    | DeleteGroupRequest
    | StoreStatusRequest
)


def admin_requests() -> tuple[type[AdminRequest], ...]:
    """The admin request classes (registered in ``_requests._DECODERS``)."""
    return (
        DescribeTopicsRequest,
        DescribeGroupsRequest,
        ResetGroupRequest,
        DeleteGroupRequest,
        StoreStatusRequest,
    )


# -- reports -------------------------------------------------------------------------------


def blob_reply(client: str, request_id: int, document: Any) -> Reply:
    """A reply carrying ``document`` as JSON in its blob (the reports of the admin kinds).

    Raises :class:`~dcps.OutOfResourcesError` naming ``MAX_REPORT_BYTES`` when the
    document is larger than a client accepts (the store answers that instead of
    sending a reply every client refuses as malformed).
    """
    blob = json.dumps(document, separators=(",", ":")).encode()
    if len(blob) > MAX_REPORT_BYTES:
        raise OutOfResourcesError(
            f"the report is {len(blob)} bytes, above MAX_REPORT_BYTES = {MAX_REPORT_BYTES}: "
            "ask for one topic, group, durable, queue or map at a time"
        )
    return Reply(client=client, request_id=request_id, blob=blob)


def read_document(r: Reply, what: str) -> Any:
    """The JSON document of a report reply (``BadParameterError`` naming ``what`` if malformed)."""
    if len(r.blob) > MAX_REPORT_BYTES:
        raise BadParameterError(f"malformed {what} reply ({len(r.blob)} bytes)")
    try:
        return json.loads(bytes(r.blob))
    except ValueError as exc:
        raise BadParameterError(f"malformed {what} reply: {exc}") from None


def build_report(cls: type[Any], data: Any, what: str) -> Any:
    """``cls(**data)`` (``BadParameterError`` naming ``what`` when the fields do not fit)."""
    try:
        return cls(**data)
    except TypeError as exc:
        raise BadParameterError(f"malformed {what} report: {exc}") from None


class ReportList:
    """Base of the answers that carry a list of reports as one JSON document.

    A subclass is an attrs class whose one field is the tuple of reports;
    ``report`` is the class of those (its ``of`` reads one from its JSON form) and
    ``answer_to`` the request kind a malformed reply is named by.
    """

    report: ClassVar[Any]
    answer_to: ClassVar[str]

    def reports(self) -> tuple[Any, ...]:
        """The reports this answer carries."""
        return attrs.astuple(self, recurse=False)[0]  # type: ignore[arg-type, no-any-return]

    def to_wire(self, client: str, request_id: int) -> Reply:
        return blob_reply(client, request_id, [attrs.asdict(x) for x in self.reports()])

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        reports = tuple(cls.report.of(d) for d in read_document(r, cls.answer_to))
        return cls(reports)  # type: ignore[call-arg]


@attrs.frozen
class ChannelReport:
    """One channel of a topic: head, tail (-1: empty), stored count and time range (ns)."""

    channel: int
    head: int
    tail: int
    first_ns: int | None = None
    last_ns: int | None = None

    @property
    def elements(self) -> int:
        """Elements stored in the channel."""
        return max(0, self.tail - self.head + 1)


@attrs.frozen
class TopicReport:
    """A channelled topic of the store: configuration, type, size, groups, channels."""

    name: str
    channel_count: int
    retain_consumed: bool
    type_name: str
    type_identity: str
    elements: int
    bytes: int
    groups: tuple[str, ...]
    channels: tuple[ChannelReport, ...] = ()

    @property
    def retention(self) -> str:
        """How long elements stay: until every group consumed them, or kept."""
        return "keep consumed" if self.retain_consumed else "until consumed by every group"

    @classmethod
    def of(cls, data: dict[str, Any]) -> TopicReport:
        """From its JSON form."""
        channels = tuple(build_report(ChannelReport, c, "topic") for c in data.get("channels", ()))
        fields = {**data, "groups": tuple(data.get("groups", ())), "channels": channels}
        return build_report(cls, fields, "topic")  # type: ignore[no-any-return]


@attrs.frozen
class TopicsReport(ReportList):
    """The answer to DESCRIBE_TOPICS."""

    report: ClassVar[Any] = TopicReport
    answer_to: ClassVar[str] = "DESCRIBE_TOPICS"
    topics: tuple[TopicReport, ...]


@attrs.frozen
class MemberReport:
    """A member of a group: its channels, timeout and seconds since it was last heard of."""

    name: str
    channels: tuple[int, ...]
    timeout_s: float
    idle_s: float
    anonymous: bool = False


@attrs.frozen
class GroupChannelReport:
    """A group in one channel: its owner, commit and lag.

    ``committed`` is the last consumed offset (-1: none; reading resumes at
    ``committed + 1``); ``lag`` the elements stored after it
    (``tail - committed``, from the head if the commit is older).
    """

    channel: int
    committed: int
    explicit: bool
    head: int
    tail: int
    lag: int
    owner: str = ""


@attrs.frozen
class GroupReport:
    """A subscriber group of a topic: members, assignment generation, commits and lag."""

    topic: str
    name: str
    generation: int
    members: tuple[MemberReport, ...]
    channels: tuple[GroupChannelReport, ...]

    @property
    def active(self) -> bool:
        """True while the group has members."""
        return bool(self.members)

    @property
    def lag(self) -> int:
        """Elements stored after the group's commits, over every channel."""
        return sum(c.lag for c in self.channels)

    @classmethod
    def of(cls, data: dict[str, Any]) -> GroupReport:
        """From its JSON form."""
        members = tuple(
            build_report(MemberReport, {**m, "channels": tuple(m.get("channels", ()))}, "group")
            for m in data.get("members", ())
        )
        channels = tuple(
            build_report(GroupChannelReport, c, "group") for c in data.get("channels", ())
        )
        return build_report(cls, {**data, "members": members, "channels": channels}, "group")  # type: ignore[no-any-return]


@attrs.frozen
class GroupsReport(ReportList):
    """The answer to DESCRIBE_GROUPS."""

    report: ClassVar[Any] = GroupReport
    answer_to: ClassVar[str] = "DESCRIBE_GROUPS"
    groups: tuple[GroupReport, ...]


@attrs.frozen
class GroupReset:
    """The answer to RESET_GROUP: per channel, the offset delivered next."""

    next_offsets: dict[int, int]

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            channels=list(self.next_offsets),
            offsets=list(self.next_offsets.values()),
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.channels) != len(r.offsets) or len(r.channels) > MAX_CHANNELS:
            raise BadParameterError("malformed RESET_GROUP reply (an offset per channel)")
        return cls({int(c): int(o) for c, o in zip(r.channels, r.offsets, strict=True)})


@attrs.frozen
class GroupDeleted:
    """The answer to DELETE_GROUP: whether the group existed, and the members it had."""

    existed: bool
    members: int = 0

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client, request_id=request_id, flag=int(self.existed), number=self.members
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bool(r.flag), int(r.number))


@attrs.frozen
class StoreStatus:
    """The answer to STORE_STATUS: one store process and its data."""

    namespace: str
    domain_id: int
    share: str
    coordinates: bool
    incarnation: str
    pid: int
    host: str
    data_dir: str
    started_ns: int
    uptime_s: float
    clients: int
    topics: int
    groups: int
    members: int
    file_bytes: int
    disk_free_bytes: int
    authenticated: bool
    metrics: str = ""

    def to_wire(self, client: str, request_id: int) -> Reply:
        return blob_reply(client, request_id, attrs.asdict(self))

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return build_report(cls, read_document(r, "STORE_STATUS"), "status")  # type: ignore[no-any-return]


# -- several stores ---------------------------------------------------------------------------


def merge_topics(reports: Sequence[TopicsReport]) -> TopicsReport:
    """The reports of the stores sharing the channels, as one (channels in order)."""
    parts: dict[str, list[TopicReport]] = {}
    for report in reports:
        for t in report.topics:
            parts.setdefault(t.name, []).append(t)
    merged = []
    for name in sorted(parts):
        first, *rest = parts[name]
        every = [first, *rest]
        merged.append(
            attrs.evolve(
                first,
                elements=sum(t.elements for t in every),
                bytes=sum(t.bytes for t in every),
                groups=tuple(sorted({g for t in every for g in t.groups})),
                channels=tuple(
                    sorted((c for t in every for c in t.channels), key=lambda c: c.channel)
                ),
            )
        )
    return TopicsReport(tuple(merged))


def merge_groups(reports: Sequence[GroupsReport]) -> GroupsReport:
    """The reports of the stores sharing the channels, as one; members come from the
    coordinator's (the first) report."""
    parts: dict[tuple[str, str], list[GroupReport]] = {}
    for report in reports:
        for g in report.groups:
            parts.setdefault((g.topic, g.name), []).append(g)
    merged = []
    for key in sorted(parts):
        every = parts[key]
        merged.append(
            attrs.evolve(
                every[0],
                channels=tuple(
                    sorted((c for g in every for c in g.channels), key=lambda c: c.channel)
                ),
            )
        )
    return GroupsReport(tuple(merged))


def channel_lag(committed: int, head: int, tail: int) -> int:
    """Elements stored after ``committed`` in a channel holding ``head..tail``."""
    return max(0, tail - max(committed, head - 1))


def owners_of(members: Iterable[MemberReport]) -> dict[int, str]:
    """channel -> owning member, from the members' channels."""
    return {c: m.name for m in members for c in m.channels}
