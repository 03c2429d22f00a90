"""dcps on Apache Spark: the ``dcps`` data source, schema mapping and recordings.

``spark_schema(T)`` maps a topic type to a Spark ``StructType`` (envelope
columns first, see :mod:`dcps.spark._schema`); ``register(spark)`` or
``local_session()`` make ``spark.read.format("dcps")``,
``spark.readStream.format("dcps")`` and ``df.writeStream.format("dcps")``
available; ``record`` writes plain DDS topics to Parquet.

Needs the ``spark`` extra (``pip install 'dcps-cyclone[spark]'``); PySpark is only
imported by the functions that use it.
"""

from __future__ import annotations

from typing import Any

from ._decode import decode_batch, row_to_sample
from ._record import Recorder, recording_arrow_schema, recording_spark_schema
from ._schema import ENVELOPE, arrow_row_schema, spark_schema

__all__ = [
    "ENVELOPE",
    "Recorder",
    "arrow_row_schema",
    "decode_batch",
    "local_session",
    "record",
    "recording_arrow_schema",
    "recording_spark_schema",
    "register",
    "row_to_sample",
    "spark_schema",
]


def register(spark: Any) -> None:
    """Register the ``dcps`` data source with a SparkSession (idempotent)."""
    from ._session import register as _register

    _register(spark)


def local_session(app_name: str = "dcps", **kwargs: Any) -> Any:
    """A local SparkSession for dcps (see :func:`dcps.spark._session.local_session`)."""
    from ._session import local_session as _local

    return _local(app_name, **kwargs)


def record(*args: Any, **kwargs: Any) -> Any:
    """Record plain DDS topics to Parquet (see :func:`dcps.spark._record.record`)."""
    from ._record import record as _record

    return _record(*args, **kwargs)
