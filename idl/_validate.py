"""Sample validation: ``validate(sample, T)`` with one compiled checker per type."""

from __future__ import annotations

import threading
from collections.abc import Callable
from enum import Enum as _PyEnum
from typing import Any

import numpy as np

from ._errors import IdlError
from ._introspect import NUMERIC_KINDS, FieldInfo, describe

__all__ = ["validate"]

Check = Callable[[Any, str], None]

_checkers: dict[type, Check] = {}
_lock = threading.Lock()


def _fail(path: str, problem: str) -> IdlError:
    return IdlError(f"{path}: {problem}")


def _tname(v: Any) -> str:
    return type(v).__name__


def _int_range(kind: str, bits: int) -> tuple[int, int]:
    if kind in ("uint", "octet"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


_FLOATISH = (int, float, np.integer, np.floating)
_NP_OK_KINDS = {"int": "iub", "uint": "iub", "octet": "iub", "float": "iubf", "bool": "b"}


def _scalar(f: FieldInfo) -> Check:
    kind = f.kind
    if kind in ("int", "uint", "octet"):
        lo, hi = _int_range(kind, f.bits or 64)
        label = f"{kind}{f.bits}" if kind != "octet" else "octet"

        def check_int(v: Any, path: str) -> None:
            if v.__class__ is not int:
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                    raise _fail(path, f"expected int, got {_tname(v)}")
                v = int(v)
            if v < lo or v > hi:
                raise _fail(path, f"{v} is out of range for {label} ({lo}..{hi})")

        return check_int
    if kind == "float":

        def check_float(v: Any, path: str) -> None:
            if v.__class__ is not float and (isinstance(v, bool) or not isinstance(v, _FLOATISH)):
                raise _fail(path, f"expected float, got {_tname(v)}")

        return check_float
    if kind == "bool":

        def check_bool(v: Any, path: str) -> None:
            if not isinstance(v, (bool, np.bool_)):
                raise _fail(path, f"expected bool, got {_tname(v)}")

        return check_bool
    if kind == "char":

        def check_char(v: Any, path: str) -> None:
            if not isinstance(v, str):
                raise _fail(path, f"expected a one-character str, got {_tname(v)}")
            if len(v) != 1:
                raise _fail(path, f"char must be exactly one character, got {v!r}")
            if ord(v) > 127:
                raise _fail(path, f"char must be ASCII, got {v!r}")

        return check_char
    if kind == "string":
        bound = f.bound

        def check_str(v: Any, path: str) -> None:
            if not isinstance(v, str):
                raise _fail(path, f"expected str, got {_tname(v)}")
            if "\0" in v:
                raise _fail(path, "string contains a NUL character")
            if v.isascii():
                size = len(v)
            else:
                try:
                    size = len(v.encode("utf-8"))
                except UnicodeEncodeError as exc:
                    raise _fail(
                        path,
                        f"string is not encodable as UTF-8 ({exc.reason} at index {exc.start})",
                    ) from None
            if bound is not None and size > bound:
                raise _fail(path, f"string of {size} bytes exceeds its bound {bound}")

        return check_str
    if kind == "enum":
        enum_cls: type[_PyEnum] = f.python_type
        values = {m.value for m in enum_cls}

        def check_enum(v: Any, path: str) -> None:
            if isinstance(v, enum_cls):
                return
            if isinstance(v, _PyEnum):
                raise _fail(path, f"expected {enum_cls.__name__}, got {_tname(v)}.{v.name}")
            if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
                if int(v) in values:
                    return
                raise _fail(path, f"unknown {enum_cls.__name__} value {v}")
            raise _fail(path, f"expected {enum_cls.__name__}, got {_tname(v)}")

        return check_enum
    if kind == "struct":
        return _struct_checker(f.python_type, nested=True)
    raise IdlError(f"{f.path}: cannot validate kind {kind!r}")  # pragma: no cover


def _leaf(f: FieldInfo) -> FieldInfo:
    while f.kind == "array" and f.element is not None:
        f = f.element
    return f


def _shape(f: FieldInfo) -> tuple[int, ...]:
    shape = []
    while f.kind == "array" and f.element is not None:
        shape.append(f.bound or 0)
        f = f.element
    return tuple(shape)


def _ndarray_check(leaf: FieldInfo, path: str, arr: np.ndarray) -> None:
    ok = _NP_OK_KINDS.get(leaf.kind, "")
    if arr.dtype.kind not in ok:
        raise _fail(path, f"numpy dtype {arr.dtype} does not fit {leaf.kind}{leaf.bits or ''}")
    if leaf.kind in ("int", "uint", "octet") and arr.size and arr.dtype.kind in "iu":
        lo, hi = _int_range(leaf.kind, leaf.bits or 64)
        info = np.iinfo(arr.dtype)
        if info.min < lo or info.max > hi:
            mn, mx = int(arr.min()), int(arr.max())
            if mn < lo or mx > hi:
                bad = mn if mn < lo else mx
                raise _fail(
                    path, f"element {bad} is out of range for {leaf.kind}{leaf.bits} ({lo}..{hi})"
                )


def _container(f: FieldInfo) -> Check:
    assert f.element is not None
    elem = f.element
    elem_check = _field_checker(elem)
    leaf = _leaf(f) if f.kind == "array" else elem
    numeric = leaf.kind in NUMERIC_KINDS
    if f.kind == "sequence":
        bound = f.bound

        def check_seq(v: Any, path: str) -> None:
            if isinstance(v, np.ndarray) and numeric:
                if v.ndim != 1:
                    raise _fail(path, f"sequence must be one-dimensional, got shape {v.shape}")
                if bound is not None and v.shape[0] > bound:
                    raise _fail(path, f"sequence of length {v.shape[0]} exceeds its bound {bound}")
                _ndarray_check(leaf, path, v)
                return
            if (
                isinstance(v, (bytes, bytearray, memoryview))
                and leaf.kind in ("octet", "uint", "int")
                and leaf.bits == 8
            ):
                if bound is not None and len(v) > bound:
                    raise _fail(path, f"sequence of length {len(v)} exceeds its bound {bound}")
                return
            if isinstance(v, (str, bytes, dict, set)) or not hasattr(v, "__len__"):
                raise _fail(path, f"expected a sequence, got {_tname(v)}")
            if bound is not None and len(v) > bound:
                raise _fail(path, f"sequence of length {len(v)} exceeds its bound {bound}")
            for i, item in enumerate(v):
                if item is None:
                    raise _fail(f"{path}[{i}]", "missing value (None)")
                elem_check(item, f"{path}[{i}]")

        return check_seq

    length = f.bound or 0
    shape = _shape(f)

    def check_array(v: Any, path: str) -> None:
        if isinstance(v, np.ndarray) and numeric:
            if v.shape != shape:
                raise _fail(path, f"array must have shape {shape}, got {v.shape}")
            _ndarray_check(leaf, path, v)
            return
        if (
            isinstance(v, (bytes, bytearray, memoryview))
            and leaf.bits == 8
            and leaf.kind in ("octet", "uint", "int")
            and len(shape) == 1
        ):
            if len(v) != length:
                raise _fail(path, f"array must have length {length}, got {len(v)}")
            return
        if isinstance(v, (str, bytes, dict, set)) or not hasattr(v, "__len__"):
            raise _fail(path, f"expected an array of length {length}, got {_tname(v)}")
        if len(v) != length:
            raise _fail(path, f"array must have length {length}, got {len(v)}")
        for i, item in enumerate(v):
            if item is None:
                raise _fail(f"{path}[{i}]", "missing value (None)")
            elem_check(item, f"{path}[{i}]")

    return check_array


def _field_checker(f: FieldInfo) -> Check:
    if f.kind in ("sequence", "array"):
        return _container(f)
    return _scalar(f)


def _struct_checker(t: type, nested: bool = False) -> Check:
    checker = _checkers.get(t)
    if checker is not None:
        return checker
    info = describe(t)
    members = [(f.name, _field_checker(f), f.optional) for f in info.fields]
    typename = info.typename

    def check_struct(v: Any, path: str) -> None:
        if v.__class__ is not t:
            where = f"{path}: " if path else ""
            raise IdlError(f"{where}expected {typename}, got {_tname(v)}")
        prefix = f"{path}." if path else ""
        for name, check, optional in members:
            value = getattr(v, name, None)
            if value is None:
                if optional:
                    continue
                raise IdlError(f"{prefix}{name}: missing value (None)")
            check(value, prefix + name)

    _checkers[t] = check_struct
    return check_struct


def validate(sample: object, t: type) -> None:
    """Check that ``sample`` is a valid value of topic type ``t``.

    Raises ``IdlError`` naming the field path and the problem: a sample of the
    wrong class, a value of the wrong Python type, an integer out of range for
    its width, a string or sequence over its bound, an array of the wrong
    length, a char that is not one ASCII character, an unknown enum value or a
    missing (``None``) field. The checker is compiled once per type.
    """
    checker = _checkers.get(t)
    if checker is None:
        with _lock:
            checker = _struct_checker(t)
    checker(sample, "")
