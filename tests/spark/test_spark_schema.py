"""Schema mapping of topic types to Spark/Arrow and the bulk CDR decoder (no Spark JVM)."""

from __future__ import annotations

import decimal
import json

import numpy as np
import pytest

import tests.support.spark_support as spark_support  # noqa: F401  (puts tests/peers on sys.path)

from spark_types import Color, Fixed, Point, Reading, Variable  # isort: skip  (needs the above)

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from pyspark.sql import types as st  # noqa: E402
from pyspark.sql.pandas.types import to_arrow_schema  # noqa: E402

import dcps.spark  # noqa: E402
from dcps import BadParameterError  # noqa: E402
from dcps.spark import ENVELOPE, arrow_row_schema, decode_batch, row_to_sample, spark_schema  # noqa: E402
from dcps.spark._decode import _py_value, encode_batch  # noqa: E402
from idl import describe  # noqa: E402
from idl._batch_codec import cdr_dtype  # noqa: E402


def fixed(i: int) -> Fixed:
    """A Fixed sample whose every field depends on ``i``."""
    return Fixed(
        id=i,
        i8=-i % 128,
        i16=-300 * i,
        u8=255 - i % 256,
        u16=65535 - i,
        u32=4_000_000_000 + i,
        u64=2**64 - 1 - i,
        f32=i / 2,
        flag=i % 2 == 0,
        ch="abc"[i % 3],
        color=[Color.RED, Color.GREEN, Color.BLUE][i % 3],
        point=Point(x=i * 1.5, y=-i / 3),
        vec=np.array([i, -i, 7], dtype=np.int16),
        grid=np.array([[i, 1], [2, -i]], dtype=np.float32),
        raw=np.array([i % 256, 1, 2, 255], dtype=np.uint8),
    )


def variable(i: int) -> Variable:
    """A Variable sample whose sizes depend on ``i``."""
    return Variable(
        id=i,
        name="n" * (i % 12),
        note=f"note {i} ü",
        values=np.arange(i % 4, dtype=np.float32),
        blob=np.arange(i % 5, dtype=np.uint8),
        points=[Point(x=j, y=-j) for j in range(i % 3)],
        big=2**63 + i,
        color=Color.GREEN,
        maybe=None if i % 2 else i,
    )


class TestSparkSchema:
    def test_envelope_columns_come_first(self) -> None:
        """Every row schema starts with channel, offset, store/source timestamps and key."""
        schema = spark_schema(Reading)
        assert tuple(schema.fieldNames()[:5]) == ENVELOPE
        assert schema.fieldNames()[5:] == ["sensor", "seq", "value"]
        assert schema["_store_timestamp"].dataType == st.TimestampType()
        assert schema["_offset"].dataType == st.LongType()

    def test_types_map_without_wrap_around(self) -> None:
        """Unsigned ints widen, uint64 is DecimalType(20, 0), enums are strings, octets binary."""
        schema = spark_schema(Fixed, envelope=False)
        kinds = {f.name: f.dataType for f in schema.fields}
        assert kinds["u8"] == st.ShortType()
        assert kinds["u16"] == st.IntegerType()
        assert kinds["u32"] == st.LongType()
        assert kinds["u64"] == st.DecimalType(20, 0)
        assert kinds["color"] == st.StringType()
        assert kinds["raw"] == st.BinaryType()
        assert kinds["vec"] == st.ArrayType(st.ShortType(), containsNull=False)
        assert kinds["grid"] == st.ArrayType(st.ArrayType(st.FloatType(), False), False)
        assert isinstance(kinds["point"], st.StructType)
        assert schema["id"].metadata["idl.key"] is True

    def test_variable_kinds_map(self) -> None:
        """Strings keep their bound in metadata; sequence<octet> is binary; optionals nullable."""
        schema = spark_schema(Variable, envelope=False)
        assert schema["name"].metadata["idl.bound"] == 12
        assert schema["blob"].dataType == st.BinaryType()
        assert schema["points"].dataType.elementType["y"].dataType == st.DoubleType()
        assert schema["maybe"].nullable
        assert not schema["name"].nullable

    @pytest.mark.parametrize("t", [Reading, Fixed, Variable])
    def test_arrow_schema_is_what_spark_expects(self, t: type) -> None:
        """The decoder's Arrow schema is Spark's Arrow form of spark_schema (what read() yields)."""
        assert to_arrow_schema(spark_schema(t), timezone="UTC").equals(arrow_row_schema(t))


