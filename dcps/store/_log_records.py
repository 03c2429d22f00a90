"""The values the store's log hands out: topics, channel states, elements."""

from __future__ import annotations

import attrs

__all__ = ["ChannelState", "Element", "TopicInfo"]


@attrs.frozen
class TopicInfo:
    """A channelled topic as the log knows it.

    ``type_identity`` is the opaque identity (type name and a hash of its
    structure) recorded when the topic was created, or by the first client
    that named one; empty while unknown.
    """

    name: str
    channel_count: int
    retain_consumed: bool
    type_name: str = ""
    type_identity: str = ""


@attrs.frozen
class Element:
    """One stored element: its offset, accept timestamp (ns) and payload bytes."""

    offset: int
    timestamp_ns: int
    data: bytes


@attrs.frozen
class ChannelState:
    """The head (first available offset) and tail (last offset, -1 if none) of a channel."""

    head: int
    tail: int

    @property
    def count(self) -> int:
        """Elements currently stored in the channel."""
        return self.tail - self.head + 1
