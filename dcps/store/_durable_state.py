"""The acknowledgement state of one durable: who holds what, what is acknowledged.

Pure bookkeeping, no I/O (the store's ``_durables.py`` reads elements and
persists; ``tests/durables/test_ack_model.py`` drives this against a model).
An element is a position ``(channel, offset)``. Per channel the state keeps:

* the *floor*: every offset at or below it is acknowledged;
* the acknowledged offsets above the floor;
* ``next``: the first offset never delivered since the state was built.

The floor and the acknowledged offsets are what a persistent durable writes
to disk (:meth:`DurableState.persisted`), with what it needs to keep
redelivery counts over a store restart (:meth:`DurableState.take_counts`):
per channel the highest offset ever delivered (every unacknowledged element
at or below it went out at least once), and a count only for the elements
delivered twice or more. A first delivery thus writes nothing of its own,
only, once per store round, the channel's delivered offset. Everything else
(who holds which element, the rolled-back elements waiting) lives in memory
and is rebuilt empty after a store restart: every unacknowledged element is
then delivered again, its redelivery count counting every delivery before
the restart.

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

__all__ = ["CountChanges", "DurableState", "Position", "Subscriber"]

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
    #: every unacknowledged offset at or below it was delivered before this state was built
    delivered_before: int = -1
    #: the highest delivered offset written (what :meth:`DurableState.take_counts` reported)
    delivered_kept: int = -1


@attrs.frozen
class CountChanges:
    """What a persistent durable writes so that redelivery counts survive a store restart.

    ``delivered``: per channel whose value moved, the highest offset delivered
    (every unacknowledged element at or below it went out at least once);
    ``counts``: the delivery count of each element delivered twice or more
    whose count changed; ``cleared``: elements whose count row is to go
    (acknowledged). An element at or below ``delivered`` without a count row
    was delivered once; above it, never.
    """

    delivered: dict[int, int]
    counts: dict[Position, int]
    cleared: set[Position]

    def __bool__(self) -> bool:
        return bool(self.delivered or self.counts or self.cleared)


class DurableState:
    """What one durable has delivered, to whom, and what is acknowledged (not thread-safe)."""

    def __init__(
        self,
        kind: DurableKind,
        floors: Mapping[int, int],
        acked: Iterable[Position] = (),
        deliveries: Mapping[Position, int] | None = None,
        delivered: Mapping[int, int] | None = None,
    ) -> None:
        """``deliveries``: the persisted delivery counts of unacknowledged elements;
        ``delivered``: per channel the highest offset delivered before (persisted)."""
        self.kind = kind
        self._channels = {
            c: _Channel(f, next=f + 1, delivered_before=d, delivered_kept=d)
            for c, f in floors.items()
            for d in [max(f, (delivered or {}).get(c, f))]
        }
        self.subscribers: dict[str, Subscriber] = {}
        self._holder: dict[Position, str] = {}
        #: times delivered, for unacknowledged elements whose count is not implied by the
        #: channel's delivered offsets (1 at or below them, 0 above): those delivered twice
        #: or more (and the ones a count was loaded for)
        self._counts: dict[Position, int] = {}
        self._waiting: list[tuple[int, int]] = []  # heap of (offset, channel) to redeliver
        self._waiting_set: set[Position] = set()
        self._rr = 0  # channel to start the next delivery from
        #: Positions acknowledged and floors moved since :meth:`take_changes`.
        self._new_acks: set[Position] = set()
        self._moved: set[int] = set()
        #: Positions whose delivery count changed, and acknowledged positions that had a
        #: count, since :meth:`take_counts`.
        self._new_counts: set[Position] = set()
        self._cleared: set[Position] = set()
        for c, o in acked:
            ch = self._channels[c]
            if o > ch.floor:
                ch.acked.add(o)
        for c in self._channels:
            self._raise_floor(c)
        self._new_acks.clear()
        self._moved.clear()
        for pos, times in (deliveries or {}).items():
            if pos[0] in self._channels and not self._is_acked(pos) and times > 0:
                self._counts[pos] = times
            else:  # (acknowledged, or a channel gone): its row goes with the next write
                self._cleared.add(pos)

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
        counts = self._counts
        result: list[tuple[Position, int]] = []
        while self._waiting and len(out) < n:
            offset, channel = heapq.heappop(self._waiting)
            pos = (channel, offset)
            self._waiting_set.discard(pos)
            if self._is_acked(pos) or pos in self._holder:
                continue
            out.append(pos)
            times = counts.get(pos, 1)  # (waiting: it went out before)
            counts[pos] = times + 1
            self._new_counts.add(pos)
            result.append((pos, times))
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
                    times = counts.get(pos, 0)
                    if not times and o <= ch.delivered_before:
                        times = 1  # it went out before this state was built
                    if times:  # a redelivery: its count is kept
                        counts[pos] = times + 1
                        self._new_counts.add(pos)
                    result.append((pos, times))
                if len(out) >= n:
                    break
            self._rr += 1
        holder = self._holder
        held = sub.held
        for pos in out:
            holder[pos] = name
            held.add(pos)
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

    def check(self, name: str, positions: Iterable[Position]) -> list[AckStatus]:
        """Whether ``name`` could acknowledge each of ``positions`` now (changes nothing)."""
        sub = self.subscribers.get(name)
        out = []
        for pos in positions:
            why = self._status(name, pos)
            if why is None and sub is None:
                why = AckStatus.NOT_HELD
            out.append(AckStatus.DONE if why is None else why)
        return out

    def ack(self, name: str, positions: Iterable[Position]) -> list[AckStatus]:
        """``name`` acknowledges ``positions``; a status per position."""
        out = []
        sub = self.subscribers.get(name)
        holder = self._holder
        held = set() if sub is None else sub.held
        done = AckStatus.DONE
        touched = set()
        for pos in positions:
            if sub is not None and holder.get(pos) == name:
                del holder[pos]
                held.discard(pos)
                self._mark_acked(pos, raise_floor=False)
                touched.add(pos[0])
                out.append(done)
                continue
            why = self._status(name, pos)
            out.append(AckStatus.NOT_HELD if why is None else why)  # (None: not subscribed)
        for c in touched:  # once per channel, after the batch
            self._raise_floor(c)
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

    def _mark_acked(self, pos: Position, *, raise_floor: bool = True) -> None:
        c, o = pos
        if self._counts.pop(pos, None) is not None:
            self._cleared.add(pos)
        ch = self._channels[c]
        ch.acked.add(o)
        self._new_acks.add(pos)
        if raise_floor:
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

    def take_counts(self) -> CountChanges:
        """What changed in the delivery counts since the last call (to write)."""
        delivered = {}
        for c, ch in self._channels.items():
            highest = ch.next - 1  # every unacknowledged offset below next went out
            if highest > ch.delivered_kept:
                ch.delivered_kept = highest
                delivered[c] = highest
        counts = {p: self._counts[p] for p in self._new_counts if p in self._counts}
        cleared = self._cleared
        self._new_counts = set()
        self._cleared = set()
        return CountChanges(delivered, counts, cleared)

    def delivery_count(self, pos: Position) -> int:
        """How often the unacknowledged element at ``pos`` was delivered (0: never)."""
        if self._is_acked(pos) or pos[0] not in self._channels:
            return 0
        times = self._counts.get(pos)
        if times is not None:
            return times
        ch = self._channels[pos[0]]
        return 1 if pos[1] < ch.next or pos[1] <= ch.delivered_before else 0

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
