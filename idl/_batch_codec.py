"""Batch decoding of concatenated CDR samples: the codec helpers channels and Spark share.

A store batch is one ``blob`` holding the serialised samples (each with its
4-byte encapsulation header) back to back, and ``sizes``, the length of each.

- :func:`cdr_dtype` gives a numpy structured dtype over whole serialised
  samples of a fixed-size final type: field offsets follow the CDR alignment
  rules (XCDR1: natural alignment up to 8; XCDR2: up to 4; both relative to
  the body after the header), so a batch of them is one ``np.frombuffer``.
- :func:`decoder_of` gives the fastest function decoding a batch of a type:
  the numpy view for fixed-size types, the compiled codec of ``idl.Struct``
  types, else the type's own ``deserialize``. An element that does not decode
  becomes :data:`UNDECODABLE` in a :class:`PartialBatch`, with its index and
  error in :attr:`PartialBatch.errors`; what to do with it is the caller's
  choice.

Private to the project (``dcps.channels`` and ``dcps.spark`` import it).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._introspect import NUMERIC_KINDS, FieldInfo, describe
from ._schema import scalar_dtype

__all__ = [
    "UNDECODABLE",
    "BatchDecoder",
    "PartialBatch",
    "cdr_dtype",
    "decoder_of",
    "encoder_of",
    "fixed_columns",
    "leading_scalars",
    "leaf_of",
    "read_leading",
    "select_elements",
    "split_blob",
]

#: Decodes ``(blob, sizes)`` into the list of samples.
BatchDecoder = Callable[[bytes, list[int]], list[Any]]

#: Stands for an element whose bytes did not decode (in a :class:`PartialBatch`).
UNDECODABLE: Any = object()

#: Below this many elements a numpy decode costs more than it saves.
_FIXED_MIN = 8
_CDR_LE = 0x01
_PLAIN_CDR2_LE = 0x07


class PartialBatch(list[Any]):
    """A decoded batch in which some elements are :data:`UNDECODABLE`.

    ``errors`` maps the index of each undecodable element to why it failed.
    """

    __slots__ = ("errors",)

    def __init__(self) -> None:
        super().__init__()
        self.errors: dict[int, BaseException] = {}


# -- the fixed-size layout ------------------------------------------------------


def leaf_of(f: FieldInfo) -> tuple[FieldInfo, tuple[int, ...]]:
    """The element field of (nested) array field ``f`` and the array's shape (``()``: no array)."""
    shape: list[int] = []
    while f.kind == "array" and f.element is not None:
        shape.append(int(f.bound or 0))
        f = f.element
    return f, tuple(shape)


def _layout(fields: Sequence[FieldInfo], pos: int, max_align: int) -> tuple[Any, int] | None:
    """(numpy dtype spec with offsets relative to ``pos``, end position) or None."""
    names, formats, offsets = [], [], []
    start = pos
    for f in fields:
        if f.optional or f.kind in ("string", "sequence"):
            return None
        leaf, shape = leaf_of(f)
        if leaf.kind == "struct":
            if shape:
                return None  # arrays of structs: element layout may vary with position
            sub = _layout(leaf.fields, pos, max_align)
            if sub is None:
                return None
            dt, end = sub
            names.append(f.name)
            formats.append(dt)
            offsets.append(pos - start)
            pos = end
            continue
        if leaf.kind in ("string", "sequence"):
            return None
        scalar = scalar_dtype(leaf)
        align = min(scalar.itemsize, max_align)
        pos = (pos + align - 1) // align * align
        names.append(f.name)
        formats.append((scalar, shape) if shape else scalar)
        offsets.append(pos - start)
        pos += scalar.itemsize * int(np.prod(shape) if shape else 1)
    if not names:
        return None
    dt = np.dtype(
        {"names": names, "formats": formats, "offsets": offsets, "itemsize": max(1, pos - start)}
    )
    return dt, pos


def cdr_dtype(t: type, version: int = 1, size: int | None = None) -> np.dtype[Any] | None:
    """A numpy dtype over whole serialised samples (header included) of fixed-size ``t``.

    ``None`` when ``t`` has variable-size members or is not final.
    ``size`` (the payload length) pads the item size.
    """
    info = describe(t)
    if info.extensibility != "final":
        return None
    spec = _layout(info.fields, 0, 8 if version == 1 else 4)
    if spec is None:
        return None
    body, end = spec
    itemsize = size if size is not None else 4 + end
    if itemsize < 4 + end:
        return None
    return np.dtype({"names": ["_body"], "formats": [body], "offsets": [4], "itemsize": itemsize})


