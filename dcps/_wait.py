"""Waiting on a condition with a deadline (discovery, acknowledgements, statuses)."""

from __future__ import annotations

import time
from collections.abc import Callable

from dcps._timeout import Timeout, timeout_seconds
from idl._errors import DcpsTimeoutError

_POLL_START = 0.001
_POLL_MAX = 0.05


def wait_until(predicate: Callable[[], bool], timeout: Timeout | None, what: str) -> None:
    """Return once ``predicate()`` is true; raise :class:`DcpsTimeoutError` after ``timeout``.

    Polls with a short, growing interval: discovery and status changes have no
    single event to wait on that covers every case.
    """
    seconds = timeout_seconds(timeout)
    deadline = None if seconds is None else time.monotonic() + seconds
    interval = _POLL_START
    while not predicate():
        if deadline is not None and time.monotonic() >= deadline:
            raise DcpsTimeoutError(f"{what}: timed out after {timeout}")
        time.sleep(interval)
        interval = min(interval * 2, _POLL_MAX)
