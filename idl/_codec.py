"""Compiled serialisers for final structs: one generated function per type and encoding.

The binding serialises field by field through a tree of Python "machines"
(tens of microseconds for a small struct). For ``@final`` structs made of
primitives, enums, chars, bools, strings, numeric sequences/arrays and nested
final structs, this module generates straight-line Python that packs runs of
fixed-size fields with one precompiled ``struct.Struct`` and handles
variable-size fields with running offsets. The bytes are identical to the
binding's (the test suite checks both against each other); anything else
(appendable/mutable types, sequences of strings or structs, keys-only
serialisation, big-endian data) falls back to the binding's machines.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

import numpy as np

from ._errors import IdlError
from ._introspect import FieldInfo, describe

__all__ = ["Codec", "build_codec"]

_LE = sys.byteorder == "little"

_CODES = {
    ("int", 8): "b",
    ("int", 16): "h",
    ("int", 32): "i",
    ("int", 64): "q",
    ("uint", 8): "B",
    ("uint", 16): "H",
    ("uint", 32): "I",
    ("uint", 64): "Q",
    ("octet", 8): "B",
    ("float", 32): "f",
    ("float", 64): "d",
    ("bool", None): "?",
    ("char", None): "b",
    ("enum", 32): "I",
}
_DTYPES = {
    "b": "<i1",
    "h": "<i2",
    "i": "<i4",
    "q": "<i8",
    "B": "<u1",
    "H": "<u2",
    "I": "<u4",
    "Q": "<u8",
    "f": "<f4",
    "d": "<f8",
    "?": "?",
}
_U32 = struct.Struct("<I")
_ZEROS = [bytes(n) for n in range(8)]
#: Fixed-size numeric arrays of this many bytes or more are serialised as a piece of
#: their own (``_Gen.block``): one copy instead of three.
BLOCK_MIN = 1024


class UnsupportedTypeError(Exception):
    """The type needs the binding's generic machines."""


def _enum_value(v: Any) -> int:
    return v if v.__class__ is int else int(v.value)


def _enum_of(cls: Any, v: int) -> Any:
    try:
        return cls(v)
    except ValueError:
        return v


def _seq_bytes(
    v: Any, dtype: np.dtype[Any], bound: int | None, path: str
) -> tuple[int, bytes | memoryview]:
    data: bytes | memoryview
    if isinstance(v, (bytes, bytearray, memoryview)) and dtype.itemsize == 1:
        data = bytes(v)
        n = len(data)
    else:
        arr = np.asarray(v, dtype=dtype)
        if arr.ndim != 1:
            raise ValueError(f"{path}: sequence must be one-dimensional, got shape {arr.shape}")
        n = arr.shape[0]
        # a large contiguous array goes to the final join as it is (one copy, not two)
        if arr.nbytes < BLOCK_MIN or not arr.flags.c_contiguous:
            data = arr.tobytes()
        else:
            data = memoryview(arr.data).cast("B")
    if bound is not None and n > bound:
        raise ValueError(f"{path}: sequence of length {n} exceeds its bound {bound}")
    return n, data


def _arr_bytes(v: Any, dtype: np.dtype[Any], shape: tuple[int, ...], path: str) -> bytes:
    if isinstance(v, (bytes, bytearray, memoryview)) and dtype.itemsize == 1:
        arr = np.frombuffer(v, dtype=dtype)
        if len(shape) > 1 and arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
    else:
        arr = np.asarray(v, dtype=dtype)
    if arr.shape != shape:
        raise ValueError(f"{path}: array must have shape {shape}, got {arr.shape}")
    return arr.tobytes()


def _check_len(v: Any, bound: int | None, path: str) -> int:
    if isinstance(v, (str, bytes)) or not hasattr(v, "__len__"):
        raise ValueError(f"{path}: expected a sequence, got {type(v).__name__}")
    n = len(v)
    if bound is not None and n > bound:
        raise ValueError(f"{path}: sequence of length {n} exceeds its bound {bound}")
    return n


def _str_bytes(v: str, bound: int | None, path: str) -> bytes:
    b = v.encode("utf-8")
    if bound is not None and len(v) > bound:
        raise ValueError(f"{path}: string longer than its bound {bound}")
    return b


