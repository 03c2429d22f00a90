"""Subscribers across a store kill -9 and restart (issue 13 item 5): sticky rejoin, at once.

The subscriber registers a restart listener with its store client; when the
store's new incarnation is announced, the delivery thread rejoins at once,
naming the channels it owns, and keeps their cursors: idle members rejoin too,
no member loses its channels, and nothing delivered is delivered again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps import DcpsError
from dcps.channels import (
    ChannelledTopic,
    ChannelOwnershipListener,
    ChannelPublisher,
    ChannelSubscriber,
)
from dcps.channels._client import StoreClient
from dcps.wire._transport import Endpoint
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

#: What a rejoin may take here (the target is 1 s; the machine is shared and loaded).
RESUME_BOUND = 5.0


class StoreProcess:
    """``python -m dcps.store`` on one data directory, killed and restarted on demand."""

    def __init__(self, peers: list[LinePeer], data: Path, domain_id: int, namespace: str):
        self._peers = peers
        self._args = ["-m", "dcps.store", "--data", str(data), "--domain", str(domain_id)]
        self._args += ["--namespace", namespace, "--sync", "NORMAL"]
        self.current = self.start()

    def start(self) -> LinePeer:
        peer = LinePeer(self._args)
        self._peers.append(peer)
        peer.wait_line(lambda line: line.startswith("dcps store ready"))
        return peer

    def restart(self) -> float:
        """Kill the store with SIGKILL, start it again; the monotonic time it was ready."""
        self.current.kill()
        self.current = self.start()
        return time.monotonic()


class Recorder(ChannelOwnershipListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []

    def on_channels_assigned(self, subscriber: Any, channels: frozenset[int]) -> None:
        self.events.append(("assigned", channels))

    def on_channels_revoked(self, subscriber: Any, channels: frozenset[int]) -> None:
        self.events.append(("revoked", channels))

    def on_channels_lost(self, subscriber: Any, channels: frozenset[int]) -> None:
        self.events.append(("lost", channels))


@pytest.fixture
def store(tmp_path: Path, domain_id: int, namespace: str) -> Iterator[StoreProcess]:
    with killed_at_exit() as peers:
        yield StoreProcess(peers, tmp_path / "data", domain_id, namespace)


@pytest.fixture
def probe(store: StoreProcess, domain_id: int, namespace: str) -> Iterator[StoreClient]:
    """A plain store client to ask the store about members."""
    endpoint = Endpoint(domain_id, namespace)
    client = StoreClient(endpoint, request_timeout=5.0)
    try:
        client.connect(20)
        yield client
    finally:
        client.close()
        endpoint.close()


def _channels_in_store(probe: StoreClient, topic: str, member: str) -> tuple[int, ...] | None:
    """The channels the (current) store has ``member`` own, None when it is no member."""
    try:
        return tuple(probe.heartbeat_async(topic, "g", member).result(5).channels)
    except DcpsError:
        return None


class TestStickyResume:
    def test_idle_members_rejoin_at_once_and_keep_their_channels(
        self, store: StoreProcess, probe: StoreClient, domain_id: int, namespace: str
    ) -> None:
        """After a restart, members rejoin (idle ones too) with the channels they owned."""
        topic = ChannelledTopic("jobs", Msg, channel_count=4, retain_consumed=True)
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        heard = Recorder(), Recorder()
        with (
            ChannelSubscriber(topic, group="g", listeners=[heard[0]], **kw) as a,  # type: ignore[var-annotated]
            ChannelSubscriber(topic, group="g", listeners=[heard[1]], **kw) as b,  # type: ignore[var-annotated]
        ):
            members = (a, b)
            eventually(lambda: sorted(a.channels + b.channels) == [0, 1, 2, 3], 20, "balance")
            before = {m.member: tuple(m.channels) for m in members}
            for listener in heard:
                listener.events.clear()
            ready = store.restart()
            for m in members:
                eventually(
                    lambda m=m: _channels_in_store(probe, "jobs", m.member) == before[m.member],
                    RESUME_BOUND,
                    "the member's sticky rejoin",
                )
            assert time.monotonic() - ready < RESUME_BOUND
            assert {m.member: tuple(m.channels) for m in members} == before
            assert [e for h in heard for e in h.events if e[0] != "assigned"] == []

    def test_nothing_delivered_is_delivered_again(
        self, store: StoreProcess, domain_id: int, namespace: str
    ) -> None:
        """Elements received (not committed) before the restart are not received again."""
        topic = ChannelledTopic("jobs", Msg, channel_count=2, retain_consumed=True)
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with (
            ChannelPublisher(topic, **kw) as pub,  # type: ignore[var-annotated]
            ChannelSubscriber(topic, group="g", **kw) as sub,  # type: ignore[var-annotated]
        ):
            pub.publish_many([Msg(i, i) for i in range(20)]).result(20)
            first = receive_n(sub, 20)
            store.restart()
            pub.publish_many([Msg(i, 100 + i) for i in range(20)]).result(60)
            after = receive_n(sub, 20)
            assert sorted(e.value.seq for e in first) == list(range(20))
            assert sorted(e.value.seq for e in after) == list(range(100, 120))
