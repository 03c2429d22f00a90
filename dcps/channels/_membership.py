"""A subscriber's place in its group: join, heartbeats, assignments, expulsion, rejoin.

:class:`GroupMembership` speaks to the store for one member; what it owns is
handed to an ``on_owned(channels, lost)`` callback (the subscriber's
cursors), and :meth:`GroupMembership.rejoin` is the one call that joins again
asking for the channels owned now (a sticky rejoin after a store restart).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from dcps.wire._messages import Assignment
from dcps.wire._replies import Membership
from idl._errors import DcpsTimeoutError
from idl._public import show_as

from ._client import StoreClient

if TYPE_CHECKING:
    from ._subscriber import ChannelSubscriber

__all__ = ["ChannelOwnershipListener", "GroupMembership", "notify_listeners"]

_log = logging.getLogger("dcps.channels.subscriber")


class ChannelOwnershipListener:
    """Told when a group member's channel ownership changes (override what you need).

    Callbacks run on the subscriber's delivery thread; keep them short.
    """

    def on_channels_assigned(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        """``channels`` are now owned by ``subscriber``."""

    def on_channels_revoked(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        """``channels`` moved to other members in a rebalance."""

    def on_channels_lost(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        """``channels`` were taken because the member timed out (or the store restarted)."""


def notify_listeners(
    listeners: Iterable[ChannelOwnershipListener],
    subscriber: ChannelSubscriber[Any],
    gained: set[int],
    gone: set[int],
    *,
    lost: bool,
) -> None:
    """Tell ``listeners`` about one ownership change; a failing listener is logged, not raised."""
    for listener in listeners:
        try:
            if gone:
                if lost:
                    listener.on_channels_lost(subscriber, frozenset(gone))
                else:
                    listener.on_channels_revoked(subscriber, frozenset(gone))
            if gained:
                listener.on_channels_assigned(subscriber, frozenset(gained))
        except Exception:
            _log.exception("channel ownership listener %r failed", listener)


class GroupMembership:
    """One member of a subscriber group (or an anonymous subscriber's private group).

    ``owned()`` tells which channels the member holds now; ``on_owned(channels,
    lost)`` is called with the channels it holds after each change (``lost``:
    taken because it timed out or the store forgot it). Not thread-safe: the
    subscriber calls it holding its lock (heartbeat replies only set flags).
    """

    def __init__(
        self,
        client: StoreClient,
        topic: str,
        group: str,
        member: str,
        *,
        anonymous: bool,
        timeout: float,
        owned: Callable[[], set[int]],
        on_owned: Callable[[set[int], bool], None],
        wake: Callable[[], None],
    ) -> None:
        self._client = client
        self.topic = topic
        self.group = group
        self.member = member
        self.anonymous = anonymous
        self.timeout = timeout
        self._owned = owned
        self._on_owned = on_owned
        self._wake = wake
        self.generation = 0
        self.incarnation = ""
        #: Set when the store no longer knows this member: the next round joins again.
        self.need_join = False
        #: Set (on the client's reply thread) when the store restarted: rejoin at once.
        self.store_restarted = False
        self.last_heartbeat = 0.0
        # the channels held when the store last dropped this member: asked back on rejoin
        self._previous: set[int] = set()

    @property
    def timeout_ms(self) -> int:
        """The member timeout as the store takes it."""
        return int(self.timeout * 1000)

    def join(self, timeout: float | None, previous_channels: Iterable[int] = ()) -> None:
        """Join the group; the store's answer replaces what this member owns.

        ``previous_channels`` are channels to ask for back (a sticky rejoin).
        """
        joined = self._client.join(
            self.topic,
            self.group,
            self.member,
            self.timeout_ms,
            anonymous=self.anonymous,
            previous_channels=tuple(previous_channels),
            timeout=timeout,
        )
        self.need_join = False
        self.store_restarted = False
        self.incarnation = joined.incarnation
        self.generation = joined.generation
        self.last_heartbeat = time.monotonic()
        self._previous = set()
        self._on_owned(set(joined.channels), False)

    def rejoin(self, timeout: float | None, *, keep: bool = False) -> None:
        """Join again now, asking for the channels owned now (or before being dropped).

        With ``keep`` (after a store restart: the member did nothing wrong) the
        channels stay owned meanwhile, so those the store gives back keep
        their place and nothing delivered is delivered again; without it
        (the store forgot this member) they are lost first and resume at the
        group's commit.
        """
        held = self._owned() or self._previous
        if not keep and self._owned():
            self._previous = set(held)
            self._on_owned(set(), True)  # not delivered from until the store confirms them
        self.join(timeout, previous_channels=sorted(held))

    def on_store_restart(self) -> None:
        """The store restarted (a StoreClient restart listener): rejoin on the next round.

        Runs on the client's reply thread, so it only flags and wakes the
        delivery thread, which rejoins at once with the channels it owns.
        """
        self.store_restarted = True
        self._wake()

    def apply(self, assignments: Iterable[Any]) -> None:
        """Apply the store's assignment announcements that concern this member.

        With a namespace key, an assignment counts only when it verifies as
        sealed by the coordinator incarnation it names: a forged one is
        ignored (and counted in ``client.sealer.drops()``).
        """
        for sample in assignments:
            if not isinstance(sample, Assignment):
                continue
            if sample.topic != self.topic or sample.group != self.group:
                continue
            if sample.incarnation != self.incarnation or sample.generation <= self.generation:
                continue
            if not self._client.sealer.accept_assignment(sample):
                continue  # not sealed by the coordinator it names: forged (counted, logged)
            self.generation = sample.generation
            if self.member not in sample.members:
                self.expel()
                continue
            me = sample.members.index(self.member)
            self._on_owned({c for c, owner in enumerate(sample.owners) if owner == me}, False)

    def expel(self) -> None:
        """The store dropped this member: it loses its channels and joins again when it can."""
        if not self.need_join:
            self.need_join = True
            self._previous = self._owned() or self._previous
            self._on_owned(set(), True)

    def heartbeat_due(self, now: float) -> bool:
        """True when a quarter of the member timeout passed since the last heartbeat."""
        return now - self.last_heartbeat > self.timeout / 4

    def send_heartbeat(self) -> None:
        """Tell the store this member is alive (asynchronously; a refusal makes it rejoin)."""
        self.last_heartbeat = time.monotonic()
        if self.need_join:
            return
        fut = self._client.heartbeat_async(self.topic, self.group, self.member)
        fut.add_done_callback(self._heartbeat_done)

    def _heartbeat_done(self, fut: Future[Membership]) -> None:
        try:
            membership: Membership | None = fut.result()
        except DcpsTimeoutError:
            return  # no answer (store down): the next heartbeat retries
        except Exception:
            membership = None  # refused: join again
        if membership is None or membership.incarnation != self.incarnation:
            self.need_join = True
            self._wake()

    def leave(self, timeout: float) -> None:
        """Leave the group (the store reassigns this member's channels at once)."""
        self._client.leave(self.topic, self.group, self.member, timeout=timeout)


show_as("dcps.channels", ChannelOwnershipListener)
