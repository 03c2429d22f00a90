"""A local SparkSession set up for dcps, and registration of the ``dcps`` format."""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["local_session", "register"]


def register(spark: Any) -> None:
    """Register the ``dcps`` data source with ``spark`` (idempotent)."""
    # Imported on use: the source needs PySpark, which `import dcps.spark` does not load.
    from ._source import DcpsDataSource

    spark.dataSource.register(DcpsDataSource)


def local_session(
    app_name: str = "dcps", *, cores: int = 2, max_failures: int = 4, **conf: str
) -> Any:
    """A ``local[cores, max_failures]`` SparkSession with the ``dcps`` format registered.

    Workers run this interpreter (``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON``
    default to ``sys.executable``, so they import the same dcps), Spark binds
    and advertises 127.0.0.1 only and the UI is off. ``max_failures`` > 1 lets
    a failed task be retried, as on a cluster. Extra ``conf`` entries are set
    as given (dots written as in Spark: pass a dict with ``**{...}``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{cores},{max_failures}]")
        .appName(app_name)
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.python.worker.reuse", "true")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark
