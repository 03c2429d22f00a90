"""A child Python process that speaks in lines: stdout collected by a thread, stdin lines sent.

Used by the channel tests that run stores, members and publishers as separate
processes (and kill them with SIGKILL).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tests.support.peers.channels_types import wait_until

__all__ = ["LinePeer", "killed_at_exit"]


class LinePeer:
    """``python ARGS...`` whose complete stdout lines are collected in :attr:`lines`."""

    def __init__(self, args: list[str], timeout: float = 30.0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.timeout = timeout
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.endswith("\n"):  # a SIGKILL can cut the last line short: not a line
                self.lines.append(line.strip())

    def wait_line(self, predicate: Callable[[str], bool], timeout: float | None = None) -> None:
        """Wait until some output line satisfies ``predicate`` (fail if the peer exits first)."""

        def seen() -> bool:
            if any(predicate(x) for x in list(self.lines)):
                return True
            if self.proc.poll() is not None:
                self._thread.join(1)
                if not any(predicate(x) for x in self.lines):
                    err = self.proc.stderr.read() if self.proc.stderr else ""
                    raise AssertionError(f"peer exited ({self.proc.returncode}): {err}")
            return False

        wait_until(seen, self.timeout if timeout is None else timeout)

    def send(self, line: str) -> None:
        """Write one line to the peer's stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def records(self, kind: str) -> list[list[int]]:
        """The integer fields of every output line starting with ``kind``."""
        return [
            [int(x) for x in line.split()[1:]]
            for line in list(self.lines)
            if line.split()[:1] == [kind]
        ]

    def kill(self) -> None:
        """SIGKILL the process and reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self._thread.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def killed_at_exit() -> Iterator[list[LinePeer]]:
    """A list to put started peers in; every one is killed when the block ends."""
    started: list[LinePeer] = []
    try:
        yield started
    finally:
        for peer in started:
            peer.kill()
