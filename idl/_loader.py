"""OMG IDL file loader: ``idl.load(path)`` / ``idl.loads(text)`` -> ``IdlModule``.

Reads modules, structs (with single inheritance), enums, typedefs, consts
(integer, floating, string, char and boolean expressions with references),
``sequence<T>``/``sequence<T, N>``, ``string``/``string<N>``, multi-dimensional
arrays, ``@key`` and ``#pragma keylist``, ``@final``/``@appendable``/``@mutable``
(and ``@extensibility(...)``), ``#include "x.idl"`` / ``<x.idl>`` with include
dirs, comments, and the preprocessor subset of :mod:`idl._preprocess`
(object-like ``#define`` macros, ``#ifdef``/``#ifndef``/``#if``/``#elif``/
``#else``/``#endif``). The types it builds are ``idl.Struct`` / ``idl.Enum``
classes, the same kind the class API declares. Unions, ``bitmask``,
``bitset``, ``map<K, V>``, ``fixed<d, s>`` and ``wstring`` raise an error
naming the construct.
"""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

import lark
from cyclonedds.idl import IdlEnum
from cyclonedds.idl import types as _t

from ._errors import IdlError, IdlSyntaxError
from ._grammar import GRAMMAR
from ._preprocess import preprocess
from ._struct import make_enum, make_struct

__all__ = ["IdlModule", "load", "loads"]

_parser: lark.Lark | None = None


def _get_parser() -> lark.Lark:
    global _parser
    if _parser is None:
        _parser = lark.Lark(
            GRAMMAR, parser="lalr", propagate_positions=True, maybe_placeholders=True
        )
    return _parser


_BASE_TYPES: dict[str, Any] = {
    "short": _t.int16,
    "unsigned short": _t.uint16,
    "long": _t.int32,
    "unsigned long": _t.uint32,
    "long long": _t.int64,
    "unsigned long long": _t.uint64,
    "int8": _t.int8,
    "uint8": _t.uint8,
    "int16": _t.int16,
    "uint16": _t.uint16,
    "int32": _t.int32,
    "uint32": _t.uint32,
    "int64": _t.int64,
    "uint64": _t.uint64,
    "float": _t.float32,
    "double": _t.float64,
    "char": _t.char,
    "boolean": bool,
    "octet": _t.byte,
}

_INT_RANGES: dict[Any, tuple[int, int]] = {
    _t.int8: (-(1 << 7), (1 << 7) - 1),
    _t.uint8: (0, (1 << 8) - 1),
    _t.int16: (-(1 << 15), (1 << 15) - 1),
    _t.uint16: (0, (1 << 16) - 1),
    _t.int32: (-(1 << 31), (1 << 31) - 1),
    _t.uint32: (0, (1 << 32) - 1),
    _t.int64: (-(1 << 63), (1 << 63) - 1),
    _t.uint64: (0, (1 << 64) - 1),
    _t.byte: (0, 255),
}


@dataclass
class _Const:
    value: Any
    type: Any


class IdlModule:
    """The types, typedefs and constants of one IDL file (and its includes).

    ``module["sensors::Reading"]`` and ``module.sensors.Reading`` give the same
    ``idl.Struct`` class; ``module["sensors::N"]`` gives a constant's value.
    """

    def __init__(self, path: str, entries: dict[str, Any]) -> None:
        self.path = path
        self._entries = entries

    def __getitem__(self, name: str) -> Any:
        name = name.removeprefix("::")
        if name not in self._entries:
            raise KeyError(f"{name!r} is not defined in {self.path}")
        entry = self._entries[name]
        return entry.value if isinstance(entry, _Const) else entry

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.removeprefix("::") in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getattr__(self, attr: str) -> Any:
        return _Scope(self, "")._get(attr)

    def __dir__(self) -> list[str]:
        return sorted({n.split("::")[0] for n in self._entries})

    def __repr__(self) -> str:
        return f"IdlModule({self.path!r}, {len(self._entries)} definitions)"

    @property
    def types(self) -> dict[str, type]:
        """Structs and enums by scoped name, in definition order."""
        return {k: v for k, v in self._entries.items() if isinstance(v, type)}

    @property
    def structs(self) -> dict[str, type]:
        """Struct classes by scoped name, in definition order."""
        return {k: v for k, v in self.types.items() if not issubclass(v, IdlEnum)}

    @property
    def constants(self) -> dict[str, Any]:
        """Constant values by scoped name."""
        return {k: v.value for k, v in self._entries.items() if isinstance(v, _Const)}


