"""The test-only failure hook of the Spark source and sink (dcps.spark._faults), no JVM."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcps.spark._faults import FAULTS_ENV, InjectedFaultError, marker, maybe_fail


class TestFaultHook:
    def test_silent_without_the_environment_variable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """With no marker directory announced, a marker file changes nothing."""
        monkeypatch.delenv(FAULTS_ENV, raising=False)
        armed = marker(tmp_path, "a/b", "read")
        armed.touch()
        maybe_fail("a/b", "read")
        assert armed.exists()

    def test_an_armed_marker_fails_exactly_one_task(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The first task of the armed topic and point fails and consumes the marker; no other."""
        monkeypatch.setenv(FAULTS_ENV, str(tmp_path))
        armed = marker(tmp_path, "pipeline/readings", "write")
        armed.touch()
        maybe_fail("pipeline/readings", "read")  # another point
        maybe_fail("pipeline/other", "write")  # another topic
        assert armed.exists()
        with pytest.raises(InjectedFaultError, match="write task of topic 'pipeline/readings'"):
            maybe_fail("pipeline/readings", "write")
        assert not armed.exists()
        maybe_fail("pipeline/readings", "write")  # the retry runs through
        assert sorted(p.name for p in tmp_path.iterdir()) == []
