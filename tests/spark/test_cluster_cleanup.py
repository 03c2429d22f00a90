"""The tests' Spark cluster dies with the test process, even one killed with SIGKILL.

A fixture's teardown does not run when pytest ends without tearing down
(pytest-timeout's ``thread`` method calls ``os._exit``; SIGKILL, SIGTERM, a crashed
xdist worker). The cluster's JVMs used to run on after such a session.
A child process plays the session here (tests/support/peers/killed_session.py): it
starts what the test names and is killed with SIGKILL, and what it started must go.
Two mechanisms (tests/support/reaper.py) are tried each alone on ``sleep``
processes, and together on a real cluster of one worker.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.reaper import alive, group_members
from tests.support.waiting import eventually

pytestmark = [pytest.mark.multiprocess]

ROOT = Path(__file__).resolve().parents[2]  # the child sessions import the project's tests


@pytest.fixture
def session() -> Iterator[list[LinePeer]]:
    """The killed sessions a test starts (each killed at the end, if the test did not)."""
    with killed_at_exit() as started:
        yield started


def start(session: list[LinePeer], *args: str, timeout: float = 30.0) -> LinePeer:
    peer = LinePeer([str(PEERS_DIR / "killed_session.py"), *args], timeout=timeout)
    session.append(peer)
    peer.wait_line(lambda line: line == "ready")
    return peer


def reported(peer: LinePeer, kind: str) -> list[int]:
    """The pids of the peer's ``kind`` line."""
    (pids,) = peer.records(kind)
    return pids


def gone(pids: list[int], what: str, timeout: float = 20.0) -> None:
    eventually(lambda: not any(alive(pid) for pid in pids), timeout, f"{what} gone")


def test_the_watchdog_kills_the_whole_group_when_the_session_is_killed(
    session: list[LinePeer],
) -> None:
    """The group's leader and the process it started (as a Spark worker starts
    executors) die; neither had a parent-death signal."""
    peer = start(session, "group")
    (pgid,) = reported(peer, "group")
    (reaper,) = reported(peer, "reaper")
    eventually(lambda: len(group_members(pgid)) == 2, 10, "both sleeps started")
    members = group_members(pgid)
    peer.kill()
    gone(members, "the group's processes")
    gone([reaper], "the watchdog")


def test_the_parent_death_signal_kills_a_program_without_the_watchdog(
    session: list[LinePeer],
) -> None:
    peer = start(session, "orphan")
    (orphan,) = reported(peer, "orphan")
    eventually(
        lambda: Path(f"/proc/{orphan}/cmdline").read_bytes().startswith(b"sleep"), 10, "exec"
    )
    assert alive(orphan)
    peer.kill()
    gone([orphan], "the program")


HANGING_TEST = textwrap.dedent(
    """
    import os, subprocess, time
    from pathlib import Path
    import pytest
    from tests.support.reaper import GroupReaper

    OUT = Path(os.environ["REAPER_TEST_OUT"])

    @pytest.fixture
    def group():
        reaper = GroupReaper()
        quiet = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}
        leader = subprocess.Popen(["sleep", "600"], start_new_session=True, **quiet)
        reaper.add(leader.pid)
        (OUT / "group").write_text(str(leader.pid))
        yield
        (OUT / "torn_down").write_text("yes")
        os.killpg(leader.pid, 9)
        reaper.close()

    def test_hangs(group):
        time.sleep(600)
    """
)


def test_pytest_timeouts_thread_method_skips_the_teardown_and_the_group_still_dies(
    tmp_path: Path,
) -> None:
    """pytest-timeout's ``thread`` method ends a hung test with ``os._exit``: no fixture
    teardown, no atexit handler runs. The group the fixture gave the watchdog dies all
    the same. (Its ``signal`` method, the default here, fails the test and tears down,
    when the test is in Python code when the alarm comes.)"""
    (tmp_path / "test_hanging.py").write_text(HANGING_TEST)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(tmp_path / "test_hanging.py"),
            "--rootdir",
            str(tmp_path),
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "--timeout",
            "3",
            "--timeout-method",
            "thread",
        ],
        env={
            **os.environ,
            "REAPER_TEST_OUT": str(tmp_path),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        },
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "Timeout" in done.stdout + done.stderr
    assert not (tmp_path / "torn_down").exists()
    gone([int((tmp_path / "group").read_text())], "the hung test's group")


@pytest.mark.slow
def test_a_killed_session_leaves_no_cluster_jvm_behind(
    session: list[LinePeer], tmp_path: Path
) -> None:
    """The master's and the worker's JVMs (and their process groups) end with the session
    that started them, though it was killed before any teardown."""
    pytest.importorskip("pyspark")
    peer = start(session, "cluster", str(tmp_path), timeout=150.0)
    daemons = reported(peer, "daemons")
    (reaper,) = reported(peer, "reaper")
    assert len(daemons) == 2
    jvms = [pid for pgid in daemons for pid in group_members(pgid)]
    assert set(daemons) <= set(jvms)
    for pid in daemons:
        assert b"java" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    peer.kill()
    gone(jvms, "the cluster's JVMs", timeout=30)
    assert not any(group_members(pgid) for pgid in daemons)
    gone([reaper], "the watchdog")
