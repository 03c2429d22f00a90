"""Hypothesis strategies shared by the test suite.

Filter expressions: ``filter_records()`` builds random samples of
:class:`FilterRecord` (ints of several widths, floats, strings, a char, a bool,
an enum, a nested struct and a sequence), and ``filter_cases()`` builds random
expression trees over its fields, rendered to Annex B text with their ``%n``
parameters. The trees are plain tuples so a test can evaluate them its own way:

* ``("cmp", op, left, right)`` with op one of ``= <> < <= > >=``
* ``("like", field, pattern, negated)``
* ``("between", field, low, high, negated)``
* ``("in", field, (item, ...), negated)``
* ``("not", node)``, ``("and", (node, ...))``, ``("or", (node, ...))``

and operands ``("field", path)`` or ``("value", kind, python_value)`` where
kind is ``num``, ``text``, ``bool`` or ``enum`` (the value of an enum operand is
the enum member).
"""

import math
from typing import Any

from hypothesis import strategies as st

import idl

__all__ = [
    "FilterColor",
    "FilterPoint",
    "FilterRecord",
    "filter_cases",
    "filter_records",
    "mutated_text",
    "render",
]


class FilterColor(idl.Enum, typename="dcpstest::FilterColor"):
    """An enum whose values are not its positions."""

    RED = 0
    GREEN = 3
    BLUE = 7


class FilterPoint(idl.Struct, typename="dcpstest::FilterPoint"):
    """A nested struct."""

    x: idl.int32
    y: float
    label: str


class FilterRecord(idl.Struct, typename="dcpstest::FilterRecord"):
    """A topic type with one field of each comparable kind (``seq`` is numpy on read)."""

    i: idl.key[idl.int32]
    u: idl.uint16
    small: idl.int8
    f: idl.float64
    name: idl.bounded_str[16]
    ch: idl.char
    flag: bool
    color: FilterColor
    pos: FilterPoint
    seq: idl.sequence[idl.int64, 4]


NUMERIC_FIELDS = ("i", "u", "small", "f", "pos.x", "pos.y", "seq[0]", "seq[2]")
TEXT_FIELDS = ("name", "ch", "pos.label")
KINDS = {
    **dict.fromkeys(NUMERIC_FIELDS, "num"),
    **dict.fromkeys(TEXT_FIELDS, "text"),
    "flag": "bool",
    "color": "enum",
}

# Characters that matter to the lexer, LIKE patterns and string quoting.
_TEXT_ALPHABET = "ab_%' Z\n"
_texts = st.text(alphabet=_TEXT_ALPHABET, max_size=5)
_chars = st.sampled_from("ab_%'Z")
_ints = st.one_of(
    st.integers(-3, 3),
    st.integers(-(2**40), 2**40),
)
_finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@st.composite
def filter_records(draw: st.DrawFn) -> FilterRecord:
    """A random :class:`FilterRecord`, with values near the literals the cases use."""
    return FilterRecord(
        i=draw(st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 3)),
        u=draw(st.integers(0, 2**16 - 1) | st.integers(0, 3)),
        small=draw(st.integers(-128, 127) | st.integers(-3, 3)),
        f=draw(st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, 1.5, -2.0])),
        name=draw(_texts),
        ch=draw(_chars),
        flag=draw(st.booleans()),
        color=draw(st.sampled_from(FilterColor)),
        pos=FilterPoint(
            x=draw(st.integers(-3, 3)),
            y=draw(_finite | st.integers(-3, 3).map(float)),
            label=draw(_texts),
        ),
        seq=draw(st.lists(st.integers(-3, 3), max_size=4)),
    )


def _value(kind: str) -> st.SearchStrategy[tuple[str, str, Any]]:
    if kind == "num":
        values: st.SearchStrategy[Any] = st.one_of(
            _ints, _finite, st.sampled_from([0.0, 1.5, -2.0])
        )
    elif kind == "text":
        values = _texts | _chars
    elif kind == "bool":
        values = st.booleans()
    else:
        values = st.sampled_from(FilterColor)
    return values.map(lambda v: ("value", kind, v))


def _operand(kind: str) -> st.SearchStrategy[tuple[Any, ...]]:
    fields = [f for f, k in KINDS.items() if k == kind]
    return st.one_of(_value(kind), st.sampled_from(fields).map(lambda f: ("field", f)))


@st.composite
def _predicate(draw: st.DrawFn) -> tuple[Any, ...]:
    field = draw(st.sampled_from(sorted(KINDS)))
    kind = KINDS[field]
    shape = draw(st.sampled_from(["cmp", "cmp_swapped", "between", "in", "like"]))
    if shape == "like" and kind == "text":
        pattern = draw(st.text(alphabet="ab%_'Z", max_size=5))
        return ("like", ("field", field), pattern, draw(st.booleans()))
    if shape == "between" and kind != "bool":
        return (
            "between",
            ("field", field),
            draw(_operand(kind)),
            draw(_operand(kind)),
            draw(st.booleans()),
        )
    if shape == "in":
        items = draw(st.lists(_operand(kind), min_size=1, max_size=3))
        return ("in", ("field", field), tuple(items), draw(st.booleans()))
    ops = ["=", "<>"] if kind == "bool" else ["=", "<>", "<", "<=", ">", ">="]
    op = draw(st.sampled_from(ops))
    other = draw(_operand(kind))
    if shape == "cmp_swapped":
        return ("cmp", op, other, ("field", field))
    return ("cmp", op, ("field", field), other)


