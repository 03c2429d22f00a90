"""SubscriptionKeys bookkeeping, unit level: the rules a reader with its own key list
follows (instances, lifecycle, history, resource limits, masks, rejections), each fed to
the cache directly so a case is exact and fast (issue 20: the mutants of
``dcps/_subscription_keys.py`` these tests kill went unseen before).
tests/dcps/test_subscription_keys.py checks the same rules end to end with Cyclone.
"""

from __future__ import annotations

from typing import Any

import pytest

import dcps
import idl
import qos
from dcps._status import SampleRejectedReason
from dcps._subscription_keys import KeyedCache, check_key_list
from tests.support.qos_spec import reader_qos
from tests.support.topic_types import Reading

READ, NOT_READ = int(dcps.SampleState.READ), int(dcps.SampleState.NOT_READ)
NEW, NOT_NEW = int(dcps.ViewState.NEW), int(dcps.ViewState.NOT_NEW)
ALIVE = dcps.InstanceState.ALIVE
DISPOSED = dcps.InstanceState.NOT_ALIVE_DISPOSED
ANY_SAMPLE = int(dcps.SampleState.ANY)
ANY_VIEW = int(dcps.ViewState.ANY)
ANY_INSTANCE = int(dcps.InstanceState.ANY)
ANY = ANY_SAMPLE | ANY_VIEW | ANY_INSTANCE


class Inner(idl.Struct, typename="skeys_mutants::Inner"):
    zone: idl.int32
    tags: idl.sequence[idl.int32]


class Car(idl.Struct, typename="skeys_mutants::Car"):
    id: idl.key[idl.int32]
    where: Inner
    name: idl.bounded_str[8]


def cache(
    *keys: str, depth: int | None = None, limits: qos.ResourceLimits | None = None
) -> KeyedCache[Reading]:
    """A cache of Readings keyed by ``keys`` (default ``label``); KEEP_ALL without depth."""
    spec: dict[str, Any] = {"reliable": True}
    spec |= {"depth": depth} if depth else {"keep_all": True}
    base = reader_qos(spec).with_(qos.SubscriptionKeys.of(*(keys or ("label",))))
    if limits is not None:
        base = base.with_(limits)
    return KeyedCache(Reading, base)


def r(value: float, label: str = "a", sensor: int = 1) -> Reading:
    return Reading(sensor, value, label)


def values(samples: list[dcps.Sample[Reading]]) -> list[float]:
    return [s.data.value for s in samples]


def feed(
    keyed: KeyedCache[Reading], *items: tuple[float, str] | float, dispose: bool = False
) -> bool:
    """File readings (value or (value, label)); timestamps follow the values' order."""
    batch = []
    for item in items:
        value, label = item if isinstance(item, tuple) else (item, "a")
        batch.append((r(value, label), int(value * 10), 7, dispose))
    return keyed.add_batch(batch)


class TestKeyList:
    def test_a_missing_field_is_refused_with_its_name_and_the_type(self) -> None:
        with pytest.raises(
            dcps.BadParameterError,
            match=r"^SubscriptionKeys: 'nope' is not a field of sensors::Reading$",
        ):
            check_key_list(Reading, ["label", "nope"])

    def test_a_sequence_field_is_refused_with_its_kind(self) -> None:
        with pytest.raises(
            dcps.BadParameterError,
            match=r"^SubscriptionKeys: 'where\.tags' is a sequence; only primitive, string "
            r"and enum fields can be keys$",
        ):
            check_key_list(Car, ["where.tags"])

    def test_one_key_gives_the_value_and_several_a_tuple(self) -> None:
        car = Car(3, Inner(9, []), "x")
        assert check_key_list(Car, ["where.zone"])(car) == 9
        assert check_key_list(Car, ["name", "id"])(car) == ("x", 3)

    def test_every_keyable_kind_is_accepted(self) -> None:
        class Kinds(idl.Struct, typename="skeys_mutants::Kinds"):
            i: idl.int16
            u: idl.uint64
            f: idl.float32
            b: bool
            c: idl.char
            o: idl.octet
            s: str

        key_of = check_key_list(Kinds, ["i", "u", "f", "b", "c", "o", "s"])
        assert key_of(Kinds(1, 2, 0.5, True, "c", 4, "s")) == (1, 2, 0.5, True, "c", 4, "s")


