"""Durables in a namespace with a key: sealed requests work; nobody acts for a subscriber.

Attackers are raw ``cyclonedds`` participants writing the wire types by hand,
against a real embedded store and real durable subscribers holding the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps import DcpsTimeoutError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.channels._client import StoreClient
from dcps.durables import DurableKind, DurableSubscriber
from dcps.store import Store, SyncMode
from dcps.wire._auth import DropReason
from dcps.wire._auth_keys import write_key_file
from dcps.wire._auth_member import MemberOffer, MemberSecret
from dcps.wire._codes import ErrorCode
from dcps.wire._durables import (
    DURABLE_GROUP_PREFIX,
    DurableAcked,
    DurableAckRequest,
    DurableCloseRequest,
    DurablePollRequest,
    DurableRollbackRequest,
    DurableSubscribeRequest,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._names import REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from dcps.wire._sealing import Sealer
from dcps.wire._transport import Endpoint
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

TIMEOUT = 10.0


def test_subscriber_requests_are_accepted_only_from_its_client(
    tmp_path: Path, domain_id: int, namespace: str, topic_name: str
) -> None:
    """With a key, a durable works end to end; another key holder cannot ack or poll for a
    subscriber, and a client without the key is not answered at all."""
    key = write_key_file(tmp_path / "ns.key").source
    kw = {"domain_id": domain_id, "namespace": namespace}
    topic = ChannelledTopic(topic_name, Msg, channel_count=1)
    with Store(tmp_path / "store", sync=SyncMode.NORMAL, key=key, admin_key=None, **kw) as store:
        with (
            DurableSubscriber(topic, "d", window=4, key=key, **kw) as sub,
            ChannelPublisher(topic, store_key=key, **kw) as pub,
        ):
            pub.publish(Msg(0, 1))
            pub.flush()
            element = sub.receive(TIMEOUT)
            other = StoreClient(Endpoint(domain_id, namespace), request_timeout=3.0, key=key)
            stranger = StoreClient(Endpoint(domain_id, namespace), request_timeout=1.0, key=None)
            try:
                other.connect(TIMEOUT)
                ack = DurableAckRequest(topic.name, "d", sub.subscriber_id, ((0, 0),))
                with pytest.raises(PreconditionNotMetError, match="member secret"):
                    other.wait_for(ack.op, other.request_async(ack, DurableAcked.from_wire), None)
                poll = DurablePollRequest(topic.name, "d", sub.subscriber_id, 4)
                with pytest.raises(PreconditionNotMetError, match="member secret"):
                    other.wait_for(poll.op, other.request_async(poll, bool), None)
                with pytest.raises(DcpsTimeoutError):
                    stranger.wait_for(
                        ack.op, stranger.request_async(ack, DurableAcked.from_wire), 2.0
                    )
            finally:
                other.close()
                stranger.close()
            element.ack()  # still its own
            assert sub.info().outstanding == 0
        assert sum(store.auth_drops().values()) >= 1


def test_a_refused_subscribe_in_a_subscribers_name_changes_nothing(
    tmp_path: Path, domain_id: int, namespace: str, topic_name: str
) -> None:
    """Another key holder subscribing under a live subscriber's name is refused before it
    changes anything: the durable keeps its filter."""
    key = write_key_file(tmp_path / "ns.key").source
    kw = {"domain_id": domain_id, "namespace": namespace}
    topic = ChannelledTopic(topic_name, Msg, channel_count=1)
    with (
        Store(tmp_path / "store", sync=SyncMode.NORMAL, key=key, admin_key=None, **kw),
        DurableSubscriber(topic, "d", filter="seq > 0", key=key, **kw) as sub,
    ):
        before = sub.info()
        other = StoreClient(Endpoint(domain_id, namespace), request_timeout=3.0, key=key)
        try:
            other.connect(TIMEOUT)
            hijack = DurableSubscribeRequest(
                topic.name, "d", sub.subscriber_id, before.kind, filter="seq > 1000"
            )
            # refused by the member proof (the subscriber's secret) or, without one, the client
            with pytest.raises(PreconditionNotMetError, match=r"member proof|another client"):
                other.wait_for(hijack.op, other.request_async(hijack, bool), None)
        finally:
            other.close()
        assert sub.info().filter == before.filter == "seq > 0"


class _Attacker:
    """A raw cyclonedds participant holding the namespace key and sending under a victim's
    client id: it reads the victim's reply partition and writes sealed requests by hand."""

    def __init__(self, domain_id: int, namespace: str, client_id: str, key: Path) -> None:
        self.dp = DomainParticipant(domain_id)
        self.client_id = client_id
        self.sealer = Sealer.from_keys(str(key), None)
        requests = Topic(self.dp, "dcps_channels_request", Request)
        replies = Topic(self.dp, "dcps_channels_reply", Reply)
        self.writer = DataWriter(
            Publisher(self.dp, qos=Qos(Policy.Partition([namespace]))),
            requests,
            qos=REQUEST_WRITER_QOS,
        )
        self.reader = DataReader(
            Subscriber(self.dp, qos=Qos(Policy.Partition([reply_partition(namespace, client_id)]))),
            replies,
            qos=REPLY_QOS,
        )
        self._ids = 10**12  # far from the victim's own request ids

    def send(self, request: Any, incarnation: str, secret: MemberSecret | None = None) -> Reply:
        """Seal ``request`` (a typed request) as the victim, with ``secret``; the store's answer."""
        self._ids += 1
        wire = request.to_wire(self.client_id, self._ids)
        self.sealer.seal_request(wire, incarnation, secret)
        eventually(self.writer.get_matched_subscriptions, TIMEOUT, "the store's request reader")
        self.writer.write(wire)
        got: dict[int, Reply] = {}

        def answered() -> bool:
            for r in self.reader.take(N=64):
                if isinstance(r, Reply):
                    got[r.request_id] = r
            return self._ids in got

        eventually(answered, TIMEOUT, f"the answer to request {self._ids}")
        return got[self._ids]

    def close(self) -> None:
        self.dp.__del__()


