"""A raw ``cyclonedds`` participant that holds the namespace key: the insider attacker.

It seals requests as any key holder can (under any client id, even another
client's), but holds no member, consumer or query secret of anyone else.
"""

from __future__ import annotations

from typing import Any

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps.wire._auth_member import MemberSecret
from dcps.wire._messages import Reply, Request
from dcps.wire._names import REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from dcps.wire._sealing import Sealer
from tests.support.waiting import eventually

TIMEOUT = 20.0


class RawKeyHolder:
    """A raw ``cyclonedds`` participant holding the namespace key (not the consumer's
    secret), writing requests under any client id and reading any client's replies."""

    def __init__(self, domain_id: int, namespace: str, key: str, client: str) -> None:
        self.dp = DomainParticipant(domain_id)
        self.client = client
        self.sealer = Sealer.from_keys(key, None)
        requests = Topic(self.dp, "dcps_channels_request", Request)
        replies = Topic(self.dp, "dcps_channels_reply", Reply)
        self.writer = DataWriter(
            Publisher(self.dp, qos=Qos(Policy.Partition([namespace]))),
            requests,
            qos=REQUEST_WRITER_QOS,
        )
        self.replies = DataReader(
            Subscriber(self.dp, qos=Qos(Policy.Partition([reply_partition(namespace, client)]))),
            replies,
            qos=REPLY_QOS,
        )
        self._ids = 10**12  # far from the victim's own request ids

    def send(self, request: Any, incarnation: str, secret: MemberSecret | None) -> int:
        """Seal ``request`` (with a made-up member proof if ``secret``) and write it."""
        self._ids += 1
        wire = request.to_wire(self.client, self._ids)
        self.sealer.seal_request(wire, incarnation, secret)
        eventually(self.writer.get_matched_subscriptions, TIMEOUT, "the store's reader")
        self.writer.write(wire)
        return self._ids

    def call(self, request: Any, incarnation: str, secret: MemberSecret | None = None) -> Reply:
        """:meth:`send`, then wait for the store's answer."""
        return self.answer(self.send(request, incarnation, secret))

    def answer(self, rid: int) -> Reply:
        got: dict[int, Reply] = {}

        def answered() -> bool:
            for r in self.replies.take(N=64):
                if isinstance(r, Reply):
                    got[r.request_id] = r
            return rid in got

        eventually(answered, TIMEOUT, f"the store's answer to request {rid}")
        return got[rid]

    def close(self) -> None:
        self.dp.__del__()
