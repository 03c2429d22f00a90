"""A TRANSIENT/PERSISTENT reader's bookkeeping, unit level (issue 20's mutation run).

``DurableCache`` merges what durability services kept with what Cyclone delivers live:
each sample once (same writer, source timestamp and bytes), instance states as DDS
defines them (disposed, no writers, alive while the stored writer is matched) and, for
history that comes late, nothing older than what the reader already has. The tests feed
it directly, as the reader does, and check what a ``read`` returns.
tests/durability/ checks the same rules end to end with services and Cyclone peers.
"""

from __future__ import annotations

from typing import Any

import dcps
import qos
from dcps._history import DurableCache
from dcps.wire._durability import (
    FLAG_DISPOSED,
    FLAG_DISPOSES,
    PageColumns,
    StoredSample,
    decode_columns,
    encode_samples,
)
from tests.support.qos_spec import reader_qos
from tests.support.topic_types import Reading

ALIVE = dcps.InstanceState.ALIVE
DISPOSED = dcps.InstanceState.NOT_ALIVE_DISPOSED
NO_WRITERS = dcps.InstanceState.NOT_ALIVE_NO_WRITERS
ANY = int(dcps.SampleState.ANY) | int(dcps.ViewState.ANY) | int(dcps.InstanceState.ANY)
W1, W2 = b"\x01" * 16, b"\x02" * 16
GUIDS = {1: W1, 2: W2}  # publication handle -> writer GUID
DISPOSES_BIT = 0x40  # the status bit the reader passes for a write_dispose


def cache(*keys: str) -> DurableCache[Reading]:
    spec: dict[str, Any] = {"reliable": True, "keep_all": True}
    base = reader_qos(spec)
    if keys:
        base = base.with_(qos.SubscriptionKeys.of(*keys))
    return DurableCache(Reading, base)


def payload(sensor: int, value: float, label: str = "a") -> bytes:
    return Reading(sensor, value, label).serialize()


def live_row(
    sensor: int, value: float, ts: int, writer: int = 1, *, label: str = "a", disposes: bool = False
) -> tuple[Any, tuple[Any, ...], int]:
    """A valid sample as the reader takes it from Cyclone: (bytes, row, status)."""
    row = (0, 0, int(ALIVE), 0, ts, 100 + sensor, writer)
    return payload(sensor, value, label), row, DISPOSES_BIT if disposes else 0


def state_row(sensor: int, state: dcps.InstanceState) -> tuple[Any, tuple[Any, ...], int]:
    """An invalid sample announcing an instance state (Cyclone's instance handle 100 + sensor)."""
    return None, (0, 0, int(state), 0, 0, 100 + sensor, 1), 0


def stored(
    sensor: int, value: float, ts: int, writer: bytes = W1, flags: int = 0, label: str = "a"
) -> StoredSample:
    return StoredSample("T", "", b"", writer, ts, 0, flags, payload(sensor, value, label))


def paged(samples: list[StoredSample]) -> PageColumns:
    """A page of stored samples as the reader gets it from a service (by column)."""
    return decode_columns(encode_samples(list(samples)))


def live(c: DurableCache[Reading], *rows: tuple[Any, tuple[Any, ...], int]) -> bool:
    return c.file_live(list(rows), Reading.deserialize, GUIDS.__getitem__, DISPOSES_BIT)


def read(c: DurableCache[Reading]) -> list[tuple[int, float, dcps.InstanceState]]:
    """(sensor, value, instance state) of every sample, instance by instance."""
    return [(s.data.sensor, s.data.value, s.info.instance_state) for s in c.access(False, 100, ANY)]


