"""A streaming query's start from the channel states its data source ships (dcps/spark/_states.py).

Spark runs a query's stream reader in a Python process of its own; the data source
pickled for it carries the topic's channel states, read over the pickling process's
store connection, so the query starts without one:

- driven as Spark's runner drives it, a stream reader unpickled after its store stopped
  still plans the first micro-batch exactly, and only the end of the query needs the store;
- shipped states older than ``MAX_AGE`` (or dated in the future) are not used;
- on a real Spark, rows stored between ``load()`` and ``start()``, and rows stored between
  two ``availableNow`` runs of the same DataFrame, are all read, each once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark import cloudpickle  # as Spark pickles a data source
from pyspark.sql.streaming.datasource import ReadAllAvailable

from dcps.spark import _access, _states
from dcps.spark._source import DcpsDataSource, _StreamReader
from dcps.spark._states import MAX_AGE, SHIP_TIMEOUT, StartStates
from idl._errors import DcpsTimeoutError
from tests.support.spark_support import (
    StoreProcess,
    publish,
    spark_session,
    store_process,
    worker_domain,
)

pytestmark = [pytest.mark.multiprocess]

TYPE = "spark_types:Reading"
CHANNELS = 3


def options(domain: int, namespace: str, topic: str, timeout: str = "30") -> dict[str, str]:
    """Source options for ``topic`` of a store."""
    return {
        "topic": topic,
        "type": TYPE,
        "domain": str(domain),
        "namespace": namespace,
        "timeout": timeout,
    }


def drop_connections(namespace: str) -> None:
    """Close and forget this process's cached connections to ``namespace``'s store."""
    for key in [k for k in _access._cache if k[1] == namespace]:
        _access._cache.pop(key).close()


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module."""
    domain = worker_domain(worker_id)
    namespace = f"start_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("spark_start"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}
    drop_connections(namespace)


