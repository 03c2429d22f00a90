"""Resuming after a store kill -9 and restart (issue 13 item 4), on real store processes.

Clients notice the new store incarnation's announcement at once: they send
their outstanding requests again (or fail those whose outcome is unknown)
instead of waiting for their request timeouts, and call their restart
listeners. Members that rejoin name the channels they owned and get them
back (sticky assignments across the restart).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path
from typing import Any

import pytest

from dcps import BadParameterError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, CommitStatus
from dcps.channels._client import StoreClient
from dcps.wire._auth_keys import write_key_file
from dcps.wire._transport import Endpoint
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

#: Far beyond what a resume may take: a request answered only by its timeout shows.
LONG_TIMEOUT = 60.0
#: What a resume may take here (the target is 1 s; the machine is shared and loaded).
RESUME_BOUND = 5.0


@pytest.fixture
def peers() -> Iterator[list[LinePeer]]:
    """Store processes, killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


class Stores:
    """``python -m dcps.store`` on one data directory: started, killed, restarted."""

    def __init__(
        self,
        peers: list[LinePeer],
        data: Path,
        domain_id: int,
        namespace: str,
        key_file: Path | None = None,
    ):
        self._peers = peers
        self._args = [
            "-m",
            "dcps.store",
            "--data",
            str(data),
            "--domain",
            str(domain_id),
            "--namespace",
            namespace,
            "--sync",
            "NORMAL",
        ]
        if key_file is not None:
            self._args += ["--key-file", str(key_file)]
        self.current = self.start()

    def spawn(self) -> LinePeer:
        """Start a store process; do not wait for it to serve."""
        peer = LinePeer(self._args)
        self._peers.append(peer)
        return peer

    def start(self) -> LinePeer:
        """Start a store process and wait until it serves."""
        peer = self.spawn()
        peer.wait_line(lambda line: line.startswith("dcps store ready"))
        return peer

    def restart(self) -> float:
        """Kill the store with SIGKILL, start it again; the monotonic time it was ready."""
        self.current.kill()
        self.current = self.start()
        return time.monotonic()


@pytest.fixture
def stores(tmp_path: Path, domain_id: int, namespace: str, peers: list[LinePeer]) -> Stores:
    return Stores(peers, tmp_path / "data", domain_id, namespace)


@pytest.fixture
def endpoint(domain_id: int, namespace: str) -> Iterator[Endpoint]:
    ep = Endpoint(domain_id, namespace)
    try:
        yield ep
    finally:
        ep.close()


@pytest.fixture
def client(stores: Stores, endpoint: Endpoint) -> Iterator[StoreClient]:
    c = StoreClient(endpoint, request_timeout=LONG_TIMEOUT)
    try:
        c.connect(20)
        yield c
    finally:
        c.close()


def _channel(client: StoreClient, topic: str, channel: int) -> list[bytes]:
    """The elements stored in one channel (up to 1000)."""
    fetched = client.fetch(topic, channel, 0, 1000, timeout=20)
    data, sizes = fetched.run.data, fetched.run.element_sizes().tolist()
    out, at = [], 0
    for size in sizes:
        out.append(bytes(data[at : at + size]))
        at += size
    return out