class TestLive:
    def test_live_samples_are_filed_once_per_writer_timestamp_and_bytes(self) -> None:
        c = cache()
        assert live(c, live_row(1, 1.0, 10), live_row(2, 2.0, 11))
        assert not live(c, live_row(1, 1.0, 10))  # the same sample again
        assert live(c, live_row(1, 1.5, 10))  # same writer and time, other bytes
        assert live(c, live_row(1, 1.0, 10, writer=2))  # another writer
        assert live(c, live_row(1, 1.0, 12))  # another time
        assert read(c) == [
            (1, 1.0, ALIVE),
            (1, 1.5, ALIVE),
            (1, 1.0, ALIVE),
            (1, 1.0, ALIVE),
            (2, 2.0, ALIVE),
        ]

    def test_a_write_dispose_disposes_its_instance(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10), live_row(2, 2.0, 11, disposes=True))
        assert read(c) == [(1, 1.0, ALIVE), (2, 2.0, DISPOSED)]

    def test_invalid_samples_set_the_state_of_a_live_instance_once(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10), live_row(2, 2.0, 11), live_row(3, 3.0, 12))
        assert live(c, state_row(1, DISPOSED), state_row(2, NO_WRITERS))
        assert read(c) == [(1, 1.0, DISPOSED), (2, 2.0, NO_WRITERS), (3, 3.0, ALIVE)]
        # an instance no longer alive keeps its state; an unknown handle changes nothing
        assert not live(c, state_row(1, NO_WRITERS), state_row(2, DISPOSED), state_row(9, DISPOSED))
        assert not live(c, state_row(3, ALIVE))
        assert read(c) == [(1, 1.0, DISPOSED), (2, 2.0, NO_WRITERS), (3, 3.0, ALIVE)]

    def test_a_state_of_an_instance_only_stored_changes_nothing(self) -> None:
        """Cyclone's handles name only instances filed live; history's are not among them."""
        c = cache()
        c.file_history(paged([stored(1, 1.0, 10)]), Reading.deserialize, {W1})
        assert not live(c, state_row(1, DISPOSED))
        assert read(c) == [(1, 1.0, ALIVE)]

    def test_the_readers_own_key_list_groups_instances(self) -> None:
        c = cache("label")
        live(c, live_row(1, 1.0, 10, label="x"), live_row(2, 2.0, 11, label="x"))
        live(c, live_row(3, 3.0, 12, label="y"))
        assert [s.info.instance_handle for s in c.access(False, 10, ANY)].count(
            c.access(False, 10, ANY)[0].info.instance_handle
        ) == 2
        assert live(c, state_row(2, DISPOSED))  # handle of sensor 2: the instance "x"
        assert read(c) == [(1, 1.0, DISPOSED), (2, 2.0, DISPOSED), (3, 3.0, ALIVE)]


