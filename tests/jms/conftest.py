"""Fixtures of the JMS tests: connections to the test's embedded store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from dcps.jms import Connection
from dcps.store import Store


class Connections:
    """Opens started connections on the test's store; closes them afterwards."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        self.kw: dict[str, Any] = {
            "domain_id": domain_id,
            "namespace": namespace,
            "channel_count": 1,
            "consumer_timeout": timedelta(seconds=2),
        }
        self.opened: list[Connection] = []

    def __call__(self, client_id: str | None = None, *, start: bool = True) -> Connection:
        connection = Connection(client_id, **self.kw)
        self.opened.append(connection)
        if start:
            connection.start()
        return connection

    def close(self) -> None:
        for connection in reversed(self.opened):
            connection.close()


@pytest.fixture
def connect(store: Store, domain_id: int, namespace: str) -> Iterator[Connections]:
    """A factory of started JMS connections on the test's embedded store."""
    factory = Connections(domain_id, namespace)
    try:
        yield factory
    finally:
        factory.close()
