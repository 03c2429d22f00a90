"""Opening channelled publishers and subscribers in the fast (mutation) tests of the
channel client, and holding an embedded store's writes back.

The ``opened`` fixture (``tests/channels/conftest.py``) collects what a test opens;
these helpers open into it, so the test closes everything, last first.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, OrderBy, Position
from dcps.store import Store
from tests.support.peers.channels_types import Msg

#: Short: a mutant that loses an element fails its test sooner.
TIMEOUT = 5.0


def retained_topic(name: str, channels: int = 1) -> ChannelledTopic:
    """A topic of :class:`Msg` that keeps consumed elements (so seeks can go back)."""
    return ChannelledTopic(name, Msg, channel_count=channels, retain_consumed=True)


def publish(
    opened: list[Any], kw: dict[str, Any], t: ChannelledTopic, seqs: range, channel: int = 0
) -> list[Position]:
    """Publish ``Msg(channel, s)`` for each of ``seqs`` to ``channel``; their positions."""
    pub: ChannelPublisher[Msg] = ChannelPublisher(t, order_by=OrderBy.fixed(channel), **kw)
    opened.append(pub)
    positions = pub.publish_many([Msg(channel, s) for s in seqs]).result(TIMEOUT)
    assert positions is not None
    return positions


def subscriber(opened: list[Any], kw: dict[str, Any], t: ChannelledTopic, **extra: Any) -> Any:
    """A subscriber of ``t``, closed with the test."""
    sub: ChannelSubscriber[Msg] = ChannelSubscriber(t, **kw, **extra)
    opened.append(sub)
    return sub


@contextmanager
def store_held(store: Store) -> Iterator[None]:
    """The store's writes (so its commits and confirmations) wait while this holds the
    file's write lock: nothing is mocked, the store is just slow to write."""
    db = sqlite3.connect(store.log.path, timeout=1.0, isolation_level=None)
    try:
        db.execute("BEGIN IMMEDIATE")
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()
