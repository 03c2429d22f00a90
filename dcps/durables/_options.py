"""How a durable subscriber acknowledges, and where a new durable starts."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Literal, TypeAlias

from dcps.channels._position import Position
from dcps.wire._durables import DurableInfo, DurableKind, StartMode
from idl._errors import BadParameterError, PreconditionNotMetError
from idl._public import show_as

__all__ = ["AckMode", "AckTiming", "FilterConflictError", "Start", "start_fields"]


class AckMode(enum.Enum):
    """Who acknowledges received elements.

    .. versionadded:: 0.3
    """

    EXPLICIT = "explicit"
    """The application acknowledges (or rolls back) each element."""
    AUTO = "auto"
    """dcps acknowledges: with ``on_element``, once the callback returns for the
    elements it processed; with :meth:`~DurableSubscriber.receive`, an element is
    acknowledged at the next ``receive`` (or at ``close``)."""


class AckTiming(enum.Enum):
    """When an acknowledgement reaches the store.

    .. versionadded:: 0.3
    """

    SYNC = "sync"
    """``ack()`` returns once the store has recorded the acknowledgement (fewest duplicates)."""
    ASYNC = "async"
    """``ack()`` returns at once; acknowledgements go to the store in batches on a
    timer (``ack_interval``). Elements acknowledged but not yet sent when the
    subscriber's process dies are delivered again: duplicates are possible."""


class FilterConflictError(PreconditionNotMetError):
    """Another subscriber of a shared durable named a different filter, which now decides
    what the durable keeps (delivered asynchronously to the earlier subscribers).

    .. versionadded:: 0.3
    """

    def __init__(self, durable: str, new_filter: str) -> None:
        super().__init__(
            f"durable {durable!r}: another subscriber named filter {new_filter!r}; from now on "
            "it decides which elements the durable keeps"
        )
        self.durable = durable
        self.new_filter = new_filter


#: Where a new durable starts: ``"head"`` (the oldest element kept), ``"tail"`` (only
#: elements published from now on), or positions (the first element to deliver per channel).
Start: TypeAlias = Literal["head", "tail"] | Mapping[int, int] | Iterable[Position]


def start_fields(start: Start) -> tuple[StartMode, tuple[tuple[int, int], ...]]:
    """The wire form of a :data:`Start`; anything else raises ``BadParameterError``."""
    if start == "head":
        return StartMode.HEAD, ()
    if start == "tail":
        return StartMode.TAIL, ()
    if isinstance(start, str):
        raise BadParameterError(f"start must be 'head', 'tail' or positions, not {start!r}")
    pairs = list(start.items()) if isinstance(start, Mapping) else list(start)
    out = []
    for pair in pairs:
        if (
            not isinstance(pair, tuple)
            or len(pair) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
            or pair[0] < 0
            or pair[1] < 0
        ):
            raise BadParameterError(
                f"a start position is (channel, offset) with both >= 0, not {pair!r}"
            )
        out.append((int(pair[0]), int(pair[1])))
    if len({c for c, _ in out}) != len(out):
        raise BadParameterError("start positions name a channel twice")
    return StartMode.POSITIONS, tuple(out)


# the wire's values a user meets are shown under the public package
show_as("dcps.durables", AckMode, AckTiming, DurableInfo, DurableKind, FilterConflictError)
