"""SubscriptionKeys: a reader that keys instances by its own key list (seed 003 rules),
with writers in other processes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dcps
import idl
import qos
from dcps._cyclone import calls as cyclone_c
from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import STATUSINFO_DISPOSE, take_cdr
from tests.support.peer import Peer
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Blob, Reading
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess


class Where(idl.Struct, typename="skeys_tests::Where"):
    region: idl.bounded_str[16]
    zone: idl.int32


class Car(idl.Struct, typename="skeys_tests::Car"):
    id: idl.key[idl.int32]
    where: Where
    speed: idl.float64


ALIVE = dcps.InstanceState.ALIVE
DISPOSED = dcps.InstanceState.NOT_ALIVE_DISPOSED


def keyed_qos(*keys: str, depth: int | None = None) -> qos.DataReaderQos:
    base = reader_qos(
        {"reliable": True, "keep_all": depth is None} | ({"depth": depth} if depth else {})
    )
    return base.with_(qos.SubscriptionKeys.of(*keys))


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


@pytest.fixture
def topic(participant: dcps.DomainParticipant, topic_name: str) -> dcps.Topic[Reading]:
    return dcps.Topic(participant, topic_name, Reading)


@pytest.fixture
def writer(domain_id: int, topic_name: str) -> Iterator[Peer]:
    peer = Peer(domain_id, topic_name)
    try:
        yield peer
    finally:
        peer.close()


def plain_reader(
    participant: dcps.DomainParticipant, topic: dcps.Topic[Reading]
) -> dcps.DataReader[Reading]:
    return dcps.DataReader(participant, topic, qos=reader_qos({"reliable": True, "keep_all": True}))


def settled(reader: dcps.DataReader[Reading], count: int) -> list[dcps.Sample[Reading]]:
    """Read until the reader holds ``count`` samples (any state); return them."""
    return eventually(
        lambda: (s := reader.read()) and len(s) >= count and s, what=f"{count} samples"
    )


# Writers keep all samples: with KEEP_LAST 1, a sample that a new reader missed while
# discovery completed is repaired only by the latest one of its (topic) instance.


class TestMapping:
    def test_one_writer_instance_feeds_several_reader_instances(
        self, participant, topic, writer
    ) -> None:
        """Sensor 1 writing labels a and b makes two reader instances keyed by label."""
        reader = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        writer.start_writer({"reliable": True, "keep_all": True}, reader)
        writer.call("write", sensor=1, value=1.0, label="a")
        writer.call("write", sensor=1, value=2.0, label="b")
        samples = settled(reader, 2)
        handles = {s.data.label: s.info.instance_handle for s in samples}
        assert len(set(handles.values())) == 2
        assert reader.lookup_instance(Reading(99, 0.0, "b")) == handles["b"]
        assert reader.key_value(handles["a"]).label == "a"

    def test_several_writer_instances_feed_one_reader_instance(
        self, participant, topic, writer
    ) -> None:
        """Sensors 1 and 2 with the same label land in one reader instance, in arrival order."""
        reader = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        writer.start_writer({"reliable": True, "keep_all": True}, reader)
        for sensor in (1, 2, 1):
            writer.call("write", sensor=sensor, value=float(sensor), label="shared")
        samples = settled(reader, 3)
        assert len({s.info.instance_handle for s in samples}) == 1
        assert [s.data.sensor for s in samples] == [1, 2, 1]
        assert [s.info.sample_rank for s in samples] == [2, 1, 0]

    def test_readers_with_different_keys_group_the_same_samples_differently(
        self, participant, topic, writer
    ) -> None:
        """A label-keyed, a value-keyed and a plain reader see one stream grouped three ways."""
        by_label = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        by_value = dcps.DataReader(participant, topic, qos=keyed_qos("value"))
        plain = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer.start_writer({"reliable": True, "keep_all": True}, by_label, by_value, plain)
        for sensor, value, label in ((1, 1.0, "x"), (2, 1.0, "x"), (3, 2.0, "x"), (1, 2.0, "y")):
            writer.call("write", sensor=sensor, value=value, label=label)

        def groups(reader: dcps.DataReader[Reading]) -> int:
            return len({s.info.instance_handle for s in settled(reader, 4)})

        assert (groups(by_label), groups(by_value), groups(plain)) == (2, 2, 3)


class TestLifecycleRules:
    def test_taking_everything_removes_the_instance(self, participant, topic, writer) -> None:
        """After take() empties a reader instance the next sample is NEW; plain readers: NOT_NEW."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        plain = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer.start_writer({"reliable": True, "keep_all": True}, keyed, plain)
        writer.call("write", sensor=1, value=1.0, label="a")
        first = settled(keyed, 1)[0]
        settled(plain, 1)
        keyed.take()
        plain.take()
        assert keyed.lookup_instance(Reading(0, 0.0, "a")) is None
        writer.call("write", sensor=1, value=2.0, label="a")
        again = eventually(lambda: keyed.take())
        assert again[0].info.view_state == dcps.ViewState.NEW
        assert again[0].info.instance_handle != first.info.instance_handle
        assert eventually(lambda: plain.take())[0].info.view_state == dcps.ViewState.NOT_NEW

    def test_invalid_samples_are_skipped_and_instances_stay_alive(
        self, participant, topic, writer
    ) -> None:
        """Unregister, plain dispose and the writer's death leave reader instances ALIVE."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        plain = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer.start_writer(
            {"reliable": True, "keep_all": True, "lease": 1.0, "keep_instances": True}, keyed, plain
        )
        for sensor, label in ((1, "a"), (2, "b"), (3, "c")):
            writer.call("write", sensor=sensor, value=1.0, label=label)
        settled(keyed, 3)  # drained: the lifecycle events below come as invalid samples
        writer.call("dispose", sensor=1, label="a")
        writer.call("unregister", sensor=2, label="b")
        eventually(
            lambda: (
                {s.info.instance_state for s in plain.read()}
                >= {DISPOSED, dcps.InstanceState.NOT_ALIVE_NO_WRITERS}
            )
        )
        writer.kill()  # sensor 3 loses its writer
        eventually(lambda: all(s.info.instance_state != ALIVE for s in plain.read()))
        samples = keyed.read()
        assert all(s.valid_data for s in samples)
        assert {s.data.label: s.info.instance_state for s in samples} == {
            "a": ALIVE,
            "b": ALIVE,
            "c": ALIVE,
        }

    def test_write_dispose_disposes_and_a_new_sample_revives(
        self, participant, topic, writer
    ) -> None:
        """write_dispose (full sample) disposes the instance; next write is NEW, generation 1."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        writer.start_writer({"reliable": True, "keep_all": True}, keyed)
        writer.call("write", sensor=1, value=1.0, label="a")
        settled(keyed, 1)
        writer.call("write_dispose", sensor=1, value=2.0, label="a")
        disposed = eventually(
            lambda: [s for s in keyed.read() if s.info.instance_state == DISPOSED]
        )
        assert disposed[-1].data.value == 2.0
        writer.call("write", sensor=1, value=3.0, label="a")
        latest = eventually(lambda: [s for s in keyed.read() if s.data.value == 3.0])[0]
        assert latest.info.instance_state == ALIVE
        assert latest.info.view_state == dcps.ViewState.NEW
        assert latest.info.disposed_generation_count == 1
        ranks = [(s.data.value, s.info.absolute_generation_rank) for s in keyed.read()]
        assert ranks == [(1.0, 1), (2.0, 1), (3.0, 0)]


