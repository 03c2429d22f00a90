"""The Structured Streaming reader, and what a query's stream reader process unpickles.

Spark starts a fresh Python process for each streaming query's stream reader
(``pyspark.sql.streaming.python_streaming_source_runner``) and unpickles the
data source there before anything else. Unpickled by reference, the data
source's classes import their modules, and with them ``dcps`` and ``idl``
(Cyclone DDS, numpy): about 0.2 s of every query's fixed cost, before its
first offset. So the data source ships to that process as a
:class:`StartSource` pickled **by value** (:func:`start_source_blob`): its
class, the stream reader's and those of :mod:`dcps.spark._states` travel as
code, and this module and ``_states`` import only the standard library and
PySpark at the top. The dcps imports are made by the first call that needs
them (a store request, in the background thread of
:meth:`~dcps.spark._states.ChannelStates.prefetch`; a read task): the
query's start, from the shipped channel states, imports none.

Offsets are JSON objects ``{"<channel>": next_offset, ...}`` with string keys
in sorted order, one entry per channel: the query has consumed every element
below ``next_offset``. A micro-batch ``(start, end]`` is planned as one input
partition per channel range ``start[c] .. end[c] - 1`` (split beyond
``maxElementsPerPartition``).
"""

from __future__ import annotations

import sys
import threading
import types
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from ._states import Bounds, ChannelStates, StartStates

if TYPE_CHECKING:
    from ._access import StoreAccess
    from ._options import SourceOptions
    from ._source import DcpsDataSource

__all__ = ["ChannelRange", "StartSource", "offsets_json", "start_source_blob"]

#: How long the store keeps a streaming query's group member without a commit (ms).
_MEMBER_TIMEOUT_MS = 30_000
#: Held while the modules are registered for pickling by value (one blob at a time).
_by_value = threading.Lock()


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
        from idl._errors import BadParameterError  # on use: see the module docstring

        raise BadParameterError(f"malformed dcps offset {offset!r}") from exc


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
        from idl._errors import BadParameterError  # on use: see the module docstring

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


def _full_options(opts: Any) -> SourceOptions:
    """``opts`` as :class:`SourceOptions` (a shipped copy is a plain namespace)."""
    from ._options import SourceOptions  # on use: see the module docstring

    if isinstance(opts, SourceOptions):
        return opts
    return SourceOptions(**vars(opts))


def _group_access(opts: SourceOptions) -> StoreAccess:
    """The store over DDS (group commits travel over DDS, whatever ``data_dir`` says)."""
    from ._access import connect_store  # on use: see the module docstring

    return connect_store(opts.domain_id, opts.namespace, None, opts.timeout)


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
        # A partition's class may be a by-value copy of ChannelRange (planned in the
        # reader's process): told apart from Spark's stand-in for "no partitions",
        # InputPartition(None), by its value, not by isinstance.
        if not isinstance(partition.value, tuple):
            return iter(())
        from ._source import _read  # on use (a read task): see the module docstring

        return _read(_full_options(self.opts), cast(ChannelRange, partition), self.names)

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
        from idl._errors import PreconditionNotMetError  # on use: see the module docstring

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


class StartSource(DataSource):
    """The ``dcps`` data source as shipped to a query's stream reader process.

    It carries the parsed options as a plain namespace and the channel states
    read when it was pickled (:attr:`states`). :meth:`streamReader` makes the
    stream reader without importing dcps; every other call (a planner worker
    gets this copy too) goes to a :class:`~dcps.spark._source.DcpsDataSource`
    made from the same options, importing dcps then.
    """

    opts: Any  # a types.SimpleNamespace of SourceOptions' fields
    states: StartStates | None

    @classmethod
    def name(cls) -> str:
        return "dcps"

    def _full(self) -> DcpsDataSource:
        from ._source import DcpsDataSource  # on use: see the module docstring

        full = DcpsDataSource.__new__(DcpsDataSource)
        DataSource.__init__(full, self.options)
        full.opts = _full_options(self.opts)
        full.states = None
        full.made = True  # it makes a reader or writer: shipped on without states
        return full

    def schema(self) -> StructType:
        return self._full().schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        return self._full().reader(schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 (PySpark's name)
        return _StreamReader(cast("SourceOptions", self.opts), schema, self.states)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802 (PySpark's name)
        return self._full().streamWriter(schema, overwrite)

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return self._full().writer(schema, overwrite)


def start_source_blob(
    options: Mapping[str, str], fields: dict[str, Any], states: StartStates | None
) -> bytes:
    """A :class:`StartSource` pickled with its classes by value (see the module docstring).

    ``fields`` are :class:`SourceOptions`' fields, ``options`` Spark's option map.
    ``pickle.loads`` of the result needs neither dcps nor idl importable until a
    call that needs them.
    """
    from pyspark import cloudpickle as _cloudpickle  # PySpark's copy: Spark pickles with it

    cloudpickle: Any = _cloudpickle  # untyped module
    source = StartSource(cast(Any, options))
    source.opts = types.SimpleNamespace(**fields)
    source.states = states
    modules = [sys.modules[__name__], sys.modules[ChannelStates.__module__]]
    with _by_value:
        for module in modules:
            cloudpickle.register_pickle_by_value(module)
        try:
            return bytes(cloudpickle.dumps(source))
        finally:
            for module in modules:
                cloudpickle.unregister_pickle_by_value(module)
