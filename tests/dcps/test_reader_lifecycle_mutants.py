"""The reader's lifecycle bookkeeping, unit level: the sample/view/instance state masks
and SampleInfo (``dcps/_sample.py``) and the ReaderDataLifecycle autopurge deadlines
(``dcps/_autopurge.py``), fed directly with exact clock readings so each rule is pinned
without DDS or sleeps (issue 20: mutation testing of the reader's lifecycle).
tests/dcps/test_lifecycle.py and test_lifecycle_ranks.py check the same rules end to end
with Cyclone.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

import dcps
import qos
from dcps import _sample
from dcps._autopurge import AutoPurge
from dcps._sample import ANY_STATE, samples_from_rows, state_mask

S, V, I = dcps.SampleState, dcps.ViewState, dcps.InstanceState  # noqa: E741
INFINITE = qos.INFINITE


def info_fields(
    sample_state: int = 2, view_state: int = 4, instance_state: int = 16, valid: bool = True
) -> tuple[object, ...]:
    """The twelve ``dds_sample_info_t`` fields, with distinct numbers in each count."""
    return (
        sample_state,
        view_state,
        instance_state,
        valid,
        1_500_000_000_123_456_789,
        11,
        22,
        3,
        4,
        5,
        6,
        7,
    )


class TestStateValues:
    def test_the_states_have_the_dds_bit_values(self) -> None:
        assert [int(S.READ), int(S.NOT_READ), int(S.ANY)] == [1, 2, 3]
        assert [int(V.NEW), int(V.NOT_NEW), int(V.ANY)] == [4, 8, 12]
        alive, disposed, no_writers = I.ALIVE, I.NOT_ALIVE_DISPOSED, I.NOT_ALIVE_NO_WRITERS
        assert [int(alive), int(disposed), int(no_writers)] == [16, 32, 64]
        assert [int(I.NOT_ALIVE), int(I.ANY)] == [96, 112]
        assert ANY_STATE == 127

    def test_states_print_their_names(self) -> None:
        assert str(S.NOT_READ) == "SampleState.NOT_READ"
        assert str(V.NEW) == "ViewState.NEW"
        assert str(I.NOT_ALIVE_DISPOSED) == "InstanceState.NOT_ALIVE_DISPOSED"


class TestStateMask:
    @pytest.fixture(autouse=True)
    def cold_cache(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Each case computes its masks: none is served from what an earlier caller cached."""
        monkeypatch.setattr(_sample, "_MASKS", {})

    def test_the_mask_is_the_union_of_the_selections(self) -> None:
        assert state_mask(S.NOT_READ, V.NEW, I.ALIVE) == 2 | 4 | 16
        assert state_mask(S.ANY, V.ANY, I.ANY) == ANY_STATE
        assert state_mask(S.READ, V.NOT_NEW, I.NOT_ALIVE) == 1 | 8 | 96
        # plain ints are accepted as well, and a repeated call gives the same mask
        assert state_mask(1, 8, 64) == 73
        assert state_mask(1, 8, 64) == 73
        assert state_mask(S.READ, V.NOT_NEW, I.NOT_ALIVE) == 105

    @pytest.mark.parametrize(
        ("args", "kind", "enum_name", "shown"),
        [
            ((0, V.ANY, I.ANY), "sample_states", "SampleState", "0"),
            ((S.ANY, 0, I.ANY), "view_states", "ViewState", "0"),
            ((S.ANY, V.ANY, 0), "instance_states", "InstanceState", "0"),
            ((4, V.ANY, I.ANY), "sample_states", "SampleState", "4"),
            ((S.ANY, 16, I.ANY), "view_states", "ViewState", "16"),
            ((S.ANY, V.ANY, 128), "instance_states", "InstanceState", "128"),
            ((S.ANY, V.ANY, 17), "instance_states", "InstanceState", "17"),
            (("1", V.ANY, I.ANY), "sample_states", "SampleState", "'1'"),
            ((S.ANY, None, I.ANY), "view_states", "ViewState", "None"),
        ],
    )
    def test_a_bad_selection_is_refused_by_name(
        self, args: tuple[object, object, object], kind: str, enum_name: str, shown: str
    ) -> None:
        with pytest.raises(dcps.BadParameterError) as caught:
            state_mask(*args)  # type: ignore[arg-type]
        assert str(caught.value) == (
            f"{kind} must be a non-empty combination of {enum_name}, got {shown}"
        )

    def test_a_refused_selection_stays_refused(self) -> None:
        for _ in range(2):
            with pytest.raises(dcps.BadParameterError):
                state_mask(S.ANY, V.ANY, 128)


