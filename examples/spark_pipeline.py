"""A data pipeline on Spark: sensor readings in, per-sensor windowed statistics out.

    python -m examples.spark_pipeline --domain 0                       # Spark in local mode
    python -m examples.spark_pipeline --master spark://host:7077 \
        --driver-host 10.0.0.7 --conf spark.executor.memory=2g         # on a standalone cluster

1. A dcps store runs in its own process (``python -m dcps.store``: the memory
   of channelled topics), as it would on its own host.
2. A sensor fleet (another process) publishes readings to the channelled topic
   ``pipeline/readings`` and, for monitoring tools, to a plain DDS topic, which
   ``dcps record`` (here: ``dcps.spark.record``) records into Parquet.
3. A Structured Streaming job reads ``pipeline/readings`` with
   ``readStream.format("dcps")``, computes count/mean/min/max per sensor and
   10-second window of event time, and publishes them back with
   ``writeStream.format("dcps")`` to ``pipeline/stats`` (exactly once: the
   sink's two-phase commit).
4. Batch jobs read the statistics back (``read.format("dcps")``) and the
   recording (``read.parquet``).

Spark's Python workers must import dcps, not this module: the jobs name
their types by IDL text (options ``idl`` and ``type_name``), which travels to
the executors inside the options. Locally ``local_session`` runs the workers
on this interpreter; on a cluster install dcps on every worker (and point
``PYSPARK_PYTHON`` there at that interpreter). Executors find the store by
DDS discovery (same ``--domain``, namespace ``--namespace``): their
``CYCLONEDDS_URI`` and ``DCPS_STORE_KEY_FILE`` are passed on from this
process's environment (``spark.executorEnv.*``). The recording is read from
a path every executor must see (here: this machine's temporary directory).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import idl

ROOT = Path(__file__).resolve().parent.parent
BASE_MS = 1_700_000_000_000  # event time of the first reading

#: The pipeline's types, as IDL: the Spark jobs send this text to the executors.
PIPELINE_IDL = """
module pipeline {
  // One reading: the sensor (key), its event time (ms since the epoch), a temperature.
  struct SensorReading { @key long sensor; long long time_ms; double celsius; };
  // Statistics of one sensor over one window of event time.
  struct SensorStats {
    @key long sensor; @key long long window_start_ms;
    long long count; double mean; double low; double high;
  };
};
"""
_TYPES = idl.loads(PIPELINE_IDL)
SensorReading = _TYPES["pipeline::SensorReading"]
SensorStats = _TYPES["pipeline::SensorStats"]


def reading(sensor: int, second: int) -> Any:
    """The fleet's deterministic reading of ``sensor`` at ``second``."""
    return SensorReading(
        sensor=sensor, time_ms=BASE_MS + second * 1000, celsius=20.0 + sensor + (second % 10) / 10
    )


def fleet(domain: int, namespace: str, sensors: int, seconds: int) -> None:
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
        # the store creates the topic on first use, with these channels and retention
        channelled = ChannelledTopic(
            "pipeline/readings", SensorReading, channel_count=4, retain_consumed=True
        )
        with ChannelPublisher(channelled, domain_id=domain, namespace=namespace) as pub:
            for second in range(seconds):
                for sensor in range(sensors):
                    sample = reading(sensor, second)
                    pub.publish(sample)
                    writer.write(sample)
            pub.flush()
        writer.wait_for_acknowledgments(timeout=30)
    print(f"fleet: published {sensors * seconds} readings", flush=True)


