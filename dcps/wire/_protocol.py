"""The store protocol and its transport over Cyclone DDS (the raw ``cyclonedds`` binding).

Everything the channel layer sends travels here, on four DDS topics in the
store's namespace:

``dcps_channels_request`` / ``dcps_channels_reply``
    Request/reply with the store, correlated by ``(client, request_id)``.
    Requests in partition ``<ns>``: reliable, volatile, keep-last 128 (a
    client keeps at most 127 unanswered). Replies in the client's own
    partition ``<ns>/reply/<client>``, one store writer per client: reliable,
    transient-local, keep-all; a reply the writer cannot take at once waits
    in the store's outbox for that client.
``dcps_channels_batch``
    The live tail of each channel, in partition ``<ns>/<topic>/<channel>``:
    one sample per accepted batch; reliable, transient-local (last 32).
``dcps_channels_assignment``
    Channel ownership of each (topic, group), keyed by both, in partition
    ``<ns>``; reliable, transient-local, last value.
``dcps_channels_store``
    Each store's share of the channels (``index/count``), keyed by the
    store's incarnation, in partition ``<ns>``; reliable, transient-local.
    With several stores, requests go to ``<ns>/store/<index>`` (see
    ``_shares.py``); with one store (share ``0/1``) to ``<ns>``.

The other channel modules use only :class:`Endpoint`, :class:`StoreClient`
and the message types defined here, so moving onto dcps's own entities later
touches this module only.
"""

# No "from __future__ import annotations": cyclonedds resolves IDL field types at run time.

import enum
import itertools
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cyclonedds.core import (
    GuardCondition,
    InstanceState,
    Policy,
    Qos,
    ReadCondition,
    SampleState,
    ViewState,
    WaitSet,
)
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl._machinery import BytesMachine
from cyclonedds.idl.annotations import key
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic
from cyclonedds.util import duration

from dcps.channels._position import CommitStatus
from dcps.store._shares import request_partition, share_count
from idl._codec import build_codec
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    IllegalOperationError,
    InconsistentPolicyError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

from ._batches import BULK_FETCH

__all__ = [
    "COMMIT_UNOWNED",
    "Assignment",
    "Endpoint",
    "LiveBatch",
    "Op",
    "Reply",
    "Request",
    "StoreAnnouncement",
    "StoreClient",
    "Waiter",
    "batch_partition",
    "check_name",
    "delete_entity",
    "error_code",
    "pack",
    "raise_for_reply",
    "unpack",
]


if TYPE_CHECKING:  # what the IDL field types are to a type checker
    from dcps._network import NetworkConfig

    Int32 = int
    Int64 = int
    Int32Seq = list[int]
    Int64Seq = list[int]
    StrSeq = list[str]
    Blob = bytes
else:  # what cyclonedds needs at run time
    Int32 = t.int32
    Int64 = t.int64
    Int32Seq = t.sequence[t.int32]
    Int64Seq = t.sequence[t.int64]
    StrSeq = t.sequence[str]
    Blob = t.sequence[t.uint8]  # sent as bytes: see _blob_as_bytes


class Op(enum.IntEnum):
    """Store request kinds."""

    PING = 0
    ENSURE_TOPIC = 1
    PUBLISH = 2
    FETCH = 3
    COMMIT = 4
    SEEK = 5
    STATE = 6
    JOIN = 7
    LEAVE = 8
    HEARTBEAT = 9
    DESTROY_GROUP = 10


#: COMMIT request ``flag`` bit: record commits of channels the member does not own.
COMMIT_UNOWNED = 1


class SeekMode(enum.IntEnum):
    """How a SEEK request's ``offsets`` are read."""

    POSITION = 0
    TIMESTAMP = 1
    HEAD = 2
    TAIL = 3