class _Gen:
    """Generates the serialise and deserialise functions for one encoding."""

    def __init__(
        self,
        align_max: int,
        ns: dict[str, Any] | None = None,
        counter: list[int] | None = None,
        base_align: int = 8,
        bytes_fields: frozenset[str] = frozenset(),
    ) -> None:
        self.align_max = align_max
        self.bytes_fields = bytes_fields
        self.ns: dict[str, Any] = (
            ns
            if ns is not None
            else {
                "_U32": _U32,
                "_ZEROS": _ZEROS,
                "_enum_value": _enum_value,
                "_enum_of": _enum_of,
                "_seq_bytes": _seq_bytes,
                "_arr_bytes": _arr_bytes,
                "_str_bytes": _str_bytes,
                "_check_len": _check_len,
                "_pack_list": struct.pack,
                "_unpack_list": struct.unpack_from,
                "np": np,
            }
        )
        self.ser: list[str] = []
        self.de: list[str] = []
        self._counter = counter if counter is not None else [0]
        self.elem_funcs: dict[type, tuple[str, str]] = {}
        # the current run of fixed-size fields
        self.fmt = ""
        self.goff = 0
        self.base_align = base_align  # body offset 0 is aligned for everything
        self.ser_exprs: list[str] = []
        self.de_targets: list[str] = []
        self.de_post: list[str] = []

    def name(self, prefix: str, value: Any = None) -> str:
        self._counter[0] += 1
        n = f"{prefix}{self._counter[0]}"
        if value is not None:
            self.ns[n] = value
        return n

    def align(self, size: int) -> int:
        return min(size, self.align_max)

    # --- runs of fixed-size fields -------------------------------------------------
    def aligned(self, align: int) -> None:
        """Pad the run so that the next field starts aligned to ``align`` (capped at the
        encoding's maximum); past the alignment the run's start guarantees, end the run and
        pad at run time."""
        a = self.align(align)
        if a > self.base_align:
            self.flush()
            self.dynamic_pad(a)
            self.base_align = a
        pad = -self.goff & (a - 1)  # (an empty run needs none)
        if pad:
            self.fmt += f"{pad}x"  # the run's last field is followed by the padding
            self.goff += pad

    def fixed(self, code: str, align: int, ser_expr: str, target: str, post: str | None) -> None:
        self.aligned(align)
        self.fmt += code
        self.goff += struct.calcsize("<" + code)
        self.ser_exprs.append(ser_expr)
        self.de_targets.append(target)
        if post:
            self.de_post.append(post)

    def flush(self) -> None:
        if not self.ser_exprs:
            return
        packer = self.name("_S", struct.Struct("<" + self.fmt))
        size = struct.calcsize("<" + self.fmt)
        self.ser.append(f"parts.append({packer}.pack({', '.join(self.ser_exprs)}))")
        self.ser.append(f"pos += {size}")
        targets = ", ".join(self.de_targets)
        self.de.append(f"{targets}, = {packer}.unpack_from(data, 4 + pos)")
        self.de.append(f"pos += {size}")
        self.de.extend(self.de_post)
        self.base_align = self.end_align(self.goff)
        self.fmt, self.goff = "", 0
        self.ser_exprs, self.de_targets, self.de_post = [], [], []

    def end_align(self, size: int) -> int:
        """The alignment known after ``size`` bytes from the run's start: the start's,
        reduced by the size."""
        end_align = self.base_align
        while end_align > 1 and size % end_align:
            end_align //= 2
        return end_align

    def block(self, nbytes: int, esize: int, ser_expr: str, de_expr: str, var: str) -> None:
        """A large fixed-size array as a piece of its own, not packed into the run.

        ``ser_expr`` gives the array's bytes as a buffer (the array itself when it
        is C-contiguous), which the final ``join`` copies once; packing it into the
        run's ``struct`` format copied a large array twice more (``tobytes``, then
        ``pack``). ``de_expr`` reads it from ``data`` at ``pos``.
        """
        self.aligned(esize)
        self.flush()
        self.ser.append(f"parts.append({ser_expr}); pos += {nbytes}")
        self.de.append(f"{var} = {de_expr}")
        self.de.append(f"pos += {nbytes}")
        self.base_align = self.end_align(nbytes)

    def dynamic_pad(self, a: int) -> None:
        if a <= 1:
            return
        self.ser.append(f"_pad = -pos & {a - 1}")
        self.ser.append("if _pad:")
        self.ser.append("    parts.append(_ZEROS[_pad]); pos += _pad")
        self.de.append(f"pos += -pos & {a - 1}")

    def variable(self) -> None:
        """Start a variable-size field: flush the run; alignment afterwards is unknown."""
        self.flush()

    # --- fields ----------------------------------------------------------------------
    def field(self, f: FieldInfo, expr: str) -> str:
        """Emit code for field ``f`` read from ``expr``; return the local holding it on read."""
        k = f.kind
        if f.optional:
            raise UnsupportedTypeError(f"{f.path}: optional")
        code = _CODES.get((k, f.bits))
        if code is not None:
            var = self.name("_v")
            size = struct.calcsize("<" + code)
            if k == "enum":
                if "bit_bound" in getattr(f.python_type, "__idl_annotations__", {}):
                    raise UnsupportedTypeError(f"{f.path}: bit-bound enum")
                enum_cls = self.name("_E", f.python_type)
                self.fixed(
                    code, size, f"_enum_value({expr})", var, f"{var} = _enum_of({enum_cls}, {var})"
                )
            elif k == "char":
                self.fixed(code, size, f"ord({expr})", var, f"{var} = chr({var})")
            else:
                self.fixed(code, size, expr, var, None)
            return var
        if k == "struct":
            info = describe(f.python_type)
            if info.extensibility != "final":
                raise UnsupportedTypeError(f"{f.path}: {info.extensibility} struct")
            cls = self.name("_T", f.python_type)
            args = [self.field(m, f"{expr}.{m.name}") for m in f.fields]
            var = self.name("_v")
            # construct after the values are read (they may span several runs)
            self.flush_de_construct(var, f"{cls}({', '.join(args)})")
            return var
        if k == "string":
            var = self.name("_v")
            self.variable()
            self.dynamic_pad(4)
            b = self.name("_b")
            self.ser.append(f"{b} = _str_bytes({expr}, {f.bound!r}, {f.path!r})")
            self.ser.append(f"parts.append(_U32.pack(len({b}) + 1)); parts.append({b})")
            self.ser.append("parts.append(_ZEROS[1])")
            self.ser.append(f"pos += len({b}) + 5")
            self.de.append("_n = _U32.unpack_from(data, 4 + pos)[0]")
            self.de.append(f"{var} = data[8 + pos:7 + pos + _n].decode('utf-8')")
            self.de.append("pos += 4 + _n")
            self.base_align = 1
            return var
        leaf = f.element
        if k == "sequence" and leaf is not None and leaf.kind in ("string", "struct"):
            return self.object_sequence(f, leaf, expr)
        if k in ("sequence", "array") and leaf is not None:
            shape = []
            node: FieldInfo | None = f
            while node is not None and node.kind == "array":
                shape.append(node.bound or 0)
                node = node.element
            if k == "array":
                leaf = node
            elem_code = _CODES.get((leaf.kind, leaf.bits)) if leaf is not None else None
            numeric = leaf is not None and leaf.kind in ("int", "uint", "octet", "float", "bool")
            if k == "sequence" and numeric and elem_code is not None and f.python_type is list:
                return self.plain_sequence(f, elem_code, expr)
            if leaf is None or elem_code is None or not numeric or f.python_type is not np.ndarray:
                raise UnsupportedTypeError(f"{f.path}: {k} of {leaf.kind if leaf else '?'}")
            dtype = np.dtype(_DTYPES[elem_code])
            dt = self.name("_dt", dtype)
            var = self.name("_v")
            esize = dtype.itemsize
            if k == "array":
                shp = tuple(shape)
                nbytes = int(np.prod(shp)) * esize
                a = self.name("_a")
                if nbytes >= BLOCK_MIN:
                    self.block(
                        nbytes,
                        esize,
                        f"({a} if ({a} := {expr}).__class__ is np.ndarray and {a}.dtype is {dt} "
                        f"and {a}.shape == {shp!r} and {a}.flags.c_contiguous "
                        f"else _arr_bytes({a}, {dt}, {shp!r}, {f.path!r}))",
                        f"np.frombuffer(data, {dt}, {nbytes // esize}, 4 + pos)"
                        f".reshape({shp!r}).copy()",
                        var,
                    )
                    return var
                self.fixed(
                    f"{nbytes}s",
                    esize,
                    # an ndarray of the right dtype and shape (the common case) goes
                    # straight to tobytes(); anything else is converted and checked
                    f"({a}.tobytes() if ({a} := {expr}).__class__ is np.ndarray "
                    f"and {a}.dtype is {dt} and {a}.shape == {shp!r} "
                    f"else _arr_bytes({a}, {dt}, {shp!r}, {f.path!r}))",
                    var,
                    f"{var} = np.frombuffer({var}, {dt}).reshape({shp!r}).copy()",
                )
                return var
            self.variable()
            self.dynamic_pad(4)
            self.ser.append(f"_n, _b = _seq_bytes({expr}, {dt}, {f.bound!r}, {f.path!r})")
            ea = self.align(esize)
            self.length_and_bytes(ea)
            self.de.append("_n = _U32.unpack_from(data, 4 + pos)[0]; pos += 4")
            self.de.append("if _n:")
            if ea > 4:
                self.de.append(f"    pos += -pos & {ea - 1}")
            self.de.append(f"    {var} = np.frombuffer(data, {dt}, _n, 4 + pos).copy()")
            self.de.append(f"    pos += _n * {esize}")
            self.de.append("else:")
            self.de.append(f"    {var} = np.empty(0, {dt})")
            self.base_align = 1
            return var
        raise UnsupportedTypeError(f"{f.path}: {k}")

    def length_and_bytes(self, ea: int) -> None:
        """Write a sequence: its length ``_n``, then its bytes ``_b`` aligned to ``ea``."""
        self.ser.append("parts.append(_U32.pack(_n)); pos += 4")
        self.ser.append("if _n:")
        if ea > 4:
            self.ser.append(f"    _pad = -pos & {ea - 1}")
            self.ser.append("    if _pad:")
            self.ser.append("        parts.append(_ZEROS[_pad]); pos += _pad")
        self.ser.append("    parts.append(_b); pos += len(_b)")

    def plain_sequence(self, f: FieldInfo, code: str, expr: str) -> str:
        """A numeric sequence held as a Python ``list`` (or as ``bytes``, see ``bytes_fields``)."""
        var = self.name("_v")
        esize = struct.calcsize("<" + code)
        ea = self.align(esize)
        as_bytes = f.path in self.bytes_fields
        if as_bytes and code != "B":
            raise UnsupportedTypeError(f"{f.path}: only a sequence of octets can be bytes")
        self.variable()
        self.dynamic_pad(4)
        if as_bytes:
            self.ser.append(f"_b = {expr}; _n = len(_b)")
        else:
            self.ser.append(f"_n = _check_len({expr}, {f.bound!r}, {f.path!r})")
            self.ser.append(f"_b = _pack_list('<%d{code}' % _n, *{expr}) if _n else b''")
        self.length_and_bytes(ea)
        self.de.append("_n = _U32.unpack_from(data, 4 + pos)[0]; pos += 4")
        if ea > 4:
            self.de.append(f"if _n: pos += -pos & {ea - 1}")
        if as_bytes:
            self.de.append(f"{var} = data[4 + pos:4 + pos + _n]")
        else:
            self.de.append(
                f"{var} = list(_unpack_list('<%d{code}' % _n, data, 4 + pos)) if _n else []"
            )
        self.de.append(f"pos += _n * {esize}")
        self.base_align = 1
        return var

    def element_funcs(self, leaf: FieldInfo) -> tuple[str, str]:
        """Names of generated ``ser(o, parts, pos) -> pos`` / ``de(data, pos) -> (v, pos)``."""
        key = leaf.python_type if leaf.kind == "struct" else str
        if key in self.elem_funcs:
            return self.elem_funcs[key]
        sub = _Gen(self.align_max, self.ns, self._counter, base_align=1)
        if leaf.kind == "struct":
            info = describe(leaf.python_type)
            if info.extensibility != "final":
                raise UnsupportedTypeError(f"{leaf.path}: {info.extensibility} struct")
            cls = sub.name("_T", leaf.python_type)
            args = [sub.field(m, f"o.{m.name}") for m in info.fields]
            result = f"{cls}({', '.join(args)})"
        else:
            result = sub.field(leaf, "o")
        sub.flush()
        ser_name, de_name = self.name("_ser_elem"), self.name("_de_elem")
        src = [f"def {ser_name}(o, parts, pos):"] + ["    " + x for x in sub.ser]
        src += ["    return pos", "", f"def {de_name}(data, pos):"]
        src += ["    " + x for x in sub.de] + [f"    return {result}, pos"]
        exec(compile("\n".join(src), f"<idl codec element {leaf.path}>", "exec"), self.ns)
        self.elem_funcs[key] = (ser_name, de_name)
        return ser_name, de_name

    def object_sequence(self, f: FieldInfo, leaf: FieldInfo, expr: str) -> str:
        ser_elem, de_elem = self.element_funcs(leaf)
        var = self.name("_v")
        seq = self.name("_q")
        dheader = self.align_max == 4  # XCDR2: a DHEADER precedes non-primitive sequences
        self.variable()
        self.dynamic_pad(4)
        self.ser.append(f"{seq} = {expr}")
        self.ser.append(f"_n = _check_len({seq}, {f.bound!r}, {f.path!r})")
        if dheader:
            hdr = self.name("_h")
            self.ser.append(f"{hdr} = len(parts); parts.append(None); pos += 4")
            self.ser.append(f"{hdr}_start = pos")
        self.ser.append("parts.append(_U32.pack(_n)); pos += 4")
        self.ser.append(f"for _e in {seq}:")
        self.ser.append(f"    pos = {ser_elem}(_e, parts, pos)")
        if dheader:
            self.ser.append(f"parts[{hdr}] = _U32.pack(pos - {hdr}_start)")
            self.de.append("pos += 4")
        self.de.append("_n = _U32.unpack_from(data, 4 + pos)[0]; pos += 4")
        self.de.append(f"{var} = []")
        self.de.append("for _ in range(_n):")
        self.de.append(f"    _o, pos = {de_elem}(data, pos)")
        self.de.append(f"    {var}.append(_o)")
        self.base_align = 1
        return var

    def flush_de_construct(self, var: str, expr: str) -> None:
        # values of a nested struct may still sit in the current run: construct later
        self.de_post.append(f"{var} = {expr}") if self.ser_exprs else self.de.append(
            f"{var} = {expr}"
        )


