"""DCPS entities: creation, read/take with masks, instances, conditions, listeners, close."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import dcps
import qos
from dcps._cyclone.calls import peek_infos
from dcps._sample import ANY_STATE
from tests.support.peers import PEERS_DIR
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Reading
from tests.support.waiting import eventually


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


@pytest.fixture
def topic(participant: dcps.DomainParticipant, topic_name: str) -> dcps.Topic[Reading]:
    return dcps.Topic(participant, topic_name, Reading)


@pytest.fixture
def pair(
    participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
) -> tuple[dcps.DataWriter[Reading], dcps.DataReader[Reading]]:
    reader = dcps.DataReader(
        participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
    )
    writer = dcps.DataWriter(
        participant, topic, qos=writer_qos({"reliable": True, "keep_all": True})
    )
    writer.wait_for_readers()
    return writer, reader


def settle(writer: dcps.DataWriter[Reading], reader: dcps.DataReader[Reading], count: int) -> None:
    """Wait until the reader holds ``count`` samples (counted by peeking at its cache,
    which leaves every sample, view and instance state as it was)."""
    writer.wait_for_acknowledgments(10)

    def held() -> bool:
        return len(peek_infos(reader._cyclone._ref, ANY_STATE, 1024)) == count

    eventually(held, what=f"the reader holding {count} samples")


class TestReadTake:
    def test_read_marks_read_and_take_removes(self, pair) -> None:
        """read() leaves samples (now READ); take() removes them."""
        writer, reader = pair
        writer.write(Reading(1, 1.0, "a"))
        settle(writer, reader, 1)
        first = reader.read()
        assert [s.info.sample_state for s in first] == [dcps.SampleState.NOT_READ]
        assert [s.info.sample_state for s in reader.read()] == [dcps.SampleState.READ]
        assert reader.read(sample_states=dcps.SampleState.NOT_READ) == []
        assert [s.data.label for s in reader.take()] == ["a"]
        assert reader.read() == []

    def test_max_samples_limits_the_result(self, pair) -> None:
        """At most max_samples samples come back."""
        writer, reader = pair
        for i in range(5):
            writer.write(Reading(i, float(i), ""))
        settle(writer, reader, 5)
        assert len(reader.take(2)) == 2
        assert len(reader.take()) == 3

    def test_view_and_instance_state_masks_select(self, pair) -> None:
        """Masks on view and instance state select matching instances only."""
        writer, reader = pair
        writer.write(Reading(1, 1.0, ""))
        writer.write(Reading(2, 2.0, ""))
        writer.dispose(Reading(2, 0.0, ""))
        settle(writer, reader, 2)
        disposed = reader.read(instance_states=dcps.InstanceState.NOT_ALIVE_DISPOSED)
        assert {s.data.sensor for s in disposed} == {2}
        alive = reader.read(instance_states=dcps.InstanceState.ALIVE)
        assert {s.data.sensor for s in alive} == {1}
        # once read, instances are no longer NEW to this reader
        assert reader.read(view_states=dcps.ViewState.NEW) == []
        assert {s.data.sensor for s in reader.read(view_states=dcps.ViewState.NOT_NEW)} == {1, 2}

    def test_sample_info_is_complete(self, pair) -> None:
        """Every sample carries its SampleInfo: handles, timestamp, counts and ranks."""
        writer, reader = pair
        from datetime import UTC, datetime

        stamp = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)
        writer.write(Reading(1, 1.0, "x"), timestamp=stamp)
        writer.write(Reading(1, 2.0, "y"))
        settle(writer, reader, 2)
        first, second = reader.read()
        assert first.info.source_timestamp == stamp
        assert first.info.instance_handle == reader.lookup_instance(Reading(1, 0.0, ""))
        assert first.info.publication_handle == writer.instance_handle
        assert (first.info.sample_rank, second.info.sample_rank) == (1, 0)
        assert (first.info.generation_rank, first.info.absolute_generation_rank) == (0, 0)
        assert first.info.disposed_generation_count == first.info.no_writers_generation_count == 0
        assert first.valid_data
        assert second.valid_data

    def test_samples_are_immutable_values(self, pair) -> None:
        """Samples and SampleInfos compare, hash, pickle and print by value, and unpack."""
        import pickle

        writer, reader = pair
        writer.write(Reading(3, 3.0, "v"), timestamp=5_000)
        settle(writer, reader, 1)
        (read,) = reader.read()
        (again,) = reader.read()
        assert again != read  # now READ
        assert again.info.sample_state is dcps.SampleState.READ
        data, info = again
        assert (data, info) == (again.data, again.info)
        assert pickle.loads(pickle.dumps(again)) == again
        assert pickle.loads(pickle.dumps(info)) == info
        assert {info, pickle.loads(pickle.dumps(info))} == {info}
        assert info != tuple(info)  # a SampleInfo equals only SampleInfos
        assert "sample_state=<SampleState.READ: 1>" in repr(info)
        assert "source_timestamp_ns=5000" in repr(again)
        with pytest.raises(AttributeError):
            again.info.sample_rank = 3  # type: ignore[misc]
        rebuilt = dcps.SampleInfo(**{f: getattr(info, f) for f in dcps.SampleInfo.__match_args__})
        assert rebuilt == info

    def test_invalid_sample_carries_only_the_key(self, pair) -> None:
        """A dispose of an instance with no unread samples arrives as an invalid sample."""
        writer, reader = pair
        writer.write(Reading(4, 4.0, "data"))
        settle(writer, reader, 1)
        reader.take()
        writer.dispose(Reading(4, 0.0, ""))
        writer.wait_for_acknowledgments(10)
        (sample,) = eventually(lambda: reader.take())
        assert not sample.valid_data
        assert sample.data.sensor == 4
        assert sample.info.instance_state == dcps.InstanceState.NOT_ALIVE_DISPOSED


class TestInstances:
    def test_per_instance_read_and_take(self, pair) -> None:
        """read/take with an instance handle touch that instance only."""
        writer, reader = pair
        for sensor in (1, 2, 2):
            writer.write(Reading(sensor, float(sensor), ""))
        settle(writer, reader, 3)
        handle = reader.lookup_instance(Reading(2, 0.0, ""))
        assert handle is not None
        assert [s.data.sensor for s in reader.take(instance=handle)] == [2, 2]
        assert [s.data.sensor for s in reader.read()] == [1]

    def test_next_instance_iterates_in_handle_order(self, pair) -> None:
        """read_next_instance walks instances by increasing handle without marking others read."""
        writer, reader = pair
        for sensor in (5, 6, 7):
            writer.write(Reading(sensor, 0.0, ""))
        settle(writer, reader, 3)
        handles, previous = [], None
        while batch := reader.read_next_instance(previous):
            previous = batch[0].info.instance_handle
            handles.append(previous)
        assert handles == sorted(handles)
        assert len(handles) == 3
        taken = [b[0].data.sensor for b in reader.instances(take=True)]
        assert sorted(taken) == [5, 6, 7]
        assert reader.read() == []

    def test_key_value_of_handle(self, pair) -> None:
        """key_value() returns the key fields of an instance handle, on reader and writer."""
        writer, reader = pair
        handle = writer.register_instance(Reading(9, 0.0, ""))
        assert writer.lookup_instance(Reading(9, 5.0, "other")) == handle
        assert writer.key_value(handle).sensor == 9
        writer.write(Reading(9, 1.0, "x"))
        settle(writer, reader, 1)
        rhandle = reader.lookup_instance(Reading(9, 0.0, ""))
        assert reader.key_value(rhandle).sensor == 9
        assert reader.lookup_instance(Reading(99, 0.0, "")) is None
        with pytest.raises(dcps.BadParameterError, match="no instance"):
            reader.key_value(12345)

    def test_write_dispose_disposes_with_data(self, pair) -> None:
        """write_dispose delivers the sample and marks the instance disposed."""
        writer, reader = pair
        writer.write_dispose(Reading(3, 3.0, "last"))
        settle(writer, reader, 1)
        (sample,) = reader.take()
        assert sample.valid_data
        assert sample.data.label == "last"
        assert sample.info.instance_state == dcps.InstanceState.NOT_ALIVE_DISPOSED


class TestConditions:
    def test_waitset_returns_the_triggered_conditions(self, participant, pair) -> None:
        """A wait set wakes on a read condition and reports which condition triggered."""
        writer, reader = pair
        guard = dcps.GuardCondition(participant)
        data = dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ)
        ws = dcps.WaitSet(participant)
        ws.attach(guard)
        ws.attach(data)
        with pytest.raises(dcps.DcpsTimeoutError):
            ws.wait(0.05)
        writer.write(Reading(1, 1.0, ""))
        assert ws.wait(10) == [data]
        reader.take(condition=data)
        guard.set_trigger_value(True)
        assert ws.wait(10) == [guard]

    def test_query_condition_filters_by_expression(self, participant, pair) -> None:
        """A query condition selects samples by an SQL expression with parameters."""
        writer, reader = pair
        for i in range(6):
            writer.write(Reading(i, float(i), "even" if i % 2 == 0 else "odd"))
        settle(writer, reader, 6)
        query = dcps.QueryCondition(reader, "value > %0 AND label = 'even'", ["1"])
        assert sorted(s.data.sensor for s in reader.read(condition=query)) == [2, 4]
        query.set_parameters(["3"])
        assert [s.data.sensor for s in reader.read(condition=query)] == [4]

    def test_status_condition_wakes_on_matched_writer(self, participant, topic) -> None:
        """A status condition on SUBSCRIPTION_MATCHED wakes when a writer appears."""
        reader = dcps.DataReader(participant, topic)
        cond = dcps.StatusCondition(reader, dcps.StatusKind.SUBSCRIPTION_MATCHED)
        ws = dcps.WaitSet(participant)
        ws.attach(cond)
        dcps.DataWriter(participant, topic)
        assert ws.wait(10) == [cond]
        assert reader.subscription_matched_status.current_count == 1

    def test_data_available_status_condition_with_autopurge(self, participant, topic) -> None:
        """DATA_AVAILABLE fires and resets on take although dcps listens for data itself.

        With autopurge delays dcps installs its own data listener, which consumes
        Cyclone's DATA_AVAILABLE: the reader keeps the status for its conditions.
        """
        purging = reader_qos({"reliable": True, "keep_all": True}).with_(
            qos.ReaderDataLifecycle(autopurge_disposed_samples_delay=timedelta(seconds=30))
        )
        reader = dcps.DataReader(participant, topic, qos=purging)
        available = dcps.StatusCondition(reader, dcps.StatusKind.DATA_AVAILABLE)
        matched = dcps.StatusCondition(reader, dcps.StatusKind.SUBSCRIPTION_MATCHED)
        ws = dcps.WaitSet(participant)
        ws.attach(available)
        ws.attach(matched)
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True, "keep_all": True})
        )
        writer.wait_for_readers()
        assert matched.triggered
        assert reader.subscription_matched_status.current_count == 1  # reading resets it
        writer.write(Reading(1, 1.0, ""))
        assert ws.wait(10) == [available]
        assert [s.data.sensor for s in reader.take()] == [1]
        assert not available.triggered
        with pytest.raises(dcps.DcpsTimeoutError):
            ws.wait(0)

    @pytest.mark.parametrize("mode", ["conditions", "listeners"])
    def test_reader_changes_while_data_floods_in(
        self, domain_id: int, topic_name: str, mode: str
    ) -> None:
        """StatusConditions come and go, or listeners change, on a reader under load.

        ``conditions``: setting a status mask waits for running listener calls
        with the reader locked; dcps' listener on an autopurge reader used to
        read the reader: a hang within a second or two. ``listeners``: the
        binding freed callbacks Cyclone could still call: a crash. In a child
        process, so that either is a failure rather than a stuck suite.
        """
        run = subprocess.run(
            [sys.executable, str(CHURN), str(domain_id), topic_name, "2", mode],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert int(run.stdout) > 0
        assert "Traceback" not in run.stderr

    def test_a_new_listener_replaces_the_old_one_whole(self, participant, topic) -> None:
        """Callbacks the new listener lacks are gone: the old one hears nothing more."""
        old_calls: list[str] = []
        data = threading.Event()

        class Old(dcps.Listener):
            def on_subscription_matched(self, reader, status) -> None:
                old_calls.append("matched")

        class New(dcps.Listener):
            def on_data_available(self, reader) -> None:
                data.set()

        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True}), listener=Old()
        )
        reader.set_listener(New())
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, ""))
        assert data.wait(10)  # matching came before the data
        assert old_calls == []

    def test_status_conditions_sharing_a_reader(self, participant, topic) -> None:
        """Detaching one of two StatusConditions on a reader leaves the other waking its set."""
        reader = dcps.DataReader(participant, topic)
        kept = dcps.StatusCondition(reader, dcps.StatusKind.SUBSCRIPTION_MATCHED)
        dropped = dcps.StatusCondition(reader, dcps.StatusKind.SUBSCRIPTION_MATCHED)
        ws = dcps.WaitSet(participant)
        ws.attach(kept)
        ws.attach(dropped)
        ws.detach(dropped)
        dcps.DataWriter(participant, topic)
        assert ws.wait(10) == [kept]

    def test_a_closed_condition_leaves_its_wait_sets(self, participant, pair) -> None:
        """Closing an attached StatusCondition detaches it: its reader no longer wakes the set."""
        writer, reader = pair
        available = dcps.StatusCondition(reader, dcps.StatusKind.DATA_AVAILABLE)
        guard = dcps.GuardCondition(participant)
        ws = dcps.WaitSet(participant)
        ws.attach(available)
        ws.attach(guard)
        available.close()
        assert ws.conditions == (guard,)
        writer.write(Reading(1, 1.0, ""))
        settle(writer, reader, 1)
        with pytest.raises(dcps.DcpsTimeoutError):
            ws.wait(0.05)  # the reader's DATA_AVAILABLE is set, but nothing waits for it
        guard.set_trigger_value(True)
        assert ws.wait(10) == [guard]


class RecordingListener(dcps.Listener):
    def __init__(self) -> None:
        self.data = threading.Event()
        self.matched: list[int] = []

    def on_data_available(self, reader: dcps.DataReader[Reading]) -> None:
        self.data.set()

    def on_subscription_matched(self, reader, status: dcps.SubscriptionMatchedStatus) -> None:
        self.matched.append(status.current_count)

    def on_publication_matched(self, writer, status: dcps.PublicationMatchedStatus) -> None:
        self.matched.append(-status.current_count)


class StatusListener(dcps.Listener):
    """Records every status callback, in order, as (callback name, status)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.calls: list[tuple[str, object]] = []

    def _record(self, name: str, status: object) -> None:
        with self._lock:
            self.calls.append((name, status))

    def statuses(self, name: str) -> list[Any]:
        with self._lock:
            return [status for called, status in self.calls if called == name]

    def on_liveliness_changed(self, reader, status: dcps.LivelinessChangedStatus) -> None:
        self._record("liveliness_changed", status)

    def on_liveliness_lost(self, writer, status: dcps.LivelinessLostStatus) -> None:
        self._record("liveliness_lost", status)

    def on_offered_deadline_missed(self, writer, status: dcps.OfferedDeadlineMissedStatus) -> None:
        self._record("offered_deadline_missed", status)

    def on_offered_incompatible_qos(
        self, writer, status: dcps.OfferedIncompatibleQosStatus
    ) -> None:
        self._record("offered_incompatible_qos", status)

    def on_sample_lost(self, reader, status: dcps.SampleLostStatus) -> None:
        self._record("sample_lost", status)


