"""Exact boundaries of the store log: commits and seeks at head - 1, tail and tail + 1,
and timestamps equal to an element's. Fast: a real log file on a tmp dir, no DDS."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dcps.channels import CommitStatus
from dcps.store._log import ChannelLog

US = 1000  # one microsecond in ns: the store's timestamps are whole µs, one per element


class Clock:
    """A settable store clock (nanoseconds)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    """The clock of the ``log`` fixture's store."""
    return Clock()


@pytest.fixture
def log(tmp_path: Path, clock: Clock) -> Iterator[ChannelLog]:
    """A fresh log file in a temporary directory, on a settable clock."""
    with ChannelLog(tmp_path / "store.db", clock=clock) as opened:
        yield opened


def trimmed_channel(log: ChannelLog) -> None:
    """Topic ``t`` (not retained, groups ``g`` and ``slow``): offsets 0..5, head 3, tail 5."""
    log.ensure_topic("t", 1)
    log.create_group("t", "g")
    log.create_group("t", "slow")
    log.append("t", 0, [b"%d" % i for i in range(6)])
    assert log.commit("t", "slow", 0, 2) is CommitStatus.COMMITTED
    assert log.commit("t", "g", 0, 2) is CommitStatus.COMMITTED
    state = log.channel_state("t", 0)
    assert (state.head, state.tail) == (3, 5)


class TestCommitBoundaries:
    def test_commit_at_the_tail_is_committed(self, log: ChannelLog) -> None:
        """Committing exactly the last stored offset commits it."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.commit("t", "g", 0, 2) is CommitStatus.COMMITTED
        assert log.committed("t", "g", 0) == (2, True)

    def test_commit_one_past_the_tail_is_rejected_and_changes_nothing(
        self, log: ChannelLog
    ) -> None:
        """A commit at tail + 1 is rejected; the element published next is still unread."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.commit("t", "g", 0, 1) is CommitStatus.COMMITTED
        assert log.commit("t", "g", 0, 3) is CommitStatus.REJECTED
        assert log.committed("t", "g", 0) == (1, True)
        [(offset, _)] = log.append("t", 0, [b"d"])
        assert offset == 3
        resume = log.committed("t", "g", 0)[0] + 1
        assert [e.data for e in log.fetch("t", 0, resume, 10)] == [b"c", b"d"]

    def test_commit_one_past_the_tail_of_a_released_channel_keeps_the_next_element(
        self, log: ChannelLog
    ) -> None:
        """Without retention, a rejected commit at tail + 1 does not release what comes next."""
        trimmed_channel(log)
        assert log.commit("t", "slow", 0, 5) is CommitStatus.COMMITTED
        assert log.commit("t", "g", 0, 6) is CommitStatus.REJECTED
        log.append("t", 0, [b"6"])
        assert log.commit("t", "slow", 0, 6) is CommitStatus.COMMITTED
        assert log.channel_state("t", 0).head == 3  # g still needs 3..6
        assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"3", b"4", b"5", b"6"]

    def test_commit_at_head_minus_one_commits_nothing(self, log: ChannelLog) -> None:
        """head - 1 was released already: nothing to commit, the commit point stays."""
        trimmed_channel(log)
        log.create_group("t", "late")  # starts at head - 1, nothing committed
        assert log.committed("t", "late", 0) == (2, False)
        assert log.commit("t", "late", 0, 2) is CommitStatus.NOTHING_TO_COMMIT
        assert log.committed("t", "late", 0) == (2, False)
        assert log.commit("t", "late", 0, 3) is CommitStatus.COMMITTED
        assert log.committed("t", "late", 0) == (3, True)

    def test_commit_at_the_current_commit_is_already_committed(self, log: ChannelLog) -> None:
        """Re-committing the committed offset reports it, and one more commits."""
        trimmed_channel(log)
        assert log.commit("t", "g", 0, 2) is CommitStatus.ALREADY_COMMITTED
        assert log.commit("t", "g", 0, 3) is CommitStatus.COMMITTED
        assert log.committed("t", "g", 0) == (3, True)


