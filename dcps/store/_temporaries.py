"""Temporary topics in the store (JMS ``TemporaryTopic``, issue 15): owner, lease, grants.

The store serves a temporary topic (named :data:`TEMPORARY_TOPIC_PREFIX`...)
while the client that claimed it renews its lease; only that client may
renew, delete or grant consumers of it; only a granted subscriber may consume
it; a publish to one that does not exist is refused. The topic ends (its
consumers closed, their durables deleted) when its connection deletes or
releases it or its lease runs out.

Topics, owners, leases and grants are kept in tables ``temporary_topics`` and
``temporary_grants`` (format version 11, ``docs/store-format.md``): a store
killed and started again serves them as before, each with a fresh lease
(so the owning connection, whose client id is unchanged, renews it as
before; a connection that died with the store lets it run out), and lets
the granted consumers subscribe again (their non-persistent durables do not
outlive the store: they subscribe anew at the tail).

:class:`TemporaryTopics` is the part of the store's
:class:`~dcps.store._durables.DurableService` that keeps them (a mixin: it
closes and deletes the topic's durables through the service).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from dcps.wire._durables import (
    TEMPORARY_TOPIC_PREFIX,
    DurableSubscribeRequest,
    TemporaryAction,
    TemporaryTopicRequest,
)
from idl._errors import InvalidDestinationError, OutOfResourcesError, PreconditionNotMetError

if TYPE_CHECKING:
    from ._log import ChannelLog

__all__ = ["TemporaryTopics"]

_log = logging.getLogger("dcps.store.durables")

#: Temporary topics a store serves at once, and consumers granted per temporary topic.
_MAX_TEMPORARIES = 65536
_MAX_GRANTS = 4096


@attrs.define
class _Temporary:
    """A temporary topic: the client that owns it, its lease, the consumers it granted."""

    owner: str
    deadline: float
    grants: set[str] = attrs.Factory(set)
    lease_ms: int = 0


class TemporaryTopics:
    """The temporary topics of a store (service thread only; mixed into ``DurableService``)."""

    if TYPE_CHECKING:
        _durables: dict[str, Any]
        _log: ChannelLog
        _clock: Callable[[], float]

        def _close_by_store(self, d: Any, name: str, why: str) -> None: ...

        def _destroy(self, d: Any) -> None: ...

    def _init_temporaries(self) -> None:
        """Load the temporary topics the store served when it stopped (fresh leases)."""
        self._temporaries: dict[str, _Temporary] = {}
        now = self._clock()
        with self._log.read("loading the temporary topics") as db:
            topics = db.execute("SELECT topic, owner, lease_ms FROM temporary_topics").fetchall()
            grants = db.execute("SELECT topic, subscriber FROM temporary_grants").fetchall()
        for topic, owner, lease_ms in topics:
            self._temporaries[str(topic)] = _Temporary(
                str(owner), now + int(lease_ms) / 1000, set(), int(lease_ms)
            )
        for topic, subscriber in grants:
            t = self._temporaries.get(str(topic))
            if t is not None:
                t.grants.add(str(subscriber))
        if topics:
            _log.info("%d temporary topic(s) served again, with fresh leases", len(topics))

    def _keep_claim(self, topic: str, t: _Temporary) -> None:
        def keep(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT OR REPLACE INTO temporary_topics VALUES (?, ?, ?)",
                (topic, t.owner, t.lease_ms),
            )

        self._log.write(f"keeping temporary topic {topic!r}", keep)

    def _keep_grant(self, topic: str, subscriber: str) -> None:
        def keep(db: sqlite3.Connection) -> None:
            db.execute("INSERT OR IGNORE INTO temporary_grants VALUES (?, ?)", (topic, subscriber))

        self._log.write(f"granting a consumer of temporary topic {topic!r}", keep)

    def _forget_temporary(self, topic: str) -> None:
        def forget(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM temporary_grants WHERE topic = ?", (topic,))
            db.execute("DELETE FROM temporary_topics WHERE topic = ?", (topic,))

        self._log.write(f"ending temporary topic {topic!r}", forget)

    def _tick_temporaries(self, now: float) -> None:
        """End the temporary topics whose lease ran out (once per store round)."""
        for topic, t in list(self._temporaries.items()):
            if now > t.deadline:
                try:
                    self._end_temporary(topic, "ended: its connection went away (lease expired)")
                except Exception:  # (its row could not be deleted): the next round tries again
                    _log.exception("temporary topic %r could not be ended", topic)

    def _temporary(self, client: str, r: TemporaryTopicRequest) -> None:
        """Serve a TEMPORARY_TOPIC request: only the client that claimed the topic may act."""
        t = self._temporaries.get(r.topic)
        now = self._clock()
        if r.action is TemporaryAction.CLAIM and t is None:
            if len(self._temporaries) >= _MAX_TEMPORARIES:
                raise OutOfResourcesError(
                    f"the store serves {_MAX_TEMPORARIES} temporary topics: no more"
                )
            t = _Temporary(client, now + r.lease_ms / 1000, set(), r.lease_ms)
            self._keep_claim(r.topic, t)  # before it is served: a restart serves it again
            self._temporaries[r.topic] = t
            _log.info("temporary topic %r claimed by client %s", r.topic, client)
            return
        if t is None:
            raise InvalidDestinationError(
                f"temporary topic {r.topic!r} does not exist (deleted, or its connection "
                "closed or went away)"
            )
        if t.owner != client:
            raise InvalidDestinationError(
                f"temporary topic {r.topic!r} belongs to another connection"
            )
        if r.action is TemporaryAction.CLAIM:
            t.deadline = now + r.lease_ms / 1000
            if r.lease_ms != t.lease_ms:
                t.lease_ms = r.lease_ms
                self._keep_claim(r.topic, t)
        elif r.action is TemporaryAction.GRANT:
            if len(t.grants) >= _MAX_GRANTS and r.subscriber not in t.grants:
                raise OutOfResourcesError(
                    f"temporary topic {r.topic!r} has {_MAX_GRANTS} consumers granted: no more"
                )
            if r.subscriber not in t.grants:
                self._keep_grant(r.topic, r.subscriber)
                t.grants.add(r.subscriber)
        else:
            consumers = sum(len(d.subs) for d in self._durables.values() if d.topic == r.topic)
            if r.action is TemporaryAction.DELETE and consumers:
                raise PreconditionNotMetError(
                    f"temporary topic {r.topic!r} has {consumers} active consumer(s): close "
                    "them before deleting it"
                )
            self._end_temporary(r.topic, "was deleted by its connection")

    def _end_temporary(self, topic: str, why: str) -> None:
        """Forget temporary topic ``topic``: its consumers are closed, their durables deleted."""
        self._forget_temporary(topic)  # first: a failed write (disk full) changes nothing
        self._temporaries.pop(topic, None)
        _log.info("temporary topic %r %s", topic, why)
        for d in [d for d in self._durables.values() if d.topic == topic]:
            for name in list(d.subs):
                self._close_by_store(d, name, f"temporary topic {topic!r} {why}")
            self._destroy(d)

    def _check_temporary_consumer(self, r: DurableSubscribeRequest) -> None:
        """Only a subscriber its owning connection granted consumes a temporary topic."""
        t = self._temporaries.get(r.topic)
        if t is None:
            raise InvalidDestinationError(
                f"temporary topic {r.topic!r} does not exist (deleted, or its connection "
                "closed or went away)"
            )
        if r.subscriber not in t.grants:
            raise InvalidDestinationError(
                f"temporary topic {r.topic!r} belongs to another connection: only the "
                "connection that created it may consume from it"
            )
        if r.persistent or not r.anonymous:
            raise InvalidDestinationError(
                f"temporary topic {r.topic!r}: a temporary topic has no durable subscriptions"
            )

    def check_publish(self, topic: str) -> None:
        """Refuse a publish to a temporary topic that does not exist (any client may publish
        to a live one, as JMS lets anyone send to a temporary topic it was given)."""
        if topic.startswith(TEMPORARY_TOPIC_PREFIX) and topic not in self._temporaries:
            raise InvalidDestinationError(
                f"temporary topic {topic!r} does not exist (deleted, or its connection "
                "closed or went away)"
            )
