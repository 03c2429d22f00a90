"""The C preprocessor subset IDL files use, applied before the IDL grammar sees the text.

Supported: object-like macros (``#define NAME``, ``#define NAME value``,
``#undef NAME``) expanded in the IDL text (not inside comments, strings or
characters; a macro is not re-expanded inside its own value), conditional
groups (``#ifdef``/``#ifndef``/``#if``/``#elif``/``#else``/``#endif``, so
include guards work) with integer ``#if`` expressions (literals, macros,
``defined NAME``/``defined(NAME)``, ``! ~ + - * / % << >> < > <= >= == !=
& ^ | && || ( )``; an undefined name counts as 0, as in C), ``#error``,
``#warning`` (ignored), and directive lines continued with a trailing
backslash. ``#include`` and ``#pragma`` lines of active groups are passed on
to the loader unchanged, the include callback having been run at that point
so macros flow across files in order. Anything else (function-like macros,
``#line``, unknown directives) raises :class:`IdlSyntaxError` naming it.

The output has exactly the lines of the input (skipped lines and directives
become empty lines), so line numbers in later errors stay right; a column on
a line where a macro was expanded counts in the expanded text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ._errors import IdlSyntaxError

__all__ = ["preprocess"]

#: (target, quoted, line) -> None; resolves and preprocesses an included file.
IncludeHook = Callable[[str, bool, int], None]

_CODE_TOKEN = re.compile(
    r"(?P<open>/\*)|(?P<line>//.*)|(?P<str>\"(?:\\.|[^\"\\])*\"?)|(?P<chr>'(?:\\.|[^'\\])*'?)"
    r"|(?P<id>[A-Za-z_][A-Za-z0-9_]*)|(?P<num>[0-9][A-Za-z0-9_.]*)"
)
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEFINED = re.compile(r"\bdefined\s*(?:\(\s*([A-Za-z_]\w*)\s*\)|([A-Za-z_]\w*))")
_EXPR_TOKEN = re.compile(
    r"\s*(?:(?P<int>0[xX][0-9a-fA-F]+|[0-9]+)[uUlL]*|(?P<id>[A-Za-z_]\w*)"
    r"|(?P<op>&&|\|\||<<|>>|<=|>=|==|!=|[-+*/%<>&^|!~()]))"
)
_BINARY: dict[str, tuple[int, Callable[[int, int], int]]] = {
    "||": (1, lambda a, b: int(bool(a) or bool(b))),
    "&&": (2, lambda a, b: int(bool(a) and bool(b))),
    "|": (3, lambda a, b: a | b),
    "^": (4, lambda a, b: a ^ b),
    "&": (5, lambda a, b: a & b),
    "==": (6, lambda a, b: int(a == b)),
    "!=": (6, lambda a, b: int(a != b)),
    "<": (7, lambda a, b: int(a < b)),
    ">": (7, lambda a, b: int(a > b)),
    "<=": (7, lambda a, b: int(a <= b)),
    ">=": (7, lambda a, b: int(a >= b)),
    "<<": (8, lambda a, b: a << b),
    ">>": (8, lambda a, b: a >> b),
    "+": (9, lambda a, b: a + b),
    "-": (9, lambda a, b: a - b),
    "*": (10, lambda a, b: a * b),
    "/": (10, lambda a, b: _c_div(a, b)),
    "%": (10, lambda a, b: a - b * _c_div(a, b)),
}


def _c_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@dataclass
class _Group:
    """One open ``#if``... group: where it started and which branch is live."""

    line: int
    parent_active: bool
    taken: bool  # some branch of this group was active already
    seen_else: bool = False


