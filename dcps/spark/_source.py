"""The ``dcps`` PySpark data source: batch reads and the Structured Streaming source.

Offsets are JSON objects ``{"<channel>": next_offset, ...}`` with string keys in
sorted order, one entry per channel: the query has consumed every element
below ``next_offset``. A micro-batch ``(start, end]`` is planned as one input
partition per channel range ``start[c] .. end[c] - 1`` (split beyond
``maxElementsPerPartition``), and ``read`` fetches exactly that range from the
store, which never changes stored elements, so a retried task or a restarted
query reads the same rows: with Spark's checkpointed offsets and an
idempotent sink (the file sink) this is exactly-once.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import attrs
import numpy as np
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    from ._sink import BatchWriter, StreamWriter

from ._access import FETCH_CHUNK, StoreAccess, connect_store
from ._decode import decode_run
from ._faults import maybe_fail
from ._options import SourceOptions
from ._schema import spark_schema
from ._states import StartStates, ship_states
from ._stream import (  # the stream reader and offsets (light: see _stream); re-exported
    ChannelRange,
    _plan,
    _resolve,
    _StreamReader,
    offsets_json,
    start_source_blob,
)
from ._stream import _admit as _admit
from ._stream import _from_offset as _from_offset

__all__ = ["ChannelRange", "DcpsDataSource", "offsets_json"]
#: Rows per Arrow batch a read task hands Spark: one FETCH reply's worth. Spark's JVM
#: converts a batch while the task decodes the next, and no reply is copied into a
#: larger run first (a whole partition in one batch left the JVM idle meanwhile).
READ_ROWS = FETCH_CHUNK


def _access(opts: SourceOptions) -> StoreAccess:
    return connect_store(opts.domain_id, opts.namespace, opts.data_dir, opts.timeout)


def _read(opts: SourceOptions, part: ChannelRange, schema_names: Sequence[str]) -> Iterator[Any]:
    t = opts.type()
    access = _access(opts)
    first = True
    for run in access.fetch_runs(opts.topic, part.channel, part.start, part.end, READ_ROWS):
        batch = decode_run(t, run, part.channel)
        if opts.start_ns is not None or opts.end_ns is not None:
            import pyarrow as pa  # third-party, loaded where rows are read (not on import)

            stamps = run.timestamps()
            mask = np.ones(len(stamps), dtype=bool)
            if opts.start_ns is not None:
                mask &= stamps >= opts.start_ns
            if opts.end_ns is not None:
                mask &= stamps < opts.end_ns
            batch = batch.filter(pa.array(mask))
        if batch.num_rows:
            yield _conform(batch, schema_names)
        if first:
            maybe_fail(opts.topic, "read")  # test-only hook (see _faults): after some rows
            first = False


def _conform(batch: Any, schema_names: Sequence[str]) -> Any:
    """The batch with the exact Arrow schema Spark expects (field metadata included)."""
    return batch.select(list(schema_names))


class _BatchReader(DataSourceReader):
    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        self.opts = opts
        self.names = schema.fieldNames()
        access = _access(opts)
        bounds = access.bounds(opts.topic)
        start = _resolve(opts.starting, bounds, "startingPositions")
        end = _resolve(opts.ending, bounds, "endingPositions")
        if opts.start_ns is not None:  # skip whole prefixes older than the time range
            for c in start:
                start[c] = max(start[c], access.first_at(opts.topic, c, opts.start_ns, end[c]))
        self.parts = _plan(start, end, opts.max_per_partition)

    def partitions(self) -> Sequence[InputPartition]:
        return self.parts

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, ChannelRange):  # Spark's stand-in for "no partitions"
            return iter(())
        return _read(self.opts, partition, self.names)


class DcpsDataSource(DataSource):
    """PySpark data source ``dcps``: channelled topics kept by a dcps store.

    Options: ``topic``; ``type`` (``package.module:Class``) or ``idl_file`` +
    ``type_name``; ``domain`` (default 0); ``namespace`` (``dcps``);
    ``data_dir`` (read the store's file directly instead of over DDS);
    ``startingPositions`` / ``endingPositions`` (``earliest``, ``latest`` or
    JSON ``{"<channel>": offset}``); ``startTimestamp`` / ``endTimestamp``
    (batch reads; ISO 8601 or ns); ``maxElementsPerTrigger``; ``group``
    (commit the query's positions as this subscriber group); ``timeout`` (s).
    Sink options: ``channels`` and ``retainConsumed`` (for a topic the sink
    creates), ``batchRows`` (rows per idempotent publish batch).
    """

    @classmethod
    def name(cls) -> str:
        return "dcps"

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__(options)
        self.opts = SourceOptions.parse(options)
        self.states: StartStates | None = None
        self.made = False  # a reader or writer was made from it in this process

    def __reduce_ex__(self, protocol: Any) -> Any:
        # Spark pickles the data source in a planner worker (kept across queries) to
        # ship it to the query's stream reader process, a fresh interpreter: it goes as a
        # StartSource pickled by value, which unpickles without importing dcps (that
        # process's start is on every query's critical path, see _stream), with the
        # topic's channel states, so that process need not connect to the store for the
        # query's start either. A data source that made a reader or writer here is being
        # shipped to tasks (with their read function): itself, no states, no connection.
        if getattr(self, "made", False):
            return super().__reduce_ex__(protocol)
        blob = start_source_blob(
            self.options, attrs.asdict(self.opts, recurse=False), ship_states(self.opts)
        )
        return (pickle.loads, (blob,))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "states": None}  # tasks need no states (see __reduce_ex__)

    def schema(self) -> StructType:
        return spark_schema(self.opts.type())

    def reader(self, schema: StructType) -> DataSourceReader:
        self.made = True
        return _BatchReader(self.opts, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (PySpark's name)
        self.made = True
        return _StreamReader(self.opts, schema, getattr(self, "states", None))

    def streamWriter(self, schema: StructType, overwrite: bool) -> StreamWriter:  # noqa: N802 (PySpark's name)
        # The sink is imported on use: Spark starts a new Python process for each
        # streaming query's reader, which then does not load the sink's modules.
        from ._sink import StreamWriter

        self.made = True
        return StreamWriter(self.opts, schema)

    def writer(self, schema: StructType, overwrite: bool) -> BatchWriter:
        from ._sink import BatchWriter  # on use, as in streamWriter

        self.made = True
        return BatchWriter(self.opts, schema)
