"""The acknowledgement state of a durable, case by case (issue 20: the mutants of
``dcps/store/_durable_state.py`` these tests kill went unseen by the unit cases).

Each case is exact and fast; tests/durables/test_ack_model.py drives the same state
against a model with random operations, and tests/durables the whole store.
"""

from __future__ import annotations

import pytest

from dcps.store._durable_state import DurableState, Subscriber
from dcps.wire._durables import AckStatus, DurableKind

DONE, ALREADY, NOT_HELD, NO_ELEMENT = (
    AckStatus.DONE,
    AckStatus.ALREADY_ACKED,
    AckStatus.NOT_HELD,
    AckStatus.NO_ELEMENT,
)


def positions(delivered: list[tuple[tuple[int, int], int]]) -> list[tuple[int, int]]:
    return [p for p, _ in delivered]


class TestRestored:
    def test_acknowledged_offsets_next_to_the_floor_raise_it(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: 4}, [(0, 0), (0, 1), (0, 3), (1, 2)])
        assert state.floors() == {0: 1, 1: 4}
        assert state.persisted() == ({0: 1, 1: 4}, {(0, 3)})
        assert state.take_changes() == (set(), {})  # restoring is no change

    def test_delivery_resumes_after_the_floor_and_skips_acknowledged(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: 1}, [(0, 3)])
        state.add("a", None)
        assert positions(state.deliver("a", 10, {0: 6})) == [(0, 2), (0, 4), (0, 5)]
        assert state.outstanding({0: 6}) == 3

    def test_nothing_is_pending_below_the_floor(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: 4}, [(0, 6)])
        assert not state.pending({0: 5})
        assert state.pending({0: 6})
        assert not state.pending({0: 2})
        state.add("a", None)
        state.deliver("a", 10, {0: 6})
        assert not state.pending({0: 7})  # 5 is held, 6 acknowledged
        assert state.pending({0: 8})


