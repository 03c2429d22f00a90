"""A store in its own process (``python -m dcps.store``), to kill with SIGKILL and restart."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path


class StoreProcess:
    """``python -m dcps.store`` on ``data`` (synchronous=NORMAL: survives a process crash)."""

    def __init__(self, data: Path, domain_id: int, namespace: str, *extra: str) -> None:
        self.data = data
        self.domain_id = domain_id
        self.namespace = namespace
        self._extra = extra
        self.proc = self._start()

    def _start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-m", "dcps.store", "--data", str(self.data),
             "--domain", str(self.domain_id), "--namespace", self.namespace,
             "--sync", "NORMAL", *self._extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=os.environ.copy(),
        )  # fmt: skip
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the store prints one line once it serves
        if not line.startswith("dcps store ready"):
            proc.kill()
            proc.wait()
            raise AssertionError(f"store did not start: {line!r}")
        return proc

    def kill(self) -> None:
        """SIGKILL the store and reap it (its data directory stays)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def restart(self) -> None:
        """Kill the store with SIGKILL, then start it again on the same data directory."""
        self.kill()
        self.proc = self._start()
