"""Stored elements in bulk: runs of consecutive elements as the log keeps them.

The log stores each accepted batch as one row: its first offset, element
count, the accept timestamp of its first element (element ``i`` was accepted
at that plus ``i`` * :data:`ELEMENT_STEP_NS`), the element sizes (little-endian int32 each) and the
payloads concatenated. An :class:`ElementRun` is a contiguous range of one
channel cut out of such rows without building a Python object per element;
it travels in a FETCH reply in bulk form (see :meth:`ElementRun.reply_fields`)
and is decoded in bulk by the Spark source.
"""

from __future__ import annotations

import dataclasses
import itertools
import struct
from collections.abc import Iterable, Sequence
from typing import Any

import attrs
import numpy as np

from idl._errors import BadParameterError

__all__ = [
    "ELEMENT_STEP_NS",
    "ElementRun",
    "PackedPayloads",
    "message_pieces",
    "pack_sizes",
]

_SIZE = np.dtype("<i4")
#: Accept timestamps of consecutive elements of a stored batch are this far apart
#: (one microsecond: the resolution of a ``datetime``, so every element's
#: timestamp is distinct and exact where users see it).
ELEMENT_STEP_NS = 1000


def pack_sizes(sizes: Sequence[int]) -> bytes:
    """Element sizes as stored: one little-endian int32 each."""
    return np.asarray(sizes, dtype=_SIZE).tobytes()


_U32 = struct.Struct("<I")
_NO_AUTH = b"\x00\x00\x00\x00"
_PAD = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")


def message_pieces(message: Any) -> list[bytes | memoryview]:
    """The XCDR1 form of an unsealed protocol message whose last members are ``blob``
    and ``auth`` (a :class:`~dcps.wire._messages.Request` or ``LiveBatch``), in pieces.

    The rest is serialised with an empty blob (its last 8 bytes are then the blob's and
    the trailer's zero lengths) and the blob is a piece of its own, never copied here, so
    a writer that takes pieces (:func:`dcps._cyclone.gather.write_gathered`) copies a
    1 MiB batch once instead of three times. ``b"".join`` of the pieces is what
    ``message.serialize()`` returns (``tests/store/test_large_push.py`` checks).
    """
    if message.auth:
        raise BadParameterError("a sealed message is written whole: its tag covers every byte")
    blob = message.blob
    rest = dataclasses.replace(message, blob=b"").serialize()
    return [rest[:-8] + _U32.pack(len(blob)), blob, _PAD[-len(blob) & 3] + _NO_AUTH]


@attrs.frozen
class PackedPayloads:
    """A batch's payloads as one blob plus the size of each (what a PUBLISH request carries)."""

    sizes: Sequence[int]
    blob: bytes

    @classmethod
    def of(cls, payloads: Sequence[bytes]) -> PackedPayloads:
        """Pack a list of byte strings."""
        return cls([len(p) for p in payloads], b"".join(payloads))

    def check(self) -> bytes:
        """The stored form of the sizes; sizes that do not add up to the blob raise."""
        sizes = np.asarray(self.sizes, dtype=np.int64)
        if len(sizes) and (sizes.min() < 0 or int(sizes.sum()) != len(self.blob)):
            raise BadParameterError(
                f"a batch's element sizes add up to {int(sizes.sum())} bytes "
                f"(smallest {int(sizes.min())}), but its blob has {len(self.blob)}"
            )
        if not len(sizes) and self.blob:
            raise BadParameterError(f"a batch without elements carries {len(self.blob)} bytes")
        return sizes.astype(_SIZE).tobytes()


