"""Key-value maps on the wire: requests ``MAP_*`` (Op 40-49), their replies and pushes.

A map is a named table of the store: string keys, values that are the CDR
bytes of one ``idl`` type (its :func:`idl.type_identity` is recorded when the
map is opened first, and checked on every later open and put). Every change
gets the next *revision* of its map (1, 2, ...: never reused, not even after
the map is dropped); a key's revision is that of its last change.

Entries travel packed: ``sizes`` holds ``key bytes, value bytes`` per entry
(value bytes ``-1``: the key was deleted, no value follows) and ``blob`` the
UTF-8 key then the value, entry after entry (:func:`pack_entries`).

Changes are pushed, like a channel's live tail, as
:class:`~dcps.wire._messages.LiveBatch` samples in partition
``<ns>/$maps/<map>`` (:func:`map_partition`): ``channel`` is the event
(:data:`PUSH_CHANGES` or :data:`PUSH_DROPPED`), ``first`` the revision of the
first change, ``timestamp`` the map's revision *before* the batch (a watcher
that has seen less fetches the gap with ``MAP_CHANGES``), ``sizes``/``blob``
the changed entries packed as above.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final, Self

import attrs

from idl._errors import BadParameterError

from ._codes import Op
from ._limits import MAX_ELEMENT_SIZE, check_wire_name
from ._messages import Reply, Request

__all__ = [
    "ANY_REVISION",
    "MAX_MAP_ENTRIES",
    "MAX_MAP_KEY_BYTES",
    "PUSH_CHANGES",
    "PUSH_DROPPED",
    "MapChangesRequest",
    "MapDeleteRequest",
    "MapDeleted",
    "MapDropRequest",
    "MapDropped",
    "MapEntries",
    "MapGetRequest",
    "MapListRequest",
    "MapOpenRequest",
    "MapOpened",
    "MapPutRequest",
    "MapPuts",
    "MapValue",
    "check_key",
    "map_partition",
    "pack_entries",
    "unpack_entries",
]

#: Most entries one request or reply carries.
MAX_MAP_ENTRIES: Final = 10_000
#: Longest key, in UTF-8 bytes.
MAX_MAP_KEY_BYTES: Final = 1024
#: An expected revision meaning "whatever the key holds" (no compare-and-set).
ANY_REVISION: Final = -1
#: ``LiveBatch.channel`` of a push of changes.
PUSH_CHANGES: Final = 0
#: ``LiveBatch.channel`` of the push telling that the map was dropped.
PUSH_DROPPED: Final = 1
#: MAP_CHANGES mode asking for the latest state of each key.
_LATEST: Final = "latest"
#: Per-entry status of a put: done, or refused since the key's revision differs.
STATUS_OK: Final = 0
STATUS_REVISION_MISMATCH: Final = 1


def map_partition(namespace: str, name: str) -> str:
    """The DDS partition in which the store pushes the changes of map ``name``."""
    return f"{namespace}/$maps/{name}"


def check_key(key: object) -> str:
    """A map key: a non-empty ``str`` of at most MAX_MAP_KEY_BYTES UTF-8 bytes, no NUL."""
    if not isinstance(key, str):
        raise BadParameterError(f"a map key is a str, not {type(key).__name__} ({key!r:.80})")
    size = len(key.encode("utf-8", "surrogatepass"))
    if not key or size > MAX_MAP_KEY_BYTES or "\x00" in key:
        raise BadParameterError(
            f"map key {key[:80]!r} is refused: a key has 1..{MAX_MAP_KEY_BYTES} UTF-8 bytes "
            "(MAX_MAP_KEY_BYTES) and no NUL"
        )
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise BadParameterError(f"map key {key[:80]!r} is not valid Unicode text") from None
    return key


def pack_entries(keys: Sequence[str], values: Sequence[bytes | None]) -> tuple[list[int], bytes]:
    """``(sizes, blob)`` of entries (a None value: deleted, sent as size -1)."""
    sizes: list[int] = []
    parts: list[bytes] = []
    for key, value in zip(keys, values, strict=True):
        raw = key.encode("utf-8")
        sizes.append(len(raw))
        parts.append(raw)
        if value is None:
            sizes.append(-1)
        else:
            sizes.append(len(value))
            parts.append(value)
    return sizes, b"".join(parts)


def unpack_entries(
    sizes: Sequence[int], blob: bytes, *, what: str = "map entries"
) -> list[tuple[str, bytes | None]]:
    """The ``(key, value)`` pairs :func:`pack_entries` packed; a bad layout raises
    :class:`~dcps.BadParameterError` naming ``what``."""
    if len(sizes) % 2:
        raise BadParameterError(f"{what}: 'sizes' must hold a key size and a value size per entry")
    if len(sizes) // 2 > MAX_MAP_ENTRIES:
        raise BadParameterError(
            f"{what}: {len(sizes) // 2} entries; the limit is MAX_MAP_ENTRIES = {MAX_MAP_ENTRIES}"
        )
    out: list[tuple[str, bytes | None]] = []
    pos = 0
    view = memoryview(blob)
    for i in range(0, len(sizes), 2):
        klen, vlen = int(sizes[i]), int(sizes[i + 1])
        if not 0 < klen <= MAX_MAP_KEY_BYTES:
            raise BadParameterError(
                f"{what}: entry {i // 2} has a key of {klen} bytes "
                f"(1..{MAX_MAP_KEY_BYTES}, MAX_MAP_KEY_BYTES)"
            )
        if vlen < -1 or vlen == 0 or vlen > MAX_ELEMENT_SIZE:
            raise BadParameterError(
                f"{what}: entry {i // 2} has a value of {vlen} bytes "
                f"(1..{MAX_ELEMENT_SIZE}, or -1 for a deleted key)"
            )
        end = pos + klen + max(vlen, 0)
        if end > len(blob):
            raise BadParameterError(f"{what}: the sizes add up to more than the blob's bytes")
        try:
            key = bytes(view[pos : pos + klen]).decode("utf-8")
        except UnicodeDecodeError:
            raise BadParameterError(f"{what}: entry {i // 2}'s key is not UTF-8") from None
        if "\x00" in key:
            raise BadParameterError(f"{what}: entry {i // 2}'s key contains NUL")
        value = None if vlen < 0 else bytes(view[pos + klen : end])
        out.append((key, value))
        pos = end
    if pos != len(blob):
        raise BadParameterError(
            f"{what}: the sizes add up to {pos} bytes, but the blob has {len(blob)}"
        )
    return out


def _map_name(r: Request) -> str:
    return check_wire_name("topic (map name)", r.topic)


def _request(op: Op, client: str, request_id: int, **fields: object) -> Request:
    return Request(client=client, request_id=request_id, op=op, **fields)  # type: ignore[arg-type]


# -- requests -------------------------------------------------------------------------------


@attrs.frozen
class MapOpenRequest:
    """Create map ``name`` unless it exists; record or check its value type's identity."""

    op: ClassVar[Op] = Op.MAP_OPEN
    name: str
    type_name: str = ""
    type_identity: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.name,
            text=self.type_name,
            member=self.type_identity,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(
            _map_name(r),
            check_wire_name("text (type name)", r.text, required=False),
            check_wire_name("member (type identity)", r.member, required=False),
        )


