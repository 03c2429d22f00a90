"""The life of a channel publisher or subscriber: open, closing, closed."""

from __future__ import annotations

import enum

from idl._public import show_as

__all__ = ["ClientState"]


class ClientState(enum.Enum):
    """Where a :class:`ChannelPublisher` or :class:`ChannelSubscriber` is in its life.

    .. versionadded:: 0.4
    """

    OPEN = "open"
    """Usable: publishing or receiving."""
    CLOSING = "closing"
    """:meth:`close` runs (a publisher flushes, a subscriber leaves its group); new calls fail."""
    CLOSED = "closed"
    """Closed: every DDS entity is released; any call raises ``AlreadyClosedError``."""


show_as("dcps.channels", ClientState)
