"""The store service over DDS, as clients see it (issue 20: the mutation run of the whole of
``dcps/store/_service.py``, its request loop, groups, fetches and reply writers included).

One embedded ``Store`` (no key) serves the whole file (a module fixture), with one real
``StoreClient`` and one raw ``cyclonedds`` participant (``RawRequester``) writing
requests by hand: malformed, from a bad client id, of an unknown kind, for a member
that is not one. Each test asserts what a client would see: the replies, their order,
the elements stored, the counters. Replies are awaited for a few seconds at most, so a
broken mutant costs seconds. Tests that need a store of their own (start, close, a
second store, ``run_store``) start one and close it before they return: no participant
outlives its test except the module's, closed at the end of the file (mutmut forks a
worker per mutant from a process that ran these tests).
"""

from __future__ import annotations

import inspect
import io
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    NetworkConfig,
    PreconditionNotMetError,
)
from dcps.channels import ChannelledTopic
from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode, _replies, _service, run_store
from dcps.store._service import DEFAULT_FETCH_THREADS, STORE_FILE, StoreState
from dcps.wire import _transport
from dcps.wire._auth_keys import ADMIN_KEY_FILE_ENV, KEY_FILE_ENV, write_key_file
from dcps.wire._codes import CommitStatus, ErrorCode, Op, SeekMode
from dcps.wire._durables import (
    DurableDelivery,
    DurableKind,
    DurablePollRequest,
    DurableSubscribeRequest,
)
from dcps.wire._messages import LiveBatch, Request, StoreAnnouncement
from dcps.wire._names import BATCH_READER_QOS, batch_partition
from dcps.wire._replies import ChannelStates, Commits, Membership, Pong, Published
from dcps.wire._requests import (
    CommitRequest,
    EnsureTopicRequest,
    FetchRequest,
    JoinRequest,
    LeaveRequest,
    PingRequest,
    PublishRequest,
    SeekRequest,
    StateRequest,
)
from dcps.wire._sealing import UNAUTHENTICATED_WARNING
from dcps.wire._transport import Endpoint
from idl._identity import type_identity
from tests.store.test_store_files import batch_page, make_store, scribble
from tests.support.embedded_store import module_store
from tests.support.peers.channels_types import Msg
from tests.support.raw_requests import REPLY_TIMEOUT, RawRequester
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Iterator[tuple[Store, int, str]]:
    with module_store(tmp_path_factory, worker_id, "svcloop") as found:
        yield found


@pytest.fixture(scope="module")
def store(served: tuple[Store, int, str]) -> Store:
    return served[0]


@pytest.fixture(scope="module")
def client(served: tuple[Store, int, str]) -> Iterator[StoreClient]:
    _, domain, namespace = served
    endpoint = Endpoint(domain, namespace)
    c = StoreClient(endpoint, request_timeout=REPLY_TIMEOUT, key=None, admin_key=None)
    try:
        c.connect(REPLY_TIMEOUT)
        yield c
    finally:
        c.close()
        endpoint.close()


@pytest.fixture(scope="module")
def raw(served: tuple[Store, int, str]) -> Iterator[RawRequester]:
    _, domain, namespace = served
    r = RawRequester(domain, namespace)
    try:
        yield r
    finally:
        r.close()


_topics = iter(range(10**6))
# the namespaces of the stores tests start for themselves (unique: other runs share the domain)
DUR_NS = f"ns_dur_{uuid.uuid4().hex[:8]}"
IDLE_NS = f"ns_idle_{uuid.uuid4().hex[:8]}"
LIFE_NS = f"ns_life_{uuid.uuid4().hex[:8]}"
MA_NS = f"ns_ma_{uuid.uuid4().hex[:8]}"
MB_NS = f"ns_mb_{uuid.uuid4().hex[:8]}"
OLD_NS = f"ns_old_{uuid.uuid4().hex[:8]}"
RUN_NS = f"ns_run_{uuid.uuid4().hex[:8]}"
SIG_NS = f"ns_sig_{uuid.uuid4().hex[:8]}"
NET_NS = f"ns_net_{uuid.uuid4().hex[:8]}"
PIPE_NS = f"ns_pipe_{uuid.uuid4().hex[:8]}"
OPT_NS = f"ns_opt_{uuid.uuid4().hex[:8]}"
STOPPED_NS = f"ns_stopped_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def topic(client: StoreClient) -> str:
    """A fresh topic of 3 channels that keeps what is consumed."""
    name = f"t{next(_topics)}"
    client.ensure_topic(name, 3, True)
    return name


def requests(store: Store, kind: str, result: str) -> float:
    value = store.metrics.registry.get_sample_value(
        "dcps_store_requests_total", {"kind": kind, "result": result}
    )
    return value or 0.0


def metric(store: Store, name: str, **labels: str) -> float:
    return store.metrics.registry.get_sample_value(name, labels) or 0.0


def synced(raw: RawRequester) -> None:
    """Wait until the store handled everything ``raw`` wrote before (a PING after it)."""
    assert Pong.from_wire(raw.call(PingRequest())).incarnation