class TestSubscribers:
    @pytest.mark.parametrize(
        ("window", "held", "free"), [(None, 3, None), (3, 1, 2), (3, 3, 0), (2, 3, 0), (1, 0, 1)]
    )
    def test_free_window(self, window: int | None, held: int, free: int | None) -> None:
        sub = Subscriber("s", window, {(0, o) for o in range(held)})
        assert sub.free == free

    def test_a_known_subscriber_keeps_what_it_holds_with_a_new_window(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        first = state.add("a", 2)
        state.deliver("a", 5, {0: 5})
        again = state.add("a", 4)
        assert again is first
        assert again.window == 4
        assert state.held_by("a") == {(0, 0), (0, 1)}
        assert positions(state.deliver("a", 5, {0: 5})) == [(0, 2), (0, 3)]

    def test_removing_a_subscriber_redelivers_what_it_held_first(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.add("b", None)
        state.deliver("a", 3, {0: 5})
        assert state.holding() == ["a"]
        assert state.remove("a") == 3
        assert state.remove("a") == 0
        assert state.holding() == []
        assert state.held_by("a") == set()
        got = state.deliver("b", 10, {0: 5})
        assert got == [((0, 0), 1), ((0, 1), 1), ((0, 2), 1), ((0, 3), 0), ((0, 4), 0)]
        assert state.holding() == ["b"]


class TestDelivery:
    def test_the_window_bounds_a_delivery(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", 2)
        assert positions(state.deliver("a", 5, {0: 9})) == [(0, 0), (0, 1)]
        assert state.deliver("a", 5, {0: 9}) == []
        assert state.deliverable("a", {0: 9}) == 0
        state.ack("a", [(0, 0)])
        assert state.deliverable("a", {0: 9}) == 1
        assert positions(state.deliver("a", 5, {0: 9})) == [(0, 2)]

    def test_zero_asked_is_nothing_delivered(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        assert state.deliver("a", 0, {0: 3}) == []
        assert state.deliverable("a", {0: 3}) is None
        assert positions(state.deliver("a", 1, {0: 3})) == [(0, 0)]

    def test_no_more_than_the_tail(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        assert positions(state.deliver("a", 10, {0: 2})) == [(0, 0), (0, 1)]
        assert state.deliver("a", 10, {0: 2}) == []
        assert positions(state.deliver("a", 10, {})) == []  # no tail given: the known ones

    def test_channels_take_turns_to_start_a_delivery(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: -1, 2: -1})
        state.add("a", None)
        tails = {0: 9, 1: 9, 2: 9}
        assert positions(state.deliver("a", 2, tails)) == [(0, 0), (0, 1)]
        assert positions(state.deliver("a", 2, tails)) == [(1, 0), (1, 1)]
        assert positions(state.deliver("a", 2, tails)) == [(2, 0), (2, 1)]
        assert positions(state.deliver("a", 2, tails)) == [(0, 2), (0, 3)]

    def test_a_delivery_goes_on_to_the_next_channels(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: -1, 2: -1})
        state.add("a", None)
        got = positions(state.deliver("a", 4, {0: 1, 1: 2, 2: 3}))
        assert got == [(0, 0), (1, 0), (1, 1), (2, 0)]
        got = positions(state.deliver("a", 9, {0: 1, 1: 2, 2: 3}))
        assert got == [(2, 1), (2, 2)]

    def test_rolled_back_come_first_lowest_offset_first_with_their_count(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: -1})
        state.add("a", None)
        tails = {0: 5, 1: 5}
        got = positions(state.deliver("a", 10, tails))
        assert len(got) == 10
        assert state.rollback("a", [(1, 3), (0, 4), (1, 1)]) == [DONE, DONE, DONE]
        assert state.pending(tails)
        assert state.deliver("a", 2, tails) == [((1, 1), 1), ((1, 3), 1)]
        assert state.rollback("a", [(1, 1)]) == [DONE]
        assert state.deliver("a", 9, tails) == [((1, 1), 2), ((0, 4), 1)]
        assert not state.pending(tails)

    def test_a_rolled_back_element_acknowledged_meanwhile_is_not_redelivered(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 3, {0: 3})
        state.rollback("a", [(0, 1)])
        assert state.ack_any([(0, 1)]) == 1
        state.remove("a")  # 0 and 2 come back
        state.add("b", None)
        assert positions(state.deliver("b", 9, {0: 3})) == [(0, 0), (0, 2)]

    def test_serial_waits_for_the_holder(self) -> None:
        state = DurableState(DurableKind.SERIAL, {0: -1})
        state.add("a", None)
        state.add("b", 3)
        state.deliver("a", 1, {0: 5})
        assert state.deliverable("b", {0: 5}) == 0
        assert state.deliverable("a", {0: 5}) is None
        state.ack("a", [(0, 0)])
        assert state.deliverable("b", {0: 5}) == 3

    def test_shared_serves_everyone_at_once(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.add("b", None)
        assert positions(state.deliver("a", 1, {0: 5})) == [(0, 0)]
        assert positions(state.deliver("b", 1, {0: 5})) == [(0, 1)]

    def test_a_state_without_channels_delivers_nothing(self) -> None:
        state = DurableState(DurableKind.SHARED, {})
        state.add("a", None)
        assert state.deliver("a", 3, {}) == []
        assert not state.pending({})
        assert state.outstanding({}) == 0


class TestAcknowledgements:
    def test_ack_statuses(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.add("b", None)
        state.deliver("a", 2, {0: 9})
        state.deliver("b", 1, {0: 9})
        got = state.ack("b", [(0, 2), (0, 0), (0, 2), (0, 5), (3, 0)])
        assert got == [DONE, NOT_HELD, ALREADY, NO_ELEMENT, NO_ELEMENT]
        assert state.ack("a", [(0, 0)]) == [DONE]
        assert state.ack("a", [(0, 0)]) == [ALREADY]  # now below the floor
        assert state.floors() == {0: 0}
        assert state.ack("nobody", [(0, 1)]) == [NOT_HELD]

    def test_a_rolled_back_element_is_held_by_nobody(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 1, {0: 9})
        state.rollback("a", [(0, 0)])
        assert state.ack("a", [(0, 0)]) == [NOT_HELD]
        assert state.rollback("a", [(0, 0)]) == [NOT_HELD]
        assert state.held_by("a") == set()

    def test_rollback_statuses(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.add("b", None)
        state.deliver("a", 2, {0: 9})
        state.ack("a", [(0, 0)])
        got = state.rollback("b", [(0, 1), (0, 0), (0, 7), (4, 4)])
        assert got == [NOT_HELD, ALREADY, NO_ELEMENT, NO_ELEMENT]
        assert state.rollback("ghost", [(0, 1)]) == [NOT_HELD]
        assert state.held_by("a") == {(0, 1)}

    def test_acks_out_of_order_raise_the_floor_when_the_gap_closes(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: -1})
        state.add("a", None)
        state.deliver("a", 8, {0: 4, 1: 4})
        state.ack("a", [(0, 1), (0, 3), (1, 2)])
        assert state.floors() == {0: -1, 1: -1}
        assert state.take_changes() == ({(0, 1), (0, 3), (1, 2)}, {})
        assert state.take_changes() == (set(), {})
        state.ack("a", [(0, 0)])
        assert state.floors() == {0: 1, 1: -1}
        assert state.persisted() == ({0: 1, 1: -1}, {(0, 3), (1, 2)})
        # (0, 0) is below the new floor: only the floor is reported
        assert state.take_changes() == (set(), {0: 1})
        state.ack("a", [(0, 2)])
        assert state.take_changes() == (set(), {0: 3})
        assert state.outstanding({0: 4, 1: 4}) == 3

    def test_ack_any_acknowledges_whoever_holds(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 2, {0: 9})
        # held by a, not delivered yet, already acknowledged, no such channel
        assert state.ack_any([(0, 1), (0, 4), (0, 1), (7, 0)]) == 2
        assert state.held_by("a") == {(0, 0)}
        assert state.floors() == {0: -1}
        assert state.persisted()[1] == {(0, 1), (0, 4)}
        assert positions(state.deliver("a", 9, {0: 6})) == [(0, 2), (0, 3), (0, 5)]

    def test_ack_any_of_a_departed_holders_element(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 2, {0: 2})
        state.remove("a")
        assert state.ack_any([(0, 0)]) == 1
        state.add("b", None)
        assert state.deliver("b", 9, {0: 2}) == [((0, 1), 1)]
        assert state.floors() == {0: 0}

    def test_a_redelivered_then_acknowledged_element_restarts_its_count(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 1, {0: 1})
        state.rollback("a", [(0, 0)])
        assert state.deliver("a", 1, {0: 1}) == [((0, 0), 1)]
        state.ack("a", [(0, 0)])
        assert state.outstanding({0: 1}) == 0
        assert state.outstanding({0: 3}) == 2

    def test_outstanding_counts_up_to_the_tail(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: 4, 1: -1}, [(0, 6)])
        assert state.outstanding({0: 8, 1: 2}) == 2 + 2
        assert state.outstanding({0: 7, 1: 0}) == 2 - 1
        empty = DurableState(DurableKind.SHARED, {0: 4})
        assert empty.outstanding({0: 5}) == 0
        assert empty.outstanding({0: 4}) == 0
        assert empty.outstanding({}) == 0


class TestEdges:
    def test_an_acknowledgement_at_or_below_the_floor_is_not_kept_twice(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: 4}, [(0, 4), (0, 2), (0, 6)])
        assert state.persisted() == ({0: 4}, {(0, 6)})
        assert state.outstanding({0: 8}) == 2

    def test_a_redelivery_alone_does_not_move_the_channel_turn(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: -1})
        state.add("a", None)
        tails = {0: 5, 1: 5}
        assert positions(state.deliver("a", 1, tails)) == [(0, 0)]
        state.rollback("a", [(0, 0)])
        assert state.deliver("a", 1, tails) == [((0, 0), 1)]
        # the next new element comes from channel 1: its turn was not taken
        assert positions(state.deliver("a", 1, tails)) == [(1, 0)]
        assert positions(state.deliver("a", 1, tails)) == [(0, 1)]

    def test_pending_with_a_channel_missing_from_the_tails(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1, 1: -1})
        assert not state.pending({0: 0})
        assert state.pending({1: 1})
        assert not state.pending({})

    def test_the_first_offset_never_delivered_is_no_element(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 2, {0: 9})
        assert state.ack("a", [(0, 2)]) == [NO_ELEMENT]
        assert state.rollback("a", [(0, 2)]) == [NO_ELEMENT]
        assert state.ack("a", [(0, 1)]) == [DONE]

    def test_an_unknown_subscriber_gets_the_real_reason(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 2, {0: 9})
        state.ack("a", [(0, 0)])
        assert state.ack("ghost", [(0, 0), (0, 5), (0, 1)]) == [ALREADY, NO_ELEMENT, NOT_HELD]
        assert state.rollback("ghost", [(0, 0), (0, 5)]) == [ALREADY, NO_ELEMENT]

    def test_ack_any_goes_on_after_an_acknowledged_one(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        assert state.ack_any([(0, 1), (0, 1), (0, 3)]) == 2
        assert state.ack_any([(5, 0), (0, 2)]) == 1
        assert state.persisted() == ({0: -1}, {(0, 1), (0, 2), (0, 3)})

    def test_an_acknowledgement_that_becomes_the_floor_is_reported_as_the_floor(self) -> None:
        state = DurableState(DurableKind.SHARED, {0: -1})
        state.add("a", None)
        state.deliver("a", 2, {0: 2})
        state.ack("a", [(0, 0)])
        assert state.take_changes() == (set(), {0: 0})
        state.ack("a", [(0, 1)])
        assert state.take_changes() == (set(), {0: 1})
