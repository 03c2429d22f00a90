"""`dcps durables|queues|maps` on a real store process, run as `python -m dcps ...` like a user
runs them: counts equal a known workload, deletes are refused while active unless forced and
need the admin key, a durable reset takes effect for the next subscriber."""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps import AlreadyClosedError, BadParameterError, DcpsError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import (
    DurableKind,
    DurableSubscriber,
    KeyValueMap,
    QueuePublisher,
    QueueSubscriber,
)
from dcps.wire._admin_objects import (
    DeleteDurableRequest,
    DeleteMapRequest,
    DeleteQueueRequest,
    DescribeDurablesRequest,
    DescribeMapsRequest,
    DescribeQueuesRequest,
    ResetDurableRequest,
)
from dcps.wire._auth_keys import write_key_file
from dcps.wire._codes import Op, SeekMode
from dcps.wire._messages import Request
from dcps.wire._requests import decode_request
from tests.support.cli import cli_env, run_dcps
from tests.support.peers.channels_types import Msg
from tests.support.peers.maps_queues_peer import Counter, Task
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One store process for the module's tests (each test uses names of its own)."""
    base = int(os.environ.get("DCPS_TEST_DOMAIN_BASE", "1"))
    domain = base + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))
    namespace = f"adm_{uuid.uuid4().hex[:8]}"
    store = StoreProcess(tmp_path_factory.mktemp("admin") / "store", domain, namespace)
    try:
        yield {"domain_id": domain, "namespace": namespace}
    finally:
        store.kill()