class TestEventsBeforeAnyRead:
    """The lifecycle event arrives before the application reads anything at all."""

    def test_dispose_without_data_leaves_the_instance_alive(
        self, participant, topic, writer
    ) -> None:
        """write then dispose, then the first read: the reader instance is ALIVE."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        plain = plain_reader(participant, topic)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed, plain)
        writer.call("write", sensor=1, value=1.0, label="a")
        writer.call("dispose", sensor=1, label="a")
        eventually(lambda: [s for s in plain.read() if s.info.instance_state == DISPOSED])
        samples = eventually(lambda: keyed.read())
        assert [(s.data.label, s.valid_data, s.info.instance_state) for s in samples] == [
            ("a", True, ALIVE)
        ]

    def test_unregister_leaves_the_instance_alive(self, participant, topic, writer) -> None:
        """write then unregister (autodisposing), then the first read: ALIVE."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        plain = plain_reader(participant, topic)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed, plain)
        writer.call("write", sensor=2, value=1.0, label="b")
        writer.call("unregister", sensor=2, label="b")
        eventually(lambda: [s for s in plain.read() if s.info.instance_state != ALIVE])
        samples = eventually(lambda: keyed.read())
        assert [(s.data.label, s.valid_data, s.info.instance_state) for s in samples] == [
            ("b", True, ALIVE)
        ]

    def test_killed_writer_leaves_the_instance_alive(self, participant, topic, writer) -> None:
        """write, the writer process is killed, then the first read: ALIVE."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        plain = plain_reader(participant, topic)
        writer.start_writer({"reliable": True, "keep_all": True, "lease": 1.0}, keyed, plain)
        writer.call("write", sensor=3, value=1.0, label="c")
        eventually(lambda: plain.read())
        writer.kill()
        eventually(
            lambda: [s for s in plain.read() if s.info.instance_state != ALIVE],
            what="writer death noticed",
        )
        samples = keyed.read()
        assert [(s.data.label, s.valid_data, s.info.instance_state) for s in samples] == [
            ("c", True, ALIVE)
        ]

    def test_write_dispose_between_writes_counts_one_disposed_generation(
        self, participant, topic, writer
    ) -> None:
        """write, write_dispose, write, then the first read: one disposed generation, DDS states."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        plain = plain_reader(participant, topic)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed, plain)
        writer.call("write", sensor=1, value=1.0, label="a")
        writer.call("write_dispose", sensor=1, value=2.0, label="a")
        writer.call("write", sensor=1, value=3.0, label="a")
        eventually(lambda: len(plain.read()) == 3)
        samples = eventually(lambda: (s := keyed.read()) and len(s) == 3 and s)
        assert [
            (
                s.data.value,
                s.info.sample_state,
                s.info.view_state,
                s.info.instance_state,
                s.info.disposed_generation_count,
                s.info.sample_rank,
                s.info.generation_rank,
                s.info.absolute_generation_rank,
            )
            for s in samples
        ] == [
            (1.0, dcps.SampleState.NOT_READ, dcps.ViewState.NEW, ALIVE, 0, 2, 1, 1),
            (2.0, dcps.SampleState.NOT_READ, dcps.ViewState.NEW, ALIVE, 0, 1, 1, 1),
            (3.0, dcps.SampleState.NOT_READ, dcps.ViewState.NEW, ALIVE, 1, 0, 0, 0),
        ]

    @pytest.mark.parametrize("direct", [True, False], ids=["serdata-fields", "copied-out"])
    def test_each_sample_says_whether_it_was_written_with_dispose(
        self, participant, topic, writer, monkeypatch, direct
    ) -> None:
        """Taken as serdata, only the write_dispose sample carries DISPOSE, whatever came after.

        Both ways of getting the bytes out of a serdata give the same samples, and
        on this Cyclone build the faster one (reading the binding's serdata) is used.
        """
        checks: list[bool] = []
        real_check = cyclone_c._serdata_fields_readable

        def check(pointer: int) -> bool:
            checks.append(real_check(pointer))
            return checks[-1] and direct

        monkeypatch.setattr(cyclone_c, "_serdata_fields_readable", check)
        watch = plain_reader(participant, topic)
        probe = plain_reader(participant, topic)  # never read before the take below
        writer.start_writer({"reliable": True, "keep_all": True}, watch, probe)
        writer.call("write", sensor=1, value=1.0, label="a")
        writer.call("write_dispose", sensor=1, value=2.0, label="a")
        writer.call("write", sensor=2, value=1.0, label="b")
        writer.call("dispose", sensor=2, label="b")
        eventually(
            lambda: (
                {s.data.sensor for s in watch.read() if s.info.instance_state == DISPOSED} == {1, 2}
            )
        )
        rows = take_cdr(entity_ref(probe.handle), 0xFFFF, 16)
        assert not isinstance(rows, int)
        marks = [
            (Reading.deserialize(data).value, row[2], bool(status & STATUSINFO_DISPOSE))
            for data, row, status in rows
            if data is not None
        ]
        # Every instance state says DISPOSED; only the write_dispose sample carries the bit.
        assert sorted(marks) == [
            (1.0, int(DISPOSED), False),
            (1.0, int(DISPOSED), False),
            (2.0, int(DISPOSED), True),
        ]
        assert checks == [True]  # checked once per take, and the layout holds


