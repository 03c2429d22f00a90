"""The Spark source's planning, exact and without a JVM or a store: offsets as Spark keeps
them, starting and ending positions, partitions, and the fair share of a row limit
between channels (issue 20: the mutants of ``dcps/spark/_source.py`` these tests kill went
unseen; tests/spark/test_source_boundaries.py drives the readers against a real store).
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from dcps import BadParameterError
from dcps.spark._source import ChannelRange, _admit, _from_offset, _plan, _resolve, offsets_json

BOUNDS = {0: (2, 10), 1: (0, 0), 2: (5, 7)}  # channel: (head, next offset)


class TestOffsets:
    def test_spark_offsets_have_string_keys_in_string_order(self) -> None:
        got = offsets_json({10: 3, 2: 7, 1: 0})
        assert got == {"1": 0, "10": 3, "2": 7}
        assert list(got) == ["1", "10", "2"]
        assert offsets_json({}) == {}

    def test_offsets_come_back_as_ints(self) -> None:
        assert _from_offset({"1": 0, "10": "3"}) == {1: 0, 10: 3}
        assert _from_offset({}) == {}

    @pytest.mark.parametrize("bad", [{"a": 1}, {"1": None}, {"1": "x"}])
    def test_a_malformed_offset_is_refused(self, bad: dict[str, object]) -> None:
        with pytest.raises(BadParameterError, match=r"^malformed dcps offset \{"):
            _from_offset(bad)


class TestResolve:
    def test_earliest_and_latest(self) -> None:
        assert _resolve("earliest", BOUNDS, "x") == {0: 2, 1: 0, 2: 5}
        assert _resolve("latest", BOUNDS, "x") == {0: 10, 1: 0, 2: 7}

    def test_an_explicit_map(self) -> None:
        # -2: the head, -1: the next offset, others as given; unnamed channels: the head
        assert _resolve({0: -1, 2: 6}, BOUNDS, "x") == {0: 10, 1: 0, 2: 6}
        assert _resolve({0: -2, 1: -1, 2: 0}, BOUNDS, "x") == {0: 2, 1: 0, 2: 0}
        assert _resolve({}, BOUNDS, "x") == {0: 2, 1: 0, 2: 5}

    def test_unknown_channels_are_named(self) -> None:
        with pytest.raises(
            BadParameterError,
            match=r"^option startingPositions: channels \[3, 7\] do not exist "
            r"\(the topic has channels 0\.\.2\)$",
        ):
            _resolve({7: 1, 3: 0, 1: 0}, BOUNDS, "startingPositions")


class TestPlan:
    def test_ranges_per_channel_cut_at_the_partition_size(self) -> None:
        parts = _plan({0: 2, 2: 5}, {2: 7, 0: 10, 1: 0}, 3)
        assert [(p.index, p.channel, p.start, p.end) for p in parts] == [
            (0, 0, 2, 5),
            (1, 0, 5, 8),
            (2, 0, 8, 10),
            (3, 2, 5, 7),
        ]
        assert repr(parts[0]) == "ChannelRange(channel=0, 2..4)"

    def test_a_channel_without_a_start_starts_at_zero(self) -> None:
        parts = _plan({}, {4: 2}, 10)
        assert [(p.channel, p.start, p.end) for p in parts] == [(4, 0, 2)]

    def test_nothing_to_read_plans_nothing(self) -> None:
        assert _plan({0: 5}, {0: 5}, 3) == []
        assert _plan({0: 6}, {0: 5}, 3) == []

    def test_exact_multiples(self) -> None:
        parts = _plan({0: 0}, {0: 6}, 3)
        assert [(p.start, p.end) for p in parts] == [(0, 3), (3, 6)]
        one = _plan({0: 0}, {0: 2}, 1)
        assert [(p.start, p.end) for p in one] == [(0, 1), (1, 2)]

    def test_a_range_is_a_partition_spark_can_ship(self) -> None:
        part = ChannelRange(3, 1, 4, 9)
        assert part.value == (1, 4, 9)
        assert (part.index, part.channel, part.start, part.end) == (3, 1, 4, 9)


class TestAdmit:
    def test_a_limit_above_the_backlog_admits_everything(self) -> None:
        assert _admit({0: 0, 1: 5}, {0: 3, 1: 9}, 100) == {0: 3, 1: 9}
        assert _admit({0: 0, 1: 5}, {0: 3, 1: 9}, 7) == {0: 3, 1: 9}

    def test_never_more_than_a_channel_has(self) -> None:
        # three small channels close in the first round; the big one's second share is
        # larger than what it still has
        assert _admit({}, {0: 1, 1: 1, 2: 1, 3: 4}, 12) == {0: 1, 1: 1, 2: 1, 3: 4}
        # a channel missing from the start starts at 0 and may take all it has
        assert _admit({0: 8}, {0: 10, 1: 3}, 10) == {0: 10, 1: 3}

    def test_the_limit_is_shared_fairly(self) -> None:
        assert _admit({0: 0, 1: 0}, {0: 10, 1: 10}, 6) == {0: 3, 1: 3}
        # a small channel takes what it has; the rest goes to the others
        assert _admit({0: 0, 1: 0, 2: 0}, {0: 1, 1: 10, 2: 10}, 9) == {0: 1, 1: 4, 2: 4}
        assert _admit({0: 0, 1: 0, 2: 0}, {0: 1, 1: 10, 2: 10}, 10) == {0: 1, 1: 5, 2: 4}

    def test_a_limit_smaller_than_the_channels(self) -> None:
        got = _admit({0: 0, 1: 0, 2: 0}, {0: 5, 1: 5, 2: 5}, 2)
        assert got == {0: 1, 1: 1, 2: 0}
        assert _admit({0: 4}, {0: 9}, 1) == {0: 5}

    def test_channels_behind_or_missing_from_the_start(self) -> None:
        # channel 1 is not in begin (starts at 0); channel 2 is at its latest already
        got = _admit({0: 8, 2: 4}, {0: 10, 1: 3, 2: 4}, 4)
        assert got == {0: 10, 1: 2, 2: 4}
        assert _admit({0: 9}, {0: 5}, 3) == {0: 9}

    def test_no_limit_left_admits_nothing_new(self) -> None:
        assert _admit({0: 2, 1: 3}, {0: 10, 1: 10}, 0) == {0: 2, 1: 3}