class TestInstances:
    def test_readings_group_by_the_reader_keys_in_handle_order(self) -> None:
        keyed = cache()
        assert feed(keyed, (1.0, "a"), (2.0, "b"), (3.0, "a"))
        assert keyed.handles() == [1, 2]
        a, b = keyed.handles()
        assert values(keyed.access(False, 10, ANY, instance_handle=a)) == [1.0, 3.0]
        assert values(keyed.access(False, 10, ANY, instance_handle=b)) == [2.0]
        assert keyed.lookup(r(0.0, "a")) == a
        assert keyed.lookup(r(0.0, "zz")) is None
        assert keyed.key_value(b) == r(2.0, "b")

    def test_a_batch_is_filed_in_source_timestamp_order(self) -> None:
        keyed = cache()
        keyed.add_batch([(r(2.0), 20, 7, False), (r(1.0), 10, 8, False), (r(3.0), 30, 7, False)])
        samples = keyed.access(False, 10, ANY)
        assert values(samples) == [1.0, 2.0, 3.0]
        assert [s.info.source_timestamp_ns for s in samples] == [10, 20, 30]
        assert [s.info.publication_handle for s in samples] == [8, 7, 7]

    def test_a_batch_with_its_keys_is_filed_in_the_order_given(self) -> None:
        keyed = cache()
        batch = [
            (r(2.0, "b"), 20, 7, False),
            (r(1.0, "a"), 10, 7, False),
            (r(3.0, "b"), 5, 7, True),
        ]
        assert keyed.add_batch(batch, ["b", "a", "b"])
        b, a = keyed.handles()
        assert keyed.lookup(r(0.0, "b")) == b
        assert values(keyed.access(False, 10, ANY, instance_handle=b)) == [2.0, 3.0]
        assert values(keyed.access(False, 10, ANY, instance_handle=a)) == [1.0]
        assert keyed.access(False, 1, ANY, instance_handle=b)[0].info.instance_state is DISPOSED

    def test_an_empty_batch_adds_nothing(self) -> None:
        keyed = cache()
        assert keyed.add_batch([]) is False
        assert keyed.access(False, 10, ANY) == []

    def test_the_key_sample_is_the_latest(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0)
        (handle,) = keyed.handles()
        assert keyed.key_value(handle) == r(2.0)
        feed(keyed, 3.0, dispose=True)
        assert keyed.key_value(handle) == r(3.0)

    def test_unknown_handles_are_refused(self) -> None:
        keyed = cache()
        feed(keyed, 1.0)
        with pytest.raises(dcps.BadParameterError, match=r"^no instance with handle 99$"):
            keyed.key_value(99)
        with pytest.raises(dcps.BadParameterError, match=r"^no instance with handle 98$"):
            keyed.access(False, 10, ANY, instance_handle=98)

    def test_taking_everything_removes_the_instance_and_the_next_is_new(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0)
        (handle,) = keyed.handles()
        assert values(keyed.access(True, 10, ANY)) == [1.0, 2.0]
        assert keyed.handles() == []
        assert keyed.lookup(r(0.0)) is None
        feed(keyed, 3.0)
        (again,) = keyed.handles()
        assert again == handle + 1
        (sample,) = keyed.access(False, 10, ANY)
        assert sample.info.view_state is dcps.ViewState.NEW
        assert sample.info.instance_handle == again

    def test_purge_drops_an_instance_and_its_samples(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=3))
        feed(keyed, (1.0, "a"), (2.0, "a"), (3.0, "b"))
        a, b = keyed.handles()
        keyed.purge(a)
        keyed.purge(12345)  # unknown: nothing happens
        assert keyed.handles() == [b]
        assert keyed.lookup(r(0.0, "a")) is None
        # the purged samples no longer count against max_samples
        assert feed(keyed, (4.0, "c"), (5.0, "c"))
        assert keyed.rejected == 0
        assert values(keyed.access(False, 10, ANY)) == [3.0, 4.0, 5.0]

    def test_observe_purge_reports_every_instance_state(self) -> None:
        class Seen:
            def __init__(self) -> None:
                self.states: dict[int, dcps.InstanceState] = {}

            def observe(self, states: dict[int, dcps.InstanceState]) -> None:
                self.states = states

        keyed = cache()
        feed(keyed, (1.0, "a"), (2.0, "b"))
        feed(keyed, (3.0, "b"), dispose=True)
        seen = Seen()
        keyed.observe_purge(seen)
        a, b = keyed.handles()
        assert seen.states == {a: ALIVE, b: DISPOSED}