@dataclass
class Request(IdlStruct, typename="dcps_channels.Request"):
    """A request to the store; unused fields stay empty."""

    client: str
    request_id: Int64
    op: Int32
    topic: str = ""
    group: str = ""
    member: str = ""
    number: Int64 = 0
    flag: Int32 = 0
    text: str = ""
    channels: Int32Seq = field(default_factory=list)
    offsets: Int64Seq = field(default_factory=list)
    sizes: Int32Seq = field(default_factory=list)
    blob: Blob = b""


@dataclass
class Reply(IdlStruct, typename="dcps_channels.Reply"):
    """The store's answer to one request (``status`` 0 means success)."""

    client: str
    request_id: Int64
    status: Int32 = 0
    error: str = ""
    number: Int64 = 0
    flag: Int32 = 0
    text: str = ""
    channels: Int32Seq = field(default_factory=list)
    offsets: Int64Seq = field(default_factory=list)
    stamps: Int64Seq = field(default_factory=list)
    codes: Int32Seq = field(default_factory=list)
    heads: Int64Seq = field(default_factory=list)
    tails: Int64Seq = field(default_factory=list)
    sizes: Int32Seq = field(default_factory=list)
    blob: Blob = b""


@dataclass
class LiveBatch(IdlStruct, typename="dcps_channels.LiveBatch"):
    """One accepted batch of a channel, pushed live: elements at ``first``, ``first + 1``, ..."""

    topic: str
    channel: Int32
    first: Int64
    timestamp: Int64
    sizes: Int32Seq = field(default_factory=list)
    blob: Blob = b""


@dataclass
class Assignment(IdlStruct, typename="dcps_channels.Assignment"):
    """Channel owners of one group: ``owners[c]`` indexes ``members`` (-1: no owner)."""

    topic: str
    group: str
    key("topic")
    key("group")
    incarnation: str = ""
    generation: Int64 = 0
    members: StrSeq = field(default_factory=list)
    owners: Int32Seq = field(default_factory=list)
    expelled: StrSeq = field(default_factory=list)


@dataclass
class StoreAnnouncement(IdlStruct, typename="dcps_channels.StoreAnnouncement"):
    """A running store and its share ``index/count`` of the namespace's channels."""

    incarnation: str
    key("incarnation")
    index: Int32 = 0
    count: Int32 = 1
    started_ns: Int64 = 0
    pid: Int64 = 0
    host: str = ""
    data_dir: str = ""


def _blob_as_bytes(cls: Any) -> None:
    """Make the ``blob`` field (IDL ``sequence<octet>``) travel as Python ``bytes``.

    The binding (de)serialises ``sequence<uint8>`` element by element into a
    list of ints, and its XTypes builder cannot describe a ``bytes`` field; the
    CDR of both is the same (a uint32 length, then the octets), so we describe
    the field as ``sequence<octet>`` and swap in the binding's bytes machine.
    """
    idl = cls.__idl__
    idl.populate()
    for machine in (idl.v1_machine, idl.v2_machine):
        machine.members_machines["blob"] = BytesMachine()  # type: ignore[no-untyped-call]


def _compile(cls: Any) -> None:
    """Give ``cls`` the compiled codec of ``idl._codec`` for whole samples.

    The binding's per-field machines cost 30-60 us per message of these
    types, several per batch in both the client and the store; the compiled
    codec writes the same bytes (``tests/test_protocol_codec.py`` checks)
    in a few microseconds. Anything unusual (a caller's buffer, another
    endianness, key-only forms) still goes to the binding.
    """
    codec = build_codec(cls, frozenset({"blob"}))
    if codec is None:  # a big-endian host: the binding's machines do it all
        return
    ser, de = codec.ser, codec.de
    generic_serialize, generic_deserialize = cls.serialize, cls.deserialize.__func__

    def serialize(
        self: Any, buffer: Any = None, endianness: Any = None, use_version_2: bool | None = None
    ) -> bytes:
        if buffer is None and endianness is None:
            return ser[2 if use_version_2 else 1](self)  # type: ignore[no-any-return]
        return generic_serialize(self, buffer, endianness, use_version_2)  # type: ignore[no-any-return]

    def deserialize(
        klass: Any, data: Any, has_header: bool = True, use_version_2: bool | None = None
    ) -> Any:
        if has_header and use_version_2 is None and data.__class__ is bytes and len(data) >= 4:
            if data[:2] == b"\x00\x01":  # CDR_LE
                return de[1](data)
            if data[:2] == b"\x00\x07":  # PLAIN_CDR2_LE
                return de[2](data)
        return generic_deserialize(klass, data, has_header, use_version_2)

    cls.serialize = serialize
    cls.deserialize = classmethod(deserialize)


