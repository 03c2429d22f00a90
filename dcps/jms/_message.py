"""A received JMS message: the body sample and its header fields."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

from dcps.channels._position import Position
from idl._public import show_as

from ._destination import Topic

if TYPE_CHECKING:
    from ._session import TopicSession

__all__ = ["Message"]

T = TypeVar("T")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@attrs.frozen(eq=False)
class Message(Generic[T]):
    """A message received by a :class:`TopicSubscriber` (JMS ``Message``).

    ``body`` is the sample published; the other attributes are JMS's header
    fields. :meth:`acknowledge` acknowledges every message its session has
    consumed so far (client acknowledgement mode).

    .. versionadded:: 0.3
    """

    body: T
    message_id: str
    """``JMSMessageID``: unique per message (``ID:<publisher>-<n>``)."""
    timestamp_ms: int
    """``JMSTimestamp``: when it was published (ms since the Unix epoch, the publisher's clock)."""
    destination: Topic
    """``JMSDestination``: the topic it was published to."""
    priority: int = 4
    """``JMSPriority`` (0-9, as given to the publisher; delivery order does not depend on it)."""
    correlation_id: str | None = None
    """``JMSCorrelationID``."""
    jms_type: str | None = None
    """``JMSType``."""
    delivery_count: int = 1
    """``JMSXDeliveryCount``: 1 the first time it is delivered."""
    position: Position = attrs.field(factory=lambda: Position(0, 0))
    """Its position in the physical topic (channel, offset)."""
    session: TopicSession | None = attrs.field(default=None, repr=False)
    expiration_ms: int = 0
    """``JMSExpiration``: when it expires (ms since the Unix epoch, the publisher's clock:
    its timestamp plus its time to live); 0 when it never does."""

    @property
    def redelivered(self) -> bool:
        """``JMSRedelivered``: it was delivered before (and not acknowledged)."""
        return self.delivery_count > 1

    @property
    def timestamp(self) -> datetime:
        """``JMSTimestamp`` as a UTC datetime."""
        return _EPOCH + timedelta(milliseconds=self.timestamp_ms)

    @property
    def expiration(self) -> datetime | None:
        """``JMSExpiration`` as a UTC datetime, None when it never expires."""
        return _EPOCH + timedelta(milliseconds=self.expiration_ms) if self.expiration_ms else None

    def acknowledge(self) -> None:
        """Acknowledge every message consumed by this message's session so far (JMS's
        client acknowledgement); ignored in the other modes, as JMS says."""
        if self.session is not None:
            self.session._acknowledge_from_message()

    def __repr__(self) -> str:
        return (
            f"Message(body={self.body!r}, message_id={self.message_id!r}, "
            f"destination={self.destination.name!r}, redelivered={self.redelivered})"
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Message):
            return NotImplemented
        return (self.message_id, self.delivery_count) == (other.message_id, other.delivery_count)

    def __hash__(self) -> int:
        return hash((self.message_id, self.delivery_count))


def from_envelope(
    envelope: Any, topic: Topic, count: int, position: Position, session: Any
) -> Message[Any]:
    """The :class:`Message` an envelope carries."""
    return Message(
        envelope.body,
        envelope.message_id,
        envelope.timestamp,
        topic,
        envelope.priority,
        envelope.correlation_id or None,
        envelope.jms_type or None,
        count + 1,
        position,
        session,
        getattr(envelope, "expiration", 0),
    )


def expired(envelope: Any, now_ms: int) -> bool:
    """Whether the message ``envelope`` carries has expired at ``now_ms`` (ms since the
    Unix epoch; never for an envelope without expiration)."""
    expiration: int = getattr(envelope, "expiration", 0)
    return 0 < expiration <= now_ms


show_as("dcps.jms", Message)
