"""The subscriber's survivors the first two mutation test files left (issue 20, session 9).

What a user sees: where a subscriber (and ``destroy_subscriber_group``) looks for its
store by default, that the network configuration and the keys reach the connection,
and that an idle subscriber costs the store nothing (no tail polls without a receive).
One embedded store serves the module; its namespace has a key and an admin key.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsSubscription
from cyclonedds.core import Policy
from cyclonedds.domain import DomainParticipant

from dcps import BadParameterError, DcpsTimeoutError, NetworkConfig, PreconditionNotMetError
from dcps.channels import ChannelPublisher, ChannelSubscriber, destroy_subscriber_group
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import ADMIN_KEY_FILE_ENV, KEY_FILE_ENV, StoreKey, write_key_file
from dcps.wire._codes import Op
from dcps.wire._sealing import FROM_ENVIRONMENT
from tests.support.channel_entities import publish
from tests.support.channel_entities import retained_topic as topic
from tests.support.embedded_store import worker_domain
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store for the module, its namespace keyed, with an admin key."""
    directory = tmp_path_factory.mktemp("subkeyed")
    key = write_key_file(directory / "ns.key")
    admin = write_key_file(directory / "admin.key")
    domain, namespace = worker_domain(worker_id), f"ns_{uuid.uuid4().hex[:10]}"
    with Store(
        directory / "store",
        domain_id=domain,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        key=key,
        admin_key=admin,
    ) as store:
        yield {
            "store": store,
            "admin": admin,
            "kw": {"domain_id": domain, "namespace": namespace, "store_key": key},
        }


