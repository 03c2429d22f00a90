"""Type checking a parsed expression against a topic type and compiling it.

The checked expression becomes Python source for one function, ``compile()``d
once per (expression, topic type) and cached. ``%n`` parameters are arguments
of a factory that returns the matching functions, so binding new parameter
values costs a conversion and a call, not a recompilation.

Evaluation rules (documented on :class:`dcps.ContentFilter`):

* numbers compare with Python semantics (any width, signed or not, int or
  float); strings and chars compare as Python strings; booleans only with
  ``=``, ``<>`` and ``IN``; enums by enumerator value;
* a predicate that reaches into a sequence element that does not exist is
  false (its ``NOT`` form too: the whole predicate is false); an enclosing
  ``NOT`` negates it as usual;
* elements of numeric sequences and arrays that samples hold as numpy arrays
  compare as numpy scalars (the result is still a Python ``bool``).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import attrs

from dcps.sql._parse import (
    And,
    Between,
    Compare,
    Field,
    InList,
    Like,
    Literal,
    Node,
    Not,
    Operand,
    Or,
    Param,
    Query,
    parse,
    parse_literal,
)
from dcps.sql._types import NUMERIC_KINDS, SCALAR_KINDS, TEXT_KINDS, Slot, member, struct_slot
from idl._errors import FilterSyntaxError

__all__ = ["Compiled", "ParamSite", "compile_expression", "like_regex"]

_PY_OPS = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_ORDERING = frozenset({"<", "<=", ">", ">="})

#: How deeply AND/OR/NOT may nest (Python's own parser stops near 200 brackets).
MAX_DEPTH = 100


@attrs.frozen
class ParamSite:
    """One use of a ``%n`` parameter: what its value must convert to."""

    index: int
    pos: int
    slot: Slot
    field: str
    role: str  # "value", "enum_value" (enum compared by .value) or "like"


@attrs.frozen
class Compiled:
    """A checked, compiled expression, independent of parameter values."""

    expression: str
    topic_type: type
    sites: tuple[ParamSite, ...]
    factory: Callable[..., tuple[Callable[[Any], bool], Callable[[Any], list[bool]]]]
    order_by: tuple[str, ...]
    sort_key: Callable[[Any], Any] | None
    source: str

    def bind(
        self, parameters: tuple[str, ...]
    ) -> tuple[Callable[[Any], bool], Callable[[Any], list[bool]]]:
        """Convert ``parameters`` for every site and return (match, match_many)."""
        values = [_convert_parameter(self.expression, site, parameters) for site in self.sites]
        return self.factory(*values)


def like_regex(pattern: str) -> re.Pattern[str]:
    """The anchored regex of an SQL LIKE pattern: ``%`` any run, ``_`` one character."""
    out = []
    for char in pattern:
        if char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)


def _error(expression: str, message: str, pos: int) -> FilterSyntaxError:
    return FilterSyntaxError(message, expression=expression, position=pos)


def _kind_name(slot: Slot) -> str:
    return slot.describe


@attrs.define
class _Resolved:
    slot: Slot
    code: str
    guards: list[str]
    node: Field
    numpy: bool = False  # the value is a numpy scalar (comparisons give numpy.bool_)


class _Compiler:
    def __init__(self, expression: str, topic_type: type) -> None:
        self.expression = expression
        self.root = struct_slot(topic_type)
        self.topic_type = topic_type
        self.namespace: dict[str, Any] = {}
        self.sites: list[ParamSite] = []

    # -- helpers -------------------------------------------------------------

    def fail(self, message: str, pos: int) -> FilterSyntaxError:
        return _error(self.expression, message, pos)

    def constant(self, value: Any) -> str:
        """Source text for a constant: inline when safe, else a namespace name."""
        if type(value) in (int, str, bool) or (type(value) is float and math.isfinite(value)):
            return repr(value)
        name = f"_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    def resolve(self, field: Field) -> _Resolved | None:
        """Resolve a field path; None if its first name is not a member (maybe an enumerator)."""
        slot = self.root
        code = "s"
        guards: list[str] = []
        walked = ""
        numpy = False
        for i, part in enumerate(field.parts):
            if isinstance(part, int):
                if slot.kind not in ("array", "sequence") or slot.element is None:
                    raise self.fail(
                        f"field {walked!r} is {_kind_name(slot)}, not an array or sequence; "
                        f"it cannot be indexed",
                        field.pos,
                    )
                if slot.kind == "array" and slot.bound is not None and part >= slot.bound:
                    raise self.fail(
                        f"index {part} is out of range for {walked!r} (an array of {slot.bound})",
                        field.pos,
                    )
                if slot.kind == "sequence" and slot.bound and part >= slot.bound:
                    raise self.fail(
                        f"index {part} is out of range for {walked!r} "
                        f"(a sequence of at most {slot.bound})",
                        field.pos,
                    )
                guards.append(f"len({code}) > {part}")
                numpy = numpy or slot.numpy
                code = f"{code}[{part}]"
                walked += f"[{part}]"
                slot = slot.element
                continue
            if slot.kind != "struct":
                raise self.fail(
                    f"field {walked!r} is {_kind_name(slot)}; it has no member {part!r}",
                    field.pos,
                )
            found = member(slot, part)
            if found is None:
                if i == 0 and len(field.parts) == 1:
                    return None
                owner = slot.python_type.__name__
                where = f"{walked!r} ({owner})" if walked else owner
                raise self.fail(
                    f"unknown field {field.text!r}: {where} has no member {part!r}", field.pos
                )
            code = f"{code}.{part}"
            walked = f"{walked}.{part}" if walked else part
            slot = found
        return _Resolved(slot, code, guards, field, numpy)

    def scalar(self, resolved: _Resolved) -> None:
        slot = resolved.slot
        if slot.kind in SCALAR_KINDS:
            return
        name = resolved.node.text
        if slot.kind in ("array", "sequence"):
            hint = f"; compare one element ({name}[0])"
        elif slot.kind == "struct":
            hint = "; compare one of its members"
        else:
            hint = ""
        raise self.fail(
            f"field {name!r} is {_kind_name(slot)}; only primitive fields "
            f"(numbers, strings, chars, booleans, enums) can be compared{hint}",
            resolved.node.pos,
        )

    # -- operand groups ------------------------------------------------------

    def group(
        self, operands: list[Operand], pos: int, what: str
    ) -> tuple[Slot, list[_Resolved | None]]:
        """Resolve the fields among ``operands`` and find the type they share."""
        resolved: list[_Resolved | None] = []
        for operand in operands:
            resolved.append(self.resolve(operand) if isinstance(operand, Field) else None)
        fields = [r for r in resolved if r is not None]
        if not fields:
            for operand in operands:
                if isinstance(operand, Field):
                    raise self.fail(
                        f"unknown field {operand.text!r}: "
                        f"{self.topic_type.__name__} has no such member",
                        operand.pos,
                    )
            raise self.fail(f"{what} needs a field of the topic type on one side", pos)
        for r in fields:
            self.scalar(r)
        first = fields[0]
        for other in fields[1:]:
            if not _compatible(first.slot, other.slot):
                raise self.fail(
                    f"cannot compare field {first.node.text!r} ({_kind_name(first.slot)}) "
                    f"with field {other.node.text!r} ({_kind_name(other.slot)})",
                    other.node.pos,
                )
        return first.slot, resolved

    def value_code(
        self,
        operand: Operand,
        resolved: _Resolved | None,
        slot: Slot,
        field_text: str,
        enum_by_value: bool,
    ) -> tuple[str, list[str]]:
        """Source for one operand of a group of type ``slot``, and its guards."""
        if resolved is not None:
            code = resolved.code
            if slot.kind == "enum" and enum_by_value:
                code = f"{code}.value"
            return code, resolved.guards
        if isinstance(operand, Param):
            role = "enum_value" if slot.kind == "enum" and enum_by_value else "value"
            return self.param(operand, slot, field_text, role), []
        value = _convert(self.expression, operand, slot, field_text, None)
        if slot.kind == "enum" and enum_by_value:
            value = value.value
        return self.constant(value), []

    def param(self, param: Param, slot: Slot, field_text: str, role: str) -> str:
        name = f"_p{len(self.sites)}"
        self.sites.append(ParamSite(param.index, param.pos, slot, field_text, role))
        return name

    # -- predicates ----------------------------------------------------------

    def node(self, node: Node, depth: int = 0) -> str:
        if depth > MAX_DEPTH:
            raise self.fail(f"expression nests deeper than {MAX_DEPTH} levels", node.pos)
        if isinstance(node, Or):
            return "(" + " or ".join(self.node(n, depth + 1) for n in node.operands) + ")"
        if isinstance(node, And):
            return "(" + " and ".join(self.node(n, depth + 1) for n in node.operands) + ")"
        if isinstance(node, Not):
            return f"(not {self.node(node.operand, depth + 1)})"
        if isinstance(node, Compare):
            return self.compare(node)
        if isinstance(node, Like):
            return self.like(node)
        if isinstance(node, Between):
            return self.between(node)
        if isinstance(node, InList):
            return self.in_list(node)
        raise self.fail("unsupported expression", 0)  # pragma: no cover - grammar closed

    def compare(self, node: Compare) -> str:
        operands = [node.left, node.right]
        slot, resolved = self.group(operands, node.pos, "a comparison")
        field_text = _field_text(resolved)
        if node.op in _ORDERING and slot.kind == "bool":
            raise self.fail(
                f"ordering comparison {node.op!r} is not defined on boolean field "
                f"{field_text!r}; use = or <>",
                node.op_pos,
            )
        by_value = node.op in _ORDERING
        left, g1 = self.value_code(node.left, resolved[0], slot, field_text, by_value)
        right, g2 = self.value_code(node.right, resolved[1], slot, field_text, by_value)
        return _guarded(g1 + g2, f"{left} {_PY_OPS[node.op]} {right}", _numpy(resolved))

    def between(self, node: Between) -> str:
        operands = [node.operand, node.low, node.high]
        slot, resolved = self.group(operands, node.pos, "BETWEEN")
        field_text = _field_text(resolved)
        if slot.kind == "bool":
            raise self.fail(f"BETWEEN is not defined on boolean field {field_text!r}", node.pos)
        codes = []
        guards: list[str] = []
        for operand, res in zip(operands, resolved, strict=True):
            code, g = self.value_code(operand, res, slot, field_text, True)
            codes.append(code)
            guards += g
        test = f"{codes[1]} <= {codes[0]} <= {codes[2]}"
        if node.negated:
            test = f"not ({test})"
        return _guarded(guards, test, _numpy(resolved) and not node.negated)

    def in_list(self, node: InList) -> str:
        operands = [node.operand, *node.items]
        slot, resolved = self.group(operands, node.pos, "IN")
        field_text = _field_text(resolved)
        left, guards = self.value_code(node.operand, resolved[0], slot, field_text, False)
        codes = []
        constants = []
        for operand, res in zip(node.items, resolved[1:], strict=True):
            if res is None and isinstance(operand, Literal | Field):
                value = _convert(self.expression, operand, slot, field_text, None)
                constants.append(value)
                codes.append(self.constant(value))
            else:
                code, g = self.value_code(operand, res, slot, field_text, False)
                codes.append(code)
                guards = guards + g
        if len(constants) == len(codes):
            container = self.constant(frozenset(constants))
        else:
            container = "(" + ", ".join(codes) + ",)"
        op = "not in" if node.negated else "in"
        return _guarded(guards, f"{left} {op} {container}")

    def like(self, node: Like) -> str:
        if not isinstance(node.operand, Field):
            raise self.fail("LIKE needs a string field on its left", node.pos)
        resolved = self.resolve(node.operand)
        if resolved is None:
            raise self.fail(
                f"unknown field {node.operand.text!r}: "
                f"{self.topic_type.__name__} has no such member",
                node.operand.pos,
            )
        if resolved.slot.kind not in TEXT_KINDS:
            raise self.fail(
                f"LIKE needs a string field, but {node.operand.text!r} is "
                f"{_kind_name(resolved.slot)}",
                node.operand.pos,
            )
        code = resolved.code
        pattern = node.pattern
        if isinstance(pattern, Param):
            name = self.param(pattern, resolved.slot, node.operand.text, "like")
            test = f"{name}({code}) is {'' if node.negated else 'not '}None"
            return _guarded(resolved.guards, test)
        if not (isinstance(pattern, Literal) and pattern.kind == "string"):
            raise self.fail("a LIKE pattern must be a string literal or a parameter", pattern.pos)
        test = self.like_literal(code, pattern.value)
        if node.negated:
            test = f"not ({test})"
        return _guarded(resolved.guards, test)

    def like_literal(self, code: str, pattern: str) -> str:
        collapsed = re.sub("%+", "%", pattern)
        if "_" not in collapsed:
            inner = collapsed.strip("%")
            if "%" not in inner:
                starts = collapsed.startswith("%")
                ends = collapsed.endswith("%")
                lit = repr(inner)
                if collapsed == "%":
                    return f"{code} is not None"
                if starts and ends:
                    return f"{lit} in {code}"
                if ends:
                    return f"{code}.startswith({lit})"
                if starts:
                    return f"{code}.endswith({lit})"
                return f"{code} == {lit}"
        matcher = self.constant(like_regex(pattern).fullmatch)
        return f"{matcher}({code}) is not None"

    # -- whole expressions ---------------------------------------------------

    def order_key(self, fields: tuple[Field, ...]) -> str | None:
        if not fields:
            return None
        parts = []
        for field in fields:
            resolved = self.resolve(field)
            if resolved is None:
                raise self.fail(
                    f"unknown field {field.text!r}: {self.topic_type.__name__} has no such member",
                    field.pos,
                )
            self.scalar(resolved)
            code = resolved.code
            if resolved.slot.kind == "enum":
                code = f"{code}.value"
            if resolved.guards:
                cond = " and ".join(resolved.guards)
                parts.append(f"((1, {code}) if {cond} else (0,))")
            else:
                parts.append(code)
        return "(" + ", ".join(parts) + ",)"


def _field_text(resolved: list[_Resolved | None]) -> str:
    for r in resolved:
        if r is not None:
            return r.node.text
    return "?"  # pragma: no cover - group() guarantees a field


def _numpy(resolved: list[_Resolved | None]) -> bool:
    return any(r is not None and r.numpy for r in resolved)


def _guarded(guards: list[str], test: str, to_bool: bool = False) -> str:
    if to_bool:
        test = f"bool({test})"
    unique = list(dict.fromkeys(guards))
    if not unique:
        return f"({test})"
    return "(" + " and ".join([*unique, f"({test})"]) + ")"


def _compatible(a: Slot, b: Slot) -> bool:
    if a.kind in NUMERIC_KINDS:
        return b.kind in NUMERIC_KINDS
    if a.kind in TEXT_KINDS:
        return b.kind in TEXT_KINDS
    if a.kind == "enum":
        return b.kind == "enum" and a.python_type is b.python_type
    return a.kind == b.kind


def _enum_scope_ok(enum_cls: Any, scope: tuple[str, ...]) -> bool:
    if not scope:
        return True
    written = "::".join(scope)
    typename = getattr(enum_cls, "__idl_typename__", enum_cls.__name__)
    candidates = {enum_cls.__name__, typename, typename.replace(".", "::")}
    return written in candidates or typename.replace(".", "::").endswith("::" + written)


def _convert(
    expression: str,
    operand: Operand,
    slot: Slot,
    field_text: str,
    param: tuple[int, str] | None,
) -> Any:
    """Convert a literal (or bare enumerator name) to the value type of ``slot``."""
    kind = slot.kind
    shown = param[1] if param else getattr(operand, "text", "?")
    if param:
        subject = f"parameter %{param[0]} ({shown!r})"
    elif isinstance(operand, Field):
        subject = repr(shown)
    else:
        subject = shown
    pos = operand.pos if param is None else -1

    def bad(expected: str) -> FilterSyntaxError:
        return _error(
            expression,
            f"{subject} is not {expected} for {_kind_name(slot)} field {field_text!r}",
            max(pos, 0),
        )

    if isinstance(operand, Field):
        # A bare identifier that is no field: an enumerator name.
        if kind == "enum" and len(operand.parts) == 1 and isinstance(operand.parts[0], str):
            name = operand.parts[0]
            members = slot.python_type.__members__
            if name in members:
                return members[name]
            what = "" if param else "a field of the topic type nor "
            raise _error(
                expression,
                f"{subject} is {'not' if param else 'neither'} {what}an enumerator of "
                f"{slot.python_type.__name__} ({', '.join(members)})",
                max(pos, 0),
            )
        if param is not None:
            if kind in TEXT_KINDS:
                raise bad("a string (write it in single quotes)")
            raise bad("TRUE or FALSE" if kind == "bool" else "a number")
        raise _error(
            expression,
            f"unknown field {shown!r}: the topic type has no such member",
            max(pos, 0),
        )
    if isinstance(operand, Param):  # pragma: no cover - parameters are handled by sites
        raise bad("a value")
    if kind in NUMERIC_KINDS:
        if operand.kind in ("int", "float"):
            return operand.value
        raise bad("a number")
    if kind in TEXT_KINDS:
        if operand.kind == "string":
            return operand.value
        raise bad("a string")
    if kind == "bool":
        if operand.kind == "bool":
            return operand.value
        raise bad("TRUE or FALSE")
    if kind == "enum":
        enum_cls = slot.python_type
        if operand.kind == "enum":
            *scope, name = operand.value
            if not _enum_scope_ok(enum_cls, tuple(scope)):
                raise bad(f"an enumerator of {enum_cls.__name__}")
            if name in enum_cls.__members__:
                return enum_cls.__members__[name]
            raise _error(
                expression,
                f"{subject} is not an enumerator of {enum_cls.__name__} "
                f"({', '.join(enum_cls.__members__)})",
                max(pos, 0),
            )
        if operand.kind == "int":
            for member_ in enum_cls:
                if member_.value == operand.value:
                    return member_
            raise _error(
                expression,
                f"{subject}: no enumerator of {enum_cls.__name__} has the value {operand.value}",
                max(pos, 0),
            )
        raise bad(f"an enumerator of {enum_cls.__name__}")
    raise bad("comparable")  # pragma: no cover - scalar() rejects other kinds


def _reason(exc: FilterSyntaxError) -> str:
    """The message of ``exc`` without its position and expression lines (the message may
    quote a parameter, which may itself contain the words "at position")."""
    text = str(exc)
    suffix = f" at position {exc.position}:\n  {exc.expression}\n  {' ' * exc.position}^"
    return text[: -len(suffix)] if text.endswith(suffix) else text


def _convert_parameter(expression: str, site: ParamSite, parameters: tuple[str, ...]) -> Any:
    if site.index >= len(parameters):
        raise _error(
            expression,
            f"parameter %{site.index} is used but only {len(parameters)} "
            f"parameter{'s' if len(parameters) != 1 else ''} given",
            site.pos,
        )
    text = parameters[site.index]
    try:
        operand = parse_literal(text)
    except FilterSyntaxError as exc:
        reason = _reason(exc)
        raise _error(
            expression,
            f"parameter %{site.index} ({text!r}) is not a valid value: {reason}",
            site.pos,
        ) from None
    try:
        if site.role == "like":
            if not (isinstance(operand, Literal) and operand.kind == "string"):
                raise _error(
                    expression,
                    f"parameter %{site.index} ({text!r}) is not a string pattern for "
                    f"LIKE on field {site.field!r} (write it in single quotes)",
                    site.pos,
                )
            return like_regex(operand.value).fullmatch
        value = _convert(expression, operand, site.slot, site.field, (site.index, text))
    except FilterSyntaxError as exc:
        if exc.position == site.pos:
            raise
        raise _error(expression, _reason(exc), site.pos) from None
    if site.role == "enum_value":
        return value.value
    return value


def compile_expression(expression: str, topic_type: type, *, query: bool) -> Compiled:
    """Parse, check and compile ``expression`` for ``topic_type`` (cached)."""
    return _compile_cached(expression, topic_type, query)


@functools.lru_cache(maxsize=512)
def _compile_cached(expression: str, topic_type: type, query: bool) -> Compiled:
    tree: Query = parse(expression, query=query)
    compiler = _Compiler(expression, topic_type)
    try:
        body = compiler.node(tree.condition) if tree.condition is not None else "True"
        key = compiler.order_key(tree.order_by)
    except RecursionError:
        raise _error(expression, "expression nests too deeply", 0) from None
    args = ", ".join(f"_p{i}" for i in range(len(compiler.sites)))
    lines = [
        f"def _factory({args}):",
        "    def match(s):",
        f"        return {body}",
        "    def match_many(samples):",
        f"        return [{body} for s in samples]",
        "    return match, match_many",
    ]
    if key is not None:
        lines += ["def _sort_key(s):", f"    return {key}"]
    source = "\n".join(lines) + "\n"
    namespace = dict(compiler.namespace)
    try:
        code = compile(source, f"<filter {expression[:60]!r}>", "exec")
        exec(code, namespace)
    except (SyntaxError, RecursionError, MemoryError):
        raise _error(expression, "expression nests too deeply", 0) from None
    return Compiled(
        expression=expression,
        topic_type=topic_type,
        sites=tuple(compiler.sites),
        factory=namespace["_factory"],
        order_by=tuple(f.text for f in tree.order_by),
        sort_key=namespace.get("_sort_key"),
        source=source,
    )
