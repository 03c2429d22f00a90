"""A store namespace with a key: attackers on the DDS domain cannot act for others (issue 13).

Each attacker is a raw ``cyclonedds`` participant writing the wire types of
``dcps.wire._messages`` by hand, against a real embedded store; the victims
are real ``StoreClient``s and ``ChannelPublisher``s holding the key.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps import DcpsTimeoutError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, OrderBy
from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode
from dcps.wire._auth import UNAUTHENTICATED_WARNING, Authenticator, DropReason
from dcps.wire._auth_keys import StoreKey, write_key_file
from dcps.wire._auth_member import MemberOffer
from dcps.wire._codes import ErrorCode, Op, SeekMode
from dcps.wire._messages import Assignment, Reply, Request, StoreAnnouncement
from dcps.wire._names import (
    ANNOUNCE_QOS,
    ASSIGN_QOS,
    CONTROL_QOS,
    REPLY_QOS,
    REQUEST_WRITER_QOS,
    reply_partition,
)
from dcps.wire._sealing import Sealer, _body, request_kind
from dcps.wire._transport import Endpoint
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually

TIMEOUT = 20.0


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    """The namespace key file and the admin key file."""
    return write_key_file(tmp_path / "ns.key").source, write_key_file(tmp_path / "admin.key").source  # type: ignore[return-value]


@pytest.fixture
def keyed_store(
    tmp_path: Path, domain_id: int, namespace: str, keys: tuple[str, str]
) -> Iterator[Store]:
    """An embedded store whose namespace has a key and an admin key."""
    with Store(
        tmp_path / "store",
        domain_id=domain_id,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        key=keys[0],
        admin_key=keys[1],
    ) as store:
        yield store


@pytest.fixture
def client(
    keyed_store: Store, domain_id: int, namespace: str, keys: tuple[str, str]
) -> Iterator[StoreClient]:
    """A legitimate client holding the namespace key (not the admin key), connected."""
    endpoint = Endpoint(domain_id, namespace)
    c = StoreClient(endpoint, request_timeout=5.0, key=keys[0], admin_key=None)
    c.connect(TIMEOUT)
    yield c
    c.close()
    endpoint.close()


class Attacker:
    """A plain cyclonedds participant with the wire types: reads and writes anything."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        self.namespace = namespace
        self.dp = DomainParticipant(domain_id)
        self.requests = Topic(self.dp, "dcps_channels_request", Request)
        self.replies = Topic(self.dp, "dcps_channels_reply", Reply)
        self.stores = Topic(self.dp, "dcps_channels_store", StoreAnnouncement)
        self.assignments = Topic(self.dp, "dcps_channels_assignment", Assignment)
        self.client_id = uuid.uuid4().hex
        self.request_writer = self.writer(self.requests, namespace, REQUEST_WRITER_QOS)
        self.reply_reader = self.reader(
            self.replies, reply_partition(namespace, self.client_id), REPLY_QOS
        )
        self._ids = 0

    def writer(self, topic: Topic[Any], partition: str, qos: Qos) -> DataWriter[Any]:
        return DataWriter(
            Publisher(self.dp, qos=Qos(Policy.Partition([partition]))), topic, qos=qos
        )

    def reader(self, topic: Topic[Any], partition: str, qos: Qos) -> DataReader[Any]:
        return DataReader(
            Subscriber(self.dp, qos=Qos(Policy.Partition([partition]))), topic, qos=qos
        )

    def request(
        self,
        op: Op,
        *,
        auth: bytes = b"",
        sealer: Sealer | None = None,
        incarnation: str = "",
        secret: Any = None,
        **fields: Any,
    ) -> int:
        """Write a request (sealed by ``sealer`` if given, as a key holder would); its id."""
        self._ids += 1
        r = Request(client=self.client_id, request_id=self._ids, op=int(op), auth=auth, **fields)
        if sealer is not None:
            sealer.seal_request(r, incarnation, secret)
        eventually(self.request_writer.get_matched_subscriptions, TIMEOUT, "the store's reader")
        self.request_writer.write(r)
        return self._ids

    def reply_to(self, rid: int) -> Reply:
        """Wait for the store's answer to request ``rid``."""
        got: dict[int, Reply] = {}

        def answered() -> bool:
            for r in self.reply_reader.take(N=64):
                if isinstance(r, Reply):
                    got[r.request_id] = r
            return rid in got

        eventually(answered, TIMEOUT, f"the answer to request {rid}")
        return got[rid]

    def close(self) -> None:
        self.dp.__del__()


