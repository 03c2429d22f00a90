"""Topic types declared as classes: wire format, numpy fields, keys, extensibility."""

import dataclasses
import sys
import time
import types
from typing import Any

import numpy as np
import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl._support import Endianness
from cyclonedds.idl.annotations import key as binding_key
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration
from hypothesis import given, settings
from hypothesis import strategies as st

import idl


class Color(idl.Enum, typename="sensors::Color"):
    RED = 0
    GREEN = 1
    BLUE = 7


class Pos(idl.Struct, typename="sensors::Pos"):
    x: idl.float64
    y: idl.float64


class Everything(idl.Struct, typename="sensors::Everything"):
    sensor: idl.key[idl.int32]
    i8: idl.int8
    i16: idl.int16
    i64: idl.int64
    u8: idl.uint8
    u16: idl.uint16
    u32: idl.uint32
    u64: idl.uint64
    f32: idl.float32
    f64: idl.float64
    flag: bool
    c: idl.char
    o: idl.octet
    name: idl.string
    short_name: idl.bounded_str[8]
    color: Color
    pos: Pos
    samples: idl.sequence[idl.float32]
    bounded: idl.sequence[idl.int16, 4]
    raw: idl.sequence[idl.octet]
    matrix: idl.array[idl.array[idl.int32, 3], 2]
    bytes4: idl.array[idl.uint8, 4]
    tags: idl.sequence[idl.string]
    path: idl.sequence[Pos, 3]
    chars: idl.array[idl.char, 2]


def everything(i: int = 1) -> Everything:
    return Everything(
        sensor=i,
        i8=-128,
        i16=-32768,
        i64=-(2**63),
        u8=255,
        u16=65535,
        u32=2**32 - 1,
        u64=2**64 - 1,
        f32=0.5,
        f64=1e300,
        flag=True,
        c="z",
        o=200,
        name="héllo wörld",
        short_name="abcdefgh",
        color=Color.BLUE,
        pos=Pos(1.5, -2.5),
        samples=np.arange(10, dtype=np.float32),
        bounded=[1, -2, 3],
        raw=b"\x00\x01\xff",
        matrix=np.arange(6, dtype=np.int32).reshape(2, 3),
        bytes4=np.array([1, 2, 3, 4], dtype=np.uint8),
        tags=["a", "", "ccc"],
        path=[Pos(0.0, 1.0), Pos(2.0, 3.0)],
        chars=["x", "y"],
    )


# The same type declared with the binding's own API: the wire reference.
@dataclasses.dataclass
class BPos(IdlStruct, typename="sensors::Pos"):
    x: t.float64
    y: t.float64


@dataclasses.dataclass
class BEverything(IdlStruct, typename="sensors::Everything"):
    sensor: t.int32
    binding_key("sensor")
    i8: t.int8
    i16: t.int16
    i64: t.int64
    u8: t.uint8
    u16: t.uint16
    u32: t.uint32
    u64: t.uint64
    f32: t.float32
    f64: t.float64
    flag: bool
    c: t.char
    o: t.byte
    name: str
    short_name: t.bounded_str[8]
    color: Color
    pos: BPos
    samples: t.sequence[t.float32]
    bounded: t.sequence[t.int16, 4]
    raw: t.sequence[t.byte]
    matrix: t.array[t.array[t.int32, 3], 2]
    bytes4: t.array[t.uint8, 4]
    tags: t.sequence[str]
    path: t.sequence[BPos, 3]
    chars: t.array[t.char, 2]


def binding_everything() -> BEverything:
    e = everything()
    return BEverything(
        sensor=e.sensor,
        i8=e.i8,
        i16=e.i16,
        i64=e.i64,
        u8=e.u8,
        u16=e.u16,
        u32=e.u32,
        u64=e.u64,
        f32=e.f32,
        f64=e.f64,
        flag=e.flag,
        c=e.c,
        o=e.o,
        name=e.name,
        short_name=e.short_name,
        color=e.color,
        pos=BPos(1.5, -2.5),
        samples=[float(v) for v in range(10)],
        bounded=[1, -2, 3],
        raw=[0, 1, 255],
        matrix=[[0, 1, 2], [3, 4, 5]],
        bytes4=bytearray([1, 2, 3, 4]),
        tags=["a", "", "ccc"],
        path=[BPos(0.0, 1.0), BPos(2.0, 3.0)],
        chars=["x", "y"],
    )


