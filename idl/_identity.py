"""The identity of a topic type: its name plus a stable hash of its wire structure.

Two classes get the same identity exactly when their samples are laid out the
same on the wire: same IDL type name, member names, kinds, widths, bounds,
keys, optional members, extensibility, and the names and values of their enums.
What only changes the Python side (numpy arrays against lists, the class's
module, docstrings) does not count. The store records a channelled topic's
identity and refuses a publisher or subscriber of another one
(``docs/store-format.md``).
"""

from __future__ import annotations

import hashlib
import json
from enum import Enum as _PyEnum
from typing import Any

from cyclonedds.idl._type_normalize import get_idl_annotations

from ._introspect import FieldInfo, describe

__all__ = ["type_identity"]

#: Hex digits of the structure hash kept in an identity (64 bits).
_HASH_DIGITS = 16


def _field(f: FieldInfo) -> list[Any]:
    """The wire-relevant description of one member (JSON-able, in a fixed order)."""
    out: list[Any] = [f.name, f.kind, f.bits, f.bound, f.is_key, f.optional, f.typename]
    if f.element is not None:
        out.append(_field(f.element))
    if f.kind == "struct":
        ext = get_idl_annotations(f.python_type).get("extensibility", "final")
        out.append([ext, [_field(m) for m in f.fields]])
    if f.kind == "enum" and issubclass(f.python_type, _PyEnum):
        out.append([[m.name, m.value] for m in f.python_type])
    return out


def type_identity(cls: type) -> str:
    """The identity of topic type ``cls``: ``"<IDL type name>@<16 hex digits>"``.

    The digits hash the type's structure as :func:`idl.describe` sees it, so
    the identity is the same in every process and on every host for the same
    type definition, and differs when a member is added, removed, renamed,
    retyped or re-keyed. Raises :class:`~idl.IdlError` if ``cls`` is not a
    topic type.

    .. versionadded:: 0.1
    """
    info = describe(cls)
    shape = [info.typename, info.extensibility, [_field(f) for f in info.fields]]
    text = json.dumps(shape, separators=(",", ":"), default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:_HASH_DIGITS]
    return f"{info.typename}@{digest}"