class Codec:
    """Generated serialise/deserialise functions of one final struct type."""

    def __init__(self, t: type, bytes_fields: frozenset[str] = frozenset()) -> None:
        info = describe(t)
        if info.extensibility != "final":
            raise UnsupportedTypeError(f"{info.typename} is {info.extensibility}")
        self.ser: dict[int, Any] = {}
        self.de: dict[int, Any] = {}
        for version, align_max, head in ((1, 8, b"\x00\x01\x00\x00"), (2, 4, b"\x00\x07\x00\x00")):
            gen = _Gen(align_max, bytes_fields=bytes_fields)
            gen.ns["_HEAD"] = head
            cls = gen.name("_T", t)
            args = [gen.field(f, f"o.{f.name}") for f in info.fields]
            gen.flush()
            body = gen.ser
            if len(body) == 2 and body[0].startswith("parts.append(") and body[1].startswith("pos"):
                # fixed-size fields only: one pack call after the header
                src = ["def ser(o):", f"    return _HEAD + {body[0][len('parts.append(') : -1]}"]
            else:
                src = ["def ser(o):", "    parts = [_HEAD]; pos = 0"]
                src += ["    " + line for line in body]
                src += ["    return b''.join(parts)"]
            src += ["", "def de(data):", "    pos = 0"]
            src += ["    " + line for line in gen.de]
            src += [f"    return {cls}({', '.join(args)})"]
            code = "\n".join(src)
            exec(compile(code, f"<idl codec {info.typename} xcdr{version}>", "exec"), gen.ns)
            self.ser[version] = gen.ns["ser"]
            self.de[version] = gen.ns["de"]


def build_codec(t: type, bytes_fields: frozenset[str] = frozenset()) -> Codec | None:
    """The compiled codec of ``t``, or None when the binding's machines must be used.

    Numeric sequences are numpy arrays in ``idl.Struct`` types; in plain
    binding types they are lists, and ``bytes_fields`` names top-level
    ``sequence<octet>`` fields carried as Python ``bytes`` instead.
    """
    if not _LE:
        return None
    try:
        return Codec(t, bytes_fields)
    except UnsupportedTypeError:
        return None
    except IdlError:
        return None
