"""The store client of a durable subscriber or queue consumer: requests proven with its secret.

With a namespace key, a durable subscriber agrees a secret of its own with
the store incarnation in DURABLE_SUBSCRIBE (the key exchange of
``dcps/wire/_auth_member.py``, as a channel group member does in JOIN);
DURABLE_POLL, DURABLE_ACK, DURABLE_ROLLBACK and DURABLE_CLOSE then carry the
proof of that secret, so another holder of the namespace key, even one
sending under the subscriber's client id, cannot act for it. A restarted
store knows no secret: the subscriber subscribes again (a fresh exchange).
A queue consumer does the same in QUEUE_SUBSCRIBE, and proves its
QUEUE_RECEIVE, QUEUE_ACK, QUEUE_HEARTBEAT and QUEUE_LEAVE.

This extends :class:`~dcps.channels._client.StoreClient` at its three sealing
hooks rather than editing it, so the durables keep their protocol to
themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dcps.channels._client import StoreClient
from dcps.wire._codes import ErrorCode, Op
from dcps.wire._durables import DURABLE_GROUP_PREFIX
from dcps.wire._messages import Reply, Request
from dcps.wire._queues import queue_secret_group
from idl._errors import PreconditionNotMetError

__all__ = ["RESUBSCRIBE_MARKERS", "DurableClient", "durable_secret_group"]

#: Requests that carry the subscriber's (or consumer's) proof.
_PROVEN = frozenset(
    {Op.DURABLE_POLL, Op.DURABLE_ACK, Op.DURABLE_ROLLBACK, Op.DURABLE_CLOSE}
    | {Op.QUEUE_RECEIVE, Op.QUEUE_ACK, Op.QUEUE_HEARTBEAT, Op.QUEUE_LEAVE}
)
#: The subscribes that agree a secret, and the group it is derived for (from the request).
_EXCHANGES: dict[int, Callable[[Request], str]] = {
    Op.DURABLE_SUBSCRIBE: lambda r: DURABLE_GROUP_PREFIX + r.group,
    Op.QUEUE_SUBSCRIBE: lambda r: queue_secret_group(r.topic),
}
#: Requests sealed with the subscriber's secret when it has one (a live re-subscribe needs it).
_SEALED_AS_SUBSCRIBER = _PROVEN | frozenset(_EXCHANGES)
_QUEUE_OPS = frozenset({Op.QUEUE_RECEIVE, Op.QUEUE_ACK, Op.QUEUE_HEARTBEAT, Op.QUEUE_LEAVE})
#: Texts of the errors after which a subscriber must subscribe again (the store forgot it).
RESUBSCRIBE_MARKERS = ("subscribe again", "join first", "restarted before answering")


def durable_secret_group(name: str) -> str:
    """The group name a durable's subscriber secrets are derived for (the store's, too)."""
    return DURABLE_GROUP_PREFIX + name


class DurableClient(StoreClient):
    """A :class:`StoreClient` that seals durable (and queue consumer) requests with the
    subscriber's secret."""

    def offer(self) -> bytes:
        """A fresh key-exchange offer for a DURABLE_SUBSCRIBE or QUEUE_SUBSCRIBE (b"" without
        a key)."""
        offer = self._sealer.member_offer()
        if offer is None:
            return b""
        with self._lock:
            self._offers[offer.public] = offer
        return offer.public

    def _seal(self, index: int, request: Request) -> bytes | None:
        if request.op not in _SEALED_AS_SUBSCRIBER:
            return super()._seal(index, request)
        entry = self._pending.get(request.request_id)
        incarnation = entry.incarnation if entry is not None else self._incarnation(index)
        member = self._secrets.get((index, request.topic, request.group, request.member))
        return self._sealer.seal_request(request, incarnation, member)

    def _needs_rejoin(self, index: int, wire: Request) -> PreconditionNotMetError | None:
        if wire.op not in _PROVEN:
            return super()._needs_rejoin(index, wire)
        if not self._sealer.enabled:
            return None
        if (index, wire.topic, wire.group, wire.member) in self._secrets:
            return None
        what = (
            f"of consumer {wire.member!r} of queue {wire.topic!r}"
            if wire.op in _QUEUE_OPS
            else f"of subscriber {wire.member!r} of durable {wire.group!r} of topic {wire.topic!r}"
        )
        return PreconditionNotMetError(
            f"{Op(wire.op).name} {what}: no subscriber secret for store incarnation "
            f"{self._incarnation(index) or '?'} (the store restarted): subscribe again"
        )

    def _authentic(self, reply: Reply, entry: Any) -> bool:
        request = entry.wire
        group_of = _EXCHANGES.get(request.op)
        if group_of is None:
            return super()._authentic(reply, entry)
        if not self._sealer.accept_reply(reply, entry.incarnation):
            return False
        if not reply.status and self._sealer.enabled:
            public = bytes(request.blob)
            offer = self._offers.get(public)
            if offer is not None:
                self._drop_offer(public, entry)
                try:
                    secret = offer.finish(
                        bytes(reply.blob),
                        group=group_of(request),
                        member=request.member,
                        incarnation=entry.incarnation,
                    )
                except Exception as exc:  # a store answering with a bad exchange value
                    reply.status, reply.error = int(ErrorCode.ILLEGAL_OPERATION), str(exc)
                else:
                    self._secrets[(entry.index, request.topic, request.group, request.member)] = (
                        secret
                    )
        return True
