"""An element received from a durable: value, position, accept time, redelivery count."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from dcps.channels._position import Position
from idl._errors import PreconditionNotMetError
from idl._public import show_as

if TYPE_CHECKING:
    from ._subscriber import DurableSubscriber

__all__ = ["DurableElement"]

T = TypeVar("T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@attrs.frozen(eq=False, repr=False)
class DurableElement(Generic[T]):
    """One element delivered by a durable subscription.

    ``redelivery_count`` is 0 the first time an element is delivered and
    grows each time it comes again (rolled back, or its subscriber died
    before acknowledging it). A persistent durable's counts survive a store
    restart (a store killed in the round of a first delivery may forget that
    one delivery); a non-persistent durable goes with its store.
    :meth:`ack` and :meth:`rollback` go through the subscriber that received
    it. Elements compare by position and redelivery count.

    .. versionadded:: 0.3
    """

    value: T
    """The element's value (a sample of the topic's type)."""
    channel: int
    """The channel it was published in."""
    offset: int
    """Its offset in the channel."""
    timestamp_ns: int
    """When the store accepted it (ns since the Unix epoch, the store's clock)."""
    redelivery_count: int = 0
    """How many times it was delivered before."""
    topic: str = ""
    """The topic it was published on (a last-value durable covers sibling topics)."""
    subscriber: DurableSubscriber[Any] | None = attrs.field(default=None, repr=False)

    @property
    def position(self) -> Position:
        """``Position(channel, offset)``."""
        return Position(self.channel, self.offset)

    @property
    def timestamp(self) -> datetime:
        """When the store accepted the element (UTC)."""
        return _EPOCH + timedelta(microseconds=self.timestamp_ns // 1000)

    @property
    def redelivered(self) -> bool:
        """Whether it was delivered before (JMS's ``JMSRedelivered``)."""
        return self.redelivery_count > 0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DurableElement):
            return NotImplemented
        return (self.topic, self.channel, self.offset, self.redelivery_count) == (
            other.topic,
            other.channel,
            other.offset,
            other.redelivery_count,
        )

    def __hash__(self) -> int:
        return hash((self.topic, self.channel, self.offset, self.redelivery_count))

    def __repr__(self) -> str:
        return (
            f"DurableElement(value={self.value!r}, position={self.position!r}, "
            f"redelivery_count={self.redelivery_count})"
        )

    def _receiver(self) -> DurableSubscriber[Any]:
        if self.subscriber is None:
            raise PreconditionNotMetError(
                f"element at {self.position} was not received by a subscriber"
            )
        return self.subscriber

    def ack(self) -> None:
        """Acknowledge this element (see :meth:`DurableSubscriber.ack`)."""
        self._receiver().ack(self)

    def ack_async(self) -> Future[None]:
        """Acknowledge this element; the future completes once the store has it."""
        return self._receiver().ack_async(self)

    def rollback(self) -> None:
        """Give this element back for redelivery (see :meth:`DurableSubscriber.rollback`)."""
        self._receiver().rollback(self)


show_as("dcps.durables", DurableElement)
