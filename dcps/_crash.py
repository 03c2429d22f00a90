"""A test-only crash point: a process kills itself with SIGKILL at a named point.

When the environment variable :data:`CRASH_ENV` names a point, the process
that reaches :func:`crash_point` with that name dies there at once, exactly as
``kill -9`` would kill it (the tests of ``dcps.jms`` transactions use it to
crash a client just before its commit, and a store just after a commit point).
Unset (always, outside such tests) it costs one dictionary look-up.
"""

from __future__ import annotations

import os
import signal

__all__ = ["CRASH_ENV", "crash_point"]

CRASH_ENV = "DCPS_TEST_CRASH_AT"


def crash_point(name: str) -> None:
    """Die with SIGKILL here if :data:`CRASH_ENV` names ``name``."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