class _Preprocessor:
    def __init__(self, file: str, macros: dict[str, str], include: IncludeHook) -> None:
        self.file = file
        self.macros = macros
        self.include = include
        self.groups: list[_Group] = []
        self.active = True
        self.in_comment = False

    def error(self, line: int, column: int, message: str) -> IdlSyntaxError:
        return IdlSyntaxError(message, file=self.file, line=line, column=column)

    # --- text -------------------------------------------------------------------
    def run(self, text: str) -> str:
        lines = text.split("\n")
        out: list[str] = []
        number = 0
        while number < len(lines):
            line = lines[number]
            number += 1
            if not self.in_comment and line.lstrip().startswith("#"):
                first = number
                while line.rstrip("\r").endswith("\\") and number < len(lines):
                    line = line.rstrip("\r")[:-1] + " " + lines[number]
                    number += 1
                column = len(line) - len(line.lstrip()) + 1
                kept = self.directive(line.lstrip()[1:], first, column)
                out.append(" " * (column - 1) + "#" + kept if kept is not None else "")
                out.extend("" for _ in range(number - first))
            elif self.active:
                out.append(self.expand_code(line))
            else:
                self.expand_code(line)  # only to follow block comments
                out.append("")
        if self.groups:
            group = self.groups[-1]
            raise self.error(group.line, 1, "#if/#ifdef/#ifndef without #endif")
        return "\n".join(out)

    def expand_code(self, line: str) -> str:
        """``line`` with macros expanded and comments blanked (so the IDL parser never
        sees half a comment), strings and characters left alone."""
        out: list[str] = []
        pos = 0
        while pos < len(line):
            if self.in_comment:
                end = line.find("*/", pos)
                if end < 0:
                    out.append(" " * (len(line) - pos))
                    break
                out.append(" " * (end + 2 - pos))
                pos = end + 2
                self.in_comment = False
                continue
            m = _CODE_TOKEN.search(line, pos)
            if m is None:
                out.append(line[pos:])
                break
            out.append(line[pos : m.start()])
            token = m.group()
            if m.lastgroup == "open":
                self.in_comment = True
                token = "  "
            elif m.lastgroup == "line":
                token = " " * len(token)
            elif m.lastgroup == "id" and token in self.macros:
                token = self.expand_macro(token, frozenset())
            out.append(token)
            pos = m.end()
        return "".join(out)

    def expand_macro(self, name: str, seen: frozenset[str]) -> str:
        inner = seen | {name}
        return _NAME.sub(
            lambda m: (
                self.expand_macro(m.group(), inner)
                if m.group() in self.macros and m.group() not in inner
                else m.group()
            ),
            self.macros[name],
        )

    # --- directives ---------------------------------------------------------------
    def directive(self, body: str, line: int, column: int) -> str | None:
        """Handle one directive; its text (comments removed) if it goes on to the loader."""
        body = self.strip_comments(body).strip()
        word_match = _NAME.match(body)
        word = word_match.group() if word_match else ""
        rest = body[len(word) :].strip()
        if word in ("if", "ifdef", "ifndef", "elif", "else", "endif"):
            self.conditional(word, rest, line, column)
            return None
        if not self.active or not body:
            return None  # skipped group, or the null directive "#"
        if word == "define":
            self.define(rest, line, column)
        elif word == "undef":
            self.macros.pop(self.name_operand(word, rest, line, column), None)
        elif word == "include":
            m = re.fullmatch(r'"([^"]+)"|<([^>]+)>', rest)
            if m is None:
                raise self.error(line, column, f'#include needs "file" or <file>, got {rest!r}')
            self.include(m.group(1) or m.group(2), m.group(1) is not None, line)
            return body
        elif word == "pragma":
            return body
        elif word == "error":
            raise self.error(line, column, f"#error {rest}".rstrip())
        elif word != "warning":
            raise self.error(line, column, f"unsupported preprocessor directive #{word or body}")
        return None

    def strip_comments(self, body: str) -> str:
        """``body`` without comments (a block comment may go on after the line)."""
        out: list[str] = []
        pos = 0
        while pos < len(body):
            if self.in_comment:
                end = body.find("*/", pos)
                if end < 0:
                    break
                pos = end + 2
                self.in_comment = False
                out.append(" ")
                continue
            m = _CODE_TOKEN.search(body, pos)
            if m is None:
                out.append(body[pos:])
                break
            out.append(body[pos : m.start()])
            if m.lastgroup == "open":
                self.in_comment = True
            elif m.lastgroup != "line":
                out.append(m.group())
            pos = m.end()
        return "".join(out)

    def name_operand(self, word: str, rest: str, line: int, column: int) -> str:
        m = _NAME.fullmatch(rest)
        if m is None:
            raise self.error(line, column, f"#{word} needs one macro name, got {rest!r}")
        return rest

    def define(self, rest: str, line: int, column: int) -> None:
        m = _NAME.match(rest)
        if m is None:
            raise self.error(line, column, f"#define needs a macro name, got {rest!r}")
        name = m.group()
        if rest[m.end() : m.end() + 1] == "(":
            raise self.error(
                line, column, f"#define {name}(...): function-like macros are not supported"
            )
        self.macros[name] = rest[m.end() :].strip()

    def conditional(self, word: str, rest: str, line: int, column: int) -> None:
        if word in ("if", "ifdef", "ifndef"):
            parent = self.active
            value = False
            if parent:
                if word == "if":
                    value = self.evaluate(rest, line, column)
                else:
                    defined = self.name_operand(word, rest, line, column) in self.macros
                    value = defined if word == "ifdef" else not defined
            self.groups.append(_Group(line, parent, value))
            self.active = parent and value
            return
        if not self.groups:
            raise self.error(line, column, f"#{word} without #if")
        group = self.groups[-1]
        if word == "endif":
            self.groups.pop()
            self.active = group.parent_active
            return
        if group.seen_else:
            raise self.error(line, column, f"#{word} after #else")
        if word == "else":
            group.seen_else = True
            self.active = group.parent_active and not group.taken
        else:  # elif
            value = group.parent_active and not group.taken and self.evaluate(rest, line, column)
            self.active = value
        group.taken = group.taken or self.active

    # --- #if expressions --------------------------------------------------------
    def evaluate(self, text: str, line: int, column: int) -> bool:
        if not text:
            raise self.error(line, column, "#if needs an expression")

        def defined(m: re.Match[str]) -> str:
            return "1" if (m.group(1) or m.group(2)) in self.macros else "0"

        saved = self.in_comment
        expanded = self.expand_code(_DEFINED.sub(defined, text))
        self.in_comment = saved
        tokens: list[tuple[str, str]] = []
        pos = 0
        while pos < len(expanded.rstrip()):
            m = _EXPR_TOKEN.match(expanded, pos)
            if m is None:
                bad = expanded[pos:].strip()[:12]
                raise self.error(
                    line, column, f"#if {text}: {bad!r} is not supported in #if expressions"
                )
            kind = m.lastgroup or ""
            tokens.append((kind, m.group(kind)))
            pos = m.end()
        parser = _ExprParser(tokens, lambda msg: self.error(line, column, f"#if {text}: {msg}"))
        return parser.parse() != 0