@attrs.frozen
class ElementRun:
    """Elements ``first .. first + count - 1`` of one channel, as stored.

    ``counts[i]`` elements come from one stored batch (one entry per stored
    batch the run touches, clipped at both ends); the first of them was
    accepted at ``stamps[i]`` and each next one :data:`ELEMENT_STEP_NS` later.
    (A run read from a store file older than format 4, whose elements share
    their batch's timestamp, has a count of 1 per element.) ``sizes`` holds
    the element sizes (little-endian int32 each) and ``data`` the payloads
    concatenated.
    """

    first: int
    counts: tuple[int, ...] = ()
    stamps: tuple[int, ...] = ()
    sizes: bytes = b""
    data: bytes = b""

    @property
    def count(self) -> int:
        """Number of elements."""
        return len(self.sizes) // 4

    @property
    def end(self) -> int:
        """The offset after the last element."""
        return self.first + self.count

    def element_sizes(self) -> np.ndarray[Any, np.dtype[np.int32]]:
        """Payload size of each element (a read-only numpy view)."""
        return np.frombuffer(self.sizes, dtype=_SIZE)

    def offsets(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Offset of each element."""
        return np.arange(self.first, self.end, dtype=np.int64)

    def timestamps(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """Accept timestamp (ns) of each element."""
        counts = np.asarray(self.counts, dtype=np.int64)
        stamps = np.asarray(self.stamps, dtype=np.int64)
        starts = np.cumsum(counts) - counts  # index of each group's first element
        index = np.arange(int(counts.sum()), dtype=np.int64)
        return np.repeat(stamps - starts * ELEMENT_STEP_NS, counts) + index * ELEMENT_STEP_NS

    def payloads(self) -> list[bytes]:
        """Each element's payload (one bytes object per element)."""
        data = self.data
        out = []
        pos = 0
        for size in self.element_sizes().tolist():
            out.append(data[pos : pos + size])
            pos += size
        return out

    # -- cutting runs out of stored rows ----------------------------------------

    @classmethod
    def from_rows(
        cls,
        rows: Iterable[tuple[int, int, int, bytes, bytes]],
        start: int,
        max_count: int,
        step: int = ELEMENT_STEP_NS,
    ) -> ElementRun:
        """The run of up to ``max_count`` elements from ``start`` on, out of stored batch rows.

        ``rows`` are ``(first_offset, count, ts, sizes, data)`` in offset order,
        the first one containing ``start`` or starting after it; reading stops
        at the first gap or once ``max_count`` elements were taken. ``step``
        is the time between a batch's elements (0 for a file older than
        format 4, whose elements share their batch's ``ts``).
        """
        counts: list[int] = []
        stamps: list[int] = []
        sizes: list[bytes] = []
        data: list[bytes] = []
        pos = start
        left = max_count
        for first, count, ts, raw_sizes, raw_data in rows:
            if first + count <= pos:
                continue
            if first > pos:
                if counts:
                    break  # a gap: the run stops before it
                pos = first  # nothing taken yet: the run starts at the first stored element
            skip = pos - first
            take = min(count - skip, left)
            if skip == 0 and take == count:
                sizes.append(bytes(raw_sizes))
                data.append(bytes(raw_data))
            else:
                each = np.frombuffer(raw_sizes, dtype=_SIZE)
                lo = int(each[:skip].sum())
                hi = lo + int(each[skip : skip + take].sum())
                sizes.append(bytes(raw_sizes[4 * skip : 4 * (skip + take)]))
                data.append(bytes(raw_data[lo:hi]))
            counts.append(take)
            stamps.append(int(ts) + skip * step)
            pos += take
            left -= take
            if left <= 0:
                break
        first_offset = pos - sum(counts)
        return cls(first_offset, tuple(counts), tuple(stamps), b"".join(sizes), b"".join(data))

    @classmethod
    def join(cls, runs: Sequence[ElementRun]) -> ElementRun:
        """Consecutive runs as one (each must start where the previous one ends)."""
        runs = [r for r in runs if r.count]
        if not runs:
            return cls(0)
        for a, b in itertools.pairwise(runs):
            if b.first != a.end:
                raise BadParameterError(f"runs are not consecutive: {a.end} then {b.first}")
        if len(runs) == 1:
            return runs[0]
        return cls(
            runs[0].first,
            tuple(c for r in runs for c in r.counts),
            tuple(s for r in runs for s in r.stamps),
            b"".join(r.sizes for r in runs),
            b"".join(r.data for r in runs),
        )

    # -- the FETCH reply's bulk form ----------------------------------------------

    def reply_fields(self) -> dict[str, Any]:
        """The FETCH reply fields of the bulk form.

        ``offsets`` = ``[first]`` (empty when there are no elements), ``codes``
        = element count per stored batch, ``stamps`` = its timestamp,
        ``number`` = element count, ``blob`` = the sizes (int32 LE each)
        followed by the payloads; ``sizes`` stays empty, since the binding
        serialises an integer sequence element by element.
        """
        if not self.count:
            return {"offsets": [], "codes": [], "stamps": [], "number": 0, "blob": b""}
        return {
            "offsets": [self.first],
            "codes": list(self.counts),
            "stamps": list(self.stamps),
            "number": self.count,
            "blob": self.sizes + self.data,
        }

    @classmethod
    def from_reply(cls, reply: Any) -> ElementRun:
        """The run a bulk-form FETCH reply carries."""
        n = int(reply.number)
        if not n or not reply.offsets:
            return cls(0)
        blob = bytes(reply.blob)
        if len(blob) < 4 * n or sum(reply.codes) != n:
            raise BadParameterError("malformed bulk FETCH reply (sizes do not match the counts)")
        return cls(
            int(reply.offsets[0]),
            tuple(int(c) for c in reply.codes),
            tuple(int(s) for s in reply.stamps),
            blob[: 4 * n],
            blob[4 * n :],
        )
