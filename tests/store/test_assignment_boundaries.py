"""Boundaries of the channel assignment: zero channels, and the refusal of a negative count
naming the bad value (found by ``./dev mutate dcps/store/_assignment.py``)."""

from __future__ import annotations

import pytest

from dcps import BadParameterError
from dcps.store import assign_channels


class TestChannelCountBoundaries:
    def test_zero_channels_assign_nothing(self) -> None:
        """A topic of zero channels is valid: there is nothing to own."""
        assert assign_channels(0, ["a", "b"]) == {}
        assert assign_channels(0, ["a"], {0: "a"}) == {}

    def test_one_channel_goes_to_one_member(self) -> None:
        """The smallest non-empty topic: its channel goes to the first member by name."""
        assert assign_channels(1, ["b", "a"]) == {0: "a"}

    def test_negative_count_is_refused_naming_it(self) -> None:
        """-1 channels is refused with a message naming channel_count and the value."""
        with pytest.raises(BadParameterError, match=r"channel_count must be >= 0, got -1"):
            assign_channels(-1, ["a"])
