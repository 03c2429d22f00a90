"""The OMG IDL loader: constructs, includes, equivalence with classes, and errors."""

from pathlib import Path

import numpy as np
import pytest

import idl

SENSORS = """
// line comment
/* block
   comment */
module sensors {
  const long N = 2 * (3 + 1) - 10 / 4;      // 6 (C integer division)
  const long M = N * 2 + 0x10 - 010;        // 12 + 16 - 8 = 20
  const double SCALE = 1.5e2 / 2;
  const string UNIT = "m/s";
  const boolean ON = TRUE;
  const char SEP = ',';
  const unsigned long long BIG = 18446744073709551615;
  const long NEG = -(1 << 4) | 1;

  enum Color { RED, GREEN, BLUE };
  const Color DEFAULT_COLOR = GREEN;

  typedef sequence<double, N> Samples;
  typedef long Matrix[2][3];

  struct Pos { double x; double y; };

  module inner {
    struct Tag { string<8> text; };
  };

  @final
  struct Reading {
    @key long sensor;
    @key string<N> kind;
    unsigned long long big;
    short s; unsigned short us;
    int8 i8; uint8 u8; int16 i16; uint16 u16; int32 i32; uint32 u32; int64 i64; uint64 u64;
    float f; double d; boolean b; char c; octet o;
    string text;
    Color color;
    Pos pos;
    Samples samples;
    sequence<float> unbounded;
    sequence<sequence<octet, 4> > nested;
    sequence<inner::Tag, 2> tags;
    Matrix m;
    long cube[2][2][2], flat[M];
  };

  @appendable struct Extended : Pos { double z; };
  @mutable struct Changing { @key long id; @id(10) string name; };
  @extensibility(APPENDABLE) struct Ext2 { long a; };

  struct ByPragma { long a; string b; long c; };
  #pragma keylist ByPragma c a
};
"""


@pytest.fixture
def sensors() -> idl.IdlModule:
    return idl.loads(SENSORS, filename="sensors.idl")


