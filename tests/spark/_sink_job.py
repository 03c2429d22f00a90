"""A streaming job run in its own process by the driver-kill tests (test_sink_2pc.py).

Usage: ``python -m tests.spark._sink_job DOMAIN NAMESPACE SRC DST CHECKPOINT PER_TRIGGER``.
Reads ``spark_types.Reading`` from ``SRC`` (at most PER_TRIGGER elements per
micro-batch), shuffles the rows (``repartition``), publishes them as ``Stats``
to ``DST`` through the dcps sink with Trigger.AvailableNow, and prints
``done N`` (the micro-batches it ran). The tests arm the driver's stall hook
(``dcps.spark._faults.maybe_stall``) through ``DCPS_SPARK_TEST_FAULTS`` and kill
this process group while the driver waits there.
"""

from __future__ import annotations

import sys

from tests.support.spark_support import spark_session


def main() -> None:
    """Run the query to its end."""
    domain, namespace, src, dst, checkpoint, per_trigger = sys.argv[1:7]
    spark = spark_session()
    common = {"domain": domain, "namespace": namespace}
    df = (
        spark.readStream.format("dcps")
        .options(topic=src, type="spark_types:Reading", maxOffsetsPerTrigger=per_trigger, **common)
        .load()
    )
    stats = df.repartition(3).selectExpr("sensor", "seq AS count", "value AS mean")
    query = (
        stats.writeStream.format("dcps")
        .options(topic=dst, type="spark_types:Stats", channels="3", retainConsumed="true", **common)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    print(f"done {len(query.recentProgress)}", flush=True)


if __name__ == "__main__":
    main()
