"""The dcps data source on a real Spark standalone cluster (a master and two workers).

The store runs in its own process; executors run in the workers' JVMs and
Python processes, reach the store over DDS, and get the topic type from the
IDL text in the options (they cannot import the test types: checked).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark_cluster import SparkCluster
from tests.support.spark_support import publish, store_process, worker_domain

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess, pytest.mark.timeout(900)]

TYPES_IDL = """
module spark_test {
  struct Reading { @key long sensor; long long seq; double value; };
  struct Stats { @key long sensor; long long count; double mean; };
};
"""


@pytest.fixture(scope="module")
def spark(cluster: SparkCluster) -> Iterator[Any]:
    """A SparkSession of the session's cluster (conftest), stopped after the module."""
    session = cluster.session("dcps-cluster-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module."""
    domain = worker_domain(worker_id)
    namespace = f"cluster_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("cluster_store"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}


def opts(env: dict[str, Any], topic: str, type_name: str) -> dict[str, str]:
    """Options naming the store, ``topic`` and a type of TYPES_IDL."""
    return {
        "topic": topic,
        "idl": TYPES_IDL,
        "type_name": f"spark_test::{type_name}",
        "domain": str(env["domain"]),
        "namespace": env["namespace"],
    }


class TestCluster:
    def test_executors_are_other_processes_without_the_test_types(
        self, spark: Any, cluster: SparkCluster
    ) -> None:
        """Tasks run in other Python processes, which cannot import the test types."""
        import os

        def executor_facts(_: Any) -> Iterator[tuple[int, bool]]:
            # nested, so pickled by value: the executor does not import this test module
            # (which would put tests/support/peers on its sys.path)
            import importlib.util
            import os

            yield os.getpid(), importlib.util.find_spec("spark_types") is not None

        facts = spark.sparkContext.parallelize(range(4), 4).mapPartitions(executor_facts).collect()
        assert spark.sparkContext.master == cluster.url
        assert all(pid != os.getpid() for pid, _ in facts)
        assert not any(found for _, found in facts)

    def test_stream_through_a_shuffle_into_the_sink_and_read_back(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """Source -> shuffle -> dcps sink on the cluster, then a batch read: every row once."""
        src, dst = f"src_{unique}", f"dst_{unique}"
        publish(env["domain"], env["namespace"], src, 2, 0, 400)
        df = (
            spark.readStream.format("dcps")
            .options(**opts(env, src, "Reading"))
            .option("maxOffsetsPerTrigger", "150")
            .load()
        )
        q = (
            df.repartition(3)
            .selectExpr("sensor", "seq AS count", "value AS mean")
            .writeStream.format("dcps")
            .options(**opts(env, dst, "Stats"))
            .option("channels", "2")
            .option("retainConsumed", "true")
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(600)
        assert q.exception() is None, q.exception()
        assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [
            150,
            150,
            100,
        ]
        rows = spark.read.format("dcps").options(**opts(env, dst, "Stats")).load().collect()
        assert sorted(r["count"] for r in rows) == list(range(400))
        assert all(r["mean"] == r["count"] / 4 and r["sensor"] == r["count"] % 7 for r in rows)
        assert {r["_channel"] for r in rows} == {0, 1}

    def test_a_recording_reads_back_on_the_cluster(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """A Parquet recording of a plain DDS topic is read by the cluster's executors."""
        import dcps
        import idl
        from dcps.spark import Recorder, recording_spark_schema

        reading = idl.loads(TYPES_IDL)["spark_test::Reading"]
        topic = f"rec_{unique}"
        recorder = Recorder(tmp_path / "rec", {topic: reading}, domain_id=env["domain"])
        try:
            with dcps.DomainParticipant(env["domain"]) as participant:
                writer = dcps.DataWriter(participant, dcps.Topic(participant, topic, reading))
                writer.wait_for_readers()
                for i in range(25):
                    writer.write(reading(sensor=i % 3, seq=i, value=i / 2))
                writer.wait_for_acknowledgments(10)
        finally:
            recorder.close()
        table = (
            spark.read.schema(recording_spark_schema(reading))
            .parquet(str(tmp_path / "rec" / topic))
            .collect()
        )
        # the samples, plus the invalid ones (no data) the writer's end left per instance
        assert sorted(r["seq"] for r in table if r["_valid_data"]) == list(range(25))
        assert {r["sensor"] for r in table} == {0, 1, 2}
