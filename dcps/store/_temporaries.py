"""Temporary topics in the store (JMS ``TemporaryTopic``, issue 15): owner, lease, grants.

The store serves a temporary topic (named :data:`TEMPORARY_TOPIC_PREFIX`...)
while the client that claimed it renews its lease; only that client may
renew, delete or grant consumers of it; only a granted subscriber may consume
it; a publish to one that does not exist is refused. The topic ends (its
consumers closed, their durables deleted) when its connection deletes or
releases it or its lease runs out.

:class:`TemporaryTopics` is the part of the store's
:class:`~dcps.store._durables.DurableService` that keeps them (a mixin: it
closes and deletes the topic's durables through the service).
"""

from __future__ import annotations

import logging
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


class TemporaryTopics:
    """The temporary topics of a store (service thread only; mixed into ``DurableService``)."""

    if TYPE_CHECKING:
        _durables: dict[str, Any]
        _clock: Callable[[], float]

        def _close_by_store(self, d: Any, name: str, why: str) -> None: ...

        def _destroy(self, d: Any) -> None: ...

    def _init_temporaries(self) -> None:
        self._temporaries: dict[str, _Temporary] = {}  # in memory: they end with the store

    def _tick_temporaries(self, now: float) -> None:
        """End the temporary topics whose lease ran out (once per store round)."""
        for topic, t in list(self._temporaries.items()):
            if now > t.deadline:
                self._end_temporary(topic, "ended: its connection went away (lease expired)")

    def _temporary(self, client: str, r: TemporaryTopicRequest) -> None:
        """Serve a TEMPORARY_TOPIC request: only the client that claimed the topic may act."""
        t = self._temporaries.get(r.topic)
        now = self._clock()
        if r.action is TemporaryAction.CLAIM and t is None:
            if len(self._temporaries) >= _MAX_TEMPORARIES:
                raise OutOfResourcesError(
                    f"the store serves {_MAX_TEMPORARIES} temporary topics: no more"
                )
            self._temporaries[r.topic] = _Temporary(client, now + r.lease_ms / 1000)
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
        elif r.action is TemporaryAction.GRANT:
            if len(t.grants) >= _MAX_GRANTS and r.subscriber not in t.grants:
                raise OutOfResourcesError(
                    f"temporary topic {r.topic!r} has {_MAX_GRANTS} consumers granted: no more"
                )
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
