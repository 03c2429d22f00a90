"""Waiting on conditions in tests: never a fixed sleep."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(probe: Callable[[], T], timeout: float = 10.0, what: str = "condition") -> T:
    """Poll ``probe`` (briefly backing off) until it returns a truthy value; return it."""
    deadline = time.monotonic() + timeout
    interval = 0.002
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(interval)
        interval = min(interval * 2, 0.05)