for _cls in (Request, Reply, LiveBatch):
    _blob_as_bytes(_cls)
    _compile(_cls)


def pack(payloads: list[bytes]) -> dict[str, Any]:
    """The ``sizes``/``blob`` fields carrying a list of byte strings.

    (A sequence of byte sequences would be the natural IDL, but the binding's
    XTypes builder cannot describe it, and one blob is faster anyway.)
    """
    return {"sizes": [len(p) for p in payloads], "blob": b"".join(payloads)}


def unpack(message: Any) -> list[bytes]:
    """The byte strings of a message's ``sizes``/``blob`` fields."""
    blob = message.blob
    out = []
    pos = 0
    for size in message.sizes:
        out.append(blob[pos : pos + size])
        pos += size
    return out


# -- errors over the wire ------------------------------------------------------

_ERRORS: list[type[DcpsError]] = [
    DcpsError,
    BadParameterError,
    PreconditionNotMetError,
    UnsupportedError,
    IllegalOperationError,
    OutOfResourcesError,
    InconsistentPolicyError,
    AlreadyClosedError,
]


def error_code(exc: BaseException) -> int:
    """The wire status of an exception (most specific known class; 1 for others)."""
    for code in range(len(_ERRORS) - 1, 0, -1):
        if isinstance(exc, _ERRORS[code]):
            return code + 1
    return 1


def raise_for_reply(reply: Reply) -> Reply:
    """Return ``reply`` or raise the dcps error its status names."""
    if reply.status == 0:
        return reply
    cls = _ERRORS[reply.status - 1] if 0 < reply.status <= len(_ERRORS) else DcpsError
    raise cls(reply.error)


def check_name(what: str, name: str) -> str:
    """Refuse names that would break DDS partition expressions."""
    if not isinstance(name, str) or not name or any(ch in name for ch in "*?\\"):
        raise BadParameterError(f"{what} must be a non-empty string without '*', '?' or '\\'")
    return name


def batch_partition(namespace: str, topic: str, channel: int) -> str:
    """The DDS partition carrying a channel's live batches."""
    return f"{namespace}/{topic}/{channel}"


def delete_entity(entity: Any) -> None:
    """Delete a cyclonedds entity now (the binding otherwise waits for garbage collection)."""
    entity.__del__()


# -- QoS -------------------------------------------------------------------------

