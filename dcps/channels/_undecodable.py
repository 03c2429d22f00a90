"""What a subscriber does with an element whose bytes do not decode as the topic's type.

Never a silent skip: by default the receive that reaches such an element
fails with :class:`UndecodableElementError` naming topic, channel and offset
(logged at ERROR), and the subscriber stays before it, so nothing is lost;
``seek(channel, error.position)`` moves past it. Skipping
(``on_undecodable="skip"``, logged at ERROR too) and a dead-letter callback
(``on_undecodable=callable``: called with the error, then the element is
skipped) are opt-in.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Literal, TypeAlias

from idl._errors import BadParameterError, IdlError
from idl._public import show_as

from ._position import Position

__all__ = ["OnUndecodable", "UndecodableElementError", "UndecodablePolicy"]

_log = logging.getLogger("dcps.channels.subscriber")


class UndecodableElementError(IdlError):
    """A stored element does not decode as its topic's type.

    Typically a publisher of another type on the same topic name. ``topic``,
    ``position`` (channel and offset), ``timestamp`` (the store's accept
    time), ``data`` (the element's bytes) and ``cause`` (the decoder's error)
    say which and why.

    .. versionadded:: 0.4
    """

    def __init__(
        self,
        topic: str,
        type_name: str,
        position: Position,
        timestamp: datetime,
        data: bytes,
        cause: BaseException | None,
    ) -> None:
        self.topic = topic
        self.type_name = type_name
        self.position = position
        self.timestamp = timestamp
        self.data = data
        self.cause = cause
        why = f"{type(cause).__name__}: {cause}" if cause is not None else "unknown"
        super().__init__(
            f"element at channel {position.channel}, offset {position.offset} of topic "
            f"{topic!r} ({len(data)} bytes) does not decode as {type_name} ({why}); "
            f"seek(channel, error.position) moves past it"
        )


#: ``"raise"`` (the default), ``"skip"``, or a dead-letter callback taking the error.
OnUndecodable: TypeAlias = Literal["raise", "skip"] | Callable[[UndecodableElementError], object]


class UndecodablePolicy:
    """Applies an :data:`OnUndecodable` choice: says whether to raise, logs, calls the callback."""

    __slots__ = ("_dead_letter", "_raise", "_reported")

    def __init__(self, choice: OnUndecodable) -> None:
        if choice not in ("raise", "skip") and not callable(choice):
            raise BadParameterError(
                f'on_undecodable must be "raise", "skip" or a callable, got {choice!r}'
            )
        self._raise = choice == "raise"
        self._dead_letter = choice if callable(choice) else None
        self._reported: set[Position] = set()  # raised already: logged once, not per receive

    def should_raise(self, error: UndecodableElementError) -> bool:
        """Handle ``error``: True when the receive must fail with it; else it was skipped."""
        if self._raise:
            if error.position not in self._reported:
                self._reported.add(error.position)
                _log.error("%s", error)
            return True
        if self._dead_letter is None:
            _log.error("%s: skipped (on_undecodable='skip')", error)
            return False
        _log.error("%s: handed to the dead-letter callback", error)
        try:
            self._dead_letter(error)
        except Exception:
            _log.exception("the dead-letter callback %r failed", self._dead_letter)
        return False


show_as("dcps.channels", UndecodableElementError)
