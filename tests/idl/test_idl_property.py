"""Property tests: IDL text loaded by idl.load serialises exactly like the binding's own types."""

from typing import Any

import numpy as np
from cyclonedds.idl import make_idl_struct
from cyclonedds.idl import types as t
from hypothesis import given, settings
from hypothesis import strategies as st

import idl

_text = st.text(alphabet=st.characters(min_codepoint=1, max_codepoint=0x2FF), max_size=12)
_ascii5 = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=5)


def _ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    if signed:
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    return st.integers(0, 2**bits - 1)


def _f32() -> st.SearchStrategy[float]:
    return st.floats(allow_nan=False, width=32)


# (IDL type, declarator suffix, binding annotation, value strategy, numpy dtype or None)
MEMBERS: list[tuple[str, str, Any, st.SearchStrategy[Any], str | None]] = [
    ("long", "", t.int32, _ints(32, True), None),
    ("unsigned long long", "", t.uint64, _ints(64, False), None),
    ("short", "", t.int16, _ints(16, True), None),
    ("unsigned short", "", t.uint16, _ints(16, False), None),
    ("long long", "", t.int64, _ints(64, True), None),
    ("octet", "", t.byte, _ints(8, False), None),
    ("boolean", "", bool, st.booleans(), None),
    ("char", "", t.char, st.characters(min_codepoint=1, max_codepoint=127), None),
    ("double", "", t.float64, st.floats(allow_nan=False), None),
    ("float", "", t.float32, _f32(), None),
    ("string", "", str, _text, None),
    ("string<5>", "", t.bounded_str[5], _ascii5, None),
    ("sequence<long>", "", t.sequence[t.int32], st.lists(_ints(32, True), max_size=6), "i4"),
    (
        "sequence<double, 3>",
        "",
        t.sequence[t.float64, 3],
        st.lists(st.floats(allow_nan=False), max_size=3),
        "f8",
    ),
    ("sequence<octet>", "", t.sequence[t.byte], st.lists(_ints(8, False), max_size=9), "u1"),
    ("sequence<string>", "", t.sequence[str], st.lists(_text, max_size=3), None),
    ("float", "[3]", t.array[t.float32, 3], st.lists(_f32(), min_size=3, max_size=3), "f4"),
    (
        "unsigned short",
        "[2][2]",
        t.array[t.array[t.uint16, 2], 2],
        st.lists(st.lists(_ints(16, False), min_size=2, max_size=2), min_size=2, max_size=2),
        "u2",
    ),
    # sequences of a nested struct: values are (x, s) tuples, built per side in the test
    (
        "sequence<Q>",
        "",
        None,
        st.lists(st.tuples(st.floats(allow_nan=False), _text), max_size=3),
        "Q",
    ),
    ("Q", "", None, st.tuples(st.floats(allow_nan=False), _text), "Q1"),
]

# the binding's twin of ``struct Q { double x; string s; };``
BQ = make_idl_struct("BQ", "prop::Q", {"x": t.float64, "s": str})

_struct_counter = iter(range(10**9))


@st.composite
def structs(draw: st.DrawFn) -> tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], bool]:
    """An IDL struct text, its binding field map, our values, binding values, keyed flag."""
    picks = draw(st.lists(st.sampled_from(range(len(MEMBERS))), min_size=1, max_size=6))
    keyed = draw(st.booleans())
    lines, bfields, ours, theirs = [], {}, {}, {}
    for n, i in enumerate(picks):
        idl_type, suffix, ann, values, dtype = MEMBERS[i]
        name = f"m{n}"
        key = "@key " if keyed and n == 0 and not suffix and "sequence" not in idl_type else ""
        lines.append(f"  {key}{idl_type} {name}{suffix};")
        bfields[name] = {"Q": t.sequence[BQ], "Q1": BQ}.get(dtype or "", ann)
        value = draw(values)
        if dtype == "Q":
            theirs[name] = [BQ(*v) for v in value]
            ours[name] = ("Q", value)
        elif dtype == "Q1":
            theirs[name] = BQ(*value)
            ours[name] = ("Q1", value)
        else:
            theirs[name] = value
            ours[name] = np.array(value, dtype=dtype) if dtype else value
    name = f"P{next(_struct_counter)}"
    text = (
        "module prop {\n struct Q { double x; string s; };\n"
        f" struct {name} {{\n" + "\n".join(lines) + "\n };\n};\n"
    )
    return text, bfields, ours, theirs, bool(keyed and lines[0].lstrip().startswith("@key"))


class TestLoaderMatchesBinding:
    @settings(max_examples=150, deadline=None)
    @given(structs())
    def test_bytes_equal_binding(
        self, case: tuple[str, dict[str, Any], dict[str, Any], dict[str, Any], bool]
    ) -> None:
        """A loaded struct's XCDR1/XCDR2 bytes equal the binding's for any member mix."""
        text, bfields, ours, theirs, keyed = case
        module = idl.loads(text)
        ((typename, loaded),) = ((k, v) for k, v in module.structs.items() if k != "prop::Q")
        q = module["prop::Q"]
        for k, v in list(ours.items()):
            if isinstance(v, tuple) and v[0] == "Q":
                ours[k] = [q(*x) for x in v[1]]
            elif isinstance(v, tuple) and v[0] == "Q1":
                ours[k] = q(*v[1])
        annotations = {"m0": {"key": True}} if keyed else None
        binding = make_idl_struct(
            typename.split("::")[-1], typename, bfields, field_annotations=annotations
        )
        a, b = loaded(**ours), binding(**theirs)
        idl.validate(a, loaded)
        assert a.serialize() == b.serialize()
        assert a.serialize(use_version_2=True) == b.serialize(use_version_2=True)
        assert loaded.deserialize(a.serialize()) == a
        keys = idl.key_fields(loaded)
        if keyed:  # m0, or all members of m0 when it is the keyless struct Q
            assert keys in (("m0",), ("m0.x", "m0.s"))
        else:
            assert keys == ()