class TestConstructs:
    def test_constants(self, sensors: idl.IdlModule) -> None:
        """Constant expressions evaluate with C semantics and references."""
        assert sensors["sensors::N"] == 6
        assert sensors["sensors::M"] == 20
        assert sensors["sensors::SCALE"] == 75.0
        assert sensors["sensors::UNIT"] == "m/s"
        assert sensors["sensors::ON"] is True
        assert sensors["sensors::SEP"] == ","
        assert sensors["sensors::BIG"] == 2**64 - 1
        assert sensors["sensors::NEG"] == -15
        assert sensors["sensors::DEFAULT_COLOR"] is sensors.sensors.Color.GREEN

    def test_scoped_and_attribute_access(self, sensors: idl.IdlModule) -> None:
        """module["a::B"] and module.a.B give the same class."""
        assert sensors["sensors::Reading"] is sensors.sensors.Reading
        assert sensors["::sensors::inner::Tag"] is sensors.sensors.inner.Tag
        assert "sensors::Pos" in sensors
        with pytest.raises(KeyError, match="Nope"):
            sensors["sensors::Nope"]
        with pytest.raises(AttributeError, match="Nope"):
            _ = sensors.sensors.Nope

    def test_struct_fields(self, sensors: idl.IdlModule) -> None:
        """Struct members map to the same kinds as the class API."""
        r = sensors.sensors.Reading
        info = idl.describe(r)
        assert info.typename == "sensors::Reading"
        assert info.keys == ("sensor", "kind")
        kinds = {f.name: (f.kind, f.bits, f.bound) for f in info.fields}
        assert kinds["kind"] == ("string", None, 6)
        assert kinds["big"] == ("uint", 64, None)
        assert kinds["s"] == ("int", 16, None)
        assert kinds["us"] == ("uint", 16, None)
        assert kinds["i8"] == ("int", 8, None)
        assert kinds["f"] == ("float", 32, None)
        assert kinds["o"] == ("octet", 8, None)
        assert kinds["samples"] == ("sequence", None, 6)
        assert kinds["unbounded"] == ("sequence", None, None)
        assert kinds["m"] == ("array", None, 2)
        assert kinds["cube"] == ("array", None, 2)
        assert kinds["flat"] == ("array", None, 20)
        assert idl.field_at(r, "nested[]").bound == 4
        assert idl.field_at(r, "tags[].text").bound == 8
        assert idl.field_at(r, "m[]").bound == 3

    def test_round_trip(self, sensors: idl.IdlModule) -> None:
        """A loaded type serialises and deserialises a full sample."""
        s = sensors.sensors
        sample = s.Reading(
            sensor=1,
            kind="abc",
            big=2**64 - 1,
            s=-1,
            us=1,
            i8=-8,
            u8=8,
            i16=-16,
            u16=16,
            i32=-32,
            u32=32,
            i64=-64,
            u64=64,
            f=0.5,
            d=0.25,
            b=True,
            c="q",
            o=7,
            text="hi",
            color=s.Color.BLUE,
            pos=s.Pos(1.0, 2.0),
            samples=[1.0, 2.0],
            unbounded=[],
            nested=[b"ab", b""],
            tags=[s.inner.Tag("t")],
            m=np.ones((2, 3), np.int32),
            cube=np.zeros((2, 2, 2), np.int32),
            flat=np.arange(20, dtype=np.int32),
        )
        idl.validate(sample, s.Reading)
        assert s.Reading.deserialize(sample.serialize()) == sample

    def test_inheritance_and_extensibility(self, sensors: idl.IdlModule) -> None:
        """struct B : A puts A's members first; @appendable/@mutable/@extensibility apply."""
        s = sensors.sensors
        assert [f.name for f in idl.describe(s.Extended).fields] == ["x", "y", "z"]
        assert issubclass(s.Extended, s.Pos)
        assert idl.describe(s.Extended).extensibility == "appendable"
        assert idl.describe(s.Changing).extensibility == "mutable"
        assert idl.describe(s.Ext2).extensibility == "appendable"
        assert idl.describe(s.Pos).extensibility == "final"
        sample = s.Changing(id=1, name="x")
        assert s.Changing.deserialize(sample.serialize()) == sample
        s.Changing.__idl__.populate()
        assert s.Changing.__idl__.member_ids == {"id": 0, "name": 10}

    def test_pragma_keylist(self, sensors: idl.IdlModule) -> None:
        """#pragma keylist makes the listed members keys (reported in member order)."""
        assert idl.key_fields(sensors.sensors.ByPragma) == ("a", "c")

    def test_enum_values(self, sensors: idl.IdlModule) -> None:
        """Enumerators number from 0 and are idl.Enum members."""
        color = sensors.sensors.Color
        assert [(m.name, m.value) for m in color] == [("RED", 0), ("GREEN", 1), ("BLUE", 2)]
        assert issubclass(color, idl.Enum)

    def test_listing(self, sensors: idl.IdlModule) -> None:
        """types/structs/constants list what the file defines."""
        assert "sensors::Reading" in sensors.structs
        assert "sensors::Color" in sensors.types
        assert "sensors::Color" not in sensors.structs
        assert sensors.constants["sensors::N"] == 6


class TestOptional:
    def test_optional_member(self) -> None:
        """@optional members may be None and round-trip either way."""
        mod = idl.loads("struct S { @key long k; @optional short o; @optional string s; };")
        s_type = mod["S"]
        assert idl.field_at(s_type, "o").optional
        for sample in (s_type(1, None, "x"), s_type(2, 3, None)):
            idl.validate(sample, s_type)
            assert s_type.deserialize(sample.serialize()) == sample


class TestEquivalence:
    def test_loaded_type_serialises_like_class(self) -> None:
        """The IDL-loaded type and the same class declaration produce identical bytes."""
        mod = idl.loads("""
            module m { enum E { A, B };
              struct P { float x; };
              struct T { @key long k; string<4> s; sequence<P> ps; E e; double a[2]; }; };
        """)

        class E(idl.Enum, typename="m::E"):
            A = 0
            B = 1

        class P(idl.Struct, typename="m::P"):
            x: idl.float32

        class T(idl.Struct, typename="m::T"):
            k: idl.key[idl.int32]
            s: idl.bounded_str[4]
            ps: idl.sequence[P]
            e: E
            a: idl.array[idl.float64, 2]

        lm = mod.m
        loaded = lm.T(k=1, s="ab", ps=[lm.P(0.5)], e=lm.E.B, a=[1.0, 2.0])
        declared = T(k=1, s="ab", ps=[P(0.5)], e=E.B, a=[1.0, 2.0])
        assert loaded.serialize() == declared.serialize()
        assert loaded.serialize(use_version_2=True) == declared.serialize(use_version_2=True)
        assert idl.key_fields(lm.T) == idl.key_fields(T)


