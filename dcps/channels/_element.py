"""A received element of a channelled topic: its value, position and accept time."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import datetime
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from idl._errors import BadParameterError, PreconditionNotMetError

from ._position import CommitResult, Position

if TYPE_CHECKING:
    from ._subscriber import ChannelSubscriber

__all__ = ["Element"]

T = TypeVar("T")
_new_tuple = tuple.__new__


class Element(tuple[Any, ...], Generic[T]):
    """A received element: its value, its position and the store's accept time.

    :meth:`commit` and :meth:`commit_async` commit the element's position
    through the subscriber that received it. Elements are immutable and
    compare (and hash) by value, position and timestamp.

    Underneath, like :class:`Position`, an element is a tuple
    ``(value, channel, offset, timestamp, subscriber)``: a subscriber builds
    one per received element, and a tuple is CPython's cheapest immutable
    record (one allocation, no per-field setters; the position is built when
    asked for). Use the attributes; the tuple layout is not API.
    """

    __slots__ = ()

    def __new__(
        cls,
        value: T,
        position: Position,
        timestamp: datetime,
        subscriber: ChannelSubscriber[Any] | None = None,
    ) -> Element[T]:
        if not isinstance(position, Position):
            raise BadParameterError(f"position must be a Position, got {position!r}")
        return _new_tuple(cls, (value, position[0], position[1], timestamp, subscriber))

    if TYPE_CHECKING:

        @property
        def value(self) -> T:
            """The element's value (a sample of the topic's type)."""

        @property
        def channel(self) -> int:
            """The channel the element came from."""

        @property
        def timestamp(self) -> datetime:
            """When the store accepted the element (UTC, the store's clock)."""

    else:  # C-level getters: read once or more for every received element
        value = property(itemgetter(0), doc="The element's value (a sample of the topic's type).")
        channel = property(itemgetter(1), doc="The channel the element came from.")
        timestamp = property(
            itemgetter(3), doc="When the store accepted the element (UTC, the store's clock)."
        )

    @property
    def position(self) -> Position:
        """Where the element sits: ``Position(channel, offset)``."""
        return _new_tuple(Position, (self[1], self[2]))

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self[:4] == other[:4]

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

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
