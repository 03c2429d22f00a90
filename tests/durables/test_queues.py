"""Queues in the store (FTL point-to-point destinations), on real store and subscriber processes.

Elements are stored without subscribers, divided among subscribers,
acknowledged or rolled back, redelivered when a subscriber leaves or dies,
and deleted only by an administrator. Kill -9 of the store loses nothing
unacknowledged and redelivers nothing acknowledged.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    IllegalOperationError,
    PreconditionNotMetError,
)
from dcps.durables import AckMode
from dcps.durables._queue import (
    QueueElement,
    QueuePublisher,
    QueueSubscriber,
    delete_queue,
)
from dcps.wire._auth_keys import write_key_file
from tests.support.peers.maps_queues_peer import Counter, Task
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One store process for the module's tests (each test uses queues of its own)."""
    base = int(os.environ.get("DCPS_TEST_DOMAIN_BASE", "1"))
    domain = base + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))
    namespace = f"queues_{uuid.uuid4().hex[:8]}"
    store = StoreProcess(tmp_path_factory.mktemp("queues") / "store", domain, namespace)
    try:
        yield {"domain_id": domain, "namespace": namespace, "store": store}
    finally:
        store.kill()


@pytest.fixture
def kw(where: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments reaching the module's store."""
    return {"domain_id": where["domain_id"], "namespace": where["namespace"]}


@pytest.fixture
def queue() -> str:
    """A queue name no other test uses."""
    return f"q_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def publisher(queue: str, kw: dict[str, Any]) -> Iterator[QueuePublisher[Task]]:
    """A confirming publisher of the test's queue."""
    with QueuePublisher(queue, Task, **kw) as p:
        yield p


def tasks(n: int, start: int = 0) -> list[Task]:
    """``n`` distinct tasks."""
    return [Task(start + i, f"t{start + i}") for i in range(n)]


def drain(sub: QueueSubscriber[Task], count: int) -> list[QueueElement[Task]]:
    """Receive exactly ``count`` elements (each receive waits for the next ones)."""
    got: list[QueueElement[Task]] = []
    while len(got) < count:
        batch = sub.receive(count - len(got), timeout=TIMEOUT)
        assert batch, f"only {len(got)} of {count} elements came"
        got += batch
    return got


class TestStoring:
    def test_elements_are_stored_without_any_subscriber(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """Elements published before any subscriber existed all reach the first one, in order."""
        seqs = publisher.publish_many(tasks(20))
        assert seqs == list(range(1, 21))
        assert publisher.state().stored == 20
        with QueueSubscriber(queue, Task, **kw) as sub:
            got = drain(sub, 20)
        assert [e.value for e in got] == tasks(20)
        assert [e.seq for e in got] == seqs
        assert all(e.delivery_count == 1 for e in got)

    def test_confirm_mode_returns_the_sequence_number(
        self, publisher: QueuePublisher[Task]
    ) -> None:
        """A confirmed publish returns once stored, with the element's sequence number."""
        first = publisher.publish(Task(1, "a"))
        assert publisher.publish(Task(2, "b")) == first + 1
        assert publisher.state().stored == 2

    def test_no_confirm_mode_returns_at_once_and_stores(
        self, queue: str, kw: dict[str, Any]
    ) -> None:
        """A no-confirm publish returns None at once; after flush the elements are stored."""
        with QueuePublisher(queue, Task, confirm=False, **kw) as p:
            assert p.publish(Task(1, "fire")) is None
            assert p.publish_many(tasks(9, 2)) is None
            p.flush(TIMEOUT)
            assert p.state().stored == 10
            assert p.publish(Task(99, "sure"), confirm=True) == 11

    def test_wrong_element_type_is_refused(self, publisher: QueuePublisher[Task]) -> None:
        """Publishing a value of another type raises BadParameterError and stores nothing."""
        with pytest.raises(BadParameterError, match="Task"):
            publisher.publish(Counter(1, "x"))  # type: ignore[arg-type]
        assert publisher.state().stored == 0

    def test_another_type_cannot_use_the_queue(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """A publisher or subscriber of another type is refused, naming both types."""
        publisher.publish(Task(1, "x"))
        with (
            QueuePublisher(queue, Counter, **kw) as other,
            pytest.raises(PreconditionNotMetError, match="kvtest::Task"),
        ):
            other.publish(Counter(1, "x"))
        with pytest.raises(PreconditionNotMetError, match="kvtest::Counter"):
            QueueSubscriber(queue, Counter, **kw)


class TestDelivery:
    def test_elements_are_divided_among_subscribers(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """Each element goes to exactly one of several subscribers."""
        publisher.publish_many(tasks(40))
        subs = [QueueSubscriber(queue, Task, **kw) for _ in range(4)]
        try:
            got = [sub.receive(10, timeout=TIMEOUT) for sub in subs]
            seen = [e.seq for batch in got for e in batch]
            assert sorted(seen) == list(range(1, 41))
            assert all(batch for batch in got)
            assert publisher.state().in_flight == 40
        finally:
            for sub in subs:
                sub.close()

    def test_ack_deletes_for_good(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """Acknowledged elements leave the queue and are never delivered again."""
        publisher.publish_many(tasks(10))
        with QueueSubscriber(queue, Task, **kw) as sub:
            got = drain(sub, 10)
            sub.ack(got[:6])
            assert sub.state().stored == 4
            sub.rollback(got[6:])
            again = drain(sub, 4)
        assert [e.seq for e in again] == [7, 8, 9, 10]

    def test_rollback_redelivers_before_newer_with_a_count(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """A rolled-back element comes back (to any subscriber) before newer ones, counted."""
        publisher.publish_many(tasks(3))
        with QueueSubscriber(queue, Task, **kw) as a, QueueSubscriber(queue, Task, **kw) as b:
            first = a.receive(1, timeout=TIMEOUT)
            assert [e.seq for e in first] == [1]
            a.rollback(first)
            publisher.publish(Task(100, "newer"))
            again = b.receive(1, timeout=TIMEOUT)
        assert [(e.seq, e.delivery_count, e.redelivered) for e in again] == [(1, 2, True)]

    def test_receive_waits_for_a_publish(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """An empty queue: receive times out empty; a publish wakes a waiting receive."""
        with QueueSubscriber(queue, Task, **kw) as sub:
            assert sub.receive(5, timeout=0.2) == []
            publisher.publish(Task(5, "late"), confirm=False)
            got = sub.receive(5, timeout=TIMEOUT)
        assert [e.value for e in got] == [Task(5, "late")]

    def test_close_gives_unacknowledged_elements_back(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """A subscriber that closes with unacknowledged elements: another one gets them."""
        publisher.publish_many(tasks(6))
        with QueueSubscriber(queue, Task, **kw) as b:
            with QueueSubscriber(queue, Task, **kw) as a:
                held = drain(a, 6)
                a.ack(held[:2])
            got = drain(b, 4)
        assert [(e.seq, e.delivery_count) for e in got] == [(3, 2), (4, 2), (5, 2), (6, 2)]

    def test_auto_acknowledge(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """In AUTO mode each receive acknowledges what the previous one returned."""
        publisher.publish_many(tasks(4))
        with QueueSubscriber(queue, Task, ack=AckMode.AUTO, **kw) as sub:
            first = sub.receive(2, timeout=TIMEOUT)
            second = sub.receive(2, timeout=TIMEOUT)
            assert sub.state().stored == 2
            assert sub.outstanding == second
        assert [e.seq for e in first + second] == [1, 2, 3, 4]


class TestAcknowledgementErrors:
    def test_acknowledging_another_subscribers_element(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """Acknowledging an element another subscriber holds fails, and acknowledges nothing."""
        publisher.publish_many(tasks(2))
        with QueueSubscriber(queue, Task, **kw) as a, QueueSubscriber(queue, Task, **kw) as b:
            mine = a.receive(1, timeout=TIMEOUT)
            theirs = b.receive(1, timeout=TIMEOUT)
            with pytest.raises(PreconditionNotMetError, match="another subscriber holds it"):
                a.ack(mine + theirs)
            assert a.state().stored == 2
            b.ack(theirs)
            a.ack(mine)
            assert a.state().stored == 0

    def test_acknowledging_twice(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """A second acknowledgement of an element raises IllegalOperationError naming it."""
        publisher.publish(Task(1, "x"))
        with QueueSubscriber(queue, Task, **kw) as sub:
            got = sub.receive(1, timeout=TIMEOUT)
            sub.ack(got)
            with pytest.raises(IllegalOperationError, match=f"element 1 of queue '{queue}'"):
                sub.ack(got)

    def test_bad_receive_arguments(self, queue: str, kw: dict[str, Any]) -> None:
        """max_count below 1 and a negative timeout are refused."""
        with QueueSubscriber(queue, Task, **kw) as sub:
            with pytest.raises(BadParameterError, match="max_count"):
                sub.receive(0)
            with pytest.raises(BadParameterError, match="timeout"):
                sub.receive(1, timeout=-1)

    def test_use_after_close(self, queue: str, kw: dict[str, Any]) -> None:
        """A closed subscriber or publisher raises AlreadyClosedError."""
        sub = QueueSubscriber(queue, Task, **kw)
        sub.close()
        with pytest.raises(AlreadyClosedError):
            sub.receive(1)
        pub = QueuePublisher(queue, Task, **kw)
        pub.close()
        with pytest.raises(AlreadyClosedError):
            pub.publish(Task(1, "x"))


class TestDeletion:
    def test_admin_deletion_discards_pending_elements(
        self, publisher: QueuePublisher[Task], queue: str, kw: dict[str, Any]
    ) -> None:
        """delete_queue discards every pending element; its subscribers are told."""
        publisher.publish_many(tasks(5))
        with QueueSubscriber(queue, Task, **kw) as sub:
            sub.receive(2, timeout=TIMEOUT)
            assert delete_queue(queue, **kw) == 5
            with pytest.raises(AlreadyClosedError, match="deleted by an administrator"):
                sub.receive(1, timeout=1)
        assert publisher.state().stored == 0
        with pytest.raises(PreconditionNotMetError, match="no queue"):
            delete_queue(queue, **kw)

    def test_deletion_needs_the_admin_key(self, tmp_path: Path, domain_id: int) -> None:
        """With a namespace key, only a holder of the admin key deletes a queue."""
        ns_key = write_key_file(tmp_path / "ns.key").source
        admin_key = write_key_file(tmp_path / "admin.key").source
        wrong_admin = write_key_file(tmp_path / "other.key").source
        namespace = f"qk_{uuid.uuid4().hex[:8]}"
        env = {"DCPS_STORE_KEY_FILE": str(ns_key), "DCPS_STORE_ADMIN_KEY_FILE": str(admin_key)}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            store = StoreProcess(tmp_path / "store", domain_id, namespace)
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k)
                else:
                    os.environ[k] = v
        kw = {"domain_id": domain_id, "namespace": namespace}
        try:
            with QueuePublisher("jobs", Task, store_key=ns_key, **kw) as p:
                p.publish_many(tasks(3))
                with pytest.raises(PreconditionNotMetError, match="admin key"):
                    delete_queue("jobs", store_key=ns_key, admin_key=None, **kw)
                with pytest.raises(DcpsTimeoutError):  # a wrong admin key: dropped by the store
                    delete_queue("jobs", store_key=ns_key, admin_key=wrong_admin, timeout=2, **kw)
                assert p.state().stored == 3
                with QueueSubscriber("jobs", Task, store_key=ns_key, **kw) as sub:
                    got = sub.receive(1, timeout=TIMEOUT)
                    sub.ack(got)
                assert delete_queue("jobs", store_key=ns_key, admin_key=admin_key, **kw) == 2
                assert p.state().stored == 0
        finally:
            store.kill()


def _hold_peer(where: dict[str, Any], queue: str, count: int, name: str) -> subprocess.Popen[str]:
    """A subscriber process that receives ``count`` elements and holds them unacknowledged."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.peers.maps_queues_peer", "hold",
         "--domain", str(where["domain_id"]), "--namespace", where["namespace"],
         "--queue", queue, "--count", str(count), "--timeout", "1.0", "--name", name],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


class TestCrashes:
    def test_a_killed_subscriber_s_elements_are_redelivered(
        self,
        publisher: QueuePublisher[Task],
        queue: str,
        kw: dict[str, Any],
        where: dict[str, Any],
    ) -> None:
        """kill -9 of a subscriber holding elements: after its timeout another one gets them."""
        publisher.publish_many(tasks(8))
        peer = _hold_peer(where, queue, 5, "doomed")
        try:
            assert peer.stdout is not None
            line = peer.stdout.readline().split()
            assert line[0] == "held"
            held = [int(s) for s in line[1].split(",")]
            assert len(held) == 5
        finally:
            peer.kill()
            peer.wait()
            if peer.stdout is not None:
                peer.stdout.close()
        with QueueSubscriber(queue, Task, **kw) as sub:
            got = drain(sub, 8)
            sub.ack(got)
        redelivered = {e.seq for e in got if e.delivery_count == 2}
        assert redelivered == set(held)
        assert sorted(e.seq for e in got) == list(range(1, 9))

    def test_store_kill_minus_9_loses_nothing_and_redelivers_no_ack(
        self, tmp_path: Path, domain_id: int
    ) -> None:
        """Across kill -9 of the store: acknowledged elements never come back; every
        unacknowledged one (delivered or not) does."""
        namespace = f"qc_{uuid.uuid4().hex[:8]}"
        store = StoreProcess(tmp_path / "store", domain_id, namespace)
        kw = {"domain_id": domain_id, "namespace": namespace, "request_timeout": 5.0}
        try:
            with QueuePublisher("work", Task, domain_id=domain_id, namespace=namespace) as p:
                p.publish_many(tasks(100))
            with QueueSubscriber("work", Task, **kw) as sub:
                got = drain(sub, 60)
                sub.ack(got[:30])
                acked = {e.seq for e in got[:30]}
                store.restart()
                after = _drain_after_restart(sub, 70)
                sub.ack(after)
            seqs = sorted(e.seq for e in after)
            assert seqs == sorted(set(range(1, 101)) - acked)
            with QueuePublisher("work", Task, domain_id=domain_id, namespace=namespace) as p:
                assert p.state().stored == 0
        finally:
            store.kill()


def _drain_after_restart(sub: QueueSubscriber[Task], count: int) -> list[QueueElement[Task]]:
    """Receive ``count`` elements from a restarted store (retrying while it is rediscovered)."""
    got: list[QueueElement[Task]] = []

    def more() -> bool:
        with contextlib.suppress(DcpsTimeoutError):  # a request the old store took
            got.extend(sub.receive(count - len(got), timeout=2))
        return len(got) >= count

    eventually(more, timeout=60, what=f"{count} elements after the restart")
    return got