class TestLifecycle:
    def test_write_dispose_disposes_and_a_valid_sample_revives(self) -> None:
        keyed = cache()
        feed(keyed, 1.0)
        feed(keyed, 2.0, dispose=True)
        samples = keyed.access(False, 10, ANY)
        assert [s.info.instance_state for s in samples] == [DISPOSED, DISPOSED]
        assert [s.info.view_state for s in samples] == [dcps.ViewState.NEW] * 2
        feed(keyed, 3.0)
        samples = keyed.access(False, 10, ANY)
        assert [s.info.instance_state for s in samples] == [ALIVE] * 3
        assert [s.info.view_state for s in samples] == [dcps.ViewState.NEW] * 3
        assert [s.info.disposed_generation_count for s in samples] == [0, 0, 1]
        assert [s.info.no_writers_generation_count for s in samples] == [0, 0, 0]
        assert [s.info.sample_state for s in samples] == [
            dcps.SampleState.READ,
            dcps.SampleState.READ,
            dcps.SampleState.NOT_READ,
        ]
        assert all(s.info.valid_data is True for s in samples)

    def test_a_dispose_inside_one_batch_disposes_until_the_next_sample(self) -> None:
        keyed = cache()
        keyed.add_batch([(r(1.0), 10, 7, True), (r(2.0), 20, 7, False), (r(3.0), 30, 7, True)])
        samples = keyed.access(False, 10, ANY)
        assert [s.info.disposed_generation_count for s in samples] == [0, 1, 1]
        assert {s.info.instance_state for s in samples} == {DISPOSED}

    def test_a_read_instance_is_not_new_until_reborn(self) -> None:
        keyed = cache()
        feed(keyed, 1.0)
        assert keyed.access(False, 10, ANY)[0].info.view_state is dcps.ViewState.NEW
        feed(keyed, 2.0)
        assert {s.info.view_state for s in keyed.access(False, 10, ANY)} == {dcps.ViewState.NOT_NEW}
        feed(keyed, 3.0, dispose=True)
        assert keyed.access(False, 10, ANY)[0].info.view_state is dcps.ViewState.NOT_NEW
        feed(keyed, 4.0)
        assert keyed.access(False, 10, ANY)[0].info.view_state is dcps.ViewState.NEW

    def test_sample_ranks_count_down_to_the_last_of_the_collection(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0, 3.0)
        assert [s.info.sample_rank for s in keyed.access(False, 10, ANY)] == [2, 1, 0]
        assert [s.info.sample_rank for s in keyed.access(False, 2, ANY)] == [1, 0]


