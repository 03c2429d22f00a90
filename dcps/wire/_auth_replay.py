"""Replay protection: a bounded table of per-stream sliding windows over message counters.

A stream is what one sender sends of one message kind. Each sealed message
carries the sender's counter (strictly increasing per sender process, started
at the wall clock in nanoseconds so a restarted sender with the same id
continues above its old counters). Per stream the table keeps the highest
counter accepted and a bitmap of the :attr:`ReplayTable.window` counters below
it (the anti-replay window of RFC 4303), so messages that DDS delivers slightly
out of seal order (several threads sealing, several writers) are still
accepted once each.

Memory is bounded: at most ``max_streams`` streams are tracked; when a new
one would exceed it, the least recently active stream is forgotten and the
newest timestamp it had accepted raises a *floor*. A stream the table does not
know is accepted only with a timestamp above that floor, so forgetting a
stream never re-opens its captured messages to replay. Only messages whose
tag verified reach this table, so a forger cannot fill it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["ReplayTable"]


class _Window:
    __slots__ = ("bits", "highest", "newest_ns")

    def __init__(self, counter: int, timestamp_ns: int) -> None:
        self.highest = counter
        self.bits = 1  # bit i: counter ``highest - i`` was accepted
        self.newest_ns = timestamp_ns


class ReplayTable:
    """Which (stream, counter) pairs were accepted; bounded, thread-safe."""

    def __init__(self, *, max_streams: int = 16384, window: int = 4096) -> None:
        if max_streams < 1 or window < 1:
            raise ValueError("max_streams and window must be positive")
        self.max_streams = max_streams
        self.window = window
        self._mask = (1 << window) - 1
        self._streams: OrderedDict[tuple[str, str], _Window] = OrderedDict()
        self._floor_ns = -(2**63)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._streams)

    @property
    def floor_ns(self) -> int:
        """Newest timestamp of any forgotten stream (messages of unknown streams must be newer)."""
        return self._floor_ns

    def accept(
        self, stream: tuple[str, str], counter: int, timestamp_ns: int, *, floor: bool
    ) -> bool:
        """Record ``counter`` on ``stream``; False when it was seen or is too old to tell.

        ``floor``: apply the floor of forgotten streams to an unknown stream
        (off for durable kinds, whose messages are legitimately old).
        """
        with self._lock:
            win = self._streams.get(stream)
            if win is None:
                if floor and timestamp_ns <= self._floor_ns:
                    return False
                self._streams[stream] = _Window(counter, timestamp_ns)
                if len(self._streams) > self.max_streams:
                    _, old = self._streams.popitem(last=False)
                    self._floor_ns = max(self._floor_ns, old.newest_ns)
                return True
            if counter > win.highest:
                shift = counter - win.highest
                win.bits = ((win.bits << shift) | 1) & self._mask if shift < self.window else 1
                win.highest = counter
            else:
                age = win.highest - counter
                if age >= self.window:
                    return False
                bit = 1 << age
                if win.bits & bit:
                    return False
                win.bits |= bit
            win.newest_ns = max(win.newest_ns, timestamp_ns)
            self._streams.move_to_end(stream)
            return True