class TestIncludes:
    def test_include_relative_and_include_dirs(self, tmp_path: Path) -> None:
        """#include "x" is searched next to the file, then in include_dirs; guards work."""
        (tmp_path / "inc").mkdir()
        (tmp_path / "inc" / "base.idl").write_text(
            "#ifndef BASE\n#define BASE\nmodule base { struct B { long v; }; };\n#endif\n"
        )
        (tmp_path / "local.idl").write_text(
            '#include "base.idl"\nmodule local { struct L { base::B b; }; };\n'
        )
        (tmp_path / "main.idl").write_text(
            '#include "local.idl"\n#include <base.idl>\n'
            "module main { struct M { local::L l; base::B b; }; };\n"
        )
        mod = idl.load(tmp_path / "main.idl", include_dirs=[tmp_path / "inc"])
        assert set(mod.structs) == {"base::B", "local::L", "main::M"}
        m = mod.main.M(l=mod.local.L(mod.base.B(1)), b=mod.base.B(2))
        assert mod.main.M.deserialize(m.serialize()) == m

    def test_missing_include(self, tmp_path: Path) -> None:
        """A missing include raises IdlError with file:line."""
        (tmp_path / "main.idl").write_text('\n#include "nowhere.idl"\n')
        with pytest.raises(idl.IdlError, match=r"main.idl:2: cannot find included file"):
            idl.load(tmp_path / "main.idl")

    def test_syntax_error_in_include_names_that_file(self, tmp_path: Path) -> None:
        """A syntax error inside an included file reports that file, line and column."""
        (tmp_path / "bad.idl").write_text("module b {\n  struct S { long x };\n};\n")
        (tmp_path / "main.idl").write_text('#include "bad.idl"\n')
        with pytest.raises(idl.IdlSyntaxError) as info:
            idl.load(tmp_path / "main.idl")
        assert info.value.file.endswith("bad.idl")
        assert (info.value.line, info.value.column) == (2, 21)

    def test_missing_file(self, tmp_path: Path) -> None:
        """Loading a file that does not exist raises IdlError naming it."""
        with pytest.raises(idl.IdlError, match=r"nothing\.idl"):
            idl.load(tmp_path / "nothing.idl")