@pytest.fixture
def attacker(domain_id: int, namespace: str) -> Iterator[Attacker]:
    a = Attacker(domain_id, namespace)
    yield a
    a.close()


def key_holder(keys: tuple[str, str]) -> Sealer:
    """The sealer of a process holding the namespace key, not the admin key."""
    return Sealer.from_keys(keys[0], None)


class TestForgedReplies:
    def test_forged_replies_never_confirm_publishes_while_the_store_is_down(
        self,
        keyed_store: Store,
        domain_id: int,
        namespace: str,
        keys: tuple[str, str],
        attacker: Attacker,
        topic_name: str,
    ) -> None:
        """With the store down, an attacker answering every PUBLISH it sees with a forged
        "accepted" reply completes none of 50 futures: they time out."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2)
        pub = ChannelPublisher(
            topic,
            domain_id=domain_id,
            namespace=namespace,
            store_key=keys[0],
            batch_count=1,
            max_in_flight=64,
            timeout=timedelta(seconds=2),
        )
        try:
            assert pub.publish(Msg(0, -1)).result(TIMEOUT) is not None  # the store confirms
            incarnation = keyed_store.incarnation
            keyed_store.close()
            other_key = Sealer(Authenticator(StoreKey(b"y" * 32)))
            spy = attacker.reader(attacker.requests, namespace, CONTROL_QOS)
            forged: dict[str, DataWriter[Any]] = {}
            answered: set[int] = set()
            futures: list[Future[Any]] = [pub.publish(Msg(i, i)) for i in range(50)]

            def forge_all() -> bool:
                for r in spy.take(N=256):
                    if isinstance(r, Request) and r.op == Op.PUBLISH:
                        w = forged.get(r.client) or attacker.writer(
                            attacker.replies, reply_partition(namespace, r.client), REPLY_QOS
                        )
                        forged[r.client] = w
                        fake = Reply(client=r.client, request_id=r.request_id, number=1)
                        fake.offsets, fake.stamps = [7], [1]
                        other_key.seal_reply(fake, incarnation)  # a key, just not the namespace's
                        w.write(fake)
                        answered.add(r.request_id)
                return len(answered) >= 50

            eventually(forge_all, TIMEOUT, "the attacker answering 50 publishes")
            for fut in futures:
                with pytest.raises(DcpsTimeoutError):
                    fut.result(TIMEOUT)
            drops = pub._client.sealer.drops()
            assert drops[DropReason.UNKNOWN_KEY] >= 50
        finally:
            pub.close()


class TestForgedAnnouncements:
    @pytest.mark.parametrize("trailer", ["none", "other key"])
    def test_a_forged_announcement_does_not_stop_a_running_store(
        self,
        keyed_store: Store,
        client: StoreClient,
        attacker: Attacker,
        tmp_path: Path,
        trailer: str,
    ) -> None:
        """An older-looking announcement of the same share, unsigned or signed with another
        key, is dropped and counted; the store keeps serving."""
        fake = StoreAnnouncement(
            incarnation="forged",
            index=0,
            count=1,
            started_ns=1,
            pid=1,
            host="evil",
            data_dir="/forged",
        )
        if trailer == "other key":
            Sealer(Authenticator(StoreKey(b"x" * 32))).seal_announcement(fake)
        writer = attacker.writer(attacker.stores, keyed_store.namespace, ANNOUNCE_QOS)
        writer.write(fake)
        reason = DropReason.MALFORMED if trailer == "none" else DropReason.UNKNOWN_KEY
        eventually(lambda: keyed_store.auth_drops()[reason] >= 1, TIMEOUT, "the forgery dropped")
        client.ping(timeout=TIMEOUT)  # a share check ran after the drop
        assert keyed_store.failure is None
        assert client.ping(timeout=TIMEOUT).incarnation == keyed_store.incarnation


@pytest.fixture
def victim(client: StoreClient, topic_name: str) -> tuple[str, str, str]:
    """Member ``victim`` of group ``g`` (owning both channels), 10 elements in channel 0,
    its commit at offset 2."""
    client.ensure_topic(topic_name, 2, True, timeout=TIMEOUT)
    client.publish_async(topic_name, 0, [1] * 10, bytes(10)).result(TIMEOUT)
    joined = client.join(topic_name, "g", "victim", 30_000, timeout=TIMEOUT)
    assert joined.channels == (0, 1)
    assert client.commit(topic_name, "g", "victim", {0: 2}, timeout=TIMEOUT).statuses[0].code == 0
    return topic_name, "g", "victim"


class TestOtherMembers:
    def test_the_member_ids_are_public_on_the_assignment_topic(
        self, keyed_store: Store, victim: tuple[str, str, str], attacker: Attacker
    ) -> None:
        """What the attacker works with: the victim's id, read from the assignments."""
        reader = attacker.reader(attacker.assignments, keyed_store.namespace, ASSIGN_QOS)
        seen = eventually(
            lambda: [a for a in reader.read(N=16) if isinstance(a, Assignment)],
            TIMEOUT,
            "an assignment",
        )
        assert "victim" in seen[0].members
        assert Sealer.from_keys(keyed_store._sealer.auth.key, None).accept_assignment(seen[0])  # type: ignore[union-attr]

    @pytest.mark.parametrize("holds_key", [False, True], ids=["no-key", "namespace-key"])
    @pytest.mark.parametrize("op", [Op.COMMIT, Op.SEEK, Op.LEAVE, Op.HEARTBEAT])
    def test_member_actions_for_another_member_are_refused(
        self,
        keyed_store: Store,
        client: StoreClient,
        victim: tuple[str, str, str],
        attacker: Attacker,
        keys: tuple[str, str],
        op: Op,
        holds_key: bool,
    ) -> None:
        """COMMIT, SEEK, LEAVE and HEARTBEAT naming the victim, unsigned or signed with the
        namespace key but a made-up member secret, change nothing; the victim goes on."""
        topic, group, member = victim
        fields: dict[str, Any] = {"topic": topic, "group": group, "member": member}
        if op is Op.COMMIT:
            fields |= {"channels": [0], "offsets": [8]}
        if op is Op.SEEK:
            fields |= {"channels": [0], "offsets": [9], "number": int(SeekMode.POSITION)}
        if holds_key:
            sealer = key_holder(keys)
            offer = MemberOffer()
            _, guessed = sealer.answer_member_offer(
                offer.public, group=group, member=member, incarnation=keyed_store.incarnation
            )
            rid = attacker.request(
                op, sealer=sealer, incarnation=keyed_store.incarnation, secret=guessed, **fields
            )
            reply = attacker.reply_to(rid)
            assert reply.status == ErrorCode.PRECONDITION_NOT_MET
            assert member in reply.error
            assert keyed_store.auth_drops()[DropReason.BAD_MEMBER_PROOF] >= 1
        else:
            attacker.request(op, **fields)
            eventually(
                lambda: keyed_store.auth_drops()[DropReason.MALFORMED] >= 1,
                TIMEOUT,
                "the forgery dropped",
            )
        assert keyed_store.log.committed(topic, group, 0)[0] == 2
        beat = client.heartbeat_async(topic, group, member).result(TIMEOUT)
        assert beat.channels == (0, 1)  # still a member, owning its channels
        assert client.commit(topic, group, member, {0: 3}, timeout=TIMEOUT).statuses[0].code == 0

    def test_joining_as_a_live_member_is_refused_even_with_the_namespace_key(
        self,
        keyed_store: Store,
        client: StoreClient,
        victim: tuple[str, str, str],
        attacker: Attacker,
        keys: tuple[str, str],
    ) -> None:
        """A key holder re-joining under the victim's id (to take its secret over) is refused;
        the victim's own commits still verify."""
        topic, group, member = victim
        offer = MemberOffer()
        rid = attacker.request(
            Op.JOIN,
            sealer=key_holder(keys),
            incarnation=keyed_store.incarnation,
            topic=topic,
            group=group,
            member=member,
            number=30_000,
            blob=offer.public,
        )
        reply = attacker.reply_to(rid)
        assert reply.status == ErrorCode.PRECONDITION_NOT_MET
        assert client.commit(topic, group, member, {0: 4}, timeout=TIMEOUT).statuses[0].code == 0
        assert keyed_store.log.committed(topic, group, 0)[0] == 4

    def test_a_forged_join_without_the_key_is_dropped(
        self,
        keyed_store: Store,
        client: StoreClient,
        victim: tuple[str, str, str],
        attacker: Attacker,
    ) -> None:
        """An unsigned JOIN for the victim never takes effect."""
        topic, group, member = victim
        attacker.request(Op.JOIN, topic=topic, group=group, member="intruder", number=30_000)
        eventually(
            lambda: keyed_store.auth_drops()[DropReason.MALFORMED] >= 1,
            TIMEOUT,
            "the forgery dropped",
        )
        beat = client.heartbeat_async(topic, group, member).result(TIMEOUT)
        assert beat.channels == (0, 1)  # nobody took a channel


