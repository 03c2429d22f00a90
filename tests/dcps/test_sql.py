"""SQL filter and query expressions (DDS 1.4 Annex B): grammar, type checks, evaluation."""

import threading
from dataclasses import dataclass

import numpy as np
import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic

import idl
from dcps import BadParameterError, FilterSyntaxError
from dcps.sql._filter import ContentFilter, QueryExpression
from tests.support.waiting import eventually


class Color(idl.Enum, typename="sqltest::Color"):
    """Enumerator values differ from their positions on purpose."""

    RED = 0
    GREEN = 3
    BLUE = 7


class Shape(idl.Enum, typename="sqltest::Shape"):
    """A second enum, to mix up with Color."""

    SQUARE = 0
    RED = 1


class Pos(idl.Struct, typename="sqltest::Pos"):
    """A nested struct."""

    x: idl.int32
    y: float


class Item(idl.Struct, typename="sqltest::Item"):
    """A struct inside a sequence."""

    id: idl.int16
    tag: str


class Reading(idl.Struct, typename="sqltest::Reading"):
    """A topic type with every comparable kind of field."""

    x: idl.key[idl.int32]
    u: idl.uint32
    small: idl.int8
    f: idl.float32
    name: idl.bounded_str[20]
    ch: idl.char
    flag: bool
    color: Color
    shape: Shape
    pos: Pos
    items: idl.sequence[Item, 5]
    raw: idl.array[idl.uint8, 3]
    levels: idl.sequence[idl.float32]


@dataclass
class PlainReading(IdlStruct, typename="sqltest::PlainReading"):
    """A topic type declared with the binding's own types."""

    x: t.int32
    values: t.sequence[t.int16, 4]


def reading(**changes: object) -> Reading:
    """A default Reading with some fields changed."""
    values: dict[str, object] = {
        "x": 10,
        "u": 5,
        "small": -3,
        "f": 1.5,
        "name": "abcdef",
        "ch": "q",
        "flag": True,
        "color": Color.GREEN,
        "shape": Shape.SQUARE,
        "pos": Pos(1, 2.5),
        "items": [Item(1, "one"), Item(2, "two")],
        "raw": [1, 2, 3],
        "levels": [0.5, 2.0],
    }
    values.update(changes)
    return Reading(**values)  # type: ignore[arg-type]


def passes(expression: str, sample: Reading | None = None, *params: str) -> bool:
    """Whether ``sample`` (default: ``reading()``) passes ``expression``."""
    return ContentFilter(expression, Reading, params).matches(sample or reading())


def syntax_error(expression: str, *params: str, query: bool = False) -> FilterSyntaxError:
    """The FilterSyntaxError that compiling ``expression`` raises."""
    cls = QueryExpression if query else ContentFilter
    with pytest.raises(FilterSyntaxError) as info:
        cls(expression, Reading, params)
    return info.value


