"""Recording plain DDS topics, with their SampleInfo, into Parquet datasets.

One dataset per topic under ``out_dir/<topic>/``, Hive-partitioned by the UTC
reception date (``date=YYYY-MM-DD/part-*.parquet``), so Spark
(``spark.read.parquet(out_dir + "/<topic>")``) and pandas
(``pandas.read_parquet``) read it back with the mapped schema and a ``date``
column. Columns: the envelope (``_channel`` is 0, ``_offset`` counts samples
in one recording run, ``_store_timestamp`` is the reception time,
``_source_timestamp`` the writer's), the SampleInfo (``_sample_state``,
``_view_state``, ``_instance_state``, ``_valid_data``, ``_instance_handle``,
``_publication_handle``, ``_disposed_generation_count``,
``_no_writers_generation_count``) and the type's members, null in samples
without valid data except the key fields.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dcps
from dcps._wait import wait_until
from idl import describe
from idl._errors import (
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    OutOfResourcesError,
    PreconditionNotMetError,
)

from ._decode import _key_json, _py_value, _ts_array
from ._schema import arrow_row_schema, arrow_type_of, spark_schema

__all__ = ["INFO_COLUMNS", "Recorder", "record", "recording_arrow_schema", "recording_spark_schema"]

INFO_COLUMNS = (
    "_sample_state",
    "_view_state",
    "_instance_state",
    "_valid_data",
    "_instance_handle",
    "_publication_handle",
    "_disposed_generation_count",
    "_no_writers_generation_count",
)


def recording_arrow_schema(t: type) -> Any:
    """The Arrow schema of a recording of topic type ``t`` (without the ``date`` partition)."""
    import pyarrow as pa

    base = arrow_row_schema(t)
    envelope = [base.field(i) for i in range(5)]
    handle = pa.decimal128(20, 0)
    info = [
        pa.field("_sample_state", pa.string(), nullable=False),
        pa.field("_view_state", pa.string(), nullable=False),
        pa.field("_instance_state", pa.string(), nullable=False),
        pa.field("_valid_data", pa.bool_(), nullable=False),
        pa.field("_instance_handle", handle, nullable=False),
        pa.field("_publication_handle", handle, nullable=False),
        pa.field("_disposed_generation_count", pa.int32(), nullable=False),
        pa.field("_no_writers_generation_count", pa.int32(), nullable=False),
    ]
    data = [base.field(i).with_nullable(True) for i in range(5, len(base))]
    return pa.schema(envelope + info + data, metadata=base.metadata)


def recording_spark_schema(t: type) -> Any:
    """The Spark ``StructType`` of a recording of ``t`` (plus the ``date`` partition column)."""
    from pyspark.sql import types as st

    base = spark_schema(t)
    handle = st.DecimalType(20, 0)
    info = [
        st.StructField("_sample_state", st.StringType(), False),
        st.StructField("_view_state", st.StringType(), False),
        st.StructField("_instance_state", st.StringType(), False),
        st.StructField("_valid_data", st.BooleanType(), False),
        st.StructField("_instance_handle", handle, False),
        st.StructField("_publication_handle", handle, False),
        st.StructField("_disposed_generation_count", st.IntegerType(), False),
        st.StructField("_no_writers_generation_count", st.IntegerType(), False),
    ]
    data = [st.StructField(f.name, f.dataType, True, f.metadata) for f in base.fields[5:]]
    return st.StructType(
        base.fields[:5] + info + data + [st.StructField("date", st.DateType(), True)]
    )


def _table(t: type, rows: list[tuple[int, int, Any, Any]]) -> Any:
    """Arrow table of (offset, reception ns, data, info) rows."""
    import decimal

    import pyarrow as pa

    schema = recording_arrow_schema(t)
    info_t = describe(t)
    n = len(rows)
    keys = {p.split(".")[0] for p in info_t.keys}
    columns: dict[str, Any] = {}
    for f in info_t.fields:
        values = [
            _py_value(getattr(d, f.name), f) if (i.valid_data or f.name in keys) else None
            for _, _, d, i in rows
        ]
        columns[f.name] = pa.array(values, type=arrow_type_of(f))
    infos = [i for _, _, _, i in rows]
    arrays = [
        pa.array([0] * n, type=pa.int32()),
        pa.array([o for o, _, _, _ in rows], type=pa.int64()),
        _ts_array([r for _, r, _, _ in rows], n),
        _ts_array([i.source_timestamp_ns for i in infos], n),
        _key_json(columns, info_t.keys, n),
        pa.array([i.sample_state.name for i in infos], type=pa.string()),
        pa.array([i.view_state.name for i in infos], type=pa.string()),
        pa.array([i.instance_state.name for i in infos], type=pa.string()),
        pa.array([bool(i.valid_data) for i in infos], type=pa.bool_()),
        pa.array([decimal.Decimal(i.instance_handle) for i in infos], type=pa.decimal128(20, 0)),
        pa.array([decimal.Decimal(i.publication_handle) for i in infos], type=pa.decimal128(20, 0)),
        pa.array([i.disposed_generation_count for i in infos], type=pa.int32()),
        pa.array([i.no_writers_generation_count for i in infos], type=pa.int32()),
    ]
    arrays += [columns[f.name] for f in info_t.fields]
    return pa.Table.from_arrays(arrays, schema=schema)


def _write_error(topic: str, folder: Path, exc: OSError) -> DcpsError:
    """The error of a failed write of ``topic``'s samples into ``folder``."""
    cause = exc.strerror or str(exc)
    message = f"cannot write the samples of topic {topic!r} to {folder}: {cause}"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return OutOfResourcesError(message)
    return PreconditionNotMetError(message)


