"""What a filter expression needs to know about the fields of a topic type.

A :class:`Slot` describes the value found at a field path: its kind (the
vocabulary of ``idl.FieldInfo.kind``), the Python class behind it (the enum or
struct class), and for collections the element slot. Slots are built from
``idl.describe`` so filters see a type exactly as the rest of dcps does.
"""

from __future__ import annotations

from typing import Any

import attrs
import numpy as np

import idl
from idl import FieldInfo

__all__ = ["NUMERIC_KINDS", "SCALAR_KINDS", "TEXT_KINDS", "Slot", "member", "struct_slot"]

#: Kinds a comparison may use, grouped by the literals they accept.
NUMERIC_KINDS = frozenset({"int", "uint", "float", "octet"})
TEXT_KINDS = frozenset({"string", "char"})
SCALAR_KINDS = NUMERIC_KINDS | TEXT_KINDS | {"bool", "enum"}


@attrs.frozen
class Slot:
    """The type of the value at one field path of a topic type.

    ``numpy`` is true for a sequence or array that samples hold as a
    ``numpy.ndarray`` (its elements are numpy scalars).
    """

    kind: str
    python_type: Any
    bound: int | None = None
    element: Slot | None = None
    fields: tuple[FieldInfo, ...] = ()
    numpy: bool = False

    @property
    def describe(self) -> str:
        """A short human name for messages: ``int``, ``enum Color``, ``struct Pos``."""
        if self.kind in ("enum", "struct"):
            return f"{self.kind} {getattr(self.python_type, '__name__', '?')}"
        return self.kind


def struct_slot(topic_type: Any) -> Slot:
    """The slot of a whole topic type; raises IdlError (a BadParameterError) for other types."""
    info = idl.describe(topic_type)
    return Slot("struct", topic_type, fields=info.fields)


def member(struct: Slot, name: str) -> Slot | None:
    """The slot of member ``name`` of a struct slot, or None if it has no such member."""
    for field in struct.fields:
        if field.name == name:
            return _slot(field)
    return None


def _slot(field: FieldInfo) -> Slot:
    return Slot(
        kind=field.kind,
        python_type=field.python_type,
        bound=field.bound,
        element=_slot(field.element) if field.element is not None else None,
        fields=field.fields,
        numpy=field.python_type is np.ndarray,
    )