class TestComparisons:
    def test_relational_operators(self) -> None:
        """Each of = <> != < <= > >= compares a field with a literal."""
        assert passes("x = 10")
        assert passes("x <> 11")
        assert passes("x != 11")
        assert not passes("x <> 10")
        assert passes("x < 11")
        assert passes("x <= 10")
        assert not passes("x < 10")
        assert passes("x > 9")
        assert passes("x >= 10")
        assert not passes("x > 10")

    def test_literal_on_the_left(self) -> None:
        """A literal may stand on the left of the operator."""
        assert passes("11 > x")
        assert not passes("10 > x")

    def test_field_against_field(self) -> None:
        """Two numeric fields of different IDL types compare as numbers."""
        assert passes("u < x")
        assert passes("pos.x < pos.y")

    def test_numbers_compare_across_widths_and_signs(self) -> None:
        """Unsigned fields against negative literals and ints against floats follow Python."""
        assert passes("u > -1")
        assert passes("small < 0")
        assert passes("small = -3.0")
        assert passes("f = 1.5")
        assert passes("f > 1")
        assert passes("x = 10.0")
        assert not passes("small = 1000")

    def test_hex_and_float_literals(self) -> None:
        """Integers may be hex, floats may use exponents."""
        assert passes("x = 0xA")
        assert passes("x = 0XA")
        assert passes("small = -0x3")
        assert passes("f = 15e-1")
        assert passes("f = .15E1")
        assert passes("x = 1e1")

    def test_strings_and_chars(self) -> None:
        """Strings compare as Python strings; a doubled quote is a quote."""
        assert passes("name = 'abcdef'")
        assert passes("name > 'abc'")
        assert passes("name < 'b'")
        assert passes("ch = 'q'")
        assert passes("ch >= 'a'")
        assert passes("name = 'it''s'", reading(name="it's"))
        assert passes("name = ''", reading(name=""))

    def test_booleans(self) -> None:
        """Booleans compare with TRUE/FALSE in any case."""
        assert passes("flag = TRUE")
        assert passes("flag = true")
        assert passes("flag <> False")
        assert passes("flag = FALSE", reading(flag=False))

    def test_enums_by_name_scoped_name_and_value(self) -> None:
        """An enum field compares with a bare enumerator, Enum::LITERAL, or its value."""
        assert passes("color = GREEN")
        assert passes("color = Color::GREEN")
        assert passes("color = sqltest::Color::GREEN")
        assert passes("color = 3")
        assert not passes("color = RED")

    def test_enum_ordering_uses_enumerator_values(self) -> None:
        """Ordering comparisons on enums compare enumerator values, not names."""
        assert passes("color > RED")
        assert passes("color < BLUE")
        assert passes("color BETWEEN RED AND GREEN")
        assert not passes("color > GREEN")

    def test_same_enumerator_name_in_two_enums(self) -> None:
        """A bare name resolves against the enum of the field it is compared with."""
        assert passes("shape <> RED")
        assert passes("shape = RED", reading(shape=Shape.RED))

    def test_keywords_are_case_insensitive(self) -> None:
        """AND, OR, NOT, BETWEEN, LIKE, IN are keywords in any letter case."""
        assert passes("x = 10 and not (x = 11) Or x between 1 AnD 2")
        assert passes("name like 'abc%' AND x In (10)")


class TestLogic:
    def test_and_binds_tighter_than_or(self) -> None:
        """``a OR b AND c`` means ``a OR (b AND c)``."""
        assert passes("x = 10 OR x = 0 AND x = 1")
        assert not passes("(x = 10 OR x = 0) AND x = 1")

    def test_not_applies_to_the_next_predicate(self) -> None:
        """``NOT a AND b`` means ``(NOT a) AND b``."""
        assert not passes("NOT x = 10 AND x = 10")
        assert passes("NOT (x = 11 AND x = 10)")
        assert passes("NOT NOT x = 10")


class TestBetweenInLike:
    def test_between_is_inclusive(self) -> None:
        """BETWEEN includes both bounds; NOT BETWEEN is its complement."""
        assert passes("x BETWEEN 10 AND 12")
        assert passes("x BETWEEN 8 AND 10")
        assert not passes("x BETWEEN 11 AND 12")
        assert passes("x NOT BETWEEN 11 AND 12")
        assert not passes("x NOT BETWEEN 1 AND 100")

    def test_between_followed_by_and(self) -> None:
        """The AND of BETWEEN does not swallow a following logical AND."""
        assert passes("x BETWEEN 1 AND 20 AND name = 'abcdef'")
        assert not passes("x BETWEEN 1 AND 20 AND name = 'zz'")

    def test_in_list(self) -> None:
        """IN matches any listed value; NOT IN none of them."""
        assert passes("x IN (1, 10, 0x20)")
        assert not passes("x IN (1, 2)")
        assert passes("x NOT IN (1, 2)")
        assert passes("color IN (RED, Color::GREEN)")
        assert passes("name IN ('x', 'abcdef')")
        assert passes("x IN (%0, 3)", None, "10")

    def test_like_wildcards(self) -> None:
        """LIKE: % matches any run, _ exactly one character, and the match is anchored."""
        assert passes("name LIKE 'abc%'")
        assert passes("name LIKE '%def'")
        assert passes("name LIKE '%cd%'")
        assert passes("name LIKE 'a_c_e_'")
        assert passes("name LIKE 'abcdef'")
        assert passes("name LIKE '%'")
        assert not passes("name LIKE 'abc'")
        assert not passes("name LIKE 'bcd%'")
        assert not passes("name LIKE 'a_c'")
        assert not passes("name LIKE '%cd'")
        assert passes("name NOT LIKE 'x%'")

    def test_like_special_characters_are_literal(self) -> None:
        """Regex metacharacters and newlines in patterns and values are plain text."""
        assert passes("name LIKE 'a.c*%'", reading(name="a.c*(x"))
        assert not passes("name LIKE 'a.c%'", reading(name="abc"))
        assert passes("name LIKE 'a%b'", reading(name="a\nb"))

    def test_like_on_char_and_with_parameter(self) -> None:
        """LIKE works on a char field and with a %n pattern."""
        assert passes("ch LIKE '_'")
        assert passes("name LIKE %0", None, "'%ef'")
        assert not passes("name NOT LIKE %0", None, "'%ef'")


