"""Redelivery counts survive a kill -9 of the store (persistent durables and queues).

The store writes, in the store round that delivered, per channel the highest
offset delivered and the count of each element delivered twice or more; after
a restart the count goes on from there instead of starting over at 0.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import DcpsTimeoutError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableElement, DurableKind, DurableSubscriber
from dcps.durables._queue import QueueElement, QueuePublisher, QueueSubscriber
from dcps.store._log import FORMAT_VERSION
from tests.support.peers.channels_types import Msg
from tests.support.peers.maps_queues_peer import Task
from tests.support.store_files import migrated
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 20.0


def _receive_after_restart(sub: DurableSubscriber[Msg]) -> DurableElement[Msg]:
    """The next element from a restarted store (the subscriber subscribes again)."""
    got: list[DurableElement[Msg]] = []

    def one() -> bool:
        with contextlib.suppress(DcpsTimeoutError, PreconditionNotMetError):
            got.append(sub.receive(timeout=2))
        return bool(got)

    eventually(one, timeout=60, what="an element from the restarted store")
    return got[0]


@pytest.mark.parametrize("kind", [DurableKind.EXCLUSIVE, DurableKind.SHARED])
def test_durable_rolled_back_twice_comes_back_with_count_3_after_kill_9(
    kind: DurableKind, tmp_path: Path, domain_id: int, topic_name: str
) -> None:
    """Delivered (0), rolled back, delivered (1), rolled back, delivered (2) and held:
    the store is killed with SIGKILL; after its restart the element comes with count 3."""
    namespace = f"rc_{uuid.uuid4().hex[:8]}"
    kw = {"domain_id": domain_id, "namespace": namespace}
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    topic = ChannelledTopic(topic_name, Msg, channel_count=1)
    try:
        sub: DurableSubscriber[Msg] = DurableSubscriber(
            topic, "counted", kind=kind, window=1, request_timeout=timedelta(seconds=2), **kw
        )
        with sub:
            with ChannelPublisher(topic, **kw) as pub:
                futures = [pub.publish(Msg(0, s)) for s in range(3)]
                pub.flush()
                for f in futures:
                    assert f.result(TIMEOUT) is not None
            counts = []
            for _ in range(3):
                e = sub.receive(TIMEOUT)
                assert e.offset == 0
                counts.append(e.redelivery_count)
                if len(counts) < 3:
                    sub.rollback(e)
            assert counts == [0, 1, 2]
            store.restart()  # SIGKILL, then a new store process on the same files
            again = _receive_after_restart(sub)
            assert (again.offset, again.redelivery_count, again.redelivered) == (0, 3, True)
            again.ack()
            nxt = sub.receive(TIMEOUT)
            assert (nxt.offset, nxt.redelivery_count) == (1, 0)  # never delivered: 0
    finally:
        store.kill()


def _rows(data: Path, sql: str, name: str) -> list[tuple[int, ...]]:
    """Rows of ``sql`` (one ``?``: the durable's name) read from the store file."""
    db = sqlite3.connect(data / "channels.db")
    try:
        return [tuple(int(v) for v in row) for row in db.execute(sql, (name,))]
    finally:
        db.close()


def _counts(data: Path, name: str) -> list[tuple[int, ...]]:
    return sorted(
        _rows(data, 'SELECT "offset", times FROM durable_deliveries WHERE name = ?', name)
    )


def _delivered(data: Path, name: str) -> list[tuple[int, ...]]:
    return _rows(data, 'SELECT channel, "offset" FROM durable_delivered WHERE name = ?', name)


def test_acknowledged_elements_leave_no_count_behind(
    tmp_path: Path, domain_id: int, topic_name: str
) -> None:
    """An element rolled back then acknowledged keeps no count: the file has no row for
    it after the store wrote the round (nothing left to redeliver, nothing counted).
    Elements delivered once have no row of their own: the channel's highest delivered
    offset says they went out."""
    namespace = f"rc_{uuid.uuid4().hex[:8]}"
    kw = {"domain_id": domain_id, "namespace": namespace}
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    topic = ChannelledTopic(topic_name, Msg, channel_count=1)
    data = tmp_path / "store"
    try:
        with DurableSubscriber(topic, "clean", window=4, **kw) as sub:
            with ChannelPublisher(topic, **kw) as pub:
                futures = [pub.publish(Msg(0, s)) for s in range(4)]
                pub.flush()
                for f in futures:
                    f.result(TIMEOUT)
            got = [sub.receive(TIMEOUT) for _ in range(4)]
            sub.rollback(got[2])
            again = sub.receive(TIMEOUT)
            assert (again.offset, again.redelivery_count) == (2, 1)
            eventually(lambda: _counts(data, "clean") == [(2, 2)] and _delivered(data, "clean"))
            assert _delivered(data, "clean") == [(0, 3)]
            sub.ack([got[0], got[1], again, got[3]])
            eventually(
                lambda: _counts(data, "clean") == [],
                what="the counts of acknowledged elements deleted",
            )
    finally:
        store.kill()


def test_first_deliveries_write_no_count_and_come_back_once_redelivered_after_kill_9(
    tmp_path: Path, domain_id: int, topic_name: str
) -> None:
    """Two elements delivered once (count 0), held at a store SIGKILL after the round that
    delivered them was written: no count row was written for them, and after the restart
    both come back with redelivery count 1; an element never delivered still comes with 0."""
    namespace = f"rc_{uuid.uuid4().hex[:8]}"
    kw = {"domain_id": domain_id, "namespace": namespace}
    data = tmp_path / "store"
    store = StoreProcess(data, domain_id, namespace)
    topic = ChannelledTopic(topic_name, Msg, channel_count=1)
    try:
        sub: DurableSubscriber[Msg] = DurableSubscriber(
            topic, "once", window=2, request_timeout=timedelta(seconds=2), **kw
        )
        with sub:
            with ChannelPublisher(topic, **kw) as pub:
                futures = [pub.publish(Msg(0, s)) for s in range(3)]
                pub.flush()
                for f in futures:
                    assert f.result(TIMEOUT) is not None
            first = [sub.receive(TIMEOUT) for _ in range(2)]
            assert [(e.offset, e.redelivery_count) for e in first] == [(0, 0), (1, 0)]
            eventually(
                lambda: _delivered(data, "once") == [(0, 1)],
                what="the highest delivered offset written",
            )
            assert _counts(data, "once") == []  # a first delivery writes no row of its own
            store.restart()  # SIGKILL, then a new store process on the same files
            again = _receive_after_restart(sub)
            assert (again.offset, again.redelivery_count, again.redelivered) == (0, 1, True)
            second = sub.receive(TIMEOUT)
            assert (second.offset, second.redelivery_count) == (1, 1)
            sub.ack([again, second])
            third = sub.receive(TIMEOUT)
            assert (third.offset, third.redelivery_count, third.redelivered) == (2, 0, False)
            third.ack()
    finally:
        store.kill()


def test_queue_redelivery_count_survives_kill_9(tmp_path: Path, domain_id: int) -> None:
    """A queue element delivered, rolled back twice and held at a store SIGKILL comes
    back after the restart with delivery count 4 (three deliveries before)."""
    namespace = f"rq_{uuid.uuid4().hex[:8]}"
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    kw = {"domain_id": domain_id, "namespace": namespace, "request_timeout": 5.0}
    try:
        with QueuePublisher("counted", Task, domain_id=domain_id, namespace=namespace) as p:
            p.publish_many([Task(i, f"t{i}") for i in range(2)])
        with QueueSubscriber("counted", Task, **kw) as sub:
            counts = []
            for _ in range(3):
                got = sub.receive(1, timeout=TIMEOUT)
                assert [e.seq for e in got] == [1]
                counts.append(got[0].delivery_count)
                if len(counts) < 3:
                    sub.rollback(got)
            assert counts == [1, 2, 3]
            store.restart()
            after: list[QueueElement[Task]] = []

            def more() -> bool:
                with contextlib.suppress(DcpsTimeoutError, PreconditionNotMetError):
                    after.extend(sub.receive(2 - len(after), timeout=2))
                return len(after) >= 2

            eventually(more, timeout=60, what="the queue's elements after the restart")
            by_seq = {e.seq: e for e in after}
            assert (by_seq[1].delivery_count, by_seq[1].redelivered) == (4, True)
            assert (by_seq[2].delivery_count, by_seq[2].redelivered) == (1, False)
            sub.ack(after)
    finally:
        store.kill()


def test_a_version_8_file_gains_the_delivery_counts(tmp_path: Path) -> None:
    """Migration 8 -> 9 (and on): ``durable_deliveries`` is created and ``queue_elements``
    gains ``deliveries`` (0 for the elements already there); the file says the current
    version."""
    assert FORMAT_VERSION >= 9
    with migrated(
        tmp_path,
        8,
        "DROP TABLE durable_deliveries",
        "DROP TABLE durable_delivered",
        "ALTER TABLE queue_elements DROP COLUMN deliveries",
        "INSERT INTO queues VALUES (1, 'q', '', 2, 0)",
        "INSERT INTO queue_elements VALUES (1, 1, x'00')",
    ) as db:
        assert db.execute("SELECT seq, deliveries FROM queue_elements").fetchall() == [(1, 0)]
        assert db.execute("SELECT count(*) FROM durable_deliveries").fetchone() == (0,)


def test_a_version_9_file_gains_the_delivered_offsets_and_keeps_its_counts(
    tmp_path: Path,
) -> None:
    """Migration 9 -> 10 (and on): ``durable_delivered`` is created (empty) and the version-9 count
    rows stay. A version-9 durable has no delivered offsets, so an element without a
    row counts as never delivered, as version 9 read it; its rows still count."""
    assert FORMAT_VERSION >= 10
    with migrated(
        tmp_path,
        9,
        "DROP TABLE durable_delivered",
        "INSERT INTO durable_deliveries VALUES ('d', 0, 5, 1)",
    ) as db:
        assert db.execute("SELECT count(*) FROM durable_delivered").fetchone() == (0,)
        assert db.execute("SELECT * FROM durable_deliveries").fetchall() == [("d", 0, 5, 1)]