class TestHistory:
    def test_stored_samples_are_filed_once_in_timestamp_order(self) -> None:
        c = cache()
        page = [stored(1, 3.0, 30), stored(1, 1.0, 10), stored(1, 2.0, 20)]
        assert c.file_history(paged(page), Reading.deserialize, {W1})
        assert not c.file_history(paged(page), Reading.deserialize, {W1})  # another service's copy
        assert c.file_history(
            paged([stored(1, 2.0, 20), stored(1, 4.0, 40), stored(1, 4.0, 40)]),
            Reading.deserialize,
            {W1},
        )
        assert read(c) == [(1, v, ALIVE) for v in (1.0, 2.0, 3.0, 4.0)]

    def test_a_page_repeating_a_sample_files_it_once(self) -> None:
        c = cache()
        assert c.file_history(
            paged([stored(1, 1.0, 10), stored(1, 1.0, 10)]), Reading.deserialize, {W1}
        )
        assert read(c) == [(1, 1.0, ALIVE)]

    def test_a_sample_both_live_and_stored_is_filed_once(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10))
        assert not c.file_history(paged([stored(1, 1.0, 10)]), Reading.deserialize, {W1})
        c2 = cache()
        c2.file_history(paged([stored(1, 1.0, 10)]), Reading.deserialize, {W1})
        assert not live(c2, live_row(1, 1.0, 10))
        assert read(c) == read(c2) == [(1, 1.0, ALIVE)]

    def test_instance_states_of_stored_samples(self) -> None:
        """Disposed when served disposed; no writers unless the writer is matched."""
        c = cache()
        page = [
            stored(1, 1.0, 10, flags=FLAG_DISPOSED),
            stored(2, 2.0, 11, writer=W2),
            stored(3, 3.0, 12),
            stored(4, 4.0, 13, flags=FLAG_DISPOSES | FLAG_DISPOSED),
        ]
        assert c.file_history(paged(page), Reading.deserialize, {W1})
        assert read(c) == [
            (1, 1.0, DISPOSED),
            (2, 2.0, NO_WRITERS),
            (3, 3.0, ALIVE),
            (4, 4.0, DISPOSED),
        ]
        assert c.history_writers == {3: W1}

    def test_the_last_stored_sample_of_an_instance_decides_its_state(self) -> None:
        c = cache()
        page = [stored(1, 1.0, 10, writer=W2), stored(1, 2.0, 20, writer=W1)]
        c.file_history(paged(page), Reading.deserialize, {W1})
        assert read(c) == [(1, 1.0, ALIVE), (1, 2.0, ALIVE)]
        c2 = cache()
        page = [stored(1, 1.0, 10, writer=W1), stored(1, 2.0, 20, writer=W2)]
        c2.file_history(paged(page), Reading.deserialize, {W1})
        assert read(c2) == [(1, 1.0, NO_WRITERS), (1, 2.0, NO_WRITERS)]

    def test_a_stored_sample_revives_a_no_writers_instance_with_its_generation(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 5))
        live(c, state_row(1, NO_WRITERS))
        c.file_history(paged([stored(1, 2.0, 10)]), Reading.deserialize, {W1})
        assert c.history_writers == {1: W1}
        samples = c.access(False, 10, ANY)
        assert [s.info.instance_state for s in samples] == [ALIVE, ALIVE]
        assert [s.info.no_writers_generation_count for s in samples] == [0, 1]
        assert c.writers_gone(set())
        assert read(c) == [(1, 1.0, NO_WRITERS), (1, 2.0, NO_WRITERS)]

    def test_late_history_older_than_live_data_is_dropped(self) -> None:
        c = cache()
        live(c, live_row(1, 5.0, 50), live_row(2, 6.0, 60))
        page = [
            stored(1, 4.0, 40),  # older than the live sample: dropped
            stored(1, 5.5, 50),  # as old: kept
            stored(2, 7.0, 70),  # newer: kept
            stored(3, 1.0, 10),  # an instance not filed live: kept
        ]
        assert c.file_history(paged(page), Reading.deserialize, {W1}, late=True)
        assert read(c) == [
            (1, 5.0, ALIVE),
            (1, 5.5, ALIVE),
            (2, 6.0, ALIVE),
            (2, 7.0, ALIVE),
            (3, 1.0, ALIVE),
        ]
        assert not c.file_history(paged([stored(1, 3.0, 30)]), Reading.deserialize, {W1}, late=True)

    def test_late_history_older_than_earlier_history_is_dropped(self) -> None:
        c = cache()
        c.file_history(paged([stored(1, 5.0, 50)]), Reading.deserialize, {W1})
        assert not c.file_history(paged([stored(1, 4.0, 40)]), Reading.deserialize, {W1}, late=True)
        assert c.file_history(
            paged([stored(1, 4.5, 45)]), Reading.deserialize, {W1}
        )  # not late: filed
        assert [v for _, v, _ in read(c)] == [5.0, 4.5]

    def test_a_live_sample_older_than_history_keeps_the_newest_mark(self) -> None:
        c = cache()
        c.file_history(paged([stored(1, 5.0, 50)]), Reading.deserialize, {W1})
        live(c, live_row(1, 1.0, 10))  # older, live: filed, but the newest stays 50
        assert not c.file_history(paged([stored(1, 4.0, 40)]), Reading.deserialize, {W1}, late=True)

    def test_a_live_sample_takes_its_instance_off_the_stored_writers_watch(self) -> None:
        c = cache()
        c.file_history(paged([stored(1, 1.0, 10), stored(2, 2.0, 11)]), Reading.deserialize, {W1})
        assert c.history_writers == {1: W1, 2: W1}
        live(c, live_row(1, 1.5, 12))
        assert c.history_writers == {2: W1}
        assert c.writers_gone(set())
        assert read(c) == [(1, 1.0, ALIVE), (1, 1.5, ALIVE), (2, 2.0, NO_WRITERS)]