class TestFieldPaths:
    def test_nested_struct_member(self) -> None:
        """Dots navigate nested structs."""
        assert passes("pos.x = 1 AND pos.y > 2")

    def test_sequence_and_array_elements(self) -> None:
        """``field[n]`` reads element n of a sequence or array."""
        assert passes("items[1].id = 2 AND items[0].tag = 'one'")
        assert passes("raw[2] = 3")

    def test_missing_sequence_element_makes_the_predicate_false(self) -> None:
        """A predicate on an element past the end is false, its NOT form too."""
        assert not passes("items[3].id = 0")
        assert not passes("items[3].id <> 0")
        assert not passes("items[3].tag NOT LIKE 'x'")
        assert passes("NOT items[3].id = 0")

    def test_samples_after_a_cdr_round_trip(self) -> None:
        """Samples decoded from CDR (numeric sequences as numpy arrays) filter the same."""
        sample = Reading.deserialize(reading(raw=[7, 8, 9]).serialize())
        assert isinstance(sample.levels, np.ndarray)
        assert passes("raw[0] = 7 AND items[1].tag = 'two' AND color = GREEN", sample)
        assert passes("levels[1] = 2 AND levels[0] BETWEEN 0.4 AND 0.6", sample)
        assert not passes("levels[2] = 0", sample)

    def test_numpy_elements_give_python_bools(self) -> None:
        """Comparisons on numpy elements still return a plain bool."""
        sample = Reading.deserialize(reading().serialize())
        content_filter = ContentFilter("levels[0] < 1 AND raw[2] >= 3", Reading)
        assert content_filter.matches(sample) is True
        assert content_filter.matches_many([sample]) == [True]
        assert type(content_filter.matches_many([sample])[0]) is bool

    def test_binding_types_without_idl_struct(self) -> None:
        """A plain cyclonedds IdlStruct dataclass is a valid topic type too."""
        content_filter = ContentFilter("x > 1 AND values[1] = -2", PlainReading)
        assert content_filter.matches(PlainReading(2, [1, -2]))
        assert not content_filter.matches(PlainReading(2, [1]))