class TestStarted:
    """First in the file: the module's store is started in this test's setup, so mutmut
    runs this test for every mutant of ``__init__``, ``start`` and ``_open_endpoints``."""

    def test_the_started_store_as_other_participants_see_it(
        self, store: Store, raw: RawRequester
    ) -> None:
        (service,) = [t for t in threading.enumerate() if t.name == "dcps-store"]  # for dumps
        assert service.daemon  # a process that never closes its store still exits
        synced(raw)
        # its announcement says who and where it is
        (announced,) = [a for a in raw.announcements() if a.incarnation == store.incarnation]
        assert (announced.index, announced.count, announced.pid, announced.host) == (
            0,
            1,
            os.getpid(),
            socket.gethostname(),
        )
        assert announced.data_dir == str(store.data_dir.resolve())
        assert 0 < announced.started_ns <= time.time_ns()
        # its gauges: the clients it answers, no authentication failures (no key)
        assert metric(store, "dcps_store_clients") >= 1
        assert metric(store, "dcps_store_auth_failures_total", reason="bad_tag") == 0
        labels = {"namespace": store.namespace, "share": "0/1", "incarnation": store.incarnation}
        assert metric(store, "dcps_store_info", **labels) == 1
        # a group's assignment stays for readers that come later (TRANSIENT_LOCAL)
        topic = f"t{next(_topics)}"
        assert raw.call(EnsureTopicRequest(topic, 2)).status == 0
        joined = Membership.from_wire(raw.call(JoinRequest(topic, "g", "m", 30_000)))
        (assignment,) = eventually(
            lambda: [a for a in raw.assignments() if (a.topic, a.group) == (topic, "g")],
            REPLY_TIMEOUT,
            "the assignment, read late",
        )
        assert (assignment.incarnation, assignment.members, assignment.owners) == (
            store.incarnation,
            ["m"],
            [0, 0],
        )
        assert assignment.generation == joined.generation


class TestAdmission:
    def test_a_bad_client_id_is_dropped_unanswered_and_counted(
        self, store: Store, raw: RawRequester, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.WARNING, logger="dcps.store")
        before = store.dropped_requests
        sent = [raw.send(PingRequest(), client="bad/client") for _ in range(3)]
        eventually(lambda: store.dropped_requests == before + 3, REPLY_TIMEOUT, "3 drops")
        synced(raw)
        assert not set(sent) & set(raw.got)
        warned = [r.getMessage() for r in caplog.records if "request dropped" in r.getMessage()]
        # rate-limited: the 1st, 2nd, 4th, 8th... drop of the store's life are logged
        counts = [before + i for i in (1, 2, 3) if (before + i) & (before + i - 1) == 0]
        assert len(warned) == len(counts)
        for text, count in zip(warned, counts, strict=True):
            assert text.startswith(f"dcps store: request dropped ({count} so far): client id ")
            assert "'bad/client' is refused" in text

    def test_an_undecodable_request_is_answered_alone(
        self, store: Store, raw: RawRequester, topic: str
    ) -> None:
        before = requests(store, "unknown", "bad_parameter")  # its kind is not readable
        rid = raw.next_id()
        data = StateRequest(topic, "GROUP!").to_wire(raw.client, rid).serialize()
        sample = Request(client=raw.client, request_id=rid, op=int(Op.STATE))
        sample.serialize = lambda **_: data.replace(b"GROUP!", b"\xff\xfe\xfd\xfc\xfb\xfa")  # type: ignore[method-assign]
        raw.write(sample)
        after = raw.send(StateRequest(topic))
        bad = raw.answer(rid)
        assert (bad.client, bad.status) == (raw.client, ErrorCode.BAD_PARAMETER)
        assert "UTF-8" in bad.error
        assert raw.answer(after).status == 0
        assert requests(store, "unknown", "bad_parameter") == before + 1

    def test_an_unknown_request_kind_is_refused_by_name(
        self, store: Store, raw: RawRequester
    ) -> None:
        before = requests(store, "unknown", "bad_parameter")
        rid = raw.write(Request(client=raw.client, request_id=raw.next_id(), op=999))
        got = raw.answer(rid)
        assert got.status == ErrorCode.BAD_PARAMETER
        assert "999" in got.error
        assert requests(store, "unknown", "bad_parameter") == before + 1

    def test_a_failing_request_is_counted_by_kind_and_code(
        self, store: Store, raw: RawRequester
    ) -> None:
        before = requests(store, "state", "bad_parameter")
        ok_before = requests(store, "ping", "ok")
        got = raw.call(StateRequest("no_such_topic"))
        assert got.status == ErrorCode.BAD_PARAMETER
        assert "no_such_topic" in got.error
        synced(raw)
        assert requests(store, "state", "bad_parameter") == before + 1
        assert requests(store, "ping", "ok") == ok_before + 1


class TestRounds:
    def test_a_request_after_publishes_sees_them(
        self, store: Store, raw: RawRequester, topic: str
    ) -> None:
        store.log.create_group(topic, "keep")
        sent = [raw.send(PublishRequest(topic, 0, [1], bytes([i]))) for i in range(20)]
        state = raw.send(StateRequest(topic, "", (0,)))
        more = [raw.send(PublishRequest(topic, 0, [1], bytes([i]))) for i in range(20, 25)]
        fetch = raw.send(FetchRequest(topic, 0, 0, 100))
        got = ChannelStates.from_wire(raw.answer(state))
        assert got.tails == (19,)  # every publish written before the STATE
        placed = [Published.from_wire(raw.answer(r)).first for r in sent + more]
        assert placed == list(range(25))
        fetched = raw.answer(fetch)
        assert fetched.status == 0
        assert bytes(fetched.blob).endswith(bytes(range(25)))

    def test_replies_reach_each_client_in_request_order(
        self, raw: RawRequester, client: StoreClient, topic: str
    ) -> None:
        futures = [client.publish_async(topic, 1, [2], b"%02d" % i) for i in range(30)]
        firsts = [f.result(REPLY_TIMEOUT).first for f in futures]
        assert firsts == list(range(30))
        fetched = client.fetch(topic, 1, 28, 10)
        assert (fetched.run.first, fetched.run.count, fetched.run.data) == (28, 2, b"2829")
        assert (fetched.head, fetched.tail) == (0, 29)


