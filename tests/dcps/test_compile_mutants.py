"""The SQL filter compiler, exact: every refusal's message and position, and the
evaluation paths a filter compiles to (LIKE shortcuts, IN sets, BETWEEN, guards on
missing sequence elements, ORDER BY keys, parameters by role) (issue 20: the mutants of
``dcps/sql/_compile.py`` these tests kill went unseen by tests/dcps/test_sql.py, which
checks positions and parts of messages).
"""

from __future__ import annotations

import pytest

import idl
from dcps import FilterSyntaxError
from dcps.sql._compile import compile_expression, like_regex
from dcps.sql._filter import ContentFilter, QueryExpression
from tests.dcps.test_sql import Color, Item, Reading, passes, reading

ENUM = "(numbers, strings, chars, booleans, enums) can be compared"


@pytest.mark.parametrize(
    ("expression", "params", "message", "position"),
    [
        ("x[0] = 1", (), "field 'x' is int, not an array or sequence; it cannot be indexed", 0),
        ("raw[3] = 1", (), "index 3 is out of range for 'raw' (an array of 3)", 0),
        (
            "items[5].id = 1",
            (),
            "index 5 is out of range for 'items' (a sequence of at most 5)",
            0,
        ),
        ("x.y = 1", (), "field 'x' is int; it has no member 'y'", 0),
        ("pos.z = 1", (), "unknown field 'pos.z': 'pos' (Pos) has no member 'z'", 0),
        (
            "items[0].z = 1",
            (),
            "unknown field 'items[0].z': 'items[0]' (Item) has no member 'z'",
            0,
        ),
        ("nope = 1", (), "unknown field 'nope': Reading has no such member", 0),
        ("nope.x = 1", (), "unknown field 'nope.x': Reading has no member 'nope'", 0),
        ("pos.x.y = 1", (), "field 'pos.x' is int; it has no member 'y'", 0),
        (
            "pos = 1",
            (),
            f"field 'pos' is struct Pos; only primitive fields {ENUM}; compare one of its members",
            0,
        ),
        (
            "items = 1",
            (),
            f"field 'items' is sequence; only primitive fields {ENUM}; "
            "compare one element (items[0])",
            0,
        ),
        (
            "raw = 1",
            (),
            f"field 'raw' is array; only primitive fields {ENUM}; compare one element (raw[0])",
            0,
        ),
        ("1 = 1", (), "a comparison needs a field of the topic type on one side", 0),
        ("2 BETWEEN 1 AND 3", (), "BETWEEN needs a field of the topic type on one side", 0),
        ("1 IN (1, 2)", (), "IN needs a field of the topic type on one side", 0),
        ("x = name", (), "cannot compare field 'x' (int) with field 'name' (string)", 4),
        (
            "color = shape",
            (),
            "cannot compare field 'color' (enum Color) with field 'shape' (enum Shape)",
            8,
        ),
        (
            "flag < TRUE",
            (),
            "ordering comparison '<' is not defined on boolean field 'flag'; use = or <>",
            5,
        ),
        ("flag BETWEEN FALSE AND TRUE", (), "BETWEEN is not defined on boolean field 'flag'", 0),
        ("1 LIKE 'a'", (), "LIKE needs a string field on its left", 0),
        ("x = 1 OR nope LIKE 'a'", (), "unknown field 'nope': Reading has no such member", 9),
        ("x LIKE 'a'", (), "LIKE needs a string field, but 'x' is int", 0),
        ("name LIKE 3", (), "a LIKE pattern must be a string literal or a parameter", 10),
        ("name = 12", (), "12 is not a string for string field 'name'", 7),
        ("x = 'a'", (), "'a' is not a number for int field 'x'", 4),
        ("flag = 1", (), "1 is not TRUE or FALSE for bool field 'flag'", 7),
        (
            "color = PURPLE",
            (),
            "'PURPLE' is neither a field of the topic type nor an enumerator of Color "
            "(RED, GREEN, BLUE)",
            8,
        ),
        (
            "color = Shape::SQUARE",
            (),
            "Shape::SQUARE is not an enumerator of Color for enum Color field 'color'",
            8,
        ),
        ("color = 9", (), "9: no enumerator of Color has the value 9", 8),
        ("color = 'a'", (), "'a' is not an enumerator of Color for enum Color field 'color'", 8),
        (
            "color = Color::PURPLE",
            (),
            "Color::PURPLE is not an enumerator of Color (RED, GREEN, BLUE)",
            8,
        ),
        ("x = nope", (), "unknown field 'nope': the topic type has no such member", 4),
        ("x IN (1, 'a')", (), "'a' is not a number for int field 'x'", 9),
        ("x BETWEEN 'a' AND 2", (), "'a' is not a number for int field 'x'", 10),
        ("x = %0", ("'a'",), "parameter %0 (\"'a'\") is not a number for int field 'x'", 4),
        ("name = %0", ("1",), "parameter %0 ('1') is not a string for string field 'name'", 7),
        (
            "flag = %0",
            ("1",),
            "parameter %0 ('1') is not TRUE or FALSE for bool field 'flag'",
            7,
        ),
        ("x = %1", ("1",), "parameter %1 is used but only 1 parameter given", 4),
        ("x = %2", (), "parameter %2 is used but only 0 parameters given", 4),
        ("x = %2", ("1", "2"), "parameter %2 is used but only 2 parameters given", 4),
        (
            "name LIKE %0",
            ("1",),
            "parameter %0 ('1') is not a string pattern for LIKE on field 'name' "
            "(write it in single quotes)",
            10,
        ),
        (
            "color = %0",
            ("PURPLE",),
            "parameter %0 ('PURPLE') is not an enumerator of Color (RED, GREEN, BLUE)",
            8,
        ),
        ("color = %0", ("9",), "parameter %0 ('9'): no enumerator of Color has the value 9", 8),
        ("x = %0", ("abc",), "parameter %0 ('abc') is not a number for int field 'x'", 4),
        (
            "name = %0",
            ("abc",),
            "parameter %0 ('abc') is not a string (write it in single quotes) "
            "for string field 'name'",
            7,
        ),
        (
            "flag = %0",
            ("abc",),
            "parameter %0 ('abc') is not TRUE or FALSE for bool field 'flag'",
            7,
        ),
        (
            "color = %0",
            ("Shape::RED",),
            "parameter %0 ('Shape::RED') is not an enumerator of Color for enum Color field "
            "'color'",
            8,
        ),
        (
            "x = %0",
            ("1 2",),
            "parameter %0 ('1 2') is not a valid value: unexpected '2'",
            4,
        ),
    ],
)
def test_refusal_message_and_position(
    expression: str, params: tuple[str, ...], message: str, position: int
) -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        ContentFilter(expression, Reading, params)
    text = str(caught.value)
    assert text.startswith(message + (" at position" if "valid value" not in message else ""))
    assert caught.value.position == position
    assert caught.value.expression == expression


