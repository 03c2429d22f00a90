"""How a publisher picks the channel of each sample: by key, round robin, or a fixed one."""

from __future__ import annotations

import attrs

from idl._errors import BadParameterError
from idl._public import show_as

__all__ = ["OrderBy"]


@attrs.frozen
class OrderBy:
    """How a publisher picks the channel of each sample.

    ``OrderBy.key()`` (the default) hashes the key fields' CDR bytes (CRC-32),
    so one key always lands in one channel and keeps its order; keyless types
    then use one channel per publisher. ``OrderBy.round_robin()`` spreads
    samples over all channels (no ordering). ``OrderBy.fixed(c)`` pins one.
    """

    kind: str
    channel: int = -1

    @classmethod
    def key(cls) -> OrderBy:
        """Order per key: samples of one key go to one channel."""
        return cls("key")

    @classmethod
    def round_robin(cls) -> OrderBy:
        """Spread samples over the channels in turn."""
        return cls("round_robin")

    @classmethod
    def fixed(cls, channel: int) -> OrderBy:
        """Send every sample to ``channel``."""
        if not isinstance(channel, int) or channel < 0:
            raise BadParameterError(f"a fixed channel must be an int >= 0, got {channel!r}")
        return cls("fixed", channel)


show_as("dcps.channels", OrderBy)
