"""The publisher's survivors that the first mutation tests left (issue 20, session 9).

What each test pins, a user can see: which domain and namespace a publisher looks in
by default, that its network and key reach the connection, which thread sends a queued
batch when the link goes idle, when a sample of a sparse stream goes out, and that a
flush with room in the window starts no helper thread. One embedded store serves the
module; it has a namespace key, so a publisher must present it (``store_key``).

No ``from __future__ import annotations``: cyclonedds resolves the field types below at
run time.
"""

import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from dcps import BadParameterError, DcpsTimeoutError, NetworkConfig
from dcps.channels import ChannelledTopic, ChannelPublisher, Position
from dcps.channels import _publisher as publisher_module
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import KEY_FILE_ENV, StoreKey, write_key_file
from dcps.wire._sealing import FROM_ENVIRONMENT
from tests.support.channel_entities import store_held
from tests.support.embedded_store import worker_domain
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

TIMEOUT = 5.0
LONG = timedelta(seconds=60)  # a linger no test waits out


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store for the module, its namespace keyed."""
    directory = tmp_path_factory.mktemp("pubkeyed")
    key = write_key_file(directory / "ns.key")
    domain, namespace = worker_domain(worker_id), f"ns_{uuid.uuid4().hex[:10]}"
    with Store(
        directory / "store", domain_id=domain, namespace=namespace, sync=SyncMode.NORMAL, key=key
    ) as store:
        yield {"store": store, "key": key, "kw": {"domain_id": domain, "namespace": namespace}}


@pytest.fixture
def store(served: dict[str, Any]) -> Store:
    return served["store"]  # type: ignore[no-any-return]


@pytest.fixture
def key(served: dict[str, Any]) -> StoreKey:
    return served["key"]  # type: ignore[no-any-return]


@pytest.fixture
def kw(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The keywords that reach the store, its key included (none from the environment)."""
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    return {**served["kw"], "store_key": served["key"]}


def topic(name: str) -> ChannelledTopic:
    return ChannelledTopic(name, Msg, channel_count=1, retain_consumed=True)


def batches(store: Store, name: str) -> list[int]:
    """The element count of each batch the store holds in channel 0 of topic ``name``."""
    run, _ = store.log.reader().fetch(name, 0, 0, 100000)
    return list(run.counts)


