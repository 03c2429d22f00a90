"""Two stores splitting a keyed namespace, over DDS (issue 20: the last survivors of the
mutation run of ``dcps/store/_service.py``, docs/mutation.md, "Session 9 (helper J9)").

``test_service_loop_share_mutants.py`` splits a namespace without a key; here the
namespace has a key and an admin key, so the share store (1/2) checks the seal of each
assignment of the coordinator (0/2) before it follows it, and keeps the secrets of the
members that joined it. One pair of embedded stores serves the whole file (a module
fixture); a real ``StoreClient`` holding the key routes requests as an application's
would. No participant outlives the file (mutmut forks a worker per mutant).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from dcps import PreconditionNotMetError
from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode
from dcps.wire._auth import DropReason
from dcps.wire._codes import CommitStatus
from dcps.wire._messages import Assignment
from dcps.wire._names import request_partition
from tests.support.embedded_store import worker_domain
from tests.support.raw_requests import REPLY_TIMEOUT, RawRequester, keyed_client, namespace_keys
from tests.support.waiting import eventually


class KeyedPair:
    """The coordinating store ``a`` (0/2), the share store ``b`` (1/2), their key files."""

    def __init__(
        self, a: Store, b: Store, keys: tuple[str, str], domain: int, namespace: str
    ) -> None:
        self.a, self.b, self.keys, self.domain, self.namespace = a, b, keys, domain, namespace

    def client(self, *, admin: bool = False) -> StoreClient:
        """A connected client holding the namespace key (and the admin key if ``admin``)."""
        return keyed_client(self.domain, self.namespace, self.keys, admin=admin)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[KeyedPair]:
    base = tmp_path_factory.mktemp("svckeyedshare")
    keys = namespace_keys(base)
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    domain = worker_domain(worker_id)
    kw = {
        "domain_id": domain,
        "namespace": namespace,
        "sync": SyncMode.NORMAL,
        "key": keys[0],
        "admin_key": keys[1],
    }
    with Store(base / "a", share=(0, 2), **kw) as a, Store(base / "b", share=(1, 2), **kw) as b:  # type: ignore[arg-type]
        yield KeyedPair(a, b, keys, domain, namespace)


@pytest.fixture(scope="module")
def client(pair: KeyedPair) -> Iterator[StoreClient]:
    c = pair.client()
    try:
        yield c
    finally:
        c.close()
        c.endpoint.close()


_topics = iter(range(10**6))


@pytest.fixture
def topic(client: StoreClient) -> str:
    """A fresh topic of 4 channels (0, 2 on store a; 1, 3 on store b), 2 elements each."""
    name = f"ks{next(_topics)}"
    client.ensure_topic(name, 4, True)
    for c in range(4):
        client.publish_async(name, c, [1, 1], b"xy").result(REPLY_TIMEOUT)
    return name


def refusal(topic: str, group: str, member: str, reason: DropReason) -> str:
    """What a store tells a key holder acting for a member it does not know."""
    return (
        f"{member!r} of group {group!r} of topic {topic!r}: {reason.value} (not a member this "
        "store knows, or not the member that joined: join first)"
    )


class TestKeyedMirror:
    def test_the_share_store_follows_the_coordinators_sealed_assignments(
        self, pair: KeyedPair, client: StoreClient, topic: str
    ) -> None:
        """A member that joined commits on the share store's channels at once: the share
        store accepted the coordinator's sealed assignment that makes it their owner."""
        joined = client.join(topic, "g", "m", 30_000)
        assert joined.channels == (0, 1, 2, 3)
        done = client.commit(topic, "g", "m", {0: 0, 1: 1, 3: 0}, timeout=REPLY_TIMEOUT)
        assert done.statuses == {c: CommitStatus.COMMITTED for c in (0, 1, 3)}
        assert pair.b.log.committed(topic, "g", 1)[0] == 1
        assert pair.b.log.committed(topic, "g", 3)[0] == 0
        assert pair.a.log.committed(topic, "g", 0)[0] == 0

    def test_an_unsealed_assignment_is_dropped_and_not_followed(
        self, pair: KeyedPair, topic: str
    ) -> None:
        """An assignment written by a participant without the key, named as the real
        coordinator's: the share store counts it dropped and makes no group of it."""
        forger = RawRequester(
            pair.domain, pair.namespace, partition=request_partition(pair.namespace, 1, 2)
        )
        try:
            before = sum(pair.b.auth_drops().values())
            forger.assign(
                Assignment(topic=topic, group="forged", incarnation=pair.a.incarnation,
                           generation=1, members=["m"], owners=[0, 0, 0, 0])
            )  # fmt: skip
            eventually(
                lambda: sum(pair.b.auth_drops().values()) > before,
                REPLY_TIMEOUT,
                "the forged assignment dropped",
            )
            assert not pair.b.log.has_group(topic, "forged")
            assert "forged" not in {g for t, g in pair.b._mirror if t == topic}
        finally:
            forger.close()


class TestKeyedDestroy:
    def test_destroying_a_group_forgets_its_members_at_the_share_store(
        self, pair: KeyedPair, client: StoreClient, topic: str
    ) -> None:
        """Once the group is destroyed, its old member's commit on a share store's channel
        is refused there as unknown (its secret forgotten); a member of another group
        keeps its own."""
        client.join(topic, "g", "m", 30_000)
        client.join(topic, "h", "m", 30_000)
        done = client.commit(topic, "g", "m", {1: 0}, timeout=REPLY_TIMEOUT)
        assert done.statuses == {1: CommitStatus.COMMITTED}
        admin = pair.client(admin=True)
        try:
            assert admin.destroy_group(topic, "g") is True
        finally:
            admin.close()
            admin.endpoint.close()
        assert not pair.b.log.has_group(topic, "g")
        with pytest.raises(PreconditionNotMetError) as refused:
            client.commit(topic, "g", "m", {1: 1}, timeout=REPLY_TIMEOUT)
        assert refusal(topic, "g", "m", DropReason.UNKNOWN_MEMBER) in str(refused.value)
        other = client.commit(topic, "h", "m", {1: 1}, timeout=REPLY_TIMEOUT)
        assert other.statuses == {1: CommitStatus.COMMITTED}
