"""The reader's side of the lifecycle, through Cyclone in one process (issue 20: mutation
testing of ``dcps/_reader.py``): which samples read/take return for each state mask,
how READ and NOT_NEW follow an access, instance by instance access, ``max_samples``,
query conditions' order, and autopurge applied before each access, on plain and on
SubscriptionKeys readers.

One participant serves the module; each test has its own topic. A writer in the same
participant writes reliably and waits for the reader's acknowledgement, so every sample
is in the reader when the test reads: no waiting on clocks.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

import dcps
import qos
from tests.support.embedded_store import worker_domain
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Reading

S, V, I = dcps.SampleState, dcps.ViewState, dcps.InstanceState  # noqa: E741
RELIABLE = {"reliable": True, "keep_all": True}


@pytest.fixture(scope="module")
def participant(worker_id: str) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(worker_domain(worker_id)) as p:
        yield p


class World:
    """A topic with one reader and one writer of it, matched."""

    def __init__(
        self, participant: dcps.DomainParticipant, name: str, reader: qos.DataReaderQos
    ) -> None:
        # a SubscriptionKeys reader's instances are disposed only by write_dispose
        self.keyed = reader[qos.SubscriptionKeys].use_key_list
        self.topic = dcps.Topic(participant, name, Reading)
        self.reader: dcps.DataReader[Reading] = dcps.DataReader(participant, self.topic, qos=reader)
        self.writer = dcps.DataWriter(
            participant,
            self.topic,
            qos=writer_qos({**RELIABLE, "keep_instances": True}).with_(
                qos.WriterDataLifecycle(autodispose_unregistered_instances=False)
            ),
        )
        self.writer.wait_for_readers()

    def write(self, *readings: tuple[int, float]) -> None:
        for sensor, value in readings:
            self.writer.write(Reading(sensor, value, ""))
        self.writer.wait_for_acknowledgments(10)

    def dispose(self, sensor: int) -> None:
        if self.keyed:
            self.writer.write_dispose(Reading(sensor, -1.0, ""))
        else:
            self.writer.dispose(Reading(sensor, 0.0, ""))
        self.writer.wait_for_acknowledgments(10)

    def close(self) -> None:
        self.writer.close()
        self.reader.close()
        self.topic.close()


@pytest.fixture
def world(participant: dcps.DomainParticipant, topic_name: str) -> Iterator[Any]:
    """A function making the test's World with the reader QoS asked for."""
    made: list[World] = []

    def make(spec: dict[str, Any] | None = None, *extra: Any) -> World:
        base = reader_qos(spec or RELIABLE)
        if extra:
            base = base.with_(*extra)
        w = World(participant, f"{topic_name}_{len(made)}", base)
        made.append(w)
        return w

    yield make
    for w in made:
        w.close()


def values(samples: list[dcps.Sample[Reading]]) -> list[float]:
    """The values written, without dispose markers (invalid samples, and -1.0: the value
    a SubscriptionKeys test disposes with)."""
    return [s.data.value for s in samples if s.valid_data and s.data.value != -1.0]


def keyed() -> qos.SubscriptionKeys:
    return qos.SubscriptionKeys.of("sensor")


class TestMaxSamples:
    @pytest.mark.parametrize("bad", [0, -2, 1.5, "3", None])
    def test_a_bad_count_is_refused(self, world: Any, bad: Any) -> None:
        reader = world().reader
        message = f"max_samples must be a positive count or LENGTH_UNLIMITED (-1), got {bad!r}"
        with pytest.raises(dcps.BadParameterError) as caught:
            reader.read(bad)
        assert str(caught.value) == message
        with pytest.raises(dcps.BadParameterError) as caught:
            reader.take(bad)
        assert str(caught.value) == message
        with pytest.raises(dcps.BadParameterError) as caught:
            reader.read_next_instance(None, bad)
        assert str(caught.value) == message

    @pytest.mark.parametrize("keys", [False, True])
    def test_a_count_caps_the_result(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0), (1, 2.0), (1, 3.0))
        assert values(w.reader.read(1)) == [1.0]
        assert values(w.reader.read(2)) == [1.0, 2.0]
        assert values(w.reader.read(dcps.LENGTH_UNLIMITED)) == [1.0, 2.0, 3.0]
        assert values(w.reader.take(2)) == [1.0, 2.0]
        assert values(w.reader.read()) == [3.0]
        assert dcps.LENGTH_UNLIMITED == -1


