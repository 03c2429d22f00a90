"""Introspection of topic types: what fields a type has, which are keys.

This is the contract other layers (SQL filters, schema mappings, the store)
code against: ``describe(T)`` returns a ``StructInfo`` tree of ``FieldInfo``
values, ``field_at(T, "pos.x")`` finds one field, ``get_path(sample, "pos.x")``
reads a value.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from enum import Enum as _PyEnum
from inspect import isclass
from typing import Any, get_args, get_origin

import attrs
import numpy as np
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as _t
from cyclonedds.idl._type_normalize import (
    WrapOpt,
    get_extended_type_hints,
    get_idl_annotations,
    get_idl_field_annotations,
)

from ._errors import IdlError

__all__ = [
    "FieldInfo",
    "StructInfo",
    "describe",
    "field_at",
    "get_path",
    "is_topic_type",
    "key_fields",
]

KINDS = (
    "int",
    "uint",
    "float",
    "bool",
    "char",
    "octet",
    "string",
    "enum",
    "struct",
    "sequence",
    "array",
)
NUMERIC_KINDS = frozenset({"int", "uint", "float", "bool", "octet"})

_PRIMITIVES: dict[Any, tuple[str, type, int | None]] = {
    _t.int8: ("int", int, 8),
    _t.int16: ("int", int, 16),
    _t.int32: ("int", int, 32),
    _t.int64: ("int", int, 64),
    int: ("int", int, 64),
    _t.uint8: ("uint", int, 8),
    _t.uint16: ("uint", int, 16),
    _t.uint32: ("uint", int, 32),
    _t.uint64: ("uint", int, 64),
    _t.byte: ("octet", int, 8),
    _t.float32: ("float", float, 32),
    _t.float64: ("float", float, 64),
    float: ("float", float, 64),
    bool: ("bool", bool, None),
    _t.char: ("char", str, None),
}


@attrs.frozen
class FieldInfo:
    """One member of a topic struct (or the element type of a sequence/array).

    ``kind`` is one of ``"int"``, ``"uint"``, ``"float"``, ``"bool"``, ``"char"``,
    ``"octet"``, ``"string"``, ``"enum"``, ``"struct"``, ``"sequence"``, ``"array"``.
    ``python_type`` is what a sample holds: ``int``, ``float``, ``bool``, ``str``,
    the enum class, the nested struct class, ``numpy.ndarray`` (numeric
    sequences/arrays of ``idl.Struct`` types) or ``list`` (``bytearray`` for
    ``uint8`` arrays of plain binding ``IdlStruct`` dataclasses). ``bits`` is 8/16/32/64 for
    numeric kinds (``None`` for bool/char/string/struct/containers; 32 for
    enums). ``bound`` is the maximum length of a bounded string/sequence or the
    length of an array (``None`` if unbounded); a multi-dimensional array is an
    array whose ``element`` is an array. ``is_key`` says whether the field is
    part of the topic key; ``fields`` lists the members of a struct. Element
    paths end in ``[]`` (``"values[]"``).
    """

    name: str
    path: str
    kind: str
    python_type: type
    bits: int | None = None
    bound: int | None = None
    element: FieldInfo | None = None
    is_key: bool = False
    fields: tuple[FieldInfo, ...] = ()
    typename: str | None = None
    """IDL type name of an enum or struct field (``"sensors::Color"``)."""
    optional: bool = False
    """True for an ``@optional`` member (``idl.optional[T]``): its value may be ``None``."""


@attrs.frozen
class StructInfo:
    """A topic type: its IDL name, class, members and key paths (declaration order)."""

    typename: str
    python_type: type
    fields: tuple[FieldInfo, ...]
    keys: tuple[str, ...]
    extensibility: str = "final"


_cache: dict[type, StructInfo] = {}
_lock = threading.Lock()


def is_topic_type(t: object) -> bool:
    """True if ``t`` is a struct class usable as a topic type (an ``IdlStruct`` dataclass)."""
    return (
        isclass(t)
        and issubclass(t, IdlStruct)
        and dataclasses.is_dataclass(t)
        and not t.__dict__.get("_dcps_root", False)
    )


def _uses_numpy(t: type) -> bool:
    # ``_struct`` (which imports this module) marks its IDL support class so.
    return getattr(t.__dict__.get("__idl__"), "numpy_sequences", False) is True


def _typename(t: Any) -> str:
    return str(getattr(t, "__idl_typename__", t.__name__)).replace(".", "::")


def _keylist(t: type) -> list[str] | None:
    """The declared key member names of struct ``t`` (None if keyless)."""
    keylist = get_idl_annotations(t).get("keylist")
    if keylist:
        return list(keylist)
    names = [n for n, a in get_idl_field_annotations(t).items() if a.get("key")]
    return names or None


def _make(
    name: str, path: str, tp: Any, is_key: bool, numpy_ok: bool, stack: tuple[type, ...]
) -> FieldInfo:
    if isinstance(tp, _t.typedef):
        return _make(name, path, tp.subtype, is_key, numpy_ok, stack)
    try:
        prim = _PRIMITIVES.get(tp)
    except TypeError:  # unhashable annotation
        prim = None
    if prim is not None:
        kind, scalar_type, bits = prim
        return FieldInfo(
            name=name, path=path, kind=kind, python_type=scalar_type, bits=bits, is_key=is_key
        )
    if tp is str:
        return FieldInfo(name=name, path=path, kind="string", python_type=str, is_key=is_key)
    if isinstance(tp, _t.bounded_str):
        return FieldInfo(
            name=name, path=path, kind="string", python_type=str, bound=tp.max_length, is_key=is_key
        )
    if isinstance(tp, _t.sequence) or get_origin(tp) is list:
        sub = tp.subtype if isinstance(tp, _t.sequence) else get_args(tp)[0]
        bound = tp.max_length if isinstance(tp, _t.sequence) else None
        elem = _make("", path + "[]", sub, is_key, numpy_ok, stack)
        pytype: type = np.ndarray if numpy_ok and elem.kind in NUMERIC_KINDS else list
        return FieldInfo(
            name=name,
            path=path,
            kind="sequence",
            python_type=pytype,
            bound=bound,
            element=elem,
            is_key=is_key,
        )
    if isinstance(tp, _t.array):
        elem = _make("", path + "[]", tp.subtype, is_key, numpy_ok, stack)
        inner = elem
        while inner.kind == "array" and inner.element is not None:
            inner = inner.element
        numeric = inner.kind in NUMERIC_KINDS
        pytype = np.ndarray if numpy_ok and numeric else list
        if not numpy_ok and elem.kind == "uint" and elem.bits == 8:
            pytype = bytearray  # the binding's own mapping of uint8 arrays
        return FieldInfo(
            name=name,
            path=path,
            kind="array",
            python_type=pytype,
            bound=tp.length,
            element=elem,
            is_key=is_key,
        )
    if isclass(tp) and issubclass(tp, _PyEnum):
        return FieldInfo(
            name=name,
            path=path,
            kind="enum",
            python_type=tp,
            bits=32,
            is_key=is_key,
            typename=_typename(tp),
        )
    if isclass(tp) and issubclass(tp, IdlStruct):
        if tp in stack:
            raise IdlError(f"field {path!r}: recursive struct {_typename(tp)} is not supported")
        members = _members(tp, path + ".", is_key, (*stack, tp))
        return FieldInfo(
            name=name,
            path=path,
            kind="struct",
            python_type=tp,
            is_key=is_key,
            fields=members,
            typename=_typename(tp),
        )
    if isinstance(tp, WrapOpt):
        if is_key:
            raise IdlError(f"field {path!r}: a key member cannot be optional")
        inner = _make(name, path, tp.inner, is_key, numpy_ok, stack)
        return attrs.evolve(inner, optional=True)
    raise IdlError(f"field {path!r}: {tp!r} is not an IDL type")


def _members(
    t: type, prefix: str, in_key: bool | None, stack: tuple[type, ...]
) -> tuple[FieldInfo, ...]:
    """Members of struct ``t``; ``in_key`` None at the root, else whether ``t`` is in the key."""
    try:
        hints = get_extended_type_hints(t)
    except TypeError as exc:
        raise IdlError(f"{_typename(t)}: {exc}") from exc
    keylist = _keylist(t)
    numpy_ok = _uses_numpy(t)
    out = []
    for name, tp in hints.items():
        if in_key is None:
            is_key = keylist is not None and name in keylist
        elif in_key:
            is_key = keylist is None or name in keylist
        else:
            is_key = False
        out.append(_make(name, prefix + name, tp, is_key, numpy_ok, stack))
    return tuple(out)


def _key_paths(fields: tuple[FieldInfo, ...]) -> list[str]:
    paths: list[str] = []
    for f in fields:
        if not f.is_key:
            continue
        if f.kind == "struct":
            paths.extend(_key_paths(f.fields))
        else:
            paths.append(f.path)
    return paths


def describe(t: type) -> StructInfo:
    """Describe topic type ``t`` (cached). Raises ``IdlError`` if ``t`` is not a topic type."""
    info = _cache.get(t) if isinstance(t, type) else None
    if info is not None:
        return info
    if not is_topic_type(t):
        raise IdlError(f"{t!r} is not a topic type (an idl.Struct / IdlStruct dataclass)")
    with _lock:
        fields = _members(t, "", None, (t,))
        keylist = _keylist(t)
        if keylist:
            names = {f.name for f in fields}
            for k in keylist:
                if k not in names:
                    raise IdlError(f"key {k!r} of {_typename(t)} is not a member")
        info = StructInfo(
            typename=_typename(t),
            python_type=t,
            fields=fields,
            keys=tuple(_key_paths(fields)),
            extensibility=get_idl_annotations(t).get("extensibility", "final"),
        )
        _cache[t] = info
    return info


_STEP = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)((?:\[\d*\])*)$")


def _steps(path: str) -> list[tuple[str, list[str]]]:
    steps = []
    for part in path.split("."):
        m = _STEP.match(part)
        if m is None:
            raise IdlError(f"malformed field path {path!r}")
        idx = re.findall(r"\[(\d*)\]", m.group(2))
        steps.append((m.group(1), idx))
    return steps


def field_at(t: type, path: str) -> FieldInfo:
    """The ``FieldInfo`` at dotted ``path`` (``"pos.x"``, ``"values[]"``) of topic type ``t``."""
    info = describe(t)
    fields = info.fields
    current: FieldInfo | None = None
    for name, idx in _steps(path):
        if current is not None:
            if current.kind != "struct":
                raise IdlError(
                    f"unknown field path {path!r} in {info.typename}:"
                    f" {current.path!r} is not a struct"
                )
            fields = current.fields
        for f in fields:
            if f.name == name:
                current = f
                break
        else:
            raise IdlError(f"unknown field path {path!r} in {info.typename}: no member {name!r}")
        for _ in idx:
            if current.element is None:
                raise IdlError(
                    f"unknown field path {path!r} in {info.typename}:"
                    f" {current.path!r} is not a sequence or array"
                )
            current = current.element
    if current is None:
        raise IdlError(f"empty field path for {info.typename}")
    return current


def key_fields(t: type) -> tuple[str, ...]:
    """Dotted key paths of topic type ``t`` in declaration order (empty if keyless)."""
    return describe(t).keys


def get_path(sample: object, path: str) -> object:
    """The value at dotted ``path`` in ``sample`` (``"pos.x"``, ``"values[2]"``)."""
    value: Any = sample
    for name, idx in _steps(path):
        try:
            value = getattr(value, name)
        except AttributeError:
            raise IdlError(f"unknown field path {path!r}: no member {name!r}") from None
        for i in idx:
            if i == "":
                raise IdlError(f"field path {path!r} needs an index inside []")
            try:
                value = value[int(i)]
            except (IndexError, TypeError) as exc:
                raise IdlError(f"field path {path!r}: index {i} out of range") from exc
    return value
