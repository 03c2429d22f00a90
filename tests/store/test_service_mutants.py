"""The store service's request handling without DDS (issue 20's mutation run of
``dcps/store/_service.py``: its validation, dispatch and refusal paths).

A ``Store`` is built on a real log in a temporary directory and not started: no DDS
entity exists. Requests are handled as the service thread handles them (``_handle``,
``_publish``); the only parts replaced are the last steps, writing a reply to the
client's DDS reply writer and a live batch to a channel's DDS writer: both are kept in
lists instead. End to end over DDS: tests/store, tests/channels.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps.store._log import SyncMode
from dcps.store._service import Store, _Call
from dcps.wire._codes import ErrorCode, Op
from dcps.wire._durables import (
    DurableDelivery,
    DurableKind,
    DurablePollRequest,
    DurableSubscribeRequest,
)
from dcps.wire._messages import Reply
from dcps.wire._replies import ChannelStates, Pong, Published, TopicConfig
from dcps.wire._requests import (
    EnsureTopicRequest,
    HeartbeatRequest,
    PingRequest,
    PublishRequest,
    StateRequest,
)
from idl._errors import BadParameterError


class LiveWriter:
    """Stands for a channel's DDS writer of live batches: keeps what it is given."""

    def __init__(self) -> None:
        self.batches: list[Any] = []

    def write(self, batch: Any) -> None:
        self.batches.append(batch)


class Answered(Store):
    """A store whose replies and live batches are kept in lists instead of written over
    DDS (``replies``; ``live`` by (topic, channel))."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        self.replies: list[Reply] = []
        self.live: dict[tuple[str, int], LiveWriter] = {}
        super().__init__(*args, **kw)

    def _answer(self, client: str, request_id: int, reply: Reply) -> None:
        # what the DDS reply writer of ``client`` would carry: the same client and request
        assert (client, request_id) == (reply.client, int(reply.request_id)), (client, reply)
        self.replies.append(reply)

    def _live_writer(self, topic: str, channel: int) -> Any:
        return self.live.setdefault((topic, channel), LiveWriter())

    def ask(self, request: Any, request_id: int = 1) -> Reply:
        self._handle(_Call("c1", request_id, request))
        return self.replies[-1]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Answered]:
    s = Answered(tmp_path / "store", sync=SyncMode.NORMAL, key=None, admin_key=None)
    try:
        yield s
    finally:
        s.log.close()


def publish(store: Answered, topic: str, channel: int, *blobs: bytes, rid: int = 1) -> Reply:
    r = PublishRequest(topic, channel, [len(b) for b in blobs], b"".join(blobs))
    store._publish([_Call("c1", rid, r)])
    return store.replies[-1]


class TestOptions:
    @pytest.mark.parametrize("port", [-1, 65536, True, "80"])
    def test_a_bad_metrics_port_is_refused(self, tmp_path: Path, port: Any) -> None:
        with pytest.raises(BadParameterError) as refused:
            Store(tmp_path / "s", metrics_port=port)
        assert str(refused.value) == f"metrics_port must be 0..65535 or None, got {port!r}"
        assert not (tmp_path / "s").exists()  # refused before anything is created

    @pytest.mark.parametrize("threads", [0, True, 1.5])
    def test_bad_fetch_threads_are_refused(self, tmp_path: Path, threads: Any) -> None:
        with pytest.raises(BadParameterError) as refused:
            Store(tmp_path / "s", fetch_threads=threads)
        assert str(refused.value) == f"fetch_threads must be an int >= 1, got {threads!r}"

    def test_the_edges_are_accepted(self, tmp_path: Path) -> None:
        for port in (0, 65535, None):
            s = Store(tmp_path / f"s{port}", metrics_port=port, fetch_threads=1, key=None)
            s.log.close()


def requests(store: Store, kind: str, result: str) -> float:
    """The store's count of answered requests of ``kind`` with ``result`` (its metrics)."""
    value = store.metrics.registry.get_sample_value(
        "dcps_store_requests_total", {"kind": kind, "result": result}
    )
    return value or 0.0


