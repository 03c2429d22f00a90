"""Two stores splitting a namespace's channels, over DDS (issue 20: the mutation run of
``dcps/store/_service.py``, its share handlers: the mirror of the coordinator's
assignments, requests held back until ownership is known, refusals of a store that does
not coordinate).

One pair of embedded stores serves the whole file (a module fixture): share 0/2 (it
coordinates the groups) and share 1/2 (odd channels), each on its own data directory.
A real ``StoreClient`` routes requests as an application's would; a raw participant
writes to the share store's own request partition. Requests the share store holds back
wait :data:`~dcps.store._shares.OWNERSHIP_GRACE` (2 s) at most, so the tests that need
a final refusal send their requests together and wait once. No participant outlives
the file (mutmut forks a worker per mutant).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode
from dcps.store._groups import ANONYMOUS_PREFIX
from dcps.wire._codes import CommitStatus, ErrorCode, SeekMode
from dcps.wire._messages import Assignment, StoreAnnouncement
from dcps.wire._names import request_partition
from dcps.wire._replies import Commits, Seeked
from dcps.wire._requests import (
    CommitRequest,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    SeekRequest,
)
from dcps.wire._transport import Endpoint
from tests.support.embedded_store import worker_domain
from tests.support.raw_requests import REPLY_TIMEOUT, RawRequester
from tests.support.waiting import eventually


class Pair:
    """The coordinating store ``a`` (0/2), the share store ``b`` (1/2), where they are."""

    def __init__(self, a: Store, b: Store, domain: int, namespace: str) -> None:
        self.a, self.b, self.domain, self.namespace = a, b, domain, namespace


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[Pair]:
    base = tmp_path_factory.mktemp("svcshare")
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    domain = worker_domain(worker_id)
    kw = {"domain_id": domain, "namespace": namespace, "sync": SyncMode.NORMAL, "key": None}
    with Store(base / "a", share=(0, 2), **kw) as a, Store(base / "b", share=(1, 2), **kw) as b:  # type: ignore[arg-type]
        yield Pair(a, b, domain, namespace)


@pytest.fixture(scope="module")
def client(pair: Pair) -> Iterator[StoreClient]:
    endpoint = Endpoint(pair.domain, pair.namespace)
    c = StoreClient(endpoint, request_timeout=REPLY_TIMEOUT, key=None, admin_key=None)
    try:
        c.connect(REPLY_TIMEOUT)
        yield c
    finally:
        c.close()
        endpoint.close()


@pytest.fixture(scope="module")
def raw_b(pair: Pair) -> Iterator[RawRequester]:
    """A raw participant writing to share 1/2's request partition."""
    r = RawRequester(pair.domain, pair.namespace, partition=request_partition(pair.namespace, 1, 2))
    try:
        yield r
    finally:
        r.close()


_topics = iter(range(10**6))


@pytest.fixture
def topic(client: StoreClient) -> str:
    """A fresh topic of 4 channels (0, 2 on store a; 1, 3 on store b), 2 elements each."""
    name = f"s{next(_topics)}"
    client.ensure_topic(name, 4, True)
    for c in range(4):
        client.publish_async(name, c, [1, 1], b"xy").result(REPLY_TIMEOUT)
    return name


