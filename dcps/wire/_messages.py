"""The IDL structs that travel between the store and its clients, and their fast codec.

One struct per direction (:class:`Request`, :class:`Reply`) keeps the wire
fast: the compiled codec of ``idl._codec`` (de)serialises a message in a few
microseconds. Their generic fields mean different things per request kind;
only the typed messages of ``_requests.py`` and ``_replies.py`` read and
write them, so that meaning lives in one place. Nothing else builds or reads
these structs' fields.

Decoding a :class:`Request` never raises: bytes that do not decode (a
string that is not UTF-8, a truncated sample) become an
:class:`UndecodableRequest` naming the problem, so one bad sample cannot drop
the other requests the store takes with it.
"""

# No "from __future__ import annotations": cyclonedds resolves IDL field types at run time.

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import attrs
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl._machinery import BytesMachine
from cyclonedds.idl.annotations import key

from idl._codec import build_codec

__all__ = [
    "Assignment",
    "LiveBatch",
    "Reply",
    "Request",
    "StoreAnnouncement",
    "UndecodableRequest",
]

if TYPE_CHECKING:  # what the IDL field types are to a type checker
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
    Blob = t.sequence[t.uint8]  # sent as bytes: see _bytes_fields


@dataclass
class Request(IdlStruct, typename="dcps_channels.Request"):
    """A request to the store (built and read only by the typed requests of ``_requests.py``)."""

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
    auth: Blob = b""  # the authentication trailer (``_sealing.py``); empty without a key


@dataclass
class _RawRequest(IdlStruct, typename="dcps_channels.RawRequest"):
    """:class:`Request` with its strings read as bytes (a CDR string is a
    uint32 length counting a final NUL, then the bytes: the layout of a
    ``sequence<octet>``). Used only to name what made a request undecodable."""

    client: Blob
    request_id: Int64
    op: Int32
    topic: Blob = b""
    group: Blob = b""
    member: Blob = b""
    number: Int64 = 0
    flag: Int32 = 0
    text: Blob = b""
    channels: Int32Seq = field(default_factory=list)
    offsets: Int64Seq = field(default_factory=list)
    sizes: Int32Seq = field(default_factory=list)
    blob: Blob = b""
    auth: Blob = b""


_REQUEST_STRINGS = ("client", "topic", "group", "member", "text")


@dataclass
class Reply(IdlStruct, typename="dcps_channels.Reply"):
    """The store's answer to one request (``status`` 0 means success; see ``_codes.ErrorCode``)."""

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
    auth: Blob = b""  # the authentication trailer (``_sealing.py``); empty without a key


@dataclass
class LiveBatch(IdlStruct, typename="dcps_channels.LiveBatch"):
    """One accepted batch of a channel, pushed live: elements at ``first``, ``first + 1``, ..."""

    topic: str
    channel: Int32
    first: Int64
    timestamp: Int64
    sizes: Int32Seq = field(default_factory=list)
    blob: Blob = b""
    auth: Blob = b""  # the authentication trailer (``_sealing.py``); empty without a key


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
    auth: Blob = b""  # the authentication trailer (``_sealing.py``); empty without a key


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
    auth: Blob = b""  # the authentication trailer (``_sealing.py``); empty without a key


@attrs.define
class UndecodableRequest:
    """A request sample that could not be decoded: who sent it (if readable) and why.

    ``client`` is ``""`` when even the sender's id is unreadable: nobody can
    be answered then. (Mutable: the binding sets ``sample_info`` on what it takes.)
    """

    client: str
    request_id: int
    problem: str
    sample_info: Any = None


def _bytes_fields(cls: Any, names: frozenset[str]) -> None:
    """Make ``names`` (IDL ``sequence<octet>``) travel as Python ``bytes``.

    The binding (de)serialises ``sequence<uint8>`` element by element into a
    list of ints, and its XTypes builder cannot describe a ``bytes`` field; the
    CDR of both is the same (a uint32 length, then the octets), so we describe
    the field as ``sequence<octet>`` and swap in the binding's bytes machine.
    """
    idl = cls.__idl__
    idl.populate()
    for machine in (idl.v1_machine, idl.v2_machine):
        for name in names:
            machine.members_machines[name] = BytesMachine()  # type: ignore[no-untyped-call]


def _compile(cls: Any, names: frozenset[str], *, keep_wire: bool = False) -> None:
    """Give ``cls`` the compiled codec of ``idl._codec`` for whole samples.

    The binding's per-field machines cost 30-60 us per message of these
    types, several per batch in both the client and the store; the compiled
    codec writes the same bytes (``tests/wire/test_protocol_codec.py``
    checks) in a few microseconds. Anything unusual (a caller's buffer,
    another endianness, key-only forms) still goes to the binding.
    ``keep_wire``: a decoded sample keeps its CDR bytes as ``_wire``, so the
    receiver checks its authentication without serialising it again.
    """
    codec = build_codec(cls, names)
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
                sample = de[1](data)
                if keep_wire:  # what the authentication tag is checked over (_sealing.py)
                    sample._wire = data
                return sample
            if data[:2] == b"\x00\x07":  # PLAIN_CDR2_LE
                return de[2](data)
        return generic_deserialize(klass, data, has_header, use_version_2)

    cls.serialize = serialize
    cls.deserialize = classmethod(deserialize)


def _never_raise(cls: Any) -> None:
    """Make ``cls.deserialize`` (the Request type) turn any failure into an UndecodableRequest."""
    strict = cls.deserialize.__func__

    def deserialize(klass: Any, data: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return strict(klass, data, *args, **kwargs)
        except Exception as exc:  # a sample that does not decode: name why, never raise
            return _undecodable(data, exc)

    cls.deserialize = classmethod(deserialize)


def _undecodable(data: Any, exc: Exception) -> UndecodableRequest:
    """What can be told about a request sample the strict decoder refused."""
    try:
        raw = _RawRequest.deserialize(bytes(data))
    except Exception:  # not even the layout fits: nobody to answer
        return UndecodableRequest("", 0, f"malformed request ({type(exc).__name__}: {exc})")
    problem = f"malformed request ({type(exc).__name__}: {exc})"
    texts: dict[str, str] = {}
    for name in _REQUEST_STRINGS:
        value: bytes = getattr(raw, name)
        if not value or value[-1:] != b"\x00":
            texts[name] = ""
            problem = f"request field {name!r} is not a NUL-terminated string"
            continue
        try:
            texts[name] = value[:-1].decode("utf-8")
        except UnicodeDecodeError:
            texts[name] = ""
            problem = f"request field {name!r} is not valid UTF-8"
    return UndecodableRequest(texts["client"], int(raw.request_id), problem)


_SEALED = frozenset({"blob", "auth"})
for _cls, _octets in ((Request, _SEALED), (Reply, _SEALED), (LiveBatch, _SEALED)):
    _bytes_fields(_cls, _octets)
    _compile(_cls, _octets, keep_wire=_octets is _SEALED)
# rare messages: the binding's machines serialise them
_bytes_fields(Assignment, frozenset({"auth"}))
_bytes_fields(StoreAnnouncement, frozenset({"auth"}))
_RAW_BYTES = frozenset({*_REQUEST_STRINGS, "blob", "auth"})
_bytes_fields(_RawRequest, _RAW_BYTES)
_compile(_RawRequest, _RAW_BYTES)
_never_raise(Request)
