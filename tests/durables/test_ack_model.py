"""The acknowledgement state of a durable against a model: random deliveries, acks,
rollbacks, subscriber deaths and store crashes (only the persisted part survives)."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dcps.store._durable_state import DurableState
from dcps.wire._durables import AckStatus, DurableKind

CHANNELS = (0, 1)
NAMES = ("a", "b", "c")


class DurableAckMachine(RuleBasedStateMachine):
    """Model: the published positions, the acknowledged ones, who holds what."""

    def __init__(self) -> None:
        super().__init__()
        self.kind = DurableKind.SHARED
        self.tails = dict.fromkeys(CHANNELS, 0)
        self.acked: set[tuple[int, int]] = set()
        self.held: dict[str, set[tuple[int, int]]] = {}
        self.windows: dict[str, int | None] = {}
        self.state = DurableState(self.kind, dict.fromkeys(CHANNELS, -1))

    @rule(kind=st.sampled_from([DurableKind.SHARED, DurableKind.SERIAL]))
    @precondition(lambda self: not self.held and not any(self.tails.values()))
    def choose_kind(self, kind: DurableKind) -> None:
        self.kind = kind
        self.state = DurableState(kind, dict.fromkeys(CHANNELS, -1))

    @rule(channel=st.sampled_from(CHANNELS), n=st.integers(1, 5))
    def publish(self, channel: int, n: int) -> None:
        self.tails[channel] += n

    @rule(name=st.sampled_from(NAMES), window=st.one_of(st.none(), st.integers(1, 4)))
    def subscribe(self, name: str, window: int | None) -> None:
        self.state.add(name, window)
        self.held.setdefault(name, set())
        self.windows[name] = window

    @rule(name=st.sampled_from(NAMES), n=st.integers(1, 6))
    def deliver(self, name: str, n: int) -> None:
        if name not in self.held:
            return
        others_hold = any(h for s, h in self.held.items() if s != name)
        got = self.state.deliver(name, n, self.tails)
        positions = [p for p, _ in got]
        assert len(positions) <= n
        assert not set(positions) & self.acked, "an acknowledged element was delivered again"
        for holder in self.held.values():
            assert not set(positions) & holder, "an element held by someone was delivered"
        if self.kind is DurableKind.SERIAL and others_hold:
            assert not positions, "serial: a second subscriber got elements"
        self.held[name] |= set(positions)
        window = self.windows[name]
        if window is not None and positions:  # (a window shrunk by a re-subscribe may be over)
            assert len(self.held[name]) <= window, "window exceeded"

    @rule(data=st.data(), name=st.sampled_from(NAMES))
    def ack(self, data: st.DataObject, name: str) -> None:
        held = sorted(self.held.get(name, ()))
        if not held:
            return
        chosen = data.draw(st.lists(st.sampled_from(held), unique=True, max_size=3))
        statuses = self.state.ack(name, chosen)
        assert statuses == [AckStatus.DONE] * len(chosen)
        self.held[name] -= set(chosen)
        self.acked |= set(chosen)

    @rule(data=st.data(), name=st.sampled_from(NAMES))
    def ack_twice_or_foreign(self, data: st.DataObject, name: str) -> None:
        """Acking an acknowledged element, or one another subscriber holds, is refused."""
        if self.acked:
            pos = data.draw(st.sampled_from(sorted(self.acked)))
            assert self.state.ack(name, [pos]) == [AckStatus.ALREADY_ACKED]
        foreign = sorted(p for s, h in self.held.items() if s != name for p in h)
        if foreign:
            pos = data.draw(st.sampled_from(foreign))
            assert self.state.ack(name, [pos]) == [AckStatus.NOT_HELD]
            assert self.state.rollback(name, [pos]) == [AckStatus.NOT_HELD]

    @rule(data=st.data(), name=st.sampled_from(NAMES))
    def rollback(self, data: st.DataObject, name: str) -> None:
        held = sorted(self.held.get(name, ()))
        if not held:
            return
        chosen = data.draw(st.lists(st.sampled_from(held), unique=True, max_size=3))
        assert self.state.rollback(name, chosen) == [AckStatus.DONE] * len(chosen)
        self.held[name] -= set(chosen)

    @rule(name=st.sampled_from(NAMES))
    def subscriber_dies(self, name: str) -> None:
        self.state.remove(name)
        self.held.pop(name, None)
        self.windows.pop(name, None)

    @rule()
    def store_crash(self) -> None:
        """Only the floors and the acknowledged offsets above them survive."""
        floors, acked = self.state.persisted()
        self.state = DurableState(self.kind, floors, acked)
        self.held.clear()
        self.windows.clear()

    @invariant()
    def persisted_matches_model(self) -> None:
        floors, above = self.state.persisted()
        on_disk = {(c, o) for c, f in floors.items() for o in range(f + 1)} | above
        assert on_disk == self.acked

    @invariant()
    def outstanding_counts_the_unacknowledged(self) -> None:
        published = sum(self.tails.values())
        assert self.state.outstanding(self.tails) == published - len(self.acked)

    def teardown(self) -> None:
        """Nothing unacknowledged is lost: one subscriber drains and acks everything."""
        self.state.add("drain", None)
        for name in list(self.held):
            self.state.remove(name)
        for _ in range(100):
            got = [p for p, _ in self.state.deliver("drain", 1000, self.tails)]
            if not got:
                break
            assert not set(got) & self.acked
            self.state.ack("drain", got)
            self.acked |= set(got)
        published = {(c, o) for c, t in self.tails.items() for o in range(t)}
        assert self.acked == published


TestDurableAckModel = DurableAckMachine.TestCase
TestDurableAckModel.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)


class TestSerialWindows:
    """The seed's serial cases, on the state alone."""

    def test_window_one_rolled_back_comes_before_anything_newer(self) -> None:
        """Window 1: events 1-4 acked, 5 rolled back: 5 comes again before 6."""
        state = DurableState(DurableKind.SERIAL, {0: -1})
        state.add("c1", 1)
        tails = {0: 10}
        for offset in range(4):
            [(pos, _)] = state.deliver("c1", 5, tails)
            assert pos == (0, offset)
            state.ack("c1", [pos])
        [(pos, count)] = state.deliver("c1", 5, tails)
        assert (pos, count) == ((0, 4), 0)
        state.rollback("c1", [pos])
        assert state.deliver("c1", 5, tails) == [((0, 4), 1)]

    def test_window_six_rolled_back_comes_after_the_one_already_sent(self) -> None:
        """Window 6: 1-4 acked, 5 rolled back while 6 is out: 5 comes back after 6."""
        state = DurableState(DurableKind.SERIAL, {0: -1})
        state.add("c1", 6)
        tails = {0: 6}
        got = [p for p, _ in state.deliver("c1", 6, tails)]
        assert got == [(0, o) for o in range(6)]
        state.ack("c1", got[:4])
        state.rollback("c1", [got[4]])
        assert state.deliver("c1", 6, tails) == [((0, 4), 1)]
        assert state.held_by("c1") == {(0, 4), (0, 5)}

    def test_single_subscriber_refills_by_the_number_acknowledged(self) -> None:
        """Window 10: acking 4 of 10 lets 4 new ones come at once."""
        state = DurableState(DurableKind.SERIAL, {0: -1})
        state.add("c1", 10)
        tails = {0: 100}
        first = [p for p, _ in state.deliver("c1", 100, tails)]
        assert len(first) == 10
        state.ack("c1", first[:4])
        refill = [p for p, _ in state.deliver("c1", 100, tails)]
        assert refill == [(0, o) for o in range(10, 14)]

    def test_two_subscribers_the_holder_keeps_getting_until_it_is_done(self) -> None:
        """Window 6, C1 holds 5 of 6 after acking 1: a new event goes to C1, not C2."""
        state = DurableState(DurableKind.SERIAL, {0: -1})
        state.add("c1", 6)
        state.add("c2", 6)
        got = [p for p, _ in state.deliver("c1", 6, {0: 6})]
        state.ack("c1", got[:1])
        assert state.deliver("c2", 6, {0: 7}) == []
        assert state.deliver("c1", 6, {0: 7}) == [((0, 6), 0)]
        state.ack("c1", [p for p in state.held_by("c1")])
        assert [p for p, _ in state.deliver("c2", 6, {0: 8})] == [(0, 7)]