class TestSampleInfo:
    def test_fields_and_states(self) -> None:
        info = dcps.SampleInfo(*info_fields())  # type: ignore[arg-type]
        assert info.sample_state is S.NOT_READ
        assert info.view_state is V.NEW
        assert info.instance_state is I.ALIVE
        assert info.valid_data is True
        assert info.source_timestamp_ns == 1_500_000_000_123_456_789
        assert info.instance_handle == 11
        assert info.publication_handle == 22
        assert info.disposed_generation_count == 3
        assert info.no_writers_generation_count == 4
        assert info.sample_rank == 5
        assert info.generation_rank == 6
        assert info.absolute_generation_rank == 7
        assert info.source_timestamp == datetime(2017, 7, 14, 2, 40, 0, 123456, tzinfo=UTC)
        assert info.source_timestamp - datetime(1970, 1, 1, tzinfo=UTC) == timedelta(
            seconds=1_500_000_000, microseconds=123456
        )

    def test_every_single_state_is_accepted(self) -> None:
        for sample_state in (S.READ, S.NOT_READ):
            for view_state in (V.NEW, V.NOT_NEW):
                for instance_state in (I.ALIVE, I.NOT_ALIVE_DISPOSED, I.NOT_ALIVE_NO_WRITERS):
                    info = dcps.SampleInfo(*info_fields(sample_state, view_state, instance_state))  # type: ignore[arg-type]
                    assert (info.sample_state, info.view_state, info.instance_state) == (
                        sample_state,
                        view_state,
                        instance_state,
                    )

    @pytest.mark.parametrize(
        ("states", "kind", "shown"),
        [
            ((S.ANY, 4, 16), "sample_state", "<SampleState.ANY: 3>"),
            ((2, V.ANY, 16), "view_state", "<ViewState.ANY: 12>"),
            ((2, 4, I.NOT_ALIVE), "instance_state", "<InstanceState.NOT_ALIVE: 96>"),
            ((2, 4, 112), "instance_state", "112"),
            ((0, 4, 16), "sample_state", "0"),
            ((2, 5, 16), "view_state", "5"),
            ((2, 4, 128), "instance_state", "128"),
            ((2, 4, 1), "instance_state", "1"),
            (("2", 4, 16), "sample_state", "'2'"),
        ],
    )
    def test_a_state_that_is_not_single_is_refused(
        self, states: tuple[object, object, object], kind: str, shown: str
    ) -> None:
        with pytest.raises(dcps.BadParameterError) as caught:
            dcps.SampleInfo(*info_fields(*states))  # type: ignore[arg-type]
        assert str(caught.value) == f"{kind} must be a single state, got {shown}"

    def test_repr_names_every_field(self) -> None:
        info = dcps.SampleInfo(*info_fields(1, 8, 32, False))  # type: ignore[arg-type]
        assert repr(info) == (
            "SampleInfo(sample_state=<SampleState.READ: 1>, view_state=<ViewState.NOT_NEW: 8>, "
            "instance_state=<InstanceState.NOT_ALIVE_DISPOSED: 32>, valid_data=False, "
            "source_timestamp_ns=1500000000123456789, instance_handle=11, publication_handle=22, "
            "disposed_generation_count=3, no_writers_generation_count=4, sample_rank=5, "
            "generation_rank=6, absolute_generation_rank=7)"
        )


class TestSample:
    def test_fields_valid_data_and_repr(self) -> None:
        info = dcps.SampleInfo(*info_fields(valid=False))  # type: ignore[arg-type]
        sample = dcps.Sample("key-only", info)
        assert sample.data == "key-only"
        assert sample.info is info
        assert sample.valid_data is False
        assert dcps.Sample("x", dcps.SampleInfo(*info_fields())).valid_data is True  # type: ignore[arg-type]
        data, got = sample
        assert (data, got) == ("key-only", info)
        assert repr(sample) == f"Sample(data='key-only', info={info!r})"

    def test_rows_decode_valid_samples_whole_and_invalid_ones_as_keys(self) -> None:
        rows = [(b"full", info_fields()), (b"keys", info_fields(valid=False))]
        out = samples_from_rows(rows, lambda b: ("data", b), lambda b: ("key", b))
        assert [s.data for s in out] == [("data", b"full"), ("key", b"keys")]
        assert [s.valid_data for s in out] == [True, False]
        assert out[0].info == dcps.SampleInfo(*info_fields())  # type: ignore[arg-type]
        assert out[1].info.instance_state is I.ALIVE
        assert isinstance(out[0], dcps.Sample)
        assert isinstance(out[0].info, dcps.SampleInfo)


