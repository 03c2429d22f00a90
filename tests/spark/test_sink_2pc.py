"""The dcps sink's two-phase commit: exactly once after shuffles, task retries and driver kills.

Rows are shuffled (``repartition``) before the sink, so a retried task or a
re-run micro-batch does not see its rows in the same order; write tasks fail
after staging (the test-only hook of ``dcps.spark._faults``); and a streaming
job run in its own process is killed while its driver sits just before, and
then just after, the store commit of a micro-batch, and restarted from its
checkpoint. Every case ends with the exact elements, each once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.spark.test_spark_sink import committed_batches, read_back, staged_chunks
from tests.support.spark_faults import arm, environment, failed_tasks
from tests.support.spark_support import publish, spark_session, store_process, worker_domain
from tests.support.waiting import eventually

pytest.importorskip("pyspark")

from dcps.spark._faults import marker

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's SparkSession."""
    return spark_session()


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module."""
    domain = worker_domain(worker_id)
    namespace = f"twopc_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("spark_2pc"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}


def opts(env: dict[str, Any], topic: str, type_: str) -> dict[str, str]:
    """Options naming the module's store, ``topic`` and ``type_``."""
    return {
        "topic": topic,
        "type": f"spark_types:{type_}",
        "domain": str(env["domain"]),
        "namespace": env["namespace"],
    }


def counts(rows: list[Any]) -> list[int]:
    """The ``count`` column (the source's ``seq``), sorted: duplicates show twice."""
    return sorted(r["count"] for r in rows)


class TestShuffleAndRetries:
    def test_streaming_shuffle_with_a_failed_write_task_publishes_each_row_once(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """Shuffled rows, several micro-batches, a write task failing after staging: exact."""
        src, dst = f"src_{unique}", f"dst_{unique}"
        publish(env["domain"], env["namespace"], src, 3, 0, 300)
        fault = arm(dst, "write")
        df = (
            spark.readStream.format("dcps")
            .options(**opts(env, src, "Reading"))
            .option("maxOffsetsPerTrigger", "100")
            .load()
        )
        q = (
            df.repartition(4)
            .selectExpr("sensor", "seq AS count", "value AS mean")
            .writeStream.format("dcps")
            .options(**opts(env, dst, "Stats"))
            .option("channels", "3")
            .option("retainConsumed", "true")
            .option("batchRows", "7")  # many chunks per task
            .option("checkpointLocation", str(tmp_path))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()
        assert not fault.exists()  # the injected failure fired
        assert failed_tasks(spark, q) >= 1
        assert counts(read_back(spark, env, dst)) == list(range(300))
        commits = committed_batches(env, dst)
        assert [epoch for _, epoch, _ in commits] == [0, 1, 2]  # one transaction per batch
        assert [n for _, _, n in commits] == [100, 100, 100]
        assert staged_chunks(env, dst) == 0

    def test_batch_write_of_a_shuffled_frame_with_a_retry_publishes_each_row_once(
        self, spark: Any, env: dict[str, Any], unique: str
    ) -> None:
        """df.write after a shuffle, one task failing after staging: every row once."""
        dst = f"dst_{unique}"
        rows = [(i % 5, i, i / 4) for i in range(2000)]
        frame = spark.createDataFrame(rows, "sensor int, count long, mean double").repartition(3)
        fault = arm(dst, "write")
        frame.write.format("dcps").options(**opts(env, dst, "Stats")).option(
            "channels", "2"
        ).option("retainConsumed", "true").option("batchRows", "100").mode("append").save()
        assert not fault.exists()
        assert counts(read_back(spark, env, dst)) == list(range(2000))
        assert [n for _, _, n in committed_batches(env, dst)] == [2000]
        assert staged_chunks(env, dst) == 0


class TestDriverKill:
    @pytest.mark.timeout(600)
    def test_kill_before_and_after_the_store_commit_then_restart_is_exact(
        self, spark: Any, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """Killed before the commit, then after it (Spark's commit log not written): exact."""
        src, dst = f"src_{unique}", f"dst_{unique}"
        publish(env["domain"], env["namespace"], src, 2, 0, 200)
        checkpoint = tmp_path / "checkpoint"

        # 1. the tasks staged batch 0; the driver dies before the store commits it
        killed = self.run_job(env, src, dst, checkpoint, stall="commit")
        assert killed is None
        assert staged_chunks(env, dst) > 0
        assert read_back(spark, env, dst) == []  # staged data is invisible
        # 2. restarted: batch 0 runs again and the store commits it; the driver dies
        #    before Spark records the commit, so the next start runs batch 0 a third time
        assert self.run_job(env, src, dst, checkpoint, stall="committed") is None
        first_batch = counts(read_back(spark, env, dst))
        assert len(first_batch) == len(set(first_batch)) == 50  # batch 0 (25 per channel), once
        # 3. restarted: batch 0's commit is a repeat (nothing added), then the rest
        done = self.run_job(env, src, dst, checkpoint, stall=None)
        assert done is not None
        assert done.startswith("done")
        assert counts(read_back(spark, env, dst)) == list(range(200))
        assert [epoch for _, epoch, _ in committed_batches(env, dst)] == [0, 1, 2, 3]
        assert staged_chunks(env, dst) == 0  # what the killed run staged is gone

    @staticmethod
    def run_job(
        env: dict[str, Any], src: str, dst: str, checkpoint: Path, stall: str | None
    ) -> str | None:
        """Run ``_sink_job`` in its own process group; kill it once it reaches ``stall``.

        Returns its output when it finished, None when it was killed.
        """
        faults = environment()
        reached = None
        if stall is not None:
            armed = marker(faults, dst, stall)
            armed.touch()
            reached = armed.with_name(armed.name + ".reached")
        child_env = dict(os.environ)
        child_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.spark._sink_job",
                str(env["domain"]),
                env["namespace"],
                src,
                dst,
                str(checkpoint),
                "50",
            ],
            cwd=ROOT,
            env=child_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            if reached is None:
                out, err = proc.communicate(timeout=300)
                assert proc.returncode == 0, err[-3000:]
                return out.strip()
            eventually(lambda: reached.exists() or proc.poll() is not None, timeout=300)
            assert reached.exists(), proc.communicate()[1][-3000:]
            reached.unlink()
            return None
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the driver, its JVM and Python workers
            proc.communicate()