class TestLivePushes:
    def test_each_publish_is_pushed_live_by_the_channels_one_writer(
        self, served: tuple[Store, int, str], client: StoreClient, topic: str
    ) -> None:
        _, domain, namespace = served
        dp = DomainParticipant(domain)
        try:
            reader: DataReader[Any] = DataReader(
                Subscriber(dp, qos=Qos(Policy.Partition([batch_partition(namespace, topic, 1)]))),
                Topic(dp, "dcps_channels_batch", LiveBatch),
                qos=BATCH_READER_QOS,
            )
            eventually(reader.get_matched_publications, REPLY_TIMEOUT, "the channel's writer")
            futures = [client.publish_async(topic, 1, [1], bytes([i])) for i in range(6)]
            assert [f.result(REPLY_TIMEOUT).first for f in futures] == list(range(6))
            got: list[LiveBatch] = []

            def pushed() -> bool:
                got.extend(b for b in reader.take(N=64) if isinstance(b, LiveBatch))
                return len(got) >= 6

            eventually(pushed, REPLY_TIMEOUT, "6 live batches")
            assert [(b.topic, b.channel, b.first, bytes(b.blob)) for b in got] == [
                (topic, 1, i, bytes([i])) for i in range(6)
            ]
            # one writer for the channel, the one made when the topic was ensured
            assert len({b.sample_info.publication_handle for b in got}) == 1  # type: ignore[attr-defined]
            assert len(reader.get_matched_publications()) == 1
        finally:
            dp.__del__()

    def test_a_large_batch_is_pushed_whole(
        self, served: tuple[Store, int, str], client: StoreClient, topic: str
    ) -> None:
        """Past GATHER_MIN bytes a batch goes to Cyclone in pieces: the same sample arrives."""
        _, domain, namespace = served
        payloads = [bytes([i]) * (70 * 1024) for i in range(3)]  # 210 KiB in one batch
        dp = DomainParticipant(domain)
        try:
            reader: DataReader[Any] = DataReader(
                Subscriber(dp, qos=Qos(Policy.Partition([batch_partition(namespace, topic, 2)]))),
                Topic(dp, "dcps_channels_batch", LiveBatch),
                qos=BATCH_READER_QOS,
            )
            eventually(reader.get_matched_publications, REPLY_TIMEOUT, "the channel's writer")
            sizes = [len(p) for p in payloads]
            done = client.publish_async(topic, 2, sizes, b"".join(payloads)).result(REPLY_TIMEOUT)
            got: list[LiveBatch] = []

            def pushed() -> bool:
                got.extend(b for b in reader.take(N=8) if isinstance(b, LiveBatch))
                return bool(got)

            eventually(pushed, REPLY_TIMEOUT, "the live batch")
            (batch,) = got
            assert (batch.topic, batch.channel, batch.first, batch.timestamp) == (
                topic,
                2,
                0,
                done.stamp,
            )
            assert (list(batch.sizes), bytes(batch.blob)) == (sizes, b"".join(payloads))
        finally:
            dp.__del__()


class TestKeyedPublishes:
    def test_a_publish_key_stores_its_batch_once(
        self, store: Store, client: StoreClient, topic: str
    ) -> None:
        store.log.create_group(topic, "keep")
        first = client.publish_async(topic, 2, [1, 2], b"abb", key="k1").result(REPLY_TIMEOUT)
        again = client.publish_async(topic, 2, [1, 2], b"abb", key="k1").result(REPLY_TIMEOUT)
        assert (first.first, first.count, first.duplicate) == (0, 2, False)
        assert (again.first, again.count, again.duplicate, again.stamp) == (
            0,
            2,
            True,
            first.stamp,
        )
        other = client.publish_async(topic, 2, [1], b"c", key="k2").result(REPLY_TIMEOUT)
        assert (other.first, other.count, other.duplicate) == (2, 1, False)
        assert store.log.channel_state(topic, 2).count == 3
        assert metric(store, "dcps_store_stored_elements_total", topic=topic) == 3
        assert metric(store, "dcps_store_pushed_elements_total", topic=topic) == 3  # once each
        assert requests(store, "publish", "ok") >= 3
        with pytest.raises(BadParameterError, match="channel"):
            client.publish_async(topic, 9, [1], b"x", key="k3").result(REPLY_TIMEOUT)
        empty = client.publish_async(topic, 2, [], b"", key="k4").result(REPLY_TIMEOUT)
        assert (empty.first, empty.count, empty.stamp) == (0, 0, 0)

    def test_a_keyed_publish_reaches_a_last_value_durable(
        self, client: StoreClient, topic: str
    ) -> None:
        subscribe = DurableSubscribeRequest(topic, "lv", "s1", DurableKind.LAST_VALUE)
        client.request_async(subscribe, lambda r: r).result(REPLY_TIMEOUT)
        client.publish_async(topic, 0, [1, 1], b"xy", key="lv1").result(REPLY_TIMEOUT)
        poll = DurablePollRequest(topic, "lv", "s1", 10)
        got = client.request_async(poll, DurableDelivery.from_wire).result(REPLY_TIMEOUT)
        assert (got.offsets, got.data) == ((0, 1), b"xy")


