"""Shared fixtures: every test talks real Cyclone DDS over loopback only.

Isolation: each xdist worker uses its own DDS domain, and each test its own
topic names (a random suffix), so tests can run in parallel without seeing
each other's data.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.embedded_store import worker_domain

# Tests must never send traffic beyond this machine: pin Cyclone DDS to the
# loopback interface (multicast works on lo when Cyclone is told it does).
# Set before anything imports cyclonedds; child processes inherit it.
LOOPBACK_CONFIG = (
    '<CycloneDDS><Domain id="any"><General><Interfaces>'
    '<NetworkInterface name="lo" multicast="true"/>'
    "</Interfaces></General></Domain></CycloneDDS>"
)
os.environ["CYCLONEDDS_URI"] = LOOPBACK_CONFIG


@pytest.fixture
def domain_id(worker_id: str) -> int:
    """A DDS domain id of this xdist worker's own (``DCPS_TEST_DOMAIN_BASE`` shifts it)."""
    return worker_domain(worker_id)


@pytest.fixture
def unique() -> str:
    """A short random token for topic names and partitions private to one test."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def topic_name(unique: str) -> str:
    """A topic name no other test uses."""
    return f"t_{unique}"


@pytest.fixture
def namespace(unique: str) -> str:
    """A channel-store namespace (DDS partition prefix) no other test uses."""
    return f"ns_{unique}"


@pytest.fixture
def store(tmp_path: Path, domain_id: int, namespace: str) -> Iterator[Any]:
    """An embedded channel store on a temporary directory, in the test's namespace."""
    from dcps.store import Store, SyncMode

    with Store(
        tmp_path / "store", domain_id=domain_id, namespace=namespace, sync=SyncMode.NORMAL
    ) as s:
        yield s