def fixed_columns(cls: type) -> list[tuple[str, bool]] | None:
    """``(field, is_array)`` of a type whose fields are all numbers/booleans or arrays of them."""
    columns = []
    for f in describe(cls).fields:
        if f.optional:
            return None
        if f.kind in NUMERIC_KINDS:
            columns.append((f.name, False))
            continue
        leaf, _ = leaf_of(f)
        if f.kind != "array" or leaf.kind not in NUMERIC_KINDS:
            return None
        columns.append((f.name, True))
    return columns or None


# -- decoding batches -------------------------------------------------------------


def split_blob(blob: bytes, sizes: list[int]) -> list[bytes]:
    """The elements of a batch, each its own bytes."""
    out = []
    pos = 0
    for size in sizes:
        out.append(blob[pos : pos + size])
        pos += size
    return out


def decoder_of(cls: type) -> BatchDecoder:
    """The fastest function decoding concatenated CDR samples (``blob``, ``sizes``) of ``cls``.

    ``idl.Struct`` types with a compiled codec are decoded by the codec without
    the binding's dispatch; fixed-size ones made of numbers, booleans and numeric
    arrays are decoded a whole batch at a time through a numpy structured dtype
    over the blob (:func:`cdr_dtype`). Anything else (other encodings, plain
    ``IdlStruct`` types) goes through ``cls.deserialize``. When an element does
    not decode, the batch is decoded one element at a time and returned as a
    :class:`PartialBatch` (the function never raises for bad bytes).
    """
    slow = cls.deserialize  # type: ignore[attr-defined]
    idl = getattr(cls, "__idl__", None)
    codec = None
    if idl is not None:
        idl.populate()
        codec = getattr(idl, "_codec", None)  # set by idl.Struct types (idl/_struct.py)
    by_header: dict[int, Callable[[bytes], Any]] = {}
    if codec is not None:
        by_header = {_CDR_LE: codec.de[1], _PLAIN_CDR2_LE: codec.de[2]}
    columns = fixed_columns(cls) if codec is not None else None
    dtypes: dict[tuple[int, int], Any] = {}  # (header byte, size) -> dtype, or False

    def per_element(blob: bytes, sizes: list[int]) -> list[Any]:
        get = by_header.get
        return [
            (get(p[1], slow) if len(p) >= 4 and not p[0] else slow)(p)
            for p in split_blob(blob, sizes)
        ]

    def one_by_one(blob: bytes, sizes: list[int]) -> list[Any]:
        """Decode what can be; the rest become UNDECODABLE, with their errors kept."""
        out = PartialBatch()
        for i, p in enumerate(split_blob(blob, sizes)):
            try:
                if not p:
                    raise ValueError("an empty element (no CDR header)")
                out.append(slow(p))
            except Exception as exc:
                out.errors[i] = exc
                out.append(UNDECODABLE)
        return out

    def guarded(decode: BatchDecoder) -> BatchDecoder:
        def run(blob: bytes, sizes: list[int]) -> list[Any]:
            try:
                return decode(blob, sizes)
            except Exception:
                return one_by_one(blob, sizes)

        return run

    if columns is None:
        return guarded(per_element)

    def decode(blob: bytes, sizes: list[int]) -> list[Any]:
        n = len(sizes)
        if n < _FIXED_MIN or blob[0] or blob[1] not in by_header:
            return per_element(blob, sizes)
        size = sizes[0]
        key = (blob[1], size)
        dtype: Any = dtypes.get(key)
        if dtype is None:
            version = 1 if blob[1] == _CDR_LE else 2
            dtype = dtypes[key] = cdr_dtype(cls, version, size) or False
        if dtype is False or len(blob) != n * size or min(sizes) != size or max(sizes) != size:
            return per_element(blob, sizes)
        headers = np.frombuffer(blob, dtype=np.uint8).reshape(n, size)[:, :2]
        if (headers != headers[0]).any():
            return per_element(blob, sizes)
        body: Any = np.frombuffer(blob, dtype=dtype)["_body"]
        values = [
            body[name].tolist() if not array else list(body[name].copy()) for name, array in columns
        ]
        return list(map(cls, *values))

    return guarded(decode)


# -- reading a few members without decoding -------------------------------------------
#
# A selector that reads only members at fixed offsets (numbers and booleans ahead of the
# first string or sequence) can run on those members read straight from the encoded batch;
# only the elements it may keep need decoding. Such a member also keeps its offset when its
# struct is the first member of an enclosing final struct (a JMS envelope's body): nested
# final structs take no alignment or header of their own in XCDR1 or plain XCDR2.


