"""Silent data problems on the subscriber side (issue 13): undecodable elements, missing topics."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest

import idl
from dcps import BadParameterError
from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    Position,
    UndecodableElementError,
)
from dcps.channels._client import StoreClient
from dcps.store import Store
from dcps.wire._transport import Endpoint

TIMEOUT = 10.0


class Reading(idl.Struct, typename="dcps_test::undecodable::Reading"):
    """A fixed-size final struct (decoded a batch at a time when it can be)."""

    sensor: idl.key[idl.int32]
    seq: idl.int64
    value: idl.float64


class Label(idl.Struct, typename="dcps_test::undecodable::Label"):
    """Another type, published under the same topic name by mistake."""

    text: idl.string


class Opened:
    """Publishers/subscribers on the test's store, closed afterwards."""

    def __init__(self, store: Store, domain_id: int) -> None:
        self.kw: dict[str, Any] = {"domain_id": domain_id, "namespace": store.namespace}
        self.entities: list[Any] = []

    def pub(self, topic: ChannelledTopic, **kw: Any) -> ChannelPublisher[Any]:
        p: ChannelPublisher[Any] = ChannelPublisher(topic, **self.kw, **kw)
        self.entities.append(p)
        return p

    def sub(self, topic: ChannelledTopic, **kw: Any) -> ChannelSubscriber[Any]:
        s: ChannelSubscriber[Any] = ChannelSubscriber(topic, **self.kw, **kw)
        self.entities.append(s)
        return s

    def raw_publish(self, topic: str, channel: int, elements: list[bytes]) -> None:
        """Append raw bytes to a channel as a client of another program would (no type)."""
        endpoint = Endpoint(self.kw["domain_id"], self.kw["namespace"])
        client = StoreClient(endpoint)
        try:
            client.connect(TIMEOUT)
            sizes = [len(e) for e in elements]
            client.publish_async(topic, channel, sizes, b"".join(elements)).result(TIMEOUT)
        finally:
            client.close()
            endpoint.close()


@pytest.fixture
def dds(store: Store, domain_id: int) -> Iterator[Opened]:
    opened = Opened(store, domain_id)
    try:
        yield opened
    finally:
        for entity in reversed(opened.entities):
            entity.close()


def _publish_around_bad(dds: Opened, topic: ChannelledTopic, bad: list[bytes]) -> None:
    """Readings 0-4, then ``bad`` raw elements, then readings 5-9, all in channel 0."""
    good = dds.pub(topic)
    good.publish_many([Reading(0, i, i / 2) for i in range(5)]).result(TIMEOUT)
    dds.raw_publish(topic.name, 0, bad)
    good.publish_many([Reading(0, i, i / 2) for i in range(5, 10)]).result(TIMEOUT)


def _error(fut: Future[Any]) -> UndecodableElementError:
    with pytest.raises(UndecodableElementError) as caught:
        fut.result(TIMEOUT)
    return caught.value


class TestUndecodableElements:
    def test_receive_fails_naming_topic_channel_and_offset(
        self, dds: Opened, topic_name: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """By default the receive reaching a bad element fails, naming it, and logs at ERROR."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic)
        label = Label.serialize(Label("not a reading"))  # type: ignore[attr-defined]
        _publish_around_bad(dds, topic, [label])
        with caplog.at_level(logging.ERROR, logger="dcps.channels"):
            got = sub.receive(100).result(TIMEOUT)
            assert [e.value.seq for e in got] == list(range(5))  # what came before arrives
            error = _error(sub.receive(100))
        assert isinstance(error, BadParameterError)  # an IdlError: a sample not fitting its type
        assert error.topic == topic_name
        assert error.position == Position(0, 5)
        assert error.data == label
        for text in (repr(topic_name), "channel 0", "offset 5", "dcps_test::undecodable::Reading"):
            assert text in str(error)
        assert any(
            r.levelno == logging.ERROR and "offset 5" in r.getMessage() for r in caplog.records
        )

    def test_nothing_is_lost_and_seeking_past_resumes(self, dds: Opened, topic_name: str) -> None:
        """The subscriber stays before the bad element (receives keep failing) until it seeks."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic)
        _publish_around_bad(dds, topic, [b"\x00\x01\x00\x00\x07"])
        assert len(sub.receive(5).result(TIMEOUT)) == 5
        error = _error(sub.receive())
        assert _error(sub.receive()).position == error.position  # not skipped silently
        sub.seek(0, error.position)
        rest = sub.receive(100).result(TIMEOUT)
        assert [e.value.seq for e in rest] == list(range(5, 10))
        assert [e.position.offset for e in rest] == list(range(6, 11))

    def test_a_whole_batch_of_another_type_fails_at_its_first_element(
        self, dds: Opened, topic_name: str
    ) -> None:
        """A publisher of another type (same topic name) is caught at the first bad offset."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic)
        bad = [Label.serialize(Label(f"label {i}")) for i in range(20)]  # type: ignore[attr-defined]
        _publish_around_bad(dds, topic, bad)
        assert len(sub.receive(100).result(TIMEOUT)) == 5
        assert _error(sub.receive(100)).position == Position(0, 5)

    def test_dead_letter_callback_gets_each_bad_element_then_it_is_skipped(
        self, dds: Opened, topic_name: str
    ) -> None:
        """A callable on_undecodable receives every bad element's error; delivery goes on."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        dead: list[UndecodableElementError] = []
        sub = dds.sub(topic, on_undecodable=dead.append)
        bad = [b"\x00\x01\x00\x00\x01", b"\x00\x01\x00\x00\x02\x03"]
        _publish_around_bad(dds, topic, bad)
        got: list[Any] = []
        while len(got) < 10:
            got += sub.receive(100).result(TIMEOUT)
        assert [e.value.seq for e in got] == list(range(10))
        assert [(d.position, d.data) for d in dead] == [
            (Position(0, 5), bad[0]),
            (Position(0, 6), bad[1]),
        ]

    def test_a_bad_choice_is_refused(self, dds: Opened, topic_name: str) -> None:
        """on_undecodable takes "raise", "skip" or a callable; anything else is refused."""
        with pytest.raises(BadParameterError, match="on_undecodable"):
            dds.sub(ChannelledTopic(topic_name, Reading, channel_count=1), on_undecodable="drop")  # type: ignore[arg-type]


class TestMissingTopic:
    def test_a_misspelt_topic_is_refused_naming_topic_and_namespace(
        self, dds: Opened, topic_name: str, store: Store
    ) -> None:
        """A subscriber on a topic the store does not have fails at once, creating nothing."""
        dds.pub(ChannelledTopic(topic_name, Reading))
        misspelt = ChannelledTopic(topic_name + "x", Reading)
        with pytest.raises(BadParameterError) as caught:
            dds.sub(misspelt)
        assert repr(misspelt.name) in str(caught.value)
        assert repr(store.namespace) in str(caught.value)
        assert misspelt.name not in {t.name for t in store.log.topics()}

    def test_create_or_a_channel_count_creates_it(
        self, dds: Opened, topic_name: str, store: Store
    ) -> None:
        """create=True, or a topic with a channel count, creates the topic as before."""
        sub = dds.sub(ChannelledTopic(topic_name, Reading), create=True)
        assert sub.channel_count >= 1
        counted = dds.sub(ChannelledTopic(topic_name + "_n", Reading, channel_count=3))
        assert counted.channel_count == 3
        assert {topic_name, topic_name + "_n"} <= {t.name for t in store.log.topics()}
