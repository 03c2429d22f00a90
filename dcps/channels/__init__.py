"""Channelled topics and subscriber groups: the store's client (seed 000).

A channelled topic is split into channels; the store sequences, persists and
pushes each channel's elements; publishers batch into channels; subscribers
receive them anonymously or as members of a subscriber group.

The names are imported on first use (PEP 562): the Spark reader needs only the
store format modules, not the DDS entities behind publishers and the store.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._element import Element
    from ._flow import FlowControl
    from ._lifecycle import ClientState
    from ._membership import ChannelOwnershipListener
    from ._order import OrderBy
    from ._position import CommitResult, CommitStatus, Position
    from ._publisher import ChannelPublisher
    from ._subscriber import ChannelSubscriber, destroy_subscriber_group
    from ._topic import ChannelledTopic
    from ._undecodable import UndecodableElementError

# public name -> defining module, imported by __getattr__ on first access
_LAZY: dict[str, str] = {
    "ChannelOwnershipListener": "dcps.channels._membership",
    "ChannelPublisher": "dcps.channels._publisher",
    "ChannelSubscriber": "dcps.channels._subscriber",
    "ChannelledTopic": "dcps.channels._topic",
    "ClientState": "dcps.channels._lifecycle",
    "CommitResult": "dcps.channels._position",
    "CommitStatus": "dcps.channels._position",
    "Element": "dcps.channels._element",
    "FlowControl": "dcps.channels._flow",
    "OrderBy": "dcps.channels._order",
    "Position": "dcps.channels._position",
    "UndecodableElementError": "dcps.channels._undecodable",
    "destroy_subscriber_group": "dcps.channels._subscriber",
}

__all__ = [
    "ChannelOwnershipListener",
    "ChannelPublisher",
    "ChannelSubscriber",
    "ChannelledTopic",
    "ClientState",
    "CommitResult",
    "CommitStatus",
    "Element",
    "FlowControl",
    "OrderBy",
    "Position",
    "UndecodableElementError",
    "destroy_subscriber_group",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dcps.channels' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