class TestPreprocessor:
    def test_if_0_group_is_skipped(self) -> None:
        """A definition inside #if 0 ... #endif is not loaded; #if 1 keeps its group."""
        mod = idl.loads(
            "#if 0\nstruct Hidden { long a; };\n#endif\n#if 1\nstruct Shown { long b; };\n#endif\n"
        )
        assert set(mod.structs) == {"Shown"}

    def test_ifdef_else_loads_one_branch(self) -> None:
        """#ifdef/#else/#endif and #ifndef pick exactly one branch by whether a macro is defined."""
        text = (
            "#ifdef WIDE\nstruct S { long long v; };\n#else\nstruct S { short v; };\n#endif\n"
            "#ifndef WIDE\nconst long NARROW = 1;\n#endif\n"
        )
        narrow = idl.loads(text)
        wide = idl.loads("#define WIDE\n" + text)
        assert narrow.S(v=1).serialize() != wide.S(v=1).serialize()
        assert len(wide.S(v=1).serialize()) - len(narrow.S(v=1).serialize()) == 6
        assert narrow.constants == {"NARROW": 1}
        assert wide.constants == {}

    def test_define_expands_in_bounds_arrays_and_constants(self) -> None:
        """Object-like macros expand (recursively) where IDL uses them, not in strings/comments."""
        mod = idl.loads(
            "#define N 4\n#define TWICE (N * 2)\n"
            "// N in a comment stays\n"
            "struct S { string<N> s; long a[TWICE]; };\n"
            'const long K = TWICE + 1;\nconst string LABEL = "N";\n'
            "#undef N\n#ifdef N\nconst long GONE = 1;\n#endif\n"
        )
        assert mod.constants == {"K": 9, "LABEL": "N"}
        with pytest.raises(idl.IdlError, match="exceeds its bound 4"):
            idl.validate(mod.S(s="12345", a=list(range(8))), mod.S)
        sample = mod.S(s="abcd", a=list(range(8)))
        assert mod.S.deserialize(sample.serialize()).a.tolist() == list(range(8))

    def test_if_expressions_and_elif(self) -> None:
        """#if/#elif evaluate integer expressions with defined(), macros and C operators."""
        text = (
            "#define VERSION 3\n"
            "#if VERSION >= 4 && defined(FAST)\nconst long PICK = 4;\n"
            "#elif VERSION == 3 || defined NOPE\nconst long PICK = 3;\n"
            "#else\nconst long PICK = 0;\n#endif\n"
            "#if !defined(UNDEFINED_NAME) && (UNDEFINED_NAME + 0x10) % 3 == 1\n"
            "const long ALSO = 1;\n#endif\n"
        )
        assert idl.loads(text).constants == {"PICK": 3, "ALSO": 1}

    def test_nested_groups_and_comments(self) -> None:
        """Groups nest, a skipped group skips its nested groups, and directives in block
        comments or after a continuation line are handled as C does."""
        mod = idl.loads(
            "#if 0\n#if 1\nstruct A { long a; };\n#else\nstruct B { long b; };\n#endif\n#endif\n"
            "/*\n#if 0\n*/\nstruct C { long c; };\n"
            "#if 1 && \\\n  0\nstruct D { long d; };\n#endif /* trailing */\n"
        )
        assert set(mod.structs) == {"C"}

    def test_pragma_with_a_trailing_block_comment(self) -> None:
        """A comment after a #pragma (even one running on over lines) does not reach the parser."""
        mod = idl.loads(
            "struct K { long a; long b; };\n#pragma keylist K b /* the key,\n  see above */\n"
            "struct L { long c; }; // done\r\n"
        )
        assert idl.key_fields(mod.K) == ("b",)
        assert set(mod.structs) == {"K", "L"}

    def test_macros_flow_from_includes_and_guards_load_once(self, tmp_path: Path) -> None:
        """A macro defined in an included file applies after the #include; an include guard
        keeps a twice-included file from being defined twice."""
        (tmp_path / "sizes.idl").write_text(
            "#ifndef SIZES_IDL\n#define SIZES_IDL\n#define LEN 3\n"
            "struct Base { long v; };\n#endif\n"
        )
        (tmp_path / "main.idl").write_text(
            '#include "sizes.idl"\n#include "sizes.idl"\nstruct M { Base b; double xs[LEN]; };\n'
        )
        mod = idl.load(tmp_path / "main.idl")
        assert set(mod.structs) == {"Base", "M"}
        assert len(mod.M(mod.Base(1), [1.0, 2.0, 3.0]).xs) == 3

    def test_include_in_skipped_group_is_not_read(self, tmp_path: Path) -> None:
        """An #include inside #if 0 is not searched for (so a missing file there is fine)."""
        (tmp_path / "main.idl").write_text(
            '#if 0\n#include "missing.idl"\n#endif\nstruct S { long a; };\n'
        )
        assert set(idl.load(tmp_path / "main.idl").structs) == {"S"}

    def test_line_numbers_survive_skipped_groups(self) -> None:
        """A syntax error after skipped lines and directives reports its original line."""
        with pytest.raises(idl.IdlSyntaxError) as info:
            idl.loads("#define A 1\n#if 0\nx\ny\n#endif\nstruct S { long; };\n", filename="p.idl")
        assert (info.value.line, info.value.column) == (6, 16)

    @pytest.mark.parametrize(
        ("text", "where", "message"),
        [
            ("#if 0\nstruct A { long a; };\n", (1, 1), "#if/#ifdef/#ifndef without #endif"),
            ("struct A { long a; };\n#endif\n", (2, 1), "#endif without #if"),
            ("#if 1\n#else\n#elif 1\n#endif\n", (3, 1), "#elif after #else"),
            ("#define F(x) x\n", (1, 1), r"#define F\(...\): function-like macros"),
            ("#line 7\n", (1, 1), "unsupported preprocessor directive #line"),
            ("  #error no such platform\n", (1, 3), "#error no such platform"),
            ("#if 1 +\n#endif\n", (1, 1), r"#if 1 \+: unexpected end of expression"),
            ('#if "s"\n#endif\n', (1, 1), "is not supported in #if expressions"),
            ("#ifdef\n#endif\n", (1, 1), "#ifdef needs one macro name"),
            ("#include nowhere.idl\n", (1, 1), '#include needs "file" or <file>'),
        ],
    )
    def test_bad_directives_raise_syntax_error_naming_them(
        self, text: str, where: tuple[int, int], message: str
    ) -> None:
        """Malformed or unsupported directives raise IdlSyntaxError with file:line:col."""
        with pytest.raises(idl.IdlSyntaxError, match=message) as info:
            idl.loads(text, filename="d.idl")
        assert (info.value.file, info.value.line, info.value.column) == ("d.idl", *where)


