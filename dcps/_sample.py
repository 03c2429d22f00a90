"""Samples as the reader returns them: data plus its full SampleInfo, and the state masks."""

from __future__ import annotations

import enum
from collections.abc import Callable
from datetime import datetime
from typing import Any, Generic, TypeVar

from dcps._cyclone.timing import ns_to_datetime
from dcps._record import Record, field, new_record
from idl._errors import BadParameterError
from idl._public import show_as

T = TypeVar("T")


class SampleState(enum.IntFlag):
    """Whether this reader has read a sample before."""

    __str__ = enum.Flag.__str__  # print names, not numbers

    READ = 1
    NOT_READ = 2
    ANY = 3


class ViewState(enum.IntFlag):
    """Whether the reader sees the instance for the first time (in this generation)."""

    __str__ = enum.Flag.__str__  # print names, not numbers

    NEW = 4
    NOT_NEW = 8
    ANY = 12


class InstanceState(enum.IntFlag):
    """Whether an instance is alive, disposed, or has no live writers."""

    __str__ = enum.Flag.__str__  # print names, not numbers

    ALIVE = 16
    NOT_ALIVE_DISPOSED = 32
    NOT_ALIVE_NO_WRITERS = 64
    NOT_ALIVE = 96
    ANY = 112


ANY_STATE = int(SampleState.ANY | ViewState.ANY | InstanceState.ANY)

# Enum lookups by value, built once: constructing flags per sample is slow.
_SAMPLE_STATES = {int(m): m for m in SampleState}
_VIEW_STATES = {int(m): m for m in ViewState}
_INSTANCE_STATES = {int(m): m for m in InstanceState}


_MASKS: dict[tuple[int, int, int], int] = {}


def state_mask(
    sample_states: SampleState | int,
    view_states: ViewState | int,
    instance_states: InstanceState | int,
) -> int:
    """The Cyclone mask for a combination of state selections (checked once, then cached)."""
    key = (sample_states, view_states, instance_states)
    mask = _MASKS.get(key)
    if mask is not None:
        return mask
    for value, kind, full in (
        (sample_states, "sample_states", SampleState.ANY),
        (view_states, "view_states", ViewState.ANY),
        (instance_states, "instance_states", InstanceState.ANY),
    ):
        if not isinstance(value, int) or not value or int(value) & ~int(full):
            raise BadParameterError(
                f"{kind} must be a non-empty combination of "
                f"{full.__class__.__name__}, got {value!r}"
            )
    mask = _MASKS[key] = int(sample_states) | int(view_states) | int(instance_states)
    return mask


