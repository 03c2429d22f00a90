"""Durations: ``datetime.timedelta`` in the API, nanoseconds for Cyclone DDS."""

from __future__ import annotations

import re
from datetime import timedelta

from idl._errors import BadParameterError

__all__ = ["DDS_INFINITY_NS", "INFINITE", "from_nanos", "is_infinite", "parse_duration", "to_nanos"]

#: The infinite duration (``timedelta.max``): no deadline, no lease expiry, no lifespan end.
INFINITE: timedelta = timedelta.max

#: Cyclone DDS's ``DDS_INFINITY`` (``INT64_MAX`` nanoseconds).
DDS_INFINITY_NS = 0x7FFF_FFFF_FFFF_FFFF


def is_infinite(duration: timedelta) -> bool:
    """Whether ``duration`` is too long for DDS to tell from forever (>= ~292 years)."""
    return to_nanos(duration) == DDS_INFINITY_NS


def to_nanos(duration: timedelta) -> int:
    """Nanoseconds for Cyclone DDS; anything at or beyond ``DDS_INFINITY`` is infinity."""
    nanos = ((duration.days * 86_400 + duration.seconds) * 1_000_000 + duration.microseconds) * 1000
    return min(nanos, DDS_INFINITY_NS)


def from_nanos(nanos: int) -> timedelta:
    """A ``timedelta`` from Cyclone DDS nanoseconds (``DDS_INFINITY`` gives ``INFINITE``).

    ``timedelta`` holds microseconds, so sub-microsecond parts are rounded down.
    """
    if nanos >= DDS_INFINITY_NS:
        return INFINITE
    return timedelta(microseconds=nanos // 1000)


_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "min": 60.0,
    "h": 3600.0,
}
_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([a-z]+)?\s*$")


def parse_duration(value: object, *, where: str) -> timedelta:
    """A duration from a profile file: seconds (int/float), ``"infinite"``, or ``"100ms"``.

    ``where`` names the place for the error message.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, bool):
        raise BadParameterError(f"{where}: expected a duration, got {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise BadParameterError(f"{where}: duration must not be negative, got {value!r}")
        if value == float("inf"):
            return INFINITE
        return timedelta(seconds=value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("infinite", "infinity", "inf"):
            return INFINITE
        match = _DURATION_RE.match(text)
        if match is not None:
            unit = match.group(2) or "s"
            if unit in _UNITS:
                return timedelta(seconds=float(match.group(1)) * _UNITS[unit])
    raise BadParameterError(
        f"{where}: expected a duration (seconds, 'infinite' or e.g. '100ms'), got {value!r}"
    )
