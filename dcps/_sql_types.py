"""What a filter expression needs to know about the fields of a topic type.

A :class:`Slot` describes the value found at a field path: its kind (the same
vocabulary as ``idl.FieldInfo.kind``), the Python class behind it (the enum or
struct class), and for collections the element slot. Slots are read from the
type annotations of ``cyclonedds.idl.IdlStruct`` classes, which is what every
``idl`` topic type is.
"""

from __future__ import annotations

import enum
import functools
import typing
from typing import Any

import attrs
from cyclonedds.idl import IdlEnum, IdlStruct, IdlUnion
from cyclonedds.idl import types as idl_types

from idl._errors import BadParameterError

__all__ = ["Slot", "member", "struct_slot"]

_SCALAR_KINDS = {
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "int64": "int",
    "uint8": "uint",
    "uint16": "uint",
    "uint32": "uint",
    "uint64": "uint",
    "byte": "octet",
    "octet": "octet",
    "float32": "float",
    "float64": "float",
    "char": "char",
    "wchar": "uint",
}

#: Kinds a comparison may use, grouped by the literals they accept.
NUMERIC_KINDS = frozenset({"int", "uint", "float", "octet"})
TEXT_KINDS = frozenset({"string", "char"})
SCALAR_KINDS = NUMERIC_KINDS | TEXT_KINDS | {"bool", "enum"}


@attrs.frozen
class Slot:
    """The type of the value at one field path of a topic type."""

    kind: str
    python_type: Any
    bound: int | None = None
    element: Slot | None = None
    optional: bool = False

    @property
    def describe(self) -> str:
        """A short human name for messages: ``int``, ``enum Color``, ``struct Pos``."""
        if self.kind in ("enum", "struct", "union"):
            return f"{self.kind} {getattr(self.python_type, '__name__', '?')}"
        return self.kind


def struct_slot(topic_type: Any) -> Slot:
    """The slot of a whole topic type; raises BadParameterError if it is no IDL struct."""
    if not (isinstance(topic_type, type) and issubclass(topic_type, IdlStruct)):
        raise BadParameterError(
            f"topic_type must be an IDL struct class (an IdlStruct), not {topic_type!r}"
        )
    return Slot("struct", topic_type)


def member(struct: Slot, name: str) -> Slot | None:
    """The slot of member ``name`` of a struct slot, or None if it has no such member."""
    hints = _hints(struct.python_type)
    if name not in hints:
        return None
    return _slot_of(hints[name])


@functools.lru_cache(maxsize=512)
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls, include_extras=True)
    except Exception as exc:  # unresolvable forward references and the like
        raise BadParameterError(f"cannot read the fields of {cls.__name__}: {exc}") from exc


def _slot_of(hint: Any, optional: bool = False) -> Slot:
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        base, *metadata = typing.get_args(hint)
        for meta in metadata:
            if isinstance(meta, str) and meta in _SCALAR_KINDS:
                return Slot(_SCALAR_KINDS[meta], base, optional=optional)
            if isinstance(meta, idl_types.bounded_str):
                return Slot("string", str, bound=meta.max_length, optional=optional)
            if isinstance(meta, idl_types.array):
                return Slot(
                    "array", list, meta.length, _slot_of(meta.subtype), optional=optional
                )
            if isinstance(meta, idl_types.sequence):
                return Slot(
                    "sequence",
                    list,
                    meta.max_length,
                    _slot_of(meta.subtype),
                    optional=optional,
                )
            if isinstance(meta, idl_types.typedef):
                return _slot_of(meta.subtype, optional)
        return _slot_of(base, optional)
    if origin is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _slot_of(args[0], optional=True)
        return Slot("union", hint, optional=optional)
    if hint is bool:
        return Slot("bool", bool, optional=optional)
    if hint is int:
        return Slot("int", int, optional=optional)
    if hint is float:
        return Slot("float", float, optional=optional)
    if hint is str:
        return Slot("string", str, optional=optional)
    if isinstance(hint, type):
        if issubclass(hint, IdlEnum) or issubclass(hint, enum.Enum):
            return Slot("enum", hint, optional=optional)
        if issubclass(hint, IdlStruct):
            return Slot("struct", hint, optional=optional)
        if issubclass(hint, IdlUnion):
            return Slot("union", hint, optional=optional)
    return Slot("other", hint, optional=optional)
