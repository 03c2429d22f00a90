"""Samples as the reader returns them: data plus its full SampleInfo, and the state masks."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any, Generic, TypeVar

import attrs

from dcps._time import ns_to_datetime

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


@attrs.frozen
class SampleInfo:
    """Everything DDS says about one sample (DDS 1.4, 2.2.2.5.5)."""

    sample_state: SampleState
    view_state: ViewState
    instance_state: InstanceState
    valid_data: bool
    source_timestamp_ns: int
    instance_handle: int
    publication_handle: int
    disposed_generation_count: int
    no_writers_generation_count: int
    sample_rank: int
    generation_rank: int
    absolute_generation_rank: int

    @property
    def source_timestamp(self) -> datetime:
        """The writer's source timestamp as a UTC datetime."""
        return ns_to_datetime(self.source_timestamp_ns)

    @classmethod
    def _from_row(cls, row: tuple[Any, ...]) -> SampleInfo:
        """From a ``dds_sample_info_t`` as a tuple of its fields, in order."""
        return cls(
            _SAMPLE_STATES[row[0]],
            _VIEW_STATES[row[1]],
            _INSTANCE_STATES[row[2]],
            row[3],
            row[4],
            row[5],
            row[6],
            row[7],
            row[8],
            row[9],
            row[10],
            row[11],
        )

    @classmethod
    def _from_cyclone(cls, info: Any) -> SampleInfo:
        return cls(
            _SAMPLE_STATES[info.sample_state],
            _VIEW_STATES[info.view_state],
            _INSTANCE_STATES[info.instance_state],
            bool(info.valid_data),
            info.source_timestamp,
            info.instance_handle,
            info.publication_handle,
            info.disposed_generation_count,
            info.no_writers_generation_count,
            info.sample_rank,
            info.generation_rank,
            info.absolute_generation_rank,
        )


@attrs.frozen
class Sample(Generic[T]):
    """One sample: ``data`` (the full value, or only its key fields when
    ``info.valid_data`` is false, as after a dispose or unregister) and ``info``."""

    data: T
    info: SampleInfo

    @property
    def valid_data(self) -> bool:
        """False for samples that only announce an instance state change."""
        return self.info.valid_data
