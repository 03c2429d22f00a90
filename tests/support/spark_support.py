"""Fixtures and helpers of the Spark tests: one SparkSession per worker, a store process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.embedded_store import worker_domain as worker_domain
from tests.support.spark_faults import FAULTS_ENV
from tests.support.spark_faults import environment as faults_environment

TESTS = Path(__file__).resolve().parent
PEERS = TESTS / "peers"
TIMEOUT = 120.0
if str(PEERS) not in sys.path:  # spark_types is imported as Spark's workers import it
    sys.path.append(str(PEERS))


def spark_session() -> Any:
    """The worker's local SparkSession (started once; Spark's workers import tests/peers).

    Its workers also see the marker directory of injected failures (``spark_faults``).
    """
    pytest.importorskip("pyspark")
    faults = faults_environment()
    path = os.environ.get("PYTHONPATH", "")
    if str(PEERS) not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(PEERS), path) if p)
    from dcps.spark import local_session

    # Spark's Python workers get the environment of the JVM, which an earlier session of this
    # process (e.g. tests/spark/test_cluster.py) may have started before these were set:
    # name them for the executors explicitly
    return local_session(
        "dcps-tests",
        **{
            "spark.executorEnv.PYTHONPATH": os.environ["PYTHONPATH"],
            f"spark.executorEnv.{FAULTS_ENV}": str(faults),
        },
    )


def run_peer(*args: str, timeout: float = TIMEOUT) -> str:
    """Run a peer script to completion; return its stdout (fail on a non-zero exit)."""
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"peer {args} failed: {done.stderr[-2000:]}")
    return done.stdout


def publish(domain: int, namespace: str, topic: str, channels: int, first: int, count: int) -> None:
    """Publish readings ``first .. first + count - 1`` from another process."""
    out = run_peer(
        str(PEERS / "spark_publisher.py"),
        str(domain),
        namespace,
        topic,
        str(channels),
        str(first),
        str(count),
    )
    assert f"published {count}" in out


class StoreProcess:
    """``python -m dcps.store`` in a child process, until :meth:`stop`."""

    def __init__(self, data: Path, domain: int, namespace: str) -> None:
        self.data = data
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dcps.store",
                "--data",
                str(data),
                "--domain",
                str(domain),
                "--namespace",
                namespace,
                "--sync",
                "NORMAL",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        deadline = time.monotonic() + TIMEOUT
        line = self.proc.stdout.readline()
        if not line.startswith("dcps store ready") or time.monotonic() > deadline:
            self.stop()
            raise AssertionError(f"the store did not start: {line!r}")

    def stop(self) -> None:
        """Terminate the store and wait for it."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


def store_process(tmp: Path, domain: int, namespace: str) -> Iterator[StoreProcess]:
    """Yield a running store process; stop it afterwards."""
    store = StoreProcess(tmp / "store", domain, namespace)
    try:
        yield store
    finally:
        store.stop()
