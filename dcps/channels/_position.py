"""Positions of elements in a channel, and the results of committing them."""

from __future__ import annotations

import enum
from typing import Any

import attrs

from idl._errors import BadParameterError

__all__ = ["CommitResult", "CommitStatus", "Position", "trusted_position"]


def _check_channel(_: object, __: attrs.Attribute[int], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise BadParameterError(f"Position channel must be an int >= 0, got {value!r}")


def _check_offset(_: object, __: attrs.Attribute[int], value: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < -1:
        raise BadParameterError(f"Position offset must be an int >= -1, got {value!r}")


@attrs.frozen(order=True)
class Position:
    """Where an element sits in a channelled topic: ``(channel, offset)``.

    Offsets are dense and start at 0 in every channel, so positions of one
    channel compare as the elements were accepted by the store. Offset ``-1``
    means "before the first element" (what a seek to the head of an empty
    channel returns). Positions are hashable and JSON-serialisable through
    :meth:`to_json` / :meth:`from_json` (``{"channel": c, "offset": o}``).
    """

    channel: int = attrs.field(validator=_check_channel)
    offset: int = attrs.field(validator=_check_offset)

    def to_json(self) -> dict[str, int]:
        """Return the JSON-ready form ``{"channel": c, "offset": o}``."""
        return {"channel": self.channel, "offset": self.offset}

    @classmethod
    def from_json(cls, value: Any) -> Position:
        """Rebuild a position from :meth:`to_json`'s output."""
        if not isinstance(value, dict) or set(value) != {"channel", "offset"}:
            raise BadParameterError(
                f"a Position is a JSON object with keys 'channel' and 'offset', got {value!r}"
            )
        return cls(value["channel"], value["offset"])

    def __str__(self) -> str:
        return f"{self.channel}:{self.offset}"


def trusted_position(channel: int, offset: int) -> Position:
    """A Position from values known to be valid (skips validation on hot paths)."""
    position = object.__new__(Position)
    object.__setattr__(position, "channel", channel)
    object.__setattr__(position, "offset", offset)
    return position


class CommitStatus(enum.Enum):
    """The outcome of committing one channel's position."""

    COMMITTED = "committed"
    """The position (and every earlier one in the channel) is now committed."""
    ALREADY_COMMITTED = "already_committed"
    """The group had already committed this position or a later one."""
    NOTHING_TO_COMMIT = "nothing_to_commit"
    """The channel holds nothing at or before the position (empty, or removed)."""
    REJECTED = "rejected"
    """The position does not exist yet in the channel (beyond its tail)."""
    UNOWNED = "unowned"
    """The committing subscriber does not own the channel."""


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
