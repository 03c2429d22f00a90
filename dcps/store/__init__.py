"""The store: the server that sequences, persists and serves channelled topics.

It runs embedded (:class:`Store`, a thread in the process) or as a service
(``dcps store --data DIR``). Clients (``dcps.channels``, ``dcps.spark``) meet
it only through the wire protocol (``dcps.wire``).

The names are imported on first use (PEP 562): the Spark reader needs only the
log, not the DDS entities behind the service.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from idl._public import show_as as _show_as

if _typing.TYPE_CHECKING:
    from ._assignment import assign_channels
    from ._durability import DurabilityService
    from ._log import SyncMode, TopicInfo, default_channel_count
    from ._service import Store, run_store
    from ._shares import Share

# public name -> defining module, imported by __getattr__ on first access
_LAZY: dict[str, str] = {
    "DurabilityService": "dcps.store._durability",
    "Share": "dcps.store._shares",
    "Store": "dcps.store._service",
    "SyncMode": "dcps.store._log",
    "TopicInfo": "dcps.store._log",
    "assign_channels": "dcps.store._assignment",
    "default_channel_count": "dcps.store._log",
    "run_store": "dcps.store._service",
}

__all__ = [
    "DurabilityService",
    "Share",
    "Store",
    "SyncMode",
    "TopicInfo",
    "assign_channels",
    "default_channel_count",
    "run_store",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dcps.store' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    _show_as("dcps.store", value)  # tracebacks and reprs name dcps.store.Store, not _service
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
