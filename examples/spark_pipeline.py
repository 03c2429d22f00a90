"""A data pipeline on Spark: sensor readings in, per-sensor windowed statistics out.

    python -m examples.spark_pipeline --domain 0

1. A dcps store runs in this process (the memory of channelled topics).
2. A sensor fleet (another process) publishes readings to the channelled topic
   ``pipeline/readings`` and, for monitoring tools, to a plain DDS topic, which
   ``dcps record`` (here: ``dcps.spark.record``) records into Parquet.
3. A Structured Streaming job reads ``pipeline/readings`` with
   ``readStream.format("dcps")``, computes count/mean/min/max per sensor and
   10-second window of event time, and publishes them back with
   ``writeStream.format("dcps")`` to ``pipeline/stats`` (exactly once).
4. Batch jobs read the statistics back (``read.format("dcps")``) and the
   recording (``read.parquet``).

Spark's Python workers must import dcps and this module: ``local_session``
sets ``PYSPARK_PYTHON`` to this interpreter; on a cluster, install dcps (and
your types' module) on every worker and set ``PYSPARK_PYTHON`` there.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import idl

ROOT = Path(__file__).resolve().parent.parent
BASE_MS = 1_700_000_000_000  # event time of the first reading


class SensorReading(idl.Struct, typename="pipeline::SensorReading"):
    """One reading: the sensor (key), its event time (ms since the epoch) and a temperature."""

    sensor: idl.key[idl.int32]
    time_ms: idl.int64
    celsius: idl.float64


class SensorStats(idl.Struct, typename="pipeline::SensorStats"):
    """Statistics of one sensor over one window of event time."""

    sensor: idl.key[idl.int32]
    window_start_ms: idl.key[idl.int64]
    count: idl.int64
    mean: idl.float64
    low: idl.float64
    high: idl.float64


def reading(sensor: int, second: int) -> SensorReading:
    """The fleet's deterministic reading of ``sensor`` at ``second``."""
    return SensorReading(
        sensor=sensor, time_ms=BASE_MS + second * 1000, celsius=20.0 + sensor + (second % 10) / 10
    )


def fleet(domain: int, sensors: int, seconds: int) -> None:
    """The sensor fleet: publish to the channelled topic and to a plain DDS topic."""
    import dcps
    import qos
    from dcps.channels import ChannelledTopic, ChannelPublisher

    with dcps.DomainParticipant(domain) as participant:
        topic = dcps.Topic(participant, "pipeline/live", SensorReading)
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=qos.DataWriterQos(qos.Reliability.RELIABLE, qos.History.KEEP_ALL),
        )
        writer.wait_for_readers(1, timeout=30)
        channelled = ChannelledTopic("pipeline/readings", SensorReading)
        with ChannelPublisher(channelled, domain_id=domain) as pub:
            for second in range(seconds):
                for sensor in range(sensors):
                    sample = reading(sensor, second)
                    pub.publish(sample)
                    writer.write(sample)
            pub.flush()
        writer.wait_for_acknowledgments(timeout=30)
    print(f"fleet: published {sensors * seconds} readings", flush=True)


def main(argv: list[str] | None = None) -> None:
    """Run the whole pipeline once and print what each job computed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--sensors", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--fleet", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fleet:
        fleet(args.domain, args.sensors, args.seconds)
        return

    from pyspark.sql import functions as F  # noqa: N812

    from dcps.channels import ChannelledTopic
    from dcps.spark import local_session, record
    from dcps.store import Store

    # workers import this module by name: make the repository importable for them
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p
    )
    with tempfile.TemporaryDirectory() as tmp:
        topics = [
            ChannelledTopic(
                "pipeline/readings", SensorReading, channel_count=4, retain_consumed=True
            ),
            ChannelledTopic("pipeline/stats", SensorStats, channel_count=2, retain_consumed=True),
        ]
        with Store(Path(tmp) / "store", domain_id=args.domain, topics=topics):
            # record the plain DDS topic while the fleet (another process) publishes
            stop, ready = threading.Event(), threading.Event()
            counts: dict[str, int] = {}
            recorder = threading.Thread(
                target=lambda: counts.update(
                    record(
                        Path(tmp) / "recording",
                        {"pipeline/live": SensorReading},
                        domain_id=args.domain,
                        stop=stop,
                        on_ready=lambda _: ready.set(),
                    )
                )
            )
            recorder.start()
            ready.wait(30)
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "examples.spark_pipeline",
                    "--fleet",
                    "--domain",
                    str(args.domain),
                    "--sensors",
                    str(args.sensors),
                    "--seconds",
                    str(args.seconds),
                ],
                cwd=ROOT,
                check=True,
                timeout=120,
            )
            stop.set()
            recorder.join()
            print(f"recorded {counts['pipeline/live']} samples of pipeline/live")

            spark = local_session("dcps-pipeline")
            dcps_opts = {"domain": str(args.domain)}
            readings = (
                spark.readStream.format("dcps")
                .options(**dcps_opts)
                .option("topic", "pipeline/readings")
                .option("type", "examples.spark_pipeline:SensorReading")
                .load()
            )
            stats = (
                readings.selectExpr("sensor", "timestamp_millis(time_ms) AS event_time", "celsius")
                .groupBy("sensor", F.window("event_time", "10 seconds"))
                .agg(
                    F.count("*").alias("count"),
                    F.avg("celsius").alias("mean"),
                    F.min("celsius").alias("low"),
                    F.max("celsius").alias("high"),
                )
                .selectExpr(
                    "sensor",
                    "unix_millis(window.start) AS window_start_ms",
                    "count",
                    "mean",
                    "low",
                    "high",
                )
            )
            query = (
                stats.writeStream.format("dcps")
                .options(**dcps_opts)
                .option("topic", "pipeline/stats")
                .option("type", "examples.spark_pipeline:SensorStats")
                .outputMode("complete")
                .option("checkpointLocation", str(Path(tmp) / "checkpoint"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination(300)
            print(
                f"streaming job: {sum(p['numInputRows'] for p in query.recentProgress)} readings in"
            )

            published = (
                spark.read.format("dcps")
                .options(**dcps_opts)
                .option("topic", "pipeline/stats")
                .option("type", "examples.spark_pipeline:SensorStats")
                .load()
            )
            print(f"pipeline/stats holds {published.count()} windows; sensor 0:")
            for row in published.filter("sensor = 0").orderBy("window_start_ms").collect():
                start = (row["window_start_ms"] - BASE_MS) // 1000
                print(
                    f"  window +{start:>3}s: count {row['count']}, mean {row['mean']:.2f}, "
                    f"low {row['low']:.1f}, high {row['high']:.1f}"
                )

            recording = spark.read.parquet(str(Path(tmp) / "recording" / "pipeline/live"))
            hottest = (
                recording.filter("_valid_data")
                .groupBy("sensor")
                .agg(F.max("celsius").alias("high"))
                .orderBy("sensor")
                .collect()
            )
            print(
                "recording, hottest reading per sensor: "
                + ", ".join(f"{r['sensor']}: {r['high']:.1f}" for r in hottest)
            )
            spark.stop()
    print("Done.")


if __name__ == "__main__":
    main()