class TestHistoryAndLimits:
    def test_keep_last_drops_the_oldest_per_reader_instance(self) -> None:
        keyed = cache(depth=2)
        assert keyed.bounded
        feed(keyed, (1.0, "a"), (2.0, "b"), (3.0, "a"), (4.0, "a"))
        a, b = keyed.handles()
        assert values(keyed.access(False, 10, ANY, instance_handle=a)) == [3.0, 4.0]
        assert values(keyed.access(False, 10, ANY, instance_handle=b)) == [2.0]
        assert keyed.rejected == 0

    def test_keep_last_of_one_keeps_the_latest(self) -> None:
        keyed = cache(depth=1)
        feed(keyed, 1.0, 2.0, 3.0)
        assert values(keyed.access(False, 10, ANY)) == [3.0]

    def test_keep_all_without_limits_is_unbounded(self) -> None:
        keyed = cache()
        assert keyed.bounded is False
        feed(keyed, *[float(i) for i in range(1, 40)])
        assert len(keyed.access(False, 100, ANY)) == 39

    @pytest.mark.parametrize(
        "limits",
        [
            qos.ResourceLimits(max_samples=5),
            qos.ResourceLimits(max_instances=5),
            qos.ResourceLimits(max_samples_per_instance=5),
        ],
    )
    def test_any_one_limit_makes_the_cache_bounded(self, limits: qos.ResourceLimits) -> None:
        assert cache(limits=limits).bounded

    def test_samples_per_instance_limit_rejects_the_extra_sample(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples_per_instance=2))
        assert feed(keyed, 1.0, 2.0)
        assert keyed.rejected_changed is False
        assert feed(keyed, 3.0) is False
        (handle,) = keyed.handles()
        assert values(keyed.access(False, 10, ANY)) == [1.0, 2.0]
        assert keyed.rejected == 1
        assert keyed.rejected_changed is True
        status = keyed.rejected_status()
        assert status.total_count == 1
        assert status.total_count_change == 1
        assert status.last_reason is SampleRejectedReason.REJECTED_BY_SAMPLES_PER_INSTANCE_LIMIT
        assert status.last_instance_handle == handle
        # reading the status resets the change count only
        assert keyed.rejected_changed is False
        again = keyed.rejected_status()
        assert (again.total_count, again.total_count_change) == (1, 0)
        assert again.last_reason is SampleRejectedReason.REJECTED_BY_SAMPLES_PER_INSTANCE_LIMIT

    def test_samples_limit_counts_every_instance(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=3))
        assert feed(keyed, (1.0, "a"), (2.0, "b"), (3.0, "a"))
        assert feed(keyed, (4.0, "a")) is False
        assert feed(keyed, (5.0, "c")) is False  # a new instance would hold it: not created
        assert values(keyed.access(False, 10, ANY)) == [1.0, 3.0, 2.0]
        assert keyed.lookup(r(0.0, "c")) is None
        assert len(keyed.handles()) == 2
        status = keyed.rejected_status()
        assert (status.total_count, status.total_count_change) == (2, 2)
        assert status.last_reason is SampleRejectedReason.REJECTED_BY_SAMPLES_LIMIT
        assert status.last_instance_handle == 0  # the rejected sample had no instance
        # taking frees room
        keyed.access(True, 1, ANY)
        assert feed(keyed, (6.0, "c"))
        assert keyed.lookup(r(0.0, "c")) is not None

    def test_no_rejection_yet_reads_as_a_zero_status(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=3))
        feed(keyed, 1.0)
        status = keyed.rejected_status()
        assert (status.total_count, status.total_count_change) == (0, 0)
        assert status.last_reason is SampleRejectedReason.NOT_REJECTED
        assert status.last_instance_handle == 0

    def test_a_batch_partly_rejected_still_reports_what_it_added(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples_per_instance=1))
        assert feed(keyed, 1.0, 2.0) is True
        assert values(keyed.access(False, 10, ANY)) == [1.0]
        assert keyed.rejected == 1

    def test_samples_limit_after_taking_a_whole_instance(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=3))
        feed(keyed, (1.0, "a"), (2.0, "a"), (3.0, "b"))
        a, _ = keyed.handles()
        assert values(keyed.access(True, 10, ANY, instance_handle=a)) == [1.0, 2.0]
        assert feed(keyed, (4.0, "c"), (5.0, "c"))
        assert feed(keyed, (6.0, "c")) is False
        assert values(keyed.access(False, 10, ANY)) == [3.0, 4.0, 5.0]

    def test_samples_limit_with_keep_last_counts_what_is_kept(self) -> None:
        keyed = cache(depth=3, limits=qos.ResourceLimits(max_samples=4))
        assert feed(keyed, (1.0, "a"), (2.0, "a"), (3.0, "a"), (4.0, "a"))
        assert feed(keyed, (5.0, "b"))
        assert feed(keyed, (6.0, "b")) is False
        assert values(keyed.access(False, 10, ANY)) == [2.0, 3.0, 4.0, 5.0]

    def test_samples_limit_after_a_partial_take(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=3))
        feed(keyed, 1.0, 2.0, 3.0)
        assert values(keyed.access(True, 2, ANY)) == [1.0, 2.0]
        assert feed(keyed, 4.0, 5.0)
        assert feed(keyed, 6.0) is False
        assert values(keyed.access(False, 10, ANY)) == [3.0, 4.0, 5.0]

    def test_samples_limit_after_a_masked_take(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=3))
        feed(keyed, 1.0, 2.0)
        keyed.access(False, 1, ANY)  # 1.0 read
        feed(keyed, 3.0)
        assert values(keyed.access(True, 10, NOT_READ | ANY_VIEW | ANY_INSTANCE)) == [2.0, 3.0]
        assert feed(keyed, 4.0, 5.0)
        assert feed(keyed, 6.0) is False
        assert values(keyed.access(False, 10, ANY)) == [1.0, 4.0, 5.0]

    def test_instances_limit_rejects_a_new_instance_only(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_instances=2))
        assert feed(keyed, (1.0, "a"), (2.0, "b"))
        assert feed(keyed, (3.0, "c")) is False
        assert feed(keyed, (4.0, "a"))  # an existing instance still takes samples
        assert len(keyed.handles()) == 2
        status = keyed.rejected_status()
        assert status.total_count == 1
        assert status.last_reason is SampleRejectedReason.REJECTED_BY_INSTANCES_LIMIT
        assert status.last_instance_handle == 0
        keyed.access(True, 10, ANY, instance_handle=keyed.handles()[0])
        assert feed(keyed, (5.0, "c"))

    def test_unlimited_limits_are_no_limits(self) -> None:
        keyed = cache(
            limits=qos.ResourceLimits(
                max_samples=qos.LENGTH_UNLIMITED,
                max_instances=qos.LENGTH_UNLIMITED,
                max_samples_per_instance=qos.LENGTH_UNLIMITED,
            )
        )
        assert keyed.bounded is False
        feed(keyed, *[(float(i), str(i)) for i in range(1, 6)])
        assert len(keyed.handles()) == 5

    def test_a_limit_of_one_holds_one(self) -> None:
        keyed = cache(limits=qos.ResourceLimits(max_samples=1))
        assert feed(keyed, 1.0)
        assert feed(keyed, 2.0) is False
        assert values(keyed.access(False, 10, ANY)) == [1.0]