@pytest.mark.parametrize(
    ("expression", "message", "position"),
    [
        ("ORDER BY nope", "unknown field 'nope': Reading has no such member", 9),
        (
            "ORDER BY pos",
            f"field 'pos' is struct Pos; only primitive fields {ENUM}; compare one of its members",
            9,
        ),
    ],
)
def test_order_by_refusals(expression: str, message: str, position: int) -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        QueryExpression(expression, Reading, ())
    assert str(caught.value).startswith(message + " at position")
    assert caught.value.position == position


class TestIndexEdges:
    def test_the_last_index_of_an_array_and_a_bounded_sequence(self) -> None:
        assert passes("raw[2] = 3")
        assert not passes("items[4].id = 1")
        full = reading(items=[Item(i, str(i)) for i in range(5)])
        assert passes("items[4].id = 4", full)

    def test_an_unbounded_sequence_takes_any_index(self) -> None:
        assert passes("levels[1] = 2.0")
        assert not passes("levels[99] = 2.0")
        assert passes("NOT levels[99] = 2.0")  # an enclosing NOT negates as usual
        assert not passes("levels[99] NOT BETWEEN 0 AND 1")  # the NOT form is false too
        assert passes("NOT (levels[99] = 2.0 AND x = 10)") is True


class TestLike:
    @pytest.mark.parametrize(
        ("pattern", "matches"),
        [
            ("%", True),
            ("%%", True),
            ("abc%", True),
            ("abc%%", True),
            ("bcd%", False),
            ("%def", True),
            ("%%def", True),
            ("%abc", False),
            ("%cd%", True),
            ("%%cd%%", True),
            ("%xy%", False),
            ("abcdef", True),
            ("abcde", False),
            ("a%f", True),
            ("a%e", False),
            ("a_c%", True),
            ("_bcdef", True),
            ("______", True),
            ("_____", False),
            ("a.c%", False),
        ],
    )
    def test_patterns(self, pattern: str, matches: bool) -> None:
        assert passes(f"name LIKE '{pattern}'") is matches
        assert passes(f"name NOT LIKE '{pattern}'") is not matches
        assert passes("name LIKE %0", None, f"'{pattern}'") is matches
        assert passes("name NOT LIKE %0", None, f"'{pattern}'") is not matches

    def test_like_regex_escapes_everything_else(self) -> None:
        regex = like_regex("a.b%c_d")
        assert regex.fullmatch("a.bxxxcyd")
        assert not regex.fullmatch("aXbcyd")
        assert regex.fullmatch("a.b\nc\nd")  # % and _ span newlines