class _ExprParser:
    """Precedence climbing over the tokens of one ``#if`` expression."""

    def __init__(
        self, tokens: list[tuple[str, str]], error: Callable[[str], IdlSyntaxError]
    ) -> None:
        self.tokens = tokens
        self.pos = 0
        self.error = error

    def parse(self) -> int:
        value = self.binary(1)
        if self.pos != len(self.tokens):
            raise self.error(f"unexpected {self.tokens[self.pos][1]!r}")
        return value

    def peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def binary(self, level: int) -> int:
        left = self.unary()
        while True:
            op = self.peek()
            if op is None or op not in _BINARY or _BINARY[op][0] < level:
                return left
            self.pos += 1
            right = self.binary(_BINARY[op][0] + 1)
            if op in ("/", "%") and right == 0:
                raise self.error("division by zero")
            left = _BINARY[op][1](left, right)

    def unary(self) -> int:
        if self.pos >= len(self.tokens):
            raise self.error("unexpected end of expression")
        kind, text = self.tokens[self.pos]
        self.pos += 1
        if kind == "int":
            if text[:2] in ("0x", "0X"):
                return int(text, 16)
            try:
                return int(text, 8) if text.startswith("0") else int(text)
            except ValueError:
                raise self.error(f"bad octal number {text}") from None
        if kind == "id":
            return 0  # a name that is not a macro, as in C
        if text == "(":
            value = self.binary(1)
            if self.peek() != ")":
                raise self.error("missing ')'")
            self.pos += 1
            return value
        if text in ("!", "-", "+", "~"):
            operand = self.unary()
            return {"!": int(not operand), "-": -operand, "+": operand, "~": ~operand}[text]
        raise self.error(f"unexpected {text!r}")


def preprocess(text: str, file: str, macros: dict[str, str], include: IncludeHook) -> str:
    """Apply the preprocessor to ``text`` (of ``file``); ``macros`` is read and updated.

    ``include(target, quoted, line)`` is called for every active ``#include``.
    Raises :class:`IdlSyntaxError` (file, line, column) for a malformed or
    unsupported directive, an ``#error``, or an unterminated conditional group.
    """
    return _Preprocessor(file, macros, include).run(text)
