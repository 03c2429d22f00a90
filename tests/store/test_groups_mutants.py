"""The group coordinator, unit level: membership, claims after a store restart, expiry,
re-admission and the assignments it publishes (issue 20: the mutants of
``dcps/store/_groups.py`` these tests kill went unseen before).

The coordinator runs on a real store file; what it would publish on the Assignment
topic is kept in a list (``Published``) and read back as a member would read it.
The end-to-end behaviour with DDS members is in tests/channels.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcps import BadParameterError, PreconditionNotMetError
from dcps.store._groups import ANONYMOUS_PREFIX, GroupCoordinator, _moves
from dcps.store._log import ChannelLog, SyncMode
from dcps.wire._messages import Assignment
from dcps.wire._requests import CommitRequest, JoinRequest

TOPIC = "t"


class Published:
    """Where the coordinator writes its assignments (the Assignment topic's writer)."""

    def __init__(self) -> None:
        self.sent: list[Assignment] = []

    def write(self, assignment: Assignment) -> None:
        self.sent.append(assignment)

    @property
    def last(self) -> Assignment:
        return self.sent[-1]

    def owners(self) -> dict[int, str]:
        """The last assignment as ``{channel: member}`` (unowned channels left out)."""
        a = self.last
        return {c: a.members[i] for c, i in enumerate(a.owners) if i >= 0}


@pytest.fixture
def log(tmp_path: Path) -> Iterator[ChannelLog]:
    # NORMAL: no fsync per group change (the coordinator's behaviour is the same; faster)
    with ChannelLog(tmp_path / "store.db", sync=SyncMode.NORMAL) as opened:
        opened.ensure_topic(TOPIC, channel_count=4)
        yield opened


@pytest.fixture
def published() -> Published:
    return Published()


@pytest.fixture
def groups(log: ChannelLog, published: Published) -> GroupCoordinator:
    return GroupCoordinator(log, published, "inc-1")


def join(
    groups: GroupCoordinator,
    member: str,
    group: str = "g",
    *,
    timeout_ms: int = 10_000,
    claims: tuple[int, ...] = (),
    anonymous: bool = False,
) -> tuple[int, ...]:
    return groups.join(
        JoinRequest(TOPIC, group, member, timeout_ms, anonymous, previous_channels=claims)
    ).channels


def silence(groups: GroupCoordinator, member: str, group: str = "g") -> None:
    """``member`` was last heard of long ago (its timeout has passed)."""
    found = groups.group(TOPIC, group)
    assert found is not None
    found.members[member].last_seen = time.monotonic() - 3600


def commit(member: str, channels: tuple[int, ...], group: str = "g", timeout_ms: int = 0):
    return CommitRequest(
        TOPIC,
        group,
        member,
        channels,
        tuple(0 for _ in channels),
        incarnation="inc-0",
        member_timeout_ms=timeout_ms,
    )


class TestMembership:
    def test_join_creates_the_group_and_publishes_the_assignment(
        self, groups: GroupCoordinator, log: ChannelLog, published: Published
    ) -> None:
        membership = groups.join(JoinRequest(TOPIC, "g", "m1", 5000))
        assert membership.channels == (0, 1, 2, 3)
        assert membership.generation == 1
        assert membership.incarnation == "inc-1"
        assert log.has_group(TOPIC, "g")
        a = published.last
        assert (a.topic, a.group, a.incarnation, a.generation) == (TOPIC, "g", "inc-1", 1)
        assert a.members == ["m1"]
        assert a.owners == [0, 0, 0, 0]
        assert a.expelled == []

    def test_a_second_member_takes_half_and_both_are_told(
        self, groups: GroupCoordinator, published: Published
    ) -> None:
        join(groups, "m2")
        assert join(groups, "m1") == (2, 3)  # sticky: m2 keeps what it can
        assert groups.heartbeat(TOPIC, "g", "m2").channels == (0, 1)
        assert published.last.members == ["m1", "m2"]
        assert published.owners() == {0: "m2", 1: "m2", 2: "m1", 3: "m1"}
        assert published.last.generation == 2
        assert groups.heartbeat(TOPIC, "g", "m1").generation == 2

    def test_join_timeout_has_a_floor_of_50_ms(self, groups: GroupCoordinator) -> None:
        join(groups, "fast", timeout_ms=0)
        join(groups, "slow", timeout_ms=2500)
        found = groups.group(TOPIC, "g")
        assert found is not None
        assert found.members["fast"].timeout == 0.05
        assert found.members["slow"].timeout == 2.5
        assert found.members["slow"].anonymous is False

    def test_non_members_are_refused_naming_member_group_and_topic(
        self, groups: GroupCoordinator
    ) -> None:
        join(groups, "m1")
        message = (
            r"^'m9' is not a member of group 'g' of topic 't' "
            r"\(left, timed out, or the store restarted\)$"
        )
        with pytest.raises(PreconditionNotMetError, match=message):
            groups.heartbeat(TOPIC, "g", "m9")
        with pytest.raises(PreconditionNotMetError, match="'m1' is not a member of group 'h'"):
            groups.member_of(TOPIC, "h", "m1")
        assert groups.has_member(TOPIC, "g", "m1")
        assert not groups.has_member(TOPIC, "g", "m9")
        assert not groups.has_member(TOPIC, "h", "m1")

    def test_unowned_names_the_channels_of_others(self, groups: GroupCoordinator) -> None:
        join(groups, "m1")
        join(groups, "m2")
        found = groups.member_of(TOPIC, "g", "m1")
        assert groups.unowned(found, "m1", [0, 1, 2, 3]) == [2, 3]
        assert groups.unowned(found, "m2", (c for c in [0, 3])) == [0]
        message = r"^topic 't' has channels 0\.\.3; \[4, -1\] do not exist$"
        with pytest.raises(BadParameterError, match=message):
            groups.unowned(found, "m1", [0, 4, -1, 3])

    def test_a_join_claiming_a_missing_channel_changes_nothing(
        self, groups: GroupCoordinator, log: ChannelLog, published: Published
    ) -> None:
        with pytest.raises(BadParameterError, match=r"\[4\] do not exist"):
            join(groups, "m1", claims=(1, 4))
        assert not log.has_group(TOPIC, "g")
        assert groups.group(TOPIC, "g") is None
        assert published.sent == []

    def test_groups_lists_live_groups(self, groups: GroupCoordinator) -> None:
        assert groups.groups() == []
        join(groups, "m1", "a")
        join(groups, "m1", "b")
        assert [g.name for g in groups.groups()] == ["a", "b"]
        assert groups.group(TOPIC, "c") is None


class TestDepartures:
    def test_leave_gives_the_channels_to_the_rest(
        self, groups: GroupCoordinator, published: Published
    ) -> None:
        join(groups, "m1")
        join(groups, "m2")
        groups.leave(TOPIC, "g", "m1")
        assert not groups.has_member(TOPIC, "g", "m1")
        assert groups.heartbeat(TOPIC, "g", "m2").channels == (0, 1, 2, 3)
        assert published.last.members == ["m2"]
        assert published.last.expelled == []
        before = len(published.sent)
        groups.leave(TOPIC, "g", "m1")  # unknown: ignored
        groups.leave(TOPIC, "nope", "m1")
        assert len(published.sent) == before

    def test_the_last_member_of_an_anonymous_group_takes_it_away(
        self, groups: GroupCoordinator, log: ChannelLog
    ) -> None:
        name = ANONYMOUS_PREFIX + "x"
        join(groups, "m1", name, anonymous=True)
        join(groups, "m2", name, anonymous=True)
        groups.leave(TOPIC, name, "m1")
        assert log.has_group(TOPIC, name)
        assert groups.group(TOPIC, name) is not None
        groups.leave(TOPIC, name, "m2")
        assert not log.has_group(TOPIC, name)
        assert groups.group(TOPIC, name) is None

    def test_a_named_group_outlives_its_members(
        self, groups: GroupCoordinator, log: ChannelLog
    ) -> None:
        join(groups, "m1")
        groups.leave(TOPIC, "g", "m1")
        assert log.has_group(TOPIC, "g")
        assert groups.group(TOPIC, "g") is not None

    def test_expire_expels_silent_members_only(
        self, groups: GroupCoordinator, published: Published
    ) -> None:
        join(groups, "m1")
        join(groups, "m2")
        join(groups, "m3")
        silence(groups, "m1")
        silence(groups, "m3")
        groups.expire()
        assert not groups.has_member(TOPIC, "g", "m1")
        assert not groups.has_member(TOPIC, "g", "m3")
        assert groups.heartbeat(TOPIC, "g", "m2").channels == (0, 1, 2, 3)
        assert published.last.expelled == ["m1", "m3"]
        assert published.last.members == ["m2"]
        count = len(published.sent)
        groups.expire()  # nobody else is silent: nothing published
        assert len(published.sent) == count

    def test_expire_logs_each_expelled_member(
        self, groups: GroupCoordinator, caplog: pytest.LogCaptureFixture
    ) -> None:
        join(groups, "m1", timeout_ms=1500)
        silence(groups, "m1")
        with caplog.at_level(logging.INFO, logger="dcps.store"):
            groups.expire()
        assert (
            "group 'g' of topic 't': member m1 expelled (no heartbeat for 1.5 s)" in caplog.messages
        )

    def test_a_heartbeat_keeps_a_member(self, groups: GroupCoordinator) -> None:
        join(groups, "m1")
        silence(groups, "m1")
        groups.heartbeat(TOPIC, "g", "m1")
        groups.expire()
        assert groups.has_member(TOPIC, "g", "m1")

    def test_touch_keeps_a_member_and_ignores_strangers(self, groups: GroupCoordinator) -> None:
        join(groups, "m1")
        silence(groups, "m1")
        groups.touch(TOPIC, "g", "m1")
        groups.touch(TOPIC, "g", "m9")
        groups.touch(TOPIC, "h", "m1")
        groups.expire()
        assert groups.has_member(TOPIC, "g", "m1")
        assert not groups.has_member(TOPIC, "g", "m9")

    def test_destroy_expels_every_member_and_deletes_the_group(
        self, groups: GroupCoordinator, log: ChannelLog, published: Published
    ) -> None:
        join(groups, "m1")
        join(groups, "m2")
        assert groups.destroy(TOPIC, "g") is True
        assert not log.has_group(TOPIC, "g")
        assert groups.group(TOPIC, "g") is None
        a = published.last
        assert a.expelled == ["m1", "m2"]
        assert a.members == []
        assert a.owners == [-1, -1, -1, -1]
        assert groups.destroy(TOPIC, "g") is False

    def test_destroy_of_a_group_without_live_state(
        self, groups: GroupCoordinator, log: ChannelLog, published: Published
    ) -> None:
        log.create_group(TOPIC, "cold")
        assert groups.destroy(TOPIC, "cold") is True
        assert not log.has_group(TOPIC, "cold")
        assert published.sent == []


class TestClaims:
    def test_the_first_claims_after_a_restart_wait_for_their_owners(
        self, groups: GroupCoordinator, published: Published
    ) -> None:
        assert join(groups, "m1", claims=(0, 1)) == (0, 1)
        assert published.owners() == {0: "m1", 1: "m1"}
        assert published.last.owners == [0, 0, -1, -1]
        # m3 claims nothing: the window is still open, it gets nothing yet
        assert join(groups, "m3") == ()
        # every channel claimed: the window closes and the group is balanced, the
        # claimed channels kept where the quotas allow (m1's 1 stays m1's)
        assert join(groups, "m2", claims=(2, 3, 1)) == (2,)
        found = groups.group(TOPIC, "g")
        assert found is not None
        assert found.claiming_until is None
        assert published.owners() == {0: "m1", 1: "m1", 2: "m2", 3: "m3"}

    def test_the_window_lasts_the_first_claimants_timeout(self, groups: GroupCoordinator) -> None:
        before = time.monotonic()
        join(groups, "m1", claims=(0,), timeout_ms=4000)
        found = groups.group(TOPIC, "g")
        assert found is not None
        assert found.claiming_until is not None
        assert before + 4.0 <= found.claiming_until <= time.monotonic() + 4.0

    def test_when_the_window_ends_unclaimed_channels_are_shared(
        self, groups: GroupCoordinator, published: Published
    ) -> None:
        join(groups, "m1", claims=(0,))
        join(groups, "m2", claims=(1,))
        found = groups.group(TOPIC, "g")
        assert found is not None
        generation = published.last.generation
        groups.expire()  # window still open: nothing moves
        assert published.last.generation == generation
        found.claiming_until = time.monotonic() - 0.001
        groups.expire()
        assert found.claiming_until is None
        owners = published.owners()
        assert owners[0] == "m1"
        assert owners[1] == "m2"
        assert sorted(owners.values()) == ["m1", "m1", "m2", "m2"]

    def test_claims_without_a_window_are_ignored(self, groups: GroupCoordinator) -> None:
        join(groups, "m1")
        assert join(groups, "m2", claims=(0, 1, 2)) == (2, 3)
        found = groups.group(TOPIC, "g")
        assert found is not None
        assert found.claiming_until is None

    def test_anonymous_claims_open_no_window(self, groups: GroupCoordinator) -> None:
        name = ANONYMOUS_PREFIX + "y"
        assert join(groups, "m1", name, claims=(0,), anonymous=True) == (0, 1, 2, 3)

    def test_a_channel_stays_with_its_first_live_claimant(self, groups: GroupCoordinator) -> None:
        join(groups, "m1", claims=(0, 1))
        assert join(groups, "m2", claims=(1, 2)) == (2,)
        assert groups.heartbeat(TOPIC, "g", "m1").channels == (0, 1)


class TestReadmit:
    def test_a_member_of_an_earlier_store_is_readmitted_with_its_commits(
        self, groups: GroupCoordinator, log: ChannelLog, published: Published
    ) -> None:
        log.create_group(TOPIC, "g")  # the group of the store before the restart
        groups.readmit(commit("m1", (2, 3), timeout_ms=3000))
        assert groups.has_member(TOPIC, "g", "m1")
        found = groups.group(TOPIC, "g")
        assert found is not None
        assert found.members["m1"].timeout == 3.0
        assert found.members["m1"].anonymous is False  # what the admin report shows
        assert groups.heartbeat(TOPIC, "g", "m1").channels == (2, 3)
        assert (published.last.topic, published.last.group) == (TOPIC, "g")
        assert published.last.owners == [-1, -1, 0, 0]

    @pytest.mark.parametrize(("timeout_ms", "seconds"), [(0, 30.0), (10, 0.05), (1, 0.05)])
    def test_readmission_timeout(
        self, groups: GroupCoordinator, log: ChannelLog, timeout_ms: int, seconds: float
    ) -> None:
        log.create_group(TOPIC, "g")
        groups.readmit(commit("m1", (0,), timeout_ms=timeout_ms))
        found = groups.group(TOPIC, "g")
        assert found is not None
        assert found.members["m1"].timeout == seconds

    def test_a_current_member_is_left_as_it_is(
        self, groups: GroupCoordinator, published: Published
    ) -> None:
        join(groups, "m1")
        count = len(published.sent)
        groups.readmit(commit("m1", (0,)))
        assert len(published.sent) == count
        assert groups.heartbeat(TOPIC, "g", "m1").channels == (0, 1, 2, 3)

    def test_a_new_member_of_a_live_group_claims_nothing_outside_a_window(
        self, groups: GroupCoordinator
    ) -> None:
        join(groups, "m1")
        groups.readmit(commit("m2", (0, 1)))
        assert groups.has_member(TOPIC, "g", "m2")
        assert groups.heartbeat(TOPIC, "g", "m2").channels == (2, 3)

    def test_anonymous_and_destroyed_groups_are_not_readmitted(
        self, groups: GroupCoordinator, log: ChannelLog, published: Published
    ) -> None:
        anonymous = ANONYMOUS_PREFIX + "z"
        log.create_group(TOPIC, anonymous)
        groups.readmit(commit("m1", (0,), anonymous))
        groups.readmit(commit("m1", (0,), "gone"))  # no such group in the store
        assert groups.group(TOPIC, anonymous) is None
        assert groups.group(TOPIC, "gone") is None
        assert published.sent == []

    def test_readmission_with_a_missing_channel_is_refused(
        self, groups: GroupCoordinator, log: ChannelLog
    ) -> None:
        log.create_group(TOPIC, "g")
        with pytest.raises(BadParameterError, match=r"\[7\] do not exist"):
            groups.readmit(commit("m1", (0, 7)))
        assert groups.group(TOPIC, "g") is None

    def test_readmission_is_logged(
        self, groups: GroupCoordinator, log: ChannelLog, caplog: pytest.LogCaptureFixture
    ) -> None:
        log.create_group(TOPIC, "g")
        with caplog.at_level(logging.INFO, logger="dcps.store"):
            groups.readmit(commit("m1", (0,)))
        assert (
            "group 'g' of topic 't': member m1 re-admitted after a store restart" in caplog.messages
        )


class TestRebalanceLog:
    def test_moves_are_logged_as_ranges(
        self, groups: GroupCoordinator, caplog: pytest.LogCaptureFixture
    ) -> None:
        with caplog.at_level(logging.INFO, logger="dcps.store"):
            join(groups, "m1")
            join(groups, "m2")
        assert "group 'g' of topic 't': member m1 joined" in caplog.messages
        assert (
            "group 'g' of topic 't': rebalance 1: 1 member(s), moved {0-3: - -> m1}"
            in caplog.messages
        )
        assert (
            "group 'g' of topic 't': rebalance 2: 2 member(s), moved {2-3: m1 -> m2}"
            in caplog.messages
        )

    def test_leave_and_destroy_are_logged(
        self, groups: GroupCoordinator, caplog: pytest.LogCaptureFixture
    ) -> None:
        join(groups, "m1")
        join(groups, "m2")
        with caplog.at_level(logging.INFO, logger="dcps.store"):
            groups.leave(TOPIC, "g", "m2")
            groups.destroy(TOPIC, "g")
        assert caplog.messages == [
            "group 'g' of topic 't': member m2 left",
            "group 'g' of topic 't': rebalance 3: 1 member(s), moved {2-3: m2 -> m1}",
            "group 'g' of topic 't' deleted",
            "group 'g' of topic 't': rebalance 4: 0 member(s), moved {0-3: m1 -> -}",
        ]

    def test_a_rejoin_logs_no_join_and_no_move(
        self, groups: GroupCoordinator, caplog: pytest.LogCaptureFixture
    ) -> None:
        join(groups, "m1")
        with caplog.at_level(logging.INFO, logger="dcps.store"):
            join(groups, "m1")
        assert caplog.messages == []

    def test_a_third_member_takes_one_channel(
        self, groups: GroupCoordinator, caplog: pytest.LogCaptureFixture
    ) -> None:
        join(groups, "a")
        with caplog.at_level(logging.INFO, logger="dcps.store"):
            join(groups, "b")
            join(groups, "c")
        assert caplog.messages[-1] == (
            "group 'g' of topic 't': rebalance 3: 3 member(s), moved {3: b -> c}"
        )

    def test_long_move_lists_are_cut_after_16_runs(self) -> None:
        alternating = {c: ("a", "b") if c % 2 else ("b", "a") for c in range(20)}
        text = _moves(alternating)
        runs = [f"{c}: {'a -> b' if c % 2 else 'b -> a'}" for c in range(16)]
        assert text == "{" + ", ".join(runs) + ", ... (4 more)}"
        assert _moves(dict(list(alternating.items())[:16])) == "{" + ", ".join(runs) + "}"
        assert _moves({5: ("", "x"), 6: ("", "x"), 8: ("", "x")}) == "{5-6: - -> x, 8: - -> x}"
        assert _moves({}) == "{}"
