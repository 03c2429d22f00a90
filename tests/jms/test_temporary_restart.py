"""Temporary topics outlive a store restart (issue 15): claims and grants are persisted.

The store is a real process killed with SIGKILL and started again on its
data directory. Its temporary topic's owner keeps consuming (its consumer
subscribes again under the grant the store kept), another connection is
still refused by the store, and the owner's death still ends the topic once
its lease runs out.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import DcpsError, InvalidDestinationError
from dcps.jms import Connection, Topic
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.jms_types import Quote
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 60.0


@pytest.fixture
def peers() -> Iterator[list[LinePeer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


@pytest.fixture
def store(tmp_path: Path, domain_id: int) -> Iterator[StoreProcess]:
    """A store process of its own namespace, killed at the end."""
    process = StoreProcess(tmp_path / "store", domain_id, f"tmp_{uuid.uuid4().hex[:8]}")
    try:
        yield process
    finally:
        process.kill()


def _connection(store: StoreProcess, seconds: float = 3.0) -> Connection:
    connection = Connection(
        domain_id=store.domain_id,
        namespace=store.namespace,
        channel_count=1,
        consumer_timeout=timedelta(seconds=seconds),
    )
    connection.start()
    return connection


def _publish_refused(store: StoreProcess, name: str) -> bool:
    """Whether the store refuses a publish to temporary topic ``name`` as not existing
    (from a fresh connection; False when the publish went through)."""
    with _connection(store) as other:
        pub = other.create_topic_session().create_publisher(Topic(name, Quote))
        try:
            pub.publish(Quote("x", 1.0, 1), timeout=TIMEOUT)
        except InvalidDestinationError as exc:
            return "does not exist" in str(exc)
        finally:
            pub.close()
    return False


def test_the_owner_keeps_consuming_and_others_stay_refused_after_a_store_restart(
    store: StoreProcess, peers: list[LinePeer]
) -> None:
    """kill -9 and restart of the store: the owning connection's consumer receives what is
    published to its temporary topic after the restart; another connection in another
    process is refused by the store (consume and delete), as before the restart."""
    owner = _connection(store)
    try:
        session = owner.create_topic_session()
        temp = session.create_temporary_topic(Quote)
        sub = session.create_subscriber(temp)
        session.create_publisher(temp).publish(Quote("before", 1.0, 1))
        first = sub.receive(TIMEOUT)
        assert first is not None
        assert first.body.seq == 1
        store.restart()

        seqs = iter(range(100, 10_000))

        def received_after_restart() -> bool:
            with _connection(store) as other:
                pub = other.create_topic_session().create_publisher(temp)
                pub.publish(Quote("after", 2.0, next(seqs)), timeout=TIMEOUT)
                pub.close()
            message = sub.receive(1.0)
            return message is not None and message.body.seq >= 100

        eventually(received_after_restart, TIMEOUT, "the owner's consumer after the restart")
        peer = LinePeer(
            [
                str(PEERS_DIR / "jms_temporary.py"),
                str(store.domain_id),
                store.namespace,
                "steal",
                temp.name,
            ]
        )
        peers.append(peer)
        peer.wait_line(lambda line: line == "done", TIMEOUT)
        store_line = next(x for x in peer.lines if x.startswith("store-"))
        assert store_line.startswith("store-refused InvalidDestinationError")
        assert "another connection" in store_line
        delete_line = next(x for x in peer.lines if x.startswith("delete-"))
        assert delete_line.startswith("delete-refused InvalidDestinationError")
        assert "another connection" in delete_line
    finally:
        with contextlib.suppress(DcpsError):
            owner.close()


def test_the_lease_still_ends_the_topic_after_a_store_restart(
    store: StoreProcess, peers: list[LinePeer]
) -> None:
    """The owner (another process, 10 s leases) dies while the store is down: the restarted
    store serves the topic again from its file (a fresh lease), and ends it once that
    lease runs out unrenewed."""
    owner = LinePeer(
        [str(PEERS_DIR / "jms_temporary.py"), str(store.domain_id), store.namespace, "own", "10"]
    )
    peers.append(owner)
    owner.wait_line(lambda line: line.startswith("topic "), TIMEOUT)
    name = next(x for x in owner.lines if x.startswith("topic ")).split()[1]
    assert not _publish_refused(store, name)
    store.kill()
    owner.kill()
    store.restart()
    assert not _publish_refused(store, name)  # served again: the store kept it
    eventually(lambda: _publish_refused(store, name), TIMEOUT, "the store ending the topic")


def test_an_older_file_gains_the_temporary_topic_tables(tmp_path: Path) -> None:
    """Migration through version 11: a file of version 9 (no temporary-topic tables) opened
    by a store gets ``temporary_topics`` and ``temporary_grants``, empty, and says the
    current version."""
    from dcps.store._log import FORMAT_VERSION
    from tests.support.store_files import migrated

    assert FORMAT_VERSION >= 11
    with migrated(tmp_path, 9, "DROP TABLE temporary_topics", "DROP TABLE temporary_grants") as db:
        assert db.execute("SELECT count(*) FROM temporary_topics").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM temporary_grants").fetchone() == (0,)
