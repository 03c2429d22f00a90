"""The topic type the examples share: a keyed sensor reading."""

from __future__ import annotations

import idl


class Kind(idl.Enum, typename="fleet::Kind"):
    """What a sensor measures."""

    TEMPERATURE = 0
    HUMIDITY = 1


class Reading(idl.Struct, typename="fleet::Reading"):
    """One reading of one sensor; ``sensor_id`` is the key, so each sensor is an instance."""

    sensor_id: idl.key[idl.int32]
    kind: Kind
    value: idl.float64
    site: idl.bounded_str[16]
