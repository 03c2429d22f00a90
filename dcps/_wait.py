"""Waiting on a condition with a deadline (discovery, acknowledgements, statuses)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta

from dcps._cyclone.timing import INFINITE_NS, duration_ns
from idl._errors import DcpsTimeoutError

_POLL_START = 0.001
_POLL_MAX = 0.05


def wait_until(predicate: Callable[[], bool], timeout: timedelta | float | None, what: str) -> None:
    """Return once ``predicate()`` is true; raise :class:`DcpsTimeoutError` after ``timeout``.

    Polls with a short, growing interval: discovery and status changes have no
    single event to wait on that covers every case.
    """
    ns = duration_ns(timeout)
    deadline = None if ns == INFINITE_NS else time.monotonic() + ns / 1e9
    interval = _POLL_START
    while not predicate():
        if deadline is not None and time.monotonic() >= deadline:
            raise DcpsTimeoutError(f"{what}: timed out after {timeout}")
        time.sleep(interval)
        interval = min(interval * 2, _POLL_MAX)