@pytest.fixture
def kw(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The keywords that reach the store, its key included (none from the environment)."""
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(ADMIN_KEY_FILE_ENV, raising=False)
    return dict(served["kw"])


@pytest.fixture
def admin(served: dict[str, Any]) -> StoreKey:
    return served["admin"]  # type: ignore[no-any-return]


def requests(store: Store, kind: str) -> float:
    """The requests of ``kind`` the store answered so far (its own metrics)."""
    total = 0.0
    for metric in store.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == "dcps_store_requests_total" and sample.labels.get("kind") == kind:
                total += sample.value
    return total


def refusal(call: Any) -> str:
    """The message of the DcpsTimeoutError ``call()`` raises ("" if it connects)."""
    try:
        opened = call()
    except DcpsTimeoutError as exc:
        return str(exc)
    if hasattr(opened, "close"):
        opened.close()
    return ""


class TestDefaults:
    def test_a_subscriber_looks_in_namespace_dcps_of_domain_0(
        self, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without ``domain_id`` and ``namespace``; the refusal names both (no test store
        is there; if a store of the machine's own answers, nothing is asserted)."""
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        message = refusal(
            lambda: ChannelSubscriber(
                topic(topic_name), connect_timeout=timedelta(milliseconds=300)
            )
        )
        if message:
            assert "no dcps store answered in namespace 'dcps' (domain 0)" in message

    def test_destroy_subscriber_group_looks_in_namespace_dcps_of_domain_0(
        self, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        message = refusal(
            lambda: destroy_subscriber_group(
                topic(topic_name), "g", connect_timeout=timedelta(milliseconds=300)
            )
        )
        if message:
            assert "no dcps store answered in namespace 'dcps' (domain 0)" in message


class TestConnection:
    def test_the_network_configuration_is_applied(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        """An interface this host lacks fails both, naming it (without the configuration
        they would connect)."""
        network = NetworkConfig(interfaces=["nosuch0"])
        publish([], kw, topic(topic_name), range(1))
        with pytest.raises(BadParameterError, match="nosuch0"):
            ChannelSubscriber(topic(topic_name), network=network, **kw)
        with pytest.raises(BadParameterError, match="nosuch0"):
            destroy_subscriber_group(topic(topic_name), "g", network=network, **kw)

    def test_the_store_key_connects_a_subscriber_to_a_keyed_namespace(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        (first,) = publish(opened, kw, topic(topic_name), range(1))
        sub = ChannelSubscriber(topic(topic_name), group="g", **kw)
        opened.append(sub)
        element = sub.receive().result(TIMEOUT)
        assert element is not None
        assert element.position == first
        keyless = {**kw, "store_key": FROM_ENVIRONMENT}
        with pytest.raises(DcpsTimeoutError, match=r"no dcps store answered .* within 1 s"):
            ChannelSubscriber(topic(topic_name), connect_timeout=timedelta(seconds=1), **keyless)

    def test_destroying_a_group_takes_the_namespace_key_and_the_admin_key(
        self, kw: dict[str, Any], opened: list, topic_name: str, admin: StoreKey
    ) -> None:
        """Both keys are passed on: with them the group goes; without the admin key the
        store refuses; without the namespace key no store verifies."""
        publish(opened, kw, topic(topic_name), range(1))
        sub = ChannelSubscriber(topic(topic_name), group="g", **kw)
        sub.close()
        with pytest.raises(PreconditionNotMetError):
            destroy_subscriber_group(topic(topic_name), "g", **kw)
        keyless = {**kw, "store_key": FROM_ENVIRONMENT}
        with pytest.raises(DcpsTimeoutError, match=r"no dcps store answered .* within 1 s"):
            destroy_subscriber_group(
                topic(topic_name), "g", admin_key=admin, connect_timeout=1, **keyless
            )
        assert destroy_subscriber_group(topic(topic_name), "g", admin_key=admin, **kw)
        assert not destroy_subscriber_group(topic(topic_name), "g", admin_key=admin, **kw)


class TestIdle:
    def test_a_member_without_a_receive_sends_no_tail_polls(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """The tail poll (a STATE request a second) is for a receive that waits: a member
        that asks for nothing costs the store no request for it."""
        store = served["store"]
        sub = ChannelSubscriber(topic(topic_name), group="g", timeout=timedelta(seconds=30), **kw)
        opened.append(sub)
        eventually(lambda: sub.channels == [0], timeout=TIMEOUT)
        before = requests(store, "state")
        waited = eventually_not(lambda: requests(store, "state") > before, seconds=2.5)
        assert waited, "an idle member polled the store's tails"
        # the other side: a receive that waits polls them (about once a second)
        waiting = sub.receive()
        eventually(lambda: requests(store, "state") > before, timeout=TIMEOUT)
        waiting.cancel()


def eventually_not(condition: Any, seconds: float) -> bool:
    """True when ``condition()`` stayed false for ``seconds`` (checked every 50 ms)."""
    end = time.monotonic() + seconds
    pause = threading.Event()
    while time.monotonic() < end:
        if condition():
            return False
        pause.wait(0.05)
    return True


class TestCancelledReceive:
    def test_a_cancelled_receive_does_not_hold_up_the_next_in_its_round(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """The delivery round that drops a cancelled receive goes on to the next one: the
        receive queued behind it is complete when that round ends (the test waits for the
        round on the subscriber's own lock, which each round holds)."""
        t = topic(topic_name)
        positions = publish(opened, kw, t, range(3))
        sub = ChannelSubscriber(t, **kw)
        opened.append(sub)
        eventually(lambda: sub.channels == [0], timeout=TIMEOUT)
        in_round = threading.Event()
        with sub._lock:  # the delivery thread waits: the three are queued together
            first = sub.receive()
            first.add_done_callback(lambda _: in_round.set())  # on the delivery thread
            cancelled = sub.receive()
            behind = sub.receive()
            assert cancelled.cancel()
        assert in_round.wait(TIMEOUT)
        with sub._lock:  # the round that completed the first has ended
            assert behind.done(), "the receive behind a cancelled one waited for a round"
        assert first.result(0).position == positions[0]
        assert behind.result(0).position == positions[1]


class TestAssignmentReader:
    def test_the_assignment_reader_is_reliable_and_transient_local(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """As any participant of the domain sees it (DDS's built-in subscription topic):
        the member's reader of the store's assignments is reliable and gets the last
        assignment written before it matched."""
        sub = ChannelSubscriber(topic(topic_name), group="g", **kw)
        opened.append(sub)
        endpoint = sub._connection.endpoint
        own = endpoint.participant.guid
        name = endpoint.assign_topic.get_name()
        observer = DomainParticipant(kw["domain_id"])
        try:
            builtin = BuiltinDataReader(observer, BuiltinTopicDcpsSubscription)
            found: list[Any] = []

            def seen() -> bool:
                found.extend(
                    s
                    for s in builtin.take(N=256)
                    if s.topic_name == name and s.participant_key == own
                )
                return bool(found)

            eventually(seen, timeout=TIMEOUT)
            qos = found[0].qos
            assert qos[Policy.Durability] == Policy.Durability.TransientLocal
            assert isinstance(qos[Policy.Reliability], Policy.Reliability.Reliable)
        finally:
            observer.__del__()


class TestStoreRestart:
    def test_a_restarted_store_is_rejoined_at_once_keeping_the_channels(
        self,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
        caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The client's restart listener flags the membership and wakes the delivery
        thread, which rejoins with the channels it owns: its listeners hear no loss, no
        error is logged, and it receives from the new store."""
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        caplog.set_level(logging.WARNING)
        path = tmp_path / "store"
        plain = {"domain_id": domain_id, "namespace": namespace}
        t = topic(topic_name, 2)
        store = Store(path, sync=SyncMode.NORMAL, **plain)
        store.start()
        try:
            entities: list[Any] = []
            try:
                publish(entities, plain, t, range(1))
                heard = Heard()
                sub = ChannelSubscriber(t, group="g", listeners=[heard], **plain)
                entities.append(sub)
                assert sub.receive().result(TIMEOUT) is not None
                store.close()
                incarnation = sub._membership.incarnation
                store = Store(path, sync=SyncMode.NORMAL, **plain)
                store.start()
                eventually(lambda: sub._membership.incarnation != incarnation, timeout=TIMEOUT)
                assert heard.events == [("assigned", frozenset({0, 1}))]
                assert sub.channels == [0, 1]
                (late,) = publish(entities, plain, t, range(1, 2))
                element = sub.receive().result(TIMEOUT)
                assert element is not None
                assert element.position == late
            finally:
                for entity in reversed(entities):
                    entity.close()
        finally:
            store.close()
        errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
        assert errors == []
        assert heard.events == [("assigned", frozenset({0, 1}))]


class Heard:
    """A ChannelOwnershipListener that records what it is told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, frozenset[int]]] = []

    def on_channels_assigned(self, sub: Any, channels: frozenset[int]) -> None:
        self.events.append(("assigned", channels))

    def on_channels_revoked(self, sub: Any, channels: frozenset[int]) -> None:
        self.events.append(("revoked", channels))

    def on_channels_lost(self, sub: Any, channels: frozenset[int]) -> None:
        self.events.append(("lost", channels))


class TestStickyRejoin:
    def test_two_members_keep_their_own_channels_over_a_store_restart(
        self,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Each member asks the new store for the channels it owns: both keep theirs,
        and neither hears of a change."""
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        path = tmp_path / "store"
        plain = {"domain_id": domain_id, "namespace": namespace}
        t = topic(topic_name, 2)
        store = Store(path, sync=SyncMode.NORMAL, **plain)
        store.start()
        try:
            entities: list[Any] = []
            try:
                publish(entities, plain, t, range(1))
                heard = [Heard(), Heard()]
                first = ChannelSubscriber(t, group="g", listeners=[heard[0]], **plain)
                entities.append(first)
                second = ChannelSubscriber(t, group="g", listeners=[heard[1]], **plain)
                entities.append(second)
                eventually(lambda: first.channels and second.channels, timeout=TIMEOUT)
                owned = (first.channels, second.channels)
                before = [list(h.events) for h in heard]
                incarnations = (first._membership.incarnation, second._membership.incarnation)
                store.close()
                store = Store(path, sync=SyncMode.NORMAL, **plain)
                store.start()
                eventually(
                    lambda: (
                        first._membership.incarnation != incarnations[0]
                        and second._membership.incarnation != incarnations[1]
                    ),
                    timeout=TIMEOUT,
                )
                assert (first.channels, second.channels) == owned
                assert [h.events for h in heard] == before
            finally:
                for entity in reversed(entities):
                    entity.close()
        finally:
            store.close()


class TestRoundTimeout:
    def test_a_fetch_the_store_does_not_answer_is_given_up_after_the_round_timeout(
        self,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        topic_name: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The delivery thread waits for a FETCH at most the round timeout (the member
        timeout, at least 5 s), not the 60 s request timeout: then it asks again (and
        heartbeats meanwhile). The store is gone while the FETCH waits; once it is back,
        the receive completes."""
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        path = tmp_path / "store"
        plain = {"domain_id": domain_id, "namespace": namespace}
        t = topic(topic_name)
        store = Store(path, sync=SyncMode.NORMAL, **plain)
        store.start()
        try:
            entities: list[Any] = []
            try:
                publish(entities, plain, t, range(512))  # one batch
                # then 40 batches of one: a new subscriber's batch reader receives the
                # last 32 as they were pushed (TRANSIENT_LOCAL); the 8 before need a FETCH
                single = ChannelPublisher(t, batch_count=1, **plain)
                entities.append(single)
                for s in range(512, 552):
                    single.publish(Msg(0, s)).result(TIMEOUT)
                sub = ChannelSubscriber(
                    t, timeout=timedelta(seconds=1), request_timeout=timedelta(seconds=60), **plain
                )
                entities.append(sub)
                client = sub._client
                assert len(sub.receive(512).result(TIMEOUT)) == 512  # one FETCH of 512
                with sub._lock:  # the next FETCH goes to a store that is gone
                    waiting = sub.receive()
                    store.close()
                fetches: set[int] = set()

                def asked_again() -> bool:
                    with client._lock:
                        fetches.update(
                            rid
                            for rid, entry in client._pending.items()
                            if entry.wire.op == Op.FETCH
                        )
                    return len(fetches) >= 2

                eventually(asked_again, timeout=15.0)
                assert not waiting.done()
                store = Store(path, sync=SyncMode.NORMAL, **plain)
                store.start()
                element = waiting.result(TIMEOUT)
                assert element is not None
                assert element.position.offset == 512
            finally:
                for entity in reversed(entities):
                    entity.close()
        finally:
            store.close()
