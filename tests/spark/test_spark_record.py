"""Recordings: plain DDS topics with SampleInfo into Parquet, read back by pandas and Spark."""

from __future__ import annotations

import decimal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark_support import PEERS, run_peer, spark_session

pytest.importorskip("pyspark")
pd = pytest.importorskip("pandas")

from dcps.spark._record import recording_spark_schema  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


@pytest.fixture(scope="module")
def spark() -> Any:
    """The worker's SparkSession."""
    return spark_session()


def record(domain: int, topic: str, out: Path, count: int) -> str:
    """Run ``python -m dcps.spark.record`` while a writer process writes ``count`` samples."""
    rec = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dcps.spark.record",
            "--out",
            str(out),
            "--domain",
            str(domain),
            "--topic",
            f"{topic}=spark_types:Variable",
            "--seconds",
            "60",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(PEERS)},
    )
    try:
        assert rec.stdout is not None
        assert rec.stdout.readline().startswith("dcps record ready")
        run_peer(str(PEERS / "spark_dds_writer.py"), str(domain), topic, str(count))
    finally:
        rec.terminate()
        output, errors = rec.communicate(30)
    assert rec.returncode == 0, errors
    return output


class TestRecording:
    def test_pandas_and_spark_read_the_recording(
        self, spark: Any, domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        """Every sample, the dispose and the writer's exit land in a dataset both tools read."""
        output = record(domain_id, topic_name, tmp_path, 20)
        # 20 samples, a dispose of id 0, then auto-disposes as the writer process exits
        # (those racing the recorder's stop may be missed)
        assert f"{topic_name}: " in output
        dataset = tmp_path / topic_name
        assert [p.name.startswith("date=") for p in dataset.iterdir()] == [True]
        df = pd.read_parquet(dataset)
        valid = df[df["_valid_data"]].sort_values("id")
        assert list(valid["id"]) == list(range(20))
        assert valid["big"].iloc[3] == decimal.Decimal(2**64 - 4)
        assert valid["_source_timestamp"].notna().all()
        invalid = df[~df["_valid_data"]]
        assert set(invalid["id"]) <= set(range(20))
        assert invalid["name"].isna().all()
        assert f"{topic_name}: {len(df)} samples" in output
        assert (invalid["_instance_state"] == "NOT_ALIVE_DISPOSED").all()
        # The explicit dispose of id 0: Cyclone adds an invalid sample for it only if
        # the recorder had already taken id 0's data; otherwise the data sample itself
        # carries NOT_ALIVE_DISPOSED. Either way the recording shows id 0 disposed.
        disposed = df[df["_instance_state"] == "NOT_ALIVE_DISPOSED"]
        assert "[0]" in set(disposed["_key"])
        rows = spark.read.schema(
            recording_spark_schema(__import__("spark_types").Variable)
        ).parquet(str(dataset))
        got = rows.filter("_valid_data AND id = 5").collect()[0]
        assert got["name"] == "s5"
        assert got["maybe"] == 5
        assert got["blob"] == bytes([0])
        assert got["points"][0]["y"] == 0.5
        assert got["date"] is not None
        assert rows.count() == len(df)


class TestWaitForWritersGone:
    """``Recorder.wait_for_writers_gone``: stop recording only after the writers' ends arrived."""

    def test_the_end_of_a_killed_writer_is_recorded(
        self, domain_id: int, topic_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A writer's process dies without a word: once its lease (1 s) ends the recorder
        unmatches it, and each of its instances' last recorded sample says no writers."""
        from dcps.spark import Recorder
        from tests.support.peer import Peer
        from tests.support.topic_types import Reading
        from tests.support.waiting import eventually

        # the writer's process announces the short lease (a DCPS_* setting replaces the
        # loopback pin, hence the interface); this process keeps its domain's configuration
        monkeypatch.setenv("DCPS_LEASE_DURATION", "1")
        monkeypatch.setenv("DCPS_INTERFACES", "lo")
        peer = Peer(domain_id, topic_name)
        monkeypatch.delenv("DCPS_LEASE_DURATION")
        monkeypatch.delenv("DCPS_INTERFACES")
        try:
            with Recorder(tmp_path, {topic_name: Reading}, domain_id=domain_id) as rec:
                peer.start_writer({"reliable": True, "keep_all": True})
                peer.call("wait_readers")
                for sensor in range(3):
                    peer.call("write", sensor=sensor, value=1.0)
                eventually(lambda: rec.counts[topic_name] == 3, what="3 readings recorded")
                peer.kill()
                rec.wait_for_writers_gone(timeout=20)
        finally:
            peer.close()
        df = pd.read_parquet(tmp_path / topic_name)
        assert rec.counts[topic_name] == len(df) == 6
        last = df.sort_values("_offset").groupby("sensor").tail(1)
        assert sorted(last["sensor"]) == [0, 1, 2]
        assert not last["_valid_data"].any()
        assert (last["_instance_state"] == "NOT_ALIVE_NO_WRITERS").all()

    def test_a_writer_that_stays_times_out_naming_the_topic(
        self, domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        import dcps
        from dcps.spark import Recorder
        from idl._errors import DcpsTimeoutError
        from tests.support.topic_types import Reading

        with (
            dcps.DomainParticipant(domain_id) as writing,
            Recorder(tmp_path, {topic_name: Reading}, domain_id=domain_id) as rec,
        ):
            writer = dcps.DataWriter(writing, dcps.Topic(writing, topic_name, Reading))
            writer.wait_for_readers(1)
            with pytest.raises(DcpsTimeoutError, match=topic_name):
                rec.wait_for_writers_gone(timeout=0.2)