class TestSplit:
    # first: the stores are started in its setup, so mutmut runs it for their start-up code
    def test_a_member_commits_and_seeks_on_both_stores(
        self, pair: Pair, client: StoreClient, topic: str
    ) -> None:
        joined = client.join(topic, "g", "m", 30_000)
        assert joined.channels == (0, 1, 2, 3)
        assert pair.b.log.has_group(topic, "g")  # the share store keeps the group's rows
        done = client.commit(topic, "g", "m", {0: 0, 1: 1, 3: 0})
        assert done.statuses == {c: CommitStatus.COMMITTED for c in (0, 1, 3)}
        assert pair.b.log.committed(topic, "g", 1)[0] == 1
        assert pair.b.log.committed(topic, "g", 3)[0] == 0
        assert pair.a.log.committed(topic, "g", 0)[0] == 0
        seeked = client.seek(topic, "g", "m", SeekMode.HEAD, {1: 0, 2: 0})
        assert seeked.targets == {1: -1, 2: -1}
        assert pair.b.log.committed(topic, "g", 1)[0] == -1
        tail = client.seek(topic, "g", "m", SeekMode.POSITION, {3: 1})
        assert tail.targets == {3: 1}

    def test_each_store_keeps_its_own_channels(
        self, pair: Pair, client: StoreClient, topic: str
    ) -> None:
        assert [pair.a.log.channel_state(topic, c).count for c in (0, 2)] == [2, 2]
        assert [pair.b.log.channel_state(topic, c).count for c in (1, 3)] == [2, 2]
        state = client.state(topic)
        assert (state.channels, state.tails) == ((0, 1, 2, 3), (1, 1, 1, 1))

    def test_the_share_store_refuses_what_only_the_coordinator_does(
        self, raw_b: RawRequester, topic: str
    ) -> None:
        for request, name in (
            (HeartbeatRequest(topic, "g", "m"), "HEARTBEAT"),
            (LeaveRequest(topic, "g", "m"), "LEAVE"),
        ):
            got = raw_b.call(request)
            assert (got.status, got.error) == (
                ErrorCode.ILLEGAL_OPERATION,
                f"store 1/2 does not coordinate groups: {name} goes to the store of share 0/2",
            )

    def test_a_join_at_the_share_store_needs_the_topic(
        self, pair: Pair, raw_b: RawRequester, topic: str
    ) -> None:
        missing = raw_b.call(JoinRequest("no_topic", "g", "m", 30_000))
        assert missing.status == ErrorCode.BAD_PARAMETER
        assert "no_topic" in missing.error
        got = raw_b.call(JoinRequest(topic, "j", "m", 30_000))
        assert (got.status, bytes(got.blob)) == (0, b"")
        assert pair.b.log.has_group(topic, "j")

    def test_non_members_and_unowned_channels_are_refused_after_the_grace(
        self, pair: Pair, client: StoreClient, raw_b: RawRequester, topic: str
    ) -> None:
        client.join(topic, "g", "m1", 30_000)
        client.join(topic, "g", "m2", 30_000)
        m2 = client.heartbeat_async(topic, "g", "m2").result(REPLY_TIMEOUT).channels
        m1 = client.heartbeat_async(topic, "g", "m1").result(REPLY_TIMEOUT).channels
        assert sorted(m1 + m2) == [0, 1, 2, 3]
        theirs = next(c for c in (1, 3) if c not in m2)
        mine = next(c for c in (1, 3) if c in m2)
        nobody = raw_b.send(CommitRequest(topic, "g", "nobody", (1,), (0,)))
        seek = raw_b.send(SeekRequest(topic, "g", "m2", SeekMode.HEAD, (theirs,), (0,)))
        commit = raw_b.send(CommitRequest(topic, "g", "m2", (theirs, mine), (0, 0)))
        got = raw_b.answer(commit, timeout=REPLY_TIMEOUT + 2)
        assert Commits.from_wire(got).statuses == {
            theirs: CommitStatus.UNOWNED,
            mine: CommitStatus.COMMITTED,
        }
        refused = raw_b.answer(nobody, timeout=REPLY_TIMEOUT + 2)
        assert (refused.status, refused.error) == (
            ErrorCode.PRECONDITION_NOT_MET,
            f"'nobody' is not a member of group 'g' of topic {topic!r} "
            "(left, timed out, or the store restarted)",
        )
        unowned = raw_b.answer(seek, timeout=REPLY_TIMEOUT + 2)
        assert (unowned.status, unowned.error) == (
            ErrorCode.PRECONDITION_NOT_MET,
            f"cannot seek channels [{theirs}] of topic {topic!r}: member 'm2' of group 'g' "
            "does not own them",
        )
        owned = raw_b.call(SeekRequest(topic, "g", "m2", SeekMode.TAIL, (mine,), (0,)))
        assert Seeked.from_wire(owned).targets == {mine: 1}
        assert pair.b.log.committed(topic, "g", theirs)[0] == -1

    def test_a_commit_allowed_unowned_at_the_share_store(
        self, pair: Pair, client: StoreClient, raw_b: RawRequester, topic: str
    ) -> None:
        client.join(topic, "g", "m", 30_000)
        done = client.commit(topic, "g", "gone", {3: 1}, allow_unowned=True)
        assert done.statuses == {3: CommitStatus.COMMITTED}
        assert pair.b.log.committed(topic, "g", 3)[0] == 1
        foreign = raw_b.call(CommitRequest(topic, "g", "gone", (2,), (0,), True))
        assert foreign.status == ErrorCode.BAD_PARAMETER
        assert foreign.error.startswith(f"channels [2] of topic {topic!r} are served by other")
        missing = raw_b.call(CommitRequest(topic, "nogroup", "gone", (3,), (0,), True))
        assert missing.error == f"group 'nogroup' of topic {topic!r} does not exist"

    def test_groups_are_destroyed_on_both_stores(
        self, pair: Pair, client: StoreClient, topic: str
    ) -> None:
        client.join(topic, "g", "m", 30_000)
        client.commit(topic, "g", "m", {1: 0})
        assert client.destroy_group(topic, "g") is True
        assert not pair.a.log.has_group(topic, "g")
        assert not pair.b.log.has_group(topic, "g")
        assert client.destroy_group(topic, "g") is False

    def test_an_anonymous_group_goes_when_its_member_leaves(
        self, pair: Pair, client: StoreClient, topic: str
    ) -> None:
        group = f"{ANONYMOUS_PREFIX}x"
        client.join(topic, group, "m", 30_000, anonymous=True)
        eventually(lambda: pair.b.log.has_group(topic, group), REPLY_TIMEOUT, "the group")
        client.leave(topic, group, "m")
        eventually(lambda: not pair.b.log.has_group(topic, group), REPLY_TIMEOUT, "the group gone")

    def test_only_the_coordinator_counts_members(
        self, pair: Pair, client: StoreClient, topic: str
    ) -> None:
        client.join(topic, "g", "m", 30_000)
        assert pair.a.metrics.snapshot().members[(topic, "g")] == 1
        assert pair.b.metrics.snapshot().members[(topic, "g")] == 0


