"""idl.validate: every way a sample can fail to fit its type."""

import time
from typing import Any

import numpy as np
import pytest

import idl


class Mode(idl.Enum, typename="v::Mode"):
    OFF = 0
    ON = 1


class Inner(idl.Struct, typename="v::Inner"):
    a: idl.int8
    b: idl.string


class Sample(idl.Struct, typename="v::Sample"):
    k: idl.key[idl.uint16]
    i32: idl.int32
    u64: idl.uint64
    f: idl.float32
    flag: bool
    c: idl.char
    o: idl.octet
    name: idl.bounded_str[5]
    mode: Mode
    inner: Inner
    seq: idl.sequence[idl.int16, 3]
    arr: idl.array[idl.float64, 2]
    grid: idl.array[idl.array[idl.uint8, 2], 2]
    names: idl.sequence[idl.bounded_str[2]]
    inners: idl.sequence[Inner]


def good(**changes: Any) -> Sample:
    s = Sample(
        k=1,
        i32=-5,
        u64=2**64 - 1,
        f=1.5,
        flag=True,
        c="x",
        o=255,
        name="abcde",
        mode=Mode.ON,
        inner=Inner(-128, ""),
        seq=[1, 2, 3],
        arr=np.zeros(2),
        grid=np.zeros((2, 2), dtype=np.uint8),
        names=["ab"],
        inners=[Inner(1, "z")],
    )
    for k, v in changes.items():
        setattr(s, k, v)
    return s


class TestValidSamples:
    def test_valid_sample_passes(self) -> None:
        """A sample within every bound validates."""
        idl.validate(good(), Sample)

    def test_alternative_value_forms_pass(self) -> None:
        """numpy scalars, ints for floats, enum ints and bytes for octets are accepted."""

        class Bytes(idl.Struct):
            raw: idl.sequence[idl.octet]

        idl.validate(good(i32=np.int32(3), f=2, mode=1, seq=np.array([1, 2], np.int16)), Sample)
        idl.validate(Bytes(raw=b"\x00\xff"), Bytes)

    def test_validate_is_fast(self) -> None:
        """Validation costs well under a millisecond per sample (compiled once per type)."""
        sample = good()
        idl.validate(sample, Sample)
        start = time.perf_counter()
        for _ in range(1000):
            idl.validate(sample, Sample)
        assert (time.perf_counter() - start) / 1000 < 1e-3


class TestValidationErrors:
    def test_wrong_sample_class(self) -> None:
        """A sample of another class names both types."""
        with pytest.raises(idl.IdlError, match="expected v::Sample, got Inner"):
            idl.validate(Inner(1, "x"), Sample)

    @pytest.mark.parametrize(
        ("changes", "message"),
        [
            ({"i32": "5"}, r"i32: expected int, got str"),
            ({"i32": 2**31}, r"i32: 2147483648 is out of range for int32"),
            ({"k": -1}, r"k: -1 is out of range for uint16"),
            ({"u64": 2**64}, r"u64: .* out of range for uint64"),
            ({"o": 256}, r"o: 256 is out of range for octet"),
            ({"i32": True}, r"i32: expected int, got bool"),
            ({"f": "1.0"}, r"f: expected float, got str"),
            ({"flag": 1}, r"flag: expected bool, got int"),
            ({"c": "xy"}, r"c: char must be exactly one character"),
            ({"c": ""}, r"c: char must be exactly one character"),
            ({"c": 65}, r"c: expected a one-character str, got int"),
            ({"name": "abcdef"}, r"name: string of 6 bytes exceeds its bound 5"),
            ({"name": "abcdé"}, r"name: string of 6 bytes exceeds its bound 5"),
            ({"name": b"ab"}, r"name: expected str, got bytes"),
            ({"name": "a\ud800"}, r"name: string is not encodable as UTF-8"),
            ({"name": "a\0b"}, r"name: string contains a NUL character"),
            ({"mode": 7}, r"mode: unknown Mode value 7"),
            ({"mode": "ON"}, r"mode: expected Mode, got str"),
            ({"inner": None}, r"inner: missing value \(None\)"),
            ({"i32": None}, r"i32: missing value \(None\)"),
            ({"inner": Inner(-129, "")}, r"inner.a: -129 is out of range for int8"),
            ({"inner": Inner(1, None)}, r"inner.b: missing value"),  # type: ignore[arg-type]
            ({"seq": [1, 2, 3, 4]}, r"seq: sequence of length 4 exceeds its bound 3"),
            ({"seq": np.zeros(4, np.int16)}, r"seq: sequence of length 4 exceeds its bound 3"),
            ({"seq": [1, 70000]}, r"seq\[1\]: 70000 is out of range for int16"),
            ({"seq": np.array([1, 70000], np.int32)}, r"seq: element 70000 is out of range"),
            ({"seq": np.array([1.5])}, r"seq: numpy dtype float64 does not fit int16"),
            ({"seq": 5}, r"seq: expected a sequence, got int"),
            ({"arr": [1.0]}, r"arr: array must have length 2, got 1"),
            ({"arr": np.zeros(3)}, r"arr: array must have shape \(2,\), got \(3,\)"),
            ({"grid": np.zeros((2, 3), np.uint8)}, r"grid: array must have shape \(2, 2\)"),
            ({"grid": [[1, 2], [3]]}, r"grid\[1\]: array must have length 2, got 1"),
            ({"names": ["abc"]}, r"names\[0\]: string of 3 bytes exceeds its bound 2"),
            ({"inners": [Inner(1, "a"), None]}, r"inners\[1\]: missing value"),
            ({"inners": [Inner(1, "a"), Inner(300, "")]}, r"inners\[1\].a: 300 is out of range"),
            ({"inners": ["x"]}, r"inners\[0\]: expected v::Inner, got str"),
        ],
    )
    def test_error_names_path_and_problem(self, changes: dict[str, Any], message: str) -> None:
        """Each invalid value raises IdlError naming the field path and what is wrong."""
        with pytest.raises(idl.IdlError, match=message):
            idl.validate(good(**changes), Sample)

    def test_error_is_a_value_error(self) -> None:
        """Validation errors are also BadParameterError and ValueError."""
        from idl._errors import BadParameterError

        with pytest.raises(BadParameterError):
            idl.validate(good(i32="x"), Sample)
        with pytest.raises(ValueError, match="i32"):
            idl.validate(good(i32="x"), Sample)

    def test_optional_may_be_none_but_not_wrong(self) -> None:
        """An optional member accepts None, and still rejects a wrong value."""

        class Opt(idl.Struct):
            o: idl.optional[idl.uint8]

        idl.validate(Opt(None), Opt)
        idl.validate(Opt(7), Opt)
        with pytest.raises(idl.IdlError, match="o: 256 is out of range for uint8"):
            idl.validate(Opt(256), Opt)

    def test_non_topic_type(self) -> None:
        """validate against something that is not a topic type raises IdlError."""
        with pytest.raises(idl.IdlError, match="not a topic type"):
            idl.validate(good(), dict)
