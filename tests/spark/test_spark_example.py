"""The Spark pipeline example runs as the README says, in its own processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pyspark")

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]


class TestSparkPipelineExample:
    def test_pipeline_publishes_windowed_stats_and_reads_the_recording(
        self, domain_id: int
    ) -> None:
        """Readings in, one stats element per sensor and 10 s window out, recording read back."""
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "examples.spark_pipeline",
                "--domain",
                str(domain_id),
                "--sensors",
                "3",
                "--seconds",
                "20",
            ],
            cwd=ROOT,
            env=dict(os.environ),
            capture_output=True,
            text=True,
            timeout=170,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        out = result.stdout
        assert "fleet: published 60 readings" in out
        assert "streaming job: 60 readings in" in out
        assert "pipeline/stats holds 6 windows; sensor 0:" in out
        assert "window +  0s: count 10, mean 20.45, low 20.0, high 20.9" in out
        assert "recording, hottest reading per sensor: 0: 20.9, 1: 21.9, 2: 22.9" in out
        assert out.rstrip().endswith("Done.")
