"""The dcps Spark sink: rows published in confirmed mode, task retries deduplicated by the store."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark_faults import arm, failed_tasks
from tests.support.spark_support import publish, spark_session, store_process, worker_domain

pytest.importorskip("pyspark")

from dcps.spark._access import StoreAccess

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's SparkSession."""
    return spark_session()


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module."""
    domain = worker_domain(worker_id)
    namespace = f"sink_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("spark_sink"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}


def opts(env: dict[str, Any], topic: str, type_: str) -> dict[str, str]:
    """Options naming the module's store, ``topic`` and ``type_``."""
    return {
        "topic": topic,
        "type": f"spark_types:{type_}",
        "domain": str(env["domain"]),
        "namespace": env["namespace"],
    }


def stats_query(
    spark: Any, env: dict[str, Any], src: str, dst: str, out: Path, **extra: str
) -> Any:
    """A streaming job: readings of ``src`` become one Stats row each, published to ``dst``."""
    df = spark.readStream.format("dcps").options(**opts(env, src, "Reading")).load()
    stats = df.selectExpr("sensor", "seq AS count", "value AS mean")
    writer = (
        stats.writeStream.format("dcps")
        .options(**opts(env, dst, "Stats"))
        .option("channels", "2")
        .option("retainConsumed", "true")
        .option("checkpointLocation", str(out))
        .trigger(availableNow=True)
    )
    for k, v in extra.items():
        writer = writer.option(k, v)
    return writer.start()


def read_back(spark: Any, env: dict[str, Any], topic: str) -> list[Any]:
    """Every stored Stats element of ``topic``, read with the dcps batch source."""
    return spark.read.format("dcps").options(**opts(env, topic, "Stats")).load().collect()


def file_rows(env: dict[str, Any], sql: str, *args: object) -> list[tuple[Any, ...]]:
    """Rows of a query on the store's file (documented in docs/store-format.md), read-only."""
    db = sqlite3.connect(f"file:{env['store'].data / 'channels.db'}?mode=ro", uri=True)
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def committed_batches(env: dict[str, Any], topic: str) -> list[tuple[str, int, int]]:
    """(query, epoch, elements) of every transaction the sink committed to ``topic``."""
    return file_rows(
        env,
        "SELECT query, epoch, elements FROM staged_commits JOIN topics ON topics.id = topic_id"
        " WHERE name = ? ORDER BY epoch",
        topic,
    )


def staged_chunks(env: dict[str, Any], topic: str) -> int:
    """Chunks staged for ``topic`` and not (yet) committed."""
    return int(
        file_rows(
            env,
            "SELECT count(*) FROM staged JOIN topics ON topics.id = topic_id WHERE name = ?",
            topic,
        )[0][0]
    )


class TestStoreIdempotence:
    def test_repeated_key_is_not_appended_again(self, env: dict[str, Any], unique: str) -> None:
        """A publish repeating an idempotence key gets the first positions and adds nothing."""
        access = StoreAccess(domain_id=env["domain"], namespace=env["namespace"])
        try:
            topic = f"idem_{unique}"
            access.ensure_topic(topic, 1, True, "")
            first = access.publish_keyed(topic, 0, [b"a", b"b"], "k1").result(10)
            again = access.publish_keyed(topic, 0, [b"a", b"b"], "k1").result(10)
            other = access.publish_keyed(topic, 0, [b"c"], "k2").result(10)
            assert (first.duplicate, again.duplicate, other.duplicate) == (False, True, False)
            assert again.first == first.first == 0
            assert other.first == 2
            assert access.bounds(topic) == {0: (0, 3)}
        finally:
            access.close()


class TestStreamingSink:
    def test_pipeline_with_retried_tasks_publishes_each_row_once(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """Write tasks that fail after publishing are retried; the store suppresses the repeats."""
        src, dst = f"src_{unique}", f"dst_{unique}"
        publish(env["domain"], env["namespace"], src, 2, 0, 120)
        fault = arm(dst, "write")
        q = stats_query(spark, env, src, dst, tmp_path, batchRows="16")
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        assert not fault.exists()  # a write task consumed the marker: the injected failure fired
        assert failed_tasks(spark, q) >= 1  # and Spark recorded the failed attempt
        rows = read_back(spark, env, dst)
        assert sorted(r["count"] for r in rows) == list(range(120))
        assert all(r["mean"] == r["count"] / 4 and r["sensor"] == r["count"] % 7 for r in rows)
        commits = committed_batches(env, dst)
        assert commits
        assert all(query == str(q.id) for query, _, _ in commits)
        assert sum(n for _, _, n in commits) == 120
        assert staged_chunks(env, dst) == 0  # the failed attempt's chunks were dropped

    def test_rerun_of_a_batch_after_restart_adds_nothing(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """A batch Spark re-runs after a restart (its commit lost) publishes nothing twice."""
        src, dst = f"src_{unique}", f"dst_{unique}"
        publish(env["domain"], env["namespace"], src, 1, 0, 30)
        q = stats_query(spark, env, src, dst, tmp_path)
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        # lose the commit of the last batch, as if the driver died right after the sink
        # published it: the restarted query runs that batch again with the same batch id
        commits = sorted(
            (f for f in (tmp_path / "commits").iterdir() if f.name.isdigit()),
            key=lambda f: int(f.name),
        )
        commits[-1].unlink()
        (tmp_path / "commits" / f".{commits[-1].name}.crc").unlink(missing_ok=True)
        publish(env["domain"], env["namespace"], src, 1, 30, 30)
        q = stats_query(spark, env, src, dst, tmp_path)
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        assert len(q.recentProgress) >= 2  # the re-run batch, then the new data
        assert sorted(r["count"] for r in read_back(spark, env, dst)) == list(range(60))


class TestSinkErrors:
    @pytest.mark.timeout(300)  # the failing task is retried (local[2,4]) before the batch fails
    def test_row_that_does_not_fit_names_the_column(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """A value out of the member's range fails the batch with the column's name."""
        src, dst = f"src_{unique}", f"dst_{unique}"
        publish(env["domain"], env["namespace"], src, 1, 0, 5)
        df = spark.readStream.format("dcps").options(**opts(env, src, "Reading")).load()
        bad = df.selectExpr("sensor + 4294967296 AS sensor", "seq AS count", "value AS mean")
        q = (
            bad.writeStream.format("dcps")
            .options(**opts(env, dst, "Stats"))
            .option("checkpointLocation", str(tmp_path))
            .trigger(availableNow=True)
            .start()
        )
        with pytest.raises(Exception, match="column 'sensor'"):
            q.awaitTermination(280)

    def test_missing_column_fails_at_start(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """Rows lacking a member of the type are refused before anything runs, naming it."""
        src = f"src_{unique}"
        publish(env["domain"], env["namespace"], src, 1, 0, 1)
        df = spark.readStream.format("dcps").options(**opts(env, src, "Reading")).load()
        writer = (
            df.selectExpr("sensor", "seq AS count")
            .writeStream.format("dcps")
            .options(**opts(env, f"dst_{unique}", "Stats"))
            .option("checkpointLocation", str(tmp_path))
            .trigger(availableNow=True)
        )
        with pytest.raises(Exception, match=r"lack column.*'mean'"):
            writer.start().awaitTermination(120)
