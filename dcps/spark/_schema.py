"""Spark and Arrow schemas of topic types, with the dcps envelope columns.

The mapping (``spark_schema``/``arrow_row_schema``) is the contract of every
``dcps`` Spark reader and of recordings:

=====================  =========================  ================================
IDL                    Spark                      Arrow
=====================  =========================  ================================
int8/16/32/64          Byte/Short/Integer/Long    int8/16/32/64
uint8, octet           ShortType                  int16   (widened, never wraps)
uint16                 IntegerType                int32   (widened)
uint32                 LongType                   int64   (widened)
uint64                 DecimalType(20, 0)         decimal128(20, 0) (exact)
float32/float64        Float/DoubleType           float32/float64
boolean                BooleanType                bool
char, (bounded) string StringType                 string  (bound in field metadata)
enum                   StringType (member name)   string
struct                 StructType                 struct
sequence/array<T>      ArrayType(T)               list<T>
sequence/array<octet>  BinaryType                 binary
@optional T            nullable T                 nullable T
=====================  =========================  ================================

Envelope columns (all rows): ``_channel`` (int), ``_offset`` (long),
``_store_timestamp`` and ``_source_timestamp`` (timestamp, UTC; null when
unknown), ``_key`` (string: the JSON list of the key field values, ``[]`` for
keyless types). The underscore keeps them apart from the type's own members.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from idl import describe
from idl._introspect import FieldInfo

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql.types import StructType

__all__ = [
    "ENVELOPE",
    "arrow_row_schema",
    "arrow_type_of",
    "is_binary",
    "spark_schema",
]

ENVELOPE = ("_channel", "_offset", "_store_timestamp", "_source_timestamp", "_key")
"""Names of the envelope columns, in column order (they come first)."""


def is_binary(f: FieldInfo) -> bool:
    """True for ``sequence<octet>``/``sequence<uint8>`` and octet arrays (mapped to binary)."""
    e = f.element
    return (
        f.kind in ("sequence", "array")
        and e is not None
        and e.kind in ("octet", "uint")
        and e.bits == 8
    )


def arrow_type_of(f: FieldInfo) -> Any:
    """The Arrow type one field maps to (see the module table)."""
    import pyarrow as pa

    k = f.kind
    if k == "int":
        return getattr(pa, f"int{f.bits}")()
    if k in ("uint", "octet"):
        return {8: pa.int16(), 16: pa.int32(), 32: pa.int64(), 64: pa.decimal128(20, 0)}[
            int(f.bits or 8)
        ]
    if k == "float":
        return pa.float32() if f.bits == 32 else pa.float64()
    if k == "bool":
        return pa.bool_()
    if k in ("char", "string", "enum"):
        return pa.string()
    if k == "struct":
        return pa.struct([_arrow_field(m) for m in f.fields])
    if is_binary(f):
        return pa.binary()
    assert f.element is not None  # sequence or array
    return pa.list_(pa.field("element", arrow_type_of(f.element), nullable=False))


def _arrow_field(f: FieldInfo) -> Any:
    import pyarrow as pa

    meta = {b"idl.kind": f.kind.encode()}
    if f.bound is not None:
        meta[b"idl.bound"] = str(f.bound).encode()
    if f.is_key:
        meta[b"idl.key"] = b"true"
    return pa.field(f.name, arrow_type_of(f), nullable=f.optional, metadata=meta)


def arrow_row_schema(t: type, *, envelope: bool = True) -> pa.Schema:
    """The Arrow schema of rows of topic type ``t`` (envelope columns first)."""
    import pyarrow as pa

    info = describe(t)
    fields = []
    if envelope:
        ts = pa.timestamp("us", tz="UTC")
        fields += [
            pa.field("_channel", pa.int32(), nullable=False),
            pa.field("_offset", pa.int64(), nullable=False),
            pa.field("_store_timestamp", ts, nullable=True),
            pa.field("_source_timestamp", ts, nullable=True),
            pa.field("_key", pa.string(), nullable=False),
        ]
    fields += [_arrow_field(f) for f in info.fields]
    return pa.schema(fields, metadata={b"idl.typename": info.typename.encode()})


def _spark_type(f: FieldInfo) -> Any:
    from pyspark.sql import types as st

    k = f.kind
    if k == "int":
        return {8: st.ByteType(), 16: st.ShortType(), 32: st.IntegerType(), 64: st.LongType()}[
            int(f.bits or 32)
        ]
    if k in ("uint", "octet"):
        return {
            8: st.ShortType(),
            16: st.IntegerType(),
            32: st.LongType(),
            64: st.DecimalType(20, 0),
        }[int(f.bits or 8)]
    if k == "float":
        return st.FloatType() if f.bits == 32 else st.DoubleType()
    if k == "bool":
        return st.BooleanType()
    if k in ("char", "string", "enum"):
        return st.StringType()
    if k == "struct":
        return st.StructType([_spark_field(m) for m in f.fields])
    if is_binary(f):
        return st.BinaryType()
    assert f.element is not None
    return st.ArrayType(_spark_type(f.element), containsNull=False)


def _spark_field(f: FieldInfo) -> Any:
    from pyspark.sql import types as st

    meta: dict[str, Any] = {"idl.kind": f.kind}
    if f.bound is not None:
        meta["idl.bound"] = f.bound
    if f.is_key:
        meta["idl.key"] = True
    return st.StructField(f.name, _spark_type(f), nullable=f.optional, metadata=meta)


def spark_schema(t: type, *, envelope: bool = True) -> StructType:
    """The Spark ``StructType`` of rows of topic type ``t`` (envelope columns first).

    See the module docstring for the type table; ``uint64`` is
    ``DecimalType(20, 0)`` so values above 2**63 - 1 never wrap.
    """
    from pyspark.sql import types as st

    info = describe(t)
    fields = []
    if envelope:
        fields += [
            st.StructField("_channel", st.IntegerType(), nullable=False),
            st.StructField("_offset", st.LongType(), nullable=False),
            st.StructField("_store_timestamp", st.TimestampType(), nullable=True),
            st.StructField("_source_timestamp", st.TimestampType(), nullable=True),
            st.StructField("_key", st.StringType(), nullable=False),
        ]
    fields += [_spark_field(f) for f in info.fields]
    return st.StructType(fields)
