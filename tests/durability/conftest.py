"""Fixtures shared by the durability tests (only those that ask for them by name).

The write-batching tests (``test_write_batching*.py``) take ``participant``, the
remote readers ``remote`` and ``remote_best_effort``, and mark themselves
``usefixtures("no_durability_service_wait")``; the durability service's mutation tests
take ``domain`` and ``services`` (with ``tests.support.raw_durability.start``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dcps
from dcps.store import DurabilityService
from tests.support.embedded_store import worker_domain
from tests.support.line_peer import LinePeer
from tests.support.write_batching import remote_reader


@pytest.fixture
def no_durability_service_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """TRANSIENT writers need no durability service: they do not wait for one."""
    monkeypatch.setenv("DCPS_DURABILITY_WRITER_WAIT", "0")


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    """A participant of the worker's domain, deleted at the end of the test."""
    with dcps.DomainParticipant(domain_id) as dp:
        yield dp


@pytest.fixture
def remote(domain_id: int, topic_name: str) -> Iterator[LinePeer]:
    """A reliable reader of ``topic_name`` in another process."""
    yield from remote_reader(domain_id, topic_name)


@pytest.fixture
def remote_best_effort(domain_id: int, topic_name: str) -> Iterator[LinePeer]:
    """A best-effort reader of ``topic_name`` in another process (nothing is resent)."""
    yield from remote_reader(domain_id, topic_name, "best_effort")


@pytest.fixture(scope="module")
def domain(worker_id: str) -> int:
    """The xdist worker's DDS domain, for module-scoped fixtures (``domain_id`` is a
    test's)."""
    return worker_domain(worker_id)


@pytest.fixture
def services() -> Iterator[list[DurabilityService]]:
    """Services a test starts (closed at its end, in reverse order)."""
    started: list[DurabilityService] = []
    yield started
    for svc in reversed(started):
        svc.close()