class TestTypeChecking:
    def test_unknown_field(self) -> None:
        """An unknown field is reported at its position."""
        err = syntax_error("x = 1 AND nope = 2")
        assert err.position == 10
        assert "nope" in str(err)
        assert syntax_error("pos.z = 1").position == 0

    def test_string_field_against_number(self) -> None:
        """Comparing a string field with a number points at the number."""
        err = syntax_error("name = 12")
        assert err.position == 7
        assert "string" in str(err)

    def test_number_field_against_string(self) -> None:
        """Comparing a number field with a string points at the string."""
        assert syntax_error("x > 'abc'").position == 4

    def test_like_on_non_string(self) -> None:
        """LIKE on a numeric field is rejected at the field."""
        err = syntax_error("x = 1 OR x LIKE '1%'")
        assert err.position == 9
        assert "LIKE" in str(err)

    def test_ordering_on_bool(self) -> None:
        """< on a boolean is rejected at the operator, and BETWEEN too."""
        assert syntax_error("flag < TRUE").position == 5
        assert syntax_error("flag BETWEEN FALSE AND TRUE").position == 0

    def test_struct_and_sequence_are_not_comparable(self) -> None:
        """A whole struct or sequence cannot be compared."""
        assert "struct" in str(syntax_error("pos = 1"))
        assert "sequence" in str(syntax_error("items = 1"))
        assert syntax_error("x.y = 1").position == 0

    def test_enum_literal_not_in_enum(self) -> None:
        """An enumerator of no (or another) enum is rejected at the literal."""
        assert syntax_error("color = PURPLE").position == 8
        assert syntax_error("color = Shape::SQUARE").position == 8
        assert syntax_error("color = Color::PURPLE").position == 8
        assert syntax_error("color = 4").position == 8

    def test_mismatched_fields(self) -> None:
        """Two fields of incompatible types, or of two enums, cannot be compared."""
        assert syntax_error("x = name").position == 4
        assert syntax_error("color = shape").position == 8

    def test_comparison_needs_a_field(self) -> None:
        """A comparison between literals or parameters only is rejected."""
        assert "field" in str(syntax_error("1 = 1"))
        assert "field" in str(syntax_error("%0 = %1", "1", "2"))

    def test_index_out_of_range(self) -> None:
        """An index past an array's length or a sequence's bound is rejected."""
        assert syntax_error("raw[3] = 1").position == 0
        assert syntax_error("items[5].id = 1").position == 0
        assert syntax_error("x[0] = 1").position == 0

    def test_like_pattern_must_be_a_string(self) -> None:
        """A LIKE pattern is a string literal or a parameter."""
        assert syntax_error("name LIKE 3").position == 10
        assert syntax_error("name LIKE name").position == 10

    def test_topic_type_must_be_a_struct(self) -> None:
        """A non-IDL type is a BadParameterError."""
        with pytest.raises(BadParameterError):
            ContentFilter("x = 1", dict)


class TestSyntaxErrors:
    @pytest.mark.parametrize(
        ("expression", "position"),
        [
            ("x = ", 4),
            ("x == 1", 3),
            ("x = 1 AND", 9),
            ("(x = 1", 6),
            ("x = 1)", 5),
            ("x = #", 4),
            ("x IN ()", 6),
            ("x BETWEEN 1", 11),
            ("", 0),
            ("x = 1 x = 2", 6),
        ],
    )
    def test_position_of_the_unexpected_token(self, expression: str, position: int) -> None:
        """A parse error points at the token (or end) where the text stops making sense."""
        assert syntax_error(expression).position == position

    def test_unterminated_string(self) -> None:
        """An unterminated string is named as such, at its opening quote."""
        err = syntax_error("name = 'abc")
        assert err.position == 7
        assert "unterminated" in str(err)

    def test_parameter_index_limit(self) -> None:
        """Parameters run from %0 to %99."""
        assert syntax_error("x = %100").position == 4

    def test_order_by_in_a_filter(self) -> None:
        """ORDER BY belongs to query expressions; a filter says so."""
        err = syntax_error("x = 1 ORDER BY x")
        assert err.position == 6
        assert "query" in str(err)

    def test_message_shows_the_expression(self) -> None:
        """The error text shows the expression and the position."""
        err = syntax_error("x = 1 AND AND")
        assert err.expression == "x = 1 AND AND"
        assert "x = 1 AND AND" in str(err)
        assert "position 10" in str(err)

    def test_deep_nesting(self) -> None:
        """Nesting up to 100 levels works; deeper is a FilterSyntaxError, never RecursionError."""
        assert passes("(" * 5000 + "x = 10" + ")" * 5000)
        assert passes("NOT " * 100 + "x = 10")
        assert passes("(x = 1 OR " * 99 + "x = 10" + ")" * 99)
        assert "nests" in str(syntax_error("NOT " * 101 + "x = 1"))
        assert "nests" in str(syntax_error("NOT " * 5000 + "x = 1"))
        assert "nests" in str(syntax_error("(x = 1 OR " * 3000 + "x = 10" + ")" * 3000))

    def test_non_string_expression(self) -> None:
        """An expression that is not a str is rejected as one."""
        with pytest.raises(FilterSyntaxError):
            ContentFilter(42, Reading)  # type: ignore[arg-type]


