"""The Spark sink's chunk boundary and driver hooks (docs/mutation.md, `_sink.py`).

``tests/spark/test_sink_mutants.py`` pins the 4 MiB ``CHUNK_BYTES`` boundary with
16-byte rows, whose totals are always a multiple of 16: a byte count off by one there
cuts the same chunks. Here the rows' sizes differ by single bytes, so a chunk's bytes
can stop one short of the limit: it must not go out before the limit is reached.
The driver's test-only stall hooks (``_faults.maybe_stall``, armed only through the
fault environment) must stop a commit exactly before, or exactly after, the store
commits: ``TestDriverKill`` kills a Spark driver there; here the stall is shortened
so that it raises instead, in this process. The sink's own functions are called as
Spark's workers and driver call them, against one embedded store; the store's file is
read back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

import pyarrow as pa
from pyspark.sql.types import StringType, StructField, StructType

import idl
from dcps.spark import _access, _faults
from dcps.spark._options import SourceOptions
from dcps.spark._sink import CHUNK_BYTES, _prepare, commit_stages, stage_rows
from dcps.store import Store
from tests.support.embedded_store import module_store


class Note(idl.Struct, typename="sink_left_test::Note"):
    """A keyless sample of 9 + len(text) bytes (a string at the end: no padding)."""

    text: idl.string


HERE = __name__


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store for the module, and the keywords that reach it."""
    with module_store(tmp_path_factory, worker_id, "sinkleft") as (store, domain, namespace):
        try:
            yield {"store": store, "domain": domain, "namespace": namespace}
        finally:  # the sink's cached connections: closed, so none outlives the module
            for key in [k for k in _access._cache if k[1] == namespace]:
                _access._cache.pop(key).close()


def note_options(served: dict[str, Any], topic: str) -> SourceOptions:
    opts = SourceOptions.parse(
        {
            "topic": topic,
            "type": f"{HERE}:Note",
            "domain": str(served["domain"]),
            "namespace": served["namespace"],
            "retainConsumed": "true",
            "channels": "1",
            "batchRows": "1000000",
        }
    )
    _prepare(opts, StructType([StructField("text", StringType())]))
    return opts


def stored_count(store: Store, topic: str) -> int:
    return store.log.channel_state(topic, 0).count


def notes(lengths: list[int]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"text": pa.array(["x" * n for n in lengths], pa.string())})


def test_a_chunk_one_byte_short_of_chunk_bytes_waits(
    served: dict[str, Any], topic_name: str
) -> None:
    """Rows totalling CHUNK_BYTES - 1 stay buffered; the next row completes one chunk."""
    store: Store = served["store"]
    opts = note_options(served, topic_name)
    assert len(Note(text="x" * 1015).serialize()) == 1024
    first = notes([1015] * 4095 + [1014])  # 4095 * 1024 + 1023 bytes
    assert CHUNK_BYTES - 1 == 4095 * 1024 + 1023
    message = stage_rows(opts, iter([first, notes([1])]), ("q", 0), 0)
    assert (message.chunks, message.rows) == (1, 4097)
    commit_stages(opts, [message], 0)
    run, _ = store.log.reader().fetch(topic_name, 0, 0, 1_000_000)
    assert list(run.counts) == [4097]


@pytest.mark.parametrize(("where", "committed"), [("commit", 0), ("committed", 3)])
def test_the_driver_stall_hooks_stop_the_commit_where_armed(
    served: dict[str, Any],
    topic_name: str,
    tmp_path: Any,
    monkeypatch: pytest.MonkeyPatch,
    where: str,
    committed: int,
) -> None:
    """Armed for this topic, the hook stops the commit before / after the store commits."""
    store: Store = served["store"]
    opts = note_options(served, topic_name)
    message = stage_rows(opts, iter([notes([1, 2, 3])]), ("q", 0), 0)
    monkeypatch.setenv(_faults.FAULTS_ENV, str(tmp_path))
    monkeypatch.setattr(_faults, "STALL_SECONDS", 0.05)  # raise soon instead of waiting
    armed = _faults.marker(tmp_path, topic_name, where)
    armed.touch()
    with pytest.raises(_faults.InjectedFaultError, match=f"stall in the {where} of topic"):
        commit_stages(opts, [message], 0)
    assert not armed.exists()
    assert armed.with_name(armed.name + ".reached").exists()
    assert stored_count(store, topic_name) == committed
    assert commit_stages(opts, [message], 0) == 3  # unarmed: the commit (again) answers 3
    assert stored_count(store, topic_name) == 3