class TestDecode:
    def test_fixed_types_take_the_numpy_path(self) -> None:
        """A fixed-size final type gets a CDR dtype whose item size is the serialised length."""
        dtype = cdr_dtype(Fixed)
        assert dtype is not None
        assert dtype.itemsize == len(fixed(1).serialize())
        assert cdr_dtype(Variable) is None

    def test_bulk_decode_equals_per_sample_decode(self) -> None:
        """Decoding through numpy gives the same rows as deserialising each sample."""
        samples = [fixed(i) for i in range(50)]
        payloads = [s.serialize() for s in samples]
        bulk = decode_batch(Fixed, payloads, 2, range(50), [10**18] * 50)
        rows = bulk.to_pylist()
        info = describe(Fixed)
        for sample, row in zip(samples, rows, strict=True):
            assert {f.name: row[f.name] for f in info.fields} == {
                f.name: _py_value(getattr(sample, f.name), f) for f in info.fields
            }
        assert rows[7]["u64"] == decimal.Decimal(2**64 - 8)
        assert rows[7]["color"] == "GREEN"
        assert rows[8]["color"] == "BLUE"
        assert rows[3]["grid"] == [[3.0, 1.0], [2.0, -3.0]]
        assert rows[3]["raw"] == bytes([3, 1, 2, 255])
        assert rows[3]["point"] == {"x": 4.5, "y": -1.0}
        assert rows[3]["ch"] == "a"
        assert rows[3]["u8"] == 252
        assert rows[3]["_key"] == "[3]"
        assert rows[3]["_channel"] == 2

    def test_decoded_rows_round_trip_to_samples(self) -> None:
        """Rows decoded from CDR turn back into equal samples (fixed and variable types)."""
        for t, make in ((Fixed, fixed), (Variable, variable)):
            samples = [make(i) for i in range(12)]
            batch = decode_batch(t, [s.serialize() for s in samples], 0, range(12), None)
            back = [row_to_sample(r, t) for r in batch.to_pylist()]
            assert [b.serialize() for b in back] == [s.serialize() for s in samples]

    def test_variable_rows_carry_every_kind(self) -> None:
        """Strings, bytes, nested sequences and nulls for absent optionals reach the row."""
        row = decode_batch(Variable, [variable(5).serialize()], 1, [9], None).to_pylist()[0]
        assert row["note"] == "note 5 ü"
        assert row["blob"] == bytes(range(0))
        assert row["points"] == [{"x": 0.0, "y": -0.0}, {"x": 1.0, "y": -1.0}]
        assert row["maybe"] is None
        assert row["big"] == decimal.Decimal(2**63 + 5)
        assert json.loads(row["_key"]) == [5]

    @pytest.mark.parametrize(
        "sensors",
        [
            [i % 7 - 3 for i in range(5000)],  # a few repeated ids, negatives included
            [7 * i - 10_000 for i in range(5000)],  # as many ids as rows, wide range
            [-(2**31), 2**31 - 1, 0, 0, -1],  # the int32 extremes
            [42],
        ],
        ids=["few-ids", "wide-range", "extremes", "one-row"],
    )
    def test_key_column_is_the_json_of_each_rows_key(self, sensors: list[int]) -> None:
        """``_key`` is each row's key as JSON, whatever the spread of the key's values."""
        samples = [Reading(sensor=s, seq=i, value=0.5) for i, s in enumerate(sensors)]
        batch = decode_batch(Reading, [r.serialize() for r in samples], 0, range(len(sensors)))
        keys = batch.column("_key").to_pylist()
        assert keys == [f"[{s}]" for s in sensors]
        assert [json.loads(k) for k in keys] == [[s] for s in sensors]

    def test_timestamps_are_utc_microseconds(self) -> None:
        """Store timestamps (ns) become UTC timestamps; unknown source timestamps are null."""
        batch = decode_batch(
            Reading,
            [Reading(sensor=1, seq=2, value=3.0).serialize()],
            0,
            [0],
            [1_700_000_000_123_456_789],
        )
        ts = batch.column("_store_timestamp")[0].as_py()
        assert ts.isoformat() == "2023-11-14T22:13:20.123456+00:00"
        assert batch.column("_source_timestamp")[0].as_py() is None


class TestRowToSample:
    def test_bad_value_names_the_column(self) -> None:
        """A value that does not fit the type fails with a message naming its column."""
        with pytest.raises(BadParameterError, match="sensor"):
            row_to_sample({"sensor": 2**40, "seq": 1, "value": 1.0}, Reading)
        with pytest.raises(BadParameterError, match="color"):
            row_to_sample(
                {
                    **decode_batch(Fixed, [fixed(1).serialize()], 0, [0], None).to_pylist()[0],
                    "color": "PURPLE",
                },
                Fixed,
            )

    def test_missing_column_is_named(self) -> None:
        """Rows without one of the type's members fail naming the missing column."""
        with pytest.raises(BadParameterError, match="'value'"):
            row_to_sample({"sensor": 1, "seq": 1}, Reading)

    def test_public_names(self) -> None:
        """dcps.spark exports exactly its sorted __all__."""
        assert dcps.spark.__all__ == sorted(dcps.spark.__all__)
        assert all(hasattr(dcps.spark, n) for n in dcps.spark.__all__)


class TestEncode:
    def test_bulk_encoding_is_byte_exact(self) -> None:
        """Rows encoded in bulk give exactly the CDR the binding produces (fixed and variable)."""
        for t, make in ((Fixed, fixed), (Variable, variable), (Reading, None)):
            samples = (
                [make(i) for i in range(40)]
                if make
                else [Reading(sensor=i, seq=i * 3, value=i / 8) for i in range(40)]
            )
            payloads = [s.serialize() for s in samples]
            batch = decode_batch(t, payloads, 0, range(40), None)
            assert encode_batch(t, batch) == payloads

    def test_bulk_encoding_names_the_bad_column(self) -> None:
        """An out-of-range integer or unknown enum name in a batch fails naming its column."""
        batch = decode_batch(Fixed, [fixed(i).serialize() for i in range(5)], 0, range(5), None)
        names = batch.schema.names
        wide = batch.set_column(
            names.index("i16"), "i16", pa.array([1, 2, 3, 4, 70000], pa.int32())
        )
        with pytest.raises(BadParameterError, match=r"column 'i16': 70000 is out of range"):
            encode_batch(Fixed, wide)
        purple = batch.set_column(names.index("color"), "color", pa.array(["RED"] * 4 + ["PURPLE"]))
        with pytest.raises(BadParameterError, match=r"column 'color': 'PURPLE' is not a member"):
            encode_batch(Fixed, purple)
