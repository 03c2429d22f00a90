"""Parsing filter and query expressions into a small syntax tree.

The tree is untyped: a bare identifier is a :class:`Field` even if it will turn
out to be an enumerator; the type checker (``_sql_compile``) decides. Every
node carries ``pos``, the 0-based offset of the token it starts with, so errors
can point at it. Lark's exceptions never leave this module: they become
:class:`FilterSyntaxError`.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
from lark import Lark, Token, Transformer, Tree, v_args
from lark.exceptions import (
    LarkError,
    UnexpectedCharacters,
    UnexpectedEOF,
    UnexpectedInput,
    UnexpectedToken,
    VisitError,
)

from dcps.sql._grammar import GRAMMAR
from idl._errors import FilterSyntaxError

__all__ = [
    "And",
    "Between",
    "Compare",
    "Field",
    "InList",
    "Like",
    "Literal",
    "Node",
    "Not",
    "Or",
    "Param",
    "Query",
    "parse",
    "parse_literal",
]

MAX_PARAMETERS = 100


@attrs.frozen
class Field:
    """A field path: names and (for arrays/sequences) integer indexes."""

    parts: tuple[str | int, ...]
    pos: int

    @property
    def text(self) -> str:
        """The path as written (``a.b[2].c``)."""
        out = ""
        for part in self.parts:
            if isinstance(part, int):
                out += f"[{part}]"
            else:
                out += f".{part}" if out else part
        return out


@attrs.frozen
class Literal:
    """A constant: kind is ``int``, ``float``, ``string``, ``bool`` or ``enum``.

    For ``enum`` (``Color::RED``) the value is the tuple of scoped names.
    """

    kind: str
    value: Any
    pos: int
    text: str


@attrs.frozen
class Param:
    """A ``%n`` parameter."""

    index: int
    pos: int


Operand = Field | Literal | Param


@attrs.frozen
class Compare:
    """``left op right`` with op one of ``= <> < <= > >=`` (``!=`` becomes ``<>``)."""

    op: str
    left: Operand
    right: Operand
    pos: int
    op_pos: int


@attrs.frozen
class Like:
    """``operand [NOT] LIKE pattern``."""

    operand: Operand
    pattern: Operand
    negated: bool
    pos: int
    op_pos: int


@attrs.frozen
class Between:
    """``operand [NOT] BETWEEN low AND high``."""

    operand: Operand
    low: Operand
    high: Operand
    negated: bool
    pos: int


@attrs.frozen
class InList:
    """``operand [NOT] IN (item, ...)`` (an extension to Annex B)."""

    operand: Operand
    items: tuple[Operand, ...]
    negated: bool
    pos: int


@attrs.frozen
class Not:
    """``NOT condition``."""

    operand: Node
    pos: int


@attrs.frozen
class And:
    """``a AND b AND ...``."""

    operands: tuple[Node, ...]
    pos: int


@attrs.frozen
class Or:
    """``a OR b OR ...``."""

    operands: tuple[Node, ...]
    pos: int


Node = Compare | Like | Between | InList | Not | And | Or


@attrs.frozen
class Query:
    """A parsed expression: the condition (None when empty) and ORDER BY fields."""

    condition: Node | None
    order_by: tuple[Field, ...]


class _Error(Exception):
    """Raised inside the transformer; carries a message and position."""

    def __init__(self, message: str, pos: int) -> None:
        super().__init__(message)
        self.message = message
        self.pos = pos


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'")


@v_args(inline=True)
class _ToAst(Transformer[Token, Any]):
    def filter(self, condition: Node) -> Query:
        return Query(condition, ())

    def query(self, condition: Node | None, order_by: tuple[Field, ...] | None) -> Query:
        return Query(condition, order_by or ())

    def literal_only(self, literal: Operand) -> Operand:
        return literal

    def order_by(self, *fields: Field) -> tuple[Field, ...]:
        return fields

    def or_expr(self, *operands: Node) -> Or:
        return Or(operands, operands[0].pos)

    def and_expr(self, *operands: Node) -> And:
        return And(operands, operands[0].pos)

    def not_expr(self, token: Token, operand: Node) -> Not:
        return Not(operand, token.start_pos or 0)

    def comparison(self, left: Operand, op: Token, right: Operand) -> Compare:
        text = "<>" if op.value == "!=" else op.value
        return Compare(text, left, right, left.pos, op.start_pos or 0)

    def like(self, *args: Any) -> Like:
        if len(args) == 4:
            operand, _not, like, pattern = args
        else:
            operand, like, pattern = args
            _not = None
        return Like(operand, pattern, _not is not None, operand.pos, like.start_pos or 0)

    def between(self, *args: Any) -> Between:
        if len(args) == 4:
            operand, _not, low, high = args
        else:
            operand, low, high = args
            _not = None
        return Between(operand, low, high, _not is not None, operand.pos)

    def in_list(self, operand: Operand, *rest: Any) -> InList:
        negated = bool(rest) and isinstance(rest[0], Token) and rest[0].type == "NOT"
        items = rest[1:] if negated else rest
        return InList(operand, tuple(items), negated, operand.pos)

    def field(self, *tokens: Token) -> Field:
        parts: list[str | int] = []
        for token in tokens:
            if token.type == "INTEGER":
                if not token.value.isdigit():
                    raise _Error(
                        f"an index must be a non-negative integer, not {token.value}",
                        token.start_pos or 0,
                    )
                parts.append(int(token.value))
            else:
                parts.append(token.value)
        return Field(tuple(parts), tokens[0].start_pos or 0)

    def param(self, token: Token) -> Param:
        index = int(token.value[1:])
        if index >= MAX_PARAMETERS:
            raise _Error(
                f"parameter {token.value} is out of range (%0 to %{MAX_PARAMETERS - 1})",
                token.start_pos or 0,
            )
        return Param(index, token.start_pos or 0)

    def integer(self, token: Token) -> Literal:
        return Literal("int", int(token.value, 10), token.start_pos or 0, token.value)

    def hex(self, token: Token) -> Literal:
        return Literal("int", int(token.value, 16), token.start_pos or 0, token.value)

    def float(self, token: Token) -> Literal:
        return Literal("float", float(token.value), token.start_pos or 0, token.value)

    def string(self, token: Token) -> Literal:
        return Literal("string", _unquote(token.value), token.start_pos or 0, token.value)

    def true(self, token: Token) -> Literal:
        return Literal("bool", True, token.start_pos or 0, token.value)

    def false(self, token: Token) -> Literal:
        return Literal("bool", False, token.start_pos or 0, token.value)

    def scoped(self, token: Token) -> Literal:
        names = tuple(token.value.split("::"))
        return Literal("enum", names, token.start_pos or 0, token.value)


@functools.cache
def _parser() -> Lark:
    return Lark(
        GRAMMAR,
        parser="lalr",
        start=["filter", "query", "literal_only"],
        maybe_placeholders=True,
        lexer="basic",
    )


_TERMINAL_NAMES = {
    "RELOP": "a comparison operator",
    "LIKE": "LIKE",
    "NOT": "NOT",
    "TRUE": "TRUE",
    "FALSE": "FALSE",
    "_AND": "AND",
    "_OR": "OR",
    "_BETWEEN": "BETWEEN",
    "_IN": "IN",
    "_ORDER": "ORDER BY",
    "_BY": "BY",
    "_DOT": "'.'",
    "PARAM": "a parameter",
    "SCOPED_NAME": "an enumerator",
    "NAME": "a field name",
    "HEX": "a number",
    "FLOAT": "a number",
    "INTEGER": "a number",
    "STRING": "a string",
    "LPAR": "'('",
    "RPAR": "')'",
    "COMMA": "','",
    "LSQB": "'['",
    "RSQB": "']'",
    "$END": "the end",
}


def _expected(names: Any) -> str:
    readable = sorted({_TERMINAL_NAMES.get(str(n), str(n)) for n in names or ()})
    if not readable:
        return ""
    return "; expected " + (readable[0] if len(readable) == 1 else "one of " + ", ".join(readable))


def _translate(exc: UnexpectedInput, text: str) -> FilterSyntaxError:
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else 0
        char = text[pos] if 0 <= pos < len(text) else ""
        if char == "'":
            return FilterSyntaxError("unterminated string literal", expression=text, position=pos)
        return FilterSyntaxError(
            f"unexpected character {char!r}{_expected(exc.allowed)}",
            expression=text,
            position=pos,
        )
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        if token.type == "$END":
            return FilterSyntaxError(
                f"unexpected end of expression{_expected(exc.expected)}",
                expression=text,
                position=len(text),
            )
        pos = token.start_pos if token.start_pos is not None else len(text)
        if token.type == "_ORDER" and "_ORDER" not in (exc.expected or ()):
            return FilterSyntaxError(
                "ORDER BY is only allowed in a query expression (QueryExpression), not in a filter",
                expression=text,
                position=pos,
            )
        return FilterSyntaxError(
            f"unexpected {token.value!r}{_expected(exc.expected)}",
            expression=text,
            position=pos,
        )
    if isinstance(exc, UnexpectedEOF):
        return FilterSyntaxError(
            f"unexpected end of expression{_expected(exc.expected)}",
            expression=text,
            position=len(text),
        )
    return FilterSyntaxError("syntax error", expression=text, position=0)


def _run(text: str, start: str) -> Any:
    if not isinstance(text, str):
        raise FilterSyntaxError(
            f"an expression must be a str, not {type(text).__name__}",
            expression=repr(text),
            position=0,
        )
    try:
        tree: Tree[Token] = _parser().parse(text, start=start)
        return _ToAst().transform(tree)
    except UnexpectedInput as exc:
        raise _translate(exc, text) from None
    except VisitError as exc:
        inner = exc.orig_exc
        if isinstance(inner, _Error):
            raise FilterSyntaxError(inner.message, expression=text, position=inner.pos) from None
        if isinstance(inner, RecursionError):
            raise FilterSyntaxError(
                "expression nests too deeply", expression=text, position=0
            ) from None
        raise FilterSyntaxError(
            f"invalid expression ({inner})", expression=text, position=0
        ) from None
    except RecursionError:
        raise FilterSyntaxError(
            "expression nests too deeply", expression=text, position=0
        ) from None
    except LarkError as exc:
        raise FilterSyntaxError(f"syntax error ({exc})", expression=text, position=0) from None


def parse(text: str, *, query: bool = False) -> Query:
    """Parse a filter (or, with ``query``, a query) expression; raises FilterSyntaxError."""
    result: Query = _run(text, "query" if query else "filter")
    return result


def parse_literal(text: str) -> Operand:
    """Parse one literal (a parameter value): number, string, TRUE/FALSE or enumerator.

    A bare identifier comes back as a one-part :class:`Field` (an enumerator name).
    """
    result: Operand = _run(text, "literal_only")
    return result
