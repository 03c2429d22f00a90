"""JMS message selectors: parsing, type checking and compiling with three-valued logic.

A selector (JMS 2.0, section 3.8.1.1) is a condition over a message's fields:
here the fields of the sample (its members, ``pos.x``, ``items[2]``) and the
JMS header fields the caller names (``JMSPriority``, ...). The grammar is
``_selector_grammar.py``; the syntax tree reuses :class:`~dcps.sql._parse.Field`
and :class:`~dcps.sql._parse.Literal` and the field types of ``_types.py``,
and syntax errors are translated as the DDS filters' are, so both dialects
report the same way, with the 0-based position of the offending token.

Semantics (three-valued, as JMS says): a value is NULL when an ``@optional``
member is absent, an index is beyond a sequence's length, or a division is by
zero; a comparison, arithmetic, ``LIKE``, ``BETWEEN`` or ``IN`` with a NULL
operand is UNKNOWN; ``AND``/``OR``/``NOT`` follow SQL's truth tables, and a
message is selected only when the selector is TRUE. ``IS [NOT] NULL`` is
never UNKNOWN. Parts of a selector that cannot be NULL compile to plain Python
``and``/``or``/``not``, so the common case costs what a DDS filter costs.

Type rules (checked when compiled, where JMS would silently yield UNKNOWN):
arithmetic and ``BETWEEN`` on numbers; ``<``/``<=``/``>``/``>=`` on numbers
only (JMS forbids ordering strings and booleans); ``=``/``<>`` on numbers,
strings, booleans, and enums against strings naming enumerators; ``LIKE``
on strings; ``IN`` on strings, numbers and enums. An identifier that is
neither a member nor a header field is an error (JMS would read NULL).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import LarkError, UnexpectedInput, VisitError

from dcps.sql._parse import _TERMINAL_NAMES, Field, Literal, _translate
from dcps.sql._selector_grammar import SELECTOR_GRAMMAR
from dcps.sql._types import NUMERIC_KINDS, TEXT_KINDS, Slot, _slot, struct_slot
from idl._errors import FilterSyntaxError, InvalidSelectorError

__all__ = [
    "CompiledSelector",
    "MessageSelector",
    "compile_selector",
    "escaped_like_regex",
    "parse_selector",
]

#: How deeply a selector may nest.
MAX_DEPTH = 100

_TERMINALS = {
    **_TERMINAL_NAMES,
    "ADDOP": "'+' or '-'",
    "MULOP": "'*' or '/'",
    "_IS": "IS",
    "_NULL": "NULL",
    "_ESCAPE": "ESCAPE",
}


# -- the syntax tree (Field and Literal are the DDS filters' own) -----------------------


@attrs.frozen
class Arith:
    """``left op right`` with op one of ``+ - * /``."""

    op: str
    left: Expr
    right: Expr
    pos: int


@attrs.frozen
class Sign:
    """Unary ``+x`` or ``-x``."""

    op: str
    operand: Expr
    pos: int


@attrs.frozen
class Comparison:
    """``left op right`` (``= <> < <= > >=``)."""

    op: str
    left: Expr
    right: Expr
    pos: int
    op_pos: int


@attrs.frozen
class LikeEscape:
    """``operand [NOT] LIKE pattern [ESCAPE escape]``."""

    operand: Expr
    pattern: Expr
    escape: Expr | None
    negated: bool
    pos: int


@attrs.frozen
class BetweenExpr:
    """``operand [NOT] BETWEEN low AND high``."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool
    pos: int


