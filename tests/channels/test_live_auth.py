"""Live pushes are sealed: a forged or replayed live batch or map change is dropped (issue 13).

The store pushes each accepted batch of a channel (a subscriber's live tail)
and each change of a map (a watch) on plain DDS partitions. With a namespace
key each push carries a trailer binding it to the store incarnation and to its
channel or map; a subscriber or watch drops (and counts) a push that does not
verify or that it has taken already. The store is a real process; the
attacker is a raw ``cyclonedds`` participant writing ``LiveBatch`` samples.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps import DcpsTimeoutError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber
from dcps.durables._map import KeyValueMap, MapOperation
from dcps.wire._auth import DropReason
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._maps import map_partition
from dcps.wire._messages import LiveBatch
from dcps.wire._names import BATCH_READER_QOS, BATCH_WRITER_QOS, batch_partition
from tests.support.peers.channels_types import Msg
from tests.support.peers.maps_queues_peer import Counter
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

TIMEOUT = 20.0


@pytest.fixture
def keyed_store(
    tmp_path: Path, domain_id: int, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[StoreProcess]:
    """A store process whose namespace has a key; the clients made here use it too."""
    monkeypatch.setenv(KEY_FILE_ENV, str(write_key_file(tmp_path / "ns.key").source))
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    yield store
    store.kill()


class Pushes:
    """A raw participant reading and writing ``LiveBatch`` samples in one partition."""

    def __init__(self, domain_id: int, partition: str) -> None:
        self.dp = DomainParticipant(domain_id)
        topic = Topic(self.dp, "dcps_channels_batch", LiveBatch)
        qos = Qos(Policy.Partition([partition]))
        self.reader = DataReader(Subscriber(self.dp, qos=qos), topic, qos=BATCH_READER_QOS)
        self.writer = DataWriter(Publisher(self.dp, qos=qos), topic, qos=BATCH_WRITER_QOS)
        self.seen: list[LiveBatch] = []

    def captured(self, count: int) -> list[LiveBatch]:
        """Wait until ``count`` genuine pushes were seen; all seen so far."""

        def enough() -> bool:
            self.seen += [b for b in self.reader.take(N=64) if isinstance(b, LiveBatch)]
            return len(self.seen) >= count

        eventually(enough, TIMEOUT, f"{count} captured push(es)")
        return self.seen

    def write(self, batch: LiveBatch) -> None:
        eventually(self.writer.get_matched_subscriptions, TIMEOUT, "a reader of the pushes")
        self.writer.write(batch)

    def close(self) -> None:
        self.dp.__del__()


def _copy(batch: LiveBatch, **changes: Any) -> LiveBatch:
    fields = {
        "topic": batch.topic,
        "channel": batch.channel,
        "first": batch.first,
        "timestamp": batch.timestamp,
        "sizes": list(batch.sizes),
        "blob": bytes(batch.blob),
        "auth": bytes(batch.auth),
    }
    fields.update(changes)
    return LiveBatch(**fields)


def _drops(client: Any) -> dict[DropReason, int]:
    return client.sealer.drops()  # type: ignore[no-any-return]


class TestLiveBatches:
    def test_forged_and_replayed_live_batches_are_dropped(
        self, keyed_store: StoreProcess, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A subscriber takes the genuine batches only: a copy of a genuine batch moved to
        the next offset without a valid trailer is dropped (not delivered as the element at
        offset 1), and the genuine batch written again is dropped as replayed."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        pushes = Pushes(domain_id, batch_partition(namespace, topic_name, 0))
        try:
            with (
                ChannelSubscriber(topic, **kw) as sub,
                ChannelPublisher(topic, **kw) as pub,
            ):
                client = sub._client
                pub.publish(Msg(1, 1)).result(TIMEOUT)
                first = sub.receive().result(TIMEOUT)
                assert (first.value, first.position.offset) == (Msg(1, 1), 0)
                genuine = pushes.captured(1)[0]
                assert genuine.auth, "a keyed store seals its live batches"

                forged = _copy(genuine, first=1, auth=b"")  # Msg(1, 1) again, at offset 1
                pushes.write(forged)
                eventually(
                    lambda: _drops(client)[DropReason.MALFORMED] >= 1, TIMEOUT, "forgery dropped"
                )
                tampered = _copy(genuine, first=1)  # a genuine trailer over another offset
                pushes.write(tampered)
                eventually(
                    lambda: _drops(client)[DropReason.BAD_TAG] >= 1, TIMEOUT, "tamper dropped"
                )
                pushes.write(_copy(genuine))  # the genuine batch, replayed
                eventually(
                    lambda: _drops(client)[DropReason.REPLAYED] >= 1, TIMEOUT, "replay dropped"
                )

                pub.publish(Msg(2, 2)).result(TIMEOUT)
                second = sub.receive().result(TIMEOUT)
                assert (second.value, second.position.offset) == (Msg(2, 2), 1)
                pub.publish(Msg(3, 3)).result(TIMEOUT)  # next: offset 2, no duplicate between
                third = sub.receive().result(TIMEOUT)
                assert (third.value, third.position.offset) == (Msg(3, 3), 2)
        finally:
            pushes.close()


class TestMapChanges:
    def test_forged_and_replayed_map_changes_are_dropped(
        self, keyed_store: StoreProcess, domain_id: int, namespace: str
    ) -> None:
        """A watch sees the genuine changes only: a genuine change push moved to the next
        revision without a valid trailer, and the genuine push written again, are dropped
        and counted; the next genuine change arrives with its own revision and value."""
        name = f"m_{uuid.uuid4().hex[:10]}"
        pushes = Pushes(domain_id, map_partition(namespace, name))
        try:
            with KeyValueMap(name, Counter, domain_id=domain_id, namespace=namespace) as m:
                client = m._link.client
                with m.watch(updates_only=True) as watch:
                    rev = m.put("a", Counter(1, "w"))
                    change = watch.get(TIMEOUT)
                    assert (change.key, change.value, change.revision) == (
                        "a",
                        Counter(1, "w"),
                        rev,
                    )
                    genuine = pushes.captured(1)[0]
                    assert genuine.auth, "a keyed store seals its map change pushes"

                    spurious: list[Any] = []

                    def dropped(reason: DropReason) -> bool:
                        # a watch takes pushes in get(): nothing may come out of it
                        with contextlib.suppress(DcpsTimeoutError):
                            spurious.append(watch.get(0.05))
                        return _drops(client)[reason] >= 1

                    forged = _copy(genuine, first=rev + 1, timestamp=rev, auth=b"")
                    pushes.write(forged)
                    eventually(lambda: dropped(DropReason.MALFORMED), TIMEOUT, "forgery dropped")
                    pushes.write(_copy(genuine))
                    eventually(lambda: dropped(DropReason.REPLAYED), TIMEOUT, "replay dropped")
                    assert spurious == []

                    rev2 = m.put("b", Counter(2, "w"))
                    assert rev2 == rev + 1
                    change = watch.get(TIMEOUT)
                    assert (change.operation, change.key, change.value, change.revision) == (
                        MapOperation.PUT,
                        "b",
                        Counter(2, "w"),
                        rev2,
                    )
        finally:
            pushes.close()