class SampleInfo(Record):
    """Everything DDS says about one sample (DDS 1.4, 2.2.2.5.5).

    Immutable; compares and hashes by value; ``case SampleInfo(state, ...)``
    matches its fields in ``__match_args__`` order. Underneath it is a tuple of
    them (Cyclone's ``dds_sample_info_t``); use the attributes, the tuple
    layout is not API.
    """

    __slots__ = ()

    __match_args__ = (
        "sample_state",
        "view_state",
        "instance_state",
        "valid_data",
        "source_timestamp_ns",
        "instance_handle",
        "publication_handle",
        "disposed_generation_count",
        "no_writers_generation_count",
        "sample_rank",
        "generation_rank",
        "absolute_generation_rank",
    )

    # the three states are properties below: they turn the stored ints into enum members
    valid_data: bool = field(3, "False for samples that only announce an instance state change.")
    source_timestamp_ns: int = field(
        4, "The writer's source timestamp, in ns since the Unix epoch."
    )
    instance_handle: int = field(5, "The handle of the sample's instance in this reader.")
    publication_handle: int = field(6, "The handle of the writer that wrote the sample.")
    disposed_generation_count: int = field(
        7, "Times the instance went from disposed to alive before it."
    )
    no_writers_generation_count: int = field(
        8, "Times the instance went from no writers to alive before it."
    )
    sample_rank: int = field(
        9, "How many samples of the same instance follow this one in the result."
    )
    generation_rank: int = field(
        10, "Generations between this sample and its instance's latest in the result."
    )
    absolute_generation_rank: int = field(
        11, "Generations between this sample and its instance's latest."
    )

    def __new__(
        cls,
        sample_state: SampleState,
        view_state: ViewState,
        instance_state: InstanceState,
        valid_data: bool,
        source_timestamp_ns: int,
        instance_handle: int,
        publication_handle: int,
        disposed_generation_count: int,
        no_writers_generation_count: int,
        sample_rank: int,
        generation_rank: int,
        absolute_generation_rank: int,
    ) -> SampleInfo:
        states = []
        for value, table, kind in (
            (sample_state, _SAMPLE_STATES, "sample_state"),
            (view_state, _VIEW_STATES, "view_state"),
            (instance_state, _INSTANCE_STATES, "instance_state"),
        ):
            single = isinstance(value, int) and value in table and not value & (value - 1)
            if not single:
                raise BadParameterError(f"{kind} must be a single state, got {value!r}")
            states.append(table[value])
        return new_record(
            cls,
            (
                *states,
                valid_data,
                source_timestamp_ns,
                instance_handle,
                publication_handle,
                disposed_generation_count,
                no_writers_generation_count,
                sample_rank,
                generation_rank,
                absolute_generation_rank,
            ),
        )

    @property
    def sample_state(self) -> SampleState:
        """READ if this reader returned the sample before (with ``read``), else NOT_READ."""
        return _SAMPLE_STATES[self[0]]

    @property
    def view_state(self) -> ViewState:
        """NEW if this is the reader's first access to the instance (in this generation)."""
        return _VIEW_STATES[self[1]]

    @property
    def instance_state(self) -> InstanceState:
        """ALIVE, NOT_ALIVE_DISPOSED or NOT_ALIVE_NO_WRITERS at the time of the access."""
        return _INSTANCE_STATES[self[2]]

    @property
    def source_timestamp(self) -> datetime:
        """The writer's source timestamp as a UTC datetime."""
        return ns_to_datetime(self[4])

    def __repr__(self) -> str:
        values = (self.sample_state, self.view_state, self.instance_state, *self[3:])
        fields = ", ".join(f"{n}={v!r}" for n, v in zip(self.__match_args__, values, strict=True))
        return f"SampleInfo({fields})"


class Sample(Record, Generic[T]):
    """One sample: ``data`` (the full value, or only its key fields when
    ``info.valid_data`` is false, as after a dispose or unregister) and ``info``.

    Immutable; compares by value. Like :class:`SampleInfo` it is a tuple
    underneath, ``(data, info)``, so ``data, info = sample`` works.
    """

    __slots__ = ()

    __match_args__ = ("data", "info")

    data: T = field(0, "The value (only its keys when not ``valid_data``).")
    info: SampleInfo = field(1, "The sample's :class:`SampleInfo`.")

    def __new__(cls, data: T, info: SampleInfo) -> Sample[T]:
        return new_record(cls, (data, info))

    @property
    def valid_data(self) -> bool:
        """False for samples that only announce an instance state change."""
        valid: bool = self[1][3]
        return valid

    def __repr__(self) -> str:
        return f"Sample(data={self[0]!r}, info={self[1]!r})"


def samples_from_rows(
    rows: list[tuple[bytes, tuple[Any, ...]]],
    decode: Callable[[bytes], T],
    decode_key: Callable[[bytes], T],
) -> list[Sample[T]]:
    """Samples from (CDR bytes, ``dds_sample_info_t`` fields) pairs: the reader's hot path."""
    new = new_record
    return [
        new(Sample, (decode(data) if info[3] else decode_key(data), new(SampleInfo, info)))
        for data, info in rows
    ]


show_as("dcps", InstanceState, Sample, SampleInfo, SampleState, ViewState)