@attrs.frozen
class MapPutRequest:
    """Put entries (all in one transaction, each with its own outcome).

    ``expected[i]`` is the revision entry ``i``'s key must have for the put
    to happen: :data:`ANY_REVISION` for none, 0 for "the key must not exist"
    (create), ``r > 0`` for compare-and-set. ``type_identity`` must be the map's.
    """

    op: ClassVar[Op] = Op.MAP_PUT
    name: str
    keys: tuple[str, ...]
    values: tuple[bytes, ...]
    expected: tuple[int, ...]
    type_identity: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        sizes, blob = pack_entries(self.keys, self.values)
        return _request(
            self.op,
            client,
            request_id,
            topic=self.name,
            member=self.type_identity,
            sizes=sizes,
            blob=blob,
            offsets=list(self.expected),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        name = _map_name(r)
        entries = unpack_entries(r.sizes, bytes(r.blob), what=f"a MAP_PUT to map {name!r}")
        if not entries:
            raise BadParameterError(f"a MAP_PUT to map {name!r} carries no entry")
        if any(v is None for _, v in entries):
            raise BadParameterError(f"a MAP_PUT to map {name!r} carries an entry without value")
        if len(r.offsets) != len(entries):
            raise BadParameterError(
                f"a MAP_PUT to map {name!r} has {len(entries)} entries but "
                f"{len(r.offsets)} expected revisions (request field 'offsets')"
            )
        if r.offsets and min(r.offsets) < ANY_REVISION:
            raise BadParameterError(
                f"a MAP_PUT to map {name!r} expects revision {min(r.offsets)}: "
                "revisions are >= 0 (-1: any)"
            )
        return cls(
            name,
            tuple(k for k, _ in entries),
            tuple(v for _, v in entries if v is not None),
            tuple(int(o) for o in r.offsets),
            check_wire_name("member (type identity)", r.member, required=False),
        )


@attrs.frozen
class MapGetRequest:
    """The value and revision of ``key`` in map ``name``."""

    op: ClassVar[Op] = Op.MAP_GET
    name: str
    key: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(self.op, client, request_id, topic=self.name, text=self.key)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(_map_name(r), check_key(r.text))


@attrs.frozen
class MapDeleteRequest:
    """Delete ``key`` (if its revision is ``expected``, unless that is :data:`ANY_REVISION`)."""

    op: ClassVar[Op] = Op.MAP_DELETE
    name: str
    key: str
    expected: int = ANY_REVISION

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op, client, request_id, topic=self.name, text=self.key, number=self.expected
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.number < ANY_REVISION:
            raise BadParameterError(f"a MAP_DELETE expects revision {r.number}: revisions are >= 0")
        return cls(_map_name(r), check_key(r.text), int(r.number))


@attrs.frozen
class MapListRequest:
    """Up to ``limit`` live entries of map ``name`` whose key sorts after ``after``."""

    op: ClassVar[Op] = Op.MAP_LIST
    name: str
    after: str = ""
    limit: int = 1000
    values: bool = True

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.name,
            text=self.after,
            number=self.limit,
            flag=int(self.values),
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if not 1 <= r.number <= MAX_MAP_ENTRIES:
            raise BadParameterError(
                f"a MAP_LIST asks for {r.number} entries: 1..{MAX_MAP_ENTRIES} (MAX_MAP_ENTRIES)"
            )
        if r.flag not in (0, 1):
            raise BadParameterError(f"request field 'flag' (with values) is {r.flag}")
        after = check_key(r.text) if r.text else ""
        return cls(_map_name(r), after, int(r.number), bool(r.flag))


@attrs.frozen
class MapChangesRequest:
    """Up to ``limit`` changes of map ``name`` after revision ``after``, in revision order.

    Every change while the store's history of the map holds them (``latest``
    False); with ``latest``, or when the history no longer reaches back to
    ``after``, the latest state of each key changed since (its value, or its
    deletion).
    """

    op: ClassVar[Op] = Op.MAP_CHANGES
    name: str
    after: int = 0
    limit: int = 1000
    latest: bool = False

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(
            self.op,
            client,
            request_id,
            topic=self.name,
            number=self.after,
            flag=self.limit,
            text=_LATEST if self.latest else "",
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        if r.number < 0:
            raise BadParameterError(f"a MAP_CHANGES starts after revision {r.number}: >= 0")
        if not 1 <= r.flag <= MAX_MAP_ENTRIES:
            raise BadParameterError(
                f"a MAP_CHANGES asks for {r.flag} entries: 1..{MAX_MAP_ENTRIES} (MAX_MAP_ENTRIES)"
            )
        if r.text not in ("", _LATEST):
            raise BadParameterError(
                f"request field 'text' (mode) of a MAP_CHANGES is {r.text[:40]!r}: "
                f"'' (every change) or {_LATEST!r}"
            )
        return cls(_map_name(r), int(r.number), int(r.flag), r.text == _LATEST)


@attrs.frozen
class MapDropRequest:
    """Delete map ``name`` with every key (its revisions go on counting if it is re-created)."""

    op: ClassVar[Op] = Op.MAP_DROP
    name: str

    def to_wire(self, client: str, request_id: int) -> Request:
        return _request(self.op, client, request_id, topic=self.name)

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(_map_name(r))


MAP_REQUESTS: Final = (
    MapOpenRequest,
    MapPutRequest,
    MapGetRequest,
    MapDeleteRequest,
    MapListRequest,
    MapChangesRequest,
    MapDropRequest,
)

AnyMapRequest = (
    MapOpenRequest
    | MapPutRequest
    | MapGetRequest
    | MapDeleteRequest
    | MapListRequest
    | MapChangesRequest
    | MapDropRequest
)


# -- replies --------------------------------------------------------------------------------


@attrs.frozen
class MapOpened:
    """The answer to MAP_OPEN: the map's revision and the type identity it records."""

    revision: int
    type_identity: str

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client, request_id=request_id, number=self.revision, text=self.type_identity
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number), r.text)


