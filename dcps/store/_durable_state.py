"""The acknowledgement state of one durable: who holds what, what is acknowledged.

Pure bookkeeping, no I/O (the store's ``_durables.py`` reads elements and
persists; ``tests/durables/test_ack_model.py`` drives this against a model).
An element is a position ``(channel, offset)``. Per channel the state keeps:

* the *floor*: every offset at or below it is acknowledged;
* the acknowledged offsets above the floor;
* ``next``: the first offset never delivered since the state was built.

The floor and the acknowledged offsets are what a persistent durable writes
to disk (:meth:`DurableState.persisted`); everything else (who holds which
element, the redelivery counts, the rolled-back elements waiting) lives in
memory and is rebuilt empty after a store restart: every unacknowledged
element is then delivered again.

Delivery rules per kind (seed 001):

* shared: any subscriber gets up to its free window (window minus held);
* serial: only the subscriber holding unacknowledged elements gets more (up
  to its free window); when nobody holds any, any subscriber may;
* exclusive and standard: one subscriber, up to its free window (the
  store refuses, or hands over to, a second one).

Rolled-back elements (and those of a subscriber that left or died) come
first, lowest position first, with their redelivery count raised.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

import attrs

from dcps.wire._durables import AckStatus, DurableKind

__all__ = ["DurableState", "Position", "Subscriber"]

Position = tuple[int, int]


@attrs.define
class Subscriber:
    """One subscriber of a durable: its window (None: unlimited) and what it holds."""

    name: str
    window: int | None
    held: set[Position] = attrs.Factory(set)

    @property
    def free(self) -> int | None:
        """How many more elements it may hold (None: unlimited)."""
        return None if self.window is None else max(0, self.window - len(self.held))


@attrs.define
class _Channel:
    floor: int
    acked: set[int] = attrs.Factory(set)
    next: int = 0


class DurableState:
    """What one durable has delivered, to whom, and what is acknowledged (not thread-safe)."""

    def __init__(
        self,
        kind: DurableKind,
        floors: Mapping[int, int],
        acked: Iterable[Position] = (),
    ) -> None:
        self.kind = kind
        self._channels = {c: _Channel(f, next=f + 1) for c, f in floors.items()}
        self.subscribers: dict[str, Subscriber] = {}
        self._holder: dict[Position, str] = {}
        self._deliveries: dict[Position, int] = {}  # times delivered, for unacknowledged ones
        self._waiting: list[tuple[int, int]] = []  # heap of (offset, channel) to redeliver
        self._waiting_set: set[Position] = set()
        self._rr = 0  # channel to start the next delivery from
        #: Positions acknowledged and floors moved since :meth:`take_changes`.
        self._new_acks: set[Position] = set()
        self._moved: set[int] = set()
        for c, o in acked:
            ch = self._channels[c]
            if o > ch.floor:
                ch.acked.add(o)
        for c in self._channels:
            self._raise_floor(c)
        self._new_acks.clear()
        self._moved.clear()

    # -- subscribers ----------------------------------------------------------------

    def add(self, name: str, window: int | None) -> Subscriber:
        """Add subscriber ``name`` (a known one keeps what it holds, with the new window)."""
        sub = self.subscribers.get(name)
        if sub is None:
            sub = self.subscribers[name] = Subscriber(name, window)
        else:
            sub.window = window
        return sub

    def remove(self, name: str) -> int:
        """Drop subscriber ``name``; what it held is redelivered. Returns how many."""
        sub = self.subscribers.pop(name, None)
        if sub is None:
            return 0
        for pos in sub.held:
            self._release(pos)
        count = len(sub.held)
        sub.held.clear()
        return count

    def holding(self) -> list[str]:
        """Subscribers that hold unacknowledged elements."""
        return [s.name for s in self.subscribers.values() if s.held]

    # -- delivery ---------------------------------------------------------------------

    def deliverable(self, name: str, tails: Mapping[int, int]) -> int | None:
        """How many elements ``name`` may take now (None: unlimited), by window and kind."""
        sub = self.subscribers[name]
        if self.kind is DurableKind.SERIAL and any(
            s.held for s in self.subscribers.values() if s is not sub
        ):
            return 0
        return sub.free

    def deliver(
        self, name: str, count: int, tails: Mapping[int, int]
    ) -> list[tuple[Position, int]]:
        """Hand up to ``count`` elements to ``name``; each with its redelivery count.

        ``tails[c]`` is the offset after the last element of channel ``c``.
        """
        allowed = self.deliverable(name, tails)
        n = count if allowed is None else min(count, allowed)
        if n <= 0:
            return []
        sub = self.subscribers[name]
        out: list[Position] = []
        while self._waiting and len(out) < n:
            offset, channel = heapq.heappop(self._waiting)
            pos = (channel, offset)
            self._waiting_set.discard(pos)
            if self._is_acked(pos) or pos in self._holder:
                continue
            out.append(pos)
        channels = sorted(self._channels)
        if channels and len(out) < n:
            start = self._rr % len(channels)
            for c in channels[start:] + channels[:start]:
                ch = self._channels[c]
                tail = tails.get(c, ch.next)
                while ch.next < tail and len(out) < n:
                    o = ch.next
                    ch.next += 1
                    if o <= ch.floor or o in ch.acked:
                        continue
                    pos = (c, o)
                    if pos in self._holder or pos in self._waiting_set:
                        continue
                    out.append(pos)
                if len(out) >= n:
                    break
            self._rr += 1
        result = []
        for pos in out:
            self._holder[pos] = name
            sub.held.add(pos)
            times = self._deliveries.get(pos, 0)
            self._deliveries[pos] = times + 1
            result.append((pos, times))
        return result

    def pending(self, tails: Mapping[int, int]) -> bool:
        """Whether any element waits to be delivered (rolled back, or new)."""
        if self._waiting:
            return True
        return any(
            self._first_new(c, ch, tails.get(c, ch.next)) is not None
            for c, ch in self._channels.items()
        )

    def _first_new(self, c: int, ch: _Channel, tail: int) -> int | None:
        o = ch.next
        while o < tail:
            if o > ch.floor and o not in ch.acked and (c, o) not in self._holder:
                return o
            o += 1
            ch.next = o  # skip acknowledged ones for good
        return None

    # -- acknowledgements -----------------------------------------------------------------

    def _is_acked(self, pos: Position) -> bool:
        ch = self._channels.get(pos[0])
        return ch is not None and (pos[1] <= ch.floor or pos[1] in ch.acked)

    def _status(self, name: str, pos: Position) -> AckStatus | None:
        """Why ``name`` cannot ack or roll back ``pos`` (None: it can)."""
        if self._holder.get(pos) == name:
            return None
        if self._is_acked(pos):
            return AckStatus.ALREADY_ACKED
        ch = self._channels.get(pos[0])
        if ch is None or (pos[1] >= ch.next and pos not in self._waiting_set):
            return AckStatus.NO_ELEMENT
        return AckStatus.NOT_HELD

    def ack(self, name: str, positions: Iterable[Position]) -> list[AckStatus]:
        """``name`` acknowledges ``positions``; a status per position."""
        out = []
        sub = self.subscribers.get(name)
        for pos in positions:
            why = self._status(name, pos)
            if why is None and sub is None:
                why = AckStatus.NOT_HELD
            if why is not None:
                out.append(why)
                continue
            assert sub is not None
            del self._holder[pos]
            sub.held.discard(pos)
            self._deliveries.pop(pos, None)
            self._mark_acked(pos)
            out.append(AckStatus.DONE)
        return out

    def ack_any(self, positions: Iterable[Position]) -> int:
        """Acknowledge ``positions`` whoever holds them (filtered out, purged); how many."""
        done = 0
        for pos in positions:
            if self._is_acked(pos) or pos[0] not in self._channels:
                continue
            holder = self._holder.pop(pos, None)
            if holder is not None and holder in self.subscribers:
                self.subscribers[holder].held.discard(pos)
            self._deliveries.pop(pos, None)
            self._waiting_set.discard(pos)
            self._mark_acked(pos)
            done += 1
        return done

    def rollback(self, name: str, positions: Iterable[Position]) -> list[AckStatus]:
        """``name`` gives ``positions`` back: each is redelivered, to any subscriber."""
        out = []
        sub = self.subscribers.get(name)
        for pos in positions:
            why = self._status(name, pos)
            if why is None and sub is None:
                why = AckStatus.NOT_HELD
            if why is not None:
                out.append(why)
                continue
            assert sub is not None
            sub.held.discard(pos)
            self._release(pos)
            out.append(AckStatus.DONE)
        return out

    def _release(self, pos: Position) -> None:
        self._holder.pop(pos, None)
        if pos not in self._waiting_set:
            self._waiting_set.add(pos)
            heapq.heappush(self._waiting, (pos[1], pos[0]))

    def _mark_acked(self, pos: Position) -> None:
        c, o = pos
        ch = self._channels[c]
        ch.acked.add(o)
        self._new_acks.add(pos)
        self._raise_floor(c)

    def _raise_floor(self, c: int) -> None:
        ch = self._channels[c]
        floor = ch.floor
        while floor + 1 in ch.acked:
            floor += 1
            ch.acked.discard(floor)
        if floor != ch.floor:
            ch.floor = floor
            ch.next = max(ch.next, floor + 1)
            self._moved.add(c)

    # -- what is persisted, and counts ----------------------------------------------------

    def floors(self) -> dict[int, int]:
        """The floor of each channel."""
        return {c: ch.floor for c, ch in self._channels.items()}

    def persisted(self) -> tuple[dict[int, int], set[Position]]:
        """``(floors, acknowledged above the floors)``: what a persistent durable keeps."""
        return self.floors(), {(c, o) for c, ch in self._channels.items() for o in ch.acked}

    def take_changes(self) -> tuple[set[Position], dict[int, int]]:
        """Acknowledged positions (still above a floor) and moved floors since the last call."""
        floors = {c: self._channels[c].floor for c in self._moved}
        acks = {p for p in self._new_acks if p[1] > self._channels[p[0]].floor}
        self._new_acks = set()
        self._moved = set()
        return acks, floors

    def outstanding(self, tails: Mapping[int, int]) -> int:
        """Elements not acknowledged yet (delivered or not), up to ``tails``."""
        return sum(
            max(0, tails.get(c, ch.next) - ch.floor - 1) - len(ch.acked)
            for c, ch in self._channels.items()
        )

    def channel_positions(self) -> dict[int, tuple[int, int, int]]:
        """Per channel ``(floor, acknowledged above it, next never delivered)`` (admin view)."""
        return {c: (ch.floor, len(ch.acked), ch.next) for c, ch in sorted(self._channels.items())}

    def held_by(self, name: str) -> set[Position]:
        """The positions ``name`` holds."""
        sub = self.subscribers.get(name)
        return set() if sub is None else set(sub.held)