class TestInAndBetween:
    def test_in_constants_fields_and_parameters(self) -> None:
        assert passes("x IN (1, 10)")
        assert not passes("x IN (1, 2)")
        assert passes("x NOT IN (1, 2)")
        assert not passes("x NOT IN (10, 11)")
        assert passes("x IN (1, u, 3)", reading(u=10))
        assert not passes("x IN (1, u, 3)", reading(u=11))
        assert passes("x IN (1, %0)", None, "10")
        assert passes("color IN (RED, GREEN)")
        assert not passes("color IN (RED, BLUE)")
        assert passes("10 IN (x, u)")
        assert passes("items[3].id IN (1, 2)") is False
        assert passes("items[3].id NOT IN (1, 2)") is False
        assert passes("NOT items[3].id IN (1, 2)") is True

    def test_between_is_inclusive_and_negates(self) -> None:
        assert passes("x BETWEEN 10 AND 10")
        assert not passes("x BETWEEN 11 AND 12")
        assert passes("x NOT BETWEEN 11 AND 12")
        assert not passes("x NOT BETWEEN 9 AND 11")
        assert passes("x BETWEEN small AND u", reading(small=-3, u=10))
        assert passes("color BETWEEN RED AND GREEN")
        assert not passes("color BETWEEN 7 AND 7", reading(color=Color.GREEN))
        assert passes("x BETWEEN %0 AND %1", None, "9", "10")
        assert passes("raw[1] BETWEEN 2 AND 2") is True
        assert passes("raw[1] NOT BETWEEN 2 AND 2") is False