class TestResourceLimits:
    def test_samples_per_instance_rejections_reach_status_and_listener(
        self, participant, topic, writer
    ) -> None:
        """A third sample for a reader instance limited to two is rejected and reported."""
        seen: list[dcps.SampleRejectedStatus] = []

        class Rejections(dcps.Listener):
            def on_sample_rejected(self, reader, status) -> None:
                seen.append(status)

        keyed = dcps.DataReader(
            participant,
            topic,
            qos=keyed_qos("label").with_(qos.ResourceLimits(max_samples_per_instance=2)),
            listener=Rejections(),
        )
        plain = plain_reader(participant, topic)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed, plain)
        for sensor in range(3):
            writer.call("write", sensor=sensor, value=1.0, label="a")
        eventually(lambda: len(plain.read()) == 3)
        assert [s.data.sensor for s in eventually(lambda: keyed.read())] == [0, 1]
        status = eventually(lambda: seen)[0]
        assert status.total_count == 1
        assert status.total_count_change == 1
        assert (
            status.last_reason == dcps.SampleRejectedReason.REJECTED_BY_SAMPLES_PER_INSTANCE_LIMIT
        )
        assert status.last_instance_handle == keyed.lookup_instance(Reading(0, 0.0, "a"))
        after = keyed.sample_rejected_status  # the listener call reset the change count
        assert (after.total_count, after.total_count_change) == (1, 0)

    def test_instances_limit_rejections_reach_the_status(self, participant, topic, writer) -> None:
        """With max_instances=1 a sample for a second reader instance is rejected and counted."""
        keyed = dcps.DataReader(
            participant,
            topic,
            qos=keyed_qos("label").with_(qos.ResourceLimits(max_instances=1)),
        )
        plain = plain_reader(participant, topic)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed, plain)
        writer.call("write", sensor=1, value=1.0, label="a")
        writer.call("write", sensor=2, value=1.0, label="b")
        writer.call("write", sensor=3, value=1.0, label="a")
        eventually(lambda: len(plain.read()) == 3)
        assert [
            s.data.sensor for s in eventually(lambda: len(keyed.read()) == 2 and keyed.read())
        ] == [1, 3]
        status = keyed.sample_rejected_status
        assert status.total_count == 1
        assert status.total_count_change == 1
        assert status.last_reason == dcps.SampleRejectedReason.REJECTED_BY_INSTANCES_LIMIT
        assert status.last_instance_handle == 0
        assert keyed.sample_rejected_status.total_count_change == 0