class _Scope:
    """Attribute access into an IDL module scope (``module.sensors.Reading``)."""

    def __init__(self, module: IdlModule, prefix: str) -> None:
        self._module = module
        self._prefix = prefix

    def _get(self, attr: str) -> Any:
        name = self._prefix + attr
        if name in self._module:
            return self._module[name]
        if any(n.startswith(name + "::") for n in self._module):
            return _Scope(self._module, name + "::")
        raise AttributeError(f"{name!r} is not defined in {self._module.path}")

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        return self._get(attr)

    def __repr__(self) -> str:
        return f"<IDL module {self._prefix[:-2]}>"


#: IDL 4 constructs the loader does not read, by their keyword.
_UNSUPPORTED = {
    "union": "unions are not supported",
    "bitmask": "bitmask is not supported",
    "bitset": "bitset is not supported",
    "map": "map<K, V> is not supported",
    "fixed": "fixed<digits, scale> is not supported",
}
_TEMPLATE_BEFORE = re.compile(r"\b(map|fixed)\s*$")


def _syntax_error(exc: lark.exceptions.UnexpectedInput, file: str, text: str) -> IdlSyntaxError:
    line = getattr(exc, "line", 0) or 0
    column = getattr(exc, "column", 0) or 0
    if isinstance(exc, lark.exceptions.UnexpectedToken):
        tok = exc.token
        # map<...> and fixed<...> read as a type name; the parser stumbles on the "<".
        before = _TEMPLATE_BEFORE.search(text, 0, tok.start_pos or 0) if tok == "<" else None
        if tok.type == "$END":
            msg = "unexpected end of file"
        elif before is not None:
            msg = _UNSUPPORTED[before.group(1)]
            line, column = _position(text, before.start(1))
        elif str(tok) in _UNSUPPORTED and str(tok) not in ("map", "fixed"):
            msg = _UNSUPPORTED[str(tok)]
        else:
            msg = f"unexpected {str(tok)!r}"
            expected = sorted(e for e in exc.expected if not e.startswith("__"))
            if expected:
                msg += f" (expected one of {', '.join(expected[:8])})"
    elif isinstance(exc, lark.exceptions.UnexpectedCharacters):
        msg = f"unexpected character {exc.char!r}"
    elif isinstance(exc, lark.exceptions.UnexpectedEOF):
        msg = "unexpected end of file"
    else:  # pragma: no cover
        msg = str(exc)
    return IdlSyntaxError(msg, file=file, line=line, column=column)


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based line and column of ``offset`` in ``text``."""
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _c_div(a: Any, b: Any) -> Any:
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _c_mod(a: int, b: int) -> int:
    return a - b * int(_c_div(a, b))


_BINOPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": _c_div,
    "mod": _c_mod,
    "shl": lambda a, b: a << b,
    "shr": lambda a, b: a >> b,
    "band": lambda a, b: a & b,
    "bor": lambda a, b: a | b,
    "bxor": lambda a, b: a ^ b,
}


class _Loader:
    def __init__(self, include_dirs: Sequence[str | os.PathLike[str]]) -> None:
        self.include_dirs = [Path(d) for d in include_dirs]
        self.entries: dict[str, Any] = {}
        self.where: dict[str, str] = {}
        self.included: set[Path] = set()
        self.keylists: list[tuple[str, list[str], str, str]] = []
        self.pending_keys: dict[str, list[str]] = {}
        self.file = "<string>"
        self.macros: dict[str, str] = {}
        # Included files, preprocessed when their #include was met (None: in progress).
        self.sources: dict[Path, str | None] = {}

    # --- errors ---------------------------------------------------------------
    def err(self, node: Any, message: str) -> IdlError:
        line = getattr(getattr(node, "meta", None), "line", None) or getattr(node, "line", None)
        loc = f"{self.file}:{line}" if line else self.file
        return IdlError(f"{loc}: {message}")

    # --- files ----------------------------------------------------------------
    def preprocess(self, text: str, filename: str, directory: Path | None) -> str:
        def include(target: str, quoted: bool, line: int) -> None:
            path = self.resolve(filename, line, target, quoted, directory)
            if path not in self.sources:
                self.sources[path] = None
                self.sources[path] = self.preprocess(
                    path.read_text(encoding="utf-8"), str(path), path.parent
                )

        return preprocess(text, filename, self.macros, include)

    def parse_text(self, text: str, filename: str, directory: Path | None) -> None:
        self.parse_preprocessed(self.preprocess(text, filename, directory), filename, directory)

    def parse_preprocessed(self, text: str, filename: str, directory: Path | None) -> None:
        try:
            tree = _get_parser().parse(text)
        except lark.exceptions.UnexpectedInput as exc:
            raise _syntax_error(exc, filename, text) from None
        saved = self.file
        self.file = filename
        self._dir = directory
        try:
            for child in tree.children:
                self.definition(child, [], directory)
        finally:
            self.file = saved

    def resolve(
        self, file: str, line: int, target: str, quoted: bool, directory: Path | None
    ) -> Path:
        """The file ``#include`` names: next to the includer (quoted), then include dirs."""
        candidates = ([directory] if quoted and directory is not None else []) + self.include_dirs
        for d in candidates:
            p = (d / target).resolve()
            if p.is_file():
                return p
        raise IdlError(
            f"{file}:{line}: cannot find included file {target!r}"
            f" (searched {', '.join(map(str, candidates)) or 'nothing'})"
        )

    def include(self, node: Any, target: str, quoted: bool, directory: Path | None) -> None:
        p = self.resolve(self.file, node.line, target, quoted, directory)
        if p in self.included:
            return
        self.included.add(p)
        text = self.sources.get(p)
        if text is None:  # pragma: no cover - the preprocessor met every active #include
            raise self.err(node, f"{target!r} was not preprocessed")
        self.parse_preprocessed(text, str(p), p.parent)

    # --- names ----------------------------------------------------------------
    def define(self, node: Any, scope: list[str], name: str, value: Any) -> str:
        full = "::".join([*scope, name])
        if full in self.entries:
            raise self.err(
                node, f"duplicate definition of {full!r} (first defined at {self.where[full]})"
            )
        self.entries[full] = value
        line = getattr(getattr(node, "meta", None), "line", "?")
        self.where[full] = f"{self.file}:{line}"
        return full

    def lookup(
        self, node: Any, scope: list[str], parts: list[str], rooted: bool
    ) -> tuple[str, Any]:
        name = "::".join(parts)
        scopes = [[]] if rooted else [scope[:i] for i in range(len(scope), -1, -1)]
        for s in scopes:
            full = "::".join([*s, name])
            if full in self.entries:
                return full, self.entries[full]
        raise self.err(node, f"unknown name {name!r}")

    # --- definitions ------------------------------------------------------------
    def definition(self, node: Any, scope: list[str], directory: Path | None) -> None:
        if isinstance(node, lark.Token):  # directive
            self.directive(node, scope, directory)
            return
        kind = node.data
        if kind == "directive":
            self.directive(node.children[0], scope, directory)
        elif kind == "module":
            _ann, name, *defs = node.children
            for d in defs:
                self.definition(d, [*scope, str(name)], directory)
        elif kind == "struct_def":
            self.struct(node, scope)
        elif kind == "struct_fwd":
            pass
        elif kind == "enum_def":
            self.enum(node, scope)
        elif kind == "typedef_def":
            _ann, type_node, decls = node.children
            base = self.type_spec(type_node, scope)
            for decl in decls.children:
                name, tp = self.declarator(decl, base, scope)
                full = "::".join([*scope, name])
                self.define(decl, scope, name, _t.typedef[full, tp])  # type: ignore[misc]
        elif kind == "const_def":
            self.const(node, scope)
        else:  # pragma: no cover
            raise self.err(node, f"unsupported construct {kind}")

    def directive(self, tok: lark.Token, scope: list[str], directory: Path | None) -> None:
        text = str(tok)[1:].strip()
        m = re.match(r'include\s*(?:"([^"]+)"|<([^>]+)>)', text)
        if m:
            self.include(tok, m.group(1) or m.group(2), m.group(1) is not None, directory)
            return
        m = re.match(
            r"pragma\s+keylist\s+([A-Za-z_:][A-Za-z0-9_:]*)((?:\s+[A-Za-z_][\w.]*)*)", text
        )
        if m:
            parts = m.group(1).removeprefix("::").split("::")
            keys = m.group(2).split()
            full, value = self.lookup(tok, scope, parts, m.group(1).startswith("::"))
            if not isinstance(value, type) or issubclass(value, IdlEnum):
                raise self.err(tok, f"#pragma keylist names {full!r}, which is not a struct")
            self.rebuild_with_keys(tok, full, value, keys)
            return
        if re.match(r"pragma\b", text):
            return  # other pragmas: nothing to do
        # The preprocessor passes on only #include and #pragma lines.
        word = text.split()[0] if text else ""  # pragma: no cover
        raise self.err(tok, f"unsupported preprocessor directive #{word}")  # pragma: no cover

    def rebuild_with_keys(self, tok: Any, full: str, cls: type, keys: list[str]) -> None:
        fields = cls.__dataclass_fields__  # type: ignore[attr-defined]
        for k in keys:
            if k not in fields:
                raise self.err(tok, f"#pragma keylist: {full} has no member {k!r}")
        cls.__idl_annotations__["keylist"] = list(keys)  # type: ignore[attr-defined]

    def annotations(self, node: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for ann in node.children:
            name_node = ann.children[0]
            params = ann.children[1] if len(ann.children) > 1 else None
            name = "::".join(str(t) for t in name_node.children if t.type == "IDENT")
            value: Any = True
            if params is not None:
                if params.data == "ann_value":
                    value = self.expr_raw(params.children[0])
                else:
                    value = {
                        str(p.children[0]): self.expr_raw(p.children[1]) for p in params.children
                    }
            out[name] = (value, ann)
        return out

    def extensibility(self, anns: dict[str, Any]) -> str | None:
        for word in ("final", "appendable", "mutable"):
            if word in anns:
                return word
        if "extensibility" in anns:
            value, node = anns["extensibility"]
            word = str(value).lower() if not isinstance(value, dict) else ""
            if word not in ("final", "appendable", "mutable"):
                raise self.err(node, f"bad @extensibility value {value!r}")
            return word
        return None

    def struct(self, node: Any, scope: list[str]) -> None:
        ann_node, name_tok, inherit, *members = node.children
        name = str(name_tok)
        anns = self.annotations(ann_node)
        base = None
        if inherit is not None:
            sn = inherit.children[0]
            parts, rooted = self.scoped(sn)
            full_base, base = self.lookup(sn, scope, parts, rooted)
            if not isinstance(base, type) or issubclass(base, IdlEnum):
                raise self.err(sn, f"{full_base!r} is not a struct and cannot be a base")
        fields: dict[str, Any] = {}
        keys: list[str] = []
        member_ids: dict[str, int] = {}
        base_fields = set(base.__dataclass_fields__) if base is not None else set()
        for member in members:
            m_ann, type_node, decls = member.children
            manns = self.annotations(m_ann)
            tp = self.type_spec(type_node, scope)
            if "optional" in manns and manns["optional"][0] not in (False, 0):
                if "key" in manns:
                    raise self.err(member, "a key member cannot be @optional")
                tp = Optional[tp]  # noqa: UP045 - the binding recognises typing.Optional
            for decl in decls.children:
                fname, ftp = self.declarator(decl, tp, scope)
                if fname in fields or fname in base_fields:
                    raise self.err(decl, f"duplicate member {fname!r} in struct {name}")
                fields[fname] = ftp
                if "id" in manns:
                    mid = manns["id"][0]
                    if isinstance(mid, bool) or not isinstance(mid, int) or mid < 0:
                        raise self.err(member, f"@id of {fname} must be a non-negative integer")
                    member_ids[fname] = mid
                key_ann = manns.get("key")
                if key_ann is not None and key_ann[0] not in (False, 0):
                    keys.append(fname)
        full = "::".join([*scope, name])
        try:
            cls = make_struct(
                name,
                fields,
                typename=full,
                keys=tuple(keys),
                extensibility=self.extensibility(anns),
                base=base,
                member_ids=member_ids,
            )
        except IdlError as exc:
            raise self.err(node, str(exc)) from None
        self.define(node, scope, name, cls)

    def enum(self, node: Any, scope: list[str]) -> None:
        _ann, name_tok, *enumerators = node.children
        name = str(name_tok)
        full = "::".join([*scope, name])
        values: dict[str, int] = {}
        value = 0
        for e in enumerators:
            e_ann, e_name = e.children
            anns = self.annotations(e_ann)
            if "value" in anns:
                value = int(anns["value"][0])
            if str(e_name) in values:
                raise self.err(e, f"duplicate enumerator {e_name!s} in enum {name}")
            values[str(e_name)] = value
            value += 1
        cls = make_enum(name, values, typename=full)
        self.define(node, scope, name, cls)
        for ename, evalue in values.items():
            c = _Const(cls(evalue), cls)
            for s in (scope, [*scope, name]):
                full_e = "::".join([*s, ename])
                if full_e in self.entries:
                    raise self.err(node, f"duplicate definition of {full_e!r}")
                self.entries[full_e] = c
                self.where[full_e] = f"{self.file}:{node.meta.line}"

    def const(self, node: Any, scope: list[str]) -> None:
        type_node, name_tok, expr = node.children
        tp = self.type_spec(type_node, scope)
        while isinstance(tp, _t.typedef):
            tp = tp.subtype
        value = self.expr(expr, scope)
        name = str(name_tok)
        if tp in _INT_RANGES:
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.err(
                    node, f"constant {name} is declared integer but its value {value!r} is not"
                )
            lo, hi = _INT_RANGES[tp]
            if not lo <= value <= hi:
                raise self.err(node, f"constant {name} = {value} is out of range ({lo}..{hi})")
        elif tp in (_t.float32, _t.float64):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise self.err(
                    node, f"constant {name} is declared floating but its value {value!r} is not"
                )
            value = float(value)
        elif tp is str or isinstance(tp, _t.bounded_str):
            if not isinstance(value, str):
                raise self.err(
                    node, f"constant {name} is declared string but its value {value!r} is not"
                )
        elif tp is bool:
            if not isinstance(value, bool):
                raise self.err(
                    node, f"constant {name} is declared boolean but its value {value!r} is not"
                )
        elif tp is _t.char:
            if not (isinstance(value, str) and len(value) == 1):
                raise self.err(
                    node, f"constant {name} is declared char but its value {value!r} is not"
                )
        elif isinstance(tp, type) and issubclass(tp, IdlEnum):
            if not isinstance(value, tp):
                raise self.err(
                    node,
                    f"constant {name} is declared {tp.__name__} but its value {value!r} is not",
                )
        else:
            raise self.err(node, f"constant {name} has an unsupported type")
        self.define(node, scope, name, _Const(value, tp))

    # --- types ------------------------------------------------------------------
    def scoped(self, node: Any) -> tuple[list[str], bool]:
        rooted = any(t.type == "ROOT" for t in node.children)
        return [str(t) for t in node.children if t.type == "IDENT"], rooted

    def type_spec(self, node: Any, scope: list[str]) -> Any:
        kind = node.data
        if kind == "base_type":
            text = " ".join(str(t) for t in node.children)
            if text not in _BASE_TYPES:
                raise self.err(node, f"type {text!r} is not supported")
            return _BASE_TYPES[text]
        if kind == "string_type":
            bound = node.children[0]
            if bound is None:
                return str
            return _t.bounded_str[self.positive(bound, scope, "string bound")]  # type: ignore[misc]
        if kind == "wstring_type":
            raise self.err(node, "wstring is not supported")
        if kind == "sequence_type":
            sub = self.type_spec(node.children[0], scope)
            bound = node.children[1]
            if bound is None:
                return _t.sequence[sub]  # type: ignore[misc]
            seq_bound = self.positive(bound, scope, "sequence bound")
            return _t.sequence[sub, seq_bound]  # type: ignore[misc]
        if kind == "scoped_name":
            parts, rooted = self.scoped(node)
            full, value = self.lookup(node, scope, parts, rooted)
            if isinstance(value, _Const):
                raise self.err(node, f"{full!r} is a constant, not a type")
            return value
        raise self.err(node, f"unsupported type {kind}")  # pragma: no cover

    def declarator(self, node: Any, tp: Any, scope: list[str]) -> tuple[str, Any]:
        name, *sizes = node.children
        for size in reversed(sizes):
            length = self.positive(size.children[0], scope, "array size")
            tp = _t.array[tp, length]  # type: ignore[misc]
        return str(name), tp

    def positive(self, expr: Any, scope: list[str], what: str) -> int:
        value = self.expr(expr, scope)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise self.err(expr, f"{what} must be a positive integer, got {value!r}")
        return value

    # --- constant expressions -----------------------------------------------------
    def expr_raw(self, node: Any) -> Any:
        """Annotation parameter: a bare identifier stays a name (``FINAL``)."""
        if isinstance(node, lark.Tree) and node.data == "ref":
            parts, _ = self.scoped(node.children[0])
            return "::".join(parts)
        return self.expr(node, [])

    def expr(self, node: Any, scope: list[str]) -> Any:
        kind = node.data
        if kind == "integer":
            text = str(node.children[0])
            if len(text) > 1 and text[0] == "0" and text[1] not in "xX":
                return int(text, 8)
            return int(text, 0)
        if kind == "floating":
            return float(str(node.children[0]).rstrip("dD"))
        if kind in ("string", "char"):
            raw = str(node.children[0])
            try:
                return ast.literal_eval(raw)
            except (ValueError, SyntaxError):
                raise self.err(node, f"bad literal {raw}") from None
        if kind == "true":
            return True
        if kind == "false":
            return False
        if kind == "ref":
            parts, rooted = self.scoped(node.children[0])
            full, value = self.lookup(node, scope, parts, rooted)
            if not isinstance(value, _Const):
                raise self.err(node, f"{full!r} is not a constant")
            return value.value
        if kind == "neg":
            return self.numeric(node, -self.num(node.children[0], scope))
        if kind == "inv":
            return ~self.integer(node.children[0], scope)
        if kind in _BINOPS:
            a = self.expr(node.children[0], scope)
            b = self.expr(node.children[1], scope)
            if kind == "add" and isinstance(a, str) and isinstance(b, str):
                return a + b
            for v in (a, b):
                if isinstance(v, (str, bool)) or not isinstance(v, (int, float)):
                    raise self.err(node, f"operand {v!r} of {kind} is not a number")
            if kind in ("div", "mod") and b == 0:
                raise self.err(node, "division by zero in constant expression")
            if kind in ("mod", "shl", "shr", "band", "bor", "bxor") and not (
                isinstance(a, int) and isinstance(b, int)
            ):
                raise self.err(node, f"operands of {kind} must be integers")
            return _BINOPS[kind](a, b)  # type: ignore[no-untyped-call]
        if len(node.children) == 1:  # unary plus
            return self.num(node.children[0], scope)
        raise self.err(node, f"unsupported expression {kind}")  # pragma: no cover

    def num(self, node: Any, scope: list[str]) -> Any:
        v = self.expr(node, scope)
        if isinstance(v, (str, bool)) or not isinstance(v, (int, float)):
            raise self.err(node, f"{v!r} is not a number")
        return v

    def numeric(self, node: Any, v: Any) -> Any:
        return v

    def integer(self, node: Any, scope: list[str]) -> int:
        v = self.expr(node, scope)
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.err(node, f"{v!r} is not an integer")
        return v


def loads(
    text: str, filename: str = "<string>", include_dirs: Sequence[str | os.PathLike[str]] = ()
) -> IdlModule:
    """Parse IDL ``text``; ``filename`` names it in errors and anchors relative includes."""
    loader = _Loader(include_dirs)
    directory = Path(filename).parent if filename != "<string>" else Path.cwd()
    loader.parse_text(text, filename, directory)
    return IdlModule(filename, loader.entries)


def load(
    path: str | os.PathLike[str], include_dirs: Sequence[str | os.PathLike[str]] = ()
) -> IdlModule:
    """Load the IDL file at ``path`` (``#include`` searched next to it, then ``include_dirs``).

    Raises ``IdlSyntaxError`` (file, line, column of the file where it happened)
    for malformed input and ``IdlError`` (with file:line) for semantic errors:
    unknown types, duplicate names, bad constants, missing includes.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise IdlError(f"cannot read IDL file {str(p)!r}: {exc.strerror}") from exc
    loader = _Loader(include_dirs)
    loader.included.add(p.resolve())
    loader.sources[p.resolve()] = None
    loader.parse_text(text, str(p), p.parent)
    return IdlModule(str(p), loader.entries)
