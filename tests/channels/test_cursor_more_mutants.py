"""The cursors' check of a keyed store's live pushes (issue 20: survivors of
``dcps/channels/_cursors.py`` that test_cursor_mutants.py left).

With a namespace key every live batch the store pushes carries a trailer binding it to
the store incarnation, the topic and the channel; a subscriber takes a push only when
it verifies. Here a raw ``cyclonedds`` participant plays the attacker: it captures a
genuine push and writes a forged copy at the next offset. One embedded store, keyed,
serves the module.

No ``from __future__ import annotations``: cyclonedds resolves field types at run time.
"""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps.channels import ChannelPublisher, ChannelSubscriber
from dcps.store import Store, SyncMode
from dcps.wire._auth import DropReason
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._messages import LiveBatch
from dcps.wire._names import BATCH_READER_QOS, BATCH_WRITER_QOS, batch_partition
from tests.support.channel_entities import retained_topic as topic
from tests.support.embedded_store import worker_domain
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store for the module, its namespace keyed."""
    directory = tmp_path_factory.mktemp("curkeyed")
    key = write_key_file(directory / "ns.key")
    domain, namespace = worker_domain(worker_id), f"ns_{uuid.uuid4().hex[:10]}"
    with Store(
        directory / "store", domain_id=domain, namespace=namespace, sync=SyncMode.NORMAL, key=key
    ) as store:
        yield {
            "store": store,
            "kw": {"domain_id": domain, "namespace": namespace, "store_key": key},
        }


@pytest.fixture
def kw(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    return dict(served["kw"])


class Pushes:
    """A raw participant reading and writing ``LiveBatch`` samples in one partition."""

    def __init__(self, domain_id: int, partition: str) -> None:
        self.dp = DomainParticipant(domain_id)
        live = Topic(self.dp, "dcps_channels_batch", LiveBatch)
        qos = Qos(Policy.Partition([partition]))
        self.reader = DataReader(Subscriber(self.dp, qos=qos), live, qos=BATCH_READER_QOS)
        self.writer = DataWriter(Publisher(self.dp, qos=qos), live, qos=BATCH_WRITER_QOS)
        self.seen: list[LiveBatch] = []

    def captured(self) -> LiveBatch:
        """The first genuine push seen."""

        def some() -> bool:
            self.seen += [b for b in self.reader.take(N=64) if isinstance(b, LiveBatch)]
            return bool(self.seen)

        eventually(some, TIMEOUT, "a captured push")
        return self.seen[0]

    def write(self, batch: LiveBatch) -> None:
        eventually(self.writer.get_matched_subscriptions, TIMEOUT, "a reader of the pushes")
        self.writer.write(batch)

    def close(self) -> None:
        self.dp.__del__()


def fetches(store: Store) -> float:
    """The FETCH requests the store answered so far (its own metrics)."""
    value = store.metrics.registry.get_sample_value(
        "dcps_store_requests_total", {"kind": "fetch", "result": "ok"}
    )
    return value or 0.0


class TestLivePushes:
    def test_genuine_pushes_are_taken_live_and_a_forged_one_is_dropped(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """The genuine batch verifies (topic and channel as the cursor knows them) and is
        delivered from the push, without a FETCH and without a drop; a copy moved to the
        next offset with no trailer is dropped and counted, not delivered, and the real
        element at that offset comes next."""
        store = served["store"]
        t = topic(topic_name)
        pushes = Pushes(kw["domain_id"], batch_partition(kw["namespace"], topic_name, 0))
        try:
            sub = ChannelSubscriber(t, **kw)
            opened.append(sub)
            pub = ChannelPublisher(t, **kw)
            opened.append(pub)
            eventually(lambda: sub.channels == [0], timeout=TIMEOUT)
            asked = fetches(store)
            drops = sub._client.sealer.drops
            pending = sub.receive()
            pub.publish(Msg(1, 1)).result(TIMEOUT)
            first = pending.result(TIMEOUT)
            assert (first.value, first.position.offset) == (Msg(1, 1), 0)
            assert fetches(store) == asked, "the pushed batch was fetched instead"
            assert sum(drops().values()) == 0
            genuine = pushes.captured()
            assert genuine.auth

            pending = sub.receive()  # offset 1, not published yet
            forged = LiveBatch(
                topic=genuine.topic,
                channel=genuine.channel,
                first=1,
                timestamp=genuine.timestamp,
                sizes=list(genuine.sizes),
                blob=bytes(genuine.blob),
                auth=b"",
            )
            pushes.write(forged)
            eventually(lambda: drops()[DropReason.MALFORMED] >= 1, TIMEOUT, "forgery dropped")
            pub.publish(Msg(2, 2)).result(TIMEOUT)
            second = pending.result(TIMEOUT)
            assert (second.value, second.position.offset) == (Msg(2, 2), 1)
        finally:
            pushes.close()