class TestSeekBoundaries:
    def test_seek_to_head_minus_one_resumes_at_the_head(self, log: ChannelLog) -> None:
        """Seeking to head - 1 (retained topic) is kept exactly; one below clamps to it."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        log.commit("t", "g", 0, 2)
        assert log.seek("t", "g", 0, offset=-1) == -1
        assert log.committed("t", "g", 0) == (-1, False)
        assert log.seek("t", "g", 0, offset=-2) == -1

    def test_seek_to_head_minus_one_of_a_released_channel(self, log: ChannelLog) -> None:
        """Without retention, head - 1 is the lowest seek and head - 2 clamps to it."""
        trimmed_channel(log)
        assert log.seek("t", "g", 0, offset=2) == 2
        assert log.seek("t", "g", 0, offset=1) == 2
        assert log.seek("t", "g", 0, offset=3) == 3

    def test_seek_to_the_tail_and_one_past_it(self, log: ChannelLog) -> None:
        """Seeking to the tail is kept; tail + 1 clamps to the tail."""
        trimmed_channel(log)
        assert log.seek("t", "g", 0, offset=5) == 5
        assert log.seek("t", "g", 0, offset=6) == 5
        assert log.seek("t", "g", 0, offset=4) == 4

    def test_seek_to_tail_minus_one_keeps_the_tail_unread(self, log: ChannelLog) -> None:
        """A retained seek back to tail - 1 moves the commit there: only the tail is unread."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        log.commit("t", "g", 0, 2)
        assert log.seek("t", "g", 0, offset=1) == 1
        assert log.committed("t", "g", 0) == (1, True)


class TestTimestampBoundaries:
    def stamped(self, log: ChannelLog, clock: Clock) -> None:
        """Topic ``t``: batch [a, b] at 10 µs (b at 11 µs), [c] at 20, [d] at 30; group ``g``."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        for now, batch in ((10, [b"a", b"b"]), (20, [b"c"]), (30, [b"d"])):
            clock.now = now * US
            log.append("t", 0, batch)

    def test_timestamp_equal_to_an_element_finds_that_element(
        self, log: ChannelLog, clock: Clock
    ) -> None:
        """A timestamp equal to an element's accept time finds it; one more finds the next.

        The elements of one batch have their own times too (1 µs apart).
        """
        self.stamped(log, clock)
        assert log.find_timestamp("t", 0, 10 * US) == 0
        assert log.find_timestamp("t", 0, 10 * US + 1) == 1
        assert log.find_timestamp("t", 0, 11 * US) == 1
        assert log.find_timestamp("t", 0, 11 * US + 1) == 2
        assert log.find_timestamp("t", 0, 20 * US) == 2
        assert log.find_timestamp("t", 0, 29 * US) == 3
        assert log.find_timestamp("t", 0, 30 * US) == 3
        assert log.find_timestamp("t", 0, 30 * US + 1) == 4

    def test_seek_to_a_timestamp_equal_to_an_element_resumes_after_it(
        self, log: ChannelLog, clock: Clock
    ) -> None:
        """Seeking to an element's own timestamp resumes after it (seed 000: the next
        element is the first accepted strictly after the time), even inside a batch."""
        self.stamped(log, clock)
        assert log.seek("t", "g", 0, timestamp_ns=20 * US) == 2
        assert log.seek("t", "g", 0, timestamp_ns=20 * US - 1) == 1
        assert log.seek("t", "g", 0, timestamp_ns=30 * US) == 3
        assert log.seek("t", "g", 0, timestamp_ns=31 * US) == 3
        assert log.seek("t", "g", 0, timestamp_ns=10 * US) == 0  # a's time: b is next
        assert log.seek("t", "g", 0, timestamp_ns=11 * US) == 1
        assert log.seek("t", "g", 0, timestamp_ns=10 * US - 1) == -1

    def test_timestamp_of_a_released_element_finds_the_head(
        self, log: ChannelLog, clock: Clock
    ) -> None:
        """A timestamp inside a partly released batch finds the head, not a released offset."""
        log.ensure_topic("t", 1)
        log.create_group("t", "g")
        clock.now = 10
        log.append("t", 0, [b"a", b"b", b"c"])
        log.commit("t", "g", 0, 0)
        assert log.channel_state("t", 0).head == 1
        assert log.find_timestamp("t", 0, 10) == 1
