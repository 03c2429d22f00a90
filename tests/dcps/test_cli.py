"""The dcps command line, run as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys

import dcps
from tests.support.topic_types import Reading


def dcps_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcps", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ),
    )


class TestCli:
    def test_topics_lists_a_live_writer(self, domain_id: int, topic_name: str) -> None:
        """`dcps topics` shows a topic that a process on the domain publishes."""
        with dcps.DomainParticipant(domain_id) as participant:
            topic = dcps.Topic(participant, topic_name, Reading)
            dcps.DataWriter(participant, topic)
            result = dcps_cli("topics", "--domain", str(domain_id), "--seconds", "6")
        assert result.returncode == 0, result.stderr
        line = next(line for line in result.stdout.splitlines() if topic_name in line)
        assert "sensors::Reading" in line

    def test_store_requires_a_data_directory(self) -> None:
        """`dcps store` without --data fails with a usage message naming the option."""
        result = dcps_cli("store")
        assert result.returncode != 0
        assert "--data" in result.stderr

    def test_store_refuses_a_bad_fetch_thread_count(self, tmp_path) -> None:
        """`dcps store --fetch-threads 0` fails with a usage message naming the option."""
        result = dcps_cli("store", "--data", str(tmp_path / "s"), "--fetch-threads", "0")
        assert result.returncode != 0
        assert "--fetch-threads" in result.stderr
        assert not (tmp_path / "s").exists()
