"""A received element of a channelled topic: its value, position and accept time."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dcps._record import Record, field, new_record
from idl._errors import BadParameterError, PreconditionNotMetError
from idl._public import show_as

from ._position import CommitResult, Position

if TYPE_CHECKING:
    from ._subscriber import ChannelSubscriber

__all__ = ["Element", "new_element"]

T = TypeVar("T")


class Element(Record, Generic[T]):
    """A received element: its value, its position and the store's accept time.

    :meth:`commit` and :meth:`commit_async` commit the element's position
    through the subscriber that received it. Elements are immutable value
    records (``dcps._record``): two elements are equal (and hash alike) when
    their value, position and timestamp are, whichever subscriber received
    them; an element never equals a plain tuple (nor ``tuple(element)``).

    Underneath, an element is a tuple ``(value, channel, offset, timestamp,
    subscriber)``: a subscriber builds one per received element, and a tuple
    is CPython's cheapest immutable record (the position is built when asked
    for). Use the attributes; the tuple layout is not API.
    """

    __slots__ = ()
    __match_args__ = ("value", "position", "timestamp")

    value: T = field(0, "The element's value (a sample of the topic's type).")
    channel: int = field(1, "The channel the element came from.")
    timestamp: datetime = field(3, "When the store accepted the element (UTC, the store's clock).")

    def __new__(
        cls,
        value: T,
        position: Position,
        timestamp: datetime,
        subscriber: ChannelSubscriber[Any] | None = None,
    ) -> Element[T]:
        if not isinstance(position, Position):
            raise BadParameterError(f"position must be a Position, got {position!r}")
        element: Element[T] = new_record(
            cls, (value, position[0], position[1], timestamp, subscriber)
        )
        return element

    @property
    def position(self) -> Position:
        """Where the element sits: ``Position(channel, offset)``."""
        position: Position = new_record(Position, (self[1], self[2]))
        return position

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return False if isinstance(other, tuple) else NotImplemented
        return self[:4] == other[:4]

    def __hash__(self) -> int:
        return hash(self[:4])

    def __repr__(self) -> str:
        return f"Element(value={self[0]!r}, position={self.position!r}, timestamp={self[3]!r})"

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickled without the subscriber
        return (self[0], self.position, self[3])

    def _receiver(self) -> ChannelSubscriber[Any]:
        subscriber: ChannelSubscriber[Any] | None = self[4]
        if subscriber is None:
            raise PreconditionNotMetError(
                f"element at {self.position} was not received by a subscriber: nothing to commit "
                "it through (use ChannelSubscriber.commit)"
            )
        return subscriber

    def commit(self) -> CommitResult:
        """Commit this element's position (and every earlier one of its channel).

        Goes through the subscriber that received the element, with the same
        results as :meth:`ChannelSubscriber.commit`.

        .. versionadded:: 0.2
        """
        return self._receiver().commit(self[1], self.position)

    def commit_async(self) -> Future[CommitResult]:
        """Commit this element's position asynchronously; the future holds its result.

        .. versionadded:: 0.2
        """
        future: Future[CommitResult] = self._receiver().commit_async(self[1], self.position)
        return future


def new_element(
    value: Any, channel: int, offset: int, timestamp: datetime, subscriber: Any
) -> Element[Any]:
    """An Element from trusted parts (the subscriber's hot path; skips checks)."""
    element: Element[Any] = new_record(Element, (value, channel, offset, timestamp, subscriber))
    return element


show_as("dcps.channels", Element)
