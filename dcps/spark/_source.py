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

import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

if TYPE_CHECKING:
    from ._sink import BatchWriter, StreamWriter

from idl._errors import BadParameterError, PreconditionNotMetError

from ._access import FETCH_CHUNK, StoreAccess, connect_store
from ._decode import decode_run
from ._faults import maybe_fail
from ._options import SourceOptions
from ._schema import spark_schema
from ._states import Bounds, ChannelStates, StartStates, ship_states

__all__ = ["ChannelRange", "DcpsDataSource", "offsets_json"]

#: How long the store keeps a streaming query's group member without a commit (ms).
_MEMBER_TIMEOUT_MS = 30_000
#: Rows per Arrow batch a read task hands Spark: one FETCH reply's worth. Spark's JVM
#: converts a batch while the task decodes the next, and no reply is copied into a
#: larger run first (a whole partition in one batch left the JVM idle meanwhile).
READ_ROWS = FETCH_CHUNK


class ChannelRange(InputPartition):
    """One input partition: elements ``start .. end - 1`` of one channel."""

    def __init__(self, index: int, channel: int, start: int, end: int) -> None:
        super().__init__((channel, start, end))
        self.index = index
        self.channel = channel
        self.start = start
        self.end = end

    def __repr__(self) -> str:
        return f"ChannelRange(channel={self.channel}, {self.start}..{self.end - 1})"


def offsets_json(next_offsets: dict[int, int]) -> dict[str, int]:
    """Spark offset dict: string channel keys in sorted (string) order."""
    return {k: next_offsets[int(k)] for k in sorted(str(c) for c in next_offsets)}


def _from_offset(offset: dict[str, Any]) -> dict[int, int]:
    try:
        return {int(k): int(v) for k, v in offset.items()}
    except (TypeError, ValueError) as exc:
        raise BadParameterError(f"malformed dcps offset {offset!r}") from exc


def _access(opts: SourceOptions) -> StoreAccess:
    return connect_store(opts.domain_id, opts.namespace, opts.data_dir, opts.timeout)


def _group_access(opts: SourceOptions) -> StoreAccess:
    """The store over DDS (group commits travel over DDS, whatever ``data_dir`` says)."""
    return connect_store(opts.domain_id, opts.namespace, None, opts.timeout)


def _resolve(
    spec: str | dict[int, int], bounds: dict[int, tuple[int, int]], option: str
) -> dict[int, int]:
    """Next offsets per channel for ``earliest``/``latest``/an explicit map."""
    if spec == "earliest":
        return {c: h for c, (h, _) in bounds.items()}
    if spec == "latest":
        return {c: n for c, (_, n) in bounds.items()}
    assert isinstance(spec, dict)
    unknown = sorted(set(spec) - set(bounds))
    if unknown:
        raise BadParameterError(
            f"option {option}: channels {unknown} do not exist (the topic has "
            f"channels 0..{len(bounds) - 1})"
        )
    out = {}
    for c, (head, nxt) in bounds.items():
        v = spec.get(c, -2)
        out[c] = head if v == -2 else nxt if v == -1 else v
    return out


def _plan(start: dict[int, int], end: dict[int, int], per_partition: int) -> list[ChannelRange]:
    parts: list[ChannelRange] = []
    for c in sorted(end):
        lo, hi = start.get(c, 0), end[c]
        while lo < hi:
            top = min(hi, lo + per_partition)
            parts.append(ChannelRange(len(parts), c, lo, top))
            lo = top
    return parts


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


