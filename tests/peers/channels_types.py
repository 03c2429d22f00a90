"""The sample type and helpers shared by channel tests and their peer processes.

No ``from __future__ import annotations``: cyclonedds resolves field types at run time.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass

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
