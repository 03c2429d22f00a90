"""Samples as JSON objects and back, member by member as ``idl.describe`` sees the type.

Enums are written by name (read by name or value), octet sequences as lists
of integers, optional members absent as ``null``. Reading is strict: an
unknown or missing member, or a value of the wrong kind, is a
:class:`dcps.BadParameterError` naming the member's path.
"""

from __future__ import annotations

import enum
from typing import Any

import numpy as np

from idl import FieldInfo, describe, validate
from idl._errors import BadParameterError, IdlError
from idl._schema import scalar_dtype

__all__ = ["sample_from_json", "sample_to_json"]


def _out(value: Any, f: FieldInfo) -> Any:
    if value is None:
        return None
    kind = f.kind
    if kind == "enum":
        return value.name if isinstance(value, enum.Enum) else f.python_type(value).name
    if kind == "struct":
        return {m.name: _out(getattr(value, m.name), m) for m in f.fields}
    if kind in ("sequence", "array"):
        if isinstance(value, bytes | bytearray | memoryview):
            return list(bytes(value))
        if isinstance(value, np.ndarray):
            return value.tolist()
        assert f.element is not None  # describe() gives containers an element
        return [_out(v, f.element) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def sample_to_json(sample: object, data_type: type) -> dict[str, Any]:
    """The JSON object (a dict of plain values) of ``sample`` of topic type ``data_type``."""
    return {f.name: _out(getattr(sample, f.name), f) for f in describe(data_type).fields}


def _wrong(path: str, expected: str, value: Any) -> BadParameterError:
    return BadParameterError(f"member {path!r}: expected {expected}, got {value!r}")


def _in(value: Any, f: FieldInfo) -> Any:
    if value is None:
        if f.optional:
            return None
        raise _wrong(f.path, f"a {f.kind} (the member is not optional)", value)
    kind = f.kind
    if kind in ("int", "uint", "octet"):
        if isinstance(value, bool) or not isinstance(value, int):
            raise _wrong(f.path, "an integer", value)
        return value
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _wrong(f.path, "a number", value)
        return float(value)
    if kind == "bool":
        if not isinstance(value, bool):
            raise _wrong(f.path, "true or false", value)
        return value
    if kind in ("string", "char"):
        if not isinstance(value, str):
            raise _wrong(f.path, "a string", value)
        return value
    if kind == "enum":
        enum_cls: Any = f.python_type
        try:
            return enum_cls[value] if isinstance(value, str) else enum_cls(value)
        except (KeyError, ValueError):
            names = ", ".join(m.name for m in enum_cls)
            raise _wrong(f.path, f"one of {names}", value) from None
    if kind == "struct":
        return _struct(value, f.python_type, f.fields, f.path + ".")
    # sequence or array
    if not isinstance(value, list):
        raise _wrong(f.path, "a list", value)
    assert f.element is not None  # describe() gives containers an element
    items = [_in(v, f.element) for v in value]
    if f.python_type is np.ndarray:
        leaf = f.element
        while leaf.kind == "array" and leaf.element is not None:
            leaf = leaf.element
        return np.asarray(items, dtype=scalar_dtype(leaf))
    if f.python_type is bytearray:
        return bytearray(items)
    return items


def _struct(obj: Any, cls: type, fields: tuple[FieldInfo, ...], prefix: str) -> Any:
    where = prefix.rstrip(".") or "sample"
    if not isinstance(obj, dict):
        raise BadParameterError(f"{where}: expected a JSON object, got {obj!r}")
    names = {f.name for f in fields}
    unknown = sorted(set(obj) - names)
    if unknown:
        raise BadParameterError(
            f"{where}: unknown member(s) {', '.join(map(repr, unknown))} "
            f"(members: {', '.join(f.name for f in fields)})"
        )
    values = {}
    for f in fields:
        if f.name not in obj and not f.optional:
            raise BadParameterError(f"{where}: member {f.path!r} is missing")
        values[f.name] = _in(obj.get(f.name), f)
    return cls(**values)


def sample_from_json(obj: Any, data_type: type) -> Any:
    """A sample of ``data_type`` from its JSON object (checked by ``idl.validate``)."""
    info = describe(data_type)
    sample = _struct(obj, data_type, info.fields, "")
    try:
        validate(sample, data_type)
    except IdlError as exc:
        raise BadParameterError(str(exc)) from exc
    return sample
