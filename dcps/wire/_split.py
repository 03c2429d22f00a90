"""Decoding a taken Request or LiveBatch with its payloads copied once.

The binding's ``take`` copies a sample out of Cyclone twice (into a buffer of
its own, then into a ``bytes``) and the codec copies the ``blob`` field a
third time when it slices it out: three copies of a 1 MiB batch. Here the
sample is read in place (:func:`dcps._cyclone.calls.take_views`): the few
bytes before and after the blob are decoded by the compiled codec as a
sample with an empty blob (the same fields in the same layout), and the blob
is copied once, straight from Cyclone's buffer, into the decoded sample.

Both message types end with ``blob`` then ``auth``, both ``sequence<octet>``.
A sample under :data:`SPLIT_MIN` bytes is copied and decoded whole (for a
small one the split costs more than the copies it saves). A sealed
message's authentication tag covers its whole serialised form, so when a key
is set every sample is decoded whole, as before. Anything that does not walk
cleanly (a length past the end) is decoded whole too (:func:`decode_whole`),
so the codec names the problem exactly as it did.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import take_views

from ._messages import LiveBatch, Request
from ._names import ANY_STATE

__all__ = [
    "LIVE_BATCH_HEAD",
    "REQUEST_HEAD",
    "SPLIT_MIN",
    "decode_split",
    "decode_whole",
    "splitter",
    "take_decoded",
]

_U32 = struct.Struct("<I")
_EMPTY = b"\x00\x00\x00\x00"

#: The fields ahead of ``blob``, in XCDR1 order: ``s`` string, ``i`` int32, ``q`` int64,
#: ``4``/``8`` a sequence of 4-/8-byte numbers.
#: Samples smaller than this are copied and decoded whole (measured: the split costs
#: ~10 us more per sample; a copy of 64 KiB ~5 us).
SPLIT_MIN = 128 * 1024
_NEVER = 1 << 62
REQUEST_HEAD = "sqisssqis484"  # client .. sizes (dcps.wire._messages.Request)
LIVE_BATCH_HEAD = "siqq4"  # topic, channel, first, timestamp, sizes


def _blob_at(data: memoryview, head: str) -> tuple[int, int]:
    """Where the blob's length field and its bytes end: ``(length field, end of the blob)``.

    Positions count from the start of ``data`` (the CDR header is 4 bytes;
    XCDR1 aligns from the end of it). Raises ``ValueError`` past the end.
    """
    pos = 0  # in the body
    unpack = _U32.unpack_from
    for kind in head:
        if kind == "q":
            pos += (-pos & 7) + 8
            continue
        pos += -pos & 3
        if kind == "i":
            pos += 4
            continue
        (n,) = unpack(data, 4 + pos)
        pos += 4
        if kind == "s":
            pos += n
        elif kind == "4":
            pos += 4 * n
        elif n:  # "8"
            pos += (-pos & 7) + 8 * n
    pos += -pos & 3
    (n,) = unpack(data, 4 + pos)
    length_at = 4 + pos
    end = length_at + 4 + n
    if end + (-(end - 4) & 3) + 4 > len(data):  # the auth length follows the blob, aligned
        raise ValueError("a blob past the end of the sample")
    return length_at, end


def decode_split(cls: Any, head: str, data: memoryview) -> Any:
    """Decode ``data`` (a serialised ``cls`` in XCDR1, little-endian), copying its blob once."""
    if data[0] or data[1] != 1:  # not CDR_LE (XCDR1, little-endian)
        return decode_whole(cls, data)
    try:
        length_at, end = _blob_at(data, head)
    except (ValueError, struct.error):
        return decode_whole(cls, data)
    auth_at = end + (-(end - 4) & 3)
    # the same fields with an empty blob: auth follows the length field at once
    sample = cls.deserialize(b"".join((data[:length_at], _EMPTY, data[auth_at:])))
    if isinstance(sample, cls):
        sample.blob = bytes(data[length_at + 4 : end])
        sample._wire = None  # not the form a tag covers
    return sample


def decode_whole(cls: Any, data: memoryview) -> Any:
    """Decode ``data`` as the binding's ``take`` would (one copy of the whole form)."""
    return cls.deserialize(bytes(data))


def splitter(cls: Any) -> Callable[[bytes | memoryview], Any]:
    """What decodes each taken sample of ``cls`` (Request or LiveBatch): a ``bytes``
    sample whole, a view (of a large sample) split; None if it does not decode."""
    head = {Request: REQUEST_HEAD, LiveBatch: LIVE_BATCH_HEAD}[cls]
    deserialize = cls.deserialize

    def use(data: bytes | memoryview) -> Any:
        try:
            if data.__class__ is bytes:  # a small sample (or sealed): copied whole already
                return deserialize(data)
            return decode_split(cls, head, data)  # type: ignore[arg-type]
        except Exception:  # never seen (Cyclone checks a sample's form as it arrives): skipped
            return None

    return use


def take_decoded(reader: Any, cls: Any, max_samples: int, *, sealed: bool) -> list[Any]:
    """Take up to ``max_samples`` valid samples of a Request or LiveBatch reader, decoded
    (the binding's ``reader.take`` for these types, with one copy of each blob); a sample
    that does not decode at all is left out (a Request never fails: it becomes an
    ``UndecodableRequest``)."""
    samples = take_views(
        entity_ref(reader),
        _ANY,
        max_samples,
        _SPLITTERS[cls],
        _NEVER if sealed else SPLIT_MIN,  # a sealed one is copied whole: a tag covers it
    )
    return [s for s in samples if s is not None] if None in samples else samples


_ANY = int(ANY_STATE)
_SPLITTERS = {Request: splitter(Request), LiveBatch: splitter(LiveBatch)}