class TestDeclaration:
    def test_struct_is_idlstruct_dataclass(self) -> None:
        """A declared type is an IdlStruct and a dataclass, without writing @dataclass."""
        assert issubclass(Everything, IdlStruct)
        assert dataclasses.is_dataclass(Everything)
        assert issubclass(Everything, idl.Struct)
        assert isinstance(Pos(1.0, 2.0), idl.Struct)

    def test_typename_is_module_scoped(self) -> None:
        """typename= gives the IDL scoped name Cyclone announces."""
        assert Everything.__idl__.idl_transformed_typename == "sensors::Everything"

    def test_default_typename_is_class_name(self) -> None:
        """Without typename= the class name is the IDL name."""

        class Plain(idl.Struct):
            a: idl.int32

        assert idl.describe(Plain).typename == "Plain"

    def test_future_annotations_resolve(self, unique: str) -> None:
        """String annotations (from __future__ import annotations) resolve at class creation."""
        module = types.ModuleType(f"m_{unique}")
        sys.modules[module.__name__] = module
        try:
            exec(
                "from __future__ import annotations\n"
                "import idl\n"
                "class P(idl.Struct):\n"
                "    x: idl.float64\n"
                "class R(idl.Struct):\n"
                "    k: idl.key[idl.int32]\n"
                "    p: P\n"
                "    v: idl.sequence[idl.float32, 4]\n",
                module.__dict__,
            )
            r_type = module.R
            assert idl.field_at(r_type, "p").python_type is module.P
            assert idl.key_fields(r_type) == ("k",)
            sample = r_type(k=1, p=module.P(2.0), v=[1.0])
            assert r_type.deserialize(sample.serialize()) == sample
        finally:
            del sys.modules[module.__name__]

    def test_unresolvable_annotation_raises(self) -> None:
        """An annotation naming an unknown type raises IdlError naming the field."""
        with pytest.raises(idl.IdlError, match="'ghost'"):

            class Bad(idl.Struct):
                ghost: "NoSuchType"  # type: ignore[name-defined]  # noqa: F821

    def test_non_idl_field_type_raises(self) -> None:
        """A field whose type has no IDL mapping (dict) raises IdlError at declaration."""
        with pytest.raises(idl.IdlError, match="'table'"):

            class Bad(idl.Struct):
                table: dict  # type: ignore[type-arg]

    def test_bad_extensibility_raises(self) -> None:
        """An unknown extensibility keyword raises IdlError."""
        with pytest.raises(idl.IdlError, match="extensibility"):

            class Bad(idl.Struct, extensibility="stretchy"):
                a: idl.int32

    def test_inheritance_appends_members(self) -> None:
        """A subclass of a struct has the base members first, like IDL struct inheritance."""

        class Base(idl.Struct):
            a: idl.int32

        class Derived(Base):
            b: idl.int32

        d = Derived(a=1, b=2)
        assert [f.name for f in idl.describe(Derived).fields] == ["a", "b"]
        assert Derived.deserialize(d.serialize()) == d

    def test_equality_compares_numpy_fields_by_value(self) -> None:
        """Two samples with equal numpy payloads compare equal; a different one does not."""
        assert everything() == everything()
        other = everything()
        other.samples = other.samples + 1
        assert everything() != other