class TestShippedStates:
    def test_the_first_micro_batch_is_planned_without_the_store(
        self, worker_id: str, tmp_path: Path
    ) -> None:
        """Pickled where a connection exists, then the store stops: the unpickled reader
        still gives the query's start, its first end (all 12 rows) and the reported latest
        offset; the next latestOffset, which needs the store, fails naming its namespace."""
        domain = worker_domain(worker_id)
        namespace = f"ship_{uuid.uuid4().hex[:8]}"
        topic = f"ship_{uuid.uuid4().hex[:6]}"
        store = StoreProcess(tmp_path / "store", domain, namespace)
        try:
            publish(domain, namespace, topic, CHANNELS, 0, 12)
            _access.connect_store(domain, namespace, None, 30.0)  # the planner's connection
            blob = cloudpickle.dumps(DcpsDataSource(options(domain, namespace, topic, "2")))
        finally:
            drop_connections(namespace)
            store.stop()
        source = cloudpickle.loads(blob)
        reader = source.streamReader(source.schema())
        try:
            reader.prepareForTriggerAvailableNow()
            start = reader.initialOffset()
            assert start == {str(c): 0 for c in range(CHANNELS)}
            end = reader.latestOffset(start, ReadAllAvailable())
            assert sorted(end) == [str(c) for c in range(CHANNELS)]
            assert sum(end.values()) == 12
            assert reader.reportLatestOffset() == end
            parts = reader.partitions(start, end)
            assert sum(p.end - p.start for p in parts) == 12
            with pytest.raises(DcpsTimeoutError, match=namespace):
                reader.latestOffset(end, ReadAllAvailable())
        finally:
            reader.stop()
            drop_connections(namespace)

    def test_a_store_gone_since_the_planner_connected_does_not_hold_up_pickling(
        self, worker_id: str, tmp_path: Path
    ) -> None:
        """The planner's connection outlived its store: pickling the data source (Spark's
        load()) waits at most SHIP_TIMEOUT for the store, not the 30 s request timeout, and
        ships nothing, so the query's first offset call asks the store and names it."""
        domain = worker_domain(worker_id)
        namespace = f"gone_{uuid.uuid4().hex[:8]}"
        topic = f"gone_{uuid.uuid4().hex[:6]}"
        store = StoreProcess(tmp_path / "store", domain, namespace)
        try:
            publish(domain, namespace, topic, CHANNELS, 0, 3)
            _access.connect_store(domain, namespace, None, 30.0)
        finally:
            store.stop()
        try:
            began = time.monotonic()
            blob = cloudpickle.dumps(DcpsDataSource(options(domain, namespace, topic, "2")))
            assert time.monotonic() - began < SHIP_TIMEOUT + 10.0  # not the 30 s
        finally:
            drop_connections(namespace)
        source = cloudpickle.loads(blob)
        reader = source.streamReader(source.schema())
        try:
            with pytest.raises(DcpsTimeoutError, match=namespace):
                reader.initialOffset()
        finally:
            reader.stop()
            drop_connections(namespace)

    def test_a_source_that_made_a_reader_ships_nothing_and_does_not_connect(
        self, worker_id: str
    ) -> None:
        """Spark's plan-read worker pickles the data source again, with the read function
        it sends to tasks: that copy carries no states and starts no store connection. The
        planner's copy (no reader made) starts one in the background, for the next query."""
        domain = worker_domain(worker_id)
        namespace = f"made_{uuid.uuid4().hex[:8]}"  # no store: a connection would wait
        opts = options(domain, namespace, "t", "2")
        key = (domain, namespace, None)
        used = DcpsDataSource(opts)
        used.streamReader(used.schema())
        assert cloudpickle.loads(cloudpickle.dumps(used)).states is None
        assert key not in _states._warming
        assert _access.cached_store(domain, namespace) is None
        fresh = cloudpickle.loads(cloudpickle.dumps(DcpsDataSource(opts)))
        assert fresh.states is None  # no connection in this process yet
        assert key in _states._warming  # ... so one is being made, in the background

    @pytest.mark.parametrize("age", [MAX_AGE + 1.0, -60.0])
    def test_stale_or_future_states_are_not_used(
        self, env: dict[str, Any], unique: str, age: float
    ) -> None:
        """States of 999 rows per channel, read ``age`` s ago: the reader asks the store
        (12 rows); the same states read just now are taken as they are."""
        topic = f"stale_{unique}"
        publish(env["domain"], env["namespace"], topic, CHANNELS, 0, 12)
        source = DcpsDataSource(options(env["domain"], env["namespace"], topic))
        schema = source.schema()
        fake = {c: (0, 999) for c in range(CHANNELS)}
        start = {str(c): 0 for c in range(CHANNELS)}

        old = _StreamReader(source.opts, schema, StartStates(time.time() - age, fake))
        end = old.latestOffset(start, ReadAllAvailable())
        assert sum(end.values()) == 12
        assert old.reportLatestOffset() == end

        fresh = _StreamReader(source.opts, schema, StartStates(time.time(), fake))
        assert fresh.latestOffset(start, ReadAllAvailable()) == {
            str(c): 999 for c in range(CHANNELS)
        }


class TestOnSpark:
    @pytest.mark.timeout(420)  # a SparkSession, three publishing processes and two queries
    def test_rows_stored_after_load_and_between_runs_are_read_once(
        self, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """30 rows, then load(), then 20 more, then an availableNow run: 50 rows. Then 10
        more and the same DataFrame again from the same checkpoint: 60 rows, each once."""
        spark = spark_session()
        topic = f"late_{unique}"
        publish(env["domain"], env["namespace"], topic, CHANNELS, 0, 30)

        def load() -> Any:
            return (
                spark.readStream.format("dcps")
                .options(**options(env["domain"], env["namespace"], topic))
                .load()
            )

        def run(df: Any) -> list[int]:
            q = (
                df.writeStream.format("parquet")
                .option("path", str(tmp_path / "data"))
                .option("checkpointLocation", str(tmp_path / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination(120)
            assert q.exception() is None, q.exception()
            rows = spark.read.parquet(str(tmp_path / "data")).select("seq").collect()
            return sorted(r["seq"] for r in rows)

        load()  # the planner worker connects to the store (in the background)
        df = load()
        publish(env["domain"], env["namespace"], topic, CHANNELS, 30, 20)
        assert run(df) == list(range(50))
        publish(env["domain"], env["namespace"], topic, CHANNELS, 50, 10)
        assert run(df) == list(range(60))