@attrs.frozen
class MapPuts:
    """The answer to MAP_PUT: per entry, its new revision, or (``revisions[i]`` 0) the
    revision its key had instead of the expected one (``actual[i]``, 0: absent)."""

    revisions: tuple[int, ...]
    actual: tuple[int, ...]

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            offsets=list(self.revisions),
            heads=list(self.actual),
            codes=[STATUS_OK if r else STATUS_REVISION_MISMATCH for r in self.revisions],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.heads) != len(r.offsets):
            raise BadParameterError("malformed MAP_PUT reply (a revision per entry)")
        return cls(tuple(int(v) for v in r.offsets), tuple(int(v) for v in r.heads))


@attrs.frozen
class MapValue:
    """The answer to MAP_GET: the key's value and revision (``revision`` 0: no such key)."""

    revision: int
    value: bytes | None

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.revision,
            flag=int(self.value is not None),
            blob=self.value or b"",
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number), bytes(r.blob) if r.flag else None)


@attrs.frozen
class MapDeleted:
    """The answer to MAP_DELETE: whether the key existed, the deletion's revision (0: none
    happened), and the key's revision when it was not the expected one (else 0)."""

    existed: bool
    revision: int
    mismatch: int = 0

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            flag=int(self.existed),
            number=self.revision,
            heads=[self.mismatch],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bool(r.flag), int(r.number), int(r.heads[0]) if r.heads else 0)


