"""Durables, queues and key-value maps in the store (seeds 001 and 002).

Placeholder package root until helper N's lands (it owns this file): the
names of maps and queues are imported on first use (PEP 562), so
``import dcps.durables`` stays light.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._map import (
        KeyValueMap,
        MapChange,
        MapEntry,
        MapOperation,
        MapWatch,
        RevisionMismatchError,
    )
    from ._queue import (
        Acknowledge,
        QueueElement,
        QueuePublisher,
        QueueState,
        QueueSubscriber,
        delete_queue,
    )

# public name -> defining module, imported by __getattr__ on first access
_LAZY: dict[str, str] = {
    "Acknowledge": "dcps.durables._queue",
    "KeyValueMap": "dcps.durables._map",
    "MapChange": "dcps.durables._map",
    "MapEntry": "dcps.durables._map",
    "MapOperation": "dcps.durables._map",
    "MapWatch": "dcps.durables._map",
    "QueueElement": "dcps.durables._queue",
    "QueuePublisher": "dcps.durables._queue",
    "QueueState": "dcps.durables._queue",
    "QueueSubscriber": "dcps.durables._queue",
    "RevisionMismatchError": "dcps.durables._map",
    "delete_queue": "dcps.durables._queue",
}

__all__ = [
    "Acknowledge",
    "KeyValueMap",
    "MapChange",
    "MapEntry",
    "MapOperation",
    "MapWatch",
    "QueueElement",
    "QueuePublisher",
    "QueueState",
    "QueueSubscriber",
    "RevisionMismatchError",
    "delete_queue",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dcps.durables' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