def _trees() -> st.SearchStrategy[tuple[Any, ...]]:
    return st.recursive(
        _predicate(),
        lambda children: st.one_of(
            children.map(lambda c: ("not", c)),
            st.lists(children, min_size=2, max_size=3).map(lambda cs: ("and", tuple(cs))),
            st.lists(children, min_size=2, max_size=3).map(lambda cs: ("or", tuple(cs))),
        ),
        max_leaves=6,
    )


def _keyword(draw: st.DrawFn, word: str) -> str:
    return draw(st.sampled_from([word, word.lower(), word.capitalize()]))


def _render_value(draw: st.DrawFn, kind: str, value: Any) -> str:
    if kind == "num":
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(value)
        if isinstance(value, int):
            if draw(st.booleans()):
                return ("-" if value < 0 else "") + hex(abs(value))
            return str(value)
        if not math.isfinite(value):
            raise ValueError(value)
        return repr(value)
    if kind == "text":
        return "'" + value.replace("'", "''") + "'"
    if kind == "bool":
        return _keyword(draw, "TRUE" if value else "FALSE")
    style = draw(st.sampled_from(["bare", "scoped", "number"]))
    if style == "scoped":
        return f"FilterColor::{value.name}"
    if style == "number":
        return str(value.value)
    return str(value.name)


def render(draw: st.DrawFn, node: tuple[Any, ...], params: list[str]) -> str:
    """Annex B text for ``node``; some values become ``%n`` parameters appended to ``params``."""

    def operand(op: tuple[Any, ...]) -> str:
        if op[0] == "field":
            return str(op[1])
        text = _render_value(draw, op[1], op[2])
        if draw(st.integers(0, 3)) == 0 and len(params) < 100:
            params.append(text)
            return f"%{len(params) - 1}"
        return text

    tag = node[0]
    if tag == "cmp":
        op = node[1]
        if op == "<>":
            op = draw(st.sampled_from(["<>", "!="]))
        return f"{operand(node[2])} {op} {operand(node[3])}"
    if tag == "like":
        pattern = "'" + node[2].replace("'", "''") + "'"
        if draw(st.booleans()) and len(params) < 100:
            params.append(pattern)
            pattern = f"%{len(params) - 1}"
        neg = _keyword(draw, "NOT") + " " if node[3] else ""
        return f"{operand(node[1])} {neg}{_keyword(draw, 'LIKE')} {pattern}"
    if tag == "between":
        neg = _keyword(draw, "NOT") + " " if node[4] else ""
        return (
            f"{operand(node[1])} {neg}{_keyword(draw, 'BETWEEN')} {operand(node[2])} "
            f"{_keyword(draw, 'AND')} {operand(node[3])}"
        )
    if tag == "in":
        neg = _keyword(draw, "NOT") + " " if node[3] else ""
        items = ", ".join(operand(i) for i in node[2])
        return f"{operand(node[1])} {neg}{_keyword(draw, 'IN')} ({items})"
    if tag == "not":
        return f"{_keyword(draw, 'NOT')} ({render(draw, node[1], params)})"
    joiner = f" {_keyword(draw, tag.upper())} "
    return joiner.join(f"({render(draw, child, params)})" for child in node[1])


@st.composite
def filter_cases(draw: st.DrawFn) -> tuple[tuple[Any, ...], str, tuple[str, ...]]:
    """A random expression tree, its text and its parameters."""
    tree = draw(_trees())
    params: list[str] = []
    text = render(draw, tree, params)
    return tree, text, tuple(params)


_FUZZ_WORDS = [
    " AND ",
    " OR ",
    " NOT ",
    " LIKE ",
    " BETWEEN ",
    " IN ",
    " ORDER BY ",
    "TRUE",
    "FALSE",
    "i",
    "name",
    "pos.x",
    "seq[1]",
    "color",
    "RED",
    "FilterColor::BLUE",
    "::",
    "%0",
    "%1",
    "%99",
    "%100",
    "'a'",
    "'",
    "''",
    "(",
    ")",
    ",",
    ".",
    "[",
    "]",
    "=",
    "<>",
    "!=",
    "<",
    "<=",
    ">",
    ">=",
    "0x1F",
    "-3",
    "1.5e3",
    ".5",
    " ",
    "\n",
    "#",
    "\\",
    "\x00",
    "é",
]


@st.composite
def mutated_text(draw: st.DrawFn) -> str:
    """Text that is often almost an expression: fragments and mutations of valid ones."""
    choice = draw(st.integers(0, 2))
    if choice == 0:
        return "".join(draw(st.lists(st.sampled_from(_FUZZ_WORDS), max_size=12)))
    if choice == 1:
        return draw(st.text(max_size=30))
    _, text, _ = draw(filter_cases())
    for _ in range(draw(st.integers(1, 3))):
        if not text:
            break
        at = draw(st.integers(0, len(text) - 1))
        action = draw(st.integers(0, 2))
        if action == 0:
            text = text[:at] + text[at + 1 :]
        elif action == 1:
            text = text[:at] + draw(st.sampled_from(_FUZZ_WORDS)) + text[at:]
        else:
            text = text[:at] + draw(st.characters()) + text[at + 1 :]
    return text