_BLOCK = duration(seconds=10)
CONTROL_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepAll,
    Policy.Durability.Volatile,
)
# A client's requests: KEEP_LAST, not KEEP_ALL. A store killed with SIGKILL
# leaves its request reader matched to every client until its lease expires
# (Cyclone's default: 10 s); a KEEP_ALL writer keeps every request that reader
# never acknowledges and, past its history watermark, blocks each write until
# the lease ends, so requests to the restarted store stall that long and time
# out although the store served them. KEEP_LAST drops only requests every live
# reader already has, as long as fewer than its depth await an answer:
# StoreClient keeps at most MAX_OUTSTANDING unanswered.
MAX_OUTSTANDING = 127
REQUEST_WRITER_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepLast(MAX_OUTSTANDING + 1),
    Policy.Durability.Volatile,
)
BATCH_WRITER_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepLast(32),
    Policy.Durability.TransientLocal,
)
BATCH_READER_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepAll,
    Policy.Durability.TransientLocal,
)
ASSIGN_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepLast(1),
    Policy.Durability.TransientLocal,
)
# Replies go through a writer per client, in the client's own partition, and
# a write gives up at once when the client has not acknowledged enough earlier
# replies: the store then keeps the reply and retries on its next rounds, so
# an unreachable client never stalls the store for the others, and a live
# client never loses a reply (KEEP_ALL: a KEEP_LAST writer drops replies a
# client has not acknowledged yet, e.g. in a burst of commits, or right after
# a store restart, before the client has discovered the new writer).
# Transient-local, so a client whose reader the new writer has not matched yet
# still gets the first replies.
REPLY_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=1)),
    Policy.History.KeepAll,
    Policy.Durability.TransientLocal,
)
ANNOUNCE_QOS = ASSIGN_QOS
ANY_STATE = SampleState.Any | ViewState.Any | InstanceState.Any


def live_announcements(reader: DataReader[Any]) -> list[StoreAnnouncement]:
    """The announcements of the stores alive now (read, not taken: they stay cached)."""
    return [
        s
        for s in reader.read(N=1024)
        if isinstance(s, StoreAnnouncement) and s.sample_info.instance_state == InstanceState.Alive  # type: ignore[attr-defined]
    ]


def reply_partition(namespace: str, client: str) -> str:
    """The partition in which the store answers one client."""
    return f"{namespace}/reply/{client}"


class Endpoint:
    """A DomainParticipant with the channel-layer topics of one namespace.

    ``network`` (a :class:`dcps.NetworkConfig`) configures the domain as for
    :class:`dcps.DomainParticipant`; without it the ``DCPS_*`` environment
    settings do, if any is set.
    """

    def __init__(
        self, domain_id: int, namespace: str, network: "NetworkConfig | None" = None
    ) -> None:
        from dcps._participant import _domains, _network_from_env

        self.namespace = check_name("namespace", namespace)
        # one network configuration per domain per process, as for dcps.DomainParticipant
        self._network = network if network is not None else _network_from_env()
        if self._network is not None:
            _domains.acquire(domain_id, self._network)
        self._domain_id = domain_id
        name_qos = self._network.participant_qos() if self._network is not None else None
        self.participant = DomainParticipant(domain_id, qos=name_qos)
        dp = self.participant
        self.request_topic = Topic(dp, "dcps_channels_request", Request)
        self.reply_topic = Topic(dp, "dcps_channels_reply", Reply)
        self.batch_topic = Topic(dp, "dcps_channels_batch", LiveBatch)
        self.assign_topic = Topic(dp, "dcps_channels_assignment", Assignment)
        self.store_topic = Topic(dp, "dcps_channels_store", StoreAnnouncement)
        self._closed = False

    def writer(self, topic: Topic[Any], partition: str, qos: Qos) -> DataWriter[Any]:
        """A writer of ``topic`` in one partition."""
        pub = Publisher(self.participant, qos=Qos(Policy.Partition([partition])))
        return DataWriter(pub, topic, qos=qos)

    def reader(self, topic: Topic[Any], partition: str, qos: Qos) -> DataReader[Any]:
        """A reader of ``topic`` in one partition."""
        sub = Subscriber(self.participant, qos=Qos(Policy.Partition([partition])))
        return DataReader(sub, topic, qos=qos)

    def close(self) -> None:
        """Delete the participant and everything in it (idempotent)."""
        if not self._closed:
            self._closed = True
            delete_entity(self.participant)
            if self._network is not None:
                from dcps._participant import _domains

                _domains.release(self._domain_id)