SHORT = timedelta(milliseconds=200)
CHURN = PEERS_DIR / "reader_churn.py"


class TestListeners:
    def test_liveliness_changed_reports_alive_then_not_alive(self, participant, topic) -> None:
        """A reader's listener hears a MANUAL_BY_TOPIC writer alive (it matched and wrote),
        then not alive once its lease runs out unasserted."""
        listener = StatusListener()
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True}), listener=listener
        )
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=qos.DataWriterQos(qos.Reliability.RELIABLE, qos.Liveliness.manual_by_topic(SHORT)),
        )
        writer.wait_for_readers()
        writer.write(Reading(1, 1.0, ""))
        lost = eventually(
            lambda: [s for s in listener.statuses("liveliness_changed") if s.not_alive_count],
            what="liveliness changed to not alive",
        )
        alive = [s for s in listener.statuses("liveliness_changed") if s.alive_count]
        assert alive, "the writer never became alive"
        assert (alive[0].alive_count, alive[0].alive_count_change) == (1, 1)
        assert (lost[0].alive_count, lost[0].not_alive_count) == (0, 1)
        assert lost[0].not_alive_count_change == 1
        assert lost[0].last_publication_handle == alive[0].last_publication_handle != 0
        assert reader.liveliness_changed_status.not_alive_count == 1

    def test_liveliness_lost_is_reported_to_the_writer(self, participant, topic) -> None:
        """A writer's listener hears that it lost liveliness once, with the count."""
        listener = StatusListener()
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=qos.DataWriterQos(qos.Reliability.RELIABLE, qos.Liveliness.manual_by_topic(SHORT)),
            listener=listener,
        )
        writer.write(Reading(1, 1.0, ""))
        status = eventually(lambda: listener.statuses("liveliness_lost"), what="liveliness lost")[0]
        assert (status.total_count, status.total_count_change) == (1, 1)

    def test_offered_deadline_missed_names_the_instance(self, participant, topic) -> None:
        """A writer that does not update an instance within its deadline hears about it,
        with a growing count and the instance's handle."""
        listener = StatusListener()
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=qos.DataWriterQos(qos.Reliability.RELIABLE, qos.Deadline(SHORT)),
            listener=listener,
        )
        sample = Reading(4, 1.0, "")
        writer.write(sample)
        missed = eventually(
            lambda: (
                len(listener.statuses("offered_deadline_missed")) >= 2
                and listener.statuses("offered_deadline_missed")
            ),
            what="two deadline misses",
        )
        assert [s.total_count for s in missed[:2]] == [1, 2]
        assert missed[0].total_count_change == 1
        assert missed[0].last_instance_handle == writer.lookup_instance(sample)

    def test_offered_incompatible_qos_names_the_policy(self, participant, topic) -> None:
        """A BEST_EFFORT writer's listener hears that a RELIABLE reader is incompatible,
        naming Reliability."""
        listener = StatusListener()
        dcps.DataReader(participant, topic, qos=reader_qos({"reliable": True}))
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": False}), listener=listener
        )
        status = eventually(
            lambda: listener.statuses("offered_incompatible_qos"), what="incompatible QoS"
        )[0]
        assert (status.total_count, status.total_count_change) == (1, 1)
        assert status.last_policy_name == "Reliability"
        assert writer.matched_subscriptions == []

    def test_sample_lost_when_an_older_source_timestamp_arrives(self, participant, topic) -> None:
        """A BY_SOURCE_TIMESTAMP reader drops a best-effort sample older than the one it has,
        and its listener reports one lost sample."""
        listener = StatusListener()
        by_source = qos.DestinationOrder.BY_SOURCE_TIMESTAMP
        reader = dcps.DataReader(
            participant,
            topic,
            qos=qos.DataReaderQos(qos.Reliability.BEST_EFFORT, by_source),
            listener=listener,
        )
        writer = dcps.DataWriter(
            participant, topic, qos=qos.DataWriterQos(qos.Reliability.BEST_EFFORT, by_source)
        )
        writer.wait_for_readers()
        writer.write(Reading(1, 2.0, "newer"), timestamp=datetime(2030, 1, 1, tzinfo=UTC))
        writer.write(Reading(1, 1.0, "older"), timestamp=datetime(2020, 1, 1, tzinfo=UTC))
        status = eventually(lambda: listener.statuses("sample_lost"), what="sample lost")[0]
        assert (status.total_count, status.total_count_change) == (1, 1)
        assert [s.data.label for s in reader.take()] == ["newer"]

    def test_listeners_report_matches_and_data(self, participant, topic) -> None:
        """Listeners on both ends hear the match, and the reader's hears new data."""
        listener = RecordingListener()
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True}), listener=listener
        )
        writer = dcps.DataWriter(
            participant, topic, qos=writer_qos({"reliable": True}), listener=listener
        )
        eventually(lambda: 1 in listener.matched and -1 in listener.matched)
        writer.write(Reading(1, 1.0, ""))
        assert listener.data.wait(10)
        reader.set_listener(None)
        assert [s.data.sensor for s in reader.take()] == [1]


