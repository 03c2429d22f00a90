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

from idl._public import show_as

from ._decode import decode_batch, row_to_sample
from ._metrics import offsets_behind_latest
from ._record import Recorder, record, recording_arrow_schema, recording_spark_schema
from ._schema import ENVELOPE, arrow_row_schema, spark_schema
from ._session import local_session, register

__all__ = [
    "ENVELOPE",
    "Recorder",
    "arrow_row_schema",
    "decode_batch",
    "local_session",
    "offsets_behind_latest",
    "record",
    "recording_arrow_schema",
    "recording_spark_schema",
    "register",
    "row_to_sample",
    "spark_schema",
]

show_as(
    "dcps.spark",
    Recorder,
    arrow_row_schema,
    decode_batch,
    local_session,
    offsets_behind_latest,
    record,
    recording_arrow_schema,
    recording_spark_schema,
    register,
    row_to_sample,
    spark_schema,
)
