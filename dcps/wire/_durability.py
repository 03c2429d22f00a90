"""The durability service's part of the protocol: fetching stored TRANSIENT/PERSISTENT history.

A :class:`HistoryFetchRequest` (``Op.HISTORY_FETCH``) asks every durability
service listening on :func:`durability_partition` of a namespace for the
samples it keeps of one topic (or of every topic, ``topic=""``: how a
service that starts late aligns with the others), in some partitions, after
a cursor. Each service answers on the client's reply partition with a
:class:`HistoryPage`: up to ``count`` :class:`StoredSample` records in the
reply's blob, and the cursor to ask from next (``more`` says whether to).

Records are identified as DDS identifies a sample: the writer's GUID and
its source timestamp, plus a CRC-32 of the serialised payload (Cyclone's
Python binding shows no DDSI sequence numbers; two samples of one writer
with the same timestamp *and* bytes are taken to be the same sample).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, NamedTuple, Self

import attrs
from cyclonedds.core import Policy, Qos

from idl._errors import BadParameterError

from ._codes import Op
from ._limits import MAX_NAME_LENGTH, check_wire_name
from ._messages import Reply, Request
from ._names import CONTROL_QOS

__all__ = [
    "MAX_HISTORY_PAGE",
    "MAX_HISTORY_PAGE_BYTES",
    "HistoryFetchRequest",
    "HistoryPage",
    "SampleIdentity",
    "StoredSample",
    "decode_samples",
    "durability_partition",
    "encode_samples",
    "matched_services",
    "matched_subscriptions",
    "service_request_qos",
]

#: Most records one HISTORY_FETCH may ask for.
MAX_HISTORY_PAGE = 20_000
#: Most payload bytes a service puts in one page (it stops before exceeding it, unless
#: a single record is larger).
MAX_HISTORY_PAGE_BYTES = 4 * 1024 * 1024
#: Most partitions one request names.
MAX_HISTORY_PARTITIONS = 64

#: Flag bits of a stored sample.
FLAG_DISPOSES = 1  # the sample is a write_dispose (valid data, instance disposed)
FLAG_DISPOSED = 2  # the instance is disposed (by this sample or a later dispose)
FLAG_PERSISTENT = 4  # the topic's writers are PERSISTENT (the sample goes to disk)

_HEAD = struct.Struct("<16sqqIBHHHI")

#: (writer GUID, source timestamp ns, CRC-32 of the payload): one sample, wherever it came from.
SampleIdentity = tuple[bytes, int, int]


def durability_partition(namespace: str) -> str:
    """The DDS partition where durability services of ``namespace`` take requests."""
    return f"{namespace}/durability"


#: What a durability service's request reader carries in its UserData, before its incarnation.
_SERVICE_TAG = b"dcps-durability/"
#: The longest incarnation a service announces (ours are 32 hex digits).
_MAX_INCARNATION = 64


def service_request_qos(incarnation: str) -> Qos:
    """The QoS of a service's request reader: the protocol's control QoS, and the service's
    incarnation in UserData, so that a client whose request writer matched the reader knows
    which service it reaches (and addresses, and seals for, that one)."""
    return Qos(*CONTROL_QOS, Policy.Userdata(_SERVICE_TAG + incarnation.encode()))


def matched_services(request_writer: Any) -> set[str]:
    """The incarnations of the durability services whose request readers ``request_writer``
    (a Cyclone writer in :func:`durability_partition`) is matched with now.

    Once a reader is in this set, a reliable request written to it reaches it:
    a request written before the match reaches nobody (volatile), which is
    why clients ask each service once it matched, not all at once."""
    found: set[str] = set()
    for handle in matched_subscriptions(request_writer):
        data = request_writer.get_matched_subscription_data(handle)
        if data is None:
            continue
        try:
            tag = bytes(data.qos[Policy.Userdata].data)
        except (KeyError, AttributeError, TypeError):
            continue
        if not tag.startswith(_SERVICE_TAG) or len(tag) > len(_SERVICE_TAG) + _MAX_INCARNATION:
            continue
        try:
            incarnation = tag[len(_SERVICE_TAG) :].decode("ascii")
        except UnicodeDecodeError:
            continue
        if incarnation.isalnum():
            found.add(incarnation)
    return found


def matched_subscriptions(writer: Any) -> list[int]:
    """The handles of the readers a Cyclone ``writer`` is matched with now.

    cyclonedds' ``get_matched_subscriptions`` sizes its buffer by a first call
    and indexes it by what a second call returns: a reader matching in
    between raises IndexError (seen under load). Asked again then.
    """
    for _ in range(9):
        try:
            return list(writer.get_matched_subscriptions())
        except IndexError:
            continue  # the match count grew between the binding's two calls
    return list(writer.get_matched_subscriptions())


class StoredSample(NamedTuple):
    """One sample a durability service keeps: where it belongs, who wrote it, and its bytes.

    A named tuple: a late joiner decodes one per stored sample, so it must be cheap.
    """

    topic: str
    partition: str
    key: bytes  # the instance's serialised key (Cyclone's), b"" for a keyless topic
    writer: bytes  # the writer's 16-byte GUID
    timestamp: int  # source timestamp, ns since the epoch
    seq: int  # the service's own arrival order (its cursor)
    flags: int
    payload: bytes  # the serialised sample, with its encapsulation header

    @property
    def identity(self) -> SampleIdentity:
        """What makes this sample the same as one delivered live: writer, timestamp, bytes."""
        return (self.writer, self.timestamp, payload_crc(self.payload))

    @property
    def disposes(self) -> bool:
        """True if the sample is a write_dispose."""
        return bool(self.flags & FLAG_DISPOSES)

    @property
    def persistent(self) -> bool:
        """True if the sample belongs to a PERSISTENT topic."""
        return bool(self.flags & FLAG_PERSISTENT)

    @property
    def disposed(self) -> bool:
        """True if the instance was disposed (by this sample or later) when it was served."""
        return bool(self.flags & FLAG_DISPOSED)


def payload_crc(payload: bytes) -> int:
    """The CRC-32 of a payload, without the padding XCDR may add at its end."""
    return zlib.crc32(payload)


def encode_samples(samples: Iterable[StoredSample]) -> bytes:
    """The records of a page, as one blob."""
    out = bytearray()
    for s in samples:
        topic, partition = s.topic.encode(), s.partition.encode()
        out += _HEAD.pack(
            s.writer.ljust(16, b"\0")[:16],
            s.timestamp,
            s.seq,
            s.flags,
            0,
            len(topic),
            len(partition),
            len(s.key),
            len(s.payload),
        )
        out += topic + partition + s.key + s.payload
    return bytes(out)


def decode_samples(blob: bytes) -> Iterator[StoredSample]:
    """The records of a page's blob; :class:`BadParameterError` if it is malformed."""
    at, end = 0, len(blob)
    unpack, head = _HEAD.unpack_from, _HEAD.size
    names: dict[bytes, str] = {}  # a page holds few distinct topic and partition names
    new = tuple.__new__
    while at < end:
        if end - at < head:
            raise BadParameterError("a history page ends inside a record header")
        writer, ts, seq, flags, _, lt, lp, lk, ln = unpack(blob, at)
        at += head
        stop = at + lt + lp + lk + ln
        if stop > end:
            raise BadParameterError("a history page ends inside a record")
        raw_topic = blob[at : at + lt]
        topic = names.get(raw_topic)
        if topic is None:
            topic = names[raw_topic] = _text(raw_topic)
        at += lt
        raw_partition = blob[at : at + lp]
        partition = names.get(raw_partition)
        if partition is None:
            partition = names[raw_partition] = _text(raw_partition)
        at += lp
        key = blob[at : at + lk]
        payload = blob[at + lk : stop]
        at = stop
        yield new(StoredSample, (topic, partition, key, writer, ts, seq, flags, payload))