class TestDefaults:
    def test_a_store_serves_domain_0_of_namespace_dcps_as_share_0_of_1(
        self, tmp_path: Path
    ) -> None:
        s = Store(tmp_path / "s", key=None, admin_key=None)
        try:
            assert (s.domain_id, s.namespace, str(s.share), s.failure) == (0, "dcps", "0/1", None)
            assert len(s.incarnation) == 32
            assert s.durability is None
        finally:
            s.log.close()

    def test_a_share_of_a_split_namespace_serves_no_durables_nor_groups(
        self, tmp_path: Path
    ) -> None:
        s = Answered(tmp_path / "s", share=(1, 2), key=None, admin_key=None)
        try:
            s.log.ensure_topic("t", 2)
            refused = s.ask(DurableSubscribeRequest("t", "d", "s1", DurableKind.SHARED))
            assert refused.status == ErrorCode.UNSUPPORTED
            assert "split stores do not serve durables" in refused.error
            beat = s.ask(HeartbeatRequest("t", "g", "m"))
            assert beat.status == ErrorCode.ILLEGAL_OPERATION
            assert beat.error == (
                "store 1/2 does not coordinate groups: HEARTBEAT goes to the store of share 0/2"
            )
        finally:
            s.log.close()

    def test_the_coordinating_share_of_two_also_refuses_durables(self, tmp_path: Path) -> None:
        s = Answered(tmp_path / "s", share=(0, 2), key=None, admin_key=None)
        try:
            s.log.ensure_topic("t", 2)
            refused = s.ask(DurableSubscribeRequest("t", "d", "s1", DurableKind.SHARED))
            assert refused.status == ErrorCode.UNSUPPORTED
        finally:
            s.log.close()

    def test_commits_are_timed_for_the_metrics(self, store: Answered) -> None:
        assert store.log.commit_observer == store.metrics.observe_commit


class TestTopics:
    def test_ensure_creates_then_checks(self, store: Answered) -> None:
        created = store.ask(EnsureTopicRequest("t", 3, True, "T"))
        assert TopicConfig.from_wire(created) == TopicConfig(3, True)
        assert sorted(store.live) == [("t", 0), ("t", 1), ("t", 2)]  # made before a publish
        again = store.ask(EnsureTopicRequest("t"))  # 0 and None: whatever it has
        assert TopicConfig.from_wire(again) == TopicConfig(3, True)
        wrong = store.ask(EnsureTopicRequest("t", 4))
        assert wrong.status == ErrorCode.INCONSISTENT_POLICY
        assert wrong.error == "topic 't' has 3 channels in the store, not 4"
        retain = store.ask(EnsureTopicRequest("t", 3, False))
        assert retain.status == ErrorCode.INCONSISTENT_POLICY
        assert retain.error == "topic 't' has retain_consumed=True in the store"

    def test_a_new_topic_is_logged_once(
        self, store: Answered, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store")
        store.ask(EnsureTopicRequest("t", 3, False, "T"))
        store.ask(EnsureTopicRequest("u", 1))
        store.ask(EnsureTopicRequest("t", 3))
        assert [r.getMessage() for r in caplog.records if "created" in r.getMessage()] == [
            "dcps store: topic 't' created (3 channels, type T)",
            "dcps store: topic 'u' created (1 channels, type not named)",
        ]

    def test_a_new_topic_gets_the_default_channel_count(self, store: Answered) -> None:
        got = TopicConfig.from_wire(store.ask(EnsureTopicRequest("t")))
        assert got == TopicConfig(store.default_channel_count, False)

    def test_a_store_may_refuse_client_topics(self, tmp_path: Path) -> None:
        s = Answered(tmp_path / "s", allow_client_topics=False, key=None, admin_key=None)
        try:
            refused = s.ask(EnsureTopicRequest("t", 1))
            assert refused.status == ErrorCode.ILLEGAL_OPERATION
            assert refused.error.startswith(
                "the store of namespace 'dcps' has no topic 't' and does not let clients "
                "create topics (allow_client_topics=False)"
            )
            s.log.ensure_topic("t", 1)
            assert TopicConfig.from_wire(s.ask(EnsureTopicRequest("t", 1))).channel_count == 1
        finally:
            s.log.close()


class TestPublishAndState:
    def test_each_publish_is_confirmed_with_its_placement(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 2))
        store.log.create_group("t", "g")
        first = Published.from_wire(publish(store, "t", 0, b"a", b"bb"))
        assert (first.first, first.count, first.discarded) == (0, 2, False)
        assert first.stamp > 0
        second = Published.from_wire(publish(store, "t", 0, b"c"))
        assert (second.first, second.count) == (2, 1)
        pushed = store.live[("t", 0)].batches  # live subscribers get each batch at once
        assert [(b.first, list(b.sizes), bytes(b.blob)) for b in pushed] == [
            (0, [1, 2], b"abb"),
            (2, [1], b"c"),
        ]
        assert pushed[0].timestamp == first.stamp
        states = ChannelStates.from_wire(store.ask(StateRequest("t", "g")))
        assert (states.channel_count, states.channels, states.heads, states.tails) == (
            2,
            (0, 1),
            (0, 0),
            (2, -1),
        )
        assert (states.committed, states.explicit) == ((-1, -1), (False, False))

    def test_a_topic_without_groups_discards(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 1))
        got = Published.from_wire(publish(store, "t", 0, b"a"))
        assert got.discarded
        assert store.log.channel_state("t", 0).head == 1  # not kept

    def test_a_bad_publish_fails_alone(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 1))
        store.log.create_group("t", "g")
        calls = [
            _Call("c1", 1, PublishRequest("nope", 0, [1], b"a")),
            _Call("c1", 2, PublishRequest("t", 5, [1], b"b")),
            _Call("c1", 3, PublishRequest("t", 0, [1], b"c")),
        ]
        store._publish(calls)
        by_id = {int(r.request_id): r for r in store.replies}
        assert by_id[1].status == ErrorCode.BAD_PARAMETER
        assert "nope" in by_id[1].error
        assert by_id[2].status == ErrorCode.BAD_PARAMETER
        assert Published.from_wire(by_id[3]).count == 1
        assert store.log.channel_state("t", 0).tail == 0
        assert requests(store, "publish", "bad_parameter") == 2
        assert requests(store, "publish", "ok") == 1

    def test_an_empty_publish_places_nothing(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 1))
        got = Published.from_wire(publish(store, "t", 0))
        assert (got.first, got.count, got.stamp) == (0, 0, 0)

    def test_state_of_chosen_channels(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 3))
        got = ChannelStates.from_wire(store.ask(StateRequest("t", "", (2,))))
        assert (got.channels, got.committed) == ((2,), ())

    def test_ping_names_the_incarnation_and_share(self, store: Answered) -> None:
        got = Pong.from_wire(store.ask(PingRequest()))
        assert got == Pong(store.incarnation, 0, 1)


