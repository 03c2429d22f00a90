"""Field type aliases for topic structs, in the style of ``typing.Annotated``.

Type checkers see plain Python types (``int``, ``float``, ``str``); the IDL
meaning rides in the annotation metadata, exactly as the Cyclone DDS binding
expects it, so a struct declared with these aliases serialises like the type
``idlc`` generates for the same IDL.
"""

from __future__ import annotations

from typing import Annotated, Any, Optional

from cyclonedds.idl import types as _t

__all__ = [
    "array",
    "bounded_str",
    "char",
    "float32",
    "float64",
    "int8",
    "int16",
    "int32",
    "int64",
    "key",
    "octet",
    "optional",
    "sequence",
    "string",
    "typedef",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
]

int8 = _t.int8
"""IDL ``int8`` (``Annotated[int, "int8"]``)."""
int16 = _t.int16
"""IDL ``short`` / ``int16``."""
int32 = _t.int32
"""IDL ``long`` / ``int32``."""
int64 = _t.int64
"""IDL ``long long`` / ``int64``."""
uint8 = _t.uint8
"""IDL ``uint8``."""
uint16 = _t.uint16
"""IDL ``unsigned short`` / ``uint16``."""
uint32 = _t.uint32
"""IDL ``unsigned long`` / ``uint32``."""
uint64 = _t.uint64
"""IDL ``unsigned long long`` / ``uint64``."""
float32 = _t.float32
"""IDL ``float``."""
float64 = _t.float64
"""IDL ``double``."""
char = _t.char
"""IDL ``char``: a one-character ``str``."""
octet = _t.byte
"""IDL ``octet``: an ``int`` in 0..255 (wire-identical to ``uint8``, distinct in type info)."""
string = str
"""IDL ``string`` (unbounded). Use ``bounded_str[N]`` for ``string<N>``."""

bounded_str = _t.bounded_str
"""``bounded_str[N]`` is IDL ``string<N>``."""
sequence = _t.sequence
"""``sequence[T]`` / ``sequence[T, N]`` is IDL ``sequence<T>`` / ``sequence<T, N>``."""
array = _t.array
"""``array[T, N]`` is the IDL array ``T name[N]``; nest for more dimensions."""
typedef = _t.typedef
"""``typedef["name", T]`` names a type, like IDL ``typedef T name;``."""


class _KeyMarker:
    """Annotation metadata marking a struct member as part of the topic key."""

    def __repr__(self) -> str:
        return "idl.KEY"


KEY = _KeyMarker()


class optional:  # noqa: N801 - reads like the other lower-case type constructors
    """``optional[T]`` is an ``@optional`` member: ``None`` means absent (``Optional[T]``)."""

    def __class_getitem__(cls, item: Any) -> Any:
        return Optional[item]  # noqa: UP045 - the binding recognises typing.Optional


class key:  # noqa: N801 - reads like the other lower-case type constructors
    """``key[T]`` marks a member of type ``T`` as a key field (IDL ``@key``)."""

    def __class_getitem__(cls, item: Any) -> Any:
        return Annotated[item, KEY]
