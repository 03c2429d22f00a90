"""JMS message selectors (dcps.sql.MessageSelector): the grammar, three-valued logic, errors."""

from __future__ import annotations

from typing import Any

import pytest

import idl
from dcps import FilterSyntaxError, InvalidSelectorError
from dcps.sql import ContentFilter, MessageSelector

Color = idl.make_enum("Color", {"RED": 0, "GREEN": 1})
Q = idl.make_struct(
    "Q",
    {
        "symbol": idl.string,
        "price": idl.float64,
        "qty": idl.int32,
        "ok": bool,
        "note": idl.optional[idl.string],
        "color": Color,
        "hist": idl.sequence[idl.int32],
    },
    typename="dcps_test.jms.Q",
)


def q(**kw: Any) -> Any:
    base: dict[str, Any] = {
        "symbol": "ABC_1",
        "price": 10.5,
        "qty": 3,
        "ok": True,
        "note": None,
        "color": Color.RED,
        "hist": [1, 2],
    }
    base.update(kw)
    return Q(**base)


CASES = [
    ("price > 10", True),
    ("price <= 10", False),
    ("price * qty > 30 AND ok", True),
    ("(qty + 1) * 2 = 8", True),
    ("-qty < -2", True),
    ("7 / 2 = 3", True),
    ("-7 / 2 = -3", True),
    ("qty / 2.0 = 1.5", True),
    ("1.5e1 > qty", True),
    ("qty BETWEEN 1 AND 3", True),
    ("qty NOT BETWEEN 1 AND 3", False),
    ("symbol IN ('ABC_1', 'X')", True),
    ("symbol NOT IN ('ABC_1', 'X')", False),
    ("qty IN (1, 3)", True),
    ("symbol LIKE 'AB%'", True),
    ("symbol LIKE 'A_C%'", True),
    ("symbol LIKE 'ABC!_%' ESCAPE '!'", True),
    ("symbol LIKE 'ABCx%' ESCAPE '!'", False),
    ("symbol NOT LIKE 'X%'", True),
    ("color = 'RED'", True),
    ("color IN ('GREEN')", False),
    ("ok", True),
    ("NOT ok OR qty = 3", True),
    ("ok = FALSE", False),
    ("hist[1] = 2", True),
]


class TestGrammar:
    @pytest.mark.parametrize(("selector", "expected"), [c for c in CASES if c[1] is not None])
    def test_selector_value(self, selector: str, expected: bool) -> None:
        """Each construct of the JMS selector grammar evaluates as JMS says."""
        assert MessageSelector(selector, Q).matches(q()) is expected

    def test_keywords_are_case_insensitive_identifiers_are_not(self) -> None:
        """``and``/``between``/``like`` work in any case; ``Price`` is not ``price``."""
        assert MessageSelector("qty between 1 and 3 and symbol like 'A%'", Q).matches(q())
        with pytest.raises(InvalidSelectorError):
            MessageSelector("Price > 1", Q)


class TestThreeValuedLogic:
    @pytest.mark.parametrize(
        ("selector", "with_null", "with_value"),
        [
            ("note = 'x'", False, True),
            ("NOT note = 'x'", False, False),  # NOT UNKNOWN is UNKNOWN: not selected
            ("note <> 'x'", False, False),
            ("note = 'x' OR ok", True, True),  # UNKNOWN OR TRUE is TRUE
            ("note = 'x' AND ok", False, True),  # UNKNOWN AND TRUE is UNKNOWN
            ("NOT (note = 'x' AND NOT ok)", True, True),  # NOT (UNKNOWN AND FALSE) = TRUE
            ("note IS NULL", True, False),
            ("note IS NOT NULL", False, True),
            ("note LIKE 'x%'", False, True),
            ("note NOT LIKE 'y%'", False, True),
            ("note IN ('x')", False, True),
            ("note NOT IN ('y')", False, True),
            ("hist[5] = 1 OR hist[5] IS NULL", True, True),  # beyond the sequence: NULL
            ("qty / 0 = 1 OR qty / 0 IS NULL", True, True),  # division by zero: NULL
        ],
    )
    def test_null_is_unknown(self, selector: str, with_null: bool, with_value: bool) -> None:
        """A NULL operand makes a predicate UNKNOWN; only TRUE selects (SQL truth tables)."""
        sel = MessageSelector(selector, Q)
        assert sel.matches(q(note=None)) is with_null
        assert sel.matches(q(note="x")) is with_value


class TestInvalidSelectors:
    @pytest.mark.parametrize(
        ("selector", "position", "words"),
        [
            ("price >", 7, "unexpected end"),
            ("price != 3", 6, "write '<>'"),
            ("symbol > 'a'", 7, "orders numbers only"),
            ("foo = 1", 0, "unknown identifier 'foo'"),
            ("symbol LIKE 'a' ESCAPE 'xy'", 23, "one character"),
            ("symbol LIKE 'a!' ESCAPE '!'", 12, "ends with its escape"),
            ("price + 'a' = 1", 8, "needs numbers"),
            ("qty", 0, "a condition is needed"),
            ("color = 'BLUE'", 8, "not an enumerator"),
            ("ok = 1", 3, "cannot compare a boolean with a number"),
            ("qty = 1 AND", 11, "unexpected end"),
            ("price > %0", 8, "unexpected character"),
        ],
    )
    def test_invalid_selector_names_its_position(
        self, selector: str, position: int, words: str
    ) -> None:
        """Every invalid selector raises InvalidSelectorError at the offending token."""
        with pytest.raises(InvalidSelectorError) as info:
            MessageSelector(selector, Q)
        assert info.value.position == position
        assert words in str(info.value)
        assert isinstance(info.value, FilterSyntaxError)  # caught like a DDS filter error


class TestDialects:
    def test_where_the_dialects_agree_they_select_alike(self) -> None:
        """A selector written in the common subset selects what the DDS filter selects."""
        text = "price > 10 AND symbol LIKE 'A%' AND qty BETWEEN 1 AND 5"
        samples = [
            q(price=p, symbol=s, qty=n) for p in (5.0, 11.0) for s in ("AB", "B") for n in (0, 3)
        ]
        assert MessageSelector(text, Q).matches_many(samples) == ContentFilter(
            text, Q
        ).matches_many(samples)

    def test_dds_only_syntax_is_refused_by_jms_and_the_reverse(self) -> None:
        """``%0`` parameters are DDS only; arithmetic and ESCAPE are JMS only."""
        ContentFilter("price > %0", Q, ("1",))
        with pytest.raises(InvalidSelectorError):
            MessageSelector("price > %0", Q)
        MessageSelector("price * 2 > 1", Q)
        with pytest.raises(FilterSyntaxError):
            ContentFilter("price * 2 > 1", Q)