class TestAsyncio:
    def test_async_for_takes_samples_as_they_arrive(self, pair) -> None:
        """`async for` yields samples in order without blocking the event loop."""
        writer, reader = pair

        async def consume() -> list[int]:
            got: list[int] = []
            async for sample in reader:
                got.append(sample.data.sensor)
                if len(got) == 3:
                    return got
            return got

        async def main() -> list[int]:
            task = asyncio.create_task(consume())
            for i in range(3):
                await asyncio.sleep(0)  # let the consumer wait first
                writer.write(Reading(i, 0.0, ""))
            return await asyncio.wait_for(task, 10)

        assert asyncio.run(main()) == [0, 1, 2]

    def test_atake_waits_for_data(self, pair) -> None:
        """atake() suspends until unread samples exist, then takes them."""
        writer, reader = pair

        async def main() -> list[dcps.Sample[Reading]]:
            pending = asyncio.create_task(reader.atake())
            await asyncio.sleep(0)
            writer.write(Reading(8, 8.0, ""))
            return await asyncio.wait_for(pending, 10)

        assert [s.data.sensor for s in asyncio.run(main())] == [8]


class TestErrors:
    def test_closed_entities_raise_already_closed(self, domain_id, topic_name) -> None:
        """Closing a participant closes its children; using any of them raises AlreadyClosed."""
        with dcps.DomainParticipant(domain_id) as participant:
            topic = dcps.Topic(participant, topic_name, Reading)
            writer = dcps.DataWriter(participant, topic)
            reader = dcps.DataReader(participant, topic)
        for use in (
            lambda: writer.write(Reading(1, 1.0, "")),
            reader.take,
            lambda: dcps.DataReader(participant, topic),
        ):
            with pytest.raises(dcps.AlreadyClosedError, match="closed"):
                use()
        writer.close()  # closing twice is harmless

    def test_wrong_sample_type_is_rejected(self, pair) -> None:
        """Writing a sample of another type names both types."""
        writer, _ = pair
        with pytest.raises(dcps.IdlError, match="sensors::Reading"):
            writer.write("not a reading")  # type: ignore[arg-type]

    def test_string_over_bound_is_rejected(self, pair) -> None:
        """A bounded string that is too long is refused before anything is sent."""
        writer, _ = pair
        with pytest.raises(dcps.BadParameterError, match="label"):
            writer.write(Reading(1, 1.0, "x" * 17))

    def test_bad_parameters_name_the_problem(self, participant, topic) -> None:
        """Bad domain ids, topic names, types and QoS kinds raise BadParameterError."""
        with pytest.raises(dcps.BadParameterError, match="domain_id"):
            dcps.DomainParticipant(999)
        with pytest.raises(dcps.BadParameterError, match="topic name"):
            dcps.Topic(participant, "", Reading)
        with pytest.raises(dcps.BadParameterError, match="not a topic type"):
            dcps.Topic(participant, "x", dict)
        with pytest.raises(dcps.BadParameterError, match="DataReaderQos"):
            dcps.DataReader(participant, topic, qos=qos.DataWriterQos())  # type: ignore[arg-type]
        reader = dcps.DataReader(participant, topic)
        with pytest.raises(dcps.BadParameterError, match="max_samples"):
            reader.read(0)

    def test_length_unlimited_means_one_thing(self, pair) -> None:
        """``LENGTH_UNLIMITED`` is the DDS -1 in both dcps and qos; any positive count works."""
        assert dcps.LENGTH_UNLIMITED == qos.LENGTH_UNLIMITED == -1
        writer, reader = pair
        for i in range(3):
            writer.write(Reading(i, float(i), "x"))
        eventually(lambda: len(reader.read(dcps.LENGTH_UNLIMITED)) == 3, what="three samples")
        assert len(reader.read(10**9)) == 3  # above the reader's internal cap: still all
        assert len(reader.read(2)) == 2
        with pytest.raises(dcps.BadParameterError, match="LENGTH_UNLIMITED"):
            reader.take(-2)
        assert len(reader.take(dcps.LENGTH_UNLIMITED)) == 3  # nothing lost by the refusal

    def test_inconsistent_qos_is_refused_at_creation(self, participant, topic) -> None:
        """A QoS whose history exceeds its resource limits is refused, naming both policies."""
        with pytest.raises(
            dcps.InconsistentPolicyError, match=r"History.*ResourceLimits|ResourceLimits.*History"
        ):
            dcps.DataReader(
                participant,
                topic,
                qos=qos.DataReaderQos(
                    qos.History.keep_last(10), qos.ResourceLimits(max_samples_per_instance=5)
                ),
            )

    def test_immutable_policy_change_is_refused(self, participant, topic) -> None:
        """Changing Reliability of an enabled reader raises ImmutablePolicyError."""
        reader = dcps.DataReader(participant, topic, qos=reader_qos({"reliable": False}))
        with pytest.raises(dcps.ImmutablePolicyError, match="Reliability"):
            reader.set_qos(reader.qos.with_(qos.Reliability.RELIABLE))

    def test_timeout_error_is_a_timeout(self, pair) -> None:
        """Waiting for data that never comes raises DcpsTimeoutError (also a TimeoutError)."""
        _, reader = pair
        with pytest.raises(TimeoutError):
            reader.wait_for_data(0.05)


