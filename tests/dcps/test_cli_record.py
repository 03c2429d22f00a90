"""`dcps record` as a user runs it: missing pyarrow, misspelt topics, QoS profiles, rolling."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import dcps
import qos
from tests.support.cli import cli_env, run_dcps, start_dcps
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TYPE = "tests.support.topic_types:Reading"


@pytest.fixture
def no_pyarrow(tmp_path: Path) -> dict[str, str]:
    """An environment in which `import pyarrow` fails, as on a machine without the extra."""
    blocker = tmp_path / "block" / "pyarrow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pyarrow'\", name='pyarrow')\n"
    )
    return cli_env(str(tmp_path / "block"))


class TestRecordCli:
    def test_fails_fast_with_the_install_hint_without_pyarrow(
        self, no_pyarrow: dict[str, str], domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        """Without pyarrow `record` exits 1 at once with the pip hint; nothing is 'ready'."""
        out = tmp_path / "rec"
        result = run_dcps(
            "record", "--out", str(out), "--topic", f"{topic_name}={TYPE}",
            "--domain", str(domain_id), "--seconds", "30",
            env=no_pyarrow, timeout=25,
        )  # fmt: skip
        assert result.returncode == 1
        assert "pyarrow" in result.stderr
        assert "pip install" in result.stderr
        assert "[arrow]" in result.stderr
        assert "ready" not in result.stdout
        assert "Traceback" not in result.stderr
        assert not out.exists()

    def test_warns_about_a_topic_no_writer_publishes(
        self, domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        """A misspelt topic gets a warning naming it and the close name a writer publishes."""
        pytest.importorskip("pyarrow")
        with dcps.DomainParticipant(domain_id) as participant:
            dcps.DataWriter(participant, dcps.Topic(participant, topic_name, Reading))
            result = run_dcps(
                "record", "--out", str(tmp_path / "rec"), "--topic", f"{topic_name}x={TYPE}",
                "--domain", str(domain_id), "--seconds", "4", "--match-timeout", "3",
            )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert f"no writer of topic '{topic_name}x'" in result.stderr
        assert f"did you mean '{topic_name}'" in result.stderr
        assert f"{topic_name}x: 0 samples" in result.stdout

    def test_no_warning_when_the_writer_is_there(
        self, domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        """A topic with a writer in the recorded partition records without a warning."""
        pytest.importorskip("pyarrow")
        with dcps.DomainParticipant(domain_id) as participant:
            publisher = dcps.Publisher(participant, partitions=["p_rec"])
            dcps.DataWriter(publisher, dcps.Topic(participant, topic_name, Reading))
            result = run_dcps(
                "record", "--out", str(tmp_path / "rec"), "--topic", f"{topic_name}={TYPE}",
                "--partition", "p_rec", "--domain", str(domain_id), "--seconds", "3",
                "--match-timeout", "3", "--json",
            )  # fmt: skip
        assert result.returncode == 0, result.stderr
        assert "warning" not in result.stderr
        assert json.loads(result.stdout.split("\n", 1)[1])["samples"] == {topic_name: 0}

    def test_qos_profile_gets_transient_local_history(
        self, domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        """`--qos reliable_state` reads what a transient-local writer wrote before it started."""
        pytest.importorskip("pyarrow")
        profile = qos.profile("reliable_state")
        with dcps.DomainParticipant(domain_id) as participant:
            topic = dcps.Topic(participant, topic_name, Reading, qos=profile.topic)
            writer = dcps.DataWriter(participant, topic, qos=profile.writer)
            writer.write(Reading(sensor=1, value=1.0, label="before"))
            recorded = run_dcps(
                "record", "--out", str(tmp_path / "rec"), "--topic", f"{topic_name}={TYPE}",
                "--domain", str(domain_id), "--seconds", "4", "--qos", "reliable_state",
            )  # fmt: skip
        assert recorded.returncode == 0, recorded.stderr
        assert f"{topic_name}: 1 samples" in recorded.stdout

    def test_unknown_qos_profile_is_named(self, domain_id: int, tmp_path: Path) -> None:
        """`--qos nope` fails with exit 1 naming the profile and the known ones."""
        pytest.importorskip("pyarrow")
        result = run_dcps(
            "record", "--out", str(tmp_path / "rec"), "--topic", f"t={TYPE}",
            "--domain", str(domain_id), "--seconds", "1", "--qos", "nope",
        )  # fmt: skip
        assert result.returncode == 1
        assert "no QoS profile named 'nope'" in result.stderr
        assert "reliable_state" in result.stderr

    def test_roll_writes_a_file_per_interval(
        self, domain_id: int, topic_name: str, tmp_path: Path
    ) -> None:
        """With `--roll 0.2` samples written apart land in separate Parquet files while running."""
        pytest.importorskip("pyarrow")
        out = tmp_path / "rec"
        rec = start_dcps(
            "record", "--out", str(out), "--topic", f"{topic_name}={TYPE}",
            "--domain", str(domain_id), "--seconds", "60", "--roll", "0.2", "--match-timeout", "0",
        )  # fmt: skip
        try:
            assert rec.stdout is not None
            assert rec.stdout.readline().startswith("dcps record ready")
            with dcps.DomainParticipant(domain_id) as participant:
                writer = dcps.DataWriter(participant, dcps.Topic(participant, topic_name, Reading))
                writer.wait_for_readers(1, timeout=30)

                def files() -> list[Path]:
                    return sorted((out / topic_name).glob("date=*/part-*.parquet"))

                writer.write(Reading(sensor=1, value=1.0, label="one"))
                eventually(lambda: len(files()) == 1, 30, "the first file")
                writer.write(Reading(sensor=2, value=2.0, label="two"))
                eventually(lambda: len(files()) == 2, 30, "a second file")
                rec.terminate()  # before the writer closes: its disposals are not recorded
                output, errors = rec.communicate(timeout=30)
        finally:
            rec.kill()
        assert rec.returncode == 0, errors
        assert f"{topic_name}: 2 samples" in output


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs, unmounted afterwards (skipped where mounting is not allowed)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root/CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount_point)], check=True)


def fill(disk: Path) -> None:
    """Write a filler file until the disk is full (ENOSPC)."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError as exc:
        if exc.errno != errno.ENOSPC:
            raise
    finally:
        os.close(fd)