class TestSubscriberSecret:
    """A holder of the namespace key who spoofs a subscriber's client id still cannot act
    for the subscriber: its requests need the subscriber's own secret (issue 14)."""

    @pytest.mark.parametrize(
        "kind", [DurablePollRequest, DurableAckRequest, DurableRollbackRequest, "close"]
    )
    def test_requests_for_a_subscriber_need_its_secret(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, kind: Any
    ) -> None:
        """POLL, ACK, ROLLBACK and CLOSE naming the victim, sealed with the namespace key
        under the victim's client id but a made-up subscriber secret, are refused; the
        victim still holds its element and acknowledges it."""
        key = write_key_file(tmp_path / "ns.key").source
        kw = {"domain_id": domain_id, "namespace": namespace}
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with (
            Store(tmp_path / "store", sync=SyncMode.NORMAL, key=key, admin_key=None, **kw) as store,
            DurableSubscriber(topic, "d", window=4, key=key, **kw) as sub,
            ChannelPublisher(topic, store_key=key, **kw) as pub,
        ):
            pub.publish(Msg(0, 1))
            pub.flush()
            element = sub.receive(TIMEOUT)
            ident = (topic.name, "d", sub.subscriber_id)
            if kind == "close":
                request: Any = DurableCloseRequest(*ident)
            elif kind is DurablePollRequest:
                request = DurablePollRequest(*ident, 4, 0, ((0, 0),))  # acks ride on polls
            else:
                request = kind(*ident, ((0, 0),))
            _, guessed = Sealer.from_keys(str(key), None).answer_member_offer(
                MemberOffer().public,
                group=DURABLE_GROUP_PREFIX + "d",
                member=sub.subscriber_id,
                incarnation=store.incarnation,
            )
            attacker = _Attacker(domain_id, namespace, sub._client.client_id, key)
            try:
                reply = attacker.send(request, store.incarnation, guessed)
            finally:
                attacker.close()
            assert reply.status == ErrorCode.PRECONDITION_NOT_MET
            assert sub.subscriber_id in reply.error
            assert store.auth_drops()[DropReason.BAD_MEMBER_PROOF] >= 1
            info = sub.info()
            assert (info.subscribers, info.outstanding) == (1, 1)  # nothing changed
            element.ack()  # still its own, acknowledged once
            assert sub.info().outstanding == 0
            assert not sub.closed

    def test_subscribing_again_as_a_live_subscriber_needs_its_secret(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A key holder subscribing under the victim's client and subscriber ids (to agree a
        secret of its own and take the victim's elements) is refused; the victim goes on."""
        key = write_key_file(tmp_path / "ns.key").source
        kw = {"domain_id": domain_id, "namespace": namespace}
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with (
            Store(tmp_path / "store", sync=SyncMode.NORMAL, key=key, admin_key=None, **kw) as store,
            DurableSubscriber(topic, "d", window=4, key=key, **kw) as sub,
            ChannelPublisher(topic, store_key=key, **kw) as pub,
        ):
            attacker = _Attacker(domain_id, namespace, sub._client.client_id, key)
            try:
                request = DurableSubscribeRequest(
                    topic.name, "d", sub.subscriber_id, DurableKind.SHARED, 4, offer=b"\x02" * 256
                )
                reply = attacker.send(request, store.incarnation)
            finally:
                attacker.close()
            assert reply.status == ErrorCode.PRECONDITION_NOT_MET
            assert store.auth_drops()[DropReason.BAD_MEMBER_PROOF] >= 1
            pub.publish(Msg(0, 7))
            pub.flush()
            element = sub.receive(TIMEOUT)
            assert element.value.seq == 7
            element.ack()
            assert sub.info().outstanding == 0