class TestForgedAssignments:
    @pytest.mark.parametrize("trailer", ["none", "other key"])
    def test_a_forged_assignment_does_not_take_a_members_channels(
        self,
        keyed_store: Store,
        attacker: Attacker,
        keys: tuple[str, str],
        domain_id: int,
        namespace: str,
        topic_name: str,
        trailer: str,
    ) -> None:
        """A newer-looking assignment of the member's group giving its channels to another
        member, unsigned or signed with another key, is ignored (counted): the member keeps
        both channels and receives from them."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with (
            ChannelSubscriber(topic, group="g", store_key=keys[0], **kw) as member,
            ChannelPublisher(topic, order_by=OrderBy.round_robin(), store_key=keys[0], **kw) as pub,
        ):
            eventually(lambda: member.channels == [0, 1], TIMEOUT, "the member's channels")
            reader = attacker.reader(attacker.assignments, namespace, ASSIGN_QOS)
            real = eventually(
                lambda: [
                    a
                    for a in reader.read(N=16)
                    if isinstance(a, Assignment) and (a.topic, a.group) == (topic_name, "g")
                ],
                TIMEOUT,
                "the group's assignment",
            )[-1]
            forged = Assignment(
                topic=topic_name,
                group="g",
                incarnation=real.incarnation,
                generation=real.generation + 100,
                members=["intruder"],
                owners=[0, 0],
            )
            if trailer == "other key":
                Sealer(Authenticator(StoreKey(b"x" * 32))).seal_assignment(forged)
            reason = DropReason.MALFORMED if trailer == "none" else DropReason.UNKNOWN_KEY
            sealer = member._client.sealer  # the member's own refusals (no public counter)
            before = sealer.drops()[reason]
            attacker.writer(attacker.assignments, namespace, ASSIGN_QOS).write(forged)
            eventually(lambda: sealer.drops()[reason] > before, TIMEOUT, "the forgery refused")
            assert member.channels == [0, 1]
            for i in range(2):  # round robin: one element in each channel
                pub.publish(Msg(i, i)).result(TIMEOUT)
            got = member.receive(2).result(TIMEOUT)
            assert sorted(e.position.channel for e in got) == [0, 1]
            assert member.channels == [0, 1]


class TestAdminKey:
    def test_destroying_a_group_needs_the_admin_key(
        self,
        keyed_store: Store,
        client: StoreClient,
        victim: tuple[str, str, str],
        attacker: Attacker,
        keys: tuple[str, str],
        domain_id: int,
        namespace: str,
    ) -> None:
        """Without the admin key a client cannot even seal DESTROY_GROUP, and a key holder's
        forged one is dropped; the group and its commits stay. With it, the group goes."""
        topic, group, _ = victim
        with pytest.raises(PreconditionNotMetError, match="admin key"):
            client.destroy_group(topic, group, timeout=TIMEOUT)
        forged = Request(
            client=attacker.client_id,
            request_id=99,
            op=int(Op.DESTROY_GROUP),
            topic=topic,
            group=group,
        )
        holder = Authenticator(StoreKey(Path(keys[0]).read_bytes().strip()))
        forged.auth = holder.seal(
            request_kind(Op.PING), forged.client, _body(forged), incarnation=keyed_store.incarnation
        )  # another kind's seal
        attacker.request_writer.write(forged)
        attacker.request(Op.DESTROY_GROUP, topic=topic, group=group)  # unsigned
        eventually(lambda: sum(keyed_store.auth_drops().values()) >= 2, TIMEOUT, "two drops")
        assert keyed_store.log.has_group(topic, group)
        assert keyed_store.log.committed(topic, group, 0)[0] == 2
        endpoint = Endpoint(domain_id, namespace)
        admin = StoreClient(endpoint, request_timeout=5.0, key=keys[0], admin_key=keys[1])
        try:
            admin.connect(TIMEOUT)
            assert admin.destroy_group(topic, group, timeout=TIMEOUT) is True
        finally:
            admin.close()
            endpoint.close()
        assert not keyed_store.log.has_group(topic, group)


class TestReplay:
    def test_a_replayed_captured_request_is_refused(
        self,
        keyed_store: Store,
        client: StoreClient,
        attacker: Attacker,
        topic_name: str,
        tmp_path: Path,
        keys: tuple[str, str],
        domain_id: int,
        namespace: str,
    ) -> None:
        """A genuine PUBLISH captured off the wire and written again appends nothing: not to
        the store it was sent to (replayed), nor to that store restarted (another incarnation)."""
        client.ensure_topic(topic_name, 1, True, timeout=TIMEOUT)
        spy = attacker.reader(attacker.requests, namespace, CONTROL_QOS)
        client.publish_async(topic_name, 0, [3], b"abc").result(TIMEOUT)
        captured = eventually(
            lambda: [r for r in spy.take(N=64) if isinstance(r, Request) and r.op == Op.PUBLISH],
            TIMEOUT,
            "the captured publish",
        )[0]
        assert keyed_store.log.channel_state(topic_name, 0).tail == 0
        attacker.request_writer.write(captured)
        eventually(
            lambda: keyed_store.auth_drops()[DropReason.REPLAYED] >= 1,
            TIMEOUT,
            "the replay dropped",
        )
        client.ping(timeout=TIMEOUT)
        assert keyed_store.log.channel_state(topic_name, 0).tail == 0
        keyed_store.close()
        with Store(
            tmp_path / "store",
            domain_id=domain_id,
            namespace=namespace,
            sync=SyncMode.NORMAL,
            key=keys[0],
            admin_key=keys[1],
        ) as restarted:
            attacker.request_writer.write(captured)
            eventually(
                lambda: restarted.auth_drops()[DropReason.BAD_TAG] >= 1,
                TIMEOUT,
                "the replay to the new incarnation dropped",
            )
            assert restarted.log.channel_state(topic_name, 0).tail == 0


class TestKeys:
    def test_a_store_without_a_key_warns_at_start(
        self, tmp_path: Path, domain_id: int, namespace: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Without a key the store runs, and says at start that anyone can act on its data."""
        with (
            caplog.at_level(logging.WARNING, logger="dcps.store"),
            Store(tmp_path / "s", domain_id=domain_id, namespace=namespace, key=None) as s,
        ):
            assert not s.authenticated
        assert UNAUTHENTICATED_WARNING % namespace in caplog.messages

    def test_a_keyed_store_does_not_warn(
        self, keyed_store: Store, caplog: pytest.LogCaptureFixture
    ) -> None:
        """...and with one it does not."""
        assert keyed_store.authenticated
        assert not any("has no key" in m for m in caplog.messages)

    def test_a_client_with_another_key_is_told_the_store_does_not_verify(
        self, keyed_store: Store, domain_id: int, namespace: str, tmp_path: Path
    ) -> None:
        """A client with the wrong key does not connect, and the error says why."""
        endpoint = Endpoint(domain_id, namespace)
        other = StoreClient(endpoint, key=write_key_file(tmp_path / "other.key"))
        try:
            with pytest.raises(DcpsTimeoutError, match="did not verify"):
                other.connect(1.0)
        finally:
            other.close()
            endpoint.close()
