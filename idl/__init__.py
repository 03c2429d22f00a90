"""Typed topics: IDL-like dataclasses on Cyclone DDS types.

Declare a topic type as a class::

    import idl

    class Color(idl.Enum, typename="sensors::Color"):
        RED = 0
        GREEN = 1

    class Reading(idl.Struct, typename="sensors::Reading"):
        sensor: idl.key[idl.int32]
        name: idl.bounded_str[16]
        color: Color
        samples: idl.sequence[idl.float32]      # numpy.ndarray on read
        note: idl.optional[idl.string]          # None when absent

or load it from an OMG IDL file with ``idl.load("sensors.idl")``. Either way
the class is a ``cyclonedds.idl.IdlStruct`` dataclass that serialises exactly
as ``idlc`` would for the same IDL (``final`` by default, like ``idlc``; final
structs go through a compiled codec, numeric sequences through numpy).
``describe``/``field_at``/``key_fields``/``get_path`` introspect it;
``type_identity`` names its wire structure (type name and a stable hash);
``validate`` checks a sample against it; ``numpy_dtype``, ``arrow_schema``,
``to_arrow`` and ``from_arrow`` map it to numpy and Arrow.
"""

from cyclonedds.idl.annotations import appendable, final, mutable

from ._errors import IdlError, IdlSyntaxError
from ._identity import type_identity
from ._introspect import (
    FieldInfo,
    StructInfo,
    describe,
    field_at,
    get_path,
    is_topic_type,
    key_fields,
)
from ._loader import IdlModule, load, loads
from ._public import show_as as _show_as
from ._schema import arrow_schema, from_arrow, numpy_dtype, to_arrow
from ._struct import Enum, Struct, make_enum, make_struct
from ._types import (
    array,
    bounded_str,
    char,
    float32,
    float64,
    int8,
    int16,
    int32,
    int64,
    key,
    octet,
    optional,
    sequence,
    string,
    typedef,
    uint8,
    uint16,
    uint32,
    uint64,
)
from ._validate import validate

__all__ = [
    "Enum",
    "FieldInfo",
    "IdlError",
    "IdlModule",
    "IdlSyntaxError",
    "Struct",
    "StructInfo",
    "appendable",
    "array",
    "arrow_schema",
    "bounded_str",
    "char",
    "describe",
    "field_at",
    "final",
    "float32",
    "float64",
    "from_arrow",
    "get_path",
    "int8",
    "int16",
    "int32",
    "int64",
    "is_topic_type",
    "key",
    "key_fields",
    "load",
    "loads",
    "make_enum",
    "make_struct",
    "mutable",
    "numpy_dtype",
    "octet",
    "optional",
    "sequence",
    "string",
    "to_arrow",
    "type_identity",
    "typedef",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "validate",
]

_show_as("idl", *(globals()[_name] for _name in __all__))
