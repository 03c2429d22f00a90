"""The Spark pipeline example runs as the README says, in its own processes.

Locally (``local[2]``) and on the standalone cluster of the test session
(``spark://``, two workers: executors in other JVMs and Python processes that
cannot import the example, so the types travel as IDL text); either way the
store runs in a process of its own and the driver is the example's process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.spark_cluster import SparkCluster

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


def run_example(domain_id: int, *extra: str) -> str:
    """Run the example to completion with 3 sensors for 20 s; its stdout."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.spark_pipeline",
            *("--domain", str(domain_id), "--namespace", "pipeline_test"),
            *("--sensors", "3", "--seconds", "20"),
            *extra,
        ],
        cwd=ROOT,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def check_output(out: str) -> None:
    """Readings in, one stats element per sensor and 10 s window out, recording read back."""
    assert "fleet: published 60 readings" in out
    # every reading, and each sensor's end (its writer left) as the state of its last sample
    assert re.search(r"recording: 60 readings \(6[0-3] samples\), 3 sensors ended", out), out
    assert "streaming job: 60 readings in" in out
    assert "pipeline/stats holds 6 windows; sensor 0:" in out
    assert "window +  0s: count 10, mean 20.45, low 20.0, high 20.9" in out
    assert "window + 10s: count 10, mean 20.45, low 20.0, high 20.9" in out
    assert "recording, hottest reading per sensor: 0: 20.9, 1: 21.9, 2: 22.9" in out
    assert out.rstrip().endswith("Done.")


class TestSparkPipelineExample:
    @pytest.mark.timeout(420)
    def test_pipeline_publishes_windowed_stats_and_reads_the_recording(
        self, domain_id: int
    ) -> None:
        """In local mode."""
        out = run_example(domain_id)
        assert "Spark master: local[2," in out
        check_output(out)

    @pytest.mark.timeout(900)
    @pytest.mark.xdist_group("spark_cluster")  # shares the one cluster of tests/spark/conftest.py
    def test_pipeline_on_a_standalone_cluster(self, domain_id: int, cluster: SparkCluster) -> None:
        """On ``spark://``: the same results, computed by the cluster's executors."""
        out = run_example(
            domain_id,
            *("--master", cluster.url),
            *("--conf", "spark.executor.memory=768m"),
            *("--conf", "spark.cores.max=2"),
            *("--conf", "spark.driver.bindAddress=127.0.0.1"),
        )
        assert f"Spark master: {cluster.url}" in out
        check_output(out)
