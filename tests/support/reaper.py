"""Processes that die with the test process, however it ends.

A fixture's ``finally`` does not run when the test process ends without tearing
down: pytest-timeout's ``thread`` method (``os._exit``), SIGKILL or SIGTERM
from outside, an xdist worker that crashed. Two things cover those cases (Linux):

- ``GroupReaper``: a watchdog process in a session of its own that holds the
  read end of a pipe from the test process. When the test process is gone,
  however it went, the kernel closes the write end; the watchdog reads EOF and
  SIGKILLs every process group it was given (with whatever was started in
  them: a Spark worker's executor JVMs).
- ``with_parent_death_signal``: a command that sets ``PR_SET_PDEATHSIG``
  (SIGKILL) and then execs the real program, so that the kernel kills it when
  the thread that started it ends, even if the watchdog was killed too. The
  signal is tied to the starting *thread*: start such programs from a thread
  that lives as long as they must (pytest's main thread does).

Run as a program, this file is the watchdog (``watch``) or the exec wrapper
(``exec PARENT_PID -- PROGRAM ARGS...``); it imports only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

__all__ = ["GroupReaper", "alive", "group_members", "with_parent_death_signal"]

_THIS = str(Path(__file__).resolve())
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def with_parent_death_signal(argv: list[str]) -> list[str]:
    """``argv`` run so that it is SIGKILLed when the calling thread ends (Linux; elsewhere
    ``argv`` as it is). The wrapper costs one short Python start before the exec."""
    if not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-I", _THIS, "exec", str(os.getpid()), "--", *argv]


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie (a killed process whose parent
    died stays a zombie until init reaps it: it runs nothing)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group ``pgid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


class GroupReaper:
    """A watchdog that SIGKILLs the process groups it was given when this process is gone.

    ``add`` a group (its leader's pid, as with ``start_new_session=True``) once it is
    started, ``discard`` it once it is stopped; ``close`` ends the watchdog, which kills
    the groups still given. The watchdog's pid is ``pid``.
    """

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-I", _THIS, "watch"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,  # not killed with this process's group
        )
        assert self._proc.stdin is not None
        self._pipe = self._proc.stdin

    @property
    def pid(self) -> int:
        """The watchdog process."""
        return self._proc.pid

    def _say(self, line: str) -> None:
        self._pipe.write(f"{line}\n".encode())
        self._pipe.flush()

    def add(self, pgid: int) -> None:
        """Kill process group ``pgid`` when this process is gone."""
        self._say(f"+{pgid}")

    def discard(self, pgid: int) -> None:
        """Forget ``pgid`` (stopped: its number may be reused)."""
        self._say(f"-{pgid}")

    def close(self) -> None:
        """End the watchdog (it kills the groups still given) and wait for it."""
        with contextlib.suppress(OSError):
            self._pipe.close()
        self._proc.wait()


def _watch() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's ^C is for the tests
    groups: set[int] = set()
    for line in sys.stdin.buffer:  # until EOF: the test process closed the pipe or is gone
        text = line.decode().strip()
        if text.startswith("+"):
            groups.add(int(text[1:]))
        elif text.startswith("-"):
            groups.discard(int(text[1:]))
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signal.SIGKILL)


def _exec(parent: int, argv: list[str]) -> None:
    import ctypes  # only the wrapper needs it

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != parent:  # the parent ended before the signal was set
        os._exit(1)
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    if sys.argv[1:2] == ["watch"]:
        _watch()
    elif sys.argv[1:2] == ["exec"] and sys.argv[3:4] == ["--"]:
        _exec(int(sys.argv[2]), sys.argv[4:])
    else:
        sys.exit(f"usage: {sys.argv[0]} watch | exec PARENT_PID -- PROGRAM ARGS...")
