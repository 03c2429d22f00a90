"""Peer: a test session in miniature, for the test to SIGKILL (tests/support/reaper.py).

Usage: killed_session.py cluster WORKDIR | group | orphan

- ``cluster``: a Spark standalone cluster of one worker (tests/support/spark_cluster.py);
  prints ``daemons PID...`` (each leads a process group) and ``reaper PID``.
- ``group``: a process group of two ``sleep`` processes given to a ``GroupReaper``
  (and no parent-death signal); prints ``group PGID`` and ``reaper PID``.
- ``orphan``: a ``sleep`` with the parent-death signal in a session of its own (and no
  watchdog); prints ``orphan PID``.

Then prints ``ready`` and waits for EOF on stdin (the test kills it before).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the project, for its tests

from tests.support.reaper import GroupReaper, with_parent_death_signal
from tests.support.spark_cluster import SparkCluster

#: the sleeps must not hold this program's output open: the test reads it to its end
QUIET: dict[str, Any] = {"stdin": subprocess.DEVNULL, "stdout": subprocess.DEVNULL}


def main() -> None:
    """Start what the mode says, report it, and wait."""
    mode = sys.argv[1]
    if mode == "cluster":
        cluster = SparkCluster(Path(sys.argv[2]), workers=1)
        print("daemons", *cluster.pids())
        print("reaper", cluster.reaper.pid)
    elif mode == "group":
        reaper = GroupReaper()
        leader = subprocess.Popen(
            ["sh", "-c", "sleep 600 & exec sleep 600"], start_new_session=True, **QUIET
        )
        reaper.add(leader.pid)
        print("group", leader.pid)
        print("reaper", reaper.pid)
    elif mode == "orphan":
        orphan = subprocess.Popen(
            with_parent_death_signal(["sleep", "600"]), start_new_session=True, **QUIET
        )
        print("orphan", orphan.pid)
    else:
        sys.exit(f"unknown mode {mode!r}")
    print("ready", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