def test_public_names_are_exported() -> None:
    """dcps.__all__ is sorted (constants, classes, functions) and names exactly the public names."""

    def isort_style(name: str) -> tuple[int, str]:
        return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)

    assert list(dcps.__all__) == sorted(dcps.__all__, key=isort_style)
    public = {n for n in dir(dcps) if not n.startswith("_")} - {"annotations"}
    modules = {n for n in public if type(getattr(dcps, n)).__name__ == "module"}
    assert public - modules == set(dcps.__all__)


class TestQueryOrder:
    def test_order_by_sorts_what_a_query_condition_reads(self, participant, pair) -> None:
        """A query with ORDER BY returns its samples ordered by that field."""
        writer, reader = pair
        for sensor, value in ((1, 3.0), (2, 1.0), (3, 2.0)):
            writer.write(Reading(sensor, value, ""))
        writer.wait_for_acknowledgments(10)
        query = dcps.QueryCondition(reader, "value > 0 ORDER BY value")
        assert [s.data.value for s in reader.read(condition=query)] == [1.0, 2.0, 3.0]


class RejectListener(dcps.Listener):
    def __init__(self) -> None:
        self.rejected = threading.Event()

    def on_sample_rejected(self, reader, status: dcps.SampleRejectedStatus) -> None:
        self.rejected.set()