class TestWireFormat:
    def test_bytes_equal_binding_xcdr1(self) -> None:
        """XCDR1 bytes equal those of the same type declared with the binding API."""
        assert everything().serialize() == binding_everything().serialize()

    def test_bytes_equal_binding_xcdr2(self) -> None:
        """XCDR2 bytes equal those of the binding's type."""
        ours = everything().serialize(use_version_2=True)
        assert ours == binding_everything().serialize(use_version_2=True)

    def test_bytes_equal_binding_big_endian(self) -> None:
        """Big-endian bytes equal the binding's, and read back equal."""
        ours = everything().serialize(endianness=Endianness.Big)
        assert ours == binding_everything().serialize(endianness=Endianness.Big)
        assert Everything.deserialize(ours) == everything()

    def test_key_bytes_equal_binding(self) -> None:
        """The serialised key equals the binding's."""
        assert everything().serialize_key() == binding_everything().serialize_key()

    def test_default_is_final_xcdr1(self) -> None:
        """Like idlc, the default extensibility is final and the default encoding XCDR1."""
        assert idl.describe(Everything).extensibility == "final"
        Everything.__idl__.populate()
        assert Everything.__idl__.default_version == 1
        assert everything().serialize()[:2] == b"\x00\x01"  # CDR_LE

    @pytest.mark.parametrize("ext", ["appendable", "mutable"])
    def test_extensibility_round_trip(self, ext: str) -> None:
        """appendable/mutable types default to XCDR2 and round-trip."""

        class Ext(idl.Struct, typename=f"x::{ext}", extensibility=ext):
            k: idl.key[idl.int32]
            values: idl.sequence[idl.float64]
            name: idl.string

        sample = Ext(k=3, values=np.array([1.0, 2.0]), name="n")
        Ext.__idl__.populate()
        assert Ext.__idl__.default_version == 2
        assert Ext.deserialize(sample.serialize()) == sample

    def test_decorator_extensibility(self) -> None:
        """The @idl.appendable decorator also sets the extensibility."""

        @idl.appendable
        class Ext(idl.Struct):
            a: idl.int32

        assert idl.describe(Ext).extensibility == "appendable"
        assert Ext.deserialize(Ext(5).serialize()) == Ext(5)


class TestRoundTrip:
    def test_every_construct_round_trips(self) -> None:
        """A sample using every construct comes back equal after serialize/deserialize."""
        assert Everything.deserialize(everything().serialize()) == everything()

    def test_numeric_sequences_come_back_as_numpy(self) -> None:
        """Numeric sequences/arrays are numpy arrays of the IDL element dtype on read."""
        back = Everything.deserialize(everything().serialize())
        assert back.samples.dtype == np.float32
        assert back.bounded.dtype == np.int16
        assert back.raw.dtype == np.uint8
        assert back.matrix.dtype == np.int32
        assert back.matrix.shape == (2, 3)
        assert back.bytes4.dtype == np.uint8

    def test_non_numeric_sequences_stay_lists(self) -> None:
        """Sequences of strings, chars and structs are lists."""
        back = Everything.deserialize(everything().serialize())
        assert back.tags == ["a", "", "ccc"]
        assert back.path == [Pos(0.0, 1.0), Pos(2.0, 3.0)]
        assert back.chars == ["x", "y"]

    def test_numpy_accepts_lists_and_bytes(self) -> None:
        """Plain lists and bytes are accepted for numeric fields on write."""
        e = everything()
        e.samples = [1.0, 2.0]
        e.raw = bytearray(b"xyz")
        back = Everything.deserialize(e.serialize())
        assert back.samples.tolist() == [1.0, 2.0]
        assert back.raw.tobytes() == b"xyz"

    def test_empty_sequences(self) -> None:
        """Empty numeric sequences round-trip as empty arrays of the right dtype."""
        e = everything()
        e.samples = np.empty(0, dtype=np.float32)
        e.raw = b""
        back = Everything.deserialize(e.serialize())
        assert back.samples.shape == (0,)
        assert back.samples.dtype == np.float32
        assert back.raw.size == 0

    def test_wrong_array_shape_fails_to_serialize(self) -> None:
        """An array of the wrong shape is refused at serialisation."""
        e = everything()
        e.matrix = np.zeros((3, 3), dtype=np.int32)
        with pytest.raises(Exception, match="matrix"):
            e.serialize()

    def test_large_payload_round_trips(self) -> None:
        """A 1 MiB float32 payload round-trips unchanged."""

        class Blob(idl.Struct):
            data: idl.sequence[idl.float32]

        data = np.random.default_rng(1).random(262144, dtype=np.float32)
        assert np.array_equal(Blob.deserialize(Blob(data).serialize()).data, data)


