"""Channelled topics, subscriber groups and the store (seed 000).

A channelled topic is split into channels; the store sequences, persists and
pushes each channel's elements; publishers batch into channels; subscribers
receive them anonymously or as members of a subscriber group.
"""

from ._assignment import assign_channels
from ._flow import FlowControl
from ._log import SyncMode, TopicInfo, default_channel_count
from ._position import CommitResult, CommitStatus, Position
from ._publisher import ChannelPublisher, OrderBy
from ._shares import Share
from ._store import Store, run_store
from ._subscriber import ChannelOwnershipListener, ChannelSubscriber, Element
from ._topic import ChannelledTopic

__all__ = [
    "ChannelOwnershipListener",
    "ChannelPublisher",
    "ChannelSubscriber",
    "ChannelledTopic",
    "CommitResult",
    "CommitStatus",
    "Element",
    "FlowControl",
    "OrderBy",
    "Position",
    "Share",
    "Store",
    "SyncMode",
    "TopicInfo",
    "assign_channels",
    "default_channel_count",
    "run_store",
]