class TestWritersGone:
    def test_only_instances_whose_stored_writer_left_lose_their_writers(self) -> None:
        c = cache()
        page = [stored(1, 1.0, 10, writer=W1), stored(2, 2.0, 11, writer=W2)]
        c.file_history(paged(page), Reading.deserialize, {W1, W2})
        assert not c.writers_gone({W1, W2})
        assert c.writers_gone({W1})
        assert read(c) == [(1, 1.0, ALIVE), (2, 2.0, NO_WRITERS)]
        assert c.history_writers == {1: W1}
        assert not c.writers_gone({W1})
        assert c.writers_gone(set())
        assert not c.writers_gone(set())
        assert read(c) == [(1, 1.0, NO_WRITERS), (2, 2.0, NO_WRITERS)]

    def test_a_taken_instance_is_only_forgotten(self) -> None:
        c = cache()
        c.file_history(paged([stored(1, 1.0, 10), stored(2, 2.0, 11)]), Reading.deserialize, {W1})
        first = c.access(False, 1, ANY)[0].info.instance_handle
        assert [s.data.value for s in c.access(True, 100, ANY, instance_handle=first)] == [1.0]
        assert c.writers_gone(set())  # instance 2 lost its writer; 1 is gone
        assert c.history_writers == {}
        assert read(c) == [(2, 2.0, NO_WRITERS)]


class TestKeys:
    def test_a_keyless_reading_of_a_keyed_type_uses_the_types_keys(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10, label="x"), live_row(1, 2.0, 11, label="y"))
        handles = {s.info.instance_handle for s in c.access(False, 10, ANY)}
        assert len(handles) == 1


class TestOneTake:
    """Rows of one take are all looked at, whatever comes before them."""

    def test_a_repeated_sample_does_not_hide_the_rest_of_the_take(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10))
        assert live(c, live_row(1, 1.0, 10), live_row(2, 2.0, 11))
        assert read(c) == [(1, 1.0, ALIVE), (2, 2.0, ALIVE)]

    def test_a_state_of_an_unknown_instance_does_not_hide_the_next(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10), live_row(2, 2.0, 11))
        live(c, state_row(2, DISPOSED))
        assert live(c, state_row(9, DISPOSED), state_row(2, NO_WRITERS), state_row(1, DISPOSED))
        assert read(c) == [(1, 1.0, DISPOSED), (2, 2.0, DISPOSED)]

    def test_live_samples_keep_their_source_time_and_writer(self) -> None:
        c = cache()
        live(c, live_row(1, 1.0, 10, writer=2))
        (sample,) = c.access(False, 10, ANY)
        assert sample.info.source_timestamp_ns == 10
        assert sample.info.publication_handle == 2

    def test_stored_samples_have_no_publication_handle_and_count_their_disposes(self) -> None:
        """A stored write_dispose followed by a newer write: the instance was disposed and
        came back, so the newer sample's disposed generation count is 1."""
        c = cache()
        page = [stored(1, 1.0, 10, flags=FLAG_DISPOSES), stored(1, 2.0, 20)]
        assert c.file_history(paged(page), Reading.deserialize, {W1})
        samples = c.access(False, 10, ANY)
        assert [s.info.publication_handle for s in samples] == [0, 0]
        assert [s.info.source_timestamp_ns for s in samples] == [10, 20]
        assert [s.info.disposed_generation_count for s in samples] == [0, 1]
        assert [s.info.instance_state for s in samples] == [ALIVE, ALIVE]

    def test_no_change_is_false(self) -> None:
        c = cache()
        assert c.writers_gone(set()) is False
        assert c.file_history(paged([]), Reading.deserialize, set()) is False
        assert live(c) is False