class TestStates:
    @pytest.mark.parametrize("keys", [False, True])
    def test_read_marks_read_and_not_new(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0))
        first = w.reader.read()
        assert [(s.info.sample_state, s.info.view_state) for s in first] == [(S.NOT_READ, V.NEW)]
        assert values(w.reader.read(sample_states=S.NOT_READ)) == []
        assert values(w.reader.read(view_states=V.NEW)) == []
        w.write((1, 2.0))
        again = w.reader.read()
        assert [(s.info.sample_state, s.info.view_state) for s in again] == [
            (S.READ, V.NOT_NEW),
            (S.NOT_READ, V.NOT_NEW),
        ]
        assert values(w.reader.take(sample_states=S.NOT_READ)) == []  # all read by now
        assert values(w.reader.read(sample_states=S.READ, view_states=V.NOT_NEW)) == [1.0, 2.0]

    @pytest.mark.parametrize("keys", [False, True])
    def test_instance_states_select(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0), (2, 2.0))
        w.dispose(2)
        assert values(w.reader.read(instance_states=I.ALIVE)) == [1.0]
        assert values(w.reader.read(instance_states=I.NOT_ALIVE_DISPOSED)) == [2.0]
        assert values(w.reader.read(instance_states=I.NOT_ALIVE_NO_WRITERS)) == []
        assert values(w.reader.take(instance_states=I.NOT_ALIVE)) == [2.0]
        assert values(w.reader.read()) == [1.0]

    def test_a_bad_mask_is_refused(self, world: Any) -> None:
        reader = world().reader
        with pytest.raises(dcps.BadParameterError, match="view_states must be a non-empty"):
            reader.read(view_states=0)  # type: ignore[arg-type]
        with pytest.raises(dcps.BadParameterError, match="instance_states must be a non-empty"):
            reader.take_next_instance(instance_states=0)  # type: ignore[arg-type]


