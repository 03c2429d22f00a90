"""Redelivery counts of a persistent durable against a model, with store crashes at any
point of a round (only what the rounds wrote survives).

The store writes, at the end of each round, what :meth:`DurableState.take_changes`
and :meth:`DurableState.take_counts` report (``_durables.py``); a first delivery is
answered at once, a redelivery only after that write. The model keeps, per element,
how often it really went out and the highest count a subscriber was shown, and
checks after every crash that the rebuilt state:

* never counts more deliveries than there were;
* forgets at most that an element went out once (a first delivery of the round the
  store was killed in): a subscriber shown a count >= 1 sees at least the next one.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from dcps.store._durable_state import DurableState, Position
from dcps.wire._durables import DurableKind

CHANNELS = (0, 1)
NAMES = ("a", "b")


class DeliveryCountMachine(RuleBasedStateMachine):
    """A shared durable on two channels, its disk, and the truth about deliveries."""

    def __init__(self) -> None:
        super().__init__()
        self.tails = dict.fromkeys(CHANNELS, 0)
        # the disk: floors, acknowledged offsets above them, counts, delivered offsets
        self.floors = dict.fromkeys(CHANNELS, -1)
        self.acked_above: set[Position] = set()
        self.rows: dict[Position, int] = {}
        self.delivered: dict[int, int] = {}
        self.state = DurableState(DurableKind.SHARED, self.floors)
        self.held: dict[str, set[Position]] = {}
        self.acked: set[Position] = set()  # acknowledged in memory (written or not)
        self.true: dict[Position, int] = {}  # deliveries that really happened
        self.shown: dict[Position, int] = {}  # highest delivery count a subscriber saw
        self.unshown: list[tuple[Position, int]] = []  # redeliveries held to the round's end

    @rule(channel=st.sampled_from(CHANNELS), n=st.integers(1, 4))
    def publish(self, channel: int, n: int) -> None:
        self.tails[channel] += n

    @rule(name=st.sampled_from(NAMES), window=st.integers(1, 4))
    def subscribe(self, name: str, window: int) -> None:
        self.state.add(name, window)
        self.held.setdefault(name, set())

    @rule(name=st.sampled_from(NAMES), n=st.integers(1, 5))
    def deliver(self, name: str, n: int) -> None:
        if name not in self.held:
            return
        for pos, times in self.state.deliver(name, n, self.tails):
            assert times == self.state.delivery_count(pos) - 1
            self.true[pos] = self.true.get(pos, 0) + 1
            assert times < self.true[pos], "counted a delivery that never happened"
            self.held[name].add(pos)
            if times == 0:  # a first delivery is answered at once
                self.shown[pos] = max(self.shown.get(pos, 0), 1)
            else:  # a redelivery once the round's counts are written
                self.unshown.append((pos, times + 1))

    @rule(data=st.data(), name=st.sampled_from(NAMES), rollback=st.booleans())
    def settle(self, data: st.DataObject, name: str, rollback: bool) -> None:
        held = sorted(self.held.get(name, ()))
        if not held:
            return
        chosen = data.draw(st.lists(st.sampled_from(held), unique=True, max_size=3))
        if rollback:
            self.state.rollback(name, chosen)
        else:
            self.state.ack(name, chosen)
            self.acked |= set(chosen)
        self.held[name] -= set(chosen)

    @rule(name=st.sampled_from(NAMES))
    def subscriber_dies(self, name: str) -> None:
        self.state.remove(name)
        self.held.pop(name, None)

    @rule()
    def round_end(self) -> None:
        """The store writes the round (as ``_persist_acks`` does); held answers go out."""
        acks, floors = self.state.take_changes()
        counted = self.state.take_counts()
        self.floors.update(floors)
        self.acked_above = {p for p in self.acked_above | acks if p[1] > self.floors[p[0]]}
        for pos in counted.cleared:
            self.rows.pop(pos, None)
        self.rows.update(counted.counts)
        self.delivered.update(counted.delivered)
        for pos, count in self.unshown:
            self.shown[pos] = max(self.shown.get(pos, 0), count)
        self.unshown = []

    @rule()
    def store_crash(self) -> None:
        """kill -9 anywhere in a round: only the disk survives."""
        self.state = DurableState(
            DurableKind.SHARED, self.floors, self.acked_above, self.rows, self.delivered
        )
        self.held.clear()
        self.unshown = []
        self.acked = {
            (c, o) for c, f in self.floors.items() for o in range(f + 1)
        } | self.acked_above
        published = [(c, o) for c, t in self.tails.items() for o in range(t)]
        for pos in published:
            if pos in self.acked:
                continue
            true = self.true.get(pos, 0)
            restored = self.state.delivery_count(pos)
            assert restored <= true, f"{pos}: counts {restored} deliveries of {true}"
            shown = self.shown.get(pos, 0)
            assert restored >= shown - 1, f"{pos}: shown {shown}, restored {restored}"
            if shown >= 2:
                assert restored >= shown, f"{pos}: a redelivery shown {shown} was lost"

    @invariant()
    def rows_only_for_counts_of_two_or_more(self) -> None:
        for pos, times in self.rows.items():
            assert times >= 2, f"{pos}: a row for a count of {times}"

    def teardown(self) -> None:
        """After a final round, no count row is left for an acknowledged element."""
        self.round_end()
        on_disk = {(c, o) for c, f in self.floors.items() for o in range(f + 1)} | self.acked_above
        assert not set(self.rows) & on_disk, "a count row of an acknowledged element was kept"


TestDeliveryCounts = DeliveryCountMachine.TestCase
TestDeliveryCounts.settings = settings(max_examples=200, stateful_step_count=50, deadline=None)


class TestCountsOnTheState:
    """The counts rule on small cases (no model)."""

    def test_a_first_delivery_writes_no_count_only_the_delivered_offset(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", 4)
        assert [t for _, t in state.deliver("a", 4, {0: 4})] == [0, 0, 0, 0]
        counted = state.take_counts()
        assert (counted.delivered, counted.counts, counted.cleared) == ({0: 3}, {}, set())
        assert not state.take_counts()  # nothing moved since

    def test_a_redelivery_writes_its_count_and_an_ack_clears_it(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", 4)
        state.deliver("a", 2, {0: 2})
        state.rollback("a", [(0, 1)])
        assert state.deliver("a", 2, {0: 2}) == [((0, 1), 1)]
        assert state.take_counts().counts == {(0, 1): 2}
        state.ack("a", [(0, 1)])
        assert state.take_counts().cleared == {(0, 1)}

    def test_after_a_restart_elements_up_to_the_delivered_offset_count_one(self) -> None:
        """Floor 1; offsets 2..4 went out before (delivered offset 4), 3 twice (a row)."""
        state = DurableState(DurableKind.SHARED, {0: 1}, [], {(0, 3): 2}, {0: 4})
        state.add("a", 10)
        got = state.deliver("a", 10, {0: 7})
        assert got == [((0, 2), 1), ((0, 3), 2), ((0, 4), 1), ((0, 5), 0), ((0, 6), 0)]
        counted = state.take_counts()
        assert counted.counts == {(0, 2): 2, (0, 3): 3, (0, 4): 2}
        assert counted.delivered == {0: 6}

    def test_a_loaded_count_of_an_acknowledged_element_is_cleared(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: 3}, [(0, 5)], {(0, 2): 2, (0, 5): 3})
        assert state.take_counts().cleared == {(0, 2), (0, 5)}
