"""The durability service's part of the protocol: fetching stored TRANSIENT/PERSISTENT history.

A :class:`HistoryFetchRequest` (``Op.HISTORY_FETCH``) asks every durability
service listening on :func:`durability_partition` of a namespace for the
samples it keeps of one topic (or of every topic, ``topic=""``: how a
service that starts late aligns with the others), in some partitions, after
a cursor. Each service answers on the client's reply partition with a
:class:`HistoryPage`: up to ``count`` :class:`StoredSample` records in the
reply's blob, and the cursor to ask from next (``more`` says whether to).
The blob holds the records by column (:func:`encode_samples`), so that a
late joiner decodes 100 k of them in a few C calls (:func:`decode_columns`).

Records are identified as DDS identifies a sample: the writer's GUID and
its source timestamp, plus a CRC-32 of the serialised payload (Cyclone's
Python binding shows no DDSI sequence numbers; two samples of one writer
with the same timestamp *and* bytes are taken to be the same sample).
"""

from __future__ import annotations

import array
import operator
import struct
import sys
import zlib
from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from typing import Any, ClassVar, NamedTuple, Self

import attrs
from cyclonedds.core import Policy, Qos

from dcps._cyclone.binding import matched_readers
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
    "PageColumns",
    "SampleIdentity",
    "StoredSample",
    "decode_columns",
    "decode_page",
    "decode_samples",
    "durability_partition",
    "encode_samples",
    "matched_services",
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
    for handle in matched_readers(request_writer):
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


class StoredSample(NamedTuple):
    """One sample a durability service keeps: where it belongs, who wrote it, and its bytes.

    A named tuple, cheap to build: alignment between services decodes one per stored
    sample (a late joiner reads a page by column instead, :class:`PageColumns`).
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


#: A page's blob starts with this and the table sizes (see :func:`encode_samples`).
_PAGE = struct.Struct("<4sIIII")
_MAGIC = b"DHP2"
_NAME = struct.Struct("<H")
_KEY = struct.Struct("<I")
_GUID = 16
_get = operator.itemgetter
_TOPIC, _PARTITION, _KEYS, _WRITER, _TS, _SEQ, _FLAGS, _PAYLOAD = (_get(i) for i in range(8))


def _column(code: str, values: Iterable[int]) -> bytes:
    column = array.array(code, list(values))  # from a list: 5x faster than from an iterator
    if sys.byteorder == "big":
        column.byteswap()
    return column.tobytes()


def encode_samples(samples: Sequence[StoredSample]) -> bytes:
    """The records of a page, as one blob, by column (a reader decodes it in bulk).

    Layout (little-endian): ``"DHP2"``, the record count and the sizes of three
    tables (names, writers, keys); the names (u16 length + UTF-8: topics and
    partitions), the 16-byte writer GUIDs, the keys (u32 length + bytes); zero
    padding to a multiple of 8; then per record, column after column: source
    timestamp and service seq (i64), topic, partition, writer and key (u32
    indexes into the tables), flags, CRC-32 of the payload and payload size
    (u32); then the payloads back to back. A page of no records is empty.
    """
    n = len(samples)
    if not n:
        return b""
    topics = list(map(_TOPIC, samples))
    partitions = list(map(_PARTITION, samples))
    writers = list(map(_WRITER, samples))
    if set(map(len, writers)) != {_GUID}:  # GUIDs are 16 bytes; anything else is padded/cut
        writers = [w.ljust(_GUID, b"\0")[:_GUID] for w in writers]
    keys = list(map(_KEYS, samples))
    payloads = list(map(_PAYLOAD, samples))
    names = {name: i for i, name in enumerate(dict.fromkeys(topics + partitions))}
    guids = {w: i for i, w in enumerate(dict.fromkeys(writers))}
    key_table = {k: i for i, k in enumerate(dict.fromkeys(keys))}
    out = bytearray(_PAGE.pack(_MAGIC, n, len(names), len(guids), len(key_table)))
    for name in names:
        raw = name.encode()
        out += _NAME.pack(len(raw)) + raw
    out += b"".join(guids)
    for k in key_table:
        out += _KEY.pack(len(k)) + k
    out += bytes(-len(out) % 8)
    out += _column("q", map(_TS, samples))
    out += _column("q", map(_SEQ, samples))
    out += _column("I", map(names.__getitem__, topics))
    out += _column("I", map(names.__getitem__, partitions))
    out += _column("I", map(guids.__getitem__, writers))
    out += _column("I", map(key_table.__getitem__, keys))
    out += _column("I", map(_FLAGS, samples))
    out += _column("I", map(payload_crc, payloads))
    out += _column("I", map(len, payloads))
    out += b"".join(payloads)
    return bytes(out)


class PageColumns:
    """The records of a page, column by column (lists, built in C): what a late joiner
    files 100 k of without a Python object per record. ``payload_region`` is the
    payloads' span in ``blob`` (back to back, ``sizes`` long each)."""

    __slots__ = (
        "blob",
        "crcs",
        "flags",
        "keys",
        "partitions",
        "payload_region",
        "seqs",
        "sizes",
        "timestamps",
        "topics",
        "writers",
    )

    def __init__(
        self,
        topics: list[str],
        partitions: list[str],
        keys: list[bytes],
        writers: list[bytes],
        timestamps: list[int],
        seqs: list[int],
        flags: list[int],
        crcs: list[int],
        sizes: list[int],
        blob: bytes,
        payload_region: tuple[int, int],
    ) -> None:
        self.topics = topics
        self.partitions = partitions
        self.keys = keys
        self.writers = writers
        self.timestamps = timestamps
        self.seqs = seqs
        self.flags = flags
        self.crcs = crcs
        self.sizes = sizes
        self.blob = blob
        self.payload_region = payload_region

    def __len__(self) -> int:
        return len(self.timestamps)

    @property
    def payloads(self) -> list[bytes]:
        """Each record's serialised sample (its own bytes)."""
        start = self.payload_region[0]
        ends = list(accumulate(self.sizes, initial=start))
        return list(map(self.blob.__getitem__, map(slice, ends, ends[1:])))

    def records(self) -> list[StoredSample]:
        """The records as :class:`StoredSample` values."""
        return list(
            map(
                tuple.__new__,
                repeat(StoredSample),
                zip(
                    self.topics,
                    self.partitions,
                    self.keys,
                    self.writers,
                    self.timestamps,
                    self.seqs,
                    self.flags,
                    self.payloads,
                    strict=True,
                ),
            )
        )

    def select(self, indexes: list[int]) -> PageColumns:
        """The records at ``indexes``, in that order (their payloads copied out)."""
        payloads = self.payloads
        chosen = [payloads[i] for i in indexes]

        def pick(column: list[Any]) -> list[Any]:
            return list(map(column.__getitem__, indexes))

        return PageColumns(
            pick(self.topics),
            pick(self.partitions),
            pick(self.keys),
            pick(self.writers),
            pick(self.timestamps),
            pick(self.seqs),
            pick(self.flags),
            pick(self.crcs),
            pick(self.sizes),
            b"".join(chosen),
            (0, sum(map(len, chosen))),
        )