@pytest.fixture
def kw(where: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments reaching the module's store."""
    return dict(where)


class Admin:
    """Runs `python -m dcps ARGS --domain D --namespace NS [--json]`."""

    def __init__(self, domain: int, namespace: str, *extra: str) -> None:
        self.where = ["--domain", str(domain), "--namespace", namespace, *extra]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_dcps(*args, *self.where, env=cli_env(COLUMNS="200"))  # tables unwrapped

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def refused(self, *args: str) -> str:
        """Run a command that must fail with one error line (no traceback); its stderr."""
        done = self.run(*args)
        assert done.returncode == 1, (done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        return done.stderr


@pytest.fixture
def admin(where: dict[str, Any]) -> Admin:
    return Admin(where["domain_id"], where["namespace"])


@pytest.fixture
def topic() -> ChannelledTopic:
    """A one-channel topic of its own that keeps consumed elements (so resets can go back)."""
    return ChannelledTopic(f"t_{uuid.uuid4().hex[:10]}", Msg, channel_count=1, retain_consumed=True)


@pytest.fixture
def dname() -> str:
    """A durable name no other test uses (durable names are unique in a store)."""
    return f"d_{uuid.uuid4().hex[:10]}"


def publish(topic: ChannelledTopic, count: int, kw: dict[str, Any]) -> None:
    with ChannelPublisher(topic, **kw) as pub:
        futures = [pub.publish(Msg(0, i)) for i in range(count)]
        pub.flush()
        assert all(f.result(TIMEOUT) is not None for f in futures)


def receive_ack(sub: DurableSubscriber[Msg], received: int, acked: int) -> list[int]:
    """Receive ``received`` elements and acknowledge the first ``acked``; their seqs."""
    got = [sub.receive(TIMEOUT) for _ in range(received)]
    sub.ack(got[:acked])
    return [e.value.seq for e in got]


def receive_all(sub: DurableSubscriber[Msg]) -> None:
    """Receive until the subscriber raises (it was closed), at most 20 elements."""
    for _ in range(20):
        sub.receive(TIMEOUT)


class TestDurables:
    def test_list_and_describe_count_a_known_workload(
        self, admin: Admin, topic: ChannelledTopic, kw: dict[str, Any], dname: str
    ) -> None:
        """10 published, 5 received, 3 acknowledged: 7 outstanding while subscribed, 7 pending
        once closed; describe shows the subscriber, the filter and the position."""
        sub: DurableSubscriber[Msg] = DurableSubscriber(
            topic, dname, window=5, filter="seq >= 0", **kw
        )
        try:
            publish(topic, 10, kw)
            assert receive_ack(sub, 5, 3) == [0, 1, 2, 3, 4]
            (listed,) = admin.json("durables", "list", "--topic", topic.name)
            assert (listed["name"], listed["topic"], listed["kind"]) == (
                dname,
                topic.name,
                "shared",
            )
            assert listed["persistent"] is True
            assert listed["active"] is True
            assert listed["ttl_ms"] == -1
            assert listed["outstanding"] == 7
            assert listed["pending"] + listed["unacked"] == 7
            assert 2 <= listed["unacked"] <= 5  # 3, 4 and what the window prefetched
            described = admin.json("durables", "describe", topic.name, dname)
            (subscriber,) = described["subscribers"]
            assert subscriber["name"] == sub.subscriber_id
            assert subscriber["held"] == described["unacked"]
            assert subscriber["window"] == 5
            assert described["filter"] == "seq >= 0"
            (channel,) = described["channels"]
            assert channel["position"] == 3  # 0, 1, 2 acknowledged
            assert (channel["head"], channel["tail"]) == (0, 9)
        finally:
            sub.close()
        (closed,) = admin.json("durables", "list", "--topic", topic.name)
        assert (closed["active"], closed["pending"], closed["unacked"]) == (False, 7, 0)
        table = admin.run("durables", "list", "--topic", topic.name)
        assert table.returncode == 0, table.stderr
        assert "shared" in table.stdout
        assert topic.name in table.stdout

    def test_unknown_durable_is_an_error_naming_it(
        self, admin: Admin, topic: ChannelledTopic, kw: dict[str, Any], dname: str
    ) -> None:
        """Describing a durable that does not exist: exit 1, one line naming it."""
        publish(topic, 1, kw)
        err = admin.refused("durables", "describe", topic.name, "nope")
        assert "'nope'" in err
        assert topic.name in err

    def test_delete_is_refused_while_subscribed_unless_forced(
        self, admin: Admin, topic: ChannelledTopic, kw: dict[str, Any], dname: str
    ) -> None:
        """An active durable is not deleted (it stays, with its count); --force deletes it,
        discarding the 7 pending, and its subscriber learns it was closed."""
        sub: DurableSubscriber[Msg] = DurableSubscriber(topic, dname, window=5, **kw)
        try:
            publish(topic, 10, kw)
            receive_ack(sub, 3, 3)
            err = admin.refused("durables", "delete", topic.name, dname)
            assert "active subscriber" in err
            assert "--force" in err
            assert admin.json("durables", "describe", topic.name, dname)["outstanding"] == 7
            deleted = admin.json("durables", "delete", topic.name, dname, "--force")
            assert deleted == {
                "topic": topic.name, "durable": dname, "existed": True, "subscribers": 1,
                "discarded": 7,
            }  # fmt: skip
            assert admin.json("durables", "list", "--topic", topic.name) == []
            with pytest.raises(DcpsError, match=r"administrator|closed|not a subscriber"):
                receive_all(sub)
        finally:
            sub.close()
        err = admin.refused("durables", "delete", topic.name, dname)
        assert f"has no durable {dname!r}" in err

    def test_reset_moves_what_the_next_subscriber_gets(
        self, admin: Admin, topic: ChannelledTopic, kw: dict[str, Any], dname: str
    ) -> None:
        """Reset to an offset, to the tail and to the head: counts follow, and a subscriber
        that comes afterwards receives from the new position."""
        with DurableSubscriber(topic, dname, window=5, **kw) as sub:
            publish(topic, 10, kw)
            receive_ack(sub, 3, 3)
            admin.refused("durables", "reset", topic.name, dname, "--to-tail")
        done = admin.json("durables", "reset", topic.name, dname, "--to-offset", "8")
        assert done["next_offsets"] == {"0": 8}
        assert admin.json("durables", "describe", topic.name, dname)["pending"] == 2
        with DurableSubscriber(topic, dname, window=5, **kw) as again:
            assert [again.receive(TIMEOUT).value.seq for _ in range(2)] == [8, 9]
        admin.json("durables", "reset", topic.name, dname, "--to-tail")
        assert admin.json("durables", "describe", topic.name, dname)["pending"] == 0
        admin.json("durables", "reset", topic.name, dname, "--to-head")
        assert admin.json("durables", "describe", topic.name, dname)["pending"] == 10

    def test_a_reset_outlives_a_store_restart(
        self, tmp_path: Path, where: dict[str, Any], topic: ChannelledTopic, dname: str
    ) -> None:
        """A persistent durable reset to offset 8, then the store killed (SIGKILL) and started
        again: it still has 2 pending, and its next subscriber receives 8 and 9."""
        namespace = f"admr_{uuid.uuid4().hex[:8]}"
        store = StoreProcess(tmp_path / "store", where["domain_id"], namespace)
        try:
            kw = {"domain_id": where["domain_id"], "namespace": namespace}
            admin = Admin(where["domain_id"], namespace)
            with DurableSubscriber(topic, dname, window=5, **kw) as sub:
                publish(topic, 10, kw)
                receive_ack(sub, 3, 3)
            admin.json("durables", "reset", topic.name, dname, "--to-offset", "8")
            store.restart()
            described = admin.json("durables", "describe", topic.name, dname)
            assert (described["pending"], described["outstanding"]) == (2, 2)
            with DurableSubscriber(topic, dname, window=5, **kw) as again:
                assert [again.receive(TIMEOUT).value.seq for _ in range(2)] == [8, 9]
        finally:
            store.kill()

    def test_a_last_value_durable_is_listed_but_not_reset(
        self, admin: Admin, topic: ChannelledTopic, kw: dict[str, Any], dname: str
    ) -> None:
        """A last-value durable shows its kind with no counts (-1) and refuses a reset."""
        DurableSubscriber(topic, dname, kind=DurableKind.LAST_VALUE, **kw).close()
        (listed,) = admin.json("durables", "list", "--topic", topic.name)
        assert (listed["kind"], listed["outstanding"], listed["pending"]) == ("last_value", -1, -1)
        assert listed["channels"] == []
        err = admin.refused("durables", "reset", topic.name, dname, "--to-head")
        assert "last-value durable" in err


class TestQueues:
    def test_counts_and_delete(self, admin: Admin, kw: dict[str, Any]) -> None:
        """10 published, 5 received, 3 acknowledged: 7 stored, 2 out, 5 pending, 1 consumer;
        delete is refused while it has the consumer, --force discards the 7 and the consumer
        is told the queue is gone."""
        name = f"q_{uuid.uuid4().hex[:10]}"
        with QueuePublisher(name, Task, **kw) as pub:
            pub.publish_many([Task(i, f"t{i}") for i in range(10)])
        sub: QueueSubscriber[Task] = QueueSubscriber(name, Task, consumer="c1", **kw)
        try:
            got: list[Any] = []
            while len(got) < 5:
                got += sub.receive(5 - len(got), timeout=TIMEOUT)
            sub.ack(got[:3])
            (listed,) = [q for q in admin.json("queues", "list") if q["name"] == name]
            assert (listed["stored"], listed["unacked"], listed["pending"]) == (7, 2, 5)
            assert listed["next_seq"] == 11
            described = admin.json("queues", "describe", name)
            assert [(c["name"], c["held"]) for c in described["consumers"]] == [("c1", 2)]
            assert described["type_identity"]
            err = admin.refused("queues", "delete", name)
            assert "active consumer" in err
            assert "c1" in err
            assert admin.json("queues", "describe", name)["stored"] == 7
            deleted = admin.json("queues", "delete", name, "--force")
            assert deleted == {"queue": name, "existed": True, "discarded": 7}
            with pytest.raises(AlreadyClosedError, match="deleted by an administrator"):
                sub.receive(1, timeout=TIMEOUT)
        finally:
            sub.close()
        assert name not in [q["name"] for q in admin.json("queues", "list")]
        assert "no queue" in admin.refused("queues", "describe", name)
        assert "no queue" in admin.refused("queues", "delete", name)


class TestMaps:
    def test_counts_and_delete(self, admin: Admin, kw: dict[str, Any]) -> None:
        """3 keys put, 1 deleted: 2 keys at revision 4; delete drops every key and a watcher
        of the map sees it empty; a second delete finds nothing."""
        name = f"m_{uuid.uuid4().hex[:10]}"
        with KeyValueMap(name, Counter, **kw) as m:
            for i, key in enumerate(("a", "b", "c")):
                m.put(key, Counter(i, "w"))
            assert m.delete("b")
            (listed,) = [x for x in admin.json("maps", "list") if x["name"] == name]
            assert (listed["keys"], listed["revision"]) == (2, 4)
            assert listed["type_name"] == "kvtest::Counter"
            assert listed["bytes"] > 0
            described = admin.json("maps", "describe", name)
            assert described["history"] == 4
            assert described["dropped_revision"] == 0
            assert admin.json("maps", "delete", name) == {"map": name, "existed": True}
            eventually(lambda: m.get("a") is None, timeout=TIMEOUT)
        after = admin.json("maps", "describe", name)
        assert (after["keys"], after["dropped_revision"]) == (0, 5)
        assert "no map" in admin.refused("maps", "delete", name)
        assert "no map 'nothere'" in admin.refused("maps", "describe", "nothere")


class TestAuthentication:
    def test_deletes_and_resets_need_the_admin_key(
        self, tmp_path: Path, where: dict[str, Any], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """On a keyed store, listing needs the namespace key only; durables delete/reset,
        queues delete and maps delete are refused without the admin key (naming it) and
        change nothing; with --admin-key-file they work."""
        key = write_key_file(tmp_path / "ns.key").source
        admin_key = write_key_file(tmp_path / "admin.key").source
        namespace = f"admk_{uuid.uuid4().hex[:8]}"
        domain = where["domain_id"]
        store = StoreProcess(
            tmp_path / "store", domain, namespace,
            "--key-file", str(key), "--admin-key-file", str(admin_key),
        )  # fmt: skip
        monkeypatch.setenv("DCPS_STORE_KEY_FILE", str(key))  # clients and commands hold it
        try:
            kw = {"domain_id": domain, "namespace": namespace}
            topic = ChannelledTopic("t_auth", Msg, channel_count=1)
            DurableSubscriber(topic, "d", **kw).close()
            with QueuePublisher("q_auth", Task, **kw) as pub:
                pub.publish(Task(1, "x"))
            with KeyValueMap("m_auth", Counter, **kw) as m:
                m.put("k", Counter(1, "x"))
            admin = Admin(domain, namespace)
            assert [d["name"] for d in admin.json("durables", "list")] == ["d"]
            changes = (
                ["durables", "reset", "t_auth", "d", "--to-tail"],
                ["durables", "delete", "t_auth", "d"],
                ["queues", "delete", "q_auth"],
                ["maps", "delete", "m_auth"],
            )
            for change in changes:
                assert "admin key" in admin.refused(*change), change
            assert admin.json("queues", "describe", "q_auth")["stored"] == 1
            assert admin.json("maps", "describe", "m_auth")["keys"] == 1
            keyed = Admin(domain, namespace, "--admin-key-file", str(admin_key))
            for change in changes:
                assert keyed.json(*change), change
            assert keyed.json("durables", "list") == []
            assert keyed.json("maps", "describe", "m_auth")["keys"] == 0
        finally:
            store.kill()


class TestRequests:
    """Every admin request is checked whole when the store decodes it."""

    @pytest.mark.parametrize(
        ("request_", "message"),
        [
            (
                Request(client="c", request_id=1, op=Op.DESCRIBE_DURABLES, group="d"),
                "name its topic",
            ),
            (Request(client="c", request_id=1, op=Op.DELETE_DURABLE, topic="t"), "durable name"),
            (
                Request(
                    client="c", request_id=1, op=Op.DELETE_DURABLE, topic="t", group="d", flag=2
                ),
                "force",
            ),
            (
                Request(
                    client="c", request_id=1, op=Op.RESET_DURABLE, topic="t", group="d", number=9
                ),
                "reset mode",
            ),
            (
                Request(
                    client="c",
                    request_id=1,
                    op=Op.RESET_DURABLE,
                    topic="t",
                    group="d",
                    number=int(SeekMode.POSITION),
                    channels=[0, 1],
                    offsets=[5],
                ),
                "RESET_DURABLE to POSITION of 2 channel",
            ),
            (Request(client="c", request_id=1, op=Op.DELETE_QUEUE), "queue name"),
            (Request(client="c", request_id=1, op=Op.DELETE_QUEUE, topic="q", flag=-1), "force"),
            (Request(client="c", request_id=1, op=Op.DESCRIBE_QUEUES, topic="q*"), "'*'"),
            (Request(client="c", request_id=1, op=Op.DELETE_MAP), "map name"),
            (Request(client="c", request_id=1, op=Op.DESCRIBE_MAPS, topic="m" * 300), "MAX_NAME"),
        ],
    )
    def test_malformed_requests_are_refused_naming_the_field(
        self, request_: Request, message: str
    ) -> None:
        with pytest.raises(BadParameterError, match=re.escape(message)):
            decode_request(request_)

    def test_requests_survive_the_wire(self) -> None:
        sent = [
            DescribeDurablesRequest("t", "d"),
            DeleteDurableRequest("t", "d", force=True),
            ResetDurableRequest("t", "d", SeekMode.POSITION, (0, 2), (5, 7), True),
            DescribeQueuesRequest("q"),
            DeleteQueueRequest("q", force=True),
            DescribeMapsRequest(),
            DeleteMapRequest("m"),
        ]
        assert [decode_request(r.to_wire("c", 1)) for r in sent] == sent
