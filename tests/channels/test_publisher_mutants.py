"""The channel publisher, rule by rule, against one embedded store (issue 20's mutation run).

Each test checks what a user sees: which channel and offset each element got, how many
elements each store batch holds (read back from the store's log), the exact refusals,
what the futures and ``flow_control`` report, and that nothing is lost or duplicated.
One store serves the whole module (starting one costs half a second) and each test has
its own topic. To hold confirmations back, a test takes the store file's write lock from
a second SQLite connection, as another program could: the store's writes wait for it.

No ``from __future__ import annotations``: cyclonedds resolves the field types below at
run time.
"""

import gc
import sqlite3
import threading
import time
import zlib
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    InconsistentPolicyError,
    NetworkConfig,
)
from dcps.channels import ChannelledTopic, ChannelPublisher, ClientState, OrderBy, Position
from dcps.channels._publisher import (
    BATCH_BYTES,
    BATCH_BYTES_LARGE_FRAGMENTS,
    default_batch_bytes,
)
from dcps.store import Store, SyncMode
from idl._batch_codec import encoder_of
from tests.support.channel_entities import store_held
from tests.support.embedded_store import served_store, worker_domain
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

TIMEOUT = 5.0  # short: a mutant that loses an element fails the test sooner
LONG = timedelta(seconds=60)  # a linger no test waits out


@dataclass
class Note(IdlStruct, typename="dcps_test.publisher.Note"):
    """A keyless sample: a publisher keeps all of them in one channel of its own."""

    seq: t.int64


served = served_store("pubstore")  # one embedded store for the module


@pytest.fixture
def store(served: dict[str, Any]) -> Store:
    return served["store"]  # type: ignore[no-any-return]


@pytest.fixture
def kw(served: dict[str, Any]) -> dict[str, Any]:
    return dict(served["kw"])


def topic(name: str, channels: int = 1, kind: type = Msg, retain: bool = True) -> ChannelledTopic:
    return ChannelledTopic(name, kind, channel_count=channels, retain_consumed=retain)


def batches(store: Store, name: str, channel: int = 0) -> list[int]:
    """The element count of each batch the store holds in ``channel`` of topic ``name``."""
    run, _ = store.log.reader().fetch(name, channel, 0, 100000)
    return list(run.counts)


def stored(store: Store, name: str, channel: int = 0) -> list[int]:
    """The ``seq`` of every element stored in one channel, in offset order."""
    run, _ = store.log.reader().fetch(name, channel, 0, 100000)
    decode = Msg.deserialize
    return [decode(bytes(p)).seq for p in run.payloads()]


