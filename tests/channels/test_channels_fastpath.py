"""The channel layer's batched hot path: publish futures, publish_many, batch decoding."""

from __future__ import annotations

import contextlib
import pickle
import threading
from collections.abc import Iterator
from concurrent.futures import Future, wait
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

import idl
from dcps import BadParameterError, DcpsError
from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    OrderBy,
    Position,
)
from dcps.channels._client import StoreClient
from dcps.store import Store
from dcps.wire._transport import Endpoint
from tests.support.peers.channels_types import Msg, receive_n, wait_until

TIMEOUT = 10.0


class Reading(idl.Struct, typename="dcps_test::fastpath::Reading"):
    """A fixed-size final struct: decoded a whole batch at a time."""

    sensor: idl.key[idl.int32]
    seq: idl.int64
    value: idl.float32
    ok: bool
    grid: idl.array[idl.array[idl.int16, 3], 2]


class Note(idl.Struct, typename="dcps_test::fastpath::Note"):
    """A variable-size final struct: decoded element by element by the compiled codec."""

    sensor: idl.key[idl.int32]
    seq: idl.int64
    text: idl.string


class Impostor(idl.Struct, typename="dcps_test::fastpath::Reading"):
    """Claims Reading's type name with a layout too short to decode as one."""

    sensor: idl.key[idl.int32]


def reading(i: int) -> Reading:
    grid = np.arange(6, dtype=np.int16).reshape(2, 3) + i
    return Reading(i % 5, i, i / 4, i % 2 == 0, grid)


class Opened:
    """Opens publishers/subscribers on the test's store and closes them afterwards."""

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


@pytest.fixture
def dds(store: Store, domain_id: int) -> Iterator[Opened]:
    """A factory of publishers and subscribers on the test's store."""
    opened = Opened(store, domain_id)
    try:
        yield opened
    finally:
        for entity in reversed(opened.entities):
            entity.close()


class TestPublishFutures:
    def test_futures_complete_with_consecutive_positions(
        self, dds: Opened, topic_name: str
    ) -> None:
        """Each publish future is a Future that completes with its element's position."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=3)
        pub = dds.pub(topic, order_by=OrderBy.fixed(1), batch_count=4)
        futures = [pub.publish(Msg(0, i)) for i in range(10)]
        pub.flush()
        assert all(isinstance(f, Future) and f.done() for f in futures)
        assert [f.result(TIMEOUT) for f in futures] == [Position(1, i) for i in range(10)]
        assert all(f.exception() is None and not f.cancelled() for f in futures)

    def test_result_waits_for_the_batch_to_be_confirmed(self, dds: Opened, topic_name: str) -> None:
        """result() blocks until the store confirmed the batch, which linger sends."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        pub = dds.pub(topic, linger=timedelta(milliseconds=200))
        first = pub.publish(Msg(0, 0))
        second = pub.publish(Msg(0, 1))
        assert not second.done()
        assert second.result(TIMEOUT) == Position(0, 1)
        assert first.result(0) == Position(0, 0)

    def test_futures_work_with_wait_and_callbacks(self, dds: Opened, topic_name: str) -> None:
        """concurrent.futures.wait and done callbacks see publish futures complete."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2)
        pub = dds.pub(topic, linger=timedelta(milliseconds=50))
        seen: list[Any] = []
        futures = [pub.publish(Msg(k, 0)) for k in range(6)]
        futures[0].add_done_callback(lambda f: seen.append(f.result()))
        done, not_done = wait(futures, timeout=TIMEOUT)
        assert len(done) == 6
        assert not not_done
        futures[1].add_done_callback(lambda f: seen.append(f.result()))  # already done: at once
        assert seen == [futures[0].result(), futures[1].result()]
        assert len({f.result() for f in futures}) == 6

    def test_a_cancelled_future_does_not_stop_the_others(
        self, dds: Opened, topic_name: str
    ) -> None:
        """Cancelling one element's future leaves it cancelled; its batch mates still complete."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        pub = dds.pub(topic, linger=timedelta(seconds=5))
        futures = [pub.publish(Msg(0, i)) for i in range(3)]
        assert futures[1].cancel()
        pub.flush()
        assert futures[1].cancelled()
        assert [futures[0].result(TIMEOUT), futures[2].result(TIMEOUT)] == [
            Position(0, 0),
            Position(0, 2),
        ]

    def test_futures_fail_when_the_store_is_gone(
        self, store: Store, dds: Opened, topic_name: str
    ) -> None:
        """Without a store the batch's futures fail with a DcpsError instead of hanging."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        pub = dds.pub(topic, timeout=timedelta(seconds=1), linger=timedelta(seconds=30))
        futures = [pub.publish(Msg(0, i)) for i in range(3)]
        store.close()
        # flush raises DcpsTimeoutError, or returns if the requests expired just before
        with contextlib.suppress(DcpsError):
            pub.flush()
        for f in futures:
            assert isinstance(f.exception(TIMEOUT), DcpsError)
            with pytest.raises(DcpsError):
                f.result(0)

    def test_unconfirmed_futures_complete_at_once_with_none(
        self, dds: Opened, topic_name: str
    ) -> None:
        """Unconfirmed publishing returns completed futures holding None."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        pub = dds.pub(topic, confirmed=False)
        assert pub.publish(Msg(0, 0)).result(0) is None