class TestConnection:
    def test_the_default_domain_is_0_and_the_default_namespace_dcps(
        self, opened: list, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without ``domain_id`` and ``namespace`` a publisher looks for the store of
        namespace "dcps" in domain 0; the refusal names both (no test store is there)."""
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        refusal = ""
        try:
            pub = ChannelPublisher(topic(topic_name), connect_timeout=timedelta(milliseconds=300))
        except DcpsTimeoutError as exc:
            refusal = str(exc)
        else:  # a store of the machine's own answered there: the connection says where
            opened.append(pub)
            endpoint = pub._connection.endpoint
            assert (endpoint.namespace, endpoint.participant.domain_id) == ("dcps", 0)
        if refusal:
            assert "no dcps store answered in namespace 'dcps' (domain 0)" in refusal

    def test_the_network_configuration_is_applied(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        """An interface this host lacks fails the publisher, naming it: the configuration
        reached the participant (without it, the publisher would connect)."""
        with pytest.raises(BadParameterError, match="nosuch0"):
            ChannelPublisher(topic(topic_name), network=NetworkConfig(interfaces=["nosuch0"]), **kw)

    def test_the_store_key_is_what_connects_to_a_keyed_namespace(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """With the namespace's key the publisher connects and publishes; without it (no key
        in the environment either) it finds no store it can verify."""
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)
        assert pub.publish(Msg(0, 1)).result(TIMEOUT) == Position(0, 0)
        assert batches(store, topic_name) == [1]
        keyless = {**kw, "store_key": FROM_ENVIRONMENT}
        with pytest.raises(DcpsTimeoutError, match=r"no dcps store answered .* within 1 s"):
            ChannelPublisher(topic(topic_name), connect_timeout=timedelta(seconds=1), **keyless)


class TestWhoSends:
    def test_the_confirmation_that_idles_the_link_sends_the_queue_itself(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """The queued batch leaves on the confirming thread, before that thread does
        anything else (not a wake-up of the linger thread later): a callback added to the
        confirmed request after the publisher's finds the queue empty and the batch sent."""
        pub = ChannelPublisher(topic(topic_name), linger=LONG, **kw)
        opened.append(pub)
        seen: list[tuple[int, int]] = []
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # an idle link: sent at once
            queued = pub.publish(Msg(0, 1))  # lingers (60 s) behind it
            (reply,) = pub._in_flight
            reply.add_done_callback(
                lambda _: seen.append((len(pub._pending), pub.flow_control.backlog))
            )
        assert first.result(TIMEOUT) == Position(0, 0)
        assert queued.result(TIMEOUT) == Position(0, 1)
        eventually(lambda: seen, timeout=TIMEOUT)
        assert seen == [(0, 1)]  # nothing queued, the second batch in flight
        assert batches(store, topic_name) == [1, 1]

    def test_a_flow_control_flush_with_room_starts_no_helper_thread(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """A queued batch that finds a free slot goes out from the flushing thread; the
        background flusher (a named thread) is for a full window only."""
        pub = ChannelPublisher(topic(topic_name), linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            queued = pub.publish(Msg(0, 1))
            pub.flow_control.flush()
            assert pub._flusher is None
            assert not pub._pending
            assert pub.flow_control.backlog == 2
        assert [first.result(TIMEOUT), queued.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]
        assert pub._flusher is None
        assert batches(store, topic_name) == [1, 1]


class TestSparseRule:
    def test_without_linger_a_sample_joins_the_queued_batch_not_a_batch_of_its_own(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """``linger=0`` has no sparse rule: with a batch in flight, samples published in a
        burst go to one queued batch, which the linger thread sends when it can; they do
        not each take a slot of the window as a batch of one."""
        pub = ChannelPublisher(topic(topic_name), linger=0, **kw)
        opened.append(pub)
        interval = sys.getswitchinterval()
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            # the burst keeps the interpreter: the linger thread gets in at most once or
            # twice (each of its sends takes the batch queued so far)
            sys.setswitchinterval(1.0)
            try:
                burst = [pub.publish(Msg(0, i)) for i in range(1, 8)]
            finally:
                sys.setswitchinterval(interval)
            in_flight = pub.flow_control.backlog
        assert first.result(TIMEOUT) == Position(0, 0)
        assert [f.result(TIMEOUT) for f in burst] == [Position(0, i) for i in range(1, 8)]
        assert in_flight < 8, "each sample of the burst went out as a batch of its own"
        assert len(batches(store, topic_name)) < 8

    def test_the_sparse_gap_is_a_quarter_of_linger(
        self,
        kw: dict[str, Any],
        opened: list,
        topic_name: str,
        store: Store,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With a batch in flight, a sample 2.25 s after the previous one lingers under a
        10 s linger (the rule's gap is 2.5 s); one 2.5 s after goes out at once. The
        publisher's clock is the test's, so the gaps are exact."""
        now = [1000.0]
        monkeypatch.setattr(publisher_module, "_monotonic", lambda: now[0])
        pub = ChannelPublisher(topic(topic_name), linger=timedelta(seconds=10), **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # an idle link: sent at once
            now[0] += 2.25
            late = pub.publish(Msg(0, 1))
            assert pub.flow_control.backlog == 1, "a sample 0.225 linger after went out"
            now[0] += 2.5
            sparse = pub.publish(Msg(0, 2))  # the shorter of the last two gaps: 2.25 s
            assert pub.flow_control.backlog == 1
            now[0] += 2.5
            sparser = pub.publish(Msg(0, 3))  # gaps of 2.5 s and 2.5 s: sparse
            assert pub.flow_control.backlog == 2
        assert [f.result(TIMEOUT) for f in (first, late, sparse, sparser)] == [
            Position(0, i) for i in range(4)
        ]
        assert batches(store, topic_name) == [1, 3]
