"""A raw ``cyclonedds`` participant that writes store requests by hand and reads the replies.

It plays any client (or an attacker): typed requests (``to_wire``) or hand-made
``Request`` samples, sealed with a namespace key or not, under its own client id or
another's. Replies are awaited on a condition with a short timeout, so a store that
never answers costs seconds, not minutes (the mutation runs of ``_service.py``).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, TypeVar

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps.channels._client import StoreClient
from dcps.wire._auth_keys import write_key_file
from dcps.wire._auth_member import MemberSecret
from dcps.wire._messages import Assignment, Reply, Request, StoreAnnouncement
from dcps.wire._names import (
    ANNOUNCE_QOS,
    ASSIGN_QOS,
    REPLY_QOS,
    REQUEST_WRITER_QOS,
    reply_partition,
)
from dcps.wire._sealing import Sealer
from dcps.wire._transport import Endpoint
from tests.support.waiting import eventually

__all__ = ["REPLY_TIMEOUT", "RawRequester"]

T = TypeVar("T")

#: How long a test waits for one reply of the store.
REPLY_TIMEOUT = 5.0


class RawRequester:
    """Writes requests to the stores of ``namespace`` and reads the replies to ``client``.

    ``sealer``: seal each request as a holder of that key would (None: unsealed).
    ``partition``: where to write the requests (default: the namespace's, read by a
    single store; ``request_partition`` names a share's). ``match``: wait until a
    store's request reader matches (False: no store runs yet).
    """

    def __init__(
        self,
        domain_id: int,
        namespace: str,
        *,
        client: str | None = None,
        sealer: Sealer | None = None,
        partition: str | None = None,
        match: bool = True,
    ) -> None:
        self.namespace = namespace
        self.client = client or uuid.uuid4().hex
        self.sealer = sealer
        self.dp = DomainParticipant(domain_id)
        self._requests = Topic(self.dp, "dcps_channels_request", Request)
        self._replies = Topic(self.dp, "dcps_channels_reply", Reply)
        self._stores = Topic(self.dp, "dcps_channels_store", StoreAnnouncement)
        self._assignments = Topic(self.dp, "dcps_channels_assignment", Assignment)
        self.writer: DataWriter[Any] = DataWriter(
            Publisher(self.dp, qos=Qos(Policy.Partition([partition or namespace]))),
            self._requests,
            qos=REQUEST_WRITER_QOS,
        )
        self.reader = self.listen(self.client)
        self.got: dict[int, Reply] = {}
        self._kept: list[Any] = []
        self._readers: dict[Any, DataReader[Any]] = {}
        self._ids = 10**9
        if match:
            eventually(self.writer.get_matched_subscriptions, REPLY_TIMEOUT, "the store's reader")

    def listen(self, client: str) -> DataReader[Any]:
        """A reader of the replies addressed to ``client``."""
        partition = reply_partition(self.namespace, client)
        return DataReader(
            Subscriber(self.dp, qos=Qos(Policy.Partition([partition]))),
            self._replies,
            qos=REPLY_QOS,
        )

    def announce(self, announcement: StoreAnnouncement) -> None:
        """Write a store announcement on the namespace (to forge one); it stays alive as
        long as this requester (its writer is kept)."""
        writer: DataWriter[Any] = DataWriter(
            Publisher(self.dp, qos=Qos(Policy.Partition([self.namespace]))),
            self._stores,
            qos=ANNOUNCE_QOS,
        )
        writer.write(announcement)
        self._kept.append(writer)

    def assign(self, assignment: Assignment) -> None:
        """Write a group assignment on the namespace (to forge one; its writer is kept)."""
        writer: DataWriter[Any] = DataWriter(
            Publisher(self.dp, qos=Qos(Policy.Partition([self.namespace]))),
            self._assignments,
            qos=ASSIGN_QOS,
        )
        writer.write(assignment)
        self._kept.append(writer)

    def announcements(self) -> list[StoreAnnouncement]:
        """The store announcements of the namespace now (a late reader: TRANSIENT_LOCAL)."""
        return self._late(self._stores, StoreAnnouncement, ANNOUNCE_QOS)

    def assignments(self) -> list[Assignment]:
        """The group assignments of the namespace now (a late reader: TRANSIENT_LOCAL)."""
        return self._late(self._assignments, Assignment, ASSIGN_QOS)

    def _late(self, topic: Topic[Any], kind: type[T], qos: Qos) -> list[T]:
        reader = self._readers.get(kind)
        if reader is None:
            partition = Qos(Policy.Partition([self.namespace]))
            reader = self._readers[kind] = DataReader(
                Subscriber(self.dp, qos=partition), topic, qos=qos
            )
        return [x for x in reader.read(N=1024) if isinstance(x, kind)]

    def next_id(self) -> int:
        self._ids += 1
        return self._ids

    def write(self, wire: Request) -> int:
        """Write a hand-made request sample as it is; its request id."""
        self.writer.write(wire)
        return int(wire.request_id)

    def send(
        self,
        request: Any,
        *,
        incarnation: str = "",
        secret: MemberSecret | None = None,
        client: str | None = None,
    ) -> int:
        """Write a typed request (sealed if this requester has a sealer); its request id."""
        wire = request.to_wire(client or self.client, self.next_id())
        if self.sealer is not None:
            self.sealer.seal_request(wire, incarnation, secret)
        return self.write(wire)

    def answer(self, rid: int, timeout: float = REPLY_TIMEOUT) -> Reply:
        """Wait for the reply to request ``rid``."""

        def answered() -> bool:
            for r in self.reader.take(N=256):
                if isinstance(r, Reply):
                    self.got[int(r.request_id)] = r
            return rid in self.got

        eventually(answered, timeout, f"the store's answer to request {rid}")
        return self.got.pop(rid)

    def call(self, request: Any, timeout: float = REPLY_TIMEOUT, **options: Any) -> Reply:
        """:meth:`send`, then wait for the reply."""
        return self.answer(self.send(request, **options), timeout)

    def close(self) -> None:
        self.dp.__del__()


def namespace_keys(base: Path) -> tuple[str, str]:
    """A fresh namespace key file and admin key file under ``base``: their paths."""
    return (
        str(write_key_file(base / "ns.key").source),
        str(write_key_file(base / "admin.key").source),
    )


def keyed_client(
    domain: int, namespace: str, keys: tuple[str, str], *, admin: bool = False
) -> StoreClient:
    """A connected client holding the namespace key (and the admin key if ``admin``)."""
    endpoint = Endpoint(domain, namespace)
    c = StoreClient(
        endpoint,
        request_timeout=REPLY_TIMEOUT,
        key=keys[0],
        admin_key=keys[1] if admin else None,
    )
    try:
        c.connect(REPLY_TIMEOUT)
    except BaseException:
        c.close()
        endpoint.close()
        raise
    return c
