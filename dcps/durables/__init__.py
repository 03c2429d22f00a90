"""Durable subscriptions, queues and maps in the store (seeds 001 and 002).

Durables (Universal Messaging named objects, TIBCO FTL durables) are
consumers of a channelled topic that the store keeps: what each has
acknowledged, who holds what, and (for last-value durables) the last element
of each topic. Key-value maps (:class:`KeyValueMap`) and queues
(:class:`QueuePublisher`, :class:`QueueSubscriber`) are FTL's other
destinations, kept in the store's own tables. See the README's tables from seed
concepts to this API.

The names are imported on first use (PEP 562), like ``dcps.channels``'s.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from dcps.wire._durables import DurableInfo, DurableKind

    from ._admin import durable_info, unsubscribe
    from ._element import DurableElement
    from ._map import (
        KeyValueMap,
        MapChange,
        MapEntry,
        MapOperation,
        MapWatch,
        RevisionMismatchError,
    )
    from ._options import AckMode, AckTiming, FilterConflictError, Start
    from ._queue import QueueElement, QueuePublisher, QueueState, QueueSubscriber, delete_queue
    from ._subscriber import DurableSubscriber

# public name -> defining module, imported by __getattr__ on first access
_LAZY: dict[str, str] = {
    "AckMode": "dcps.durables._options",
    "AckTiming": "dcps.durables._options",
    "DurableElement": "dcps.durables._element",
    "DurableInfo": "dcps.wire._durables",
    "DurableKind": "dcps.wire._durables",
    "DurableSubscriber": "dcps.durables._subscriber",
    "FilterConflictError": "dcps.durables._options",
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
    "Start": "dcps.durables._options",
    "delete_queue": "dcps.durables._queue",
    "durable_info": "dcps.durables._admin",
    "unsubscribe": "dcps.durables._admin",
}

__all__ = [
    "AckMode",
    "AckTiming",
    "DurableElement",
    "DurableInfo",
    "DurableKind",
    "DurableSubscriber",
    "FilterConflictError",
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
    "Start",
    "delete_queue",
    "durable_info",
    "unsubscribe",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dcps.durables' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    from idl._public import show_as

    show_as("dcps.durables", value)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