class TestKeys:
    def test_single_key(self) -> None:
        """idl.key[T] marks a key field."""
        assert idl.key_fields(Everything) == ("sensor",)
        assert Everything.__idl__.keyless is False

    def test_keyless(self) -> None:
        """A struct without key fields is keyless."""
        assert idl.key_fields(Pos) == ()

    def test_nested_struct_key_expands_to_all_members(self) -> None:
        """A key member of a keyless struct type makes all its members key fields."""

        class Id(idl.Struct):
            site: idl.int16
            num: idl.uint32

        class Keyed(idl.Struct):
            id: idl.key[Id]
            kind: idl.key[idl.bounded_str[8]]
            value: idl.float64

        assert idl.key_fields(Keyed) == ("id.site", "id.num", "kind")
        sample = Keyed(Id(1, 2), "k", 0.5)
        assert Keyed.deserialize(sample.serialize()) == sample

    def test_nested_struct_with_own_keys(self) -> None:
        """A key member whose struct type has keys contributes only those keys."""

        class Id(idl.Struct):
            site: idl.key[idl.int16]
            label: idl.string

        class Keyed(idl.Struct):
            id: idl.key[Id]
            value: idl.float64

        assert idl.key_fields(Keyed) == ("id.site",)
        assert idl.field_at(Keyed, "id.label").is_key is False


class TestProperty:
    @settings(max_examples=60, deadline=None)
    @given(
        k=st.integers(-(2**31), 2**31 - 1),
        name=st.text(
            alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
            max_size=20,
        ),
        values=st.lists(st.floats(allow_nan=False, width=32), max_size=20),
        raw=st.binary(max_size=50),
        u64=st.integers(0, 2**64 - 1),
        color=st.sampled_from(list(Color)),
    )
    def test_round_trip_property(
        self, k: int, name: str, values: list[float], raw: bytes, u64: int, color: Color
    ) -> None:
        """Any valid sample round-trips through XCDR1 and XCDR2."""

        sample = Prop(
            k=k, name=name, values=np.array(values, dtype=np.float32), raw=raw, u64=u64, color=color
        )
        idl.validate(sample, Prop)
        assert Prop.deserialize(sample.serialize()) == sample
        assert Prop.deserialize(sample.serialize(use_version_2=True)) == sample


class Prop(idl.Struct, typename="prop::Prop"):
    k: idl.key[idl.int32]
    name: idl.string
    values: idl.sequence[idl.float32]
    raw: idl.sequence[idl.octet]
    u64: idl.uint64
    color: Color


class TestPublicApi:
    def test_all_is_sorted_and_complete(self) -> None:
        """idl.__all__ lists every public name of the package exactly once."""
        public = {n for n in vars(idl) if not n.startswith("_")} - {"annotations"}
        modules = {n for n in public if type(getattr(idl, n)).__name__ == "module"}
        assert len(idl.__all__) == len(set(idl.__all__))
        assert set(idl.__all__) == public - modules


class TestOverDds:
    def test_write_read_numpy_sample(self, domain_id: int, topic_name: str) -> None:
        """A sample with numpy payloads written by a DataWriter is read back equal."""
        dp = DomainParticipant(domain_id)
        topic = Topic(dp, topic_name, Everything)
        qos = Qos(
            Policy.Reliability.Reliable(duration(seconds=5)),
            Policy.Durability.TransientLocal,
            Policy.History.KeepLast(4),
        )
        writer = DataWriter(dp, topic, qos=qos)
        reader = DataReader(dp, topic, qos=qos)
        sent = [everything(1), everything(2)]
        for s in sent:
            writer.write(s)
        got: list[Everything] = []
        deadline = time.monotonic() + 10
        while len(got) < 2 and time.monotonic() < deadline:
            got.extend(reader.take(N=4))
            if len(got) < 2:
                time.sleep(0.01)
        assert sorted(got, key=lambda s: s.sensor) == sent
        assert got[0].samples.dtype == np.float32


class Fast(idl.Struct, typename="sensors::Fast"):
    k: idl.key[idl.int32]
    c: idl.char
    name: idl.bounded_str[10]
    pos: Pos
    color: Color
    values: idl.sequence[idl.float64]
    raw: idl.sequence[idl.octet]
    m: idl.array[idl.array[idl.int16, 3], 2]
    flag: bool
    u64: idl.uint64
    note: idl.string
    i8: idl.int8


