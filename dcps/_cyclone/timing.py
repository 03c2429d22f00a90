"""Timestamps between Python datetimes and Cyclone's nanosecond integers.

Timeouts (durations) have their own module, :mod:`dcps._timeout`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from idl._errors import BadParameterError


def timestamp_ns(value: datetime | int) -> int:
    """Nanoseconds since the Unix epoch of a source timestamp (aware datetime or int ns)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise BadParameterError("a source timestamp must be timezone-aware (e.g. UTC)")
        delta = value - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise BadParameterError(
        f"a source timestamp must be an aware datetime or ns >= 0, got {value!r}"
    )


def ns_to_datetime(ns: int) -> datetime:
    """A UTC datetime from nanoseconds since the Unix epoch (microsecond precision)."""
    return datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)
