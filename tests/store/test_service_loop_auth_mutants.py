"""The store service of a keyed namespace over DDS (issue 20: the mutation run of
``dcps/store/_service.py``, its authentication of requests and member secrets).

One embedded ``Store`` with a namespace key and an admin key serves the whole file (a
module fixture). A real ``StoreClient`` holding the key is the victim; raw
``cyclonedds`` participants (``RawRequester``) are the attackers: one without the key
(unsealed requests), one holding the key but no member's secret. Each test asserts
what a client sees: the refusal's words, what was dropped and counted, and that the
victim goes on. No participant outlives the file (mutmut forks a worker per mutant).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dcps import PreconditionNotMetError
from dcps.channels._client import StoreClient
from dcps.durables._client import DurableClient
from dcps.store import Store, SyncMode, _service
from dcps.wire._auth import DropReason
from dcps.wire._auth_member import MemberOffer
from dcps.wire._codes import CommitStatus, ErrorCode, Op, SeekMode
from dcps.wire._durables import (
    DurableCloseRequest,
    DurableDelivery,
    DurableKind,
    DurablePollRequest,
    DurableSubscribed,
    DurableSubscribeRequest,
)
from dcps.wire._messages import Request
from dcps.wire._replies import Membership, Pong
from dcps.wire._requests import (
    CommitRequest,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    PingRequest,
    SeekRequest,
    StateRequest,
)
from dcps.wire._sealing import Sealer
from dcps.wire._transport import Endpoint
from tests.support.embedded_store import worker_domain
from tests.support.raw_requests import REPLY_TIMEOUT, RawRequester, keyed_client, namespace_keys
from tests.support.waiting import eventually


class Keyed:
    """The module's keyed store, its key files, domain and namespace."""

    def __init__(self, store: Store, keys: tuple[str, str], domain: int, namespace: str):
        self.store, self.keys, self.domain, self.namespace = store, keys, domain, namespace

    def client(self, *, admin: bool = False) -> StoreClient:
        return keyed_client(self.domain, self.namespace, self.keys, admin=admin)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Keyed]:
    base = tmp_path_factory.mktemp("svcauth")
    keys = namespace_keys(base)
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    domain = worker_domain(worker_id)
    with Store(
        base / "store",
        domain_id=domain,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        key=keys[0],
        admin_key=keys[1],
        durability=("dur_*",),  # no such topic: the service only runs
    ) as store:
        yield Keyed(store, keys, domain, namespace)


@pytest.fixture(scope="module")
def store(keyed: Keyed) -> Store:
    return keyed.store


@pytest.fixture(scope="module")
def client(keyed: Keyed) -> Iterator[StoreClient]:
    c = keyed.client()
    try:
        yield c
    finally:
        c.close()
        c.endpoint.close()


@pytest.fixture(scope="module")
def holder(keyed: Keyed) -> Iterator[RawRequester]:
    """A raw participant holding the namespace key (no member's secret, no admin key)."""
    r = RawRequester(keyed.domain, keyed.namespace, sealer=Sealer.from_keys(keyed.keys[0], None))
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="module")
def stranger(keyed: Keyed) -> Iterator[RawRequester]:
    """A raw participant without the key: its requests are not sealed."""
    r = RawRequester(keyed.domain, keyed.namespace)
    try:
        yield r
    finally:
        r.close()


_topics = iter(range(10**6))


@pytest.fixture
def topic(client: StoreClient) -> str:
    name = f"k{next(_topics)}"
    client.ensure_topic(name, 2, True)
    for c in range(2):
        client.publish_async(name, c, [1, 1, 1], b"abc").result(REPLY_TIMEOUT)
    return name


def refusal(topic: str, group: str, member: str, reason: DropReason) -> str:
    """What a key holder acting for a member it is not is told."""
    return (
        f"{member!r} of group {group!r} of topic {topic!r}: {reason.value} (not a member this "
        "store knows, or not the member that joined: join first)"
    )


def made_up_secret(holder: RawRequester, topic: str, group: str, member: str, inc: str) -> Any:
    """A member secret a key holder makes up for ``member`` (not the one the store keeps)."""
    assert holder.sealer is not None
    _, secret = holder.sealer.answer_member_offer(
        MemberOffer().public, group=group, member=member, incarnation=inc
    )
    return secret


def synced(r: RawRequester, store: Store) -> None:
    """Wait until ``store`` handled what ``r`` wrote before (a sealed PING after it)."""
    assert Pong.from_wire(r.call(PingRequest(), incarnation=store.incarnation)).incarnation