class TestReaderOperations:
    def test_history_depth_applies_per_reader_instance(self, participant, topic, writer) -> None:
        """KEEP_LAST 2 keeps the last two samples of each reader instance, across writers."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label", depth=2))
        writer.start_writer({"reliable": True, "keep_all": True}, keyed)
        for sensor in range(1, 5):
            writer.call("write", sensor=sensor, value=float(sensor), label="same")
        writer.call("write", sensor=9, value=9.0, label="other")
        eventually(
            lambda: len(keyed.read()) == 3 and any(s.data.label == "other" for s in keyed.read())
        )
        assert sorted(s.data.sensor for s in keyed.read()) == [3, 4, 9]

    def test_per_instance_and_next_instance_access(self, participant, topic, writer) -> None:
        """take(instance=) and read_next_instance() follow the reader's own instances."""
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        writer.start_writer({"reliable": True, "keep_all": True}, keyed)
        for sensor, label in ((1, "a"), (2, "b"), (3, "a")):
            writer.call("write", sensor=sensor, value=0.0, label=label)
        settled(keyed, 3)
        labels, previous = [], None
        while batch := keyed.read_next_instance(previous):
            previous = batch[0].info.instance_handle
            labels.append(sorted({s.data.label for s in batch}))
        assert sorted(labels) == [["a"], ["b"]]
        handle_a = keyed.lookup_instance(Reading(0, 0.0, "a"))
        assert [s.data.sensor for s in keyed.take(instance=handle_a)] == [1, 3]
        assert keyed.lookup_instance(Reading(0, 0.0, "a")) is None

    def test_conditions_and_async_work_on_keyed_readers(self, participant, topic, writer) -> None:
        """Wait sets, query conditions and `async for` see the reader's own instances."""
        import asyncio

        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        query = dcps.QueryCondition(
            keyed, "value > %0", ["5"], sample_states=dcps.SampleState.NOT_READ
        )
        ws = dcps.WaitSet(participant)
        ws.attach(query)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed)
        writer.call("write", sensor=1, value=1.0, label="low")
        writer.call("write", sensor=2, value=9.0, label="high")
        assert ws.wait(10) == [query]
        assert [s.data.label for s in keyed.take(condition=query)] == ["high"]

        async def first() -> str:
            async for sample in keyed:
                return sample.data.label
            return ""

        assert asyncio.run(asyncio.wait_for(first(), 10)) == "low"

    @pytest.mark.parametrize("limited", [False, True], ids=["unlimited", "limited"])
    def test_data_available_status_condition_holds_until_read(
        self, participant, topic, writer, limited
    ) -> None:
        """A DATA_AVAILABLE StatusCondition fires for new samples and resets on read/take.

        With resource limits dcps takes samples from Cyclone as they arrive, which
        resets Cyclone's own DATA_AVAILABLE: the condition must still hold.
        """
        limits = (
            qos.ResourceLimits(max_samples_per_instance=100) if limited else qos.ResourceLimits()
        )
        keyed = dcps.DataReader(participant, topic, qos=keyed_qos("label").with_(limits))
        available = dcps.StatusCondition(keyed, dcps.StatusKind.DATA_AVAILABLE)
        ws = dcps.WaitSet(participant)
        ws.attach(available)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed)
        for sensor in range(40):  # more than dcps' eager-drain batch
            writer.call("write", sensor=sensor, value=1.0, label="a")
        writer.call("wait_acks")
        assert ws.wait(10) == [available]
        assert available.triggered
        assert len(keyed.read()) == 40
        assert not available.triggered
        with pytest.raises(dcps.DcpsTimeoutError):
            ws.wait(0)  # the wait set agrees, without blocking
        writer.call("write", sensor=99, value=1.0, label="b")
        assert ws.wait(10) == [available]
        assert ws.wait(10) == [available]  # still: nothing was read since
        (b_instance,) = {
            s.info.instance_handle for s in keyed.read(sample_states=dcps.SampleState.NOT_READ)
        }
        writer.call("write", sensor=100, value=1.0, label="b")
        assert ws.wait(10) == [available]
        taken = keyed.take_next_instance(b_instance - 1)  # per-instance access resets it too
        assert [s.data.sensor for s in taken] == [99, 100]
        assert not available.triggered

    def test_sample_rejected_status_condition_holds_until_the_status_is_read(
        self, participant, topic, writer
    ) -> None:
        """A SAMPLE_REJECTED StatusCondition fires on a per-reader-instance rejection."""
        keyed = dcps.DataReader(
            participant,
            topic,
            qos=keyed_qos("label").with_(qos.ResourceLimits(max_samples_per_instance=2)),
        )
        rejected = dcps.StatusCondition(keyed, dcps.StatusKind.SAMPLE_REJECTED)
        ws = dcps.WaitSet(participant)
        ws.attach(rejected)
        writer.start_writer({"reliable": True, "keep_all": True}, keyed)
        for sensor in range(2):
            writer.call("write", sensor=sensor, value=1.0, label="a")
        writer.call("wait_acks")
        assert keyed.sample_rejected_status.total_count == 0  # two samples fit
        with pytest.raises(dcps.DcpsTimeoutError):
            ws.wait(0)
        writer.call("write", sensor=2, value=1.0, label="a")
        assert ws.wait(10) == [rejected]
        assert keyed.sample_rejected_status.total_count_change == 1
        assert not rejected.triggered
        with pytest.raises(dcps.DcpsTimeoutError):
            ws.wait(0)

    def test_query_condition_wakes_a_wait_set_on_a_plain_reader_too(
        self, participant, topic, writer
    ) -> None:
        """The same query condition on a plain reader wakes its wait set and selects the same."""
        plain = plain_reader(participant, topic)
        query = dcps.QueryCondition(
            plain, "value > %0", ["5"], sample_states=dcps.SampleState.NOT_READ
        )
        ws = dcps.WaitSet(participant)
        ws.attach(query)
        writer.start_writer({"reliable": True, "keep_all": True}, plain)
        writer.call("write", sensor=1, value=1.0, label="low")
        writer.call("write", sensor=2, value=9.0, label="high")
        assert ws.wait(10) == [query]
        assert [s.data.label for s in plain.take(condition=query)] == ["high"]
        query.set_parameters(["0"])
        assert ws.wait(10) == [query]
        assert [s.data.label for s in plain.read(condition=query)] == ["low"]

    def test_dotted_path_keys_group_by_nested_fields(self, participant, unique) -> None:
        """Keys where.region + where.zone group cars by their nested position fields."""
        cars = dcps.Topic(participant, f"cars_{unique}", Car)
        keyed = dcps.DataReader(
            participant,
            cars,
            qos=reader_qos({"reliable": True, "keep_all": True}).with_(
                qos.SubscriptionKeys.of("where.region", "where.zone")
            ),
        )
        writer = dcps.DataWriter(
            participant, cars, qos=writer_qos({"reliable": True, "keep_all": True})
        )
        writer.wait_for_readers()
        keyed.wait_for_writers()
        for car, (region, zone) in enumerate((("n", 1), ("n", 1), ("n", 2), ("s", 1))):
            writer.write(Car(car, Where(region, zone), 1.0))
        samples = settled(keyed, 4)
        groups = {}
        for s in samples:
            groups.setdefault(s.info.instance_handle, []).append(s.data.id)
        assert sorted(groups.values()) == [[0, 1], [2], [3]]
        handle = keyed.lookup_instance(Car(99, Where("n", 2), 0.0))
        assert groups[handle] == [2]
        assert keyed.key_value(handle).where == Where("n", 2)


