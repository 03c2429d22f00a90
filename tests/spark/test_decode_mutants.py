"""CDR <-> Arrow in the Spark read path and sink, at its edges (issue 20's mutation run of
``dcps/spark/_decode.py``; no JVM: pyarrow and the topic types only).

Each test decodes real serialised samples (both CDR versions, both byte orders, batches
whose payload sizes differ or whose blob is longer) and checks the rows a Spark query
would see: values, envelope columns, the ``_key`` JSON; or encodes rows and checks the
exact bytes, or the error that names the column. The round trips of the common types:
``test_spark_schema.py``.
"""

from __future__ import annotations

import decimal
import json
import uuid
from typing import Any

import numpy as np
import pytest

pytest.importorskip("pyarrow")

import pyarrow as pa
from cyclonedds.idl._support import Endianness

import idl
from dcps import BadParameterError
from dcps.spark._decode import (
    _from_value,
    _key_json,
    _py_value,
    decode_batch,
    decode_packed,
    decode_run,
    encode_batch,
    encode_matrix,
    encode_rows,
    row_to_sample,
)
from dcps.store._log import STORE_FILE, ChannelLog
from dcps.store._log_reader import LogReader
from idl import describe


class Mode(idl.Enum, typename="decode_test::Mode"):
    """Declared out of value order (the decoder sorts by value)."""

    HIGH = 9
    LOW = 1
    MID = 4


class Inner(idl.Struct, typename="decode_test::Inner"):
    a: idl.int16
    b: idl.uint8


class Wide(idl.Struct, typename="decode_test::Wide"):
    """Fixed size: a small int before an int64 (the two CDR versions align it apart)."""

    k: idl.key[idl.int32]
    big: idl.int64
    mode: Mode
    u8: idl.uint8
    u16: idl.uint16
    u32: idl.uint32
    u64: idl.uint64
    i8: idl.int8
    ch: idl.char
    flag: bool
    inner: Inner
    cube: idl.array[idl.array[idl.array[idl.int8, 2], 2], 2]
    raw: idl.array[idl.octet, 3]


class Paired(idl.Struct, typename="decode_test::Paired"):
    """Fixed size, with an array of structs (decoded in bulk, encoded row by row)."""

    k: idl.key[idl.int32]
    pairs: idl.array[Inner, 2]


def wide(i: int) -> Wide:
    return Wide(
        k=i,
        big=-(2**40) - i,
        mode=[Mode.HIGH, Mode.LOW, Mode.MID][i % 3],
        u8=250 + i % 6,
        u16=65530 + i % 6,
        u32=2**32 - 1 - i,
        u64=2**64 - 1 - i,
        i8=-128 + i,
        ch="xyz"[i % 3],
        flag=bool(i % 2),
        inner=Inner(a=-i, b=200 + i),
        cube=np.arange(8, dtype=np.int8).reshape(2, 2, 2) - i,
        raw=np.array([i, 255, 7], dtype=np.uint8),
    )


def wide_row(i: int) -> dict[str, Any]:
    return {
        "k": i,
        "big": -(2**40) - i,
        "mode": ["HIGH", "LOW", "MID"][i % 3],
        "u8": 250 + i % 6,
        "u16": 65530 + i % 6,
        "u32": 2**32 - 1 - i,
        "u64": decimal.Decimal(2**64 - 1 - i),
        "i8": -128 + i,
        "ch": "xyz"[i % 3],
        "flag": bool(i % 2),
        "inner": {"a": -i, "b": 200 + i},
        "cube": (np.arange(8).reshape(2, 2, 2) - i).tolist(),
        "raw": bytes([i, 255, 7]),
    }


def members(batch: Any) -> list[dict[str, Any]]:
    names = [f.name for f in describe(Wide).fields]
    return [{n: r[n] for n in names} for r in batch.to_pylist()]


