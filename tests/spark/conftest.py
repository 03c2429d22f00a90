"""Fixtures of the Spark tests: one standalone cluster per test session (per xdist worker)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.spark_cluster import SparkCluster, spark_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone cluster (master + two one-core workers), started on first use.

    Shared by every module that runs on ``spark://``; a module using it runs
    its applications one at a time (each takes both workers' cores). Its JVMs die
    with this process even when no teardown runs (tests/support/reaper.py,
    tests/spark/test_cluster_cleanup.py).
    """
    yield from spark_cluster(tmp_path_factory.mktemp("spark_cluster"))
