"""Proof that an injected Spark task failure fired: Spark's own record of failed tasks."""

from __future__ import annotations

from typing import Any


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