def _text(raw: bytes) -> str:
    try:
        return raw.decode()
    except UnicodeDecodeError as exc:
        raise BadParameterError("a history page names a topic or partition in bad UTF-8") from exc


@attrs.frozen
class HistoryFetchRequest:
    """Up to ``count`` stored samples of ``topic`` ("": every topic) in ``partitions``
    (partition patterns; empty: every partition) with a service cursor above ``after``,
    from the service with incarnation ``service`` ("" every service: a cursor is
    only meaningful to the service that gave it)."""

    op: ClassVar[Op] = Op.HISTORY_FETCH
    topic: str
    partitions: tuple[str, ...]
    after: int
    count: int
    service: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.HISTORY_FETCH,
            topic=self.topic,
            offsets=[self.after],
            number=self.count,
            member=self.service,
            blob="\n".join(self.partitions).encode(),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic = check_wire_name("topic", r.topic, required=False)
        if len(r.offsets) != 1:
            raise BadParameterError("a HISTORY_FETCH carries exactly one cursor (field 'offsets')")
        after = int(r.offsets[0])
        if after < 0:
            raise BadParameterError(f"a HISTORY_FETCH cursor is >= 0, got {after}")
        if not 1 <= r.number <= MAX_HISTORY_PAGE:
            raise BadParameterError(
                f"a HISTORY_FETCH asks for {r.number} samples: 1..{MAX_HISTORY_PAGE} "
                "(MAX_HISTORY_PAGE) at once"
            )
        try:
            text = bytes(r.blob).decode()
        except UnicodeDecodeError as exc:
            raise BadParameterError("HISTORY_FETCH partitions are not UTF-8") from exc
        partitions = tuple(text.split("\n")) if text else ()
        if len(partitions) > MAX_HISTORY_PARTITIONS:
            raise BadParameterError(
                f"a HISTORY_FETCH names {len(partitions)} partitions: at most "
                f"{MAX_HISTORY_PARTITIONS}"
            )
        for p in partitions:
            if len(p) > MAX_NAME_LENGTH:
                raise BadParameterError(f"partition {p[:40]!r}... is longer than {MAX_NAME_LENGTH}")
        service = check_wire_name("service", r.member, required=False)
        return cls(topic, partitions, after, int(r.number), service)


@attrs.frozen
class HistoryPage:
    """One service's answer: samples, the cursor to continue from, whether more remain,
    and which service answered (its incarnation)."""

    samples: tuple[StoredSample, ...]
    cursor: int
    more: bool
    service: str

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.cursor,
            flag=int(self.more),
            text=self.service,
            blob=encode_samples(self.samples),
        )

    @classmethod
    def from_wire(cls, reply: Reply) -> Self:
        return cls(
            tuple(decode_samples(bytes(reply.blob))),
            int(reply.number),
            bool(reply.flag),
            reply.text,
        )
