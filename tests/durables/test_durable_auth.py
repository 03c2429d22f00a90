"""Durables in a namespace with a key: sealed requests work; nobody acts for a subscriber."""

from __future__ import annotations

from pathlib import Path

import pytest

from dcps import DcpsTimeoutError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.channels._client import StoreClient
from dcps.durables import DurableSubscriber
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import write_key_file
from dcps.wire._durables import DurableAcked, DurableAckRequest, DurablePollRequest
from dcps.wire._transport import Endpoint
from tests.support.peers.channels_types import Msg

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
                    other._wait(ack.op, other._call(ack, DurableAcked.from_wire), None)
                poll = DurablePollRequest(topic.name, "d", sub.subscriber_id, 4)
                with pytest.raises(PreconditionNotMetError, match="member secret"):
                    other._wait(poll.op, other._call(poll, bool), None)
                with pytest.raises(DcpsTimeoutError):
                    stranger._wait(ack.op, stranger._call(ack, DurableAcked.from_wire), 2.0)
            finally:
                other.close()
                stranger.close()
            element.ack()  # still its own
            assert sub.info().outstanding == 0
        assert sum(store.auth_drops().values()) >= 1