class TestFetches:
    def test_a_fetch_is_answered_from_the_log_and_counted(
        self, store: Store, client: StoreClient, topic: str
    ) -> None:
        before = requests(store, "fetch", "ok")
        client.publish_async(topic, 2, [1, 2, 3], b"abbccc").result(REPLY_TIMEOUT)
        got = client.fetch(topic, 2, 1, 5)
        assert (got.channel, got.run.first, got.run.data) == (2, 1, b"bbccc")
        assert requests(store, "fetch", "ok") == before + 1
        assert metric(store, "dcps_store_fetched_elements_total", topic=topic) == 2
        assert metric(store, "dcps_store_fetched_bytes_total", topic=topic) == 5

    def test_a_failed_fetch_is_counted_and_reads_nothing(
        self, store: Store, raw: RawRequester, topic: str
    ) -> None:
        before = requests(store, "fetch", "bad_parameter")
        got = raw.call(FetchRequest(topic, 7, 0, 5))
        assert got.status == ErrorCode.BAD_PARAMETER
        synced(raw)
        eventually(
            lambda: requests(store, "fetch", "bad_parameter") == before + 1,
            REPLY_TIMEOUT,
            "the failed fetch counted",
        )
        assert metric(store, "dcps_store_fetched_elements_total", topic=topic) == 0

    def test_an_empty_fetch_counts_no_bytes(
        self, store: Store, client: StoreClient, topic: str
    ) -> None:
        before = requests(store, "fetch", "ok")
        got = client.fetch(topic, 0, 0, 5)  # nothing stored in the channel yet
        assert got.run.count == 0
        eventually(lambda: requests(store, "fetch", "ok") == before + 1, REPLY_TIMEOUT, "counted")
        assert metric(store, "dcps_store_fetched_elements_total", topic=topic) == 0
        assert metric(store, "dcps_store_fetched_bytes_total", topic=topic) == 0


class TestGroups:
    def test_a_member_joins_commits_seeks_and_leaves(
        self, store: Store, client: StoreClient, topic: str
    ) -> None:
        for c in range(3):
            client.publish_async(topic, c, [1] * 4, b"abcd").result(REPLY_TIMEOUT)
        joined = client.join(topic, "g", "m1", 30_000)
        assert (joined.incarnation, joined.channels, joined.exchange) == (
            store.incarnation,
            (0, 1, 2),
            b"",
        )
        beat = client.heartbeat_async(topic, "g", "m1").result(REPLY_TIMEOUT)
        assert (beat.generation, beat.channels) == (joined.generation, (0, 1, 2))
        done = client.commit(topic, "g", "m1", {0: 1, 2: 3})
        assert done.statuses == {0: CommitStatus.COMMITTED, 2: CommitStatus.COMMITTED}
        state = client.state(topic, "g")
        assert (state.committed, state.explicit) == ((1, -1, 3), (True, False, True))
        seeked = client.seek(topic, "g", "m1", SeekMode.POSITION, {0: 2, 1: 3})
        assert seeked.targets == {0: 2, 1: 3}
        assert client.seek(topic, "g", "m1", SeekMode.HEAD, {2: 0}).targets == {2: -1}
        assert client.seek(topic, "g", "m1", SeekMode.TAIL, {2: 0}).targets == {2: 3}
        stamp = client.fetch(topic, 1, 2, 1).run.stamps[0]
        at = client.seek(topic, "g", "m1", SeekMode.TIMESTAMP, {1: stamp})
        assert at.targets == {1: 2}  # the element of that time is the next one
        client.leave(topic, "g", "m1")
        refused = client.commit_async(topic, "g", "m1", {0: 2})
        with pytest.raises(PreconditionNotMetError, match="m1"):
            refused.result(REPLY_TIMEOUT)
        assert client.destroy_group(topic, "g") is True
        assert client.destroy_group(topic, "g") is False
        assert not store.log.has_group(topic, "g")

    def test_a_second_member_splits_the_channels_and_owns_its_own(
        self, client: StoreClient, raw: RawRequester, topic: str
    ) -> None:
        for c in range(3):
            client.publish_async(topic, c, [1], b"x").result(REPLY_TIMEOUT)
        client.join(topic, "g", "a", 30_000)
        b = Membership.from_wire(raw.call(JoinRequest(topic, "g", "b", 30_000)))
        a = client.heartbeat_async(topic, "g", "a").result(REPLY_TIMEOUT)
        assert sorted(a.channels + b.channels) == [0, 1, 2]
        assert b.channels
        foreign = a.channels[0]
        got = raw.call(CommitRequest(topic, "g", "b", (foreign, b.channels[0]), (0, 0)))
        assert got.status == 0
        assert Commits.from_wire(got).statuses == {
            foreign: CommitStatus.UNOWNED,
            b.channels[0]: CommitStatus.COMMITTED,
        }
        refused = raw.call(SeekRequest(topic, "g", "b", SeekMode.HEAD, (foreign,), (0,)))
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert refused.error == (
            f"cannot seek channels [{foreign}] of topic {topic!r}: member 'b' of group 'g' "
            "does not own them"
        )
        assert raw.call(LeaveRequest(topic, "g", "b")).status == 0
        after = client.heartbeat_async(topic, "g", "a").result(REPLY_TIMEOUT)
        assert after.channels == (0, 1, 2)

    def test_a_commit_allowed_unowned_needs_the_group_only(
        self, store: Store, client: StoreClient, topic: str
    ) -> None:
        with pytest.raises(PreconditionNotMetError) as missing:
            client.commit(topic, "nogroup", "x", {0: 0}, allow_unowned=True)
        assert str(missing.value).endswith(f"group 'nogroup' of topic {topic!r} does not exist")
        client.publish_async(topic, 0, [1, 1], b"ab").result(REPLY_TIMEOUT)
        client.join(topic, "g", "owner", 30_000)
        done = client.commit(topic, "g", "gone", {0: 1}, allow_unowned=True)
        assert done.statuses == {0: CommitStatus.COMMITTED}
        assert store.log.committed(topic, "g", 0)[0] == 1
        with pytest.raises(BadParameterError, match=r"channels 0..2; \[9\] do not exist"):
            client.commit(topic, "g", "gone", {9: 1}, allow_unowned=True)

    def test_a_commit_of_a_past_incarnation_readmits_its_member(
        self, client: StoreClient, topic: str
    ) -> None:
        client.publish_async(topic, 0, [1, 1], b"ab").result(REPLY_TIMEOUT)
        client.join(topic, "g", "old", 30_000)
        client.leave(topic, "g", "old")
        # a member of a store incarnation that restarted since: taken back, as it was
        done = client.commit(topic, "g", "old", {0: 0}, incarnation="another")
        assert done.statuses == {0: CommitStatus.COMMITTED}
        beat = client.heartbeat_async(topic, "g", "old").result(REPLY_TIMEOUT)
        assert beat.channels == (0,)  # it is given back the channel it commits

    def test_commits_allowed_unowned_keep_a_member_alive(
        self, client: StoreClient, topic: str
    ) -> None:
        client.publish_async(topic, 0, [1, 1], b"ab").result(REPLY_TIMEOUT)
        client.join(topic, "g", "quiet", 1000)  # expelled after 1 s without a heartbeat
        client.join(topic, "g", "busy", 1000)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:  # only commits, no heartbeats, for 2 s
            client.commit(topic, "g", "busy", {0: 0}, allow_unowned=True)
            client.heartbeat_async(topic, "g", "quiet").result(REPLY_TIMEOUT)
        # "quiet" beat its heart and "busy" only committed: both are members still
        with pytest.raises(PreconditionNotMetError):
            client.heartbeat_async(topic, "g", "nobody").result(REPLY_TIMEOUT)
        beat = client.heartbeat_async(topic, "g", "busy").result(REPLY_TIMEOUT)
        quiet = client.heartbeat_async(topic, "g", "quiet").result(REPLY_TIMEOUT)
        assert sorted(beat.channels + quiet.channels) == [0, 1, 2]
        assert beat.channels

    def test_groups_count_their_members_for_a_scrape(
        self, store: Store, client: StoreClient, topic: str
    ) -> None:
        client.join(topic, "g", "a", 30_000)
        client.join(topic, "g", "b", 30_000)
        snapshot = store.metrics.snapshot()
        assert snapshot.members[(topic, "g")] == 2