class TestRecordWriteFailure:
    @pytest.mark.parametrize(
        ("break_disk", "cause", "error"),
        [
            (fill, "No space left on device", "OutOfResourcesError"),
            (
                lambda disk: subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True),
                "Read-only file system",
                "PreconditionNotMetError",
            ),
        ],
        ids=["disk-full", "read-only"],
    )
    def test_exits_1_naming_the_topic_and_the_cause(
        self,
        domain_id: int,
        topic_name: str,
        small_disk: Path,
        break_disk: Callable[[Path], object],
        cause: str,
        error: str,
    ) -> None:
        """When its output disk fills or turns read-only, `record` stops at once and exits 1
        with one line naming the topic, the directory and the cause (no traceback, no
        'N samples' summary as if all went well)."""
        pytest.importorskip("pyarrow")
        out = small_disk / "rec"
        rec = start_dcps(
            "record", "--out", str(out), "--topic", f"{topic_name}={TYPE}",
            "--domain", str(domain_id), "--roll", "0.2", "--match-timeout", "0", "--no-progress",
        )  # fmt: skip
        try:
            assert rec.stdout is not None
            assert rec.stdout.readline().startswith("dcps record ready")
            with dcps.DomainParticipant(domain_id) as participant:
                writer = dcps.DataWriter(participant, dcps.Topic(participant, topic_name, Reading))
                writer.wait_for_readers(1, timeout=30)
                writer.write(Reading(sensor=1, value=1.0, label="one"))
                eventually(
                    lambda: any((out / topic_name).glob("date=*/part-*.parquet")), 30, "a file"
                )
                break_disk(small_disk)
                writer.write(Reading(sensor=2, value=2.0, label="two"))
                output, errors = rec.communicate(timeout=60)  # it ends by itself
        finally:
            rec.kill()
            rec.wait()
            subprocess.run(["mount", "-o", "remount,rw", str(small_disk)], check=False)
        assert rec.returncode == 1, (output, errors)
        lines = errors.strip().splitlines()
        assert len(lines) == 1, errors
        assert lines[0].startswith(f"dcps record: {error}: "), errors
        assert f"topic {topic_name!r}" in lines[0]
        assert str(out / topic_name) in lines[0]
        assert cause in lines[0]
        assert "samples" not in output
