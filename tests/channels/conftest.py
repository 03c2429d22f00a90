"""Fixtures of the channel client's tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def opened() -> Iterator[list[Any]]:
    """Publishers and subscribers a test opens, closed (last first) when it ends."""
    entities: list[Any] = []
    try:
        yield entities
    finally:
        for entity in reversed(entities):
            entity.close()
