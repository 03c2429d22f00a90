"""The sample type and helpers shared by channel tests and their peer processes.

No ``from __future__ import annotations``: cyclonedds resolves field types at run time.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t
from cyclonedds.idl.annotations import key


@dataclass
class Msg(IdlStruct, typename="dcps_test.channels.Msg"):
    """A keyed test sample: ``key`` picks the channel, ``seq`` counts per key."""

    key: t.int32
    key("key")
    seq: t.int64
    text: str = ""


def wait_until(predicate: Callable[[], object], timeout: float = 10.0, poll: float = 0.02) -> None:
    """Poll ``predicate`` until true; fail with AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s")
        time.sleep(poll)


def receive_n(sub: Any, n: int, timeout: float = 30.0) -> list[Any]:
    """Receive exactly ``n`` elements from a channel subscriber (in batches), or fail.

    ``timeout`` bounds each receive; a test that stalls fails after it.
    """
    got: list[Any] = []
    while len(got) < n:
        got += sub.receive(n - len(got)).result(timeout)
    return got