def fast(i: int = 0) -> Fast:
    return Fast(
        k=i,
        c="x",
        name="héllo",
        pos=Pos(1.0, 2.0),
        color=Color.BLUE,
        values=np.arange(i, dtype=np.float64),
        raw=b"abc"[: i % 4],
        m=np.full((2, 3), i, np.int16),
        flag=i % 2 == 0,
        u64=2**64 - 1,
        note="n" * i,
        i8=-i,
    )


class TestCompiledCodec:
    def test_final_types_get_a_codec(self) -> None:
        """Final structs of supported members are serialised by a compiled codec."""
        Fast.__idl__.populate()
        assert Fast.__idl__._codec is not None

    def test_unsupported_members_fall_back(self) -> None:
        """Sequences of strings or structs, and appendable types, use the binding's machines."""
        Everything.__idl__.populate()
        assert Everything.__idl__._codec is None

        @idl.appendable
        class Ext(idl.Struct):
            a: idl.int32

        Ext.__idl__.populate()
        assert Ext.__idl__._codec is None

    @pytest.mark.parametrize("v2", [False, True])
    @pytest.mark.parametrize("i", [0, 1, 3, 7])
    def test_codec_bytes_equal_machines(self, i: int, v2: bool) -> None:
        """The codec's bytes equal the binding machines' bytes, and both read them back."""
        from cyclonedds.idl._main import IDL

        sample = fast(i)
        ours = sample.serialize(use_version_2=v2)
        assert ours == IDL.serialize(Fast.__idl__, sample, use_version_2=v2)
        assert Fast.deserialize(ours) == sample
        assert IDL.deserialize(Fast.__idl__, ours) == sample

    def test_big_endian_falls_back(self) -> None:
        """Big-endian data goes through the machines and reads back equal."""
        data = fast(3).serialize(endianness=Endianness.Big)
        assert data[1] == 0x00
        assert Fast.deserialize(data) == fast(3)

    def test_codec_errors_name_the_field(self) -> None:
        """A value the codec cannot encode raises an error naming the field."""
        bad = fast(1)
        bad.m = np.zeros((3, 3), np.int16)
        with pytest.raises(ValueError, match="m: array must have shape"):
            bad.serialize()

    def test_key_serialisation_unchanged(self) -> None:
        """Key-only serialisation still goes through the machines (keys only)."""
        from cyclonedds.idl._main import IDL
        from cyclonedds.idl._support import SerializeKind

        sample = fast(2)
        assert sample.serialize_key() == IDL.serialize(
            Fast.__idl__, sample, serialize_kind=SerializeKind.KeyDefinitionOrder
        )


class Camera(idl.Struct, typename="sensors::Camera"):
    """Fixed arrays large enough to be written as pieces of their own (``BLOCK_MIN``),
    each at an offset that needs padding first (or only padding, or none)."""

    tag: idl.uint8
    pixels: idl.array[idl.uint8, 2051]
    depth: idl.array[idl.array[idl.float64, 16], 16]
    seq: idl.int64
    small: idl.array[idl.int16, 3]
    intensity: idl.array[idl.int32, 300]
    pose: Pos
    n: idl.uint16


def camera(i: int) -> Camera:
    return Camera(
        tag=i,
        pixels=(np.arange(2051) * (i + 1)).astype(np.uint8),
        depth=np.full((16, 16), i / 3, np.float64),
        seq=-i,
        small=np.array([i, -i, 7], np.int16),
        intensity=np.arange(300, dtype=np.int32) - i,
        pose=Pos(float(i), 0.5),
        n=i,
    )