class Recorder:
    """Records plain DDS topics of one domain to Parquet until :meth:`close`.

    ``topics`` maps topic names to their types. Readers are reliable and keep
    all samples unless ``reader_qos`` says otherwise; ``partitions`` sets their DDS
    partitions and ``network`` the participant's network (default: the environment).
    Buffered samples are written every ``flush_interval`` (one file per topic and
    date per flush).

    When writing fails (a full disk, a directory that became unwritable) the
    recorder stops: :attr:`error` holds the :class:`~dcps.DcpsError` naming
    the topic, the path and the cause, ``on_error`` is called with it (from
    the recorder's thread), and the samples not written stay in memory.
    """

    def __init__(
        self,
        out_dir: str | Path,
        topics: Mapping[str, type],
        *,
        domain_id: int = 0,
        partitions: Iterable[str] = (),
        flush_interval: timedelta = timedelta(seconds=1),
        reader_qos: Any = None,
        network: Any = None,
        on_error: Callable[[DcpsError], None] | None = None,
    ) -> None:
        # qos is imported here, not at the top, to keep `import dcps.spark` (which Spark's
        # workers run) free of the QoS package (tests/spark/test_spark_import.py pins it).
        import qos

        if not topics:
            raise BadParameterError("record needs at least one topic")
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.counts: dict[str, int] = dict.fromkeys(topics, 0)
        self._flush = flush_interval.total_seconds()
        self._types = dict(topics)
        self._participant = dcps.DomainParticipant(domain_id, network=network)
        parts = list(partitions)
        self._subscriber = dcps.Subscriber(self._participant, partitions=parts) if parts else None
        if reader_qos is None:
            reader_qos = qos.DataReaderQos(qos.Reliability.RELIABLE, qos.History.KEEP_ALL)
        self._readers: dict[str, Any] = {}
        self._waitset = dcps.WaitSet(self._participant)
        for name, t in topics.items():
            describe(t)
            topic: Any = dcps.Topic(self._participant, name, t)
            reader = dcps.DataReader(self._subscriber or self._participant, topic, qos=reader_qos)
            self._readers[name] = reader
            self._waitset.attach(dcps.ReadCondition(reader))
        self._buffers: dict[str, list[tuple[int, int, Any, Any]]] = {n: [] for n in topics}
        self._stop = threading.Event()
        self._on_error = on_error
        #: Why recording stopped early (None while it runs or after a normal close).
        self.error: DcpsError | None = None
        self._thread = threading.Thread(target=self._run, name="dcps-recorder", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            last = time.monotonic()
            while not self._stop.is_set():
                with contextlib.suppress(DcpsTimeoutError):
                    self._waitset.wait(timedelta(milliseconds=100))
                self._take()
                if time.monotonic() - last >= self._flush:
                    self.flush()
                    last = time.monotonic()
            self._take()
            self.flush()
        except Exception as exc:  # the recorder's thread ends; its owner learns why
            failure = exc if isinstance(exc, DcpsError) else DcpsError(f"recording failed: {exc}")
            self.error = failure
            if self._on_error is not None:
                self._on_error(failure)

    def _take(self) -> None:
        for name, reader in self._readers.items():
            samples = reader.take()
            if not samples:
                continue
            now = time.time_ns()
            buf = self._buffers[name]
            for s in samples:
                buf.append((self.counts[name], now, s.data, s.info))
                self.counts[name] += 1

    def flush(self) -> None:
        """Write the buffered samples (one Parquet file per topic and reception date)."""
        import pyarrow.parquet as pq

        for name, buf in self._buffers.items():
            if not buf:
                continue
            rows, self._buffers[name] = buf, []
            by_date: dict[str, list[tuple[int, int, Any, Any]]] = {}
            for row in rows:
                day = datetime.fromtimestamp(row[1] / 1e9, tz=UTC).date().isoformat()
                by_date.setdefault(day, []).append(row)
            written: set[str] = set()
            for day, day_rows in by_date.items():
                folder = self.out_dir / name / f"date={day}"
                tmp = folder / f".part-{uuid.uuid4().hex}.parquet.tmp"
                try:
                    folder.mkdir(parents=True, exist_ok=True)
                    pq.write_table(_table(self._types[name], day_rows), tmp)
                    tmp.rename(folder / f"part-{time.time_ns()}-{uuid.uuid4().hex[:8]}.parquet")
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        tmp.unlink(missing_ok=True)
                    # nothing is lost: what was not written goes back to the buffer
                    kept = [r for d, rs in by_date.items() if d not in written for r in rs]
                    self._buffers[name] = kept + self._buffers[name]
                    raise _write_error(name, folder, exc) from exc
                written.add(day)

    def wait_for_writers_gone(self, timeout: float | None = 10.0) -> None:
        """Block until no writer of a recorded topic is matched any more.

        Once a writer is unmatched, the samples it left behind (the unregister or
        dispose of each of its instances, samples without data) are in the
        readers' caches, so a :meth:`close` right after records them too.
        :class:`~dcps.DcpsTimeoutError` if writers are still matched after ``timeout``
        seconds.
        """
        readers = list(self._readers.values())
        wait_until(
            lambda: all(r.subscription_matched_status.current_count == 0 for r in readers),
            timeout,
            f"recorder of {', '.join(map(repr, self._readers))} waiting for its writers to leave",
        )

    def close(self) -> None:
        """Stop, write what is buffered and release the DDS entities (idempotent)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join()
        self._participant.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def record(
    out_dir: str | Path,
    topics: Mapping[str, type],
    *,
    domain_id: int = 0,
    partitions: Iterable[str] = (),
    duration: timedelta | None = None,
    stop: threading.Event | None = None,
    on_ready: Callable[[Recorder], None] | None = None,
) -> dict[str, int]:
    """Record ``topics`` until ``duration`` passed or ``stop`` is set; return sample counts."""
    event = stop or threading.Event()
    with Recorder(out_dir, topics, domain_id=domain_id, partitions=partitions) as rec:
        if on_ready is not None:
            on_ready(rec)
        event.wait(None if duration is None else duration.total_seconds())
    return dict(rec.counts)
