"""Schema mappings of topic types: numpy structured dtypes and Apache Arrow.

``pyarrow`` is imported lazily, only by the Arrow functions.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum as _PyEnum
from typing import TYPE_CHECKING, Any

import numpy as np

from ._errors import IdlError
from ._introspect import NUMERIC_KINDS, FieldInfo, describe

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa

__all__ = ["arrow_schema", "from_arrow", "numpy_dtype", "scalar_dtype", "to_arrow"]

_NP = {
    ("int", 8): "i1",
    ("int", 16): "i2",
    ("int", 32): "i4",
    ("int", 64): "i8",
    ("uint", 8): "u1",
    ("uint", 16): "u2",
    ("uint", 32): "u4",
    ("uint", 64): "u8",
    ("octet", 8): "u1",
    ("float", 32): "f4",
    ("float", 64): "f8",
    ("bool", None): "?",
    ("enum", 32): "i4",
    ("char", None): "S1",
}


def scalar_dtype(f: FieldInfo) -> np.dtype[Any]:
    """numpy dtype of a numeric/bool/char/enum field (``IdlError`` otherwise)."""
    code = _NP.get((f.kind, f.bits))
    if code is None:
        raise IdlError(f"field {f.path!r} ({f.kind}) has no numpy scalar dtype")
    return np.dtype(code)


def _np_field(f: FieldInfo) -> Any:
    if f.kind == "struct":
        return np.dtype([(m.name, _np_field(m)) for m in f.fields])
    if f.kind == "array":
        shape = []
        leaf = f
        while leaf.kind == "array" and leaf.element is not None:
            shape.append(leaf.bound or 0)
            leaf = leaf.element
        return (_np_field(leaf), tuple(shape))
    if f.kind in ("string", "sequence") or f.optional:
        what = "optional" if f.optional else f.kind
        raise IdlError(f"field {f.path!r} is variable-size ({what}); no fixed numpy layout")
    return scalar_dtype(f)


def numpy_dtype(t: type) -> np.dtype[Any]:
    """A numpy structured dtype for fixed-size topic type ``t`` (packed, declaration order).

    Raises ``IdlError`` naming the first variable-size field (string, sequence).
    """
    info = describe(t)
    return np.dtype([(f.name, _np_field(f)) for f in info.fields])


# --- Arrow --------------------------------------------------------------------------


def _pa() -> Any:
    try:
        import pyarrow
    except ImportError as exc:  # pragma: no cover - pyarrow is an optional dependency
        raise IdlError("Arrow mapping needs pyarrow (pip install 'dcps[arrow]')") from exc
    return pyarrow


def _arrow_type(f: FieldInfo, pa: Any) -> Any:
    k = f.kind
    if k in ("int", "uint", "octet"):
        signed = k == "int"
        return getattr(pa, f"{'int' if signed else 'uint'}{f.bits}")()
    if k == "float":
        return pa.float32() if f.bits == 32 else pa.float64()
    if k == "bool":
        return pa.bool_()
    if k in ("char", "string"):
        return pa.string()
    if k == "enum":
        return pa.dictionary(pa.int32(), pa.string())
    if k == "struct":
        return pa.struct([_arrow_field(m, pa) for m in f.fields])
    if k == "sequence":
        assert f.element is not None
        return pa.list_(_arrow_type(f.element, pa))
    if k == "array":
        assert f.element is not None
        return pa.list_(_arrow_type(f.element, pa), f.bound)
    raise IdlError(f"field {f.path!r}: no Arrow type for {k}")  # pragma: no cover


def _arrow_field(f: FieldInfo, pa: Any) -> Any:
    meta = {b"idl.kind": f.kind.encode()}
    if f.is_key:
        meta[b"idl.key"] = b"true"
    if f.bound is not None:
        meta[b"idl.bound"] = str(f.bound).encode()
    return pa.field(f.name, _arrow_type(f, pa), nullable=f.optional, metadata=meta)


def arrow_schema(t: type) -> pa.Schema:
    """The Arrow schema of topic type ``t``.

    Integers keep their width and signedness (``uint64`` stays ``uint64``),
    strings and chars are ``string``, sequences ``list``, arrays fixed-size
    ``list``, nested structs ``struct``, enums ``dictionary<int32, string>``
    (member names). Field metadata marks keys (``idl.key``) and bounds.
    """
    pa = _pa()
    info = describe(t)
    return pa.schema(
        [_arrow_field(f, pa) for f in info.fields],
        metadata={
            b"idl.typename": info.typename.encode(),
            b"idl.keys": ",".join(info.keys).encode(),
        },
    )


def _to_py(v: Any, f: FieldInfo) -> Any:
    if v is None:
        return None
    k = f.kind
    if k == "enum":
        return v.name if isinstance(v, _PyEnum) else f.python_type(v).name
    if k == "struct":
        return {m.name: _to_py(getattr(v, m.name), m) for m in f.fields}
    if k in ("sequence", "array"):
        elem = f.element
        assert elem is not None
        if isinstance(v, (bytes, bytearray, memoryview)):
            return np.frombuffer(v, dtype=np.uint8)
        if isinstance(v, np.ndarray):
            return v if v.ndim == 1 else [_to_py(row, elem) for row in v]
        if elem.kind in NUMERIC_KINDS or elem.kind in ("string", "char"):
            return v
        return [_to_py(x, elem) for x in v]
    return v


def to_arrow(samples: Iterable[Any], t: type) -> pa.Table:
    """An Arrow table with one row per sample of topic type ``t``."""
    pa = _pa()
    info = describe(t)
    schema = arrow_schema(t)
    rows = list(samples)
    columns = []
    for f, field in zip(info.fields, schema, strict=True):
        if f.kind in NUMERIC_KINDS or f.kind in ("string", "char"):
            values = [getattr(s, f.name) for s in rows]
        else:
            values = [_to_py(getattr(s, f.name), f) for s in rows]
        columns.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _from_py(v: Any, f: FieldInfo, numpy_ok: bool) -> Any:
    if v is None:
        return None
    k = f.kind
    if k == "enum":
        enum_cls: Any = f.python_type
        return enum_cls[v] if isinstance(v, str) else enum_cls(v)
    if k == "struct":
        return f.python_type(**{m.name: _from_py(v[m.name], m, numpy_ok) for m in f.fields})
    if k in ("sequence", "array"):
        elem = f.element
        assert elem is not None
        leaf = elem
        while leaf.kind == "array" and leaf.element is not None:
            leaf = leaf.element
        if f.python_type is np.ndarray:
            return np.asarray(v, dtype=scalar_dtype(leaf))
        if f.python_type is bytearray:
            return bytearray(v)
        return [_from_py(x, elem, numpy_ok) for x in v]
    return v


def from_arrow(table: pa.Table, t: type) -> list[Any]:
    """Samples of topic type ``t`` from an Arrow table (the inverse of ``to_arrow``).

    Columns are matched by name; a missing column raises ``IdlError``.
    """
    info = describe(t)
    names = set(table.column_names)
    for f in info.fields:
        if f.name not in names:
            raise IdlError(f"Arrow table has no column {f.name!r} for {info.typename}")
    cols = []
    for f in info.fields:
        col = table.column(f.name)
        if f.kind == "enum":
            col = col.cast(_pa().string()) if _pa().types.is_dictionary(col.type) else col
        values = col.to_pylist()
        if f.kind in NUMERIC_KINDS or f.kind in ("string", "char"):
            cols.append(values)
        else:
            cols.append([_from_py(v, f, True) for v in values])
    names_ = [f.name for f in info.fields]
    return (
        [t(**dict(zip(names_, row, strict=True))) for row in zip(*cols, strict=True)]
        if cols
        else [t() for _ in range(table.num_rows)]
    )