class TestOutstandingRequests:
    def test_idempotent_request_is_answered_by_the_restarted_store(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """A STATE sent while the store is dead is answered soon after the restart."""
        client.ensure_topic("t", 2)
        stores.current.kill()
        pending = client.state_async("t")
        ready = stores.restart()
        states = pending.result(LONG_TIMEOUT)
        assert time.monotonic() - ready < RESUME_BOUND
        assert states.channel_count == 2

    def test_unkeyed_publish_fails_at_once_with_unknown_outcome(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """A PUBLISH without key outstanding at the kill fails typed, on the restart, not resent."""
        client.ensure_topic("t", 1, retain_consumed=True)
        client.publish_async("t", 0, [3], b"one").result(20)
        stores.current.kill()
        pending = client.publish_async("t", 0, [3], b"two")
        ready = stores.restart()
        with pytest.raises(PreconditionNotMetError, match="unknown outcome") as caught:
            pending.result(LONG_TIMEOUT)
        assert time.monotonic() - ready < RESUME_BOUND
        assert "topic 't', channel 0" in str(caught.value)
        # not sent again behind the caller's back: the channel holds the first element only
        assert _channel(client, "t", 0) == [b"one"]

    def test_keyed_publish_is_resent_and_stored_once(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """A PUBLISH with an idempotence key is re-sent on the restart and stored exactly once."""
        client.ensure_topic("t", 1, retain_consumed=True)
        stores.current.kill()
        pending = client.publish_async("t", 0, [4], b"keyd", key="k-1")
        ready = stores.restart()
        published = pending.result(LONG_TIMEOUT)
        assert time.monotonic() - ready < RESUME_BOUND
        assert (published.first, published.count) == (0, 1)
        again = client.publish_async("t", 0, [4], b"keyd", key="k-1").result(20)
        assert again.duplicate
        assert _channel(client, "t", 0) == [b"keyd"]

    def test_requests_made_while_the_store_restarts_are_all_answered(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """Keyed publishes made all through a restart are each confirmed and stored once."""
        client.ensure_topic("t", 1, retain_consumed=True)
        stores.current.kill()
        peer = stores.spawn()
        answers: list[Any] = []
        ready = None
        # before the store is up, while it starts, and just after: the client holds
        # (or re-sends) requests until the new store's request reader has matched
        while ready is None or time.monotonic() < ready + 0.3:
            answers.append(client.publish_async("t", 0, [1], b"k", key=f"k{len(answers)}"))
            if ready is None and any(x.startswith("dcps store ready") for x in peer.lines):
                ready = time.monotonic()
            time.sleep(0.02)  # pacing the requests, not waiting for anything
        firsts = [a.result(LONG_TIMEOUT).first for a in answers]
        assert time.monotonic() - ready < RESUME_BOUND
        assert sorted(firsts) == list(range(len(answers)))
        assert len(_channel(client, "t", 0)) == len(answers)


class TestRestartListeners:
    def test_listener_called_once_per_restart_after_the_resend(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """Each restart calls the listener once, on the client thread, after failing."""
        client.ensure_topic("t", 1, retain_consumed=True)
        calls: list[tuple[str, bool]] = []
        pending: list[Any] = []
        client.add_restart_listener(
            lambda: calls.append((threading.current_thread().name, pending[-1].done()))
        )
        for round_ in (1, 2):
            stores.current.kill()
            pending.append(client.publish_async("t", 0, [1], b"x"))
            stores.restart()
            eventually(lambda n=round_: len(calls) == n, 20, "the restart listener call")
        assert calls == [("dcps-store-client", True)] * 2

    def test_listener_may_rejoin_without_waiting(self, stores: Stores, client: StoreClient) -> None:
        """A listener that rejoins with join_async gets its membership from the new store."""
        client.ensure_topic("t", 3)
        joined = client.join("t", "g", "m", 30_000)
        rejoined: list[Any] = []

        def rejoin() -> None:
            fut = client.join_async("t", "g", "m", 30_000, previous_channels=joined.channels)
            fut.add_done_callback(lambda f: rejoined.append(f.result()))

        client.add_restart_listener(rejoin)
        ready = stores.restart()
        eventually(lambda: rejoined, RESUME_BOUND, "the rejoin")
        assert time.monotonic() - ready < RESUME_BOUND
        assert rejoined[0].channels == (0, 1, 2)
        assert rejoined[0].incarnation != joined.incarnation


class TestStickyRejoin:
    def test_rejoining_members_keep_their_channels(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """After a restart, each member that names its channels gets exactly those back."""
        client.ensure_topic("t", 4)
        client.join("t", "g", "a", 30_000)
        b_before = client.join("t", "g", "b", 30_000).channels
        a_before = client.heartbeat_async("t", "g", "a").result(20).channels
        assert sorted(a_before + b_before) == [0, 1, 2, 3]
        assert len(b_before) == 2
        stores.restart()
        b_after = client.join("t", "g", "b", 30_000, previous_channels=b_before)
        a_after = client.join("t", "g", "a", 30_000, previous_channels=a_before)
        assert b_after.channels == b_before  # not all four: a's wait for a
        assert a_after.channels == a_before

    def test_first_claimant_wins_a_conflicting_claim(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """A channel claimed by two rejoining members stays with the first."""
        client.ensure_topic("t", 4)
        client.join("t", "g", "a", 30_000)
        stores.restart()
        assert client.join("t", "g", "a", 30_000, previous_channels=[0, 1]).channels == (0, 1)
        c = client.join("t", "g", "c", 30_000, previous_channels=[1, 2])
        assert c.channels == (2,)
        assert client.heartbeat_async("t", "g", "a").result(20).channels == (0, 1)

    def test_unclaimed_channels_go_to_the_members_when_the_window_ends(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """Channels no member claims wait for one member timeout, then are assigned."""
        client.ensure_topic("t", 4)
        client.join("t", "g", "a", 30_000)
        b_before = client.join("t", "g", "b", 1_000).channels
        stores.restart()
        assert client.join("t", "g", "b", 1_000, previous_channels=b_before).channels == b_before

        def all_four() -> bool:
            return client.heartbeat_async("t", "g", "b").result(20).channels == (0, 1, 2, 3)

        eventually(all_four, 10, "the unclaimed channels assigned after the window")

    def test_claim_of_a_channel_the_topic_lacks_is_refused(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """A rejoin naming a channel beyond the topic's is refused, naming it, and joins nobody."""
        client.ensure_topic("t", 4)
        with pytest.raises(BadParameterError, match=r"\[9\] do not exist"):
            client.join("t", "g", "a", 30_000, previous_channels=[1, 9])
        with pytest.raises(PreconditionNotMetError, match="not a member"):
            client.heartbeat_async("t", "g", "a").result(20)

    def test_first_commit_after_the_restart_claims_the_member_channels(
        self, stores: Stores, client: StoreClient
    ) -> None:
        """A member committing (with the old incarnation) before it rejoins keeps its channels."""
        client.ensure_topic("t", 4, retain_consumed=True)
        client.join("t", "g", "a", 30_000)
        b = client.join("t", "g", "b", 30_000)
        for channel in range(4):
            client.publish_async("t", channel, [1], b"e").result(20)
        stores.restart()
        committed = client.commit(
            "t", "g", "b", dict.fromkeys(b.channels, 0), incarnation=b.incarnation
        )
        assert set(committed.statuses.values()) == {CommitStatus.COMMITTED}
        assert client.heartbeat_async("t", "g", "b").result(20).channels == b.channels


def _receive_from(members: tuple[ChannelSubscriber[Msg], ...], until: Any) -> list[Any]:
    """Receive from every member in turn until ``until(received)`` holds (30 s at most)."""
    got: list[Any] = []
    deadline = time.monotonic() + 30
    waiting = {member.receive(20): member for member in members}
    try:
        while not until(got):
            assert time.monotonic() < deadline, f"only {len(got)} elements received"
            done, _ = wait(waiting, timeout=1.0, return_when=FIRST_COMPLETED)
            for fut in done:
                got += fut.result()
                member = waiting.pop(fut)
                waiting[member.receive(20)] = member
    finally:
        for fut in waiting:
            fut.cancel()
    return got


class TestSubscribersAsTheyAre:
    def test_publish_and_delivery_resume_soon_after_the_restart(
        self, stores: Stores, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """With default settings, confirmations and deliveries resume well before any timeout,
        and nothing committed before the kill is delivered again."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with (
            ChannelPublisher(topic, **kw) as pub,
            ChannelSubscriber(topic, group="g", **kw) as a,
            ChannelSubscriber(topic, group="g", **kw) as b,
        ):
            members = (a, b)
            for i in range(20):
                pub.publish(Msg(i, i)).result(20)
            got = _receive_from(members, lambda got: len(got) >= 20)
            for m in members:
                mine = {e.position.channel: e.position for e in got if m.is_owner(e[1])}
                if mine:
                    assert {r.status for r in m.commit(mine).values()} == {CommitStatus.COMMITTED}
            committed = {(e.position.channel, e.position.offset) for e in got}
            stores.current.kill()
            lost = pub.publish(Msg(0, 99))  # outstanding at the kill: its outcome is unknown
            ready = stores.restart()
            with pytest.raises(PreconditionNotMetError, match="unknown outcome"):
                lost.result(LONG_TIMEOUT)
            confirmed = pub.publish(Msg(1, 100)).result(LONG_TIMEOUT)
            assert time.monotonic() - ready < RESUME_BOUND
            again = _receive_from(members, lambda got: any(e.position == confirmed for e in got))
            assert not committed & {(e.position.channel, e.position.offset) for e in again}


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    """The namespace key file the store and its clients share."""
    return Path(str(write_key_file(tmp_path / "ns.key").source))


@pytest.fixture
def keyed_stores(
    tmp_path: Path, domain_id: int, namespace: str, peers: list[LinePeer], key_file: Path
) -> Stores:
    return Stores(peers, tmp_path / "data", domain_id, namespace, key_file=key_file)


@pytest.fixture
def keyed_client(keyed_stores: Stores, endpoint: Endpoint, key_file: Path) -> Iterator[StoreClient]:
    c = StoreClient(endpoint, request_timeout=LONG_TIMEOUT, key=key_file, admin_key=None)
    try:
        c.connect(20)
        yield c
    finally:
        c.close()


class TestResumeWithKey:
    def test_member_rejoins_and_publishes_are_confirmed_after_a_keyed_restart(
        self, keyed_stores: Stores, keyed_client: StoreClient
    ) -> None:
        """A keyed store killed -9 and restarted: the outstanding keyed publish is re-sealed
        and confirmed, the member rejoins (a fresh key exchange) with its channels, and its
        heartbeats and commits, and a new publish, are accepted by the new incarnation."""
        client = keyed_client
        client.ensure_topic("t", 2, retain_consumed=True)
        joined = client.join("t", "g", "m", 30_000)
        assert joined.channels == (0, 1)
        rejoined: list[Any] = []

        def rejoin() -> None:
            fut = client.join_async("t", "g", "m", 30_000, previous_channels=joined.channels)
            fut.add_done_callback(lambda f: rejoined.append(f.result()))

        client.add_restart_listener(rejoin)
        keyed_stores.current.kill()
        outstanding = client.publish_async("t", 0, [3], b"one", key="k-1")
        ready = keyed_stores.restart()
        eventually(lambda: rejoined, RESUME_BOUND, "the keyed rejoin")
        assert rejoined[0].channels == (0, 1)
        assert rejoined[0].incarnation != joined.incarnation
        assert (outstanding.result(LONG_TIMEOUT).first, 0) == (0, 0)
        confirmed = client.publish_async("t", 1, [3], b"two").result(LONG_TIMEOUT)
        assert time.monotonic() - ready < RESUME_BOUND
        assert (confirmed.first, confirmed.count) == (0, 1)
        assert client.heartbeat_async("t", "g", "m").result(20).channels == (0, 1)
        committed = client.commit("t", "g", "m", {0: 0, 1: 0}, timeout=20)
        assert set(committed.statuses.values()) == {CommitStatus.COMMITTED}
        assert _channel(client, "t", 0) == [b"one"]

    def test_member_requests_before_the_rejoin_fail_typed(
        self, keyed_stores: Stores, keyed_client: StoreClient
    ) -> None:
        """After a keyed restart the old member secret is useless: a commit before the member
        joins again fails at once, saying so, and succeeds once it has."""
        client = keyed_client
        client.ensure_topic("t", 1, retain_consumed=True)
        client.publish_async("t", 0, [1], b"e").result(20)
        joined = client.join("t", "g", "m", 30_000)
        restarted = threading.Event()
        client.add_restart_listener(restarted.set)
        keyed_stores.restart()
        assert restarted.wait(RESUME_BOUND)
        with pytest.raises(PreconditionNotMetError, match="join again first") as caught:
            client.commit("t", "g", "m", {0: 0}, timeout=20)
        assert "member 'm' of group 'g' of topic 't'" in str(caught.value)
        client.join("t", "g", "m", 30_000, previous_channels=joined.channels)
        committed = client.commit("t", "g", "m", {0: 0}, timeout=20)
        assert set(committed.statuses.values()) == {CommitStatus.COMMITTED}

    def test_subscriber_member_resumes_after_a_keyed_restart(
        self, keyed_stores: Stores, domain_id: int, namespace: str, topic_name: str, key_file: Path
    ) -> None:
        """A keyed store killed -9: the subscriber rejoins (fresh key exchange) keeping its
        channels, a confirmed publish after the restart succeeds soon and reaches it, and its
        commit is accepted by the new store."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with (
            ChannelPublisher(topic, store_key=key_file, **kw) as pub,
            ChannelSubscriber(topic, group="g", store_key=key_file, **kw) as member,
        ):
            for i in range(4):
                pub.publish(Msg(i, i)).result(20)
            got = _receive_from((member,), lambda got: len(got) >= 4)
            latest = {e.position.channel: e.position for e in got}
            assert {r.status for r in member.commit(latest).values()} == {CommitStatus.COMMITTED}
            owned = member.channels
            ready = keyed_stores.restart()
            confirmed = pub.publish(Msg(1, 100)).result(LONG_TIMEOUT)
            assert time.monotonic() - ready < RESUME_BOUND
            again = _receive_from((member,), lambda got: any(e.position == confirmed for e in got))
            assert not {e.position for e in got} & {e.position for e in again}
            assert member.channels == owned
            result = member.commit(confirmed.channel, confirmed)
            assert result.status == CommitStatus.COMMITTED
