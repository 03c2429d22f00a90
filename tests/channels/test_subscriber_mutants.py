"""The channel subscriber, rule by rule, against one embedded store (issue 20's mutation run).

What a user sees: which elements a receive returns and in what order, what a commit
answers and where a member resumes, where a seek lands (by position, time, head, tail),
the heads, tails, commits and remaining counts it reports, and the exact refusals. One
store serves the whole module (starting one costs half a second); each test has its
own topic, published to with a ``ChannelPublisher`` in the same process.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from dcps import AlreadyClosedError, BadParameterError, PreconditionNotMetError
from dcps.channels import (
    ChannelledTopic,
    ChannelSubscriber,
    ClientState,
    CommitStatus,
    Position,
    destroy_subscriber_group,
)
from tests.support.channel_entities import publish, subscriber
from tests.support.channel_entities import retained_topic as topic
from tests.support.embedded_store import served_store
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually

TIMEOUT = 5.0  # short: a mutant that loses an element fails the test sooner


served = served_store("substore")  # one embedded store for the module


@pytest.fixture
def kw(served: dict[str, Any]) -> dict[str, Any]:
    return dict(served["kw"])


def seqs(elements: list[Any]) -> list[int]:
    return [e.value.seq for e in elements]


class TestParameters:
    @pytest.mark.parametrize("bad", [0, -1, 1.5, None])
    def test_max_backlog_must_be_a_positive_int(self, bad: Any, topic_name: str) -> None:
        with pytest.raises(BadParameterError) as info:
            ChannelSubscriber(topic(topic_name), max_backlog=bad)
        assert str(info.value) == f"max_backlog must be an int >= 1, got {bad!r}"

    @pytest.mark.parametrize(
        ("name", "what"),
        [("timeout", "the subscriber timeout"), ("request_timeout", "request_timeout")],
    )
    @pytest.mark.parametrize("bad", [0, 0.0, None])
    def test_timeouts_must_be_positive_and_finite(
        self, name: str, what: str, bad: Any, kw: dict[str, Any], topic_name: str
    ) -> None:
        with pytest.raises(BadParameterError) as info:
            ChannelSubscriber(topic(topic_name), **kw, **{name: bad})
        assert str(info.value) == f"{what} must be positive and finite, got {bad!r}"

    def test_a_missing_topic_is_refused_unless_created(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        bare = ChannelledTopic(topic_name, Msg)
        with pytest.raises(BadParameterError) as info:
            ChannelSubscriber(bare, **kw)
        assert str(info.value).startswith(
            f"channelled topic {topic_name!r} does not exist in namespace {kw['namespace']!r}"
        )
        sub = subscriber(opened, kw, bare, create=True)
        assert sub.channel_count >= 1
        assert sub.channels == list(range(sub.channel_count))

    def test_a_topic_with_a_channel_count_is_created(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        sub = subscriber(opened, kw, ChannelledTopic(topic_name, Msg, channel_count=3))
        assert sub.channel_count == 3
        assert sub.channels == [0, 1, 2]
        assert all(sub.is_owner(c) for c in range(3))
        assert not sub.is_owner(3)

    @pytest.mark.parametrize("bad", [0, -2, "3"])
    def test_receive_needs_a_positive_count(
        self, bad: Any, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        sub = subscriber(opened, kw, topic(topic_name))
        with pytest.raises(BadParameterError) as info:
            sub.receive(bad)
        assert str(info.value) == f"max_elements must be an int >= 1, got {bad!r}"


class TestReceive:
    def test_one_or_many_in_order(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(opened, kw, t)
        publish(opened, kw, t, range(6))
        first = sub.receive().result(TIMEOUT)
        assert (first.value.seq, first.position) == (0, Position(0, 0))
        assert first.timestamp.tzinfo is UTC
        assert abs(first.timestamp - datetime.now(UTC)) < timedelta(minutes=1)
        rest = receive_n(sub, 5, TIMEOUT)
        assert seqs(rest) == [1, 2, 3, 4, 5]
        assert [e.position for e in rest] == [Position(0, i) for i in range(1, 6)]

    def test_complete_on_empty(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(opened, kw, t, complete_on_empty=True)
        assert sub.receive().result(TIMEOUT) is None
        assert sub.receive(5).result(TIMEOUT) == []
        publish(opened, kw, t, range(2))
        got = eventually(lambda: sub.receive(5).result(TIMEOUT), timeout=TIMEOUT)
        assert seqs(got) == [0, 1]

    def test_filter_and_converter(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(
            opened, kw, t, filter=lambda m: m.seq % 2 == 0, converter=lambda m: m.seq * 10
        )
        publish(opened, kw, t, range(7))
        got = receive_n(sub, 4, TIMEOUT)
        assert [e.value for e in got] == [0, 20, 40, 60]
        assert [e.position.offset for e in got] == [0, 2, 4, 6]

    def test_a_cancelled_receive_passes_its_elements_on(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(opened, kw, t)
        waiting = sub.receive(3)
        assert waiting.cancel()
        publish(opened, kw, t, range(3))
        assert seqs(receive_n(sub, 3, TIMEOUT)) == [0, 1, 2]

    def test_flow_control_counts_pending_receives(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(opened, kw, t, max_backlog=2)
        a, b = sub.receive(), sub.receive()
        assert sub.flow_control.backlog == 2
        assert sub.flow_control.max_backlog == 2
        assert sub.flow_control.is_backlogged
        sub.flow_control.flush()  # hands the receives to the delivery thread now
        publish(opened, kw, t, range(2))
        assert [a.result(TIMEOUT).value.seq, b.result(TIMEOUT).value.seq] == [0, 1]
        eventually(lambda: sub.flow_control.backlog == 0, timeout=TIMEOUT)

    def test_several_channels_all_arrive(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name, 3)
        sub = subscriber(opened, kw, t)
        for c in range(3):
            publish(opened, kw, t, range(c * 10, c * 10 + 4), channel=c)
        got = receive_n(sub, 12, TIMEOUT)
        by_channel = {c: [e.value.seq for e in got if e.channel == c] for c in range(3)}
        assert by_channel == {c: list(range(c * 10, c * 10 + 4)) for c in range(3)}


class TestCommits:
    def test_commit_statuses(self, kw: dict[str, Any], opened: list[Any], topic_name: str) -> None:
        t = topic(topic_name, 2)
        publish(opened, kw, t, range(5))
        sub = subscriber(opened, kw, t, group="g")
        got = receive_n(sub, 5, TIMEOUT)
        result = sub.commit(0, got[2].position)
        assert (result.channel, result.position, result.status) == (
            0,
            Position(0, 2),
            CommitStatus.COMMITTED,
        )
        assert result.is_success
        again = sub.commit(0, Position(0, 1))
        assert again.status is CommitStatus.ALREADY_COMMITTED
        assert again.is_success
        beyond = sub.commit(0, Position(0, 9))
        assert beyond.status is CommitStatus.REJECTED
        assert not beyond.is_success
        assert sub.commit(1, Position(1, 0)).status is CommitStatus.NOTHING_TO_COMMIT
        both = sub.commit({0: Position(0, 4), 1: Position(1, 0)})
        assert {c: r.status for c, r in both.items()} == {
            0: CommitStatus.COMMITTED,
            1: CommitStatus.NOTHING_TO_COMMIT,
        }
        assert sub.last_committed() == {0: Position(0, 4)}
        assert sub.last_committed(0) == Position(0, 4)
        assert sub.last_committed(1) is None

    def test_element_commit_and_resume(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        publish(opened, kw, t, range(6))
        first = subscriber(opened, kw, t, group="g")
        got = receive_n(first, 4, TIMEOUT)
        assert got[1].commit().status is CommitStatus.COMMITTED
        assert got[3].commit_async().result(TIMEOUT).status is CommitStatus.COMMITTED
        first.close()
        second = subscriber(opened, kw, t, group="g")
        assert seqs(receive_n(second, 2, TIMEOUT)) == [4, 5]

    def test_bad_commit_arguments(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        sub = subscriber(opened, kw, topic(topic_name, 2), group="g")
        with pytest.raises(BadParameterError) as info:
            sub.commit(0)  # type: ignore[call-overload]
        assert str(info.value) == "commit(channel, position) needs a position"
        with pytest.raises(BadParameterError) as info:
            sub.commit(0, Position(1, 0))
        assert str(info.value) == "Position(channel=1, offset=0) is not a Position of channel 0"
        with pytest.raises(BadParameterError) as info:
            sub.commit({1: (1, 0)})  # type: ignore[dict-item]
        assert str(info.value) == "(1, 0) is not a Position of channel 1"

    def test_an_anonymous_subscriber_commits_what_it_delivered(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(opened, kw, t)
        publish(opened, kw, t, range(3))
        receive_n(sub, 3, TIMEOUT)
        eventually(lambda: sub.last_committed() == {0: Position(0, 2)}, timeout=TIMEOUT)
        assert sub.remaining_messages() == 0


class TestSeek:
    def test_seek_to_a_position_and_its_clamps(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        publish(opened, kw, t, range(5))
        sub = subscriber(opened, kw, t, group="g")
        assert sub.seek(0, Position(0, 2)) == Position(0, 2)
        assert seqs(receive_n(sub, 2, TIMEOUT)) == [3, 4]
        assert sub.seek(0, Position(0, 99)) == Position(0, 4)  # clamped to the tail
        assert sub.remaining_messages() == 0
        assert sub.seek({0: Position(0, 0)}) == {0: Position(0, 0)}
        assert sub.remaining_messages() == 4
        assert sub.remaining_messages(0) == 4
        assert sub.remaining_messages(1) == 0
        assert seqs(receive_n(sub, 4, TIMEOUT)) == [1, 2, 3, 4]

    def test_seek_to_head_and_tail(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name, 2)
        publish(opened, kw, t, range(3))
        sub = subscriber(opened, kw, t, group="g")
        assert sub.heads() == {0: Position(0, 0), 1: Position(1, 0)}
        assert sub.tails() == {0: Position(0, 2), 1: Position(1, -1)}
        assert sub.head(0) == Position(0, 0)
        assert sub.tail(0) == Position(0, 2)
        assert sub.head(5) is None
        assert sub.tail(5) is None
        assert sub.seek_to_tail(0) == {0: Position(0, 2)}
        assert sub.remaining_messages() == 0
        assert sub.seek_to_head() == {0: Position(0, -1), 1: Position(1, -1)}
        assert sub.remaining_messages() == 3
        assert seqs(receive_n(sub, 3, TIMEOUT)) == [0, 1, 2]
        assert sub.seek_to_tail() == {0: Position(0, 2), 1: Position(1, -1)}

    def test_seek_and_commit(self, kw: dict[str, Any], opened: list[Any], topic_name: str) -> None:
        t = topic(topic_name, 2)
        publish(opened, kw, t, range(4))
        sub = subscriber(opened, kw, t, group="g")
        assert sub.seek_and_commit(0, Position(0, 1)) == Position(0, 1)
        assert sub.last_committed() == {0: Position(0, 1)}
        assert sub.seek_and_commit({0: Position(0, 2)}) == {0: Position(0, 2)}
        assert sub.last_committed() == {0: Position(0, 2)}
        assert sub.seek_to_tail_and_commit() == {0: Position(0, 3), 1: Position(1, -1)}
        assert sub.last_committed() == {0: Position(0, 3)}  # nothing to commit in channel 1

    def test_seek_by_time(self, kw: dict[str, Any], opened: list[Any], topic_name: str) -> None:
        t = topic(topic_name)
        publish(opened, kw, t, range(2))
        sub = subscriber(opened, kw, t, group="g")
        early = receive_n(sub, 2, TIMEOUT)
        # strictly after the time (seed 000): an element's own time resumes after it
        assert sub.seek(0, early[1].timestamp) == Position(0, 1)
        assert sub.remaining_messages() == 0
        assert sub.seek(0, early[0].timestamp) == Position(0, 0)
        assert seqs(receive_n(sub, 1, TIMEOUT)) == [1]
        assert sub.seek(0, early[0].timestamp - timedelta(microseconds=1)) == Position(0, -1)
        assert seqs(receive_n(sub, 2, TIMEOUT)) == [0, 1]
        later = datetime.now(UTC) + timedelta(hours=1)
        assert sub.seek(0, later) == Position(0, 1)
        with pytest.raises(BadParameterError) as info:
            sub.seek(0, datetime(2020, 1, 1))
        assert str(info.value) == "a seek timestamp must be timezone-aware (e.g. UTC)"

    def test_seek_of_a_channel_not_owned(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        sub = subscriber(opened, kw, topic(topic_name, 2), group="g")
        with pytest.raises(PreconditionNotMetError) as info:
            sub.seek({0: Position(0, 0), 4: Position(4, 0), 3: Position(3, 0)})
        assert str(info.value) == (
            f"cannot seek channels [3, 4] of {topic_name!r}: this subscriber does not own them"
        )


class TestLifecycle:
    def test_close_refuses_later_calls_and_runs_on_close(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        sub = ChannelSubscriber(topic(topic_name), **kw)
        ran: list[str] = []
        sub.on_close(lambda: ran.append("first"))
        pending = sub.receive()
        assert sub.state is ClientState.OPEN
        assert not sub.closed
        sub.close()
        assert pending.cancelled()
        assert ran == ["first"]
        assert sub.state is ClientState.CLOSED
        assert sub.closed
        sub.close()
        assert ran == ["first"]
        sub.on_close(lambda: ran.append("late"))
        assert ran == ["first", "late"]
        message = f"the subscriber of {topic_name!r} is closed"
        for call in (sub.receive, sub.heartbeat, sub.heads, lambda: sub.commit(0, Position(0, 0))):
            with pytest.raises(AlreadyClosedError) as info:
                call()
            assert str(info.value) == message

    def test_destroy_group(self, kw: dict[str, Any], opened: list[Any], topic_name: str) -> None:
        t = topic(topic_name)
        publish(opened, kw, t, range(3))
        anonymous = subscriber(opened, kw, t)
        with pytest.raises(BadParameterError) as info:
            anonymous.destroy_group()
        assert str(info.value) == "an anonymous subscriber has no group to destroy"
        member = subscriber(opened, kw, t, group="g")
        member.commit(0, Position(0, 1))
        member.heartbeat()
        assert member.destroy_group() is True
        assert member.closed
        assert destroy_subscriber_group(t, "g", **kw) is False
        again = subscriber(opened, kw, t, group="g")
        assert again.last_committed() == {}
        assert seqs(receive_n(again, 3, TIMEOUT)) == [0, 1, 2]

    def test_destroy_a_group_from_outside(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        publish(opened, kw, t, range(3))
        member = subscriber(opened, kw, t, group="h")
        member.commit(0, Position(0, 2))
        member.close()
        assert destroy_subscriber_group(t, "h", **kw) is True
        again = subscriber(opened, kw, t, group="h")
        assert seqs(receive_n(again, 3, TIMEOUT)) == [0, 1, 2]


class TestEdges:
    def test_seek_and_commit_to_the_first_element_commits_it(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        publish(opened, kw, t, range(3))
        sub = subscriber(opened, kw, t, group="g")
        assert sub.seek_and_commit(0, Position(0, 0)) == Position(0, 0)
        assert sub.last_committed() == {0: Position(0, 0)}
        assert seqs(receive_n(sub, 2, TIMEOUT)) == [1, 2]

    def test_destroying_a_group_checks_its_name_and_timeout(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        with pytest.raises(BadParameterError) as info:
            destroy_subscriber_group(t, "g*", **kw)
        assert str(info.value) == "group must be a non-empty string without '*', '?' or '\\'"
        with pytest.raises(BadParameterError) as info:
            destroy_subscriber_group(t, "g", connect_timeout=-1, **kw)
        assert str(info.value) == "connect_timeout must not be negative, got -1"

    def test_remaining_messages_of_a_later_channel(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name, 3)
        publish(opened, kw, t, range(4), channel=2)
        publish(opened, kw, t, range(1), channel=0)
        sub = subscriber(opened, kw, t, group="g")
        assert sub.remaining_messages(2) == 4
        assert sub.remaining_messages(0) == 1
        assert sub.remaining_messages(1) == 0
        assert sub.remaining_messages() == 5

    def test_commits_of_a_channel_another_member_owns(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        """UNOWNED unless allow_unowned_commits: then the store records the commit."""
        t = topic(topic_name, 2)
        for c in (0, 1):
            publish(opened, kw, t, range(2), channel=c)
        first = subscriber(opened, kw, t, group="g", allow_unowned_commits=True)
        second = subscriber(opened, kw, t, group="g")
        eventually(lambda: len(first.channels) == len(second.channels) == 1, timeout=TIMEOUT)
        (mine,), (theirs,) = first.channels, second.channels
        refused = second.commit(mine, Position(mine, 0))
        assert refused.status is CommitStatus.UNOWNED
        assert not refused.is_success
        recorded = first.commit(theirs, Position(theirs, 1))
        assert recorded.status is CommitStatus.COMMITTED
        assert second.last_committed(theirs) == Position(theirs, 1)

    def test_an_anonymous_subscriber_keeps_committing_round_after_round(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        t = topic(topic_name)
        sub = subscriber(opened, kw, t)
        publish(opened, kw, t, range(3))
        for offset in range(3):
            receive_n(sub, 1, TIMEOUT)
            eventually(
                lambda o=offset: sub.last_committed() == {0: Position(0, o)}, timeout=TIMEOUT
            )


class TestConstruction:
    def test_bad_names_and_timeouts_are_named(self, kw: dict[str, Any], topic_name: str) -> None:
        t = topic(topic_name)
        cases = [
            ({"group": "g*"}, "group must be a non-empty string without '*', '?' or '\\'"),
            ({"timeout": -1}, "the subscriber timeout must not be negative, got -1"),
            ({"connect_timeout": -1}, "connect_timeout must not be negative, got -1"),
        ]
        for extra, message in cases:
            with pytest.raises(BadParameterError) as info:
                ChannelSubscriber(t, **kw, **extra)
            assert str(info.value) == message

    def test_the_smallest_values_are_accepted(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        sub = subscriber(opened, kw, topic(topic_name), max_backlog=1, request_timeout=0.5)
        assert sub.flow_control.max_backlog == 1
        assert sub.allow_unowned_commits is False

    def test_listeners_hear_the_channels_assigned(
        self, kw: dict[str, Any], opened: list[Any], topic_name: str
    ) -> None:
        heard: list[tuple[str, Any, frozenset[int]]] = []

        class Listener:
            def on_channels_assigned(self, sub: Any, channels: frozenset[int]) -> None:
                heard.append(("assigned", sub, channels))

            def on_channels_revoked(self, sub: Any, channels: frozenset[int]) -> None:
                heard.append(("revoked", sub, channels))

            def on_channels_lost(self, sub: Any, channels: frozenset[int]) -> None:
                heard.append(("lost", sub, channels))

        sub = subscriber(opened, kw, topic(topic_name, 2), group="g", listeners=[Listener()])
        eventually(lambda: heard, timeout=TIMEOUT)
        assert heard == [("assigned", sub, frozenset({0, 1}))]
