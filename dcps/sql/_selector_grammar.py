"""The grammar of JMS message selectors (JMS 2.0, section 3.8.1.1), for lark (LALR).

Where it agrees with the DDS filter grammar (``_grammar.py``) it is written the
same way: case-insensitive reserved keywords, single-quoted strings with
``''`` for a quote, ``[NOT] LIKE``, ``[NOT] BETWEEN``, ``[NOT] IN``, field
paths. It differs (see the README's table):

* arithmetic: ``+ - * /`` and unary signs, with the usual precedence;
  numeric literals are therefore unsigned (``-5`` is a unary minus);
* ``LIKE pattern ESCAPE 'c'``, ``IS [NOT] NULL``, ``NULL`` is reserved;
* ``<>`` is the only inequality (no ``!=``), and there are no ``%n`` parameters;
* a boolean field (or ``TRUE``/``FALSE``) is a condition on its own;
* identifiers follow Java (letters, digits, ``_`` and ``$``), and may be
  extended with ``.member`` and ``[n]`` paths into the sample (an extension).

Boolean and arithmetic expressions share one rule (``expr``) because a
parenthesis may open either; the compiler checks which one each node is.
"""

from __future__ import annotations

SELECTOR_GRAMMAR = r"""
selector: expr

?expr: or_expr
?or_expr: and_expr (_OR and_expr)*
?and_expr: not_expr (_AND not_expr)*
?not_expr: NOT not_expr -> not_expr
         | predicate
?predicate: sum RELOP sum                                  -> comparison
          | sum NOT? LIKE sum (_ESCAPE sum)?               -> like
          | sum NOT? _BETWEEN sum _AND sum                 -> between
          | sum NOT? _IN "(" sum ("," sum)* ")"            -> in_list
          | sum _IS NOT? _NULL                             -> is_null
          | sum
?sum: sum ADDOP product                                    -> arith
    | product
?product: product MULOP unary                              -> arith
        | unary
?unary: ADDOP unary                                        -> sign
      | atom
?atom: field
     | INTEGER -> integer
     | HEX -> hex
     | FLOAT -> float
     | STRING -> string
     | TRUE -> true
     | FALSE -> false
     | "(" expr ")"

field: NAME (_DOT NAME | "[" INTEGER "]")*

RELOP: "<>" | "<=" | ">=" | "=" | "<" | ">"
ADDOP: "+" | "-"
MULOP: "*" | "/"
LIKE: "LIKE"i
NOT: "NOT"i
TRUE: "TRUE"i
FALSE: "FALSE"i
_AND: "AND"i
_OR: "OR"i
_BETWEEN: "BETWEEN"i
_IN: "IN"i
_IS: "IS"i
_NULL: "NULL"i
_ESCAPE: "ESCAPE"i
_DOT: "."

NAME: /[A-Za-z_$][A-Za-z0-9_$]*/
HEX.2: /0[xX][0-9a-fA-F]+[lL]?/
FLOAT.1: /([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?/
       | /[0-9]+[eE][+-]?[0-9]+[fFdD]?|[0-9]+[fFdD]/
INTEGER: /[0-9]+[lL]?/
STRING: /'([^']|'')*'/

%ignore /[ \t\r\n\f]+/
"""