def purge(nowriter: object = INFINITE, disposed: object = INFINITE) -> AutoPurge:
    return AutoPurge(
        qos.ReaderDataLifecycle(
            autopurge_nowriter_samples_delay=nowriter,  # type: ignore[arg-type]
            autopurge_disposed_samples_delay=disposed,  # type: ignore[arg-type]
        )
    )


NO_WRITERS, DISPOSED, ALIVE = I.NOT_ALIVE_NO_WRITERS, I.NOT_ALIVE_DISPOSED, I.ALIVE


class TestAutoPurge:
    def test_active_only_with_a_finite_delay(self) -> None:
        assert purge().active is False
        assert purge(nowriter=timedelta(seconds=1)).active is True
        assert purge(disposed=timedelta(seconds=1)).active is True
        assert purge(timedelta(0), timedelta(0)).active is True

    def test_a_no_writers_instance_goes_once_its_delay_has_passed(self) -> None:
        p = purge(nowriter=timedelta(seconds=2), disposed=timedelta(seconds=5))
        p.observe({7: NO_WRITERS, 8: ALIVE}, now=100.0)
        assert p.due(now=101.999) == []
        assert p.due(now=102.0) == [7]
        assert p.due(now=200.0) == []  # forgotten once due

    def test_a_disposed_instance_goes_after_the_disposed_delay(self) -> None:
        p = purge(nowriter=timedelta(seconds=2), disposed=timedelta(seconds=5))
        p.observe({7: DISPOSED, 9: NO_WRITERS}, now=100.0)
        assert p.due(now=102.5) == [9]
        assert p.due(now=104.999) == []
        assert p.due(now=105.0) == [7]
        assert p.due(now=105.0) == []

    def test_an_infinite_delay_never_purges_its_state(self) -> None:
        p = purge(disposed=timedelta(seconds=1))
        p.observe({1: NO_WRITERS, 2: DISPOSED}, now=0.0)
        assert p.due(now=1e9) == [2]
        p = purge(nowriter=timedelta(seconds=1))
        p.observe({1: NO_WRITERS, 2: DISPOSED}, now=0.0)
        assert p.due(now=1e9) == [1]

    def test_the_clock_starts_at_the_first_sighting(self) -> None:
        p = purge(nowriter=timedelta(seconds=2))
        p.observe({7: NO_WRITERS}, now=100.0)
        p.observe({7: NO_WRITERS}, now=101.5)  # seen again: still since 100
        assert p.due(now=102.0) == [7]

    def test_rebirth_cancels_the_purge(self) -> None:
        p = purge(nowriter=timedelta(seconds=2), disposed=timedelta(seconds=2))
        p.observe({7: DISPOSED, 8: NO_WRITERS}, now=100.0)
        p.observe({7: ALIVE, 8: NO_WRITERS}, now=101.0)
        assert p.due(now=1000.0) == [8]

    def test_a_state_with_an_infinite_delay_cancels_the_other(self) -> None:
        p = purge(nowriter=timedelta(seconds=2))  # disposed: never
        p.observe({7: NO_WRITERS}, now=100.0)
        p.observe({7: DISPOSED}, now=101.0)
        assert p.due(now=1000.0) == []

    def test_a_new_not_alive_state_restarts_the_clock_with_its_delay(self) -> None:
        p = purge(nowriter=timedelta(seconds=2), disposed=timedelta(seconds=10))
        p.observe({7: NO_WRITERS}, now=100.0)
        p.observe({7: DISPOSED}, now=101.0)
        assert p.due(now=110.999) == []
        assert p.due(now=111.0) == [7]

    def test_several_instances_come_due_together(self) -> None:
        p = purge(nowriter=timedelta(seconds=1), disposed=timedelta(seconds=1))
        p.observe({1: NO_WRITERS, 2: DISPOSED, 3: NO_WRITERS}, now=0.0)
        p.observe({3: ALIVE}, now=0.5)
        assert sorted(p.due(now=1.0)) == [1, 2]

    def test_without_a_time_the_monotonic_clock_is_used(self) -> None:
        p = purge(nowriter=timedelta(0), disposed=timedelta(hours=1))
        p.observe({7: NO_WRITERS, 8: DISPOSED})
        assert p.due() == [7]
        assert p.due(now=time.monotonic() + 3601) == [8]
        p.observe({9: DISPOSED}, now=time.monotonic() + 7200)
        assert p.due() == []
