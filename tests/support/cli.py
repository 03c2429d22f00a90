"""Running the ``dcps`` command line as a user does: ``python -m dcps ...``, a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

__all__ = ["ROOT", "cli_env", "run_dcps", "start_dcps"]

#: The checkout whose code the child processes import (so `--type tests.support...` resolves).
ROOT = Path(__file__).resolve().parents[2]


def cli_env(*first_on_path: str, **extra: str) -> dict[str, str]:
    """The test environment with ``first_on_path`` and the checkout first on PYTHONPATH."""
    paths = [*first_on_path, str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **extra}


def run_dcps(
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 90,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m dcps ARGS`` to completion."""
    return subprocess.run(
        [sys.executable, "-m", "dcps", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env or cli_env(),
        cwd=ROOT,
    )


def start_dcps(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``python -m dcps ARGS`` with piped stdin, stdout and stderr."""
    return subprocess.Popen(
        [sys.executable, "-m", "dcps", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env or cli_env(),
        cwd=ROOT,
    )
