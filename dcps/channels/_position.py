"""Positions of elements in a channel, and the results of committing them."""

from __future__ import annotations

from typing import Any

import attrs

from dcps._record import Record, field, new_record
from dcps.wire._codes import CommitStatus
from idl._errors import BadParameterError
from idl._public import show_as

__all__ = ["CommitResult", "CommitStatus", "Position", "trusted_position"]


def _check(channel: object, offset: object) -> None:
    if not isinstance(channel, int) or isinstance(channel, bool) or channel < 0:
        raise BadParameterError(f"Position channel must be an int >= 0, got {channel!r}")
    if not isinstance(offset, int) or isinstance(offset, bool) or offset < -1:
        raise BadParameterError(f"Position offset must be an int >= -1, got {offset!r}")


class Position(Record):
    """Where an element sits in a channelled topic: ``(channel, offset)``.

    Offsets are dense and start at 0 in every channel, so positions of one
    channel compare as the elements were accepted by the store. Offset ``-1``
    means "before the first element" (what a seek to the head of an empty
    channel returns). Positions are immutable, hashable, ordered by channel
    then offset, and JSON-serialisable through :meth:`to_json` /
    :meth:`from_json` (``{"channel": c, "offset": o}``).

    A position is a value record (``dcps._record``): a tuple underneath, the
    cheapest immutable value to build, but equal only to positions:
    ``Position(1, 2) == (1, 2)`` is False.
    """

    __slots__ = ()
    __match_args__ = ("channel", "offset")

    channel: int = field(0, "The channel.")
    offset: int = field(1, "The offset within the channel (-1: before the first element).")

    def __new__(cls, channel: int, offset: int) -> Position:
        _check(channel, offset)
        return new_record(cls, (channel, offset))

    def to_json(self) -> dict[str, int]:
        """Return the JSON-ready form ``{"channel": c, "offset": o}``."""
        return {"channel": self[0], "offset": self[1]}

    @classmethod
    def from_json(cls, value: Any) -> Position:
        """Rebuild a position from :meth:`to_json`'s output."""
        if not isinstance(value, dict) or set(value) != {"channel", "offset"}:
            raise BadParameterError(
                f"a Position is a JSON object with keys 'channel' and 'offset', got {value!r}"
            )
        return cls(value["channel"], value["offset"])

    def __repr__(self) -> str:
        return f"Position(channel={self[0]!r}, offset={self[1]!r})"

    def __str__(self) -> str:
        return f"{self[0]}:{self[1]}"


def trusted_position(channel: int, offset: int) -> Position:
    """A Position from values known to be valid (skips validation on hot paths)."""
    position: Position = new_record(Position, (channel, offset))
    return position


@attrs.frozen
class CommitResult:
    """The result of committing ``position`` in ``channel``."""

    channel: int
    position: Position | None
    status: CommitStatus
    message: str = ""

    @property
    def is_success(self) -> bool:
        """True when the position is committed now (whether by this call or before)."""
        return self.status in (CommitStatus.COMMITTED, CommitStatus.ALREADY_COMMITTED)


show_as("dcps.channels", Position, CommitResult, CommitStatus)