class TestResourceStatuses:
    def test_samples_beyond_resource_limits_are_rejected(self, participant, topic) -> None:
        """A KEEP_ALL reader limited to 2 samples per instance rejects the rest and says why."""
        listener = RejectListener()
        reader = dcps.DataReader(
            participant,
            topic,
            listener=listener,
            qos=qos.DataReaderQos(
                qos.History.KEEP_ALL, qos.ResourceLimits(max_samples_per_instance=2)
            ),
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": False}))
        writer.wait_for_readers()
        for i in range(5):
            writer.write(Reading(1, float(i), ""))
        assert listener.rejected.wait(10)
        status = eventually(
            lambda: reader.sample_rejected_status.total_count >= 1 and reader.sample_rejected_status
        )
        assert (
            status.last_reason == dcps.SampleRejectedReason.REJECTED_BY_SAMPLES_PER_INSTANCE_LIMIT
        )
        assert [s.data.value for s in reader.read()] == [0.0, 1.0]


class TestHandles:
    def test_handle_reaches_the_binding_until_close(self, domain_id, topic_name) -> None:
        """``participant.handle`` is the cyclonedds participant: a builtin-topic reader made
        on it discovers our writer; once closed, the handle raises AlreadyClosedError."""
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication

        with dcps.DomainParticipant(domain_id) as participant:
            topic = dcps.Topic(participant, topic_name, Reading)
            dcps.DataWriter(participant, topic)
            builtin = BuiltinDataReader(participant.handle, BuiltinTopicDcpsPublication)
            seen: set[str] = set()

            def discovered() -> bool:
                seen.update(s.topic_name for s in builtin.take(N=100))
                return topic_name in seen

            eventually(discovered, timeout=10, what="our writer in DCPSPublication")
        with pytest.raises(dcps.AlreadyClosedError, match="DomainParticipant"):
            participant.handle  # noqa: B018

    def test_closed_topic_is_refused_by_name(self, participant, topic) -> None:
        """Readers and writers on a closed topic raise AlreadyClosedError naming the topic."""
        topic.close()
        for make in (dcps.DataReader, dcps.DataWriter):
            with pytest.raises(dcps.AlreadyClosedError, match=topic.name):
                make(participant, topic)

    def test_read_take_check_the_condition(self, participant, topic, pair) -> None:
        """read/take refuse a closed condition and another reader's condition."""
        _writer, reader = pair
        other = dcps.DataReader(participant, topic)
        mine = dcps.ReadCondition(reader)
        with pytest.raises(dcps.BadParameterError, match="another reader"):
            other.take(condition=mine)
        mine.close()
        with pytest.raises(dcps.AlreadyClosedError):
            reader.take(condition=mine)

    @pytest.mark.parametrize("keys", [False, True], ids=["cyclone-cache", "subscription-keys"])
    def test_conditions_follow_a_partition_change(
        self, participant, topic, unique, keys: bool
    ) -> None:
        """After both sides change partitions (Cyclone entities re-created underneath), the
        writer has a new handle, a ReadCondition/QueryCondition attached to a wait set
        still wakes it, and read/take through them select the new reader's samples."""
        pub = dcps.Publisher(participant, partitions=[f"{unique}/a"])
        sub = dcps.Subscriber(participant, partitions=[f"{unique}/a"])
        rqos = reader_qos({"reliable": True, "keep_all": True})
        if keys:
            rqos = rqos.with_(qos.SubscriptionKeys.of("sensor"))
        reader = dcps.DataReader(sub, topic, qos=rqos)
        writer = dcps.DataWriter(pub, topic, qos=writer_qos({"reliable": True, "keep_all": True}))
        query = dcps.QueryCondition(reader, "sensor > 1 ORDER BY sensor")
        ws = dcps.WaitSet(participant)
        ws.attach(query)
        writer.wait_for_readers()
        old = writer.handle
        pub.set_partitions([f"{unique}/b"])
        sub.set_partitions([f"{unique}/b"])
        assert writer.handle is not old
        writer.wait_for_readers()
        for sensor in (3, 1, 2):
            writer.write(Reading(sensor, 1.0, ""))
        writer.wait_for_acknowledgments(10)
        assert ws.wait(10) == [query]
        assert [s.data.sensor for s in reader.take(condition=query)] == [2, 3]
        assert [s.data.sensor for s in reader.take()] == [1]


class TestMatching:
    def test_every_match_is_listed_past_any_buffer_size(self, participant, topic) -> None:
        """20 readers and 20 writers: each side lists all of them, each once (the
        binding's own call sizes its buffer once and fails when matches arrive meanwhile)."""
        writer = dcps.DataWriter(participant, topic)
        reader = dcps.DataReader(participant, topic)
        readers = [dcps.DataReader(participant, topic) for _ in range(19)]
        writers = [dcps.DataWriter(participant, topic) for _ in range(19)]
        eventually(lambda: len(writer.matched_subscriptions) == 20, 10, "20 matched readers")
        eventually(lambda: len(reader.matched_publications) == 20, 10, "20 matched writers")
        assert len(set(writer.matched_subscriptions)) == 20
        assert set(writer.matched_subscription_guids) == {r.guid for r in [reader, *readers]}
        assert set(reader.matched_publication_guids) == {w.guid for w in [writer, *writers]}