@attrs.frozen
class InExpr:
    """``operand [NOT] IN (item, ...)``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool
    pos: int


@attrs.frozen
class IsNull:
    """``operand IS [NOT] NULL``."""

    operand: Expr
    negated: bool
    pos: int


@attrs.frozen
class NotExpr:
    """``NOT condition``."""

    operand: Expr
    pos: int


@attrs.frozen
class Junction:
    """``a AND b ...`` (``op`` "and") or ``a OR b ...`` (``op`` "or")."""

    op: str
    operands: tuple[Expr, ...]
    pos: int


Expr = (
    Field | Literal | Arith | Sign | Comparison | LikeEscape | BetweenExpr | InExpr | IsNull
) | (NotExpr | Junction)


class _Error(Exception):
    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _pos(token: Token) -> int:
    return token.start_pos or 0


def _strip_suffix(text: str) -> str:
    return text[:-1] if text[-1:] in "lLfFdD" and not text.lower().startswith("0x") else text


@v_args(inline=True)
class _ToAst(Transformer[Token, Any]):
    def selector(self, expr: Expr) -> Expr:
        return expr

    def or_expr(self, *operands: Expr) -> Junction:
        return Junction("or", operands, operands[0].pos)

    def and_expr(self, *operands: Expr) -> Junction:
        return Junction("and", operands, operands[0].pos)

    def not_expr(self, token: Token, operand: Expr) -> NotExpr:
        return NotExpr(operand, _pos(token))

    def comparison(self, left: Expr, op: Token, right: Expr) -> Comparison:
        return Comparison(op.value, left, right, left.pos, _pos(op))

    def like(self, operand: Expr, *rest: Any) -> LikeEscape:
        negated = isinstance(rest[0], Token) and rest[0].type == "NOT"
        rest = rest[1:] if negated else rest
        # rest: LIKE token, pattern, escape (None when absent: maybe_placeholders)
        pattern = rest[1]
        escape = rest[2] if len(rest) > 2 else None
        return LikeEscape(operand, pattern, escape, negated, operand.pos)

    def between(self, *args: Any) -> BetweenExpr:
        if len(args) == 4:
            operand, _not, low, high = args
        else:
            operand, low, high = args
            _not = None
        return BetweenExpr(operand, low, high, _not is not None, operand.pos)

    def in_list(self, operand: Expr, *rest: Any) -> InExpr:
        negated = bool(rest) and isinstance(rest[0], Token) and rest[0].type == "NOT"
        items = rest[1:] if negated else rest
        return InExpr(operand, tuple(items), negated, operand.pos)

    def is_null(self, operand: Expr, *rest: Any) -> IsNull:
        return IsNull(
            operand, any(isinstance(t, Token) and t.type == "NOT" for t in rest), operand.pos
        )

    def arith(self, left: Expr, op: Token, right: Expr) -> Arith:
        return Arith(op.value, left, right, left.pos)

    def sign(self, op: Token, operand: Expr) -> Expr:
        if isinstance(operand, Literal) and operand.kind in ("int", "float"):
            value = -operand.value if op.value == "-" else operand.value
            return Literal(operand.kind, value, _pos(op), op.value + operand.text)
        return Sign(op.value, operand, _pos(op))

    def field(self, *tokens: Token) -> Field:
        parts: list[str | int] = []
        for token in tokens:
            if token.type == "INTEGER":
                if not token.value.isdigit():
                    raise _Error(f"an index is a plain integer, not {token.value}", _pos(token))
                parts.append(int(token.value))
            else:
                parts.append(token.value)
        return Field(tuple(parts), _pos(tokens[0]))

    def integer(self, token: Token) -> Literal:
        return Literal("int", int(_strip_suffix(token.value), 10), _pos(token), token.value)

    def hex(self, token: Token) -> Literal:
        return Literal("int", int(token.value.rstrip("lL"), 16), _pos(token), token.value)

    def float(self, token: Token) -> Literal:
        return Literal("float", float(_strip_suffix(token.value)), _pos(token), token.value)

    def string(self, token: Token) -> Literal:
        return Literal("string", token.value[1:-1].replace("''", "'"), _pos(token), token.value)

    def true(self, token: Token) -> Literal:
        return Literal("bool", True, _pos(token), token.value)

    def false(self, token: Token) -> Literal:
        return Literal("bool", False, _pos(token), token.value)


@functools.cache
def _parser() -> Lark:
    return Lark(
        SELECTOR_GRAMMAR,
        parser="lalr",
        start="selector",
        maybe_placeholders=True,
        lexer="basic",
    )


def _invalid(message: str, text: str, pos: int) -> InvalidSelectorError:
    return InvalidSelectorError(message, expression=text, position=pos)


def parse_selector(text: str) -> Expr:
    """Parse a selector into its syntax tree; raises :class:`~dcps.InvalidSelectorError`."""
    if not isinstance(text, str):
        raise _invalid(f"a selector must be a str, not {type(text).__name__}", repr(text), 0)
    try:
        tree: Tree[Token] = _parser().parse(text)
        result: Expr = _ToAst().transform(tree)
        return result
    except UnexpectedInput as exc:
        plain = _translate(exc, text)
        message = str(plain).split(" at position", 1)[0]
        message = message.replace("ADDOP", _TERMINALS["ADDOP"]).replace(
            "MULOP", _TERMINALS["MULOP"]
        )
        if text[plain.position : plain.position + 2] == "!=":
            message = "'!=' is not JMS selector syntax: write '<>'"
        raise _invalid(message, text, plain.position) from None
    except VisitError as exc:
        inner = exc.orig_exc
        if isinstance(inner, _Error):
            raise _invalid(inner.message, text, inner.pos) from None
        raise _invalid(f"invalid selector ({inner})", text, 0) from None
    except RecursionError:
        raise _invalid("selector nests too deeply", text, 0) from None
    except LarkError as exc:
        raise _invalid(f"syntax error ({exc})", text, 0) from None


# -- helpers the compiled code calls when a value may be NULL ------------------------


def _and3(*values: bool | None) -> bool | None:
    if False in values:
        return False
    return None if None in values else True


def _or3(*values: bool | None) -> bool | None:
    if True in values:
        return True
    return None if None in values else False


def _not3(value: bool | None) -> bool | None:
    return None if value is None else not value


def _div(a: Any, b: Any) -> Any:
    if a is None or b is None or b == 0:
        return None
    if isinstance(a, int) and isinstance(b, int):
        q = abs(a) // abs(b)  # Java: integer division truncates toward zero
        return q if (a >= 0) == (b >= 0) else -q
    return a / b


def _arith(op: str, a: Any, b: Any) -> Any:
    if a is None or b is None:
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return a * b


def _cmp(op: str, a: Any, b: Any) -> bool | None:
    if a is None or b is None:
        return None
    return bool(_OPS[op](a, b))


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}
_PY_OPS = {"=": "==", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_RUNTIME: dict[str, Any] = {
    "_and3": _and3,
    "_or3": _or3,
    "_not3": _not3,
    "_div": _div,
    "_arith": _arith,
    "_cmp": _cmp,
}


def escaped_like_regex(pattern: str, escape: str | None) -> re.Pattern[str]:
    """The anchored regex of a LIKE pattern: ``%`` any run, ``_`` one character, and
    ``escape`` (one character, or None) making the next character literal.

    Raises ``ValueError`` when the pattern ends with the escape character.
    """
    out = []
    chars = iter(pattern)
    for char in chars:
        if escape is not None and char == escape:
            nxt = next(chars, None)
            if nxt is None:
                raise ValueError("the pattern ends with its escape character")
            out.append(re.escape(nxt))
        elif char == "%":
            out.append(".*")
        elif char == "_":
            out.append(".")
        else:
            out.append(re.escape(char))
    return re.compile("".join(out), re.DOTALL)


# -- type checking and compiling -------------------------------------------------------


@attrs.frozen
class _Code:
    """A compiled sub-expression: Python source, its kind, and whether it may be None."""

    code: str
    kind: str  # "number", "string", "bool", "enum"
    nullable: bool
    enum: Any = None  # the enum class of an enum value
    integral: bool = False  # a number known to be an int (Java integer arithmetic)


def _kind_of(slot: Slot) -> str:
    if slot.kind in NUMERIC_KINDS:
        return "number"
    if slot.kind in TEXT_KINDS:
        return "string"
    if slot.kind in ("bool", "enum"):
        return slot.kind
    return slot.kind


class _Compiler:
    def __init__(self, text: str, topic_type: type, root: str, headers: Mapping[str, Any]):
        self.text = text
        self.topic_type = topic_type
        self.root_slot = struct_slot(topic_type)
        self.root = root
        self.headers = headers
        self.namespace: dict[str, Any] = dict(_RUNTIME)

    def fail(self, message: str, pos: int) -> InvalidSelectorError:
        return _invalid(message, self.text, pos)

    def constant(self, value: Any) -> str:
        if type(value) in (int, str, bool) or (type(value) is float and math.isfinite(value)):
            return repr(value)
        name = f"_k{len(self.namespace)}"
        self.namespace[name] = value
        return name

    # -- operands ------------------------------------------------------------------

    def field(self, node: Field) -> _Code:
        first = node.parts[0]
        if len(node.parts) == 1 and isinstance(first, str) and first in self.headers:
            code, kind, nullable = self.headers[first]
            return _Code(code, kind, nullable, integral=kind == "number")
        slot = self.root_slot
        code = self.root
        nullable = False
        conditions: list[str] = []
        walked = ""
        for part in node.parts:
            if isinstance(part, int):
                if slot.kind not in ("array", "sequence") or slot.element is None:
                    raise self.fail(
                        f"field {walked!r} is {slot.describe}, not an array or sequence; "
                        "it cannot be indexed",
                        node.pos,
                    )
                if slot.kind == "array" and slot.bound is not None and part >= slot.bound:
                    raise self.fail(
                        f"index {part} is out of range for {walked!r} (an array of {slot.bound})",
                        node.pos,
                    )
                if slot.kind == "sequence":
                    conditions.append(f"len({code}) > {part}")
                    nullable = True
                code = f"{code}[{part}]"
                walked += f"[{part}]"
                slot = slot.element
                continue
            if slot.kind != "struct":
                raise self.fail(
                    f"field {walked!r} is {slot.describe}; it has no member {part!r}", node.pos
                )
            info = next((f for f in slot.fields if f.name == part), None)
            if info is None:
                owner = (
                    f"{walked!r} ({slot.python_type.__name__})"
                    if walked
                    else (slot.python_type.__name__)
                )
                known = ", ".join(sorted(self.headers))
                headers = f", nor a JMS header field ({known})" if known and not walked else ""
                raise self.fail(
                    f"unknown identifier {node.text!r}: {owner} has no member {part!r}{headers}",
                    node.pos,
                )
            code = f"{code}.{part}"
            walked = f"{walked}.{part}" if walked else part
            slot = _slot(info)
            if info.optional:
                nullable = True
                if slot.kind in ("struct", "sequence", "array"):
                    conditions.append(f"{code} is not None")
        kind = _kind_of(slot)
        if kind not in ("number", "string", "bool", "enum"):
            raise self.fail(
                f"field {node.text!r} is {slot.describe}; a selector compares only numbers, "
                "strings, booleans and enums (name one element or member)",
                node.pos,
            )
        if conditions:
            code = f"({code} if {' and '.join(conditions)} else None)"
        enum = slot.python_type if kind == "enum" else None
        integral = slot.kind in ("int", "uint", "octet")
        if enum is not None:
            code = f"({code}.name if {code} is not None else None)" if nullable else f"{code}.name"
        return _Code(code, kind, nullable, enum, integral)

    def literal(self, node: Literal) -> _Code:
        if node.kind in ("int", "float"):
            return _Code(self.constant(node.value), "number", False, integral=node.kind == "int")
        if node.kind == "string":
            return _Code(self.constant(node.value), "string", False)
        return _Code(self.constant(node.value), "bool", False)

    def value(self, node: Expr, depth: int) -> _Code:
        if depth > MAX_DEPTH:
            raise self.fail(f"selector nests deeper than {MAX_DEPTH} levels", node.pos)
        if isinstance(node, Field):
            return self.field(node)
        if isinstance(node, Literal):
            return self.literal(node)
        if isinstance(node, Sign):
            inner = self.number(node.operand, depth, f"unary {node.op!r}")
            if node.op == "+":
                return inner
            code = (
                f"(-{inner.code})"
                if not inner.nullable
                else (f"(None if {inner.code} is None else -{inner.code})")
            )
            return _Code(code, "number", inner.nullable, integral=inner.integral)
        if isinstance(node, Arith):
            a = self.number(node.left, depth, f"{node.op!r}")
            b = self.number(node.right, depth, f"{node.op!r}")
            integral = a.integral and b.integral
            if node.op == "/":
                return _Code(f"_div({a.code}, {b.code})", "number", True, integral=integral)
            if a.nullable or b.nullable:
                return _Code(
                    f"_arith({node.op!r}, {a.code}, {b.code})", "number", True, integral=integral
                )
            return _Code(f"({a.code} {node.op} {b.code})", "number", False, integral=integral)
        return self.condition(node, depth)

    def number(self, node: Expr, depth: int, what: str) -> _Code:
        code = self.value(node, depth + 1)
        if code.kind != "number":
            raise self.fail(f"{what} needs numbers, not {self.describe(code)}", node.pos)
        return code

    @staticmethod
    def describe(code: _Code) -> str:
        if code.kind == "enum":
            return f"enum {code.enum.__name__}"
        return {"number": "a number", "string": "a string", "bool": "a boolean"}[code.kind]

    # -- conditions ---------------------------------------------------------------

    def condition(self, node: Expr, depth: int) -> _Code:
        if depth > MAX_DEPTH:
            raise self.fail(f"selector nests deeper than {MAX_DEPTH} levels", node.pos)
        if isinstance(node, Junction):
            parts = [self.boolean(n, depth + 1) for n in node.operands]
            if any(p.nullable for p in parts):
                helper = "_and3" if node.op == "and" else "_or3"
                return _Code(f"{helper}({', '.join(p.code for p in parts)})", "bool", True)
            return _Code("(" + f" {node.op} ".join(p.code for p in parts) + ")", "bool", False)
        if isinstance(node, NotExpr):
            inner = self.boolean(node.operand, depth + 1)
            if inner.nullable:
                return _Code(f"_not3({inner.code})", "bool", True)
            return _Code(f"(not {inner.code})", "bool", False)
        if isinstance(node, Comparison):
            return self.comparison(node, depth)
        if isinstance(node, LikeEscape):
            return self.like(node, depth)
        if isinstance(node, BetweenExpr):
            x = self.number(node.operand, depth, "BETWEEN")
            lo = self.number(node.low, depth, "BETWEEN")
            hi = self.number(node.high, depth, "BETWEEN")
            if x.nullable or lo.nullable or hi.nullable:
                test = f"_and3(_cmp('<=', {lo.code}, {x.code}), _cmp('<=', {x.code}, {hi.code}))"
                code = f"_not3({test})" if node.negated else test
                return _Code(code, "bool", True)
            test = f"({lo.code} <= {x.code} <= {hi.code})"
            return _Code(f"(not {test})" if node.negated else test, "bool", False)
        if isinstance(node, InExpr):
            return self.in_list(node, depth)
        if isinstance(node, IsNull):
            inner = self.value(node.operand, depth + 1)
            if not inner.nullable:
                return _Code("True" if node.negated else "False", "bool", False)
            op = "is not" if node.negated else "is"
            return _Code(f"({inner.code} {op} None)", "bool", False)
        raise self.fail("not a condition", node.pos)  # pragma: no cover - grammar closed

    def boolean(self, node: Expr, depth: int) -> _Code:
        code = self.value(node, depth)
        if code.kind != "bool":
            raise self.fail(
                f"a condition is needed here, not {self.describe(code)} "
                "(compare it with something)",
                node.pos,
            )
        return code

    def enum_constant(self, enum: Any, node: Expr, code: _Code) -> _Code:
        """A string literal compared with an enum field must name one of its enumerators."""
        if isinstance(node, Literal) and node.kind == "string":
            if node.value not in enum.__members__:
                raise self.fail(
                    f"{node.text} is not an enumerator of {enum.__name__} "
                    f"({', '.join(enum.__members__)})",
                    node.pos,
                )
            return _Code(code.code, "enum", False, enum)
        return code

    def comparison(self, node: Comparison, depth: int) -> _Code:
        a = self.value(node.left, depth + 1)
        b = self.value(node.right, depth + 1)
        if a.kind == "enum":
            b = self.enum_constant(a.enum, node.right, b)
        if b.kind == "enum":
            a = self.enum_constant(b.enum, node.left, a)
        if a.kind != b.kind or (a.kind == "enum" and a.enum is not b.enum):
            raise self.fail(
                f"cannot compare {self.describe(a)} with {self.describe(b)}", node.op_pos
            )
        if node.op not in ("=", "<>") and a.kind != "number":
            raise self.fail(
                f"{node.op!r} orders numbers only; {self.describe(a)} takes = and <> (a JMS rule)",
                node.op_pos,
            )
        if a.nullable or b.nullable:
            return _Code(f"_cmp({node.op!r}, {a.code}, {b.code})", "bool", True)
        return _Code(f"({a.code} {_PY_OPS[node.op]} {b.code})", "bool", False)

    def like(self, node: LikeEscape, depth: int) -> _Code:
        subject = self.value(node.operand, depth + 1)
        if subject.kind != "string":
            raise self.fail(f"LIKE needs a string, not {self.describe(subject)}", node.pos)
        pattern = node.pattern
        if not (isinstance(pattern, Literal) and pattern.kind == "string"):
            raise self.fail("a LIKE pattern is a string literal", pattern.pos)
        escape: str | None = None
        if node.escape is not None:
            esc = node.escape
            if not (isinstance(esc, Literal) and esc.kind == "string" and len(esc.value) == 1):
                raise self.fail("ESCAPE takes a string literal of one character", esc.pos)
            escape = esc.value
        try:
            regex = escaped_like_regex(pattern.value, escape)
        except ValueError as exc:
            raise self.fail(f"LIKE pattern {pattern.text}: {exc}", pattern.pos) from None
        matcher = self.constant(regex.fullmatch)
        if subject.nullable:
            test = f"(None if {subject.code} is None else {matcher}({subject.code}) is not None)"
            return _Code(f"_not3({test})" if node.negated else test, "bool", True)
        test = f"({matcher}({subject.code}) is not None)"
        return _Code(f"(not {test})" if node.negated else test, "bool", False)

    def in_list(self, node: InExpr, depth: int) -> _Code:
        subject = self.value(node.operand, depth + 1)
        if subject.kind == "bool":
            raise self.fail("IN takes strings, numbers or enums, not a boolean", node.pos)
        values = []
        for item in node.items:
            if not isinstance(item, Literal):
                raise self.fail("IN lists literals", item.pos)
            lit = self.literal(item)
            if subject.kind == "enum":
                lit = self.enum_constant(subject.enum, item, lit)
            if lit.kind != subject.kind:
                raise self.fail(
                    f"cannot test {self.describe(subject)} IN a list with {item.text}", item.pos
                )
            values.append(item.value)
        container = self.constant(frozenset(values))
        op = "not in" if node.negated else "in"
        if subject.nullable:
            return _Code(
                f"(None if {subject.code} is None else {subject.code} {op} {container})",
                "bool",
                True,
            )
        return _Code(f"({subject.code} {op} {container})", "bool", False)


@attrs.frozen
class CompiledSelector:
    """A checked, compiled selector: ``match(x)`` is True only when the selector is TRUE."""

    expression: str
    topic_type: type
    match: Callable[[Any], bool]
    match_many: Callable[[Any], list[bool]]
    source: str


def compile_selector(
    expression: str,
    topic_type: type,
    *,
    root: str = "s",
    headers: Mapping[str, tuple[str, str, bool]] | None = None,
) -> CompiledSelector:
    """Parse, check and compile ``expression`` for samples of ``topic_type`` (cached).

    The compiled function takes ``s``; the sample's members are read at
    ``root`` (``"s.body"`` when the sample is wrapped). ``headers`` maps extra
    identifiers to ``(code, kind, nullable)`` (kind ``"number"``, ``"string"``
    or ``"bool"``), e.g. the JMS header fields of a message.
    """
    items = tuple(sorted((headers or {}).items()))
    return _compile_cached(expression, topic_type, root, items)


@functools.lru_cache(maxsize=512)
def _compile_cached(
    expression: str, topic_type: type, root: str, headers: tuple[tuple[str, Any], ...]
) -> CompiledSelector:
    tree = parse_selector(expression)
    compiler = _Compiler(expression, topic_type, root, dict(headers))
    try:
        body = compiler.boolean(tree, 0)
    except RecursionError:
        raise _invalid("selector nests too deeply", expression, 0) from None
    except FilterSyntaxError as exc:
        if isinstance(exc, InvalidSelectorError):
            raise
        raise _invalid(str(exc).split(" at position", 1)[0], expression, exc.position) from None
    test = f"{body.code} is True" if body.nullable else body.code
    source = "\n".join(
        [
            "def match(s):",
            f"    return {test}",
            "def match_many(samples):",
            f"    return [{test} for s in samples]",
        ]
    )
    namespace = dict(compiler.namespace)
    try:
        exec(compile(source, f"<selector {expression[:60]!r}>", "exec"), namespace)
    except (SyntaxError, RecursionError, MemoryError):
        raise _invalid("selector nests too deeply", expression, 0) from None
    return CompiledSelector(
        expression, topic_type, namespace["match"], namespace["match_many"], source
    )


class MessageSelector:
    """A JMS message selector compiled for one sample type.

    ``MessageSelector("price > 10 AND symbol LIKE 'A%'", Quote)`` parses the
    selector (JMS 2.0 grammar: comparisons, ``AND``/``OR``/``NOT``, ``+ - * /``,
    ``[NOT] BETWEEN``, ``[NOT] IN``, ``[NOT] LIKE ... [ESCAPE 'c']``,
    ``IS [NOT] NULL``), checks it against the type's fields and compiles it;
    :meth:`matches` is True when it is TRUE for a sample (not FALSE, not
    UNKNOWN). Every problem raises :class:`dcps.InvalidSelectorError` with the
    0-based ``position`` of the offending token. The module docstring of
    ``dcps.sql._selector`` gives the typing and NULL rules.

    .. versionadded:: 0.3
    """

    def __init__(self, expression: str, topic_type: type) -> None:
        self._compiled = compile_selector(expression, topic_type)

    @property
    def expression(self) -> str:
        """The selector text."""
        return self._compiled.expression

    @property
    def topic_type(self) -> type:
        """The sample type it was checked against."""
        return self._compiled.topic_type

    def matches(self, sample: Any) -> bool:
        """Whether ``sample`` is selected (the selector is TRUE for it)."""
        return self._compiled.match(sample)

    __call__ = matches

    def matches_many(self, samples: Any) -> list[bool]:
        """``[self.matches(s) for s in samples]`` in one loop."""
        return self._compiled.match_many(samples)

    def __repr__(self) -> str:
        return f"MessageSelector({self.expression!r}, {self.topic_type.__name__})"