class TestPublishMany:
    def test_positions_in_the_order_given_match_what_subscribers_receive(
        self, dds: Opened, topic_name: str
    ) -> None:
        """publish_many's future lists each sample's position, as the subscriber receives it."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=5)
        sub = dds.sub(topic)
        pub = dds.pub(topic, batch_count=16)
        samples = [Msg(i % 7, i) for i in range(300)]
        positions = pub.publish_many(samples).result(TIMEOUT)
        assert positions is not None
        assert len(set(positions)) == 300
        got = receive_n(sub, 300)
        where = {e.value.seq: e.position for e in got}
        assert [where[i] for i in range(300)] == positions
        assert pub.publish_many([]).result(0) == []

    def test_a_sample_of_the_wrong_type_queues_nothing(self, dds: Opened, topic_name: str) -> None:
        """One sample of another type refuses the whole call before anything is sent."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        sub = dds.sub(topic, complete_on_empty=True)
        pub = dds.pub(topic)
        with pytest.raises(BadParameterError, match="Msg"):
            pub.publish_many([Msg(0, 0), reading(1)])
        pub.flush()
        assert sub.tails() == {0: Position(0, -1)}

    def test_unconfirmed_completes_at_once_and_delivers(self, dds: Opened, topic_name: str) -> None:
        """Unconfirmed publish_many completes with None at once; the samples still arrive."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2)
        sub = dds.sub(topic)
        pub = dds.pub(topic, confirmed=False)
        assert pub.publish_many(Msg(i, i) for i in range(50)).result(0) is None
        pub.flush()
        assert sorted(e.value.seq for e in receive_n(sub, 50)) == list(range(50))


class TestBatchDecoding:
    def test_fixed_size_values_arrive_equal_and_typed(self, dds: Opened, topic_name: str) -> None:
        """Fixed-size samples decoded per batch equal what was sent, field types included."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic)
        pub = dds.pub(topic)
        sent = [reading(i) for i in range(200)]
        pub.publish_many(sent).result(TIMEOUT)
        got = [e.value for e in receive_n(sub, 200)]
        assert got == sent
        first = got[0]
        assert type(first) is Reading
        assert type(first.sensor) is int
        assert type(first.value) is float
        assert type(first.ok) is bool
        assert first.grid.dtype == np.int16
        assert first.grid.shape == (2, 3)

    def test_received_arrays_are_independent(self, dds: Opened, topic_name: str) -> None:
        """Changing one received element's array does not change another's."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic)
        pub = dds.pub(topic)
        pub.publish_many([reading(0)] * 20).result(TIMEOUT)
        got = [e.value for e in receive_n(sub, 20)]
        got[0].grid[0, 0] = 999
        assert got[1].grid[0, 0] == 0

    def test_variable_size_values_arrive_equal(self, dds: Opened, topic_name: str) -> None:
        """Samples with strings (no fixed layout) are decoded one by one, equal to those sent."""
        topic = ChannelledTopic(topic_name, Note, channel_count=1)
        sub = dds.sub(topic)
        pub = dds.pub(topic)
        sent = [Note(i, i, "é" * (i % 9)) for i in range(100)]
        pub.publish_many(sent).result(TIMEOUT)
        assert [e.value for e in receive_n(sub, 100)] == sent

    def test_filter_and_converter_apply_to_batch_decoded_values(
        self, dds: Opened, topic_name: str
    ) -> None:
        """Filters and converters see each batch-decoded value."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic, filter=lambda r: r.seq % 3 == 0, converter=lambda r: r.seq)
        pub = dds.pub(topic)
        pub.publish_many([reading(i) for i in range(90)]).result(TIMEOUT)
        got = receive_n(sub, 30)
        assert [e.value for e in got] == list(range(0, 90, 3))
        assert [e.position.offset for e in got] == list(range(0, 90, 3))

    def test_undecodable_elements_are_skipped_when_asked(
        self, dds: Opened, topic_name: str
    ) -> None:
        """With on_undecodable="skip" bad elements are skipped; the others arrive in order."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)
        sub = dds.sub(topic, on_undecodable="skip")
        good = dds.pub(topic, batch_count=1000)
        good.publish_many([reading(i) for i in range(10)]).result(TIMEOUT)
        # the store refuses a ChannelPublisher of another type (type identity), so the
        # impostor's bytes go in through a raw store client, as a foreign program's would
        raw = [Impostor(1).serialize()] * 3
        endpoint = Endpoint(dds.kw["domain_id"], dds.kw["namespace"])
        client = StoreClient(endpoint)
        try:
            client.connect(TIMEOUT)
            done = client.publish_async(topic_name, 0, [len(b) for b in raw], b"".join(raw))
            done.result(TIMEOUT)
        finally:
            client.close()
            endpoint.close()
        good.publish_many([reading(i) for i in range(10, 20)]).result(TIMEOUT)
        got = receive_n(sub, 20)
        assert [e.value.seq for e in got] == list(range(20))
        assert [e.position.offset for e in got] == list(range(10)) + list(range(13, 23))

    def test_a_failing_filter_skips_only_its_element(self, dds: Opened, topic_name: str) -> None:
        """A filter raising on one element skips (and logs) that element; the others arrive."""
        topic = ChannelledTopic(topic_name, Reading, channel_count=1)

        def accept(r: Reading) -> bool:
            if r.seq == 5:
                raise RuntimeError("bad filter")
            return True

        sub = dds.sub(topic, filter=accept)
        dds.pub(topic).publish_many([reading(i) for i in range(20)]).result(TIMEOUT)
        got = receive_n(sub, 19)
        assert [e.value.seq for e in got] == [i for i in range(20) if i != 5]


class TestCatchUp:
    def test_a_late_first_receive_gets_every_element_once_in_order(
        self, dds: Opened, topic_name: str
    ) -> None:
        """Hundreds of live batches before the first receive: all arrive once, in order."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        sub = dds.sub(topic)
        pub = dds.pub(topic, batch_count=5)
        publisher = threading.Thread(
            target=lambda: pub.publish_many(Msg(0, i) for i in range(2000)).result(TIMEOUT)
        )
        publisher.start()
        publisher.join()
        got = receive_n(sub, 2000)
        assert [e.position.offset for e in got] == list(range(2000))
        assert [e.value.seq for e in got] == list(range(2000))


