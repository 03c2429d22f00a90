"""The introspection contract: describe, field_at, key_fields, get_path, is_topic_type."""

import dataclasses

import numpy as np
import pytest
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl.annotations import key as binding_key

import idl


class Color(idl.Enum, typename="geo::Color"):
    RED = 0
    GREEN = 1


class Id(idl.Struct, typename="geo::Id"):
    site: idl.int16
    num: idl.uint32


class Pos(idl.Struct, typename="geo::Pos"):
    x: idl.float64
    y: idl.float32


class Reading(idl.Struct, typename="geo::Reading"):
    id: idl.key[Id]
    name: idl.key[idl.bounded_str[12]]
    pos: Pos
    color: Color
    values: idl.sequence[idl.float32, 64]
    tags: idl.sequence[idl.string]
    grid: idl.array[idl.array[idl.uint16, 3], 2]
    c: idl.char
    o: idl.octet
    flag: bool
    note: idl.string


def reading() -> Reading:
    return Reading(
        id=Id(3, 4),
        name="n",
        pos=Pos(1.0, 2.0),
        color=Color.GREEN,
        values=np.array([1.0, 2.0], dtype=np.float32),
        tags=["a", "b"],
        grid=np.arange(6, dtype=np.uint16).reshape(2, 3),
        c="x",
        o=9,
        flag=False,
        note="",
    )


class TestDescribe:
    def test_struct_info(self) -> None:
        """describe gives the scoped typename, class, fields in order and key paths."""
        info = idl.describe(Reading)
        assert info.typename == "geo::Reading"
        assert info.python_type is Reading
        assert [f.name for f in info.fields] == [
            "id",
            "name",
            "pos",
            "color",
            "values",
            "tags",
            "grid",
            "c",
            "o",
            "flag",
            "note",
        ]
        assert info.keys == ("id.site", "id.num", "name")

    def test_describe_is_cached(self) -> None:
        """describe returns the same object on every call."""
        assert idl.describe(Reading) is idl.describe(Reading)

    @pytest.mark.parametrize(
        ("path", "kind", "python_type", "bits", "bound"),
        [
            ("id.site", "int", int, 16, None),
            ("id.num", "uint", int, 32, None),
            ("name", "string", str, None, 12),
            ("note", "string", str, None, None),
            ("pos.x", "float", float, 64, None),
            ("pos.y", "float", float, 32, None),
            ("color", "enum", Color, 32, None),
            ("values", "sequence", np.ndarray, None, 64),
            ("values[]", "float", float, 32, None),
            ("tags", "sequence", list, None, None),
            ("tags[]", "string", str, None, None),
            ("grid", "array", np.ndarray, None, 2),
            ("grid[]", "array", np.ndarray, None, 3),
            ("grid[][]", "uint", int, 16, None),
            ("c", "char", str, None, None),
            ("o", "octet", int, 8, None),
            ("flag", "bool", bool, None, None),
            ("pos", "struct", Pos, None, None),
        ],
    )
    def test_field_info(
        self, path: str, kind: str, python_type: type, bits: int | None, bound: int | None
    ) -> None:
        """Each field reports its kind, Python type, width and bound."""
        f = idl.field_at(Reading, path)
        assert (f.path, f.kind, f.python_type, f.bits, f.bound) == (
            path,
            kind,
            python_type,
            bits,
            bound,
        )

    def test_struct_field_members(self) -> None:
        """A struct field lists its members with dotted paths."""
        pos = idl.field_at(Reading, "pos")
        assert [(f.name, f.path) for f in pos.fields] == [("x", "pos.x"), ("y", "pos.y")]

    def test_key_flags(self) -> None:
        """is_key is set on key members and inside a key struct, nowhere else."""
        assert idl.field_at(Reading, "id").is_key
        assert idl.field_at(Reading, "id.num").is_key
        assert idl.field_at(Reading, "name").is_key
        assert not idl.field_at(Reading, "pos").is_key
        assert not idl.field_at(Reading, "pos.x").is_key

    def test_element_name_is_empty(self) -> None:
        """Sequence elements have an empty name."""
        assert idl.field_at(Reading, "values").element.name == ""  # type: ignore[union-attr]

    def test_binding_dataclass_is_a_topic_type(self) -> None:
        """A plain cyclonedds IdlStruct dataclass is described too (lists, not numpy)."""

        @dataclasses.dataclass
        class Plain(IdlStruct, typename="plain::Plain"):
            k: t.int32
            binding_key("k")
            v: t.sequence[t.float64]

        info = idl.describe(Plain)
        assert info.keys == ("k",)
        assert idl.field_at(Plain, "v").python_type is list

    def test_describe_rejects_non_types(self) -> None:
        """describe raises IdlError for anything that is not a topic type."""
        for bad in (int, "Reading", reading(), idl.Struct, Color):
            with pytest.raises(idl.IdlError, match="not a topic type"):
                idl.describe(bad)  # type: ignore[arg-type]


class TestFieldAt:
    def test_unknown_member(self) -> None:
        """An unknown member raises IdlError naming the path."""
        with pytest.raises(idl.IdlError, match=r"'pos\.z'"):
            idl.field_at(Reading, "pos.z")

    def test_member_of_non_struct(self) -> None:
        """A dotted path through a non-struct raises IdlError."""
        with pytest.raises(idl.IdlError, match=r"'note\.x'"):
            idl.field_at(Reading, "note.x")

    def test_element_of_scalar(self) -> None:
        """[] on a scalar raises IdlError."""
        with pytest.raises(idl.IdlError, match="not a sequence or array"):
            idl.field_at(Reading, "note[]")

    def test_malformed_path(self) -> None:
        """A malformed path raises IdlError."""
        with pytest.raises(idl.IdlError, match="malformed"):
            idl.field_at(Reading, "pos..x")


class TestKeysAndPaths:
    def test_key_fields(self) -> None:
        """key_fields lists dotted key paths in declaration order."""
        assert idl.key_fields(Reading) == ("id.site", "id.num", "name")
        assert idl.key_fields(Pos) == ()

    def test_get_path(self) -> None:
        """get_path reads nested members and indexed elements."""
        r = reading()
        assert idl.get_path(r, "id.num") == 4
        assert idl.get_path(r, "pos.y") == 2.0
        assert idl.get_path(r, "tags[1]") == "b"
        assert idl.get_path(r, "grid[1][2]") == 5

    def test_get_path_errors(self) -> None:
        """get_path raises IdlError for unknown members and bad indexes."""
        with pytest.raises(idl.IdlError, match="no member 'zz'"):
            idl.get_path(reading(), "pos.zz")
        with pytest.raises(idl.IdlError, match="out of range"):
            idl.get_path(reading(), "tags[5]")

    def test_is_topic_type(self) -> None:
        """is_topic_type is true for structs only."""
        assert idl.is_topic_type(Reading)
        assert not idl.is_topic_type(idl.Struct)
        assert not idl.is_topic_type(Color)
        assert not idl.is_topic_type(reading())
        assert not idl.is_topic_type(int)