class TestErrors:
    def test_syntax_error_position(self) -> None:
        """A syntax error raises IdlSyntaxError with file, line and column."""
        with pytest.raises(idl.IdlSyntaxError) as info:
            idl.loads("module m {\n  struct S { long; };\n};", filename="x.idl")
        err = info.value
        assert (err.file, err.line, err.column) == ("x.idl", 2, 18)
        assert str(err).startswith("x.idl:2:18: unexpected ';'")

    def test_unexpected_character(self) -> None:
        """A stray character raises IdlSyntaxError naming it."""
        with pytest.raises(idl.IdlSyntaxError, match="unexpected character '\\$'"):
            idl.loads("struct S { long $x; };")

    def test_unterminated(self) -> None:
        """Input ending inside a definition raises IdlSyntaxError."""
        with pytest.raises(idl.IdlSyntaxError, match="end of file"):
            idl.loads("struct S { long x;")

    def test_union_unsupported(self) -> None:
        """Unions are reported as unsupported."""
        with pytest.raises(idl.IdlSyntaxError, match="unions are not supported"):
            idl.loads("union U switch (long) { case 1: long a; };")

    @pytest.mark.parametrize(
        ("text", "where", "message"),
        [
            ("struct S {\n  map<long, double> m; };", (2, 3), "map<K, V> is not supported"),
            ("typedef fixed<5, 2> Money;", (1, 9), r"fixed<digits, scale> is not supported"),
            ("@bit_bound(8) bitmask Flags { A, B };", (1, 15), "bitmask is not supported"),
            ("module m {\n  bitset B { bitfield<3> a; };\n};", (2, 3), "bitset is not supported"),
        ],
    )
    def test_unsupported_constructs_are_named(
        self, text: str, where: tuple[int, int], message: str
    ) -> None:
        """map, fixed, bitmask and bitset raise IdlSyntaxError naming the construct and where."""
        with pytest.raises(idl.IdlSyntaxError, match=message) as info:
            idl.loads(text, filename="u.idl")
        assert (info.value.line, info.value.column) == where

    @pytest.mark.parametrize(
        ("text", "message"),
        [
            ("struct S { Missing m; };", r"t.idl:1: unknown name 'Missing'"),
            (
                "struct S { long a; };\nstruct S { long b; };",
                r"t.idl:2: duplicate definition of 'S' \(first defined at t.idl:1\)",
            ),
            ("struct S { long a; short a; };", r"duplicate member 'a'"),
            ("enum E { A, A };", r"duplicate enumerator A"),
            ("const long X = 1 / 0;", r"division by zero"),
            ('const long X = "s";', r"constant X is declared integer"),
            ("const octet X = 300;", r"constant X = 300 is out of range"),
            ("const long X = Y + 1;", r"unknown name 'Y'"),
            ("const string S = 1;", r"declared string"),
            ("const long N = 0;\nstruct S { string<N> s; };", r"t.idl:2: string bound must be"),
            ("struct S { long a[0]; };", r"array size must be a positive integer"),
            ("struct P { long a; };\nconst long X = P;", r"'P' is not a constant"),
            ("const long X = 1;\nstruct S { X a; };", r"'X' is a constant, not a type"),
            ("struct S { wstring w; };", r"wstring is not supported"),
            ("struct S { long double d; };", r"'long double' is not supported"),
            ("struct S { long a; };\n#pragma keylist S b", r"t.idl:2: #pragma keylist: S has"),
            ("#frobnicate\n", r"unsupported preprocessor directive #frobnicate"),
            ("struct S { @key @optional long a; };", r"a key member cannot be @optional"),
            ("@extensibility(STRETCHY) struct S { long a; };", r"bad @extensibility"),
            ("enum E { A };\nstruct S : E { long a; };", r"'E' is not a struct"),
        ],
    )
    def test_semantic_errors(self, text: str, message: str) -> None:
        """Semantic errors raise IdlError naming file:line and the problem."""
        with pytest.raises(idl.IdlError, match=message):
            idl.loads(text, filename="t.idl")
