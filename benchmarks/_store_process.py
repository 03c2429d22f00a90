"""The store as the benchmarks run it: ``python -m dcps.store`` in its own process."""

import signal
import subprocess
import sys
import tempfile


class StoreProcess:
    """A store (synchronous=NORMAL) on ``data``, or on a temporary directory it removes."""

    def __init__(self, domain: int, namespace: str, data: str | None = None) -> None:
        self._tmp = None if data else tempfile.TemporaryDirectory(prefix="dcps-bench-")
        self.data = data or self._tmp.name  # type: ignore[union-attr]
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "dcps.store",
                "--data",
                self.data,
                "--domain",
                str(domain),
                "--namespace",
                namespace,
                "--sync",
                "NORMAL",
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.startswith("dcps store ready"):
            raise RuntimeError(f"store did not start: {line!r}")

    def rss_kib(self) -> int:
        """The store process's resident set size (KiB), from ``/proc``."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS in /proc status")

    def close(self) -> None:
        """Stop the store (SIGTERM) and remove its temporary directory, if it made one."""
        self._stop(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL the store; a data directory given to it stays, for a restart on it."""
        self._stop(signal.SIGKILL)

    def _stop(self, sig: int) -> None:
        self.proc.send_signal(sig)
        self.proc.wait(30)
        if self.proc.stdout:
            self.proc.stdout.close()
        if self._tmp is not None:
            self._tmp.cleanup()