class TestParameters:
    def test_parameters_are_converted_to_the_field_type(self) -> None:
        """Parameters are DDS strings converted per field: number, string, enum, bool."""
        content_filter = ContentFilter(
            "x > %0 AND name = %1 AND color = %2 AND flag = %3 AND f < %4",
            Reading,
            ("9", "'abcdef'", "GREEN", "TRUE", "0x2"),
        )
        assert content_filter.matches(reading())
        assert content_filter.parameters == ("9", "'abcdef'", "GREEN", "TRUE", "0x2")

    def test_one_parameter_used_twice(self) -> None:
        """A parameter may serve several fields."""
        assert passes("x > %0 AND u > %0", None, "4")
        assert not passes("x > %0 AND u > %0", None, "5")

    def test_set_parameters_changes_the_result(self) -> None:
        """set_parameters rebinds at run time without recompiling."""
        content_filter = ContentFilter("x > %0", Reading, ("5",))
        assert content_filter.matches(reading())
        content_filter.set_parameters(("50",))
        assert not content_filter.matches(reading())
        assert content_filter.parameters == ("50",)

    def test_with_parameters_returns_an_independent_filter(self) -> None:
        """with_parameters leaves the original filter as it was."""
        low = ContentFilter("x > %0", Reading, ("5",))
        high = low.with_parameters(("50",))
        assert low.matches(reading())
        assert not high.matches(reading())
        assert type(high) is ContentFilter
        assert high.expression == low.expression

    def test_missing_parameter(self) -> None:
        """A %n beyond the given parameters is reported at the %n."""
        err = syntax_error("x > %0 AND u < %1", "3")
        assert err.position == 15
        assert "%1" in str(err)

    def test_parameter_of_the_wrong_type_names_its_index(self) -> None:
        """A parameter that does not convert names its index and points at its use."""
        err = syntax_error("name = 'a' OR x > %0", "'ten'")
        assert err.position == 18
        assert "%0" in str(err)
        assert "%0" in str(syntax_error("color = %0", "PURPLE"))
        assert "%0" in str(syntax_error("name = %0", "abc"))
        assert "%0" in str(syntax_error("name LIKE %0", "5"))
        assert "%0" in str(syntax_error("x = %0", "1 2"))
        assert "%0" in str(syntax_error("x = %0", "'unterminated"))

    def test_failed_rebind_keeps_the_old_parameters(self) -> None:
        """A rejected set_parameters leaves the filter working with its old values."""
        content_filter = ContentFilter("x > %0", Reading, ("5",))
        with pytest.raises(FilterSyntaxError):
            content_filter.set_parameters(("'five'",))
        assert content_filter.parameters == ("5",)
        assert content_filter.matches(reading())

    def test_parameters_must_be_strings(self) -> None:
        """Parameters are strings as in DDS; other values are a BadParameterError."""
        with pytest.raises(BadParameterError, match="%0"):
            ContentFilter("x > %0", Reading, (5,))  # type: ignore[arg-type]
        with pytest.raises(BadParameterError):
            ContentFilter("x > %0", Reading, "5")

    def test_unused_parameters_are_allowed(self) -> None:
        """Extra parameters that the expression does not use are ignored."""
        assert passes("x = 10", None, "1", "2")

    def test_rebinding_while_another_thread_evaluates(self) -> None:
        """Evaluation during concurrent set_parameters always sees a whole binding."""
        content_filter = ContentFilter("x > %0 AND x < %1", Reading, ("0", "20"))
        stop = threading.Event()
        results: set[bool] = set()

        def evaluate() -> None:
            sample = reading()
            while not stop.is_set():
                results.add(content_filter.matches(sample))

        worker = threading.Thread(target=evaluate)
        worker.start()
        try:
            for i in range(200):
                content_filter.set_parameters(("0", "20") if i % 2 else ("20", "30"))
        finally:
            stop.set()
            worker.join()
        assert results <= {True, False}


