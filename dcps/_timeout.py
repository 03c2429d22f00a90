"""The one timeout convention of dcps: what a ``timeout`` argument accepts and how it converts.

Every blocking call in dcps (and its clients: channels, the store) takes a
:data:`Timeout`: a ``datetime.timedelta`` or a number of seconds (``int`` or
``float``). Where waiting forever makes sense, ``None`` (or ``timedelta.max``,
``qos.INFINITE``) means no deadline. Negative values and anything else raise
:class:`~dcps.BadParameterError` naming the argument. :func:`timeout_ns` gives
Cyclone's nanoseconds, :func:`timeout_seconds` Python's seconds (``None`` for
forever); both go through one parser, so they agree on every value.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeAlias

from idl._errors import BadParameterError

#: A timeout: a ``timedelta`` or seconds as a number.
Timeout: TypeAlias = timedelta | float

#: Cyclone's "infinite" duration (DDS_INFINITY, INT64_MAX nanoseconds): no deadline.
INFINITE_NS = 0x7FFF_FFFF_FFFF_FFFF


def timeout_ns(value: Timeout | None, what: str = "timeout") -> int:
    """Nanoseconds of a timeout, :data:`INFINITE_NS` for ``None`` or anything as long."""
    if value is None:
        return INFINITE_NS
    if isinstance(value, timedelta):
        if value == timedelta.max:
            return INFINITE_NS
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise BadParameterError(f"{what} must be a timedelta or seconds, got {value!r}")
    if not seconds >= 0:  # also refuses NaN
        raise BadParameterError(f"{what} must not be negative, got {value!r}")
    return min(int(seconds * 1e9), INFINITE_NS)


def timeout_seconds(value: Timeout | None, what: str = "timeout") -> float | None:
    """Seconds of a timeout, ``None`` for no deadline (as ``threading`` and ``queue`` take it)."""
    ns = timeout_ns(value, what)
    return None if ns == INFINITE_NS else ns / 1e9
