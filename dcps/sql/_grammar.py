"""The grammar of filter and query expressions (DDS 1.4 Annex B), for lark (LALR).

Kept as a Python string rather than a ``.lark`` file so it ships with the
package without package-data configuration.

Annex B, with these choices:

* Keywords (``AND OR NOT BETWEEN LIKE IN TRUE FALSE ORDER BY``) are
  case-insensitive and reserved: they cannot name fields.
* A comparison, ``LIKE``, ``BETWEEN`` or ``IN`` takes any operands (field,
  literal, ``%n`` parameter); the type checker requires at least one field
  among them, which gives the type the others are converted to.
* ``IN (a, b, ...)`` and ``NOT IN`` are an extension to Annex B.
* Strings are single-quoted; a quote inside is written twice (``'it''s'``);
  unlike Annex B they may span lines.
* A bare identifier is a field path or, when compared with an enum field and
  no such field exists, an enumerator; ``Enum::LITERAL`` is always an
  enumerator.
* ``field[n]`` indexes an array or sequence element (Annex B FIELDNAME).
* A query adds an optional ``ORDER BY field[, field]`` clause, and its
  condition may be empty.
"""

from __future__ import annotations

GRAMMAR = r"""
filter: condition
query: [condition] [order_by]
literal_only: literal | field

order_by: _ORDER _BY field ("," field)*

?condition: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: NOT not_expr -> not_expr
         | predicate
?predicate: "(" or_expr ")"
          | operand RELOP operand              -> comparison
          | operand NOT? LIKE operand          -> like
          | operand NOT? _BETWEEN operand _AND operand -> between
          | operand NOT? _IN "(" operand ("," operand)* ")" -> in_list

?operand: field
        | literal
        | PARAM -> param

field: NAME (_DOT NAME | "[" INTEGER "]")*

?literal: INTEGER -> integer
        | HEX -> hex
        | FLOAT -> float
        | STRING -> string
        | TRUE -> true
        | FALSE -> false
        | SCOPED_NAME -> scoped

RELOP: "<>" | "!=" | "<=" | ">=" | "=" | "<" | ">"
LIKE: "LIKE"i
NOT: "NOT"i
TRUE: "TRUE"i
FALSE: "FALSE"i
_AND: "AND"i
_OR: "OR"i
_BETWEEN: "BETWEEN"i
_IN: "IN"i
_ORDER: "ORDER"i
_BY: "BY"i
_DOT: "."

PARAM: /%[0-9]+/
SCOPED_NAME.2: /[A-Za-z_][A-Za-z0-9_]*(::[A-Za-z_][A-Za-z0-9_]*)+/
NAME: /[A-Za-z_][A-Za-z0-9_]*/
HEX.2: /[+-]?0[xX][0-9a-fA-F]+/
FLOAT.1: /[+-]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?[0-9]+[eE][+-]?[0-9]+/
INTEGER: /[+-]?[0-9]+/
STRING: /'([^']|'')*'/

%ignore /[ \t\r\n]+/
"""