class TestParameters:
    @pytest.mark.parametrize("name", ["batch_count", "batch_bytes", "max_in_flight"])
    def test_a_count_below_one_is_refused_before_connecting(self, name: str, unique: str) -> None:
        with pytest.raises(BadParameterError) as info:
            ChannelPublisher(topic(f"t_{unique}"), domain_id=0, **{name: 0})  # type: ignore[arg-type]
        assert str(info.value) == "batch_count, batch_bytes and max_in_flight must be >= 1"

    @pytest.mark.parametrize("name", ["linger", "timeout"])
    def test_an_endless_linger_or_timeout_is_refused(self, name: str, unique: str) -> None:
        with pytest.raises(BadParameterError) as info:
            ChannelPublisher(topic(f"t_{unique}"), domain_id=0, **{name: None})  # type: ignore[arg-type]
        assert str(info.value) == f"{name} must be finite, got None"

    def test_a_negative_flush_timeout_is_refused(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)
        with pytest.raises(BadParameterError) as info:
            pub.flush(-1)
        assert str(info.value) == "timeout must not be negative, got -1"

    def test_a_negative_linger_is_refused_by_name(self, unique: str) -> None:
        with pytest.raises(BadParameterError) as info:
            ChannelPublisher(topic(f"t_{unique}"), domain_id=0, linger=-1)
        assert str(info.value) == "linger must not be negative, got -1"
        with pytest.raises(BadParameterError) as info:
            ChannelPublisher(topic(f"t_{unique}"), domain_id=0, connect_timeout=-1)
        assert str(info.value) == "connect_timeout must not be negative, got -1"

    def test_counts_of_one_are_accepted(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(
            topic(topic_name), batch_count=1, batch_bytes=1, max_in_flight=1, **kw
        )
        opened.append(pub)
        assert pub.publish(Msg(0, 0)).result(TIMEOUT) == Position(0, 0)
        assert pub.flow_control.max_backlog == 1

    def test_a_fixed_channel_must_exist(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """The last channel is fine; one past it is refused, naming channel, topic and count."""
        two = topic(topic_name, channels=2)
        last = ChannelPublisher(two, order_by=OrderBy.fixed(1), **kw)
        opened.append(last)
        assert last.publish(Msg(5, 0)).result(TIMEOUT) == Position(1, 0)
        with pytest.raises(InconsistentPolicyError) as info:
            ChannelPublisher(two, order_by=OrderBy.fixed(2), **kw)
        assert str(info.value) == (
            f"fixed channel 2 does not exist: topic {topic_name!r} has 2 channels"
        )


class TestChannels:
    def test_round_robin_takes_every_channel_in_turn(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name, 3), order_by=OrderBy.round_robin(), **kw)
        opened.append(pub)
        positions = [pub.publish(Msg(0, i)).result(TIMEOUT) for i in range(6)]
        assert positions == [Position(c, o) for o in range(2) for c in range(3)]

    def test_a_key_always_lands_in_the_channel_of_its_hash(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """Channel = CRC-32 of the key's CDR % channels, the first time and when memoised."""
        pub = ChannelPublisher(topic(topic_name, 7), **kw)
        opened.append(pub)
        keys = list(range(12)) * 2
        futures = [pub.publish(Msg(k, i)) for i, k in enumerate(keys)]
        pub.flush()
        expected = {k: zlib.crc32(Msg.__idl__.serialize_key(Msg(k, 0))) % 7 for k in keys}
        assert len(set(expected.values())) > 3
        for k, f in zip(keys, futures, strict=True):
            assert f.result(TIMEOUT).channel == expected[k]
            assert pub.channel_of(Msg(k, 99)) == expected[k]
        for c in range(7):
            assert stored(store, topic_name, c) == [
                i for i, k in enumerate(keys) if expected[k] == c
            ]

    def test_publish_many_places_keys_as_publish_does(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name, 5), **kw)
        opened.append(pub)
        many = pub.publish_many([Msg(k, k) for k in range(10)]).result(TIMEOUT)
        expected = [zlib.crc32(Msg.__idl__.serialize_key(Msg(k, 0))) % 5 for k in range(10)]
        assert [p.channel for p in many] == expected

    def test_keyless_samples_stay_in_the_publishers_own_channel(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name, 5, Note), **kw)
        opened.append(pub)
        own = zlib.crc32(pub._client.client_id.encode()) % 5
        positions = [pub.publish(Note(i)).result(TIMEOUT) for i in range(3)]
        assert positions == [Position(own, 0), Position(own, 1), Position(own, 2)]
        assert pub.channel_of(Note(9)) == own

    def test_the_key_memo_is_cleared_when_full_and_still_right(
        self, kw: dict[str, Any], opened: list, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        pub = ChannelPublisher(topic(topic_name, 3), **kw)
        opened.append(pub)
        for k in range(65536 + 1):
            pub.channel_of(Msg(k, 0))
            assert len(pub._key_memo) <= 65536  # at most 65536 keys, even one past
        for k in range(65536 + 1, 65536 + 3):
            pub.channel_of(Msg(k, 0))
        assert len(pub._key_memo) <= 65536
        for k in (0, 65536, 65538):
            assert pub.channel_of(Msg(k, 0)) == zlib.crc32(Msg.__idl__.serialize_key(Msg(k, 0))) % 3

    def test_a_known_key_is_remembered_not_computed_again(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """The publisher remembers each key's channel by the key fields' values (the key
        CDR costs as much as the whole sample): after one publish of each key, the memo
        holds exactly those keys and their channels."""
        pub = ChannelPublisher(topic(topic_name, 7), **kw)
        opened.append(pub)
        futures = [pub.publish(Msg(k, k)) for k in range(5)]
        pub.flush()
        expected = {k: zlib.crc32(Msg.__idl__.serialize_key(Msg(k, 0))) % 7 for k in range(5)}
        assert pub._key_memo == expected
        assert [f.result(TIMEOUT).channel for f in futures] == list(expected.values())


class TestRefusals:
    def test_a_sample_of_another_type_is_refused_and_queues_nothing(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)
        message = f"topic {topic_name!r} carries Msg, not Note"
        with pytest.raises(BadParameterError) as info:
            pub.publish(Note(1))  # type: ignore[arg-type]
        assert str(info.value) == message
        with pytest.raises(BadParameterError) as info:
            pub.publish_many([Msg(0, 0), Note(1)])  # type: ignore[list-item]
        assert str(info.value) == message
        assert pub.publish(Msg(0, 7)).result(TIMEOUT) == Position(0, 0)
        pub.flush()
        assert stored(store, topic_name) == [7]

    def test_a_subclass_sample_is_accepted(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)

        class Sub(Msg):  # type: ignore[misc]
            pass

        sample = Sub.__new__(Sub)
        sample.key, sample.seq, sample.text = 0, 1, ""
        assert pub.publish(sample).result(TIMEOUT) == Position(0, 0)
        assert pub.publish_many([sample]).result(TIMEOUT) == [Position(0, 1)]

    def test_a_closed_publisher_refuses_and_close_is_idempotent(
        self, kw: dict[str, Any], topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), linger=LONG, **kw)
        assert pub.state is ClientState.OPEN
        assert not pub.closed
        with store_held(store):
            pub.publish(Msg(0, 0))
            queued = pub.publish(Msg(0, 1))  # lingers behind the first
        pub.close()  # flushes what is queued
        assert queued.result(TIMEOUT) == Position(0, 1)
        assert pub.state is ClientState.CLOSED
        assert pub.closed
        pub.close()
        message = f"the publisher of {topic_name!r} is closed"
        with pytest.raises(AlreadyClosedError) as info:
            pub.publish(Msg(0, 2))
        assert str(info.value) == message
        with pytest.raises(AlreadyClosedError) as info:
            pub.publish_many([Msg(0, 2)])
        assert str(info.value) == message
        assert stored(store, topic_name) == [0, 1]

    def test_with_closes(self, kw: dict[str, Any], topic_name: str) -> None:
        with ChannelPublisher(topic(topic_name), **kw) as pub:
            pass
        assert pub.closed


class TestBatches:
    def test_publish_many_fills_batches_to_batch_count(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """The first element goes at once; the rest fill batches of ``batch_count``."""
        pub = ChannelPublisher(topic(topic_name), batch_count=4, linger=LONG, **kw)
        opened.append(pub)
        positions = pub.publish_many([Msg(0, i) for i in range(10)]).result(TIMEOUT)
        assert positions == [Position(0, i) for i in range(10)]
        assert batches(store, topic_name) == [1, 4, 4, 1]
        assert stored(store, topic_name) == list(range(10))

    def test_publish_many_fills_batches_to_batch_bytes(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """A batch is full when its bytes reach ``batch_bytes`` exactly."""
        size = len(encoder_of(Msg)(Msg(0, 0)))
        pub = ChannelPublisher(topic(topic_name), batch_bytes=3 * size, linger=LONG, **kw)
        opened.append(pub)
        pub.publish_many([Msg(0, i) for i in range(8)]).result(TIMEOUT)
        assert batches(store, topic_name) == [1, 3, 3, 1]

    def test_publish_fills_batches_while_one_is_in_flight(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """Held by the store, publishes queue and a batch leaves when it holds ``batch_count``."""
        pub = ChannelPublisher(topic(topic_name), batch_count=3, linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            futures = [pub.publish(Msg(0, i)) for i in range(6)]
            assert pub.flow_control.backlog == 2  # [0] and [1, 2, 3]; [4, 5] lingers
            assert not futures[5].done()
        pub.flush()
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, i) for i in range(6)]
        assert batches(store, topic_name) == [1, 3, 2]

    def test_publish_fills_batches_to_batch_bytes_while_one_is_in_flight(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        size = len(encoder_of(Msg)(Msg(0, 0)))
        pub = ChannelPublisher(topic(topic_name), batch_bytes=2 * size, linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            futures = [pub.publish(Msg(0, i)) for i in range(4)]
            assert pub.flow_control.backlog == 2  # [0] and [1, 2]; [3] lingers
        pub.flush()
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, i) for i in range(4)]
        assert batches(store, topic_name) == [1, 2, 1]

    def test_publish_fills_a_batch_in_place_up_to_batch_bytes(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """Samples added to a queued batch count toward its bytes: with room for 3, the
        third fills it, whether it came through the fast path or not."""
        size = len(encoder_of(Msg)(Msg(0, 0)))
        pub = ChannelPublisher(topic(topic_name), batch_bytes=3 * size, linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            futures = [pub.publish(Msg(0, i)) for i in range(8)]
            assert pub.flow_control.backlog == 3  # [0], [1, 2, 3], [4, 5, 6]; [7] lingers
        pub.flush()
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, i) for i in range(8)]
        assert batches(store, topic_name) == [1, 3, 3, 1]

    def test_publish_many_under_a_short_linger_still_batches(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """publish_many queues its samples together: none counts as a sparse stream."""
        pub = ChannelPublisher(topic(topic_name), batch_count=4, linger=timedelta(seconds=2), **kw)
        opened.append(pub)
        pub.publish_many([Msg(0, i) for i in range(10)]).result(TIMEOUT)
        assert batches(store, topic_name) == [1, 4, 4, 1]

    def test_a_sparse_stream_goes_out_at_once_and_a_single_pause_lingers(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """A sample coming linger/4 or more after the previous publish, which came as long
        after its own predecessor, is sent at once with its channel's queued batch; after a
        single pause it lingers (the shorter of the last two gaps counts)."""
        pub = ChannelPublisher(topic(topic_name), linger=timedelta(seconds=3), **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # idle link: sent at once
            second = pub.publish(Msg(0, 1))  # right after, one in flight: lingers
            assert pub.flow_control.backlog == 1
            time.sleep(0.8)  # the input under test: a gap over linger/4 (0.75 s)
            third = pub.publish(Msg(0, 2))  # one pause only: lingers
            assert pub.flow_control.backlog == 1
            time.sleep(0.8)
            fourth = pub.publish(Msg(0, 3))  # two long gaps: sent at once, with 1 and 2
            assert pub.flow_control.backlog == 2
        futures = [first, second, third, fourth]
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, i) for i in range(4)]
        assert batches(store, topic_name) == [1, 3]

    def test_a_sparse_sample_with_the_window_full_lingers_without_blocking(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """publish() of a sparse sample never waits for the window: it queues the sample."""
        pub = ChannelPublisher(
            topic(topic_name), max_in_flight=1, linger=timedelta(seconds=3), **kw
        )
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # fills the window
            time.sleep(0.8)  # the input under test: a sparse gap (over linger/4)
            started = time.monotonic()
            second = pub.publish(Msg(0, 1))
            assert time.monotonic() - started < 2.0  # the store holds its writes for 5 s
            assert pub.flow_control.backlog == 1
            assert not second.done()
        assert [first.result(TIMEOUT), second.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]

    def test_no_linger_sends_every_batch_as_soon_as_it_can(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), linger=0, **kw)
        opened.append(pub)
        futures = [pub.publish(Msg(0, i)) for i in range(5)]
        assert pub.flow_control.drain_backlog(TIMEOUT)
        assert [f.result(TIMEOUT) for f in futures] == [Position(0, i) for i in range(5)]
        assert stored(store, topic_name) == list(range(5))

    def test_a_batch_goes_out_linger_after_its_first_sample(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), linger=timedelta(milliseconds=50), **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            second = pub.publish(Msg(0, 1))
            eventually(lambda: pub.flow_control.backlog == 2, timeout=5)  # no flush: linger
        assert [first.result(TIMEOUT), second.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]
        assert batches(store, topic_name) == [1, 1]

    def test_a_batch_started_while_another_lingers_goes_out_after_its_own_linger(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """A batch started while the linger thread already times an older one (and is not
        woken for it) still goes out, after its own linger, with no flush."""
        pub = ChannelPublisher(
            topic(topic_name, 2),
            order_by=OrderBy.round_robin(),
            linger=timedelta(milliseconds=200),
            **kw,
        )
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # channel 0, idle link: at once
            second = pub.publish(Msg(0, 1))  # channel 1: lingers, the linger thread times it
            time.sleep(0.05)  # the input under test: that thread is waiting for its linger
            third = pub.publish(Msg(0, 2))  # channel 0 again: a new batch, lingers
            eventually(lambda: pub.flow_control.backlog == 3, timeout=5)  # no flush: linger
        assert [f.result(TIMEOUT) for f in (first, second, third)] == [
            Position(0, 0),
            Position(1, 0),
            Position(0, 1),
        ]
        assert batches(store, topic_name, 0) == [1, 1]

    def test_unconfirmed_publishes_complete_at_once_and_are_stored(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), confirmed=False, batch_count=3, **kw)
        opened.append(pub)
        assert pub.publish(Msg(0, 0)).result(0) is None
        assert pub.publish_many([Msg(0, i) for i in range(1, 5)]).result(0) is None
        pub.flush()
        assert stored(store, topic_name) == [0, 1, 2, 3, 4]

    def test_publish_many_of_nothing_is_an_empty_list(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)
        assert pub.publish_many([]).result(TIMEOUT) == []

    def test_batches_of_several_channels_all_complete(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """Batches queued in several channels while held all reach the store once the link
        goes idle, without a flush (sent from the confirming thread or the linger thread)."""
        pub = ChannelPublisher(
            topic(topic_name, 3), order_by=OrderBy.round_robin(), linger=LONG, **kw
        )
        opened.append(pub)
        with store_held(store):
            futures = [pub.publish(Msg(0, i)) for i in range(9)]
        assert [f.result(TIMEOUT) for f in futures] == [Position(i % 3, i // 3) for i in range(9)]
        assert [stored(store, topic_name, c) for c in range(3)] == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]


class TestWindow:
    def test_a_full_window_times_out_a_full_batch_and_loses_nothing_queued(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(
            topic(topic_name),
            batch_count=1,
            max_in_flight=1,
            timeout=timedelta(milliseconds=200),
            **kw,
        )
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            assert pub.flow_control.backlog == 1
            assert pub.flow_control.is_backlogged
            with pytest.raises(DcpsTimeoutError) as info:
                pub.publish(Msg(0, 1))
            assert str(info.value) == (
                f"publish to {topic_name!r} timed out: 0.2 s with every in-flight batch "
                "unconfirmed (the store is falling behind)"
            )
            with pytest.raises(DcpsTimeoutError) as info:
                pub.flush()
            assert str(info.value) == (
                f"flushing {topic_name!r}: the store did not confirm within 0.2 s"
            )
        assert first.result(TIMEOUT) == Position(0, 0)
        assert pub.publish(Msg(0, 2)).result(TIMEOUT) == Position(0, 1)
        assert stored(store, topic_name) == [0, 2]

    def test_flush_times_out_waiting_for_a_slot(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), max_in_flight=1, linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            queued = pub.publish(Msg(0, 1))
            with pytest.raises(DcpsTimeoutError) as info:
                pub.flush(timedelta(milliseconds=100))
            assert str(info.value) == f"flushing {topic_name!r} timed out waiting for the store"
            assert not queued.done()
        assert [first.result(TIMEOUT), queued.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]

    def test_each_store_has_a_window_of_max_in_flight(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), max_in_flight=3, **kw)
        opened.append(pub)
        assert pub.flow_control.max_backlog == 3 * max(1, pub._client.store_count)

    def test_flow_control_flush_sends_queued_batches(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(
            topic(topic_name, 2), order_by=OrderBy.round_robin(), linger=LONG, **kw
        )
        opened.append(pub)
        with store_held(store):
            futures = [pub.publish(Msg(0, i)) for i in range(4)]  # [0] goes; [1, 3], [2] queue
            assert pub.flow_control.backlog == 1
            pub.flow_control.flush()
            assert pub.flow_control.backlog == 3
        assert [f.result(TIMEOUT) for f in futures] == [
            Position(0, 0),
            Position(1, 0),
            Position(0, 1),
            Position(1, 1),
        ]

    def test_flow_control_flush_with_a_full_window_sends_once_it_frees(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), max_in_flight=1, linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            queued = pub.publish(Msg(0, 1))
            pub.flow_control.flush()  # no slot: a helper thread waits for one
            assert pub.flow_control.backlog == 1
        assert [first.result(TIMEOUT), queued.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]

    def test_a_batch_unanswered_in_time_fails_its_futures_typed(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """The store answers after the request timed out: the future fails with a DcpsError
        (the outcome is unknown to the publisher: here the store did keep the element)."""
        pub = ChannelPublisher(topic(topic_name), timeout=timedelta(seconds=1), **kw)
        opened.append(pub)
        db = sqlite3.connect(store.log.path, timeout=1.0, isolation_level=None)
        try:
            db.execute("BEGIN IMMEDIATE")
            started = time.monotonic()
            future = pub.publish(Msg(0, 0))
            error = future.exception(TIMEOUT)
            took = time.monotonic() - started
        finally:
            db.execute("ROLLBACK")
            db.close()
        assert isinstance(error, DcpsTimeoutError), repr(error)
        assert str(error) == "the store did not answer in time"
        # the publisher's timeout is the request's (not a floor of 2 s, say)
        assert 1.0 <= took < 1.8, f"the batch failed after {took:.2f} s"
        with pytest.raises(DcpsError):
            future.result(0)
        assert not future.discarded
        assert pub.discarded_count == 0
        assert pub.publish(Msg(0, 1)).result(TIMEOUT) == Position(0, 1)
        assert stored(store, topic_name) == [0, 1]


class TestDiscarded:
    def test_a_topic_keeping_nothing_confirms_discards_and_counts_them(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name, retain=False), **kw)
        opened.append(pub)
        first = pub.publish(Msg(0, 0))
        first.result(TIMEOUT)
        assert first.discarded
        many = pub.publish_many([Msg(0, i) for i in range(1, 4)])
        many.result(TIMEOUT)
        pub.flush()
        assert pub.discarded_count == 4

    def test_a_stored_element_is_not_discarded(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)
        future = pub.publish(Msg(0, 0))
        future.result(TIMEOUT)
        assert not future.discarded
        assert pub.discarded_count == 0


def linger_cpu(pub: ChannelPublisher[Any]) -> float:
    """CPU seconds the publisher's linger thread has used so far."""
    return time.clock_gettime(time.pthread_getcpuclockid(pub._linger_thread.ident))  # type: ignore[arg-type]


class TestWakeUps:
    """Session 8: when queued batches go out, and what the publisher's threads cost meanwhile."""

    def test_a_confirmation_meeting_a_busy_publisher_neither_waits_nor_strands_the_queue(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """The link goes idle while another thread holds the publisher (a publish in
        progress): the confirming thread does not wait for it, and the queued batch still
        goes out at once when it is free (no flush, long before ``linger``)."""
        pub = ChannelPublisher(topic(topic_name), linger=LONG, **kw)
        opened.append(pub)
        confirmed = threading.Event()
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # idle link: sent at once
            queued = pub.publish(Msg(0, 1))  # lingers behind it
            (reply,) = pub._in_flight
            # runs on the confirming thread right after the publisher's own callback
            reply.add_done_callback(lambda _: confirmed.set())
            # take the publisher's lock as a publish() in progress would, once the linger
            # thread has taken in the queued batch (it clears its wake-up under that lock)
            # and waits out its linger
            eventually(lambda: not pub._wake.is_set(), timeout=5)
            pub._lock.acquire()
        try:
            assert confirmed.wait(TIMEOUT), "the confirming thread waited for the publisher"
            assert first.result(0) == Position(0, 0)
            assert not queued.done()
        finally:
            pub._lock.release()
        assert queued.result(TIMEOUT) == Position(0, 1)
        assert batches(store, topic_name) == [1, 1]

    def test_only_due_batches_go_out(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """When the oldest queued batch is due (``linger`` after its first sample), a
        younger one of another channel stays queued until its own ``linger``."""
        pub = ChannelPublisher(
            topic(topic_name, 2), order_by=OrderBy.round_robin(), linger=timedelta(seconds=1), **kw
        )
        opened.append(pub)
        with store_held(store):
            pub.publish(Msg(0, 0))  # channel 0, idle link: at once
            older = pub.publish(Msg(0, 1))  # channel 1: lingers
            time.sleep(0.3)  # the input under test: the next batch starts 0.3 s later
            started = time.monotonic()
            younger = pub.publish(Msg(0, 2))  # channel 0: a new batch, lingers
            eventually(lambda: pub.flow_control.backlog >= 2, timeout=5)  # the older is due
            if time.monotonic() - started < 0.9:  # well before the younger is due
                assert pub.flow_control.backlog == 2, "a batch went out before its linger"
            eventually(lambda: pub.flow_control.backlog == 3, timeout=5)
            assert not older.done()
            assert not younger.done()
        assert [older.result(TIMEOUT), younger.result(TIMEOUT)] == [Position(1, 0), Position(0, 1)]
        assert batches(store, topic_name, 0) == [1, 1]

    def test_a_waiting_linger_thread_uses_no_cpu(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """While a batch lingers, and then while it is due but the window is full, the
        linger thread sleeps until something changes: it neither spins nor polls."""
        pub = ChannelPublisher(
            topic(topic_name), max_in_flight=1, linger=timedelta(milliseconds=900), **kw
        )
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # fills the window
            queued = pub.publish(Msg(0, 1))  # lingers 0.9 s, then waits for the slot
            before = linger_cpu(pub)
            time.sleep(0.5)  # the measured interval: the batch lingers
            lingering = linger_cpu(pub) - before
            eventually(lambda: pub._starved, timeout=5)  # due, and no free slot
            before = linger_cpu(pub)
            time.sleep(0.5)  # the measured interval: the window stays full
            starved = linger_cpu(pub) - before
        assert lingering < 0.002, f"the linger thread used {lingering:.3f} s of CPU lingering"
        assert starved < 0.002, f"the linger thread used {starved:.3f} s of CPU waiting for a slot"
        assert [first.result(TIMEOUT), queued.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]

    def test_flush_waits_out_a_timeout_under_a_second(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """flush(0.9 s) waits for a confirmation that comes within it."""
        pub = ChannelPublisher(topic(topic_name), **kw)
        opened.append(pub)
        db = sqlite3.connect(
            store.log.path, timeout=1.0, isolation_level=None, check_same_thread=False
        )
        try:
            db.execute("BEGIN IMMEDIATE")
            future = pub.publish(Msg(0, 0))
            # the store's writes resume 0.1 s into the flush
            releaser = threading.Timer(0.1, db.execute, ["ROLLBACK"])
            releaser.start()
            pub.flush(timedelta(milliseconds=900))
            assert future.result(0) == Position(0, 0)
        finally:
            releaser.join()
            db.close()

    def test_flush_gives_up_on_a_slot_at_its_own_deadline(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """A flush of 0.1 s waiting for a free slot gives up after about 0.1 s, not later."""
        pub = ChannelPublisher(topic(topic_name), max_in_flight=1, linger=LONG, **kw)
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            queued = pub.publish(Msg(0, 1))
            started = time.monotonic()
            with pytest.raises(DcpsTimeoutError):
                pub.flush(timedelta(milliseconds=100))
            took = time.monotonic() - started
            assert took < 0.8, f"flush(0.1 s) gave up after {took:.2f} s"
        assert [first.result(TIMEOUT), queued.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]


class TestDefaults:
    def test_the_default_window_and_batch_count(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """By default 8 batches may await each store, and a batch holds up to 1024 samples."""
        pub = ChannelPublisher(topic(topic_name), linger=LONG, **kw)
        opened.append(pub)
        assert pub.flow_control.max_backlog == 8 * max(1, pub._client.store_count)
        pub.publish_many([Msg(0, i) for i in range(1100)]).result(TIMEOUT)
        assert batches(store, topic_name) == [1, 1024, 75]

    def test_a_sub_second_linger_still_sends_a_sparse_stream_at_once(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """With linger 0.9 s, a sample coming after two gaps of 0.25 s (over linger/4)
        goes out at once, with the queued ones, long before their linger."""
        pub = ChannelPublisher(topic(topic_name), linger=timedelta(milliseconds=900), **kw)
        opened.append(pub)
        with store_held(store):
            pub.publish(Msg(0, 0))  # idle link: sent at once
            pub.publish(Msg(0, 1))  # right after, one in flight: lingers
            time.sleep(0.25)  # the input under test: gaps over linger/4 (0.225 s)
            pub.publish(Msg(0, 2))  # one pause only: lingers
            time.sleep(0.25)
            pub.publish(Msg(0, 3))  # two long gaps: sent at once, with 1 and 2
            assert pub.flow_control.backlog == 2
        pub.flush()
        assert batches(store, topic_name) == [1, 3]


class TestPartialConfirmations:
    """One in-flight batch answered while another still waits: the store holds its writes
    and the publisher's request timeout (2 s) answers the first batch sent, 1 s before
    the second."""

    def test_flow_control_flush_sends_as_soon_as_one_slot_frees(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """flow_control.flush() with the window full sends the queued batch as soon as one
        slot frees, while another batch is still in flight (not once all are answered)."""
        pub = ChannelPublisher(
            topic(topic_name), max_in_flight=2, linger=LONG, timeout=timedelta(seconds=2), **kw
        )
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # idle link: sent at once
            time.sleep(1.0)  # the input under test: the second batch is sent 1 s later
            second = pub.publish(Msg(0, 1))
            pub.flow_control.flush()  # a slot is free: sent now
            assert pub.flow_control.backlog == 2
            third = pub.publish(Msg(0, 2))  # lingers
            pub.flow_control.flush()  # the window is full: sent when a slot frees
            assert isinstance(first.exception(TIMEOUT), DcpsTimeoutError)
            assert not second.done()
            eventually(lambda: pub.flow_control.backlog == 2, timeout=0.6, what="the send")
        assert third.result(TIMEOUT) == Position(0, 2)
        pub.flush()  # the second is answered too (in time or not): the store kept all three
        assert stored(store, topic_name) == [0, 1, 2]

    def test_a_queued_batch_lingers_while_another_is_in_flight(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """A batch answered while another is still in flight does not send the queued
        batch: it keeps growing (the link is not idle) until the last one is answered."""
        pub = ChannelPublisher(
            topic(topic_name), max_in_flight=2, linger=LONG, timeout=timedelta(seconds=2), **kw
        )
        opened.append(pub)
        answered = threading.Event()
        with store_held(store):
            first = pub.publish(Msg(0, 0))  # idle link: sent at once
            (reply,) = pub._in_flight
            # runs on the confirming thread right after the publisher's own callback
            reply.add_done_callback(lambda _: answered.set())
            time.sleep(1.0)  # the input under test: the second batch is sent 1 s later
            pub.publish(Msg(0, 1))
            pub.flow_control.flush()  # a slot is free: sent now
            pub.publish(Msg(0, 2))  # lingers
            assert answered.wait(TIMEOUT)  # the first batch timed out; the second waits
            assert isinstance(first.exception(0), DcpsTimeoutError)
            pub.publish(Msg(0, 3))  # joins the queued batch
            assert pub.flow_control.backlog == 1
        pub.flush()
        assert stored(store, topic_name) == [0, 1, 2, 3]
        assert batches(store, topic_name) == [1, 1, 2]


class TestGivingUp:
    def test_a_background_flush_that_times_out_leaves_the_batch_queued(
        self, kw: dict[str, Any], opened: list, topic_name: str, store: Store
    ) -> None:
        """flow_control.flush() with the window full past the publisher's timeout gives up
        quietly (no error escapes its thread); the batch stays queued and goes out later."""
        pub = ChannelPublisher(
            topic(topic_name),
            max_in_flight=1,
            linger=LONG,
            timeout=timedelta(milliseconds=300),
            **kw,
        )
        opened.append(pub)
        with store_held(store):
            first = pub.publish(Msg(0, 0))
            queued = pub.publish(Msg(0, 1))
            pub.flow_control.flush()  # no slot: a helper thread waits 0.3 s for one
            helper = pub._flusher
            assert helper is not None
            # named in thread dumps; a daemon, so it never holds up the interpreter's exit
            assert helper.name == "dcps-publisher-flush"
            assert helper.daemon
            helper.join(TIMEOUT)
            assert not helper.is_alive()
            assert not queued.done()
            assert pub.flow_control.backlog == 1
        assert [first.result(TIMEOUT), queued.result(TIMEOUT)] == [Position(0, 0), Position(0, 1)]

    def test_the_linger_thread_is_a_named_daemon(self, kw: dict[str, Any], topic_name: str) -> None:
        """The publisher's linger thread shows in thread dumps by name, never holds up the
        interpreter's exit (a daemon), and ends with close()."""
        pub = ChannelPublisher(topic(topic_name), **kw)
        thread = pub._linger_thread
        try:
            assert thread.name == "dcps-publisher-linger"
            assert thread.daemon
            assert thread in threading.enumerate()
        finally:
            pub.close()
        assert not thread.is_alive()

    def test_a_closing_publisher_says_so_and_refuses_samples(
        self, kw: dict[str, Any], topic_name: str, store: Store
    ) -> None:
        """While close() waits for the store, the publisher is CLOSING: it refuses new
        samples, and is CLOSED once the store answered."""
        pub = ChannelPublisher(topic(topic_name), **kw)
        with store_held(store):
            future = pub.publish(Msg(0, 0))
            closer = threading.Thread(target=pub.close)
            closer.start()
            eventually(lambda: pub.state is ClientState.CLOSING, timeout=5)
            assert pub.closed
            with pytest.raises(AlreadyClosedError):
                pub.publish(Msg(0, 1))
        closer.join(TIMEOUT)
        assert pub.state is ClientState.CLOSED
        assert future.result(0) == Position(0, 0)
        assert stored(store, topic_name) == [0]


@pytest.mark.parametrize(
    ("fragment_size", "batch_bytes"),
    [
        (None, 256 << 10),  # Cyclone's 1,344 (no dcps network configuration)
        (1344, 256 << 10),
        (8850, 256 << 10),  # jumbo frames: ~30 datagrams per 256 KiB already
        ((32 << 10) - 1, 256 << 10),
        (32 << 10, 1 << 20),
        (60000, 1 << 20),  # dcps's loopback default
    ],
)
def test_default_batch_bytes_follows_the_fragment_size(
    fragment_size: int | None, batch_bytes: int
) -> None:
    assert default_batch_bytes(fragment_size) == batch_bytes


class TestBatchBytesDefault:
    """The default batch size follows the domain's fragment size (issue 19): with Cyclone's
    1,344-byte fragments a 1 MiB batch is 781 datagrams and halved the rate of 4 KiB and
    64 KiB elements on loopback; with dcps's 60,000-byte ones it is 18 and raised it."""

    def test_the_default_is_the_domains_and_a_given_size_wins(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        with ChannelPublisher(topic(topic_name), **kw) as pub:
            assert pub.batch_bytes == BATCH_BYTES  # the tests run on Cyclone's fragments
        with ChannelPublisher(
            topic(topic_name), batch_bytes=BATCH_BYTES_LARGE_FRAGMENTS, **kw
        ) as pub:
            assert pub.batch_bytes == BATCH_BYTES_LARGE_FRAGMENTS

    def test_on_a_domain_with_large_fragments_batches_are_1_mib(
        self, tmp_path: Any, worker_id: str, topic_name: str
    ) -> None:
        """A store and a publisher on a domain dcps configured for loopback (60,000-byte
        fragments): the publisher's default is 1 MiB."""
        domain = 100 + worker_domain(worker_id) % 50  # test_endpoint_fragments.py's range
        loopback = NetworkConfig(interfaces=["lo"])
        kw: dict[str, Any] = {"domain_id": domain, "namespace": "ns_large_fragments"}
        with (
            Store(tmp_path / "store", sync=SyncMode.NORMAL, network=loopback, **kw),
            ChannelPublisher(topic(topic_name), network=loopback, **kw) as pub,
        ):
            assert pub.batch_bytes == BATCH_BYTES_LARGE_FRAGMENTS
        gc.collect()  # the domain goes with its last participant

    def test_a_batch_size_below_one_byte_is_refused(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        with pytest.raises(BadParameterError, match="batch_bytes"):
            ChannelPublisher(topic(topic_name), batch_bytes=0, **kw)
