"""Sticky channel assignment: a pure function, tested by cases and a property."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcps import BadParameterError
from dcps.store import assign_channels


def _min_moves(channel_count: int, members: list[str], previous: dict[int, str]) -> int:
    """The fewest channels a balanced assignment must take from a surviving owner."""
    alive = set(members)
    kept = Counter(o for c, o in previous.items() if o in alive and c < channel_count)
    base, extra = divmod(channel_count, len(alive))
    counts = sorted((kept[m] for m in alive), reverse=True)
    quotas = [base + 1] * extra + [base] * (len(alive) - extra)
    return sum(max(0, k - q) for k, q in zip(counts, quotas, strict=True))


class TestAssignmentCases:
    def test_single_member_owns_everything(self) -> None:
        """One member owns every channel."""
        assert assign_channels(3, ["a"]) == {0: "a", 1: "a", 2: "a"}

    def test_no_members_no_owners(self) -> None:
        """Without members no channel is owned."""
        assert assign_channels(5, []) == {}

    def test_balanced_split(self) -> None:
        """17 channels over 4 members give 5/4/4/4."""
        result = assign_channels(17, ["a", "b", "c", "d"])
        assert sorted(Counter(result.values()).values()) == [4, 4, 4, 5]

    def test_joining_member_takes_only_what_it_needs(self) -> None:
        """A new member takes channels from others without reshuffling the rest."""
        before = assign_channels(6, ["a", "b"])
        after = assign_channels(6, ["a", "b", "c"], before)
        moved = [c for c in range(6) if before[c] != after[c]]
        assert len(moved) == 2
        assert all(after[c] == "c" for c in moved)

    def test_leaving_member_spreads_its_channels(self) -> None:
        """When a member leaves only its channels move."""
        before = assign_channels(9, ["a", "b", "c"])
        after = assign_channels(9, ["a", "b"], before)
        assert all(after[c] == before[c] for c in range(9) if before[c] != "c")

    def test_more_members_than_channels(self) -> None:
        """Extra members beyond the channel count own nothing."""
        result = assign_channels(2, ["a", "b", "c", "d"])
        assert len(result) == 2
        assert len(set(result.values())) == 2

    def test_extra_members_keep_their_channels(self) -> None:
        """With more members than channels, current owners keep their channel."""
        before = {0: "x", 1: "y"}
        assert assign_channels(2, ["a", "x", "y"], before) == before

    def test_negative_count_is_refused(self) -> None:
        """A negative channel count is a bad parameter."""
        with pytest.raises(BadParameterError):
            assign_channels(-1, ["a"])


class TestAssignmentProperty:
    @settings(max_examples=300, deadline=None)
    @given(
        channel_count=st.integers(1, 40),
        members=st.lists(st.sampled_from("abcdefghijklmnop"), min_size=1, max_size=12),
        previous=st.dictionaries(st.integers(0, 39), st.sampled_from("abcdefghijklmnop")),
    )
    def test_every_channel_owned_once_balanced_minimal(
        self, channel_count: int, members: list[str], previous: dict[int, str]
    ) -> None:
        """Every channel has one owner, loads differ by at most 1, and movement is minimal."""
        result = assign_channels(channel_count, members, previous)
        assert sorted(result) == list(range(channel_count))
        assert set(result.values()) <= set(members)
        loads = Counter(result.values())
        all_loads = [loads.get(m, 0) for m in set(members)]
        assert max(all_loads) - min(all_loads) <= 1
        moved = sum(
            1
            for c in range(channel_count)
            if previous.get(c) in set(members) and result[c] != previous[c]
        )
        assert moved == _min_moves(channel_count, list(set(members)), previous)
