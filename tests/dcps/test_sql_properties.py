"""Property tests: filters agree with a plain evaluation; bad text raises only FilterSyntaxError."""

import enum
import operator
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcps import FilterSyntaxError
from dcps.sql._filter import ContentFilter, QueryExpression
from tests.support.strategies import FilterRecord, filter_cases, filter_records, mutated_text

_OPS = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


class _MissingError(Exception):
    """A path reaches a sequence element that the sample does not have."""


def _get(sample: Any, path: str) -> Any:
    value = sample
    for part in path.replace("[", ".[").split("."):
        if part.startswith("["):
            index = int(part[1:-1])
            if index >= len(value):
                raise _MissingError(path)
            value = value[index]
        else:
            value = getattr(value, part)
    return value


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _operand(sample: Any, operand: tuple[Any, ...]) -> Any:
    if operand[0] == "field":
        return _plain(_get(sample, operand[1]))
    return _plain(operand[2])


def _like(text: str, pattern: str) -> bool:
    """SQL LIKE by dynamic programming (independent of the regex implementation)."""
    n, m = len(text), len(pattern)
    # reach[j]: pattern[:j] matches text[:i]
    reach = [False] * (m + 1)
    reach[0] = True
    for j in range(1, m + 1):
        reach[j] = reach[j - 1] and pattern[j - 1] == "%"
    for i in range(1, n + 1):
        new = [False] * (m + 1)
        for j in range(1, m + 1):
            p = pattern[j - 1]
            if p == "%":
                new[j] = new[j - 1] or reach[j]
            elif p == "_" or p == text[i - 1]:
                new[j] = reach[j - 1]
        reach = new
    return reach[m]


def evaluate(node: tuple[Any, ...], sample: Any) -> bool:
    """The meaning of an expression tree, straight from the documented semantics."""
    tag = node[0]
    if tag == "not":
        return not evaluate(node[1], sample)
    if tag == "and":
        return all(evaluate(child, sample) for child in node[1])
    if tag == "or":
        return any(evaluate(child, sample) for child in node[1])
    try:
        if tag == "cmp":
            return bool(_OPS[node[1]](_operand(sample, node[2]), _operand(sample, node[3])))
        if tag == "like":
            return _like(_operand(sample, node[1]), node[2]) != node[3]
        if tag == "between":
            value, low, high = (_operand(sample, node[i]) for i in (1, 2, 3))
            return (low <= value <= high) != node[4]
        if tag == "in":
            value = _operand(sample, node[1])
            items = [_operand(sample, item) for item in node[2]]
            found = any(value is item or value == item for item in items)
            return found != node[3]
    except _MissingError:
        return False
    raise AssertionError(tag)


class TestAgainstReference:
    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(case=filter_cases(), samples=st.lists(filter_records(), min_size=1, max_size=5))
    def test_compiled_filter_matches_plain_evaluation(
        self, case: tuple[Any, str, tuple[str, ...]], samples: list[FilterRecord]
    ) -> None:
        """For random expressions and samples, matches() equals the reference evaluation."""
        tree, text, params = case
        content_filter = ContentFilter(text, FilterRecord, params)
        expected = [evaluate(tree, s) for s in samples]
        assert [content_filter.matches(s) for s in samples] == expected
        assert content_filter.matches_many(samples) == expected
        decoded = [FilterRecord.deserialize(s.serialize()) for s in samples]
        assert content_filter.matches_many(decoded) == [evaluate(tree, s) for s in decoded]

    @settings(max_examples=50, deadline=None)
    @given(case=filter_cases(), sample=filter_records())
    def test_query_with_same_condition_agrees(
        self, case: tuple[Any, str, tuple[str, ...]], sample: FilterRecord
    ) -> None:
        """A query expression with an ORDER BY evaluates its condition like the filter."""
        tree, text, params = case
        query = QueryExpression(f"{text} ORDER BY i, color, seq[1]", FilterRecord, params)
        assert query.matches(sample) == evaluate(tree, sample)
        assert query.order([sample]) == [sample]


class TestFuzz:
    @settings(max_examples=250, deadline=None)
    @given(
        text=mutated_text(),
        params=st.lists(
            st.sampled_from(["1", "'a'", "RED", "TRUE", "x", "", "'", "%0"]), max_size=3
        ),
        sample=filter_records(),
    )
    def test_only_filter_syntax_error_escapes(
        self, text: str, params: list[str], sample: FilterRecord
    ) -> None:
        """Any text either compiles to a filter giving a bool, or raises FilterSyntaxError."""
        for cls in (ContentFilter, QueryExpression):
            try:
                compiled = cls(text, FilterRecord, params)
            except FilterSyntaxError as exc:
                position = exc.position
            else:
                assert compiled.matches(sample) in (True, False)
                continue
            assert 0 <= position <= len(text)