class Keyed2(idl.Struct, typename="decode_test::Keyed2"):
    """Two key fields of integer and boolean kind (the joined-text path)."""

    a: idl.key[idl.int16]
    on: idl.key[bool]
    v: idl.float64


class NamedKey(idl.Struct, typename="decode_test::NamedKey"):
    """A string key, a uint64 key and an enum key (the JSON path)."""

    name: idl.key[idl.string]
    big: idl.key[idl.uint64]
    mode: idl.key[Mode]


class Nested(idl.Struct, typename="decode_test::Nested"):
    """A key inside a nested struct."""

    inner: idl.key[Inner]
    v: idl.int32


class Plain(idl.Struct, typename="decode_test::Plain"):
    v: idl.int64


class Big(idl.Struct, typename="decode_test::Big"):
    id: idl.key[idl.int64]


class Loose(idl.Struct, typename="decode_test::Loose"):
    """Variable size: sequences of every element kind the per-sample path converts."""

    id: idl.key[idl.int32]
    modes: idl.sequence[Mode]
    bigs: idl.sequence[idl.uint64]
    inners: idl.sequence[Inner]
    nums: idl.sequence[idl.int16]
    octets: idl.sequence[idl.octet]
    grid: idl.sequence[idl.sequence[idl.int32]]
    maybe: idl.optional[Inner]
    label: idl.bounded_str[4]


def loose(i: int) -> Loose:
    return Loose(
        id=i,
        modes=[Mode.MID, Mode.HIGH][: i % 3],
        bigs=[2**64 - 1, i],
        inners=[Inner(a=i, b=3)],
        nums=np.array([i, -i], dtype=np.int16),
        octets=np.array([1, 2, i], dtype=np.uint8),
        grid=[[i], [1, 2]],
        maybe=None if i % 2 else Inner(a=5, b=6),
        label="ab"[: i % 3],
    )


class TestFixedSizeDecoding:
    @pytest.mark.parametrize(
        ("version_2", "endianness"),
        [
            (False, Endianness.Little),
            (True, Endianness.Little),
            (False, Endianness.Big),
            (True, Endianness.Big),
        ],
        ids=["xcdr1-le", "xcdr2-le", "xcdr1-be", "xcdr2-be"],
    )
    def test_every_encoding_decodes_to_the_same_rows(
        self, version_2: bool, endianness: Endianness
    ) -> None:
        samples = [wide(i) for i in range(6)]
        payloads = [s.serialize(use_version_2=version_2, endianness=endianness) for s in samples]
        batch = decode_batch(Wide, payloads, 1, range(6), None)
        assert members(batch) == [wide_row(i) for i in range(6)]

    def test_enum_names_follow_values_not_declaration_order(self) -> None:
        payloads = [wide(i).serialize() for i in range(3)]
        rows = decode_batch(Wide, payloads, 0, range(3)).to_pylist()
        assert [r["mode"] for r in rows] == ["HIGH", "LOW", "MID"]

    def test_unsigned_integers_widen_and_keep_their_values(self) -> None:
        batch = decode_batch(Wide, [wide(5).serialize()], 0, [0])
        types = {f.name: f.type for f in batch.schema}
        assert (types["u8"], types["u16"], types["u32"]) == (pa.int16(), pa.int32(), pa.int64())
        assert types["u64"] == pa.decimal128(20, 0)
        row = batch.to_pylist()[0]
        assert (row["u8"], row["u16"], row["u32"], row["u64"]) == (
            255,
            65535,
            2**32 - 6,
            decimal.Decimal(2**64 - 6),
        )

    def test_a_blob_longer_than_its_sizes_reads_only_the_sized_payloads(self) -> None:
        payloads = [wide(i).serialize() for i in range(3)]
        size = len(payloads[0])
        blob = b"".join(payloads) + wide(9).serialize()
        batch = decode_packed(Wide, [size] * 3, blob, 0, range(3))
        assert members(batch) == [wide_row(i) for i in range(3)]

    def test_payloads_of_different_sizes_are_decoded_one_by_one(self) -> None:
        """The same type in XCDR1 and XCDR2 (28 and 24 bytes) in one batch."""
        a, b = wide(1).serialize(), wide(2).serialize(use_version_2=True)
        assert len(a) != len(b)
        assert members(decode_batch(Wide, [a, b], 0, [0, 1])) == [wide_row(1), wide_row(2)]

    def test_padding_after_a_sample_is_skipped(self) -> None:
        """A payload padded to a larger size (as a writer may) still decodes in bulk."""
        body = wide(3).serialize()
        padded = body + b"\0" * 4
        batch = decode_batch(Wide, [padded, padded], 0, [0, 1])
        assert members(batch) == [wide_row(3), wide_row(3)]

    def test_an_empty_batch_has_the_schema_and_no_rows(self) -> None:
        batch = decode_batch(Wide, [], 0, [])
        assert batch.num_rows == 0
        assert batch.schema.names[:5] == [
            "_channel",
            "_offset",
            "_store_timestamp",
            "_source_timestamp",
            "_key",
        ]
        assert decode_batch(Wide, [], 0, [], envelope=False).schema.names[0] == "k"