class Waiter:
    """One thread's wait for data on some readers, or for a wake-up from another thread."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._ws = WaitSet(endpoint.participant)
        self._guard = GuardCondition(endpoint.participant)
        self._ws.attach(self._guard)
        self._conds: dict[int, ReadCondition] = {}

    def watch(self, reader: DataReader[Any]) -> None:
        """Wake :meth:`wait` whenever ``reader`` holds samples."""
        cond = ReadCondition(reader, ANY_STATE)
        self._ws.attach(cond)
        self._conds[id(reader)] = cond

    def unwatch(self, reader: DataReader[Any]) -> None:
        """Stop watching ``reader`` (before deleting it)."""
        cond = self._conds.pop(id(reader), None)
        if cond is not None:
            self._ws.detach(cond)
            delete_entity(cond)

    def wait(self, seconds: float) -> None:
        """Block until a watched reader holds data, :meth:`wake` is called, or ``seconds``."""
        self._ws.wait(int(seconds * 1_000_000_000))
        self._guard.set(False)

    def wake(self) -> None:
        """Make the current or next :meth:`wait` return at once (any thread)."""
        self._guard.set(True)

    def close(self) -> None:
        """Delete the conditions and the wait set."""
        for cond in self._conds.values():
            delete_entity(cond)
        self._conds.clear()
        delete_entity(self._guard)
        delete_entity(self._ws)


def drop_endpoint(entity: DataReader[Any] | DataWriter[Any]) -> None:
    """Delete a reader or writer made by :meth:`Endpoint.reader`/``writer`` and its parent."""
    parent = entity.parent
    delete_entity(entity)
    if parent is not None:
        delete_entity(parent)


_UNOWNED_CODE = list(CommitStatus).index(CommitStatus.UNOWNED)
#: Requests that go to every store (the coordinator's reply first).
_TO_ALL = frozenset({Op.JOIN, Op.ENSURE_TOPIC, Op.DESTROY_GROUP})
#: Requests only the coordinating store (share 0/n) answers.
_TO_COORDINATOR = frozenset({Op.PING, Op.HEARTBEAT, Op.LEAVE})
#: Per-channel reply fields, merged back in channel order.
_PER_CHANNEL = ("heads", "tails", "offsets", "codes")


class StoreClient:
    """Request/reply with the store (or the stores sharing the channels) of a namespace.

    One daemon thread takes replies and completes the futures of
    :meth:`call_async`; requests unanswered within ``request_timeout`` fail with
    :class:`~dcps.DcpsTimeoutError`. :meth:`connect` learns how many stores
    share the channels; requests are then routed to the store(s) that must
    answer them and split replies merged (see ``_shares.py``).
    """

    def __init__(self, endpoint: Endpoint, *, request_timeout: float = 10.0) -> None:
        self.endpoint = endpoint
        self.client_id = uuid.uuid4().hex
        self.request_timeout = request_timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Future[Reply], float]] = {}
        self._window = threading.BoundedSemaphore(MAX_OUTSTANDING)  # see REQUEST_WRITER_QOS
        self._lock = threading.Lock()
        self._writer = endpoint.writer(
            endpoint.request_topic, endpoint.namespace, REQUEST_WRITER_QOS
        )
        self._writers: list[DataWriter[Any]] = [self._writer]  # by store index
        self.store_count = 1
        self._reader = endpoint.reader(
            endpoint.reply_topic, reply_partition(endpoint.namespace, self.client_id), REPLY_QOS
        )
        self._ws = WaitSet(endpoint.participant)
        self._cond = ReadCondition(self._reader, ANY_STATE)
        self._guard = GuardCondition(endpoint.participant)
        self._ws.attach(self._cond)
        self._ws.attach(self._guard)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="dcps-store-client", daemon=True)
        self._thread.start()

    def connect(self, timeout: float) -> None:
        """Wait until every store share is announced and answers a ping.

        Raises ``DcpsTimeoutError`` after ``timeout`` s, naming the missing shares.
        """
        deadline = time.monotonic() + timeout
        ep = self.endpoint
        where = f"in namespace {ep.namespace!r} (domain {ep.participant.domain_id})"
        announced = ep.reader(ep.store_topic, ep.namespace, ANNOUNCE_QOS)
        try:
            while True:
                count, why = share_count(live_announcements(announced))
                if count is not None:
                    break
                if time.monotonic() >= deadline:
                    raise DcpsTimeoutError(
                        f"no dcps store answered {where} within {timeout:g} s: {why}"
                    )
                time.sleep(0.02)
        finally:
            drop_endpoint(announced)
        self._route(count)
        waiting = set(range(count))
        while waiting:
            for index in sorted(waiting):
                if not self._writers[index].get_matched_subscriptions():
                    continue
                fut = self._send(index, Op.PING, {})
                try:
                    fut.result(timeout=min(0.5, max(0.05, deadline - time.monotonic())))
                    waiting.discard(index)
                except (TimeoutError, DcpsTimeoutError):
                    self._forget(fut)
            if not waiting:
                return
            if time.monotonic() >= deadline:
                shares = ", ".join(f"{i}/{count}" for i in sorted(waiting))
                raise DcpsTimeoutError(
                    f"no dcps store answered {where} within {timeout:g} s "
                    f"(store share {shares} announced but did not answer)"
                )
            time.sleep(0.02)

    def _route(self, count: int) -> None:
        """Send requests to ``count`` stores (one writer per store partition)."""
        if count == self.store_count:
            return
        ep = self.endpoint
        writers = [
            ep.writer(
                ep.request_topic, request_partition(ep.namespace, i, count), REQUEST_WRITER_QOS
            )
            for i in range(count)
        ]
        with self._lock:
            old, self._writers, self.store_count = self._writers, writers, count
        for writer in old:
            drop_endpoint(writer)

    def _forget(self, fut: Future[Reply]) -> None:
        with self._lock:
            for rid, (f, _) in list(self._pending.items()):
                if f is fut:
                    del self._pending[rid]
        fut.cancel()  # frees its place in the window

    def call_async(self, op: Op, **fields: Any) -> Future[Reply]:
        """Send a request; the future completes with the reply (errors not raised)."""
        if self._closed:
            raise AlreadyClosedError("the store client is closed")
        count = self.store_count
        if count == 1 or op in _TO_COORDINATOR:
            return self._send(0, op, fields)
        if op == Op.ENSURE_TOPIC:
            return self._ensure(count, fields)
        if op in _TO_ALL:
            return self._gather(op, [(i, fields) for i in range(count)], _merge_all)
        channels = list(fields.get("channels", ()))
        if not channels:
            if op == Op.STATE:  # every channel: each store answers for its own
                return self._gather(op, [(i, fields) for i in range(count)], _merge_every_channel)
            return self._send(0, op, fields)  # a malformed request: let a store refuse it
        stores: dict[int, list[int]] = {}
        for position, channel in enumerate(channels):
            stores.setdefault(int(channel) % count, []).append(position)
        if len(stores) == 1:
            return self._send(next(iter(stores)), op, fields)
        offsets = list(fields.get("offsets", ()))
        parts = []
        for index, positions in sorted(stores.items()):
            part = dict(fields, channels=[channels[p] for p in positions])
            if len(offsets) == len(channels):
                part["offsets"] = [offsets[p] for p in positions]
            parts.append((index, part))
        part_channels = [p["channels"] for _, p in parts]

        def merge(op: Op, replies: list[Reply]) -> Reply:
            return _merge_split(op, channels, part_channels, replies)

        return self._gather(op, parts, merge)

    def fetch_async(self, topic: str, channel: int, offset: int, count: int) -> Future[Reply]:
        """FETCH up to ``count`` stored elements of ``channel`` from ``offset``, in the bulk
        form (the stored batches as they are: read them with ``ElementRun.from_reply``)."""
        return self.call_async(
            Op.FETCH,
            topic=topic,
            channels=[channel],
            offsets=[offset],
            number=count,
            flag=BULK_FETCH,
        )

    def _send(self, index: int, op: Op, fields: dict[str, Any]) -> Future[Reply]:
        fut: Future[Reply] = Future()
        # the reply thread must not wait for a place only it can free (a done-callback
        # sending a request): its requests go beyond the window
        if threading.current_thread() is not self._thread:
            if not self._window.acquire(timeout=self.request_timeout):
                raise DcpsTimeoutError(
                    f"{MAX_OUTSTANDING} requests to the store unanswered for "
                    f"{self.request_timeout:g} s: the store is not keeping up"
                )
            fut.add_done_callback(lambda _: self._window.release())
        rid = next(self._ids)
        with self._lock:
            self._pending[rid] = (fut, time.monotonic() + self.request_timeout)
            writer = self._writers[index]
        try:
            writer.write(Request(client=self.client_id, request_id=rid, op=int(op), **fields))
        except BaseException:
            self._forget(fut)
            raise
        return fut

    def _gather(
        self,
        op: Op,
        parts: list[tuple[int, dict[str, Any]]],
        merge: Callable[[Op, list[Reply]], Reply],
    ) -> Future[Reply]:
        """Send one request per part (store, fields); one future for the merged replies."""
        futures = [self._send(index, op, fields) for index, fields in parts]
        out: Future[Reply] = Future()
        left = [len(futures)]
        lock = threading.Lock()

        def done(_: Future[Reply]) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            for fut in futures:
                exc = fut.exception()
                if exc is not None:
                    out.set_exception(exc)
                    return
            try:
                out.set_result(merge(op, [fut.result() for fut in futures]))
            except Exception as exc:  # a reply that does not fit: fail this call only
                out.set_exception(exc)

        for fut in futures:
            fut.add_done_callback(done)
        return out

    def _ensure(self, count: int, fields: dict[str, Any]) -> Future[Reply]:
        """ENSURE_TOPIC on the coordinator, then on the others with its configuration.

        A topic new to some store (say one restarted on an empty directory)
        then gets the same channel count and retention everywhere.
        """
        out: Future[Reply] = Future()

        def first_done(fut: Future[Reply]) -> None:
            exc = fut.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            reply = fut.result()
            if reply.status:
                out.set_result(reply)
                return
            same = dict(fields, number=reply.number, flag=reply.flag)
            rest = self._gather(Op.ENSURE_TOPIC, [(i, same) for i in range(1, count)], _merge_all)

            def rest_done(f: Future[Reply]) -> None:
                exc = f.exception()
                if exc is not None:
                    out.set_exception(exc)
                else:
                    failed = f.result()
                    out.set_result(failed if failed.status else reply)

            rest.add_done_callback(rest_done)

        self._send(0, Op.ENSURE_TOPIC, fields).add_done_callback(first_done)
        return out

    def call(self, op: Op, timeout: float | None = None, **fields: Any) -> Reply:
        """Send a request and wait for its reply; store errors raise as dcps errors."""
        return self._reply(op, self.call_async(op, **fields), timeout)

    def fetch(
        self, topic: str, channel: int, offset: int, count: int, timeout: float | None = None
    ) -> Reply:
        """:meth:`fetch_async`, waiting for the reply like :meth:`call`."""
        return self._reply(Op.FETCH, self.fetch_async(topic, channel, offset, count), timeout)

    def _reply(self, op: Op, fut: Future[Reply], timeout: float | None) -> Reply:
        try:
            reply = fut.result(timeout=timeout if timeout is not None else self.request_timeout + 1)
        except TimeoutError as exc:
            self._forget(fut)
            raise DcpsTimeoutError(f"the store did not answer {op.name} in time") from exc
        return raise_for_reply(reply)

    def _run(self) -> None:
        while not self._closed:
            self._ws.wait(duration(milliseconds=100))
            if self._closed:
                break
            replies = self._reader.take(N=512)
            done: list[tuple[Future[Reply], Reply]] = []
            now = time.monotonic()
            expired: list[Future[Reply]] = []
            with self._lock:
                for reply in replies:
                    if getattr(reply, "client", None) != self.client_id:
                        continue
                    entry = self._pending.pop(reply.request_id, None)
                    if entry is not None:
                        done.append((entry[0], reply))
                for rid, (fut, deadline) in list(self._pending.items()):
                    if deadline < now:
                        del self._pending[rid]
                        expired.append(fut)
            for fut, reply in done:
                if not fut.done():
                    fut.set_result(reply)
            for fut in expired:
                if not fut.done():
                    fut.set_exception(DcpsTimeoutError("the store did not answer in time"))

    def close(self) -> None:
        """Stop the reply thread and fail pending requests (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._guard.set(True)
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for fut, _ in pending:
            if not fut.done():
                fut.set_exception(AlreadyClosedError("the store client was closed"))
        for entity in (self._cond, self._guard, self._ws):
            delete_entity(entity)
        drop_endpoint(self._reader)
        for writer in self._writers:
            drop_endpoint(writer)


def _merge_all(op: Op, replies: list[Reply]) -> Reply:
    """Every store's reply to one request: the first failure, else the coordinator's."""
    failed = next((r for r in replies if r.status), None)
    if failed is not None:
        return failed
    first = replies[0]
    if op == Op.DESTROY_GROUP:
        first.flag = int(any(r.flag for r in replies))
    return first


def _merge_every_channel(op: Op, replies: list[Reply]) -> Reply:
    """Every store's STATE of its own channels, merged in channel order."""
    failed = next((r for r in replies if r.status), None)
    if failed is not None:
        return failed
    order = sorted(c for r in replies for c in r.channels)
    return _merge_split(op, order, [list(r.channels) for r in replies], replies)


def _merge_split(
    op: Op, order: list[int], part_channels: list[list[int]], replies: list[Reply]
) -> Reply:
    """The replies to a request split by store, as one reply with channels in ``order``.

    A store refusing a COMMIT's member (not, or no longer, a member it knows)
    makes that store's channels UNOWNED; other failures fail the whole.
    """
    values: dict[int, dict[str, int]] = {c: {} for c in order}
    present = dict.fromkeys(_PER_CHANNEL, False)
    refused: Reply | None = None
    number = 0
    for channels, reply in zip(part_channels, replies, strict=True):
        if reply.status:
            if op == Op.COMMIT and reply.status == error_code(PreconditionNotMetError()):
                refused = reply
                present["codes"] = True
                for c in channels:
                    values[c]["codes"] = _UNOWNED_CODE
                continue
            return reply
        number = number or int(reply.number)
        for name in _PER_CHANNEL:
            column = getattr(reply, name)
            if column and len(column) == len(reply.channels):
                present[name] = True
                for c, value in zip(reply.channels, column, strict=True):
                    values.setdefault(c, {})[name] = value
    if refused is not None and all(r.status for r in replies):
        return refused
    first = replies[0]
    merged = Reply(client=first.client, request_id=first.request_id, number=number)
    merged.channels = list(order)
    for name in _PER_CHANNEL:
        if present[name]:
            setattr(merged, name, [_value(values[c], name) for c in order])
    return merged


def _value(values: dict[str, int], name: str) -> int:
    """A channel's value of a merged reply column; the default where its store sent none."""
    if name in values:
        return values[name]
    if name == "offsets":  # no commit on that store yet: just before the head
        return values.get("heads", 0) - 1
    return -1 if name == "tails" else 0


def run_waitset_thread(name: str, body: Callable[[], None]) -> threading.Thread:
    """Start a daemon thread running ``body``."""
    thread = threading.Thread(target=body, name=name, daemon=True)
    thread.start()
    return thread
