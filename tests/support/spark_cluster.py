"""A real Spark standalone cluster on this machine: one master and two workers.

Started from the installed pyspark distribution (``bin/spark-class``
``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on
127.0.0.1, each in its own process (and process group), killed in
``finally``. Executors run in other JVMs and other Python processes than the
test's driver; they import dcps (the workers' ``PYTHONPATH`` names this
checkout, as an installed dcps would be on a real node) but not the test
types: the jobs carry their type as IDL text in the options.

The cluster dies with the process that started it, however that ends
(tests/support/reaper.py): a failing or timed-out test (pytest-timeout's
``signal`` method, the default here, fails the test and the fixtures tear down)
stops it in ``finally``; when no teardown runs (pytest-timeout's ``thread``
method calls ``os._exit``; SIGKILL or SIGTERM; a crashed xdist worker) a
watchdog kills the daemons' process groups (a worker's executor JVMs included;
pyspark's Python daemon, in a group of its own, exits when its executor's pipe
closes), and each daemon JVM has a parent-death signal besides. Start a cluster
from a thread that outlives it (the signal is the starting thread's).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.reaper import GroupReaper, with_parent_death_signal

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120.0


def spark_home() -> Path:
    """The installed pyspark distribution (holds bin/spark-class and jars/)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _Daemon:
    """One spark-class process whose log is a file; waits for a line matching ``ready``."""

    def __init__(
        self, args: list[str], log: Path, env: dict[str, str], reaper: GroupReaper
    ) -> None:
        self.log = log
        self.handle = log.open("w")
        self.reaper = reaper
        self.proc = subprocess.Popen(
            with_parent_death_signal([str(spark_home() / "bin" / "spark-class"), *args]),
            stdout=self.handle,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        reaper.add(self.proc.pid)

    def wait_for(self, ready: str) -> re.Match[str]:
        deadline = time.monotonic() + START_TIMEOUT
        pattern = re.compile(ready)
        delay = 0.05
        while time.monotonic() < deadline:
            found = pattern.search(self.log.read_text(errors="replace"))
            if found:
                return found
            if self.proc.poll() is not None:
                break
            time.sleep(delay)  # polling a log file: there is no event to wait on
            delay = min(0.5, delay * 2)
        raise AssertionError(f"{self.log.name}: no {ready!r}:\n{self.log.read_text()[-3000:]}")

    def kill(self) -> None:
        """Kill the daemon's process group (with the executors a worker started)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):  # gone already
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.reaper.discard(self.proc.pid)
        self.handle.close()


class SparkCluster:
    """A running master (``url``) with two one-core workers."""

    def __init__(self, work: Path, workers: int = 2) -> None:
        env = dict(os.environ)
        env.update(
            SPARK_HOME=str(spark_home()),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_WORKER_DIR=str(work / "work"),
            SPARK_LOG_DIR=str(work / "logs"),
            PYSPARK_PYTHON=sys.executable,
            # dcps itself, as installed on a node (not the test types: those travel as IDL)
            PYTHONPATH=str(ROOT),
        )
        self.daemons: list[_Daemon] = []
        self.reaper = GroupReaper()
        try:
            master = _Daemon(
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--webui-port",
                    "0",
                ],
                work / "master.log",
                env,
                self.reaper,
            )
            self.daemons.append(master)
            self.url = master.wait_for(r"Starting Spark master at (spark://[\d.]+:\d+)").group(1)
            for i in range(workers):
                worker = _Daemon(
                    [
                        "org.apache.spark.deploy.worker.Worker",
                        self.url,
                        "--host",
                        "127.0.0.1",
                        "--cores",
                        "1",
                        "--memory",
                        "1g",
                        "--webui-port",
                        "0",
                        "--work-dir",
                        str(work / f"worker{i}"),
                    ],
                    work / f"worker{i}.log",
                    env,
                    self.reaper,
                )
                self.daemons.append(worker)
            for worker in self.daemons[1:]:
                worker.wait_for("Successfully registered with master")
        except BaseException:
            self.stop()
            raise

    def session(self, app: str) -> Any:
        """A SparkSession of this cluster (any other active session is stopped first)."""
        from pyspark.sql import SparkSession

        from dcps.spark import register

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        spark = (
            SparkSession.builder.master(self.url)
            .appName(app)
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "768m")
            .config("spark.cores.max", "2")
            .config("spark.task.maxFailures", "4")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.executorEnv.PYTHONPATH", str(ROOT))
            .config("spark.executorEnv.CYCLONEDDS_URI", os.environ.get("CYCLONEDDS_URI", ""))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        return spark

    def pids(self) -> list[int]:
        """The daemons' processes (each leads a process group: a worker's executors are in
        its group)."""
        return [daemon.proc.pid for daemon in self.daemons]

    def stop(self) -> None:
        """Kill the workers, then the master, then the watchdog."""
        for daemon in reversed(self.daemons):
            daemon.kill()
        self.daemons.clear()
        self.reaper.close()


def spark_cluster(work: Path) -> Iterator[SparkCluster]:
    """Yield a running cluster; kill it afterwards (for module-scoped fixtures)."""
    pytest.importorskip("pyspark")
    cluster = SparkCluster(work)
    try:
        yield cluster
    finally:
        cluster.stop()