@attrs.frozen
class MapEntries:
    """The answer to MAP_LIST and MAP_CHANGES: entries (value None: deleted, or not asked
    for), their revisions, whether more follow, and the map's revision. ``dropped``
    (MAP_CHANGES): the revision at which the map was dropped, when that is after the
    request's revision (0 otherwise); every entry listed is newer."""

    keys: tuple[str, ...]
    values: tuple[bytes | None, ...]
    revisions: tuple[int, ...]
    more: bool
    map_revision: int
    dropped: int = 0

    def to_wire(self, client: str, request_id: int) -> Reply:
        sizes, blob = pack_entries(self.keys, self.values)
        return Reply(
            client=client,
            request_id=request_id,
            sizes=sizes,
            blob=blob,
            offsets=list(self.revisions),
            flag=int(self.more),
            number=self.map_revision,
            heads=[self.dropped],
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        entries = unpack_entries(r.sizes, bytes(r.blob), what="a map reply")
        if len(r.offsets) != len(entries):
            raise BadParameterError("malformed map reply (a revision per entry)")
        return cls(
            tuple(k for k, _ in entries),
            tuple(v for _, v in entries),
            tuple(int(o) for o in r.offsets),
            bool(r.flag),
            int(r.number),
            int(r.heads[0]) if r.heads else 0,
        )


@attrs.frozen
class MapDropped:
    """The answer to MAP_DROP: whether the map existed."""

    existed: bool

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, flag=int(self.existed))

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(bool(r.flag))