class TestComparisons:
    def test_enum_ordering_by_value_and_equality_by_member(self) -> None:
        assert passes("color > 0")  # GREEN is 3
        assert not passes("color > 3")
        assert passes("color >= 3")
        assert not passes("color > GREEN")
        assert passes("color = 3")
        assert passes("color < BLUE")
        assert passes("color > %0", None, "RED")
        assert passes("color = %0", None, "GREEN")
        assert passes("color = %0", None, "3")
        assert not passes("color = %0", None, "BLUE")

    def test_fields_on_both_sides(self) -> None:
        assert passes("u < x", reading(u=5, x=10))
        assert not passes("u > x", reading(u=5, x=10))
        assert passes("name <> ch")

    def test_non_finite_and_large_constants(self) -> None:
        assert passes("f < 1e400")
        assert not passes("f > 1e400")
        assert passes("x < 123456789012345678901234567890")

    def test_numpy_elements_compare_to_python_bools(self) -> None:
        decoded = Reading.deserialize(reading().serialize())
        zeros = Reading.deserialize(reading(raw=[0] * 3).serialize())
        for expression in ("raw[0] = 1", "raw[0] < 2", "levels[0] <= 0.5", "raw[1] IN (2, 3)"):
            assert ContentFilter(expression, Reading).matches(decoded) is True
        many = ContentFilter("raw[0] = 1", Reading).matches_many([decoded, zeros])
        assert many == [True, False]
        assert all(type(v) is bool for v in many)


class TestCompiled:
    def test_compiled_parts(self) -> None:
        compiled = compile_expression("x > %1 AND name LIKE %0 ORDER BY x", Reading, query=True)
        assert compiled.expression == "x > %1 AND name LIKE %0 ORDER BY x"
        assert compiled.topic_type is Reading
        assert [(s.index, s.field, s.role) for s in compiled.sites] == [
            (1, "x", "value"),
            (0, "name", "like"),
        ]
        assert compiled.order_by == ("x",)
        assert compiled.sort_key is not None
        match, many = compiled.bind(("'abc%'", "5"))
        assert match(reading()) is True
        assert many([reading(), reading(x=1)]) == [True, False]

    def test_enum_parameter_role(self) -> None:
        compiled = compile_expression("color > %0 AND color = %1", Reading, query=False)
        assert [s.role for s in compiled.sites] == ["enum_value", "value"]
        assert compiled.sort_key is None
        assert compiled.order_by == ()

    def test_empty_condition_keeps_everything(self) -> None:
        compiled = compile_expression("ORDER BY name", Reading, query=True)
        match, many = compiled.bind(())
        assert match(reading()) is True
        assert many([reading(), reading()]) == [True, True]

    def test_order_by_keys(self) -> None:
        samples = [
            reading(x=3, color=Color.BLUE, items=[]),
            reading(x=1, color=Color.RED, items=[Item(9, "z")]),
            reading(x=2, color=Color.GREEN, items=[Item(1, "a")]),
        ]
        key = compile_expression("ORDER BY color", Reading, query=True).sort_key
        assert key is not None
        assert [s.x for s in sorted(samples, key=key)] == [1, 2, 3]
        key = compile_expression("ORDER BY items[0].id, x", Reading, query=True).sort_key
        assert key is not None
        assert [s.x for s in sorted(samples, key=key)] == [3, 2, 1]
        key = compile_expression("ORDER BY name, x", Reading, query=True).sort_key
        assert key is not None
        assert [s.x for s in sorted(samples, key=key)] == [1, 2, 3]

    def test_order_by_an_enum_compares_values(self) -> None:
        samples = [reading(x=1, color=Color.BLUE), reading(x=2, color=Color.GREEN)]
        query = QueryExpression("ORDER BY color", Reading)
        assert [s.x for s in query.order(samples)] == [2, 1]


def test_deep_nesting_is_refused_at_the_limit() -> None:
    ok = "(" * 99 + "x = 1" + ")" * 99
    assert ContentFilter(ok, Reading).matches(reading()) is False
    deep = "NOT " * 101 + "x = 1"
    with pytest.raises(FilterSyntaxError) as caught:
        ContentFilter(deep, Reading)
    assert str(caught.value).startswith("expression nests deeper than 100 levels at position")
    shallow = "NOT " * 100 + "x = 10"
    assert ContentFilter(shallow, Reading).matches(reading()) is True


