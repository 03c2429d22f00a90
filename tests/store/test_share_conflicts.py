"""Which overlap a store reports when it must not serve: the first conflict it is sure of,
whatever order the announcements arrived in (unit level, no DDS).

Pins the fix of the race behind the once flaky
``tests/channels/test_channels_split.py::TestMisconfiguredShares::test_overlapping_store_refuses_to_start``:
a late ``0/2`` store that also sees a late ``1/3`` store (itself refused by the running
``0/2``) reported "same count" or "already served" depending on arrival order.
"""

from __future__ import annotations

import pytest

from dcps.store._shares import share_conflict
from dcps.wire._messages import StoreAnnouncement


def store(name: str, share: str, started_ns: int) -> StoreAnnouncement:
    """The announcement of store ``name`` serving ``share`` (``"index/count"``)."""
    index, count = (int(p) for p in share.split("/"))
    return StoreAnnouncement(
        incarnation=name,
        index=index,
        count=count,
        started_ns=started_ns,
        pid=started_ns,
        host="h",
        data_dir=f"/data/{name}",
    )


RUNNING = store("running", "0/2", 100)
LATE_SAME = store("late-0-2", "0/2", 300)
LATE_OTHER_COUNT = store("late-1-3", "1/3", 200)


class TestShareConflict:
    def test_no_conflict_between_the_shares_of_one_count(self) -> None:
        """0/2 and 1/2 fit together, whichever is older."""
        assert share_conflict(store("b", "1/2", 200), [RUNNING]) is None
        assert share_conflict(RUNNING, [store("b", "1/2", 200)]) is None

    def test_only_the_younger_of_two_overlapping_stores_is_told(self) -> None:
        """The running store ignores a younger overlapping one; the younger is refused."""
        assert share_conflict(RUNNING, [LATE_SAME]) is None
        why = share_conflict(LATE_SAME, [RUNNING])
        assert why is not None
        assert "already served" in why
        assert "/data/running" in why

    @pytest.mark.parametrize(
        "arrival",
        [
            pytest.param((RUNNING, LATE_OTHER_COUNT), id="running-store-first"),
            pytest.param((LATE_OTHER_COUNT, RUNNING), id="refused-store-first"),
        ],
    )
    def test_the_conflict_reported_is_with_the_store_that_stands(
        self, arrival: tuple[StoreAnnouncement, ...]
    ) -> None:
        """A late 0/2 store that sees the running 0/2 and a refused 1/3 (older than it)
        reports "already served" by the running store, in either arrival order."""
        why = share_conflict(LATE_SAME, arrival)
        assert why is not None
        assert "already served" in why
        assert "/data/running" in why