class TestInstances:
    @pytest.mark.parametrize("keys", [False, True])
    def test_one_instance_by_handle(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0), (2, 2.0), (1, 1.5))
        handle = w.reader.lookup_instance(Reading(2, 0.0, ""))
        assert handle is not None
        assert values(w.reader.read(instance=handle)) == [2.0]
        assert values(w.reader.take(instance=handle)) == [2.0]
        assert sorted(values(w.reader.read())) == [1.0, 1.5]

    def test_an_unknown_handle_is_refused_by_number(self, world: Any) -> None:
        w = world()
        w.write((1, 1.0))
        with pytest.raises(dcps.BadParameterError) as caught:
            w.reader.read(instance=123456789)
        assert str(caught.value) == (
            f"DataReader({w.topic.name!r}) has no instance with handle 123456789"
        )

    @pytest.mark.parametrize("keys", [False, True])
    def test_next_instance_walks_the_handles_in_order(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0), (2, 2.0), (3, 3.0), (2, 2.5))
        handles = sorted(
            h for h in (w.reader.lookup_instance(Reading(s, 0.0, "")) for s in (1, 2, 3)) if h
        )
        assert len(handles) == 3
        seen = []
        previous = None
        for _ in range(4):  # bounded: a walk that never advances fails, it does not hang
            batch = w.reader.read_next_instance(previous)
            if not batch:
                break
            previous = batch[0].info.instance_handle
            seen.append((previous, values(batch)))
        assert [h for h, _ in seen] == handles
        by_sensor = sorted(vs for _, vs in seen)
        assert by_sensor == [[1.0], [2.0, 2.5], [3.0]]
        # from the first handle on: the second and third
        after_first = w.reader.read_next_instance(handles[0])
        assert after_first[0].info.instance_handle == handles[1]
        assert w.reader.read_next_instance(handles[2]) == []
        assert len(w.reader.read_next_instance(None, 1)) == 1
        # the iterator yields the same, then taking empties the reader
        walked = [b for b, _ in zip(w.reader.instances(), range(4), strict=False)]
        assert [b[0].info.instance_handle for b in walked] == handles
        taken = [b for b, _ in zip(w.reader.instances(take=True), range(4), strict=False)]
        assert [len(b) for b in taken] == [len(vs) for _, vs in seen]
        assert w.reader.read() == []

    @pytest.mark.parametrize("keys", [False, True])
    def test_next_instance_honours_the_states(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0), (2, 2.0))
        w.dispose(1)
        alive = w.reader.take_next_instance(instance_states=I.ALIVE)
        assert values(alive) == [2.0]
        assert values(w.reader.read_next_instance(instance_states=I.ALIVE)) == []
        assert values(w.reader.read_next_instance(sample_states=S.NOT_READ)) == [1.0]
        assert [b[0].info.instance_state for b in w.reader.instances()] == [I.NOT_ALIVE_DISPOSED]
        assert list(w.reader.instances(view_states=V.NEW, sample_states=S.NOT_READ)) == []