class TestEvaluationApi:
    def test_matches_many_and_filter(self) -> None:
        """matches_many gives one bool per sample; filter keeps the passing samples."""
        samples = [reading(x=v) for v in range(8)]
        content_filter = ContentFilter("x BETWEEN 2 AND 4", Reading)
        assert content_filter.matches_many(samples) == [v in (2, 3, 4) for v in range(8)]
        assert [s.x for s in content_filter.filter(samples)] == [2, 3, 4]

    def test_filter_is_callable(self) -> None:
        """A ContentFilter is itself a predicate on samples."""
        assert ContentFilter("x = 10", Reading)(reading()) is True

    def test_repr_names_expression_and_parameters(self) -> None:
        """repr shows the expression, the type and the parameters."""
        text = repr(ContentFilter("x > %0", Reading, ("1",)))
        assert "x > %0" in text
        assert "Reading" in text
        assert "'1'" in text


class TestQueryExpression:
    def test_order_by(self) -> None:
        """ORDER BY sorts by the listed fields, enums by value."""
        query = QueryExpression("x > 0 ORDER BY color, x", Reading)
        samples = [
            reading(x=3, color=Color.BLUE),
            reading(x=2, color=Color.RED),
            reading(x=1, color=Color.BLUE),
            reading(x=0, color=Color.RED),
        ]
        assert query.order_by == ("color", "x")
        assert [(s.color, s.x) for s in query.order(query.filter(samples))] == [
            (Color.RED, 2),
            (Color.BLUE, 1),
            (Color.BLUE, 3),
        ]

    def test_order_by_missing_elements_sort_first(self) -> None:
        """Samples lacking an ORDER BY sequence element sort before those having it."""
        query = QueryExpression("ORDER BY items[1].id", Reading)
        samples = [reading(items=[Item(0, ""), Item(9, "")]), reading(items=[])]
        assert [len(s.items) for s in query.order(samples)] == [0, 2]

    def test_empty_condition(self) -> None:
        """A query with no condition (empty or ORDER BY only) matches everything."""
        assert QueryExpression("", Reading).matches(reading())
        assert QueryExpression("  order by name", Reading).matches(reading())
        assert QueryExpression("", Reading).order_by == ()

    def test_order_by_checked_against_type(self) -> None:
        """ORDER BY fields must exist and be primitive."""
        assert syntax_error("ORDER BY nope", query=True).position == 9
        assert syntax_error("x = 1 ORDER BY pos", query=True).position == 15
        assert syntax_error("x = 1 ORDER BY", query=True).position == 14

    def test_query_parameters(self) -> None:
        """A query takes parameters like a filter, and with_parameters keeps it a query."""
        query = QueryExpression("x < %0 ORDER BY x", Reading, ("5",))
        assert not query.matches(reading())
        other = query.with_parameters(("50",))
        assert isinstance(other, QueryExpression)
        assert other.matches(reading())
        assert other.sort_key(reading()) == (10,)

    def test_filter_rejects_empty_expression(self) -> None:
        """A filter needs a condition."""
        assert syntax_error("   ").position == 3


class TestOnCycloneDds:
    def test_filter_samples_delivered_by_cyclone(self, domain_id: int, topic_name: str) -> None:
        """As Cyclone's topic filter, a ContentFilter lets only matching samples reach a reader."""
        content_filter = ContentFilter("x >= %0 AND name LIKE 'keep%'", Reading, ("5",))
        reliable = Policy.Reliability.Reliable(max_blocking_time=1_000_000_000)
        qos = Qos(reliable, Policy.History.KeepAll)
        participant = DomainParticipant(domain_id)
        topic = Topic(participant, topic_name, Reading, qos=qos)
        reader_topic = Topic(participant, topic_name, Reading, qos=qos)
        reader_topic.set_topic_filter(lambda _topic, sample: content_filter.matches(sample))
        reader = DataReader(participant, reader_topic, qos=qos)
        writer = DataWriter(participant, topic, qos=qos)
        eventually(lambda: writer.get_publication_matched_status().current_count, what="match")
        for x in range(10):
            writer.write(reading(x=x, name="keep" if x != 7 else "drop"))
        writer.write(reading(x=99, name="keep-last"))
        received: list[Reading] = []

        def got_last() -> bool:
            received.extend(reader.take(N=100))
            return any(s.x == 99 for s in received)

        eventually(got_last, what="the last sample")
        assert sorted(s.x for s in received) == [5, 6, 8, 9, 99]
