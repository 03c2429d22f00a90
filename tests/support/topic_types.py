"""Topic types shared by the tests and their peer processes."""

from __future__ import annotations

import idl


class Reading(idl.Struct, typename="sensors::Reading"):
    """A keyed sensor reading."""

    sensor: idl.key[idl.int32]
    value: idl.float64
    label: idl.bounded_str[16]


class Blob(idl.Struct, typename="bench::Blob"):
    """A keyed struct with a numpy payload."""

    id: idl.key[idl.int32]
    payload: idl.sequence[idl.uint8]