class TestConditions:
    @pytest.mark.parametrize("keys", [False, True])
    def test_a_query_orders_and_filters(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 3.0), (2, 1.0), (3, 2.0), (4, 9.0))
        query = dcps.QueryCondition(w.reader, "value < 5 ORDER BY value")
        assert values(w.reader.read(condition=query)) == [1.0, 2.0, 3.0]
        unordered = dcps.QueryCondition(w.reader, "value < 5")
        assert sorted(values(w.reader.take(condition=unordered))) == [1.0, 2.0, 3.0]
        assert values(w.reader.read()) == [9.0]

    @pytest.mark.parametrize("keys", [False, True])
    def test_a_read_condition_applies_its_mask(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.write((1, 1.0))
        w.reader.read()
        w.write((1, 2.0))
        fresh = dcps.ReadCondition(w.reader, sample_states=S.NOT_READ)
        # the condition's mask wins over the call's (which would select READ)
        assert values(w.reader.read(sample_states=S.READ, condition=fresh)) == [2.0]

    def test_another_readers_condition_is_refused(self, world: Any) -> None:
        a, b = world(), world()
        condition = dcps.ReadCondition(b.reader)
        with pytest.raises(dcps.BadParameterError) as caught:
            a.reader.read(condition=condition)
        assert str(caught.value) == "the condition belongs to another reader"


def purging(delay: float) -> qos.ReaderDataLifecycle:
    return qos.ReaderDataLifecycle(
        autopurge_disposed_samples_delay=timedelta(seconds=delay),
    )


class TestAutopurge:
    @pytest.mark.parametrize("keys", [False, True])
    def test_a_disposed_instance_is_purged_before_the_access(self, world: Any, keys: bool) -> None:
        extra = (purging(0), keyed()) if keys else (purging(0),)
        w = world(None, *extra)
        w.write((1, 1.0), (2, 2.0))
        w.dispose(2)
        # the delay is zero: the access itself finds the instance due and drops it
        assert values(w.reader.read()) == [1.0]
        assert [s.info.instance_state for s in w.reader.read()] == [I.ALIVE]

    @pytest.mark.parametrize("keys", [False, True])
    def test_next_instance_purges_first(self, world: Any, keys: bool) -> None:
        extra = (purging(0), keyed()) if keys else (purging(0),)
        w = world(None, *extra)
        w.write((1, 1.0), (2, 2.0))
        w.dispose(1)
        assert values(w.reader.read_next_instance()) == [2.0]

    @pytest.mark.parametrize("keys", [False, True])
    def test_a_long_delay_keeps_the_disposed_instance(self, world: Any, keys: bool) -> None:
        extra = (purging(3600), keyed()) if keys else (purging(3600),)
        w = world(None, *extra)
        w.write((1, 1.0), (2, 2.0))
        w.dispose(2)
        states = {s.data.sensor: s.info.instance_state for s in w.reader.read()}
        assert states == {1: I.ALIVE, 2: I.NOT_ALIVE_DISPOSED}


class TestSampleInfo:
    @pytest.mark.parametrize("keys", [False, True])
    def test_source_timestamp_and_writer(self, world: Any, keys: bool) -> None:
        w = world(None, keyed()) if keys else world()
        w.writer.write(Reading(1, 1.0, ""), timestamp=1_700_000_000_123_456_000)
        w.writer.wait_for_acknowledgments(10)
        (sample,) = w.reader.read()
        assert sample.info.source_timestamp_ns == 1_700_000_000_123_456_000
        assert sample.info.publication_handle == w.reader.matched_publications[0]
        assert sample.info.instance_handle == w.reader.lookup_instance(Reading(1, 0.0, ""))

    @pytest.mark.parametrize("keys", [False, True])
    def test_more_samples_than_one_drain_moves(self, world: Any, keys: bool) -> None:
        """A SubscriptionKeys reader drains Cyclone in chunks of 256: all arrive."""
        w = world(None, keyed()) if keys else world()
        w.write(*((s, float(s)) for s in range(300)))
        assert sorted(values(w.reader.read())) == [float(s) for s in range(300)]


class TestDataAvailable:
    @pytest.mark.parametrize("keys", [False, True])
    def test_data_available_comes_with_data_and_goes_with_the_access(
        self, participant: dcps.DomainParticipant, world: Any, keys: bool
    ) -> None:
        """On a reader where dcps hears every arrival itself (autopurge, or its own keys)."""
        extra = (purging(3600), keyed()) if keys else (purging(3600),)
        w = world(None, *extra)
        available = dcps.StatusCondition(w.reader, dcps.StatusKind.DATA_AVAILABLE)
        ws = dcps.WaitSet(participant)
        try:
            ws.attach(available)
            assert not available.triggered  # nothing arrived yet
            w.write((1, 1.0))
            assert ws.wait(10) == [available]
            assert values(w.reader.read()) == [1.0]
            assert not available.triggered
            w.reader.lookup_instance(Reading(1, 0.0, ""))  # drains nothing new
            assert not available.triggered
            with pytest.raises(dcps.DcpsTimeoutError):
                ws.wait(0)
            w.write((2, 2.0))
            assert ws.wait(10) == [available]
            assert len(w.reader.take_next_instance()) == 1  # either instance
            assert not available.triggered
        finally:
            ws.close()


class TestArrivals:
    @pytest.mark.parametrize("keys", [False, True])
    def test_the_purge_delay_runs_from_the_arrival(self, world: Any, keys: bool) -> None:
        """dcps notes an instance's disposal when it arrives, not at the next access."""
        extra = (purging(1.0), keyed()) if keys else (purging(1.0),)
        w = world(None, *extra)
        w.write((1, 1.0), (2, 2.0))
        w.dispose(2)
        disposed_at = time.monotonic()
        # no access meanwhile: only dcps' own data listener sees the disposal
        threading.Event().wait(max(0.0, disposed_at + 1.5 - time.monotonic()))
        assert values(w.reader.read()) == [1.0]

    def test_a_bounded_keyed_reader_reports_rejections_without_an_access(
        self, participant: dcps.DomainParticipant, topic_name: str
    ) -> None:
        """Every 32 arrivals it drains Cyclone itself, and so finds what its limits refuse."""
        heard = threading.Event()
        told: list[tuple[Any, Any]] = []

        class Listener(dcps.Listener):
            def on_sample_rejected(self, reader: Any, status: Any) -> None:
                told.append((reader, status))
                heard.set()

        limited = reader_qos(RELIABLE).with_(keyed(), qos.ResourceLimits(max_samples=4))
        w = World(participant, topic_name, limited)
        try:
            w.reader.set_listener(Listener())
            w.write(*((s, float(s)) for s in range(32)))
            assert heard.wait(10)
            reader, status = told[0]
            assert reader is w.reader
            assert status.total_count >= 1
            assert status.last_reason is dcps.SampleRejectedReason.REJECTED_BY_SAMPLES_LIMIT
        finally:
            w.close()


class TestEntities:
    def test_on_a_subscriber_or_with_its_own(
        self, participant: dcps.DomainParticipant, topic_name: str
    ) -> None:
        topic = dcps.Topic(participant, topic_name, Reading)
        subscriber = dcps.Subscriber(participant)
        try:
            on_subscriber = dcps.DataReader(subscriber, topic)
            assert on_subscriber.subscriber is subscriber
            own = dcps.DataReader(participant, topic)
            assert own.subscriber is not subscriber
            assert own.subscriber.participant is participant
            own.close()
            assert own.subscriber.closed  # its own subscriber goes with it
            on_subscriber.close()
            assert not subscriber.closed
        finally:
            subscriber.close()
            topic.close()

    def test_a_writers_qos_is_refused_naming_the_reader(
        self, participant: dcps.DomainParticipant, topic_name: str
    ) -> None:
        topic = dcps.Topic(participant, topic_name, Reading)
        try:
            with pytest.raises(dcps.BadParameterError, match="DataReader"):
                dcps.DataReader(participant, topic, qos=qos.DataWriterQos())  # type: ignore[arg-type]
        finally:
            topic.close()

    def test_a_plain_reader_keeps_its_own_history_depth(self, world: Any) -> None:
        w = world({"reliable": True, "depth": 1})
        w.write((1, 1.0), (1, 2.0), (1, 3.0))
        assert values(w.reader.read()) == [3.0]

    def test_a_reader_with_its_own_keys_has_its_own_instances(self, world: Any) -> None:
        w = world(None, qos.SubscriptionKeys.of("label"))
        w.writer.write(Reading(1, 1.0, "a"))
        w.writer.write(Reading(2, 2.0, "a"))
        w.writer.wait_for_acknowledgments(10)
        first = w.reader.lookup_instance(Reading(1, 0.0, "a"))
        assert first is not None
        assert w.reader.lookup_instance(Reading(2, 0.0, "a")) == first
        assert values(w.reader.read_next_instance()) == [1.0, 2.0]


class TestLookup:
    def test_an_unknown_key_has_no_handle_and_a_wrong_type_is_refused(self, world: Any) -> None:
        w = world()
        w.write((1, 1.0))
        assert w.reader.lookup_instance(Reading(7, 0.0, "")) is None
        assert isinstance(w.reader.lookup_instance(Reading(1, 0.0, "")), int)
        with pytest.raises(dcps.DcpsError, match="expected sensors::Reading, got str"):
            w.reader.lookup_instance("x")  # type: ignore[arg-type]

    def test_a_disposed_instance_leaves_a_sample_with_its_key(self, world: Any) -> None:
        w = world()
        w.write((4, 1.0))
        w.reader.take()
        w.dispose(4)
        (sample,) = w.reader.read()
        assert sample.valid_data is False
        assert sample.data.sensor == 4
        assert sample.info.instance_state is I.NOT_ALIVE_DISPOSED

    def test_take_next_instance_starts_after_the_handle_given(self, world: Any) -> None:
        w = world()
        w.write((1, 1.0), (2, 2.0))
        handles = sorted(
            h for h in (w.reader.lookup_instance(Reading(s, 0.0, "")) for s in (1, 2)) if h
        )
        (sample,) = w.reader.take_next_instance(handles[0])
        assert sample.info.instance_handle == handles[1]
        (left,) = w.reader.read()
        assert left.info.instance_handle == handles[0]


class TestListeners:
    def test_a_listener_that_takes_data_available_consumes_the_status(
        self, participant: dcps.DomainParticipant, world: Any
    ) -> None:
        """With an application on_data_available, DDS counts DATA_AVAILABLE as consumed:
        a StatusCondition does not see it (here dcps hears the data too: autopurge)."""
        heard = threading.Event()

        class Listener(dcps.Listener):
            def on_data_available(self, reader: Any) -> None:
                heard.set()

        w = world(None, purging(3600))
        w.reader.set_listener(Listener())
        available = dcps.StatusCondition(w.reader, dcps.StatusKind.DATA_AVAILABLE)
        w.write((1, 1.0))
        assert heard.wait(10)
        assert not available.triggered
        assert values(w.reader.read()) == [1.0]

    def test_a_listener_given_at_creation_hears_data(
        self, participant: dcps.DomainParticipant, topic_name: str
    ) -> None:
        heard = threading.Event()

        class Listener(dcps.Listener):
            def on_data_available(self, reader: Any) -> None:
                heard.set()

        topic = dcps.Topic(participant, topic_name, Reading)
        reader = dcps.DataReader(
            participant,
            topic,
            qos=reader_qos(RELIABLE).with_(purging(3600)),
            listener=Listener(),
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos(RELIABLE))
        try:
            writer.wait_for_readers()
            writer.write(Reading(1, 1.0, ""))
            assert heard.wait(10)
        finally:
            writer.close()
            reader.close()
            topic.close()


class TestWaiting:
    def test_waits_return_once_what_they_wait_for_is_there(self, world: Any) -> None:
        w = world()
        w.reader.wait_for_writers()
        with pytest.raises(dcps.DcpsTimeoutError, match=r"waiting for 2 matched writer\(s\)"):
            w.reader.wait_for_writers(2, timeout=0.2)
        w.reader.wait_for_historical_data()
        w.write((1, 1.0))
        w.reader.wait_for_data()
        assert values(w.reader.read()) == [1.0]

    def test_an_async_take_wakes_when_data_arrives(self, world: Any) -> None:
        """A plain reader without autopurge: only the waiting coroutine needs dcps' hook."""
        w = world()

        async def main() -> list[float]:
            task = asyncio.create_task(w.reader.atake())
            await asyncio.sleep(0)  # let it take nothing and wait
            assert not task.done()
            w.write((1, 1.0))
            return values(await asyncio.wait_for(task, 10))

        assert asyncio.run(main()) == [1.0]


class TestWaitingMore:
    def test_wait_for_data_waits_for_an_unread_sample(self, world: Any) -> None:
        w = world()
        w.write((1, 1.0))
        w.reader.read()  # read: no unread sample left
        with pytest.raises(dcps.DcpsTimeoutError):
            w.reader.wait_for_data(timeout=0.2)

    def test_an_async_take_takes_unread_samples_up_to_the_count(self, world: Any) -> None:
        w = world()
        w.write((1, 1.0))
        w.reader.read()
        w.write((2, 2.0), (3, 3.0))

        async def main() -> tuple[list[float], list[float]]:
            one = values(await asyncio.wait_for(w.reader.atake(1), 10))
            rest = values(await asyncio.wait_for(w.reader.atake(), 10))
            return one, rest

        one, rest = asyncio.run(main())
        assert len(one) == 1
        assert sorted(one + rest) == [2.0, 3.0]
        assert values(w.reader.read()) == [1.0]  # the read one stays