class TestAnonymousCommits:
    def test_receiving_one_at_a_time_never_stalls_and_commits_the_last(
        self, dds: Opened, topic_name: str
    ) -> None:
        """Single receives complete one after another; the last delivered position is committed."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        sub = dds.sub(topic)
        dds.pub(topic).publish_many([Msg(0, i) for i in range(300)]).result(TIMEOUT)
        got = [sub.receive().result(TIMEOUT) for _ in range(300)]
        assert [e.value.seq for e in got if e is not None] == list(range(300))
        wait_until(lambda: sub.last_committed(0) == Position(0, 299))


class TestPosition:
    def test_positions_order_hash_pickle_and_json(self) -> None:
        """Positions order by channel then offset, hash, pickle and round-trip through JSON."""
        a, b = Position(0, 5), Position(1, -1)
        assert a < b
        assert max(b, a) == b
        assert len({a, Position(0, 5)}) == 1
        assert pickle.loads(pickle.dumps(a)) == a
        assert type(pickle.loads(pickle.dumps(a))) is Position
        assert Position.from_json(a.to_json()) == a
        assert (a.channel, a.offset, str(a), repr(a)) == (
            0,
            5,
            "0:5",
            "Position(channel=0, offset=5)",
        )

    def test_bad_positions_are_refused(self) -> None:
        """Negative channels, offsets below -1 and non-integers raise BadParameterError."""
        for channel, offset in ((-1, 0), (0, -2), (True, 0), (0, 1.5)):
            with pytest.raises(BadParameterError):
                Position(channel, offset)  # type: ignore[arg-type]

    def test_positions_are_immutable(self) -> None:
        """A position's fields cannot be reassigned."""
        position = Position(0, 1)
        with pytest.raises(AttributeError):
            position.channel = 2  # type: ignore[misc]
