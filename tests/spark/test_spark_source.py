"""The dcps Spark source on a real local Spark, with a store and publishers in other processes."""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark_faults import arm, failed_tasks
from tests.support.spark_support import publish, spark_session, store_process, worker_domain

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

TYPE = "spark_types:Reading"
CHANNELS = 3


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's SparkSession."""
    return spark_session()


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module: its domain, namespace and data directory."""
    domain = worker_domain(worker_id)
    namespace = f"spark_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("spark_src"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}


def source(
    spark: Any, env: dict[str, Any], topic: str, stream: bool = False, **options: str
) -> Any:
    """A dcps reader (batch or streaming) of ``topic`` with the module's store."""
    reader = spark.readStream if stream else spark.read
    r = (
        reader.format("dcps")
        .option("topic", topic)
        .option("type", TYPE)
        .option("domain", str(env["domain"]))
        .option("namespace", env["namespace"])
    )
    for k, v in options.items():
        r = r.option(k, v)
    return r.load()


def run_available_now(df: Any, out: Path) -> Any:
    """Run a query to a Parquet file sink with Trigger.AvailableNow; return it when done."""
    q = (
        df.writeStream.format("parquet")
        .option("path", str(out / "data"))
        .option("checkpointLocation", str(out / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.exception() is None, q.exception()
    return q


def assert_exactly(spark: Any, out: Path, total: int) -> None:
    """The file sink holds each of the ``total`` readings exactly once, no gaps."""
    rows = spark.read.parquet(str(out / "data")).select("_channel", "_offset", "seq").collect()
    seqs = sorted(r["seq"] for r in rows)
    assert seqs == list(range(total)), f"{len(seqs)} rows, {len(set(seqs))} distinct"
    by_channel: dict[int, list[int]] = {}
    for r in rows:
        by_channel.setdefault(r["_channel"], []).append(r["_offset"])
    for offsets in by_channel.values():
        assert sorted(offsets) == list(range(len(offsets)))


class TestBatchRead:
    def test_reads_every_stored_element_with_envelope(
        self, spark: Any, env: dict[str, Any], topic_name: str
    ) -> None:
        """spark.read returns each published reading once, with channel, offset and key."""
        publish(env["domain"], env["namespace"], topic_name, CHANNELS, 0, 300)
        rows = source(spark, env, topic_name).collect()
        assert sorted(r["seq"] for r in rows) == list(range(300))
        for r in rows[:20]:
            assert r["sensor"] == r["seq"] % 7
            assert r["value"] == r["seq"] / 4
            assert json.loads(r["_key"]) == [r["sensor"]]
            assert r["_store_timestamp"] is not None
            assert r["_source_timestamp"] is None
        assert {r["_channel"] for r in rows} <= set(range(CHANNELS))

    def test_position_range_and_local_file(
        self, spark: Any, env: dict[str, Any], topic_name: str
    ) -> None:
        """startingPositions/endingPositions select offsets; the data_dir fast path agrees."""
        publish(env["domain"], env["namespace"], topic_name, 1, 0, 100)
        rows = source(
            spark, env, topic_name, startingPositions='{"0": 10}', endingPositions='{"0": 25}'
        ).collect()
        assert sorted(r["_offset"] for r in rows) == list(range(10, 25))
        local = source(spark, env, topic_name, data_dir=str(env["store"].data)).collect()
        assert sorted(r["seq"] for r in local) == list(range(100))

    def test_empty_range_reads_no_rows(
        self, spark: Any, env: dict[str, Any], topic_name: str
    ) -> None:
        """A range holding no element (start == end) reads zero rows instead of failing."""
        publish(env["domain"], env["namespace"], topic_name, 1, 0, 10)
        empty = source(
            spark, env, topic_name, startingPositions='{"0": 5}', endingPositions='{"0": 5}'
        )
        assert empty.count() == 0

    def test_time_range(self, spark: Any, env: dict[str, Any], topic_name: str) -> None:
        """startTimestamp keeps the elements accepted at or after it, endTimestamp the ones
        before it: a cut just after the first publication splits the two exactly."""
        publish(env["domain"], env["namespace"], topic_name, 1, 0, 50)
        first = source(spark, env, topic_name).agg({"_store_timestamp": "max"}).collect()[0][0]
        publish(env["domain"], env["namespace"], topic_name, 1, 50, 50)
        # Spark timestamps have microseconds: the store's (ns) of the first 50 are < cut
        cut = (first + timedelta(microseconds=1)).isoformat()
        later = source(spark, env, topic_name, startTimestamp=cut).collect()
        assert sorted(r["seq"] for r in later) == list(range(50, 100))
        older = source(spark, env, topic_name, endTimestamp=cut).collect()
        assert sorted(r["seq"] for r in older) == list(range(50))


class TestStreamingSource:
    def test_restart_from_checkpoint_has_no_duplicates_or_gaps(
        self, spark: Any, env: dict[str, Any], topic_name: str, tmp_path: Path
    ) -> None:
        """Two runs on one checkpoint, with data published in between, deliver each element once."""
        publish(env["domain"], env["namespace"], topic_name, CHANNELS, 0, 200)
        df = source(spark, env, topic_name, stream=True, maxElementsPerTrigger="90")
        q = run_available_now(df, tmp_path)
        counts = [p["numInputRows"] for p in q.recentProgress]
        assert sum(counts) == 200
        assert max(counts) <= 90
        end = json.loads(q.recentProgress[-1]["sources"][0]["endOffset"])
        assert list(end) == sorted(end)
        assert sum(end.values()) == 200
        publish(env["domain"], env["namespace"], topic_name, CHANNELS, 200, 100)
        q2 = run_available_now(source(spark, env, topic_name, stream=True), tmp_path)
        assert sum(p["numInputRows"] for p in q2.recentProgress) == 100
        assert_exactly(spark, tmp_path, 300)

    def test_injected_task_failure_is_retried_exactly_once(
        self, spark: Any, env: dict[str, Any], topic_name: str, tmp_path: Path
    ) -> None:
        """A read task failing mid-batch on its first attempt is retried; no row lost or doubled."""
        publish(env["domain"], env["namespace"], topic_name, CHANNELS, 0, 150)
        fault = arm(topic_name, "read")
        df = source(spark, env, topic_name, stream=True, batchRows="4")
        q = run_available_now(df, tmp_path)
        assert not fault.exists()  # a read task consumed the marker: the injected failure fired
        assert failed_tasks(spark, q) >= 1  # and Spark recorded the failed attempt
        assert_exactly(spark, tmp_path, 150)

    def test_starting_latest_skips_stored_elements(
        self, spark: Any, env: dict[str, Any], topic_name: str, tmp_path: Path
    ) -> None:
        """startingPositions=latest reads only what arrives after the query started."""
        publish(env["domain"], env["namespace"], topic_name, CHANNELS, 0, 40)
        df = source(spark, env, topic_name, stream=True, startingPositions="latest")
        q = run_available_now(df, tmp_path)
        assert sum(p["numInputRows"] for p in q.recentProgress) == 0
        publish(env["domain"], env["namespace"], topic_name, CHANNELS, 40, 25)
        again = run_available_now(df, tmp_path)  # same checkpoint: resumes where q ended
        assert sum(p["numInputRows"] for p in again.recentProgress) == 25
        rows = spark.read.parquet(str(tmp_path / "data")).select("seq").collect()
        assert sorted(r["seq"] for r in rows) == list(range(40, 65))

    def test_group_commits_follow_the_query(
        self, spark: Any, env: dict[str, Any], topic_name: str, tmp_path: Path
    ) -> None:
        """With option group, Spark's commits show up as the group's committed positions."""
        publish(env["domain"], env["namespace"], topic_name, 1, 0, 60)
        q = run_available_now(
            source(
                spark, env, topic_name, stream=True, group="spark-job", maxElementsPerTrigger="20"
            ),
            tmp_path,
        )
        ends = [json.loads(p["sources"][0]["endOffset"])["0"] for p in q.recentProgress]
        assert ends == [20, 40, 60]
        db = sqlite3.connect(f"file:{env['store'].data / 'channels.db'}?mode=ro", uri=True)
        try:
            (committed,) = db.execute(
                "SELECT committed FROM commits JOIN topics ON topics.id = topic_id"
                " WHERE name = ? AND grp = 'spark-job' AND channel = 0 AND explicit = 1",
                (topic_name,),
            ).fetchone()
        finally:
            db.close()
        # Spark commits a batch when it plans the next one (at least the first two batches):
        # the group's commit is a batch's end offset - 1, the last element that batch read
        assert committed in (39, 59)


class TestBadOptions:
    def test_unknown_topic(self, spark: Any, env: dict[str, Any], topic_name: str) -> None:
        """A topic the store does not know fails naming it."""
        with pytest.raises(Exception, match=f"no channelled topic '{topic_name}'"):
            source(spark, env, topic_name).collect()

    def test_unknown_type(self, spark: Any, env: dict[str, Any], topic_name: str) -> None:
        """A type path that does not import fails naming it."""
        with pytest.raises(Exception, match="no_such_module"):
            (
                spark.read.format("dcps")
                .option("topic", topic_name)
                .option("type", "no_such_module:T")
                .load()
            )

    def test_malformed_starting_positions(
        self, spark: Any, env: dict[str, Any], topic_name: str
    ) -> None:
        """startingPositions that is neither earliest/latest nor JSON is refused clearly."""
        with pytest.raises(Exception, match="startingPositions"):
            source(spark, env, topic_name, startingPositions="{0: oops").collect()