class TestLargeArrays:
    @pytest.mark.parametrize("v2", [False, True])
    @pytest.mark.parametrize("i", [0, 5])
    def test_bytes_equal_machines(self, i: int, v2: bool) -> None:
        """Large fixed arrays written as pieces give the binding machines' bytes."""
        from cyclonedds.idl._main import IDL

        assert idl._codec.BLOCK_MIN <= 1200  # every array above but ``small`` is a piece
        sample = camera(i)
        ours = sample.serialize(use_version_2=v2)
        assert ours == IDL.serialize(Camera.__idl__, sample, use_version_2=v2)
        back = Camera.deserialize(ours)
        assert back == sample
        assert back.depth.flags.writeable
        assert back.depth.shape == (16, 16)

    @pytest.mark.parametrize("v2", [False, True])
    def test_large_sequences_equal_machines(self, v2: bool) -> None:
        """A large numeric sequence (contiguous or strided) gives the machines' bytes."""
        from cyclonedds.idl._main import IDL

        sample = fast(3)
        for values in (np.arange(600, dtype=np.float64), np.arange(1200.0)[::2]):
            sample.values = values
            ours = sample.serialize(use_version_2=v2)
            assert ours == IDL.serialize(Fast.__idl__, sample, use_version_2=v2)
            assert np.array_equal(Fast.deserialize(ours).values, values)

    def test_non_contiguous_and_list_values(self) -> None:
        """A strided view or a nested list is written as the array it stands for."""
        sample = camera(2)
        want = sample.serialize()
        wide = np.zeros((16, 32), np.float64)
        wide[:, ::2] = sample.depth
        sample.depth = wide[:, ::2]
        assert not sample.depth.flags.c_contiguous
        sample.pixels = sample.pixels.tolist()
        assert sample.serialize() == want

    def test_decoded_arrays_are_writable_copies(self) -> None:
        """A decoded large array owns its memory (not a read-only view of the bytes)."""
        back = Camera.deserialize(camera(1).serialize())
        for array in (back.pixels, back.depth, back.intensity):
            assert array.flags.owndata
            assert array.flags.writeable

    def test_wrong_shape_names_the_field(self) -> None:
        """A large array of the wrong shape is refused, naming the field."""
        bad = camera(1)
        bad.depth = np.zeros((16, 15))
        with pytest.raises(ValueError, match="depth: array must have shape"):
            bad.serialize()


class TestOptional:
    def test_optional_round_trip(self) -> None:
        """idl.optional[T] members may be None; the type defaults to XCDR2 like idlc's."""

        class Opt(idl.Struct, typename="o::Opt"):
            k: idl.key[idl.int32]
            o: idl.optional[idl.int16]
            s: idl.optional[idl.bounded_str[4]]
            p: idl.optional[Pos]

        for sample in (Opt(1, None, None, None), Opt(2, -3, "abcd", Pos(1.0, 2.0))):
            idl.validate(sample, Opt)
            assert Opt.deserialize(sample.serialize()) == sample
        Opt.__idl__.populate()
        assert Opt.__idl__.default_version == 2
        assert idl.field_at(Opt, "p.x").optional is False
        assert idl.field_at(Opt, "p").optional is True

    def test_optional_key_rejected(self) -> None:
        """A key member cannot be optional."""
        with pytest.raises(idl.IdlError, match="cannot be optional"):

            class Bad(idl.Struct):
                k: idl.key[idl.optional[idl.int32]]


class TestBitBoundEnum:
    def test_bit_bound_enum_round_trips(self) -> None:
        """An enum with the binding's @bit_bound still serialises like the binding's machines."""
        from cyclonedds.idl._main import IDL
        from cyclonedds.idl.annotations import bit_bound

        @bit_bound(8)
        class Small(idl.Enum, typename="bb::Small"):
            A = 0
            B = 1

        class Holder(idl.Struct, typename="bb::Holder"):
            e: Small
            x: idl.int16

        h = Holder(Small.B, 3)
        for v2 in (False, True):
            data = h.serialize(use_version_2=v2)
            assert data == IDL.serialize(Holder.__idl__, h, use_version_2=v2)
            assert Holder.deserialize(data) == h


class TestPackageExample:
    def test_docstring_example_runs(self) -> None:
        """The example in the idl package docstring declares a working type."""
        doc = idl.__doc__ or ""
        code = doc.split("::", 1)[1].split("or load it", 1)[0]
        lines = [line[4:] for line in code.splitlines()]
        namespace: dict[str, Any] = {}
        exec("\n".join(lines), namespace)
        reading, color = namespace["Reading"], namespace["Color"]
        sample = reading(sensor=1, name="n", color=color.GREEN, samples=[1.0], note=None)
        assert reading.deserialize(sample.serialize()) == sample
