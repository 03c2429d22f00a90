"""Content filters and query expressions (DDS 1.4 Annex B) on topic samples.

:class:`ContentFilter` is what a ContentFilteredTopic evaluates;
:class:`QueryExpression` adds ``ORDER BY`` for a QueryCondition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Self

from dcps.sql._compile import Compiled, compile_expression
from idl._errors import BadParameterError

__all__ = ["ContentFilter", "QueryExpression"]


def _parameters(parameters: Sequence[str]) -> tuple[str, ...]:
    if isinstance(parameters, str):
        raise BadParameterError(
            'parameters must be a sequence of strings (e.g. ("10", "\'text\'")), not a single str'
        )
    try:
        values = tuple(parameters)
    except TypeError:
        raise BadParameterError(
            f"parameters must be a sequence of strings, not {type(parameters).__name__}"
        ) from None
    for index, value in enumerate(values):
        if not isinstance(value, str):
            raise BadParameterError(
                f'parameter %{index} must be a str as in DDS (e.g. "10", "\'text\'", '
                f'"RED"), not {type(value).__name__} {value!r}'
            )
    return values


class ContentFilter:
    """A filter expression (DDS 1.4 Annex B) compiled for one topic type.

    ``ContentFilter("x > %0 AND name LIKE 'ab%'", Reading, parameters=("10",))``
    parses the expression, checks it against the fields of ``topic_type`` and
    compiles it to a Python function; :meth:`matches` evaluates it on a sample.

    Grammar: comparisons ``= <> != < <= > >=``, ``[NOT] LIKE`` (``%`` any run,
    ``_`` one character, whole-string match), ``[NOT] BETWEEN a AND b``,
    ``[NOT] IN (a, b, ...)`` (an extension to Annex B), ``AND``, ``OR``,
    ``NOT``, parentheses; keywords are case-insensitive. Operands are field
    paths (``pos.x``, ``items[2].id``), ``%0``..``%99`` parameters and
    literals: integers (``42``, ``-0x2A``), floats, ``'strings'`` (a quote is
    written ``''``), ``TRUE``/``FALSE`` and enumerators (``RED`` or
    ``Color::RED``; a bare name that is also a field name means the field).

    Semantics: numbers compare as Python numbers whatever their IDL width or
    signedness; strings and chars as Python strings; booleans only with
    ``=``, ``<>`` and ``IN``; enums by enumerator value. A predicate on a
    sequence element beyond the sample's length is false (an enclosing
    ``NOT`` negates it).

    Parameters are strings, as in DDS (``"10"``, ``"'text'"``, ``"RED"``),
    converted to the type of the field they are compared with when bound;
    :meth:`set_parameters` and :meth:`with_parameters` change them.

    Every problem, in the text or against the type, raises
    :class:`dcps.FilterSyntaxError` with the 0-based ``position`` of the
    offending token.
    """

    _query = False

    def __init__(self, expression: str, topic_type: type, parameters: Sequence[str] = ()) -> None:
        self._compiled: Compiled = compile_expression(expression, topic_type, query=self._query)
        self._bind(_parameters(parameters))

    def _bind(self, parameters: tuple[str, ...]) -> None:
        match, match_many = self._compiled.bind(parameters)
        # One attribute holds everything that changes with the parameters, so a
        # concurrent reader sees either the old or the new binding, never a mix.
        self._bound: tuple[tuple[str, ...], Callable[[Any], bool], Callable[[Any], list[bool]]]
        self._bound = (parameters, match, match_many)

    @property
    def expression(self) -> str:
        """The expression text."""
        return self._compiled.expression

    @property
    def topic_type(self) -> type:
        """The topic type the expression was checked against."""
        return self._compiled.topic_type

    @property
    def parameters(self) -> tuple[str, ...]:
        """The current ``%n`` parameter values, as given."""
        return self._bound[0]

    def set_parameters(self, parameters: Sequence[str]) -> None:
        """Replace the parameter values; on error the old values stay in force."""
        self._bind(_parameters(parameters))

    def with_parameters(self, parameters: Sequence[str]) -> Self:
        """A copy of this filter with other parameter values (the compiled code is shared)."""
        clone = object.__new__(type(self))
        clone._compiled = self._compiled
        clone._bind(_parameters(parameters))
        return clone

    def matches(self, sample: Any) -> bool:
        """Whether ``sample`` (an instance of the topic type) passes the filter."""
        return self._bound[1](sample)

    __call__ = matches

    def matches_many(self, samples: Iterable[Any]) -> list[bool]:
        """``[self.matches(s) for s in samples]``, evaluated in one loop."""
        return self._bound[2](samples)

    def filter(self, samples: Iterable[Any]) -> list[Any]:
        """The samples that pass, in their order."""
        match = self._bound[1]
        return [s for s in samples if match(s)]

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.expression!r}, {self.topic_type.__name__}, "
            f"parameters={self.parameters!r})"
        )


class QueryExpression(ContentFilter):
    """A query expression (DDS 1.4 Annex B) for a QueryCondition.

    The filter grammar of :class:`ContentFilter`, where the condition may be
    empty (every sample matches) and may be followed by
    ``ORDER BY field[, field ...]`` (ascending; enums by value). :meth:`order`
    sorts samples by those fields.
    """

    _query = True

    @property
    def order_by(self) -> tuple[str, ...]:
        """The ORDER BY field paths, empty if there is no ORDER BY clause."""
        return self._compiled.order_by

    def sort_key(self, sample: Any) -> tuple[Any, ...]:
        """The ORDER BY key of ``sample`` (an empty tuple without ORDER BY)."""
        key = self._compiled.sort_key
        return key(sample) if key is not None else ()

    def order(self, samples: Iterable[Any]) -> list[Any]:
        """``samples`` sorted by the ORDER BY fields (stable; as given without ORDER BY)."""
        key = self._compiled.sort_key
        if key is None:
            return list(samples)
        return sorted(samples, key=key)