class TestFailures:
    def test_a_failing_handler_becomes_an_error_reply_and_is_counted(self, store: Answered) -> None:
        got = store.ask(StateRequest("nope"), request_id=7)
        assert (got.client, int(got.request_id), got.status) == (
            "c1",
            7,
            ErrorCode.BAD_PARAMETER,
        )
        assert "nope" in got.error
        assert requests(store, "state", "bad_parameter") == 1
        store.ask(PingRequest())
        assert requests(store, "ping", "ok") == 1

    def test_every_request_kind_has_a_handler(self) -> None:
        assert Op.PING in Store._HANDLERS
        assert Store._SHARE_HANDLERS[Op.PING] is Store._HANDLERS[Op.PING]
        assert Store._SHARE_HANDLERS[Op.JOIN] is not Store._HANDLERS[Op.JOIN]


class TestWhatAPublishTells:
    def test_a_publish_is_counted_by_topic_received_and_stored(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 1))
        store.log.create_group("t", "g")
        publish(store, "t", 0, b"ab", b"c")
        value = store.metrics.registry.get_sample_value
        assert value("dcps_store_published_elements_total", {"topic": "t"}) == 2
        assert value("dcps_store_published_bytes_total", {"topic": "t"}) == 3
        assert value("dcps_store_stored_elements_total", {"topic": "t"}) == 2
        assert value("dcps_store_stored_bytes_total", {"topic": "t"}) == 3

    def test_a_last_value_durable_sees_what_is_published(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 1))
        store.ask(DurableSubscribeRequest("t", "lv", "s1", DurableKind.LAST_VALUE))
        publish(store, "t", 0, b"\x01", b"\x02")
        got = DurableDelivery.from_wire(store.ask(DurablePollRequest("t", "lv", "s1", 10)))
        assert (got.offsets, got.data) == ((0, 1), b"\x01\x02")

    def test_a_topics_type_identity_is_recorded(self, store: Answered) -> None:
        store.ask(EnsureTopicRequest("t", 1, None, "T", "T#abc"))
        assert store.log.topic("t").type_identity == "T#abc"
        store.ask(EnsureTopicRequest("u", 1, None, "U"))
        assert store.log.topic("u").type_identity == ""


class TestAShareServesItsChannelsOnly:
    def test_another_shares_channels_are_refused_by_name(self, tmp_path: Path) -> None:
        s = Answered(tmp_path / "s", share=(1, 2), key=None, admin_key=None)
        try:
            s.log.ensure_topic("t", 4)
            s.log.create_group("t", "g")
            refused = publish(s, "t", 2, b"a")
            assert refused.status == ErrorCode.BAD_PARAMETER
            assert refused.error == (
                "channels [2] of topic 't' are served by other stores: this store's share "
                "1/2 serves channel c iff c % 2 == 1"
            )
            assert Published.from_wire(publish(s, "t", 3, b"b")).count == 1
            state = s.ask(StateRequest("t", "", (0, 1)))
            assert state.error.startswith("channels [0] of topic 't' are served by other")
            mine = ChannelStates.from_wire(s.ask(StateRequest("t")))
            assert mine.channels == (1, 3)
        finally:
            s.log.close()