class Tone(idl.Enum, typename="outer.inner.Tone"):
    """An enum whose type name is scoped with dots (as Python bindings write it)."""

    LOW = 0
    HIGH = 5


class Mode(idl.Enum, typename="outer::inner::Mode"):
    """An enum whose type name is scoped with ``::``."""

    OFF = 0
    ON = 1


class Toned(idl.Struct, typename="outer::Toned"):
    tone: Tone
    mode: Mode


class TestMoreEdges:
    def test_numpy_between_gives_python_bools(self) -> None:
        decoded = [Reading.deserialize(r.serialize()) for r in (reading(), reading(raw=[0] * 3))]
        many = ContentFilter("raw[1] BETWEEN 2 AND 2", Reading).matches_many(decoded)
        assert many == [True, False]
        assert all(type(v) is bool for v in many)

    def test_bad_parameters_in_in_lists_name_the_field(self) -> None:
        for expression in ("%0 IN (x, u)", "x IN (1, %0)"):
            with pytest.raises(FilterSyntaxError) as caught:
                ContentFilter(expression, Reading, ("abc",))
            assert str(caught.value).startswith(
                "parameter %0 ('abc') is not a number for int field 'x' at position"
            )

    def test_a_literal_next_to_a_field_in_an_in_list(self) -> None:
        assert passes("x IN (10, u)", reading(u=0))
        assert passes("x IN (u, 10)", reading(u=0))
        assert not passes("x IN (9, u)", reading(u=0))

    def test_an_enum_parameter_in_an_in_list(self) -> None:
        assert passes("color IN (%0, RED)", None, "3")
        assert passes("color IN (%0, RED)", None, "GREEN")
        assert not passes("color IN (%0, RED)", None, "BLUE")

    def test_like_patterns_keep_their_spaces_and_letters(self) -> None:
        assert passes("name LIKE ' ab'", reading(name=" ab"))
        assert not passes("name LIKE ' ab'", reading(name="ab"))
        assert not passes("name LIKE 'aX%'", reading(name="ab"))
        assert passes("name LIKE 'aX%'", reading(name="aXb"))
        assert passes("name LIKE '%Xa'", reading(name="bXa"))
        assert not passes("name LIKE '%Xa'", reading(name="ba"))

    def test_an_enum_field_compares_with_itself(self) -> None:
        assert passes("color = color")
        assert passes("color IN (color, RED)")

    @pytest.mark.parametrize(
        ("expression", "matches"),
        [
            ("tone = outer::inner::Tone::HIGH", True),
            ("tone = inner::Tone::HIGH", True),
            ("tone = Tone::HIGH", True),
            ("tone = Tone::LOW", False),
            ("mode = outer::inner::Mode::ON", True),
            ("mode = inner::Mode::ON", True),
            ("mode = Mode::OFF", False),
        ],
    )
    def test_scoped_enumerators(self, expression: str, matches: bool) -> None:
        assert ContentFilter(expression, Toned).matches(Toned(Tone.HIGH, Mode.ON)) is matches

    @pytest.mark.parametrize("expression", ["tone = nner::Tone::HIGH", "mode = other::Mode::ON"])
    def test_a_wrong_scope_is_refused(self, expression: str) -> None:
        with pytest.raises(FilterSyntaxError, match="is not an enumerator of"):
            ContentFilter(expression, Toned)

    def test_a_parameter_that_is_no_value_is_explained_once(self) -> None:
        with pytest.raises(FilterSyntaxError) as caught:
            ContentFilter("x = %0", Reading, ("'x at position' 2",))
        text = str(caught.value)
        reason = text.split(":\n", 1)[0]
        assert reason.startswith(
            "parameter %0 (\"'x at position' 2\") is not a valid value: unexpected '2'"
        )
        assert reason.endswith(" at position 4")
        assert text.count("\n") == 2  # the expression and the pointer, once

    def test_a_parameter_quoting_at_position_keeps_its_whole_message(self) -> None:
        """A survivor's find: the message used to be cut at the parameter's own words."""
        with pytest.raises(FilterSyntaxError) as caught:
            ContentFilter("x = %0", Reading, ("'x at position'",))
        assert str(caught.value).startswith(
            "parameter %0 (\"'x at position'\") is not a number for int field 'x' at position 4:"
        )

    def test_a_bad_parameter_error_shows_the_expression(self) -> None:
        with pytest.raises(FilterSyntaxError) as caught:
            ContentFilter("%0 = x", Reading, ("'a'",))
        assert caught.value.expression == "%0 = x"
        assert caught.value.position == 0
        assert str(caught.value).endswith(" at position 0:\n  %0 = x\n  ^")

    @pytest.mark.parametrize(
        ("expression", "start"),
        [
            ("'a' = x", "'a' is not a number for int field 'x'"),
            ("PURPLE = color", "'PURPLE' is neither a field of the topic type nor an enumerator"),
            ("9 = color", "9: no enumerator of Color has the value 9"),
            ("nope IN (x, 1)", "unknown field 'nope': the topic type has no such member"),
            ("Color::PURPLE = color", "Color::PURPLE is not an enumerator of Color (RED,"),
        ],
    )
    def test_a_bad_literal_at_the_start_is_at_position_0(self, expression: str, start: str) -> None:
        with pytest.raises(FilterSyntaxError) as caught:
            ContentFilter(expression, Reading)
        assert caught.value.position == 0
        assert str(caught.value).startswith(start)

    def test_a_bad_parameter_is_quoted_as_given(self) -> None:
        with pytest.raises(FilterSyntaxError) as caught:
            ContentFilter("x = %0", Reading, (" 'a' ",))
        assert str(caught.value).startswith(
            "parameter %0 (\" 'a' \") is not a number for int field 'x' at position 4:"
        )