def leading_scalars(t: type, version: int) -> dict[str, tuple[int, np.dtype[Any]]]:
    """``name -> (offset, dtype)`` of the top-level numeric and boolean members of final
    struct ``t`` that precede its first variable-size member, in serialised samples of
    XCDR ``version`` (offsets from the start of the sample, its 4-byte header included).

    Numeric arrays before that member are stepped over (not listed); the walk stops at the
    first string, sequence, optional, enum, char or nested struct member. Empty for types
    that are not final or not ``idl`` structs.
    """
    try:
        info = describe(t)
    except Exception:  # not an IDL struct: nothing to read
        return {}
    if info.extensibility != "final":
        return {}
    max_align = 8 if version == 1 else 4
    out: dict[str, tuple[int, np.dtype[Any]]] = {}
    pos = 0
    for f in info.fields:
        if f.optional:
            break
        leaf, shape = leaf_of(f)
        if leaf.kind not in NUMERIC_KINDS:
            break
        scalar = scalar_dtype(leaf)
        align = min(scalar.itemsize, max_align)
        pos = (pos + align - 1) // align * align
        if not shape:
            out[f.name] = (4 + pos, scalar)
        pos += scalar.itemsize * int(np.prod(shape) if shape else 1)
    return out


_LEADING: dict[tuple[type, int], dict[str, tuple[int, np.dtype[Any]]]] = {}


def read_leading(
    blob: bytes, sizes: Sequence[int], t: type, names: Sequence[str]
) -> list[list[Any]] | None:
    """Members ``names`` (from :func:`leading_scalars`) of every sample of a batch of
    ``t`` (or of final structs whose first member is a ``t``), read from the encoded bytes:
    one list of Python values per name, in batch order, as the samples' decoded members
    would hold them.

    None when they cannot all be read so: a member not at a fixed offset, a batch shorter
    than :data:`_FIXED_MIN` elements, or any element with another encoding than the first
    one's (little-endian XCDR1 or plain XCDR2) or too short to hold the members.
    """
    n = len(sizes)
    if n < _FIXED_MIN or len(blob) < 4 or blob[0] or blob[1] not in (_CDR_LE, _PLAIN_CDR2_LE):
        return None
    version = 1 if blob[1] == _CDR_LE else 2
    key = (t, version)
    layout = _LEADING.get(key)
    if layout is None:
        layout = _LEADING[key] = leading_scalars(t, version)
    if not names or any(name not in layout for name in names):
        return None
    data = np.frombuffer(blob, dtype=np.uint8)
    size = np.fromiter(sizes, dtype=np.int64, count=n)
    starts = np.zeros(n, dtype=np.int64)
    np.cumsum(size[:-1], out=starts[1:])
    end = max(layout[name][0] + layout[name][1].itemsize for name in names)
    if int(starts[-1] + size[-1]) != len(blob) or int(size.min()) < end:
        return None
    if (data[starts] != 0).any() or (data[starts + 1] != blob[1]).any():
        return None
    columns = []
    for name in names:
        offset, dtype = layout[name]
        width = np.arange(dtype.itemsize, dtype=np.int64)
        raw = data[(starts + offset)[:, None] + width]  # (n, itemsize) bytes, C order
        if dtype.kind == "b":
            column = raw.reshape(n) != 0
        else:
            column = raw.view(dtype.newbyteorder("<")).reshape(n)
        columns.append(column.tolist())
    return columns


def select_elements(
    blob: bytes, sizes: Sequence[int], indexes: Sequence[int]
) -> tuple[bytes, list[int]]:
    """The batch made of elements ``indexes`` (ascending) of batch ``(blob, sizes)``."""
    starts = [0, *itertools.accumulate(sizes)]
    view = memoryview(blob)
    picked = [sizes[i] for i in indexes]
    return b"".join([view[starts[i] : starts[i] + sizes[i]] for i in indexes]), picked


# -- encoding samples ---------------------------------------------------------------


def encoder_of(cls: type) -> Callable[[Any], bytes]:
    """The fastest function turning a sample of ``cls`` into its CDR bytes (with header).

    For ``idl.Struct`` types with a compiled codec (final structs) this is the
    codec's serialiser itself, skipping the binding's dispatch; otherwise the
    type's own ``serialize``.
    """
    idl = getattr(cls, "__idl__", None)
    if idl is not None:
        idl.populate()
        codec = getattr(idl, "_codec", None)  # set by idl.Struct types (idl/_struct.py)
        if codec is not None:
            encode: Callable[[Any], bytes] = codec.ser[2 if idl.default_version == 2 else 1]
            return encode
    return cls.serialize  # type: ignore[attr-defined,no-any-return]
