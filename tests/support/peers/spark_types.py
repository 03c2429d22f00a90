"""Topic types of the Spark tests (imported by Spark's Python workers too)."""

from __future__ import annotations

import idl


class Color(idl.Enum, typename="spark_test::Color"):
    """An enum mapped to its member names."""

    RED = 0
    GREEN = 3
    BLUE = 7


class Point(idl.Struct, typename="spark_test::Point"):
    """A nested fixed-size struct."""

    x: idl.float32
    y: idl.float64


class Reading(idl.Struct, typename="spark_test::Reading"):
    """A keyed fixed-size reading (decoded in bulk through numpy)."""

    sensor: idl.key[idl.int32]
    seq: idl.int64
    value: idl.float64


class Stats(idl.Struct, typename="spark_test::Stats"):
    """Per-sensor statistics a Spark job publishes back."""

    sensor: idl.key[idl.int32]
    count: idl.int64
    mean: idl.float64


class Fixed(idl.Struct, typename="spark_test::Fixed"):
    """Every fixed-size kind: widened unsigned ints, enums, arrays, octets, nesting."""

    id: idl.key[idl.int32]
    i8: idl.int8
    i16: idl.int16
    u8: idl.uint8
    u16: idl.uint16
    u32: idl.uint32
    u64: idl.uint64
    f32: idl.float32
    flag: bool
    ch: idl.char
    color: Color
    point: Point
    vec: idl.array[idl.int16, 3]
    grid: idl.array[idl.array[idl.float32, 2], 2]
    raw: idl.array[idl.octet, 4]


class Variable(idl.Struct, typename="spark_test::Variable"):
    """Variable-size members: strings, sequences, bytes, optionals, structs in sequences."""

    id: idl.key[idl.int32]
    name: idl.bounded_str[12]
    note: idl.string
    values: idl.sequence[idl.float32]
    blob: idl.sequence[idl.uint8]
    points: idl.sequence[Point]
    big: idl.uint64
    color: Color
    maybe: idl.optional[idl.int32]
