"""Test-only fault injection for the Spark source and sink: never a user option.

The retry tests need a task that fails once, at a chosen point, after it did
part of its work (a read task after yielding rows, a write task after
publishing), to show that Spark's retry loses nothing and doubles nothing.
This module is the only place that knows how, and it stays out of the data
source's options.

When the environment variable :data:`FAULTS_ENV` names a directory (set in
the environment of Spark's Python workers, i.e. before the session starts),
a task of topic ``T`` at point ``where`` (``"read"`` or ``"write"``) fails if
the marker file ``<dir>/<quoted T>.<where>`` exists: it removes the marker
and raises :class:`InjectedFaultError`. Removing is atomic, so exactly one task
fails per marker, and a test proves the fault fired by the marker being gone
(and by Spark's count of failed tasks). Without the variable the hook costs
one environment lookup per task.

:func:`maybe_stall` is the driver's hook (``"commit"``: before the sink's
commit reaches the store, ``"committed"``: right after): it consumes its
marker the same way, then creates ``<marker>.reached`` and waits there, so
that a test can kill the driver at exactly that point.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from urllib.parse import quote

__all__ = [
    "FAULTS_ENV",
    "STALL_SECONDS",
    "InjectedFaultError",
    "marker",
    "maybe_fail",
    "maybe_stall",
]

#: The environment variable naming the marker directory (tests only).
FAULTS_ENV = "DCPS_SPARK_TEST_FAULTS"
#: How long :func:`maybe_stall` waits to be killed before it fails instead.
STALL_SECONDS = 300.0


class InjectedFaultError(RuntimeError):
    """The failure a test asked for (see the module docstring)."""


def marker(directory: str | os.PathLike[str], topic: str, where: str) -> Path:
    """The marker file that makes the next ``where`` task of ``topic`` fail once."""
    return Path(directory) / f"{quote(topic, safe='')}.{where}"


def maybe_fail(topic: str, where: str) -> None:
    """Raise :class:`InjectedFaultError` once if a test armed ``where`` for ``topic``."""
    directory = os.environ.get(FAULTS_ENV)
    if not directory:
        return
    try:
        marker(directory, topic, where).unlink()
    except FileNotFoundError:
        return
    raise InjectedFaultError(f"dcps: injected test failure in a {where} task of topic {topic!r}")


def maybe_stall(topic: str, where: str) -> None:
    """Wait to be killed (up to :data:`STALL_SECONDS`) once if a test armed ``where``."""
    directory = os.environ.get(FAULTS_ENV)
    if not directory:
        return
    path = marker(directory, topic, where)
    try:
        path.unlink()
    except FileNotFoundError:
        return
    path.with_name(path.name + ".reached").touch()
    time.sleep(STALL_SECONDS)  # the test kills this process meanwhile: nothing to wait on
    raise InjectedFaultError(f"dcps: injected stall in the {where} of topic {topic!r} timed out")
