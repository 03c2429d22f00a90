"""The configuration of a channelled topic."""

from __future__ import annotations

from typing import Any

import attrs

from dcps.wire._names import check_name
from idl._errors import BadParameterError
from idl._public import show_as

__all__ = ["ChannelledTopic"]


def _check_type(_: object, __: attrs.Attribute[Any], value: Any) -> None:
    if not (
        isinstance(value, type) and hasattr(value, "serialize") and hasattr(value, "deserialize")
    ):
        raise BadParameterError(
            f"a channelled topic's type must be a cyclonedds IdlStruct class, got {value!r}"
        )


def _check_count(_: object, __: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (not isinstance(value, int) or value < 1):
        raise BadParameterError(f"channel_count must be an int >= 1 or None, got {value!r}")


def _check_topic_name(_: object, __: attrs.Attribute[Any], value: str) -> None:
    check_name("a channelled topic name", value)


@attrs.frozen
class ChannelledTopic:
    """A topic split into channels, sequenced and kept by the store.

    ``type`` is a ``cyclonedds.idl.IdlStruct`` class; samples travel as its CDR
    bytes. ``channel_count`` defaults to the store's default (17, the next prime
    above sqrt(257)) when the store first sees the topic; an explicit count that
    differs from the stored one is an ``InconsistentPolicyError``.
    ``retain_consumed`` keeps elements after every group committed them
    (``None``: the stored setting, ``False`` for a new topic).
    """

    name: str = attrs.field(validator=_check_topic_name)
    type: type = attrs.field(validator=_check_type)
    channel_count: int | None = attrs.field(default=None, validator=_check_count)
    retain_consumed: bool | None = None


show_as("dcps.channels", ChannelledTopic)