class TestPolicyChecks:
    def test_unknown_key_field_is_refused(self, participant, topic) -> None:
        """A key list naming a field the type lacks raises BadParameterError naming it."""
        with pytest.raises(dcps.BadParameterError, match="'region'"):
            dcps.DataReader(participant, topic, qos=keyed_qos("region"))

    def test_sequence_field_cannot_be_a_key(self, participant, unique) -> None:
        """Only primitive, string and enum fields can be reader keys."""
        blobs = dcps.Topic(participant, f"blob_{unique}", Blob)
        with pytest.raises(dcps.BadParameterError, match="payload"):
            dcps.DataReader(
                participant, blobs, qos=qos.DataReaderQos(qos.SubscriptionKeys.of("payload"))
            )

    def test_key_list_is_immutable_once_enabled(self, participant, topic) -> None:
        """Changing SubscriptionKeys of a live reader raises ImmutablePolicyError."""
        reader = dcps.DataReader(participant, topic, qos=keyed_qos("label"))
        with pytest.raises(dcps.ImmutablePolicyError, match="SubscriptionKeys"):
            reader.set_qos(reader.qos.with_(qos.SubscriptionKeys.of("value")))

    def test_only_readers_take_the_policy(self) -> None:
        """SubscriptionKeys in a writer QoS is refused, naming the policy."""
        with pytest.raises(dcps.BadParameterError, match="SubscriptionKeys"):
            qos.DataWriterQos(qos.SubscriptionKeys.of("label"))