class TestStarted:
    """First in the file: the module's store is started in this test's setup, so mutmut
    runs this test for every mutant of ``__init__``, ``start`` and ``_open_endpoints``."""

    def test_a_durable_subscriber_proves_itself_with_its_own_secret(
        self, keyed: Keyed, store: Store, holder: RawRequester
    ) -> None:
        assert store.durability is not None
        assert store.durability._sealer.enabled  # the durability service has the key too
        endpoint = Endpoint(keyed.domain, keyed.namespace)
        dc = DurableClient(
            endpoint, request_timeout=REPLY_TIMEOUT, key=keyed.keys[0], admin_key=None
        )
        try:
            dc.connect(REPLY_TIMEOUT)
            topic = f"k{next(_topics)}"
            dc.ensure_topic(topic, 1, True)
            subscribe = DurableSubscribeRequest(
                topic, "d", "s1", DurableKind.SHARED, offer=dc.offer()
            )
            subscribed = dc.request_async(subscribe, DurableSubscribed.from_wire).result(
                REPLY_TIMEOUT
            )
            assert subscribed.exchange  # the store's half of the subscriber's key exchange
            dc.publish_async(topic, 0, [1, 1], b"ab").result(REPLY_TIMEOUT)
            poll = DurablePollRequest(topic, "d", "s1", 10)
            got = dc.request_async(poll, DurableDelivery.from_wire).result(REPLY_TIMEOUT)
            assert (got.offsets, got.data) == ((0, 1), b"ab")
            # a key holder without the subscriber's secret: refused, as for group members
            inc = store.incarnation
            stolen = holder.call(
                DurablePollRequest(topic, "d", "s1", 10),
                incarnation=inc,
                secret=made_up_secret(holder, topic, "d", "s1", inc),
            )
            assert stolen.status == ErrorCode.PRECONDITION_NOT_MET
            again = holder.call(
                DurableSubscribeRequest(
                    topic, "d", "s1", DurableKind.SHARED, offer=MemberOffer().public
                ),
                incarnation=inc,
            )
            assert again.status == ErrorCode.PRECONDITION_NOT_MET  # s1 is live: no take-over
            # a poll the store holds back fails when its subscriber closes
            waiting = dc.request_async(
                DurablePollRequest(topic, "d", "s1", 10, wait_ms=5_000), DurableDelivery.from_wire
            )
            closed = DurableCloseRequest(topic, "d", "s1")
            dc.request_async(closed, lambda r: r).result(REPLY_TIMEOUT)
            with pytest.raises(PreconditionNotMetError, match="subscriber 's1' closed"):
                waiting.result(REPLY_TIMEOUT)
            # the group assignments it publishes are sealed: key holders accept them
            dc.join(topic, "g", "m", 30_000)
            (assignment,) = eventually(
                lambda: [a for a in holder.assignments() if (a.topic, a.group) == (topic, "g")],
                REPLY_TIMEOUT,
                "the assignment",
            )
            assert holder.sealer is not None
            assert holder.sealer.accept_assignment(assignment)
        finally:
            dc.close()
            endpoint.close()