_EMPTY = PageColumns([], [], [], [], [], [], [], [], [], b"", (0, 0))


def decode_columns(blob: bytes) -> PageColumns:
    """The records of a page's blob by column; :class:`BadParameterError` if malformed."""
    end = len(blob)
    if not end:
        return _EMPTY
    if end < _PAGE.size:
        raise BadParameterError("a history page ends inside its header")
    magic, n, n_names, n_writers, n_keys = _PAGE.unpack_from(blob)
    if magic != _MAGIC:
        raise BadParameterError(f"a history page starts with {magic!r}, not {_MAGIC!r}")
    at = _PAGE.size
    names: list[str] = []
    for _ in range(n_names):
        if at + _NAME.size > end:
            raise BadParameterError("a history page ends inside its name table")
        (size,) = _NAME.unpack_from(blob, at)
        at += _NAME.size
        names.append(_text(blob[at : at + size]))
        at += size
    if at + n_writers * _GUID > end:
        raise BadParameterError("a history page ends inside its writer table")
    guids = [blob[i : i + _GUID] for i in range(at, at + n_writers * _GUID, _GUID)]
    at += n_writers * _GUID
    key_table: list[bytes] = []
    for _ in range(n_keys):
        if at + _KEY.size > end:
            raise BadParameterError("a history page ends inside its key table")
        (size,) = _KEY.unpack_from(blob, at)
        at += _KEY.size
        key_table.append(blob[at : at + size])
        at += size
    at += -at % 8
    if at + n * 44 > end:
        raise BadParameterError("a history page ends inside a record column")
    columns: list[list[int]] = []
    for code, width in (("q", 8), ("q", 8), *(("I", 4),) * 7):
        raw = array.array(code, blob[at : at + n * width])
        if sys.byteorder == "big":
            raw.byteswap()
        columns.append(raw.tolist())
        at += n * width
    ts, seqs, topic_ix, partition_ix, writer_ix, key_ix, flags, crcs, sizes = columns
    if sum(sizes) != end - at:
        raise BadParameterError("a history page ends inside a record's payload")
    for column, table, what in (
        (topic_ix, names, "topic"),
        (partition_ix, names, "partition"),
        (writer_ix, guids, "writer"),
        (key_ix, key_table, "key"),
    ):
        if n and max(column) >= len(table):
            raise BadParameterError(f"a history page names a {what} beyond its table")
    return PageColumns(
        list(map(names.__getitem__, topic_ix)),
        list(map(names.__getitem__, partition_ix)),
        list(map(key_table.__getitem__, key_ix)),
        list(map(guids.__getitem__, writer_ix)),
        ts,
        seqs,
        flags,
        crcs,
        sizes,
        blob,
        (at, end),
    )


def decode_samples(blob: bytes) -> list[StoredSample]:
    """The records of a page's blob; :class:`BadParameterError` if it is malformed."""
    return decode_columns(blob).records()


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


def decode_page(reply: Reply) -> tuple[PageColumns, int, bool, str]:
    """A :class:`HistoryPage` reply by column: (records, cursor, more, service)."""
    return decode_columns(bytes(reply.blob)), int(reply.number), bool(reply.flag), reply.text
