"""The store's live writers exist once a client connects a topic, before its first publish.

A subscriber's live readers are matched with them while the publisher connects:
a channel's first elements are pushed to it, not left for it to fetch 30-60 ms
later (what the p99.9 of the latency at 1,000 elements/s of 64 B was).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dcps._cyclone.binding import matched_readers, matched_writers
from dcps.channels._client import StoreClient
from dcps.store import Store
from dcps.wire._names import BATCH_READER_QOS, batch_partition
from dcps.wire._transport import Endpoint
from tests.support.waiting import eventually

TIMEOUT = 20.0


class Observer:
    """A store client with live readers of its own on chosen channels of a topic."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        self.namespace = namespace
        self.endpoint = Endpoint(domain_id, namespace)
        self.client = StoreClient(self.endpoint, request_timeout=TIMEOUT)
        self.client.connect(TIMEOUT)

    def live_reader(self, topic: str, channel: int) -> Any:
        return self.endpoint.reader(
            self.endpoint.batch_topic,
            batch_partition(self.namespace, topic, channel),
            BATCH_READER_QOS,
        )

    def close(self) -> None:
        self.client.close()
        self.endpoint.close()


@pytest.fixture
def observer(store: Store, domain_id: int, namespace: str) -> Iterator[Observer]:
    made = Observer(domain_id, namespace)
    try:
        yield made
    finally:
        made.close()


class TestLiveWritersAtConnect:
    def test_every_channel_has_a_live_writer_before_the_first_publish(
        self, observer: Observer, topic_name: str
    ) -> None:
        """Ensuring a topic (as publishers and subscribers do) makes the store's live
        writers of its channels: readers on them match with nothing published yet."""
        readers = [observer.live_reader(topic_name, c) for c in range(5)]
        observer.client.ensure_topic(topic_name, 5, False, "")
        for channel, reader in enumerate(readers):
            eventually(
                lambda r=reader: matched_writers(r),
                TIMEOUT,
                f"a live writer of channel {channel} matched before any publish",
            )

    def test_a_first_publish_reaches_a_reader_matched_before_it(
        self, store: Store, observer: Observer, topic_name: str
    ) -> None:
        """The first batch of a channel is pushed to a live reader matched at connect."""
        reader = observer.live_reader(topic_name, 3)
        observer.client.ensure_topic(topic_name, 5, False, "")
        eventually(lambda: matched_writers(reader), TIMEOUT, "the live writer matched")
        writer = store._batch_writers[(topic_name, 3)]  # and it the reader (both ways)
        eventually(lambda: matched_readers(writer), TIMEOUT, "the reader matched")
        observer.client.publish_async(topic_name, 3, [2, 3], b"abxyz").result(TIMEOUT)
        got = eventually(lambda: reader.take(N=8), TIMEOUT, "the first batch pushed live")
        batch = got[0]
        assert (batch.channel, batch.first, list(batch.sizes), batch.blob) == (
            3,
            0,
            [2, 3],
            b"abxyz",
        )

    def test_channels_past_the_eager_ones_get_their_writer_at_their_first_publish(
        self, observer: Observer, topic_name: str
    ) -> None:
        """A topic of many channels: those past the first 64 get a live writer when first
        published to, and their batches are pushed as before."""
        reader = observer.live_reader(topic_name, 70)
        observer.client.ensure_topic(topic_name, 80, False, "")
        first = observer.live_reader(topic_name, 0)
        eventually(lambda: matched_writers(first), TIMEOUT, "channel 0's live writer matched")
        assert not matched_writers(reader)  # not made yet: none before its first publish
        observer.client.publish_async(topic_name, 70, [1], b"a").result(TIMEOUT)
        eventually(lambda: matched_writers(reader), TIMEOUT, "channel 70's live writer")