class _StreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(
        self, opts: SourceOptions, schema: StructType, states: StartStates | None = None
    ) -> None:
        self.opts = opts
        self.names = schema.fieldNames()
        #: shipped with the data source for the query's start, else the store's (see _states)
        self.states = ChannelStates(opts, states)
        self.available_now = False
        self.target: dict[int, int] | None = None
        self.reported: dict[int, int] | None = None
        self.member = uuid.uuid4().hex
        self.joined = False
        # No store request here: Spark also builds a stream reader in a planner
        # process only to pickle its read function, and a connection there (a
        # DDS participant, the store's discovery) cost each query 0.3-1 s. An
        # unknown topic still fails at start, in initialOffset (its first call).

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 (PySpark's name)
        # shipped heads for "earliest"; "latest" and explicit positions ask the store
        early = self.states.shipped() if self.opts.starting == "earliest" else None
        bounds = early if early is not None else self.states.store()
        return offsets_json(_resolve(self.opts.starting, bounds, "startingPositions"))

    def getDefaultReadLimit(self) -> ReadLimit:  # noqa: N802 (PySpark's name)
        if self.opts.max_per_trigger > 0:
            return ReadMaxRows(self.opts.max_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802 (PySpark's name)
        self.available_now = True
        if self.states.shipped() is None:
            self.target = _tails(self.states.store())
        else:  # the store's tails now: asked while the first micro-batch runs
            self.states.prefetch()

    def _target(self) -> dict[int, int]:
        """Trigger.AvailableNow: where the query ends, the store's tails at its start."""
        if self.target is None:
            self.target = _tails(self.states.store())
        return self.target

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:  # noqa: N802 (PySpark's name)
        begin = _from_offset(start)
        early = self.states.shipped()
        if early is not None and any(n > begin.get(c, 0) for c, (_, n) in early.items()):
            # the first micro-batch ends at the shipped tails (rows stored since: the next
            # one); never an end "without new rows" from them, which would stop the query
            latest = _tails(early)
            self.states.prefetch()
        elif self.available_now:
            # up to the target, which the store's tails never fall below: no request
            # (as Kafka's source)
            latest = dict(self._target())
        else:
            latest = _tails(self.states.store())
        self.reported = dict(latest)
        for c in latest:
            latest[c] = max(latest[c], begin.get(c, 0))
        if isinstance(limit, ReadMaxRows):
            latest = _admit(begin, latest, int(limit.max_rows))
        return offsets_json(latest)

    def reportLatestOffset(self) -> dict[str, int]:  # noqa: N802 (PySpark's name)
        # what the last latestOffset saw (Spark calls this right after it), as Kafka's source
        if self.reported is not None:
            return offsets_json(self.reported)
        return offsets_json(_tails(self.states.store()))

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        self.states.planned = True
        return _plan(_from_offset(start), _from_offset(end), self.opts.max_per_partition)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, ChannelRange):  # Spark's stand-in for "no partitions"
            return iter(())
        return _read(self.opts, partition, self.names)

    def commit(self, end: dict[str, Any]) -> None:
        """Commit the group's positions (the last consumed offset per channel).

        Commits go to the store over DDS, also when the rows are read from its
        file (``data_dir``).
        """
        if not self.opts.group:
            return
        done = {c: n - 1 for c, n in _from_offset(end).items() if n > 0}
        if not done:
            return
        access = _group_access(self.opts)
        for attempt in range(2):
            if not self.joined:
                access.join_group(self.opts.topic, self.opts.group, self.member, _MEMBER_TIMEOUT_MS)
                self.joined = True
            try:
                access.commit_group(self.opts.topic, self.opts.group, self.member, done)
                return
            except PreconditionNotMetError:  # membership expired: join again
                self.joined = False
                if attempt:
                    raise

    def stop(self) -> None:
        self.states.settle()
        if self.joined and self.opts.group:
            _group_access(self.opts).leave_group(self.opts.topic, self.opts.group, self.member)
        self.joined = False


def _tails(bounds: Bounds) -> dict[int, int]:
    """Each channel's next offset."""
    return {c: n for c, (_, n) in bounds.items()}


def _admit(begin: dict[int, int], latest: dict[int, int], limit: int) -> dict[int, int]:
    """At most ``limit`` elements in total, shared fairly between channels (water filling)."""
    want = {c: max(0, latest[c] - begin.get(c, 0)) for c in latest}
    give = dict.fromkeys(latest, 0)
    left = limit
    open_ = sorted(c for c in want if want[c] > 0)
    while left > 0 and open_:
        share = max(1, left // len(open_))
        for c in list(open_):
            take = min(share, want[c] - give[c], left)
            give[c] += take
            left -= take
            if give[c] >= want[c]:
                open_.remove(c)
            if left == 0:
                break
    return {c: begin.get(c, 0) + give[c] for c in latest}


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

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles the data source in a planner worker (kept across queries) to
        # ship it to the query's stream reader process: the topic's channel states go
        # along, so that process need not connect to the store for the query's start.
        # A data source that made a reader or writer here is being shipped to tasks
        # (with their read function): no states, and no connection for them.
        if getattr(self, "made", False):
            return {**self.__dict__, "states": None}
        return {**self.__dict__, "states": ship_states(self.opts)}

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