class TestUnauthenticated:
    def test_an_unsealed_request_is_dropped_counted_and_unanswered(
        self, store: Store, stranger: RawRequester, holder: RawRequester, topic: str
    ) -> None:
        before = store.auth_drops()[DropReason.MALFORMED]
        rid = stranger.send(StateRequest(topic))
        eventually(
            lambda: store.auth_drops()[DropReason.MALFORMED] == before + 1,
            REPLY_TIMEOUT,
            "the unsealed request dropped",
        )
        # the same client id, sealed, is answered: the unsealed request got nothing
        answered = holder.send(
            StateRequest(topic), client=stranger.client, incarnation=store.incarnation
        )
        assert stranger.answer(answered).status == 0
        assert rid not in stranger.got

    def test_an_undecodable_request_is_dropped_not_answered(
        self,
        store: Store,
        holder: RawRequester,
        topic: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        caplog.set_level(logging.WARNING, logger="dcps.store")
        before = store.dropped_requests
        rid = holder.next_id()
        wire = StateRequest(topic, "GROUP!").to_wire(holder.client, rid)
        assert holder.sealer is not None
        holder.sealer.seal_request(wire, store.incarnation, None)
        data = wire.serialize().replace(b"GROUP!", b"\xff\xfe\xfd\xfc\xfb\xfa")
        sample = Request(client=holder.client, request_id=rid, op=int(Op.STATE))
        sample.serialize = lambda **_: data  # type: ignore[method-assign]
        holder.write(sample)
        synced(holder, store)
        assert rid not in holder.got
        assert store.dropped_requests == before + 1
        count = before + 1
        if count & (count - 1) == 0:  # the 1st, 2nd, 4th... drop is logged
            assert any(
                m.startswith(
                    f"dcps store: request dropped ({count} so far): undecodable request from "
                    f"{holder.client!r}: "
                )
                for m in caplog.messages
            )


class TestMemberSecrets:
    def test_a_join_without_a_key_exchange_offer_is_refused(
        self, store: Store, holder: RawRequester, topic: str
    ) -> None:
        got = holder.call(JoinRequest(topic, "g", "m", 30_000), incarnation=store.incarnation)
        assert got.status == ErrorCode.BAD_PARAMETER
        assert got.error == (
            f"a JOIN of 'm' to group 'g' of topic {topic!r} carries no key-exchange offer: "
            "the store's namespace has a key"
        )
        assert not store.log.has_group(topic, "g")

    def test_a_key_holder_cannot_act_for_a_member(
        self, store: Store, client: StoreClient, holder: RawRequester, topic: str
    ) -> None:
        joined = client.join(topic, "g", "victim", 30_000)
        assert joined.exchange  # the store's half of the key exchange
        inc = store.incarnation
        guessed = made_up_secret(holder, topic, "g", "victim", inc)
        proofs = store.auth_drops()[DropReason.BAD_MEMBER_PROOF]
        for request in (
            CommitRequest(topic, "g", "victim", (0,), (2,)),
            SeekRequest(topic, "g", "victim", SeekMode.POSITION, (0,), (2,)),
            HeartbeatRequest(topic, "g", "victim"),
            LeaveRequest(topic, "g", "victim"),
        ):
            got = holder.call(request, incarnation=inc, secret=guessed)
            assert (got.status, got.error) == (
                ErrorCode.PRECONDITION_NOT_MET,
                refusal(topic, "g", "victim", DropReason.BAD_MEMBER_PROOF),
            )
        # joining again under the live member's name (to take its secret over): refused too
        offer = MemberOffer()
        rejoin = holder.call(
            JoinRequest(topic, "g", "victim", 30_000, offer=offer.public), incarnation=inc
        )
        assert (rejoin.status, rejoin.error) == (
            ErrorCode.PRECONDITION_NOT_MET,
            refusal(topic, "g", "victim", DropReason.BAD_MEMBER_PROOF),
        )
        assert store.auth_drops()[DropReason.BAD_MEMBER_PROOF] == proofs + 5
        # a member nobody joined: unknown
        ghost = holder.call(
            CommitRequest(topic, "g", "ghost", (0,), (2,)),
            incarnation=inc,
            secret=made_up_secret(holder, topic, "g", "ghost", inc),
        )
        assert ghost.error == refusal(topic, "g", "ghost", DropReason.UNKNOWN_MEMBER)
        # the victim goes on, owning its channels, its position unchanged
        assert store.log.committed(topic, "g", 0)[0] == -1
        done = client.commit(topic, "g", "victim", {0: 1})
        assert done.statuses == {0: CommitStatus.COMMITTED}
        beat = client.heartbeat_async(topic, "g", "victim").result(REPLY_TIMEOUT)
        assert beat.channels == (0, 1)

    def test_a_member_that_left_is_forgotten(
        self, store: Store, client: StoreClient, holder: RawRequester, topic: str
    ) -> None:
        client.join(topic, "g", "a", 30_000)
        client.join(topic, "g", "b", 30_000)
        client.leave(topic, "g", "a")
        with pytest.raises(PreconditionNotMetError) as refused:
            client.commit(topic, "g", "a", {0: 1})
        assert refusal(topic, "g", "a", DropReason.UNKNOWN_MEMBER) in str(refused.value)
        # its name is free again, for anyone holding the key; the other member is kept
        offer = MemberOffer()
        again = holder.call(
            JoinRequest(topic, "g", "a", 30_000, offer=offer.public),
            incarnation=store.incarnation,
        )
        assert Membership.from_wire(again).exchange
        mine = client.heartbeat_async(topic, "g", "b").result(REPLY_TIMEOUT).channels[0]
        done = client.commit(topic, "g", "b", {mine: 1})
        assert done.statuses == {mine: CommitStatus.COMMITTED}

    def test_destroying_a_group_forgets_its_members(
        self, keyed: Keyed, store: Store, client: StoreClient, topic: str
    ) -> None:
        client.join(topic, "g", "a", 30_000)
        client.join(topic, "h", "a", 30_000)
        admin = keyed.client(admin=True)
        try:
            assert admin.destroy_group(topic, "g") is True
        finally:
            admin.close()
            admin.endpoint.close()
        with pytest.raises(PreconditionNotMetError) as refused:
            client.commit(topic, "g", "a", {0: 1})
        assert refusal(topic, "g", "a", DropReason.UNKNOWN_MEMBER) in str(refused.value)
        # the member of the other group keeps its secret
        assert client.commit(topic, "h", "a", {0: 1}).statuses == {0: CommitStatus.COMMITTED}

    def test_the_least_recently_joined_secret_is_forgotten_first(
        self, store: Store, client: StoreClient, topic: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(_service, "MAX_MEMBER_SECRETS", 2)
        client.join(topic, "g", "first", 30_000)
        client.join(topic, "g", "second", 30_000)
        client.join(topic, "g", "first", 30_000)  # joined again: now the most recent
        client.join(topic, "g", "third", 30_000)
        with pytest.raises(PreconditionNotMetError) as refused:
            client.commit(topic, "g", "second", {0: 1}, timeout=REPLY_TIMEOUT)
        assert str(refused.value).startswith(f"'second' of group 'g' of topic {topic!r}: ")
        assert DropReason.UNKNOWN_MEMBER.value in str(refused.value)
        for member in ("first", "third"):  # still known ("second" is still a member too)
            mine = client.heartbeat_async(topic, "g", member).result(REPLY_TIMEOUT).channels
            if mine:
                done = client.commit(topic, "g", member, {mine[0]: 1})
                assert done.statuses == {mine[0]: CommitStatus.COMMITTED}


def test_the_keyed_store_says_so(store: Store) -> None:
    assert store.authenticated
    assert set(store.auth_drops()) == set(DropReason)