class TestTheMirror:
    def test_an_assignment_of_another_coordinator_incarnation_is_not_trusted(
        self, pair: Pair, raw_b: RawRequester, topic: str
    ) -> None:
        # what a coordinator that restarted since (or a forger) once assigned
        raw_b.assign(
            Assignment(
                topic=topic,
                group="f",
                incarnation="restarted",
                generation=1,
                members=["m"],
                owners=[0, 0, 0, 0],
            )
        )
        eventually(lambda: pair.b.log.has_group(topic, "f"), REPLY_TIMEOUT, "the group mirrored")
        got = raw_b.call(CommitRequest(topic, "f", "m", (1,), (0,)), timeout=REPLY_TIMEOUT + 2)
        assert (got.status, got.error) == (
            ErrorCode.PRECONDITION_NOT_MET,
            f"'m' is not a member of group 'f' of topic {topic!r} "
            "(left, timed out, or the store restarted)",
        )
        assert pair.b.log.committed(topic, "f", 1)[0] == -1


class TestALoneShareStore:
    def test_it_trusts_the_youngest_coordinator_and_none_before_one_is_heard_of(
        self, tmp_path_factory: pytest.TempPathFactory, worker_id: str
    ) -> None:
        namespace = f"ns_{uuid.uuid4().hex[:10]}"
        domain = worker_domain(worker_id)
        path = tmp_path_factory.mktemp("lone") / "b"
        with Store(path, domain_id=domain, namespace=namespace, share=(1, 2), key=None) as b:
            b.log.ensure_topic("t", 2)
            raw = RawRequester(domain, namespace, partition=request_partition(namespace, 1, 2))
            try:

                def assign(group: str, incarnation: str) -> None:
                    raw.assign(
                        Assignment(topic="t", group=group, incarnation=incarnation,
                                   generation=1, members=["m"], owners=[0, 0])
                    )  # fmt: skip
                    eventually(lambda: b.log.has_group("t", group), REPLY_TIMEOUT, group)

                def commit(group: str) -> Any:
                    return raw.call(
                        CommitRequest("t", group, "m", (1,), (0,)), timeout=REPLY_TIMEOUT + 2
                    )

                # no coordinator heard of yet: its mirror is all a share store has
                assign("early", "any")
                assert commit("early").status == 0
                # a coordinator restarted: two announcements of share 0/2, the younger counts
                for incarnation, started in (("old", 1), ("new", 2)):
                    raw.announce(
                        StoreAnnouncement(incarnation=incarnation, index=0, count=2,
                                          started_ns=started, pid=1, host="h", data_dir="/d")
                    )  # fmt: skip
                eventually(lambda: b._coordinator == "new", REPLY_TIMEOUT, "the coordinator")
                assign("g", "new")
                assign("h", "old")
                assert commit("g").status == 0
                stale = commit("h")
                assert (stale.status, stale.error) == (
                    ErrorCode.PRECONDITION_NOT_MET,
                    "'m' is not a member of group 'h' of topic 't' "
                    "(left, timed out, or the store restarted)",
                )
                assert b.failure is None  # another share's stores do not stop it
            finally:
                raw.close()


class TestHeldBack:
    def test_a_commit_waits_for_the_assignment_that_makes_it_a_member(
        self, pair: Pair, raw_b: RawRequester, topic: str
    ) -> None:
        rid = raw_b.send(CommitRequest(topic, "late", "m", (1,), (0,)))
        # the coordinator's assignment comes after the request (here forged, as it would)
        raw_b.assign(
            Assignment(topic=topic, group="late", incarnation=pair.a.incarnation,
                       generation=1, members=["m"], owners=[0, 0, 0, 0])
        )  # fmt: skip
        got = raw_b.answer(rid, timeout=REPLY_TIMEOUT + 2)
        assert Commits.from_wire(got).statuses == {1: CommitStatus.COMMITTED}
        assert pair.b.log.committed(topic, "late", 1)[0] == 0
