"""The value-record convention (dcps._record): tuples underneath, equal only to their own kind."""

from __future__ import annotations

import copy
import pickle
from datetime import UTC, datetime

import pytest

import dcps
from dcps._record import Record, field, new_record
from dcps.channels import Element, Position


class Point(Record):
    __slots__ = ()
    __match_args__ = ("x", "y")
    x: int = field(0, "x")
    y: int = field(1, "y")

    def __new__(cls, x: int, y: int) -> Point:
        return new_record(cls, (x, y))


class Other(Record):
    __slots__ = ()
    x: int = field(0, "x")
    y: int = field(1, "y")


class TestRecord:
    def test_equal_only_to_its_own_kind(self) -> None:
        """A record never equals a plain tuple or another record kind with the same fields."""
        assert Point(1, 2) == Point(1, 2)
        assert Point(1, 2) != Point(2, 1)
        assert Point(1, 2) != (1, 2)
        assert (1, 2) != Point(1, 2)  # noqa: SIM300 (the tuple on the left is the point)
        assert Point(1, 2) != new_record(Other, (1, 2))
        assert hash(Point(1, 2)) == hash(Point(1, 2))
        assert len({Point(1, 2), Point(1, 2)}) == 1

    def test_fields_read_only_unpack_match_and_pickle(self) -> None:
        """Fields read by name, cannot be set, unpack, match, copy and pickle by value."""
        point = Point(3, 4)
        assert (point.x, point.y) == (3, 4)
        x, y = point
        assert (x, y) == (3, 4)
        with pytest.raises(AttributeError):
            point.x = 5  # type: ignore[misc]
        match point:
            case Point(x=3, y=found):
                assert found == 4
            case _:
                pytest.fail("Point did not match")
        assert pickle.loads(pickle.dumps(point)) == point
        assert copy.copy(point) == point
        assert Point.x.__doc__ == "x"

    def test_samples_follow_the_convention(self) -> None:
        """Sample and SampleInfo are records: equal to their own kind only."""
        info = dcps.SampleInfo(
            dcps.SampleState.NOT_READ,
            dcps.ViewState.NEW,
            dcps.InstanceState.ALIVE,
            True,
            1,
            2,
            3,
            0,
            0,
            0,
            0,
            0,
        )
        sample = dcps.Sample("data", info)
        assert isinstance(sample, Record)
        assert isinstance(info, Record)
        assert sample != ("data", info)
        assert sample == dcps.Sample("data", info)
        assert info.instance_handle == 2
        assert info.sample_state is dcps.SampleState.NOT_READ


class TestChannelRecords:
    def test_positions_follow_the_convention(self) -> None:
        """A Position is a record: equal to positions only, never to a plain tuple."""
        assert isinstance(Position(1, 2), Record)
        assert Position(1, 2) == Position(1, 2)
        assert Position(1, 2) != (1, 2)
        assert (1, 2) != Position(1, 2)  # noqa: SIM300 (the tuple on the left is the point)
        assert Position(1, 2) != Point(1, 2)
        assert Position(0, 5) < Position(1, -1)
        channel, offset = Position(3, 4)
        assert (channel, offset) == (3, 4)
        match Position(3, 4):
            case Position(channel=3, offset=found):
                assert found == 4
            case _:
                pytest.fail("Position did not match")
        assert Position.channel.__doc__ == "The channel."

    def test_elements_equal_by_value_position_and_time_only(self) -> None:
        """Elements compare by value, position and timestamp; never equal to a tuple of them."""
        when = datetime(2024, 1, 1, tzinfo=UTC)
        element = Element("v", Position(0, 4), when)
        received = new_record(Element, ("v", 0, 4, when, object()))  # another receiver
        assert isinstance(element, Record)
        assert element == received
        assert hash(element) == hash(received)
        assert element != tuple(element)
        assert tuple(element) != element
        assert element != ("v", 0, 4, when)
        assert element != Element("v", Position(0, 5), when)
        assert element != Element("w", Position(0, 4), when)
        assert pickle.loads(pickle.dumps(element)) == element