class TestEnvelope:
    def test_channels_offsets_and_both_timestamps(self) -> None:
        payloads = [Plain(v=i).serialize() for i in range(3)]
        batch = decode_batch(
            Plain, payloads, [2, 0, 1], [10, 11, 12], [1_999, 2_000, 10**15], [5_000, 6_999, 0]
        )
        rows = batch.to_pylist()
        assert [r["_channel"] for r in rows] == [2, 0, 1]
        assert [r["_offset"] for r in rows] == [10, 11, 12]
        micros = batch.column("_store_timestamp").cast(pa.int64()).to_pylist()
        assert micros == [1, 2, 10**12]
        assert batch.column("_source_timestamp").cast(pa.int64()).to_pylist() == [5, 6, 0]
        assert [r["_key"] for r in rows] == ["[]", "[]", "[]"]
        assert [r["v"] for r in rows] == [0, 1, 2]

    def test_without_the_envelope_only_the_members(self) -> None:
        batch = decode_batch(Plain, [Plain(v=4).serialize()], 3, [1], envelope=False)
        assert batch.schema.names == ["v"]
        assert batch.to_pylist() == [{"v": 4}]

    def test_a_channel_given_once_applies_to_every_row(self) -> None:
        batch = decode_batch(Plain, [Plain(v=i).serialize() for i in range(4)], 7, range(4))
        assert batch.column("_channel").to_pylist() == [7] * 4
        assert batch.column("_channel").type == pa.int32()

    def test_decode_run_reads_a_stored_run(self, tmp_path: Any) -> None:
        """A run fetched from the store's file: its offsets, store timestamps, channel."""
        clock = iter(range(10**18, 10**18 + 10**9, 10**6))
        with ChannelLog(tmp_path / STORE_FILE, clock=lambda: next(clock)) as log:
            log.ensure_topic("t", 2, retain_consumed=True)
            log.append("t", 1, [Plain(v=1).serialize()])
            log.append("t", 1, [Plain(v=2).serialize(), Plain(v=3).serialize()])
            stamps = [e.timestamp_ns for e in log.fetch("t", 1, 0, 3)]
        with LogReader.open(tmp_path, verify=False) as reader:
            run, _ = reader.fetch("t", 1, 1, 2)
        batch = decode_run(Plain, run, 1)
        rows = batch.to_pylist()
        assert [(r["_channel"], r["_offset"], r["v"]) for r in rows] == [(1, 1, 2), (1, 2, 3)]
        micros = batch.column("_store_timestamp").cast(pa.int64()).to_pylist()
        assert micros == [s // 1000 for s in stamps[1:]]


class TestKeyColumn:
    def test_integer_and_boolean_keys_join_as_json(self) -> None:
        payloads = [Keyed2(a=a, on=on, v=0.5).serialize() for a, on in [(-3, True), (7, False)]]
        keys = decode_batch(Keyed2, payloads, 0, [0, 1]).column("_key").to_pylist()
        assert keys == ["[-3,true]", "[7,false]"]
        assert [json.loads(k) for k in keys] == [[-3, True], [7, False]]

    def test_string_uint64_and_enum_keys_are_json(self) -> None:
        payloads = [
            NamedKey(name='a "b"', big=2**64 - 1, mode=Mode.LOW).serialize(),
            NamedKey(name="ü", big=0, mode=Mode.HIGH).serialize(),
        ]
        keys = decode_batch(NamedKey, payloads, 0, [0, 1]).column("_key").to_pylist()
        assert keys == ['["a \\"b\\"",18446744073709551615,"LOW"]', '["\\u00fc",0,"HIGH"]']

    def test_a_key_inside_a_struct_is_found_by_its_path(self) -> None:
        payloads = [Nested(inner=Inner(a=i, b=i + 1), v=0).serialize() for i in range(2)]
        keys = decode_batch(Nested, payloads, 0, [0, 1]).column("_key").to_pylist()
        assert [json.loads(k) for k in keys] == [[0, 1], [1, 2]]

    @pytest.mark.parametrize(
        "ids",
        [[2**63 - 1, 2**63 - 2], [2**62, 2**62 - 1], [-(2**63), -(2**63) + 5], [0, 4095, 9]],
        ids=["int64-max", "2^62", "int64-min", "range-4096"],
    )
    def test_int64_keys_near_the_limits(self, ids: list[int]) -> None:
        payloads = [Big(id=i).serialize() for i in ids]
        keys = decode_batch(Big, payloads, 0, range(len(ids))).column("_key").to_pylist()
        assert keys == [f"[{i}]" for i in ids]

    def test_key_json_of_no_rows_and_of_nulls(self) -> None:
        assert _key_json({}, [], 0).to_pylist() == []
        col = {"a": pa.array([1, None, 3], type=pa.int32())}
        assert _key_json(col, ["a"], 3).to_pylist() == ["[1]", None, "[3]"]


class TestPerSampleValues:
    def test_variable_rows_carry_every_element_kind(self) -> None:
        samples = [loose(i) for i in range(3)]
        batch = decode_batch(Loose, [s.serialize() for s in samples], 0, range(3))
        rows = batch.to_pylist()
        assert rows[1]["modes"] == ["MID"]
        assert rows[2]["modes"] == ["MID", "HIGH"]
        assert rows[0]["bigs"] == [decimal.Decimal(2**64 - 1), decimal.Decimal(0)]
        assert rows[2]["inners"] == [{"a": 2, "b": 3}]
        assert rows[2]["nums"] == [2, -2]
        assert rows[2]["octets"] == bytes([1, 2, 2])
        assert rows[2]["grid"] == [[2], [1, 2]]
        assert (rows[0]["maybe"], rows[1]["maybe"]) == ({"a": 5, "b": 6}, None)
        assert [r["label"] for r in rows] == ["", "a", "ab"]
        assert [row_to_sample(r, Loose).serialize() for r in rows] == [
            s.serialize() for s in samples
        ]

    def test_py_value_of_each_kind(self) -> None:
        fields = {f.name: f for f in describe(Loose).fields}
        wide_fields = {f.name: f for f in describe(Wide).fields}
        assert _py_value(None, fields["maybe"]) is None
        assert _py_value(4, wide_fields["mode"]) == "MID"
        assert _py_value(Mode.LOW, wide_fields["mode"]) == "LOW"
        assert _py_value(2**64 - 1, wide_fields["u64"]) == decimal.Decimal(2**64 - 1)
        assert _py_value(np.array([1, 2], dtype=np.uint64), fields["bigs"]) == [
            decimal.Decimal(1),
            decimal.Decimal(2),
        ]
        assert _py_value([Mode.HIGH], fields["modes"]) == ["HIGH"]
        assert _py_value([7, 8], fields["octets"]) == b"\x07\x08"
        assert _py_value(np.array([1, 2], dtype=np.int16), fields["nums"]) == [1, 2]


class Scalars(idl.Struct, typename="decode_test::Scalars"):
    """Plain octet, float and string members (each converted by its own rule)."""

    b: idl.octet
    f: idl.float32
    s: idl.string


class TestRowsToSamples:
    def test_a_null_in_a_required_member_names_it(self) -> None:
        with pytest.raises(BadParameterError) as null:
            row_to_sample({"v": None}, Plain)
        assert str(null.value) == "column 'v': null where int is required"
        row = {**wide_row(1), "inner": {"a": None, "b": 1}}
        with pytest.raises(BadParameterError, match=r"^column 'inner\.a': null where int"):
            row_to_sample(row, Wide)

    def test_each_kind_refuses_a_value_of_another_kind_by_name(self) -> None:
        cases = [
            ("big", True, "column 'big': True does not fit int: expected an integer, got bool"),
            ("big", "1", "column 'big': '1' does not fit int: expected an integer, got str"),
            ("flag", 1, "column 'flag': 1 does not fit bool: expected a boolean, got int"),
            ("ch", 5, "column 'ch': 5 does not fit char: expected a string, got int"),
            ("mode", "NONE", "column 'mode': 'NONE' does not fit enum: 'NONE'"),
        ]
        for name, value, message in cases:
            with pytest.raises(BadParameterError) as bad:
                row_to_sample({**wide_row(1), name: value}, Wide)
            assert str(bad.value) == message

    def test_octet_float_and_string_members_refuse_by_their_own_rule(self) -> None:
        good = {"b": 7, "f": 1, "s": "x"}
        assert row_to_sample(good, Scalars).serialize() == Scalars(b=7, f=1.0, s="x").serialize()
        cases = [
            ("b", True, "column 'b': True does not fit octet: expected an integer, got bool"),
            (
                "f",
                "x",
                "column 'f': 'x' does not fit float: could not convert string to float: 'x'",
            ),
            ("s", 5, "column 's': 5 does not fit string: expected a string, got int"),
        ]
        for name, value, message in cases:
            with pytest.raises(BadParameterError) as bad:
                row_to_sample({**good, name: value}, Scalars)
            assert str(bad.value) == message

    def test_accepted_spellings_of_each_kind(self) -> None:
        row = {
            **wide_row(2),
            "mode": 4,  # an enum's value
            "big": np.int64(-5),
            "u64": decimal.Decimal(3),
            "flag": np.bool_(True),
        }
        sample = row_to_sample(row, Wide)
        assert (sample.mode, sample.big, sample.u64, sample.flag) == (Mode.MID, -5, 3, True)
        assert row_to_sample({"v": 2}, Plain).serialize() == Plain(v=2).serialize()

    def test_a_row_object_with_attributes_and_as_dict(self) -> None:
        class Row:
            def __init__(self, **kw: Any) -> None:
                self._kw = kw

            def asDict(self, recursive: bool = False) -> dict[str, Any]:  # noqa: N802
                assert recursive
                return dict(self._kw)

        class Obj:
            a = -4
            b = 9

        sample = row_to_sample(Row(inner=Obj(), v=1), Nested)
        assert sample.serialize() == Nested(inner=Inner(a=-4, b=9), v=1).serialize()

    def test_binary_and_numeric_sequences_take_their_python_types(self) -> None:
        fields = {f.name: f for f in describe(Loose).fields}
        octets = _from_value(b"\x01\x02", fields["octets"], "octets")
        nums = _from_value([1, 2], fields["nums"], "nums")
        assert (type(octets), type(nums)) == (type(loose(0).octets), type(loose(0).nums))
        assert bytes(octets) == b"\x01\x02"
        assert list(nums) == [1, 2]
        assert _from_value(None, fields["maybe"], "maybe") is None

    def test_a_too_long_string_names_its_column(self) -> None:
        row = {**loose(1).__dict__, "label": "toolong"}
        row = decode_batch(Loose, [loose(1).serialize()], 0, [0]).to_pylist()[0]
        with pytest.raises(BadParameterError, match=r"^column 'label'"):
            row_to_sample({**row, "label": "toolong"}, Loose)

    def test_a_missing_member_is_named_with_its_type(self) -> None:
        with pytest.raises(BadParameterError) as missing:
            row_to_sample({"x": 1}, Plain)
        assert str(missing.value) == "column 'v' of decode_test::Plain is missing from the rows"

    def test_encode_rows(self) -> None:
        assert encode_rows([{"v": 1}, {"v": -1}], Plain) == [
            Plain(v=1).serialize(),
            Plain(v=-1).serialize(),
        ]


def wide_batch(n: int = 3) -> Any:
    return decode_batch(Wide, [wide(i).serialize() for i in range(n)], 0, range(n))


def replaced(batch: Any, name: str, column: Any) -> Any:
    return batch.set_column(batch.schema.names.index(name), name, column)


class TestBulkEncoding:
    def test_a_fixed_type_is_encoded_in_bulk_byte_exact(self) -> None:
        matrix = encode_matrix(Wide, wide_batch(4))
        assert matrix is not None
        assert matrix.shape == (4, len(wide(0).serialize()))
        assert [bytes(r) for r in matrix] == [wide(i).serialize() for i in range(4)]
        assert encode_batch(Wide, wide_batch(4)) == [wide(i).serialize() for i in range(4)]

    def test_no_rows_and_variable_types_are_not_encoded_in_bulk(self) -> None:
        assert encode_matrix(Wide, wide_batch(0)) is None
        assert encode_batch(Wide, wide_batch(0)) == []
        batch = decode_batch(Loose, [loose(1).serialize()], 0, [0])
        assert encode_matrix(Loose, batch) is None
        assert encode_batch(Loose, batch) == [loose(1).serialize()]

    def test_an_array_of_structs_is_decoded_in_bulk_and_encoded_row_by_row(self) -> None:
        samples = [Paired(k=i, pairs=[Inner(a=i, b=1), Inner(a=-i, b=2)]) for i in range(3)]
        payloads = [p.serialize() for p in samples]
        batch = decode_batch(Paired, payloads, 0, range(3))
        assert batch.column("pairs").to_pylist()[2] == [{"a": 2, "b": 1}, {"a": -2, "b": 2}]
        assert encode_matrix(Paired, batch) is None
        assert encode_batch(Paired, batch) == payloads

    def test_a_missing_column_is_named(self) -> None:
        batch = wide_batch().drop_columns(["u16"])
        with pytest.raises(BadParameterError) as missing:
            encode_matrix(Wide, batch)
        assert str(missing.value) == "column 'u16' of decode_test::Wide is missing from the rows"

    @pytest.mark.parametrize(
        ("name", "column", "message"),
        [
            ("u8", pa.array([0, 255, 256], pa.int32()), "256 is out of range for uint8 (0..255)"),
            ("u8", pa.array([0, -1, 1], pa.int32()), "-1 is out of range for uint8 (0..255)"),
            ("i8", pa.array([-129, 0, 1], pa.int32()), "-129 is out of range for int8 (-128..127)"),
            ("i8", pa.array([127, 128, 1], pa.int32()), "128 is out of range for int8 (-128..127)"),
            (
                "u16",
                pa.array([65536, 0, 0], pa.int32()),
                "65536 is out of range for uint16 (0..65535)",
            ),
            (
                "u32",
                pa.array([2**32, 0, 0], pa.int64()),
                "4294967296 is out of range for uint32 (0..4294967295)",
            ),
            (
                "u64",
                pa.array([-1, 0, 0], pa.int64()),
                "-1 is out of range for uint64 (0..18446744073709551615)",
            ),
            ("u8", pa.array([1.0, 2.0, 3.0]), "expected integers, got double"),
            ("u8", pa.array([1, None, 3], pa.int32()), "null where uint is required"),
            ("flag", pa.array([1, 0, 1]), "expected booleans, got int64"),
            ("big", pa.array(["1", "2", "3"]), "expected integers, got string"),
            ("ch", pa.array(["a", "bc", "d"]), "expected one ASCII character per row"),
            ("ch", pa.array(["a", "ü", "d"]), "expected one ASCII character per row"),
            ("ch", pa.array([1, 2, 3]), "expected one ASCII character per row"),
            ("mode", pa.array([1, 2, 3]), "expected enum member names (strings), got int64"),
            ("mode", pa.array(["LOW", "low", "MID"]), "'low' is not a member of decode_test::Mode"),
            ("raw", pa.array([b"abc", b"ab", b"abc"]), "needs exactly 3 bytes per row"),
            ("raw", pa.array([[1, 2, 3]] * 3), "expected binary of 3 bytes, got list<item: int64>"),
            ("inner", pa.array([1, 2, 3]), "expected a struct, got int64"),
            ("cube", pa.array([1, 2, 3]), "expected a list of 2, got int64"),
            (
                "cube",
                pa.array([[[[1, 2]] * 2] * 2] * 2 + [[[[1, 2]] * 2]]),
                "needs exactly 2 elements per row (an IDL array)",
            ),
            (
                "cube",
                pa.array([[[[1, 2]] * 2] * 2] * 2 + [None]),
                "null where array is required",
            ),
            (
                "cube",
                pa.array([[[[1, 2]] * 2] * 2] * 2 + [[[[1, 2]] * 2, None]]),
                "null where an array is required",
            ),
        ],
    )
    def test_a_value_that_does_not_fit_names_the_column(
        self, name: str, column: Any, message: str
    ) -> None:
        with pytest.raises(BadParameterError) as bad:
            encode_matrix(Wide, replaced(wide_batch(), name, column))
        assert str(bad.value) == f"column {name!r}: {message}"

    def test_a_struct_missing_a_member_names_it(self) -> None:
        inner = pa.array([{"a": 1}] * 3, pa.struct([("a", pa.int16())]))
        with pytest.raises(BadParameterError) as bad:
            encode_matrix(Wide, replaced(wide_batch(), "inner", inner))
        assert str(bad.value) == "column 'inner.b': missing from the struct"

    def test_the_limits_themselves_are_accepted(self) -> None:
        batch = wide_batch(2)
        for name, values, kind in [
            ("i8", [-128, 127], pa.int32()),
            ("u8", [0, 255], pa.int32()),
            ("u16", [0, 65535], pa.int32()),
            ("u32", [0, 2**32 - 1], pa.int64()),
            ("big", [-(2**63), 2**63 - 1], pa.int64()),
        ]:
            batch = replaced(batch, name, pa.array(values, kind))
        batch = replaced(
            batch,
            "u64",
            pa.array([decimal.Decimal(0), decimal.Decimal(2**64 - 1)], pa.decimal128(20, 0)),
        )
        matrix = encode_matrix(Wide, batch)
        assert matrix is not None
        back = decode_batch(Wide, [bytes(r) for r in matrix], 0, [0, 1]).to_pylist()
        assert [(r["i8"], r["u8"], r["u16"], r["u32"], r["big"], r["u64"]) for r in back] == [
            (-128, 0, 0, 0, -(2**63), 0),
            (127, 255, 65535, 2**32 - 1, 2**63 - 1, 2**64 - 1),
        ]

    def test_a_uint64_past_its_range_is_refused(self) -> None:
        col = pa.array(
            [decimal.Decimal(2**64), decimal.Decimal(0), decimal.Decimal(1)], pa.decimal128(21, 0)
        )
        with pytest.raises(BadParameterError) as bad:
            encode_matrix(Wide, replaced(wide_batch(), "u64", col))
        assert str(bad.value) == ("column 'u64': out of range for uint64 (0..18446744073709551615)")

    def test_integers_and_floats_fill_float_members(self) -> None:
        batch = decode_batch(Keyed2, [Keyed2(a=1, on=True, v=2.5).serialize()], 0, [0])
        as_int = replaced(batch, "v", pa.array([3], pa.int64()))
        assert encode_batch(Keyed2, as_int) == [Keyed2(a=1, on=True, v=3.0).serialize()]
        bad = replaced(batch, "v", pa.array(["3"]))
        with pytest.raises(BadParameterError, match=r"^column 'v': expected numbers, got string$"):
            encode_matrix(Keyed2, bad)


def fresh_types() -> tuple[type, type]:
    """Two fixed-size types never decoded before in this process (the decoder keeps a schema
    and a CDR layout per type it has seen)."""
    tag = uuid.uuid4().hex[:8]

    class Narrow(idl.Struct, typename=f"decode_test::Narrow_{tag}"):
        k: idl.key[idl.int16]
        v: idl.int16

    class Deep(idl.Struct, typename=f"decode_test::Deep_{tag}"):
        k: idl.key[idl.int32]
        v: idl.int64

    return Narrow, Deep


class TestBulkPath:
    """Fixed-size types are decoded through their CDR layout, never one Python call per
    element (the module's promise: a batch costs a few numpy/Arrow calls)."""

    @pytest.mark.parametrize("version_2", [False, True], ids=["xcdr1", "xcdr2"])
    def test_no_element_is_deserialised_one_by_one(
        self, version_2: bool, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        payloads = [wide(i).serialize(use_version_2=version_2) for i in range(4)]

        def one_by_one(*args: Any, **kw: Any) -> Any:
            raise AssertionError("an element was deserialised on its own")

        monkeypatch.setattr(Wide, "deserialize", one_by_one)
        assert members(decode_batch(Wide, payloads, 0, range(4))) == [wide_row(i) for i in range(4)]
        padded = [p + b"\0" * 4 for p in payloads]
        assert members(decode_batch(Wide, padded, 0, range(4))) == [wide_row(i) for i in range(4)]

    def test_a_new_type_is_decoded_in_bulk_from_its_first_batch(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The layout made for a type's first batch is kept and used (no element of it is
        deserialised on its own, then or later)."""
        _, deep = fresh_types()

        def one_by_one(*args: Any, **kw: Any) -> Any:
            raise AssertionError("an element was deserialised on its own")

        monkeypatch.setattr(deep, "deserialize", one_by_one)
        for v in (1, 2):
            batch = decode_batch(deep, [deep(k=v, v=-v).serialize()], 0, [0], envelope=False)
            assert batch.to_pylist() == [{"k": v, "v": -v}]

    def test_types_seen_for_the_first_time(self) -> None:
        """Each new type gets its own schema and layout, with and without the envelope."""
        narrow, deep = fresh_types()
        a = decode_batch(narrow, [narrow(k=1, v=-2).serialize()], 0, [0], envelope=False)
        b = decode_batch(deep, [deep(k=3, v=2**40).serialize()], 0, [0], envelope=False)
        assert (a.to_pylist(), b.to_pylist()) == ([{"k": 1, "v": -2}], [{"k": 3, "v": 2**40}])
        c = decode_batch(deep, [deep(k=4, v=5).serialize()], 1, [7])
        assert c.to_pylist()[0] == {
            "_channel": 1,
            "_offset": 7,
            "_store_timestamp": None,
            "_source_timestamp": None,
            "_key": "[4]",
            "k": 4,
            "v": 5,
        }
        narrow2, deep2 = fresh_types()
        d = decode_batch(deep2, [deep2(k=5, v=6).serialize()], 0, [0])
        e = decode_batch(narrow2, [narrow2(k=7, v=8).serialize()], 0, [0])
        assert (d.to_pylist()[0]["v"], e.to_pylist()[0]["v"]) == (6, 8)