class TestAccess:
    def test_max_samples_bounds_the_whole_collection(self) -> None:
        keyed = cache()
        feed(keyed, (1.0, "a"), (2.0, "a"), (3.0, "b"), (4.0, "c"))
        assert values(keyed.access(False, 3, ANY)) == [1.0, 2.0, 3.0]
        assert values(keyed.access(False, 2, ANY)) == [1.0, 2.0]
        assert values(keyed.access(False, 1, ANY)) == [1.0]
        assert keyed.access(False, 0, ANY) == []

    def test_reading_marks_samples_read_and_masks_select_by_sample_state(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0)
        assert values(keyed.access(False, 1, ANY)) == [1.0]
        feed(keyed, 3.0)
        not_read = NOT_READ | ANY_VIEW | ANY_INSTANCE
        read = READ | ANY_VIEW | ANY_INSTANCE
        assert values(keyed.access(False, 10, read)) == [1.0]
        assert values(keyed.access(False, 1, not_read)) == [2.0]
        assert values(keyed.access(False, 10, not_read)) == [3.0]
        assert values(keyed.access(False, 10, not_read)) == []
        assert values(keyed.access(False, 10, read)) == [1.0, 2.0, 3.0]

    def test_masks_select_by_view_and_instance_state(self) -> None:
        keyed = cache()
        feed(keyed, (1.0, "a"), (2.0, "b"))
        a, _ = keyed.handles()
        keyed.access(False, 10, ANY, instance_handle=a)
        feed(keyed, (3.0, "b"), dispose=True)
        assert values(keyed.access(False, 10, ANY_SAMPLE | NEW | ANY_INSTANCE)) == [2.0, 3.0]
        not_new = ANY_SAMPLE | NOT_NEW | ANY_INSTANCE
        assert values(keyed.access(False, 10, not_new)) == [1.0, 2.0, 3.0]
        feed(keyed, (4.0, "c"))
        alive = ANY_SAMPLE | ANY_VIEW | int(ALIVE)
        disposed = ANY_SAMPLE | ANY_VIEW | int(DISPOSED)
        assert values(keyed.access(False, 10, alive)) == [1.0, 4.0]
        assert values(keyed.access(False, 10, disposed)) == [2.0, 3.0]
        assert keyed.matches(disposed)
        no_writers = ANY_SAMPLE | ANY_VIEW | int(dcps.InstanceState.NOT_ALIVE_NO_WRITERS)
        assert not keyed.matches(no_writers)

    def test_a_predicate_selects_samples_and_a_take_keeps_the_rest(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0, 3.0, 4.0)
        even = lambda s: s.value % 2 == 0  # noqa: E731
        assert values(keyed.access(False, 10, ANY, predicate=even)) == [2.0, 4.0]
        assert values(keyed.access(True, 1, ANY, predicate=even)) == [2.0]
        assert values(keyed.access(False, 10, ANY)) == [1.0, 3.0, 4.0]
        assert keyed.handles() != []
        assert values(keyed.access(True, 10, ANY, predicate=even)) == [4.0]
        assert values(keyed.access(True, 10, ANY, predicate=lambda s: True)) == [1.0, 3.0]
        assert keyed.handles() == []

    def test_a_masked_take_of_every_sample_removes_the_instance(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0)
        assert values(keyed.access(True, 10, NOT_READ | ANY_VIEW | ANY_INSTANCE)) == [1.0, 2.0]
        assert keyed.handles() == []

    def test_a_partial_take_keeps_the_later_samples(self) -> None:
        keyed = cache()
        feed(keyed, 1.0, 2.0, 3.0)
        assert values(keyed.access(True, 2, ANY)) == [1.0, 2.0]
        rest = keyed.access(False, 10, ANY)
        assert values(rest) == [3.0]
        assert rest[0].info.sample_state is dcps.SampleState.NOT_READ

    def test_next_instance_access_returns_one_instance_after_the_handle(self) -> None:
        keyed = cache()
        feed(keyed, (1.0, "a"), (2.0, "b"), (3.0, "c"), (4.0, "b"))
        a, b, c = keyed.handles()
        assert values(keyed.access(False, 10, ANY, after_handle=0)) == [1.0]
        assert values(keyed.access(False, 10, ANY, after_handle=a)) == [2.0, 4.0]
        assert values(keyed.access(False, 1, ANY, after_handle=a)) == [2.0]
        assert values(keyed.access(False, 10, ANY, after_handle=c)) == []
        # an instance with no matching sample is passed over
        only_new = NOT_READ | ANY_VIEW | ANY_INSTANCE
        assert values(keyed.access(False, 10, ANY, instance_handle=c)) == [3.0]
        feed(keyed, (5.0, "c"))
        assert values(keyed.access(False, 10, only_new, after_handle=a)) == [5.0]
        assert values(keyed.access(True, 10, ANY, after_handle=b)) == [3.0, 5.0]
        assert keyed.handles() == [a, b]

    def test_matches_follows_sample_state_and_predicate(self) -> None:
        keyed = cache()
        not_read = NOT_READ | ANY_VIEW | ANY_INSTANCE
        read = READ | ANY_VIEW | ANY_INSTANCE
        assert not keyed.matches(ANY)
        feed(keyed, 1.0, 2.0)
        assert keyed.matches(ANY_SAMPLE | NEW | ANY_INSTANCE)
        assert not keyed.matches(ANY_SAMPLE | NOT_NEW | ANY_INSTANCE)
        assert keyed.matches(not_read)
        assert not keyed.matches(read)
        assert keyed.matches(ANY, lambda s: s.value == 2.0)
        assert not keyed.matches(ANY, lambda s: s.value == 9.0)
        keyed.access(False, 10, ANY)
        assert not keyed.matches(not_read)
        assert keyed.matches(read)
        assert not keyed.matches(ANY_SAMPLE | NEW | ANY_INSTANCE)
        assert keyed.matches(ANY_SAMPLE | NOT_NEW | ANY_INSTANCE)
