"""A real store, raw ``cyclonedds`` participants writing hand-made requests: each bad request is
refused alone, with a typed error naming its fault, and nothing else is affected."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps import BadParameterError, OutOfResourcesError
from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode
from dcps.wire._codes import ErrorCode, Op
from dcps.wire._messages import Reply, Request
from dcps.wire._names import REPLY_QOS, REQUEST_WRITER_QOS
from dcps.wire._replies import raise_for_status
from dcps.wire._transport import Endpoint
from tests.support.waiting import eventually

TIMEOUT = 20.0


class RawClient:
    """A plain cyclonedds participant speaking the wire types by hand (an attacker's tools)."""

    def __init__(self, domain_id: int, namespace: str, client_id: str | None = None) -> None:
        self.client_id = client_id or uuid.uuid4().hex
        self.namespace = namespace
        self.dp = DomainParticipant(domain_id)
        self._requests = Topic(self.dp, "dcps_channels_request", Request)
        self._replies = Topic(self.dp, "dcps_channels_reply", Reply)
        pub = Publisher(self.dp, qos=Qos(Policy.Partition([namespace])))
        self.writer: DataWriter[Any] = DataWriter(pub, self._requests, qos=REQUEST_WRITER_QOS)
        self.reader = self.listen(self.client_id)
        self._ids = 0
        eventually(self.writer.get_matched_subscriptions, TIMEOUT, "the store's request reader")

    def listen(self, client_id: str) -> DataReader[Any]:
        """A reader of the replies addressed to ``client_id``."""
        partition = f"{self.namespace}/reply/{client_id}"
        sub = Subscriber(self.dp, qos=Qos(Policy.Partition([partition])))
        return DataReader(sub, self._replies, qos=REPLY_QOS)

    def send(self, op: Op, raw: bytes | None = None, **fields: Any) -> int:
        """Write a request (``raw``: these exact CDR bytes instead); its request id."""
        self._ids += 1
        fields.setdefault("client", self.client_id)
        sample = Request(request_id=self._ids, op=int(op), **fields)
        if raw is not None:
            sample.serialize = lambda **_: raw  # type: ignore[method-assign]
        self.writer.write(sample)
        return self._ids

    def encode(self, op: Op, **fields: Any) -> bytes:
        """The CDR bytes of the request :meth:`send` would write next."""
        fields.setdefault("client", self.client_id)
        return Request(request_id=self._ids + 1, op=int(op), **fields).serialize()

    def replies(self, count: int) -> dict[int, Reply]:
        """Wait for ``count`` replies; by request id."""
        got: dict[int, Reply] = {}

        def more() -> bool:
            for r in self.reader.take(N=256):
                if isinstance(r, Reply):
                    got[r.request_id] = r
            return len(got) >= count

        eventually(more, TIMEOUT, f"{count} replies")
        return got

    def close(self) -> None:
        self.dp.__del__()


@pytest.fixture
def raw(store: Store, domain_id: int, namespace: str) -> Iterator[RawClient]:
    client = RawClient(domain_id, namespace)
    yield client
    client.close()


@pytest.fixture
def topic(raw: RawClient, topic_name: str) -> str:
    """A topic of 2 channels that keeps everything."""
    rid = raw.send(Op.ENSURE_TOPIC, topic=topic_name, number=2, flag=1)
    assert raw.replies(1)[rid].status == 0
    return topic_name


def publish_fields(topic: str, payloads: list[bytes], channel: int = 0) -> dict[str, Any]:
    return {
        "topic": topic,
        "channels": [channel],
        "sizes": [len(p) for p in payloads],
        "blob": b"".join(payloads),
    }


class TestIsolation:
    def test_a_malformed_publish_fails_alone(
        self, store: Store, raw: RawClient, topic: str
    ) -> None:
        """Good publishes taken with a malformed one (sizes past its blob) are all stored."""
        good = [raw.send(Op.PUBLISH, **publish_fields(topic, [b"%d" % i])) for i in range(20)]
        bad = raw.send(Op.PUBLISH, topic=topic, channels=[0], sizes=[50], blob=b"short")
        good += [raw.send(Op.PUBLISH, **publish_fields(topic, [b"x%d" % i])) for i in range(20)]
        replies = raw.replies(41)
        assert replies[bad].status == ErrorCode.BAD_PARAMETER
        assert "add up to 50" in replies[bad].error
        assert [replies[r].status for r in good] == [0] * 40
        assert store.log.channel_state(topic, 0).count == 40

    def test_a_non_utf8_request_is_answered_alone(
        self, store: Store, raw: RawClient, topic: str
    ) -> None:
        """A request whose group is not UTF-8 gets its own error; requests around it succeed."""
        before = [raw.send(Op.PUBLISH, **publish_fields(topic, [b"a"])) for _ in range(5)]
        data = raw.encode(Op.STATE, topic=topic, group="GROUP!").replace(
            b"GROUP!", b"\xff\xfe\xfd\xfc\xfb\xfa"
        )
        bad = raw.send(Op.STATE, raw=data, topic=topic)
        after = [raw.send(Op.PUBLISH, **publish_fields(topic, [b"b"])) for _ in range(5)]
        replies = raw.replies(11)
        assert replies[bad].status == ErrorCode.BAD_PARAMETER
        assert "'group'" in replies[bad].error
        assert "UTF-8" in replies[bad].error
        assert [replies[r].status for r in before + after] == [0] * 10
        assert store.log.channel_state(topic, 0).count == 10

    def test_a_zero_length_element_is_refused(
        self, store: Store, raw: RawClient, topic: str
    ) -> None:
        """A batch holding an empty element is refused whole; nothing of it is stored."""
        rid = raw.send(Op.PUBLISH, **publish_fields(topic, [b"a", b"", b"c"]))
        reply = raw.replies(1)[rid]
        with pytest.raises(BadParameterError, match="at least 1 byte"):
            raise_for_status(reply)
        assert store.log.channel_state(topic, 0).count == 0

    def test_a_commit_with_unpaired_offsets_changes_nothing(
        self, store: Store, raw: RawClient, topic: str
    ) -> None:
        """A COMMIT naming 2 channels but 1 offset is refused before any commit is recorded."""
        raw.send(Op.PUBLISH, **publish_fields(topic, [b"a", b"b"]))
        join = raw.send(Op.JOIN, topic=topic, group="g", member="m", number=30_000)
        bad = raw.send(Op.COMMIT, topic=topic, group="g", member="m", channels=[0, 1], offsets=[1])
        replies = raw.replies(3)
        assert replies[join].status == 0
        assert replies[bad].status == ErrorCode.BAD_PARAMETER
        assert "'offsets'" in replies[bad].error
        assert not store.log.committed(topic, "g", 0)[1]
        assert not store.log.committed(topic, "g", 1)[1]


class TestBounds:
    @pytest.mark.parametrize(
        ("fields", "limit"),
        [
            ({"op": Op.ENSURE_TOPIC, "number": 1_000_000}, "MAX_CHANNELS"),
            ({"op": Op.FETCH, "channels": [0], "offsets": [0], "number": 10**9}, "MAX_FETCH_COUNT"),
        ],
    )
    def test_over_a_limit_is_refused_naming_it(
        self, store: Store, raw: RawClient, topic_name: str, fields: dict[str, Any], limit: str
    ) -> None:
        """A channel count of 1,000,000 or a FETCH of 10**9 is refused, naming the limit."""
        fields = dict(fields)
        rid = raw.send(fields.pop("op"), topic=topic_name, **fields)
        reply = raw.replies(1)[rid]
        assert reply.status == ErrorCode.BAD_PARAMETER
        assert limit in reply.error
        assert topic_name not in {t.name for t in store.log.topics()}

    def test_a_wildcard_client_id_gets_no_writer_and_reaches_nobody(
        self, store: Store, raw: RawClient, topic: str
    ) -> None:
        """A request from client ``*`` is dropped: no reply reaches another client's partition."""
        victim = raw.listen("victim")
        raw.send(Op.STATE, client="*", topic=topic)
        mine = raw.send(Op.STATE, topic=topic)
        assert raw.replies(1)[mine].status == 0
        eventually(lambda: store.dropped_requests >= 1, TIMEOUT, "the drop")
        assert [r for r in victim.take(N=16) if isinstance(r, Reply)] == []


class TestOpenClients:
    def test_clients_beyond_the_limit_are_told_so(
        self,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """With MAX_CLIENTS = 2, a third client gets OutOfResourcesError naming the limit."""
        monkeypatch.setattr("dcps.store._service.MAX_CLIENTS", 2)
        with Store(tmp_path / "s", domain_id=domain_id, namespace=namespace, sync=SyncMode.NORMAL):
            endpoint = Endpoint(domain_id, namespace)
            clients = [StoreClient(endpoint, request_timeout=TIMEOUT) for _ in range(3)]
            try:
                for client in clients[:2]:
                    client.connect(TIMEOUT)
                with pytest.raises(OutOfResourcesError, match="MAX_CLIENTS"):
                    clients[2].ping(timeout=TIMEOUT)
                assert clients[0].ping(timeout=TIMEOUT).share_count == 1
            finally:
                for client in clients:
                    client.close()
                endpoint.close()