class TestReplyWriters:
    def test_a_client_over_the_limit_is_refused_until_one_is_gone(
        self, store: Store, served: tuple[Store, int, str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        _, domain, namespace = served
        first = RawRequester(domain, namespace)
        try:
            synced(first)
            count = int(metric(store, "dcps_store_clients"))
            monkeypatch.setattr(_service, "MAX_CLIENTS", count)
            second = RawRequester(domain, namespace)
            try:
                refused = second.call(PingRequest())
                assert refused.status == ErrorCode.OUT_OF_RESOURCES
                assert refused.error == (
                    f"the store answers at most {count} clients at once (MAX_CLIENTS); "
                    "try again later"
                )
                # whatever it asks: each refusal answers its own request
                leave = second.call(LeaveRequest("t", "g", "m"))
                assert leave.status == ErrorCode.OUT_OF_RESOURCES
                synced(first)  # a client already answered still is
                first.close()
                first = None  # its reader is gone: its writer is deleted for the next
                got = eventually(
                    lambda: second.call(PingRequest()).status == 0, REPLY_TIMEOUT, "answered"
                )
                assert got
                assert metric(store, "dcps_store_clients") == count
            finally:
                second.close()
        finally:
            if first is not None:
                first.close()


class TestLifecycle:
    def test_a_store_starts_once_closes_once_and_never_restarts(
        self, tmp_path: Path, worker_id: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store")
        domain = _domain(worker_id)
        users = _transport._shared.get((os.getpid(), domain), (None, 0))[1]
        s = Store(tmp_path / "s", domain_id=domain, namespace=LIFE_NS, key=None, admin_key=None)
        assert (s.state, s.closed) == (StoreState.CREATED, False)
        try:
            assert s.start() is s
            assert s.start() is s  # serving already: nothing happens
            assert (s.state, s.closed, s.authenticated) == (StoreState.SERVING, False, False)
            assert s.metrics_url is None
        finally:
            s.close()
        # the process's DDS participant of the domain is released (deleted with its last user)
        assert _transport._shared.get((os.getpid(), domain), (None, 0))[1] == users
        s.close()
        assert (s.state, s.closed) == (StoreState.CLOSED, True)
        with pytest.raises(AlreadyClosedError) as closed:
            s.start()
        assert str(closed.value) == f"the store of {s.data_dir} is closed"
        text = [r.getMessage() for r in caplog.records]
        assert UNAUTHENTICATED_WARNING % LIFE_NS in text
        assert f"dcps store 0/1 serving {s.data_dir} (domain {domain}, namespace {LIFE_NS!r})" in (
            text
        )
        assert text.count(f"dcps store 0/1 stopped ({s.data_dir})") == 1

    def test_a_store_hears_the_others_before_it_serves(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        domain = _domain(worker_id)
        namespace = f"ns_settle_{uuid.uuid4().hex[:8]}"
        raw = RawRequester(domain, namespace, match=False)  # no store of it runs yet
        try:
            raw.announce(
                StoreAnnouncement(incarnation="older", index=0, count=1, started_ns=1, pid=1,
                                  host="elsewhere", data_dir="/elsewhere")
            )  # fmt: skip
            s = Store(tmp_path / "s", domain_id=domain, namespace=namespace, key=None)
            with pytest.raises(PreconditionNotMetError) as refused:
                s.start()  # the announcement, from another participant, comes within SETTLE
            assert str(refused.value) == (
                "store not started: share 0/1 is already served by store 0/1 "
                "(pid 1 on elsewhere, data /elsewhere)"
            )
        finally:
            raw.close()

    def test_a_store_never_started_closes_cleanly(self, tmp_path: Path) -> None:
        s = Store(tmp_path / "never", key=None, admin_key=None)
        s.close()
        assert s.closed
        with pytest.raises(AlreadyClosedError):
            s.start()

    def test_a_second_store_of_the_namespace_is_refused_and_closed(
        self, store: Store, served: tuple[Store, int, str], tmp_path: Path, client: StoreClient
    ) -> None:
        _, domain, namespace = served
        second = Store(tmp_path / "second", domain_id=domain, namespace=namespace, key=None)
        with pytest.raises(PreconditionNotMetError) as refused:
            second.start()
        assert str(refused.value).startswith("store not started: ")
        assert second.closed
        assert client.ping().incarnation == store.incarnation

    def test_a_network_configuration_reaches_the_stores_participant(
        self, served: tuple[Store, int, str], tmp_path: Path
    ) -> None:
        _, domain, _ = served  # the module's store uses the domain already, unconfigured
        s = Store(
            tmp_path / "net",
            domain_id=domain,
            namespace=NET_NS,
            key=None,
            network=NetworkConfig(interfaces=["lo"], participant_name="net"),
        )
        with pytest.raises(PreconditionNotMetError, match="network configuration cannot change"):
            s.start()
        assert s.closed

    def test_metrics_are_served_and_a_taken_port_is_refused(
        self, tmp_path: Path, worker_id: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        caplog.set_level(logging.INFO, logger="dcps.store")
        domain = _domain(worker_id)
        with Store(
            tmp_path / "a", domain_id=domain, namespace=MA_NS, key=None, metrics_port=0
        ) as a:
            url = a.metrics_url
            assert url is not None
            assert f"dcps store 0/1: metrics at {url}" in caplog.messages
            assert url.startswith("http://127.0.0.1:")
            port = int(url.rsplit(":", 1)[1].split("/")[0])
            b = Store(
                tmp_path / "b", domain_id=domain, namespace=MB_NS, key=None, metrics_port=port
            )
            with pytest.raises(BadParameterError) as taken:
                b.start()
            assert str(taken.value).startswith(
                f"cannot serve the store's metrics on 127.0.0.1:{port}: "
            )
            assert b.closed
        assert a.metrics_url is None

    def test_an_older_overlapping_store_stops_a_running_one(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        domain = _domain(worker_id)
        with Store(tmp_path / "s", domain_id=domain, namespace=OLD_NS, key=None) as s:
            raw = RawRequester(domain, OLD_NS)
            try:
                synced(raw)
                older = StoreAnnouncement(
                    incarnation="older",
                    index=0,
                    count=1,
                    started_ns=1,
                    pid=1,
                    host="elsewhere",
                    data_dir="/elsewhere",
                )
                raw.announce(older)
                eventually(lambda: s.failure is not None, REPLY_TIMEOUT, "the store stopped")
                assert s.failure is not None
                assert s.failure.startswith("store stopped: ")
                rid = raw.send(PingRequest())
                with pytest.raises(AssertionError, match="did not happen"):
                    raw.answer(rid, timeout=0.5)  # nobody serves the share any more
            finally:
                raw.close()


def _domain(worker_id: str) -> int:
    from tests.support.embedded_store import worker_domain

    return worker_domain(worker_id)


class TestRunStore:
    def test_the_ready_line_leaves_at_once_through_a_pipe(
        self, tmp_path: Path, worker_id: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A supervisor reads ``dcps store ready`` from a pipe while the store serves."""
        read_end, write_end = os.pipe()
        pipe = io.TextIOWrapper(io.BufferedWriter(io.FileIO(write_end, "w")))
        monkeypatch.setattr(sys, "stdout", pipe)
        stop = threading.Event()
        thread = threading.Thread(
            target=run_store,
            args=(tmp_path / "p",),
            kwargs={"domain_id": _domain(worker_id), "namespace": PIPE_NS, "stop": stop,
                    "key": None, "admin_key": None, "sync": SyncMode.NORMAL},
        )  # fmt: skip
        thread.start()
        try:
            seen = b""
            deadline = time.monotonic() + 10.0
            while b"\n" not in seen and time.monotonic() < deadline:
                if select.select([read_end], [], [], 0.1)[0]:
                    seen += os.read(read_end, 4096)
            assert seen.startswith(b"dcps store ready: ")
            assert thread.is_alive()  # read while the store serves, not at its exit
        finally:
            stop.set()
            thread.join(10.0)
            monkeypatch.undo()
            pipe.close()
            os.close(read_end)

    def test_run_store_says_ready_and_stops_when_told(
        self, tmp_path: Path, worker_id: str, capsys: pytest.CaptureFixture[str]
    ) -> None:
        stop = threading.Event()
        ready: list[Store] = []
        thread = threading.Thread(
            target=run_store,
            args=(tmp_path / "r",),
            kwargs={
                "domain_id": _domain(worker_id),
                "namespace": RUN_NS,
                "stop": stop,
                "on_ready": ready.append,
                "sync": SyncMode.NORMAL,
                "key": None,
                "admin_key": None,
            },
        )
        thread.start()
        try:
            eventually(lambda: ready, 10.0, "the store ready")
            (s,) = ready
            assert s.state is StoreState.SERVING
            assert (s.domain_id, s.namespace) == (_domain(worker_id), RUN_NS)
        finally:
            stop.set()
            thread.join(10.0)
        assert not thread.is_alive()
        assert s.closed
        out = capsys.readouterr().out
        assert out == (
            f"dcps store ready: {s.data_dir} domain={_domain(worker_id)} namespace={RUN_NS} "
            "share=0/1\n"
        )

    def test_run_store_stops_on_sigterm_and_restores_the_handlers(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        ready: list[Store] = []

        def ours(*_: Any) -> None:  # the process's own handler: run_store replaces it
            raise AssertionError("SIGTERM reached the process's handler, not run_store's")

        previous = signal.signal(signal.SIGTERM, ours)
        try:
            before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)

            def on_ready(s: Store) -> None:
                ready.append(s)
                signal.raise_signal(signal.SIGTERM)

            started = time.monotonic()
            run_store(
                tmp_path / "r",
                domain_id=_domain(worker_id),
                namespace=SIG_NS,
                on_ready=on_ready,
                key=None,
                admin_key=None,
                metrics_port=0,
            )
            assert time.monotonic() - started < 10.0
            assert ready[0].closed
            assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
        finally:
            signal.signal(signal.SIGTERM, previous)

    def test_run_store_raises_when_an_older_store_stops_it(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        domain = _domain(worker_id)
        raws: list[RawRequester] = []

        def on_ready(s: Store) -> None:
            raw = RawRequester(domain, STOPPED_NS)
            raws.append(raw)
            raw.announce(
                StoreAnnouncement(
                    incarnation="older",
                    index=0,
                    count=1,
                    started_ns=1,
                    pid=1,
                    host="elsewhere",
                    data_dir="/elsewhere",
                )
            )

        try:
            with pytest.raises(PreconditionNotMetError) as stopped:
                run_store(
                    tmp_path / "r",
                    domain_id=domain,
                    namespace=STOPPED_NS,
                    stop=threading.Event(),
                    on_ready=on_ready,
                    key=None,
                    admin_key=None,
                )
            assert str(stopped.value).startswith("store stopped: ")
        finally:
            for raw in raws:
                raw.close()


class TestIdleClients:
    def test_the_writer_of_a_client_gone_idle_is_deleted(
        self, tmp_path: Path, worker_id: str, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:  # fmt: skip
        # a client counts as idle after a second without requests (instead of a minute)
        monkeypatch.setattr(_service, "REPLY_WRITER_IDLE", 1.0)
        monkeypatch.setattr(_replies, "REPLY_WRITER_IDLE", 1.0)
        caplog.set_level(logging.INFO, logger="dcps.store")
        domain = _domain(worker_id)
        with Store(tmp_path / "s", domain_id=domain, namespace=IDLE_NS, key=None) as s:
            gone = RawRequester(domain, IDLE_NS)
            stays = RawRequester(domain, IDLE_NS)
            try:
                synced(gone)
                synced(stays)
                assert metric(s, "dcps_store_clients") == 2
                gone.close()
                eventually(
                    lambda: synced(stays) is None and metric(s, "dcps_store_clients") == 1,
                    2 * REPLY_TIMEOUT,
                    "the gone client's writer deleted",
                )
                text = [r.getMessage() for r in caplog.records]
                assert f"dcps store: client {gone.client} connected" in text
                assert f"dcps store: client {gone.client} disconnected" in text
                assert f"dcps store: client {stays.client} disconnected" not in text
            finally:
                stays.close()
                gone.close()

    def test_a_client_not_matched_yet_keeps_its_writer_through_the_periodic_sweep(
        self, store: Store, raw: RawRequester, caplog: pytest.LogCaptureFixture
    ) -> None:
        """The minute's sweep deletes only idle writers without a reader: a client whose
        reader has not matched its new reply writer yet (it just sent its first request)
        must not lose the writer, and with it the reply, to a sweep that falls then."""
        caplog.set_level(logging.INFO, logger="dcps.store")
        early = f"early{uuid.uuid4().hex[:8]}"
        synced(raw)
        before = metric(store, "dcps_store_clients")
        raw.send(PingRequest(), client=early)  # no reader in its reply partition
        eventually(
            lambda: metric(store, "dcps_store_clients") == before + 1,
            REPLY_TIMEOUT,
            "the early client's reply writer created",
        )
        store._next_reply_sweep = 0.0  # the next request's lookup sweeps (as once a minute)
        synced(raw)
        assert store._next_reply_sweep > 0.0  # the sweep ran
        assert metric(store, "dcps_store_clients") == before + 1
        text = [r.getMessage() for r in caplog.records]
        assert f"dcps store: client {early} disconnected" not in text

    def test_refusals_keep_a_bounded_number_of_writers(
        self,
        store: Store,
        raw: RawRequester,
        monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        caplog.set_level(logging.WARNING, logger="dcps.store")
        synced(raw)
        # one: the live clients of the file (their readers match) are never swept for others
        monkeypatch.setattr(_service, "MAX_CLIENTS", 1)
        before = store.dropped_requests
        for i in range(_service._REFUSAL_WRITERS + 3):
            raw.send(PingRequest(), client=f"refused{i}")
        eventually(
            lambda: store.dropped_requests == before + _service._REFUSAL_WRITERS + 3,
            REPLY_TIMEOUT,
            "every client refused",
        )
        assert len(store._refusals) == _service._REFUSAL_WRITERS  # the oldest are deleted
        counts = range(before + 1, before + _service._REFUSAL_WRITERS + 4)
        logged = [c for c in counts if c & (c - 1) == 0]  # the 1st, 2nd, 4th, 8th...
        warned = [r.getMessage() for r in caplog.records if "request dropped" in r.getMessage()]
        assert [w.split(" so far")[0] for w in warned] == [
            f"dcps store: request dropped ({c}" for c in logged
        ]
        for text in warned:
            assert text.endswith(" refused: 1 clients (MAX_CLIENTS) are served")
        monkeypatch.undo()
        synced(raw)


class TestDurability:
    def test_a_store_runs_the_durability_service_it_is_given(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        domain = _domain(worker_id)
        with Store(
            tmp_path / "s",
            domain_id=domain,
            namespace=DUR_NS,
            key=None,
            durability=("a*", "b"),
            durability_partitions=("p",),
        ) as s:
            service = s.durability
            assert service is not None
            assert (service.domain_id, service.namespace) == (domain, DUR_NS)
            assert (service.topics, service.partitions) == (("a*", "b"), ("p",))
            assert service._db is not None  # PERSISTENT data in the store's own file
            assert not service._sealer.enabled  # the store has no key
        assert service._stopping  # closed with the store


class TestRunStoreOptions:
    def test_run_store_has_the_stores_defaults(self) -> None:
        ours = inspect.signature(run_store).parameters
        theirs = inspect.signature(Store).parameters
        shared = [name for name in ours if name in theirs]
        assert len(shared) == 15  # all but network and topics
        for name in shared:
            assert ours[name].default == theirs[name].default, name

    def test_run_store_hands_every_option_to_the_store_and_leaves_signals_alone(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        keys = (
            str(write_key_file(tmp_path / "ns.key").source),
            str(write_key_file(tmp_path / "admin.key").source),
        )
        before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
        stop = threading.Event()
        seen: dict[str, Any] = {}

        def on_ready(s: Store) -> None:
            assert s.durability is not None
            seen.update(
                signals=(signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)),
                share=str(s.share),
                channels=s.default_channel_count,
                full_sync=s.log._full_sync,
                fetch_threads=s._fetchers._count,
                authenticated=s.authenticated,
                admin=s._sealer.auth is not None and s._sealer.auth._admin_key is not None,
                allow=s.allow_client_topics,
                url=s.metrics_url,
                durability=(s.durability.topics, s.durability.partitions),
            )
            stop.set()

        run_store(
            tmp_path / "r",
            domain_id=_domain(worker_id),
            namespace=OPT_NS,
            sync=SyncMode.NORMAL,
            partition_count=10,
            stop=stop,
            on_ready=on_ready,
            share="1/2",
            fetch_threads=1,
            key=keys[0],
            admin_key=keys[1],
            verify=False,
            allow_client_topics=False,
            metrics_port=0,
            metrics_host="127.0.0.2",
            durability=("x*",),
            durability_partitions=("p",),
        )
        # a stop event: the caller owns the signals (the handlers are never replaced)
        assert seen.pop("signals") == before
        url = seen.pop("url")
        assert url.startswith("http://127.0.0.2:")
        assert seen == {
            "share": "1/2",
            "channels": 5,  # the next prime above the square root of 10
            "full_sync": False,
            "fetch_threads": 1,
            "authenticated": True,
            "admin": True,
            "allow": False,
            "durability": (("x*",), ("p",)),
        }


class _BuiltError(Exception):
    """Raised by a store that ``run_store`` built, instead of starting it."""

    def __init__(self, store: Store) -> None:
        self.store = store


class _NotStarted(Store):
    """A real store (its log opened) that refuses to start: what ``run_store`` built."""

    def start(self) -> Store:
        raise _BuiltError(self)


class TestRunStoreDefaults:
    def built(self, monkeypatch: pytest.MonkeyPatch, data: Path) -> Store:
        monkeypatch.setattr(_service, "Store", _NotStarted)
        with pytest.raises(_BuiltError) as built:
            run_store(data, stop=threading.Event())
        store = built.value.store
        store.log.close()
        return store

    def test_without_options_run_store_builds_the_default_store(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        monkeypatch.delenv(ADMIN_KEY_FILE_ENV, raising=False)
        s = self.built(monkeypatch, tmp_path / "d")
        assert (s.domain_id, s.namespace, str(s.share)) == (0, "dcps", "0/1")
        assert s.default_channel_count == 17  # for 257 partitions
        assert s.log._full_sync
        assert s._fetchers._count == DEFAULT_FETCH_THREADS
        assert (s.authenticated, s.allow_client_topics) == (False, True)
        assert s._metrics_at == ("127.0.0.1", None)
        assert (s._durability_topics, s._durability_partitions) == (None, ("*",))

    def test_without_key_options_run_store_reads_the_key_files_named_by_the_environment(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv(KEY_FILE_ENV, str(write_key_file(tmp_path / "ns.key").source))
        monkeypatch.setenv(ADMIN_KEY_FILE_ENV, str(write_key_file(tmp_path / "a.key").source))
        s = self.built(monkeypatch, tmp_path / "d")
        assert s.authenticated
        assert s._sealer.auth is not None
        assert s._sealer.auth._admin_key is not None


class TestConfiguredTopics:
    def test_a_configured_topic_records_its_type(self, tmp_path: Path) -> None:
        typed = ChannelledTopic("typed", Msg, channel_count=3, retain_consumed=True)
        plain = _Spec("plain", 2, None)
        s = Store(tmp_path / "s", topics=[typed, plain], key=None, admin_key=None)
        try:
            info = s.log.topic("typed")
            identity = type_identity(Msg)
            assert (info.channel_count, info.retain_consumed) == (3, True)
            assert (info.type_name, info.type_identity) == (identity.rpartition("@")[0], identity)
            other = s.log.topic("plain")
            assert (other.channel_count, other.type_name, other.type_identity) == (2, "", "")
        finally:
            s.log.close()


class _Spec:
    """A topic spec without a type (``TopicSpec`` needs none)."""

    def __init__(self, name: str, channel_count: int | None, retain: bool | None) -> None:
        self.name, self.channel_count, self.retain_consumed = name, channel_count, retain


class TestVerify:
    def test_verify_false_opens_a_file_the_full_check_would_refuse(self, tmp_path: Path) -> None:
        path = tmp_path / STORE_FILE
        make_store(path, batches=40)
        scribble(path, batch_page(path))  # element data only: the tables still read
        with pytest.raises(BadParameterError, match=r"damaged|corrupt"):
            Store(tmp_path, key=None, admin_key=None)
        s = Store(tmp_path, key=None, admin_key=None, verify=False)
        s.log.close()
