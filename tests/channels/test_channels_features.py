"""Seed 000 features of the channel layer: element commits, unowned commits, flow control,
and replies to running clients after a store restart."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dcps import AlreadyClosedError, BadParameterError, PreconditionNotMetError
from dcps.channels import (
    ChannelledTopic,
    ChannelOwnershipListener,
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    Element,
    FlowControl,
    OrderBy,
    Position,
)
from dcps.store import Store
from tests.support.peers.channels_types import Msg, receive_n, wait_until

TIMEOUT = 20.0


@pytest.fixture
def kw(domain_id: int, namespace: str) -> dict[str, object]:
    """The domain and namespace every entity of the test uses."""
    return {"domain_id": domain_id, "namespace": namespace}


@pytest.fixture
def topic(topic_name: str) -> ChannelledTopic:
    """A four-channel topic that retains consumed elements."""
    return ChannelledTopic(topic_name, Msg, channel_count=4, retain_consumed=True)


@pytest.fixture
def opened() -> Iterator[list[ChannelPublisher[Msg] | ChannelSubscriber[Msg]]]:
    """Publishers and subscribers closed at the end of the test."""
    entities: list[ChannelPublisher[Msg] | ChannelSubscriber[Msg]] = []
    try:
        yield entities
    finally:
        for entity in reversed(entities):
            entity.close()


def open_pub(opened: list, topic: ChannelledTopic, **kw: object) -> ChannelPublisher[Msg]:
    """A publisher closed with the test."""
    pub: ChannelPublisher[Msg] = ChannelPublisher(topic, **kw)  # type: ignore[arg-type]
    opened.append(pub)
    return pub


def open_sub(opened: list, topic: ChannelledTopic, **kw: object) -> ChannelSubscriber[Msg]:
    """A subscriber closed with the test."""
    sub: ChannelSubscriber[Msg] = ChannelSubscriber(topic, **kw)  # type: ignore[arg-type]
    opened.append(sub)
    return sub


def publish_all(pub: ChannelPublisher[Msg], samples: list[Msg]) -> list[Position | None]:
    """Publish samples and wait for every confirmation."""
    futures = [pub.publish(s) for s in samples]
    pub.flush()
    return [f.result(TIMEOUT) for f in futures]


class StoreProcess:
    """``python -m dcps.store`` in a child process (SIGKILL-able, SIGSTOP-able)."""

    def __init__(self, data: Path, domain_id: int, namespace: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dcps.store", "--data", str(data),
             "--domain", str(domain_id), "--namespace", namespace, "--sync", "NORMAL"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # the store prints one line once it serves
        if not line.startswith("dcps store ready"):
            self.kill()
            raise AssertionError(f"store did not start: {line!r}")

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the store process; for SIGSTOP, wait until it has stopped."""
        os.kill(self.proc.pid, sig)
        if sig == signal.SIGSTOP:
            wait_until(lambda: self._state() in "Tt", TIMEOUT)

    def _state(self) -> str:
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0]

    def kill(self) -> None:
        """SIGKILL the store (resuming it first if stopped) and reap it."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def stores() -> Iterator[list[StoreProcess]]:
    """Store processes killed at the end of the test."""
    started: list[StoreProcess] = []
    try:
        yield started
    finally:
        for s in started:
            s.kill()


def start_store(stores: list[StoreProcess], data: Path, kw: dict[str, object]) -> StoreProcess:
    """Start a store process on ``data`` and wait until it serves."""
    s = StoreProcess(data, kw["domain_id"], kw["namespace"])  # type: ignore[arg-type]
    stores.append(s)
    return s


class TestElementCommit:
    def test_element_commits_its_position_through_its_subscriber(
        self, store: Store, kw: dict[str, object], topic: ChannelledTopic, opened: list
    ) -> None:
        """``element.commit()`` commits the element's position in the receiving member's group."""
        sub = open_sub(opened, topic, group="g", **kw)
        publish_all(
            open_pub(opened, topic, order_by=OrderBy.fixed(2), **kw), [Msg(0, i) for i in range(3)]
        )
        got = receive_n(sub, 3)
        result = got[1].commit()
        assert result.status is CommitStatus.COMMITTED
        assert result.position == Position(2, 1)
        assert sub.last_committed(2) == Position(2, 1)
        assert got[0].commit_async().result(TIMEOUT).status is CommitStatus.ALREADY_COMMITTED
        assert got[2].commit_async().result(TIMEOUT).status is CommitStatus.COMMITTED
        sub.close()
        with pytest.raises(AlreadyClosedError):
            got[2].commit()
        again = open_sub(opened, topic, group="g", complete_on_empty=True, **kw)
        assert again.receive().result(TIMEOUT) is None  # everything was committed

    def test_element_built_by_hand_has_nothing_to_commit_through(self) -> None:
        """An Element not received from a subscriber refuses to commit, naming its position."""
        element = Element(Msg(0, 0), Position(0, 4), datetime.now(UTC))
        with pytest.raises(PreconditionNotMetError, match="0:4"):
            element.commit()
        with pytest.raises(PreconditionNotMetError):
            element.commit_async()
        assert element == Element(Msg(0, 0), Position(0, 4), element.timestamp)

    def test_received_elements_are_values(
        self, store: Store, kw: dict[str, object], topic: ChannelledTopic, opened: list
    ) -> None:
        """Received elements are immutable values that pickle without their subscriber."""
        sub = open_sub(opened, topic, **kw)
        publish_all(open_pub(opened, topic, order_by=OrderBy.fixed(1), **kw), [Msg(7, 0)])
        (got,) = receive_n(sub, 1)
        assert got.position == Position(1, 0)
        assert got.channel == 1
        assert got.value == Msg(7, 0)
        with pytest.raises(AttributeError):
            got.value = Msg(8, 0)  # type: ignore[misc]
        copy = Element(got.value, got.position, got.timestamp)
        assert copy == got
        assert got != Element(got.value, Position(1, 1), got.timestamp)
        back = pickle.loads(pickle.dumps(got))
        assert back == got
        with pytest.raises(PreconditionNotMetError):
            back.commit()  # the subscriber stayed behind
        assert "position=Position(channel=1, offset=0)" in repr(got)
        with pytest.raises(BadParameterError):
            Element(got.value, (1, 0), got.timestamp)  # type: ignore[arg-type]


class TestUnownedCommits:
    @pytest.mark.parametrize(
        ("allow", "expected"),
        [(False, CommitStatus.UNOWNED), (True, CommitStatus.COMMITTED)],
    )
    def test_member_commits_a_channel_a_rebalance_moved(
        self,
        store: Store,
        kw: dict[str, object],
        topic: ChannelledTopic,
        opened: list,
        allow: bool,
        expected: CommitStatus,
    ) -> None:
        """A channel moved to another member commits as UNOWNED, or COMMITTED with the option."""
        first = open_sub(opened, topic, group="g", allow_unowned_commits=allow, **kw)
        publish_all(
            open_pub(opened, topic, order_by=OrderBy.round_robin(), **kw),
            [Msg(0, i) for i in range(8)],
        )
        got = receive_n(first, 8)
        second = open_sub(opened, topic, group="g", **kw)
        wait_until(lambda: len(first.channels) == 2 and len(second.channels) == 2, TIMEOUT)
        moved = next(e for e in got if e.channel in second.channels)
        assert moved.commit().status is expected
        committed = second.last_committed(moved.channel)
        assert committed == (moved.position if allow else None)

    @pytest.mark.parametrize(
        ("allow", "expected"),
        [(False, CommitStatus.UNOWNED), (True, CommitStatus.COMMITTED)],
    )
    def test_timed_out_member_commits_what_it_processed(
        self,
        store: Store,
        kw: dict[str, object],
        topic: ChannelledTopic,
        opened: list,
        allow: bool,
        expected: CommitStatus,
    ) -> None:
        """A timed-out member gets UNOWNED for its old channels, or COMMITTED with the option."""
        lost: list[frozenset[int]] = []

        class Recorder(ChannelOwnershipListener):
            def on_channels_lost(self, subscriber: object, channels: frozenset[int]) -> None:
                lost.append(channels)

        slow = open_sub(
            opened,
            topic,
            group="g",
            timeout=timedelta(seconds=1),
            listeners=[Recorder()],
            allow_unowned_commits=allow,
            **kw,
        )
        publish_all(
            open_pub(opened, topic, order_by=OrderBy.fixed(1), **kw), [Msg(0, i) for i in range(4)]
        )
        got = receive_n(slow, 4)
        other = open_sub(opened, topic, group="g", **kw)
        pending = other.receive()  # keeps the other member alive while the slow one is silent
        wait_until(lambda: bool(lost) and other.channels == [0, 1, 2, 3], TIMEOUT)
        results = slow.commit({1: got[-1].position})
        assert results[1].status is expected
        assert other.last_committed(1) == (got[-1].position if allow else None)
        pending.cancel()


class TestPublisherFlowControl:
    def test_backlog_follows_the_store_falling_behind(
        self,
        tmp_path: Path,
        kw: dict[str, object],
        topic: ChannelledTopic,
        opened: list,
        stores: list[StoreProcess],
    ) -> None:
        """A stopped store fills the window (backlogged, drain times out); resumed, it drains."""
        store = start_store(stores, tmp_path / "data", kw)
        pub = open_pub(
            opened, topic, order_by=OrderBy.fixed(0), batch_count=1, max_in_flight=2, **kw
        )
        flow = pub.flow_control
        assert isinstance(flow, FlowControl)
        assert (flow.backlog, flow.max_backlog, flow.is_backlogged) == (0, 2, False)
        assert not flow.check_backlog(lambda: pytest.fail("called without a backlog"))
        store.signal(signal.SIGSTOP)
        try:
            futures = [pub.publish(Msg(0, i)) for i in range(2)]
            assert flow.backlog == 2
            assert flow.is_backlogged
            normal = threading.Event()
            assert flow.check_backlog(normal.set)
            assert not flow.drain_backlog(timedelta(milliseconds=100))
            assert not normal.is_set()
        finally:
            store.signal(signal.SIGCONT)
        assert flow.drain_backlog(timedelta(seconds=TIMEOUT))
        assert normal.wait(TIMEOUT)
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, 0), Position(0, 1)]
        wait_until(lambda: flow.backlog == 0, TIMEOUT)

    def test_flush_sends_queued_batches_without_waiting_for_linger(
        self,
        tmp_path: Path,
        kw: dict[str, object],
        topic: ChannelledTopic,
        opened: list,
        stores: list[StoreProcess],
    ) -> None:
        """A batch lingering for an hour (another is in flight) is sent by ``flush()``."""
        store = start_store(stores, tmp_path / "data", kw)
        pub = open_pub(opened, topic, order_by=OrderBy.fixed(0), linger=timedelta(hours=1), **kw)
        store.signal(signal.SIGSTOP)
        try:
            first = pub.publish(Msg(0, 0))  # the link is idle: sent at once
            assert pub.flow_control.backlog == 1
            second = pub.publish(Msg(0, 1))  # one in flight: it lingers
            assert pub.flow_control.backlog == 1  # queued, not in flight yet
            pub.flow_control.flush()
            assert pub.flow_control.backlog == 2  # sent without waiting for linger
            assert not second.done()
        finally:
            store.signal(signal.SIGCONT)
        assert first.result(TIMEOUT) == Position(0, 0)
        assert second.result(TIMEOUT) == Position(0, 1)

    def test_flush_never_blocks_on_a_full_window(
        self,
        tmp_path: Path,
        kw: dict[str, object],
        topic: ChannelledTopic,
        opened: list,
        stores: list[StoreProcess],
    ) -> None:
        """With the window full, flush returns at once; the batch goes once the store answers."""
        store = start_store(stores, tmp_path / "data", kw)
        pub = open_pub(
            opened,
            topic,
            order_by=OrderBy.fixed(0),
            linger=timedelta(hours=1),
            max_in_flight=1,
            **kw,
        )
        store.signal(signal.SIGSTOP)
        try:
            first = pub.publish(Msg(0, 0))
            pub.flow_control.flush()  # takes the only slot
            second = pub.publish(Msg(0, 1))
            pub.flow_control.flush()  # no slot: must not wait for the stopped store
            assert pub.flow_control.is_backlogged
            assert not second.done()
        finally:
            store.signal(signal.SIGCONT)
        assert first.result(TIMEOUT) == Position(0, 0)
        assert second.result(TIMEOUT) == Position(0, 1)


class TestSubscriberFlowControl:
    def test_backlog_counts_receives_not_completed(
        self, store: Store, kw: dict[str, object], topic: ChannelledTopic, opened: list
    ) -> None:
        """Pending receives make the backlog; it drains and calls back as elements arrive."""
        sub = open_sub(opened, topic, max_backlog=3, **kw)
        flow = sub.flow_control
        assert (flow.backlog, flow.max_backlog, flow.is_backlogged) == (0, 3, False)
        cancelled = sub.receive()
        assert flow.backlog == 1
        cancelled.cancel()
        assert flow.backlog == 0
        futures = [sub.receive() for _ in range(3)]
        assert flow.is_backlogged
        normal = threading.Event()
        assert flow.check_backlog(normal.set)
        assert not flow.drain_backlog(timedelta(milliseconds=50))
        flow.flush()  # never blocks, completes nothing by itself
        assert not any(f.done() for f in futures)
        publish_all(open_pub(opened, topic, order_by=OrderBy.fixed(0), **kw), [Msg(0, 0)])
        assert flow.drain_backlog(timedelta(seconds=TIMEOUT))
        assert normal.wait(TIMEOUT)
        assert futures[0].result(TIMEOUT).value.seq == 0  # type: ignore[union-attr]
        assert flow.backlog == 2

    def test_bad_max_backlog(
        self, store: Store, kw: dict[str, object], topic: ChannelledTopic
    ) -> None:
        """A max_backlog below 1 is refused."""
        from dcps import BadParameterError

        with pytest.raises(BadParameterError, match="max_backlog"):
            ChannelSubscriber(topic, max_backlog=0, **kw)  # type: ignore[arg-type]


class TestRepliesAfterStoreRestart:
    def test_running_clients_get_answers_from_the_restarted_store(
        self,
        tmp_path: Path,
        kw: dict[str, object],
        topic_name: str,
        opened: list,
        stores: list[StoreProcess],
    ) -> None:
        """After kill -9 and a restart, a running publisher and member get every answer right."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        data = tmp_path / "data"
        store = start_store(stores, data, kw)
        # request timeouts well under the dead store's lease (10 s): an answer stalled
        # until the lease ends fails, with room left for a loaded machine
        pub = open_pub(opened, topic, order_by=OrderBy.fixed(0), timeout=timedelta(seconds=5), **kw)
        member = open_sub(opened, topic, group="g", request_timeout=timedelta(seconds=5), **kw)
        assert publish_all(pub, [Msg(0, i) for i in range(3)]) == [Position(0, i) for i in range(3)]
        assert receive_n(member, 3)[-1].commit().status is CommitStatus.COMMITTED
        store.kill()
        start_store(stores, data, kw)
        n = 600  # ~600 KB of requests, more than the dead store's reader can hold back
        futures = [pub.publish(Msg(0, i, "x" * 1000)) for i in range(3, 3 + n)]
        pub.flow_control.flush()
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, i) for i in range(3, 3 + n)]
        got = receive_n(member, n)
        assert [e.value.seq for e in got] == list(range(3, 3 + n))
        # a burst of commits, answered before the member has discovered the new store
        results = [e.commit_async() for e in got]
        assert [f.result(TIMEOUT).status for f in results] == [CommitStatus.COMMITTED] * n
        assert member.last_committed(0) == Position(0, 2 + n)
