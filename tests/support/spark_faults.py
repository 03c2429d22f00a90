"""Injected Spark task failures and the proof that they fired.

The data source has no option for failures: a test arms one with :func:`arm`,
which drops a marker file that the test-only hook ``dcps.spark._faults``
consumes in exactly one task (it raises there, and Spark retries the task).
Spark's workers find the marker directory through ``DCPS_SPARK_TEST_FAULTS``,
which :func:`environment` puts into this process's environment before the
SparkSession starts (Spark's Python workers inherit it).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from dcps.spark._faults import FAULTS_ENV, marker


def environment() -> Path:
    """The marker directory of this process, announced in ``DCPS_SPARK_TEST_FAULTS``."""
    directory = os.environ.get(FAULTS_ENV)
    if not directory:
        directory = tempfile.mkdtemp(prefix="dcps-spark-faults-")
        atexit.register(shutil.rmtree, directory, True)
        os.environ[FAULTS_ENV] = directory
    return Path(directory)


def arm(topic: str, where: str) -> Path:
    """Make the next ``where`` (``read``/``write``) task of ``topic`` fail once; its marker."""
    path = marker(environment(), topic, where)
    path.touch()
    return path


def failed_tasks(spark: Any, query: Any) -> int:
    """Tasks of ``query``'s jobs that failed (and were retried), from Spark's status tracker.

    Structured Streaming runs a query's jobs in the job group of its run id.
    """
    tracker = spark.sparkContext.statusTracker()
    failed = 0
    for job_id in tracker.getJobIdsForGroup(str(query.runId)):
        job = tracker.getJobInfo(job_id)
        for stage_id in job.stageIds if job is not None else ():
            stage = tracker.getStageInfo(stage_id)
            if stage is not None:
                failed += stage.numFailedTasks
    return failed