def nested(levels: int, word: str | None = None) -> str:
    """``x = 10`` inside ``levels`` ANDs and ORs (alternating, or all ``word``)."""
    expression = "x = 10"
    for i in range(levels):
        op = word or ("AND" if i % 2 else "OR")
        expression = f"x = 10 {op} ({expression})"
    return expression


@pytest.mark.parametrize("word", [None, "AND", "OR"])
def test_and_or_nesting_is_refused_past_the_limit(word: str | None) -> None:
    assert ContentFilter(nested(100, word), Reading).matches(reading()) is True
    with pytest.raises(FilterSyntaxError) as caught:
        ContentFilter(nested(101, word), Reading)
    assert str(caught.value).startswith("expression nests deeper than 100 levels at position")


class Row(idl.Struct, typename="outer::Row"):
    vals: idl.sequence[idl.int32]


class Grid(idl.Struct, typename="outer::Grid"):
    id: idl.int32
    rows: idl.sequence[Row]


def test_order_by_a_doubly_indexed_field_puts_missing_ones_first() -> None:
    samples = [
        Grid(1, [Row([5, 9])]),
        Grid(2, []),
        Grid(3, [Row([5])]),
        Grid(4, [Row([5, 1])]),
    ]
    query = QueryExpression("ORDER BY rows[0].vals[1]", Grid)
    assert [g.id for g in query.order(samples)][:2] in ([2, 3], [3, 2])
    assert [g.id for g in query.order(samples)][2:] == [4, 1]
    assert ContentFilter("rows[0].vals[1] = 1", Grid).matches_many(samples) == [
        False,
        False,
        False,
        True,
    ]


def test_a_bad_parameter_on_the_left_names_the_field() -> None:
    with pytest.raises(FilterSyntaxError) as caught:
        ContentFilter("%0 = x", Reading, ("'a'",))
    assert str(caught.value).startswith(
        "parameter %0 (\"'a'\") is not a number for int field 'x' at position 0"
    )
