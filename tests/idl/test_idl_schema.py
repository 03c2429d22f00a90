"""Schema mappings: numpy structured dtypes and Apache Arrow schemas/tables."""

import numpy as np
import pyarrow as pa
import pytest

import idl


class Level(idl.Enum, typename="s::Level"):
    LOW = 0
    HIGH = 5


class Vec(idl.Struct, typename="s::Vec"):
    x: idl.float32
    y: idl.float32


class Fixed(idl.Struct, typename="s::Fixed"):
    id: idl.key[idl.uint64]
    i8: idl.int8
    flag: bool
    c: idl.char
    level: Level
    v: Vec
    m: idl.array[idl.array[idl.float64, 3], 2]


class Rich(idl.Struct, typename="s::Rich"):
    id: idl.key[idl.uint64]
    name: idl.bounded_str[10]
    level: Level
    v: Vec
    values: idl.sequence[idl.float32]
    raw: idl.sequence[idl.octet, 16]
    m: idl.array[idl.array[idl.int16, 2], 2]
    vs: idl.sequence[Vec]
    tags: idl.sequence[idl.string]
    c: idl.char
    flag: bool


def rich(i: int) -> Rich:
    return Rich(
        id=2**64 - 1 - i,
        name=f"n{i}",
        level=Level.HIGH if i % 2 else Level.LOW,
        v=Vec(float(i), -1.0),
        values=np.arange(i, dtype=np.float32),
        raw=bytes(range(i)),
        m=np.full((2, 2), i, dtype=np.int16),
        vs=[Vec(0.5, 1.5)] * i,
        tags=["t"] * i,
        c=chr(65 + i),
        flag=i % 2 == 0,
    )


class TestNumpyDtype:
    def test_fixed_size_type(self) -> None:
        """A fixed-size type maps to a structured dtype with nested and sub-array fields."""
        dt = idl.numpy_dtype(Fixed)
        assert dt.names == ("id", "i8", "flag", "c", "level", "v", "m")
        assert dt["id"] == np.dtype(np.uint64)
        assert dt["i8"] == np.dtype(np.int8)
        assert dt["flag"] == np.dtype(bool)
        assert dt["c"] == np.dtype("S1")
        assert dt["level"] == np.dtype(np.int32)
        assert dt["v"].names == ("x", "y")
        assert dt["m"].shape == (2, 3)
        assert dt["m"].base == np.dtype(np.float64)

    def test_variable_size_type_raises(self) -> None:
        """A type with a string or sequence raises IdlError naming the field."""
        with pytest.raises(idl.IdlError, match="'name' is variable-size"):
            idl.numpy_dtype(Rich)


class TestArrowSchema:
    def test_types(self) -> None:
        """Each IDL construct maps to the matching Arrow type; uint64 stays uint64."""
        schema = idl.arrow_schema(Rich)
        assert schema.field("id").type == pa.uint64()
        assert schema.field("name").type == pa.string()
        assert schema.field("level").type == pa.dictionary(pa.int32(), pa.string())
        assert schema.field("v").type == pa.struct(
            [
                pa.field("x", pa.float32(), nullable=False),
                pa.field("y", pa.float32(), nullable=False),
            ]
        )
        assert schema.field("values").type == pa.list_(pa.float32())
        assert schema.field("raw").type == pa.list_(pa.uint8())
        assert schema.field("m").type == pa.list_(pa.list_(pa.int16(), 2), 2)
        assert schema.field("tags").type == pa.list_(pa.string())
        assert schema.field("c").type == pa.string()
        assert schema.field("flag").type == pa.bool_()

    def test_metadata(self) -> None:
        """The schema names the IDL type and its keys; key fields are marked."""
        schema = idl.arrow_schema(Rich)
        assert schema.metadata[b"idl.typename"] == b"s::Rich"
        assert schema.metadata[b"idl.keys"] == b"id"
        assert schema.field("id").metadata[b"idl.key"] == b"true"
        assert schema.field("raw").metadata[b"idl.bound"] == b"16"


class Opt(idl.Struct, typename="s::Opt"):
    k: idl.key[idl.int32]
    o: idl.optional[idl.float64]
    v: idl.optional[Vec]


class TestOptional:
    def test_optional_is_nullable(self) -> None:
        """Optional members are nullable Arrow fields and round-trip None."""
        schema = idl.arrow_schema(Opt)
        assert schema.field("o").nullable
        assert not schema.field("k").nullable
        samples = [Opt(1, None, None), Opt(2, 0.5, Vec(1.0, 2.0))]
        assert idl.from_arrow(idl.to_arrow(samples, Opt), Opt) == samples

    def test_optional_has_no_numpy_layout(self) -> None:
        """numpy_dtype refuses optional members."""
        with pytest.raises(idl.IdlError, match="'o' is variable-size \\(optional\\)"):
            idl.numpy_dtype(Opt)


class TestArrowRoundTrip:
    def test_to_arrow_values(self) -> None:
        """to_arrow writes one row per sample with readable values."""
        table = idl.to_arrow([rich(0), rich(3)], Rich)
        assert table.num_rows == 2
        assert table.schema == idl.arrow_schema(Rich)
        assert table.column("id").to_pylist() == [2**64 - 1, 2**64 - 4]
        assert table.column("level").cast(pa.string()).to_pylist() == ["LOW", "HIGH"]
        assert table.column("values").to_pylist()[1] == [0.0, 1.0, 2.0]
        assert table.column("m").to_pylist()[1] == [[3, 3], [3, 3]]

    def test_round_trip(self) -> None:
        """from_arrow(to_arrow(samples)) gives equal samples with numpy fields."""
        samples = [rich(i) for i in range(5)]
        back = idl.from_arrow(idl.to_arrow(samples, Rich), Rich)
        assert back == samples
        assert back[3].values.dtype == np.float32
        assert back[3].m.shape == (2, 2)

    def test_round_trip_fixed(self) -> None:
        """A fixed-size type round-trips through Arrow too."""
        f = Fixed(
            id=1, i8=-1, flag=True, c="x", level=Level.HIGH, v=Vec(1.0, 2.0), m=np.ones((2, 3))
        )
        assert idl.from_arrow(idl.to_arrow([f], Fixed), Fixed) == [f]

    def test_enum_as_plain_strings(self) -> None:
        """from_arrow also accepts enum columns stored as plain strings."""
        table = idl.to_arrow([rich(1)], Rich)
        i = table.schema.get_field_index("level")
        table = table.set_column(i, "level", table.column("level").cast(pa.string()))
        assert idl.from_arrow(table, Rich) == [rich(1)]

    def test_missing_column(self) -> None:
        """A table without a required column raises IdlError naming it."""
        table = idl.to_arrow([rich(1)], Rich).drop_columns(["tags"])
        with pytest.raises(idl.IdlError, match="'tags'"):
            idl.from_arrow(table, Rich)
