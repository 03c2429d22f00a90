"""The ``dcps`` sink: rows published to a channelled topic, duplicates suppressed.

The writers take Arrow record batches. Each task encodes its rows (fixed-size
types in bulk through the CDR dtype, others row by row; a row that does not
fit the type fails the task, naming the column, before anything is
published), groups them by channel (by key hash, exactly like
``ChannelPublisher`` with ``OrderBy.key()``; keyless types round-robin by row
index), and publishes batches of at most ``batchRows`` rows in confirmed mode,
each with the idempotence key
``<query id>/<batch id>/<partition id>/<channel>/<first row index>``.
The store appends a batch and remembers its key in one transaction and
answers a repeated key with the original positions without appending again.
Spark re-runs a task (retry, speculative copy, or the whole micro-batch after
a restart from the checkpoint) on the same input rows in the same order, so
a re-run sends the same keys and adds nothing: the sink is effectively
exactly-once.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from idl import describe
from idl._errors import BadParameterError

from ._access import channel_of_key, connect_store
from ._decode import encode_batch
from ._faults import maybe_fail
from ._options import SourceOptions

__all__ = ["BatchWriter", "PublishedMessage", "StreamWriter", "publish_batches"]


@dataclass
class PublishedMessage(WriterCommitMessage):
    """What one task published: rows, new elements and suppressed duplicates."""

    rows: int
    appended: int
    duplicates: int


def _prepare(opts: SourceOptions, schema: StructType) -> None:
    """Check the rows' columns, then make sure the store knows the topic (driver side)."""
    info = describe(opts.type())
    names = set(schema.fieldNames())
    missing = [f.name for f in info.fields if f.name not in names]
    if missing:
        raise BadParameterError(
            f"cannot publish to {opts.topic!r}: the rows lack column(s) {missing} of "
            f"{info.typename}"
        )
    access = connect_store(opts.domain_id, opts.namespace, None, opts.timeout)
    access.ensure_topic(opts.topic, opts.channels, opts.retain_consumed, info.typename)


def _key_values(batch: Any, paths: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """The key field values of every row, as tuples."""
    columns = []
    for path in paths:
        steps = path.split(".")
        col = batch.column(steps[0])
        for step in steps[1:]:
            col = col.field(step)
        columns.append(col.to_pylist())
    return list(zip(*columns, strict=True))


def publish_batches(opts: SourceOptions, batches: Iterator[Any], prefix: str) -> PublishedMessage:
    """Publish one task's Arrow record batches with idempotence keys starting with ``prefix``.

    Every row is encoded (and checked) before anything is published, so a row
    that does not fit fails the task without publishing part of it.
    """
    t = opts.type()
    access = connect_store(opts.domain_id, opts.namespace, None, opts.timeout)
    count = access.channel_count(opts.topic)
    keys = describe(t).keys
    per_channel: dict[int, list[tuple[int, bytes]]] = {}
    memo: dict[tuple[Any, ...], int] = {}
    n = 0
    for batch in batches:
        payloads = encode_batch(t, batch)
        if keys:
            values = _key_values(batch, keys)
        for i, data in enumerate(payloads):
            index = n + i
            if not keys:
                channel = index % count
            else:
                channel = memo.get(values[i], -1)
                if channel < 0:  # hash the key exactly as ChannelPublisher does
                    sample = t.deserialize(data)  # type: ignore[attr-defined]
                    key_cdr = t.__idl__.serialize_key(sample)  # type: ignore[attr-defined]
                    channel = memo[values[i]] = channel_of_key(key_cdr, count)
            per_channel.setdefault(channel, []).append((index, data))
        n += len(payloads)
    futures = []
    step = opts.batch_rows
    for channel, items in sorted(per_channel.items()):
        for i in range(0, len(items), step):
            part = items[i : i + step]
            key = f"{prefix}/{channel}/{part[0][0]}"
            futures.append(access.publish_keyed(opts.topic, channel, [p for _, p in part], key))
    appended = duplicates = 0
    for fut in futures:
        published = fut.result(timeout=opts.timeout + 1)
        if published.duplicate:
            duplicates += published.count
        else:
            appended += published.count
    return PublishedMessage(n, appended, duplicates)


def _task_prefix(query: str, batch: str) -> str:
    ctx = TaskContext.get()
    partition = ctx.partitionId() if ctx is not None else 0
    return f"{query}/{batch}/{partition}"


class StreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("dcps")``: publishes each micro-batch, exactly once."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        _prepare(opts, schema)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> PublishedMessage:
        ctx = TaskContext.get()
        query = (ctx.getLocalProperty("sql.streaming.queryId") if ctx else None) or "query"
        batch = (ctx.getLocalProperty("streaming.sql.batchId") if ctx else None) or "0"
        message = publish_batches(self.opts, iterator, _task_prefix(query, batch))
        maybe_fail(self.opts.topic, "write")  # test-only hook (see _faults): after publishing
        return message

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        pass


class BatchWriter(DataSourceArrowWriter):
    """``df.write.format("dcps")``: publishes a DataFrame once (task retries deduplicated)."""

    def __init__(self, opts: SourceOptions, schema: StructType) -> None:
        _prepare(opts, schema)
        self.opts = opts
        self.job = uuid.uuid4().hex  # pickled into every task, so retries share it

    def write(self, iterator: Iterator[Any]) -> PublishedMessage:
        message = publish_batches(self.opts, iterator, _task_prefix(f"write-{self.job}", "0"))
        maybe_fail(self.opts.topic, "write")  # test-only hook (see _faults): after publishing
        return message