@contextmanager
def store_process(data: Path, domain: int, namespace: str) -> Iterator[None]:
    """``python -m dcps.store`` in a child process, from "ready" until the block ends."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dcps.store",
            *("--data", str(data), "--domain", str(domain)),
            *("--namespace", namespace, "--sync", "NORMAL"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the store prints one line once it serves
        if not line.startswith("dcps store ready"):
            raise RuntimeError(f"the store did not start: {line!r}")
        yield
    finally:
        proc.terminate()
        proc.wait(30)
        if proc.stdout is not None:
            proc.stdout.close()


def spark_session(master: str, driver_host: str, conf: list[str]) -> Any:
    """A SparkSession of ``master`` (``local[N]`` or ``spark://...``), ``dcps`` registered.

    Executors get the DDS configuration and the store's key file of this
    process (``spark.executorEnv.*``), since a worker's Python processes
    inherit the worker's environment, not the driver's.
    """
    from dcps.spark import local_session, register

    settings = dict(item.split("=", 1) for item in conf)
    for name in ("CYCLONEDDS_URI", "DCPS_STORE_KEY_FILE"):
        if name in os.environ:
            settings.setdefault(f"spark.executorEnv.{name}", os.environ[name])
    if master.startswith("local"):
        cores = master.removeprefix("local").strip("[]").split(",")[0]
        return local_session("dcps-pipeline", cores=int(cores or 2), **settings)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(master)
        .appName("dcps-pipeline")
        .config("spark.driver.host", driver_host)  # executors connect back here
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.showConsoleProgress", "false")
    )
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def main(argv: list[str] | None = None) -> None:
    """Run the whole pipeline once and print what each job computed."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--namespace", default="pipeline", help="the store's namespace")
    parser.add_argument("--sensors", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=30)
    parser.add_argument("--master", default="local[2]", help="local[N] or spark://host:port")
    parser.add_argument(
        "--driver-host", default="127.0.0.1", help="this host's address, as executors reach it"
    )
    parser.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    parser.add_argument("--fleet", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.fleet:
        fleet(args.domain, args.namespace, args.sensors, args.seconds)
        return

    from pyspark.sql import functions as F  # noqa: N812

    from dcps.spark import Recorder, record

    with (
        tempfile.TemporaryDirectory() as tmp,
        store_process(Path(tmp) / "store", args.domain, args.namespace),
    ):
        # record the plain DDS topic while the fleet (another process) publishes
        stop, ready = threading.Event(), threading.Event()
        counts: dict[str, int] = {}
        recorders: list[Recorder] = []

        def on_ready(rec: Recorder) -> None:
            recorders.append(rec)
            ready.set()

        recorder = threading.Thread(
            target=lambda: counts.update(
                record(
                    Path(tmp) / "recording",
                    {"pipeline/live": SensorReading},
                    domain_id=args.domain,
                    stop=stop,
                    on_ready=on_ready,
                )
            )
        )
        recorder.start()
        if not ready.wait(30):
            raise RuntimeError("the recorder did not start within 30 s")
        subprocess.run(
            [
                sys.executable,
                "-m",
                "examples.spark_pipeline",
                "--fleet",
                *("--domain", str(args.domain), "--namespace", args.namespace),
                *("--sensors", str(args.sensors), "--seconds", str(args.seconds)),
            ],
            cwd=ROOT,
            check=True,
            timeout=120,
        )
        # the fleet's writer is gone: wait until the recorder saw it leave, so the samples
        # without data it left (one per sensor) are recorded too
        recorders[0].wait_for_writers_gone(timeout=30)
        stop.set()
        recorder.join()

        spark = spark_session(args.master, args.driver_host, args.conf)
        print(f"Spark master: {spark.sparkContext.master}")
        dcps_opts = {"domain": str(args.domain), "namespace": args.namespace, "idl": PIPELINE_IDL}
        readings = (
            spark.readStream.format("dcps")
            .options(**dcps_opts)
            .option("topic", "pipeline/readings")
            .option("type_name", "pipeline::SensorReading")
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
            .option("type_name", "pipeline::SensorStats")
            .option("channels", "2")
            .option("retainConsumed", "true")
            .outputMode("complete")
            .option("checkpointLocation", str(Path(tmp) / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        if query.exception() is not None:
            raise RuntimeError(f"the streaming job failed: {query.exception()}")
        print(f"streaming job: {sum(p['numInputRows'] for p in query.recentProgress)} readings in")

        published = (
            spark.read.format("dcps")
            .options(**dcps_opts)
            .option("topic", "pipeline/stats")
            .option("type_name", "pipeline::SensorStats")
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
        # A sensor's end (its writer left) is the instance state of its last recorded
        # sample: a sample without data when the recorder had taken the last reading
        # before the end arrived, else that reading itself (so the row count varies).
        ended = (
            recording.groupBy("sensor")
            .agg(F.max_by("_instance_state", "_offset").alias("state"))
            .filter("state != 'ALIVE'")
            .count()
        )
        print(
            f"recording: {recording.filter('_valid_data').count()} readings "
            f"({counts['pipeline/live']} samples), {ended} sensors ended"
        )
        spark.stop()
    print("Done.")


if __name__ == "__main__":
    main()
