"""One embedded store per test module, in this xdist worker's own DDS domain."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from dcps.store import Store, SyncMode

__all__ = ["module_store", "served_store", "worker_domain"]


def worker_domain(worker_id: str) -> int:
    """A DDS domain id of this xdist worker's own (``DCPS_TEST_DOMAIN_BASE`` shifts it)."""
    base = int(os.environ.get("DCPS_TEST_DOMAIN_BASE", "1"))
    return base + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))


@contextmanager
def module_store(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str, label: str
) -> Iterator[tuple[Store, int, str]]:
    """``(store, domain id, namespace)``: an embedded store (sync NORMAL) of a fresh
    namespace in a temporary directory named after ``label``."""
    domain = worker_domain(worker_id)
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    path = tmp_path_factory.mktemp(label) / "store"
    with Store(path, domain_id=domain, namespace=namespace, sync=SyncMode.NORMAL) as store:
        yield store, domain, namespace


def served_store(label: str) -> Callable[..., Iterator[dict[str, Any]]]:
    """A module-scoped fixture (assign it to ``served`` in a test module): one
    :func:`module_store` for the module, as ``{"store": store, "kw": {"domain_id": ...,
    "namespace": ...}}``, the keywords that reach it."""

    @pytest.fixture(scope="module")
    def served(
        tmp_path_factory: pytest.TempPathFactory, worker_id: str
    ) -> Iterator[dict[str, Any]]:
        with module_store(tmp_path_factory, worker_id, label) as (store, domain, namespace):
            yield {"store": store, "kw": {"domain_id": domain, "namespace": namespace}}

    return served
