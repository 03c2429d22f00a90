"""Transacted sessions commit publishes and acknowledgements atomically (issue 15 item 4).

A crash before the commit publishes nothing and acknowledges nothing (the
consumed messages come again); after the commit both hold, also when the
store is killed right after its commit point (it completes the transaction
when it starts again). Real store and client processes, killed with SIGKILL
(the crash points are ``dcps/_crash.py``'s).
"""

from __future__ import annotations

import signal
import sys
import time
import traceback
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import DcpsError, PreconditionNotMetError
from dcps._crash import CRASH_ENV
from dcps.channels import ChannelledTopic
from dcps.durables import durable_info
from dcps.jms import AcknowledgeMode, Connection, TopicSubscriber
from dcps.jms._envelope import envelope_of
from tests.support.line_peer import LinePeer, killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.jms_types import Quote
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 60.0
QUIET = 1.0  # how long "nothing comes" is watched for


@pytest.fixture
def peers() -> Iterator[list[LinePeer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


def _seqs(sub: TopicSubscriber[Quote], quiet: float = QUIET) -> list[tuple[int, bool]]:
    """(seq, redelivered) of every message until none comes for ``quiet`` seconds."""
    out = []
    while (m := sub.receive(quiet)) is not None:
        out.append((m.body.seq, m.redelivered))
    return out


def _wait_line(peer: LinePeer, line: str) -> None:
    """Wait for ``line`` from ``peer``; on failure say what it printed (and its errors)."""
    try:
        peer.wait_line(lambda x: x == line, TIMEOUT)
    except AssertionError as exc:
        if peer.proc.poll() is None:
            peer.proc.send_signal(signal.SIGUSR1)  # its threads' stacks, to stderr
            time.sleep(1.0)  # (for the dump to be written: not a synchronisation)
        peer.proc.kill()
        peer.proc.wait()
        err = peer.proc.stderr.read() if peer.proc.stderr else ""
        here = "".join(
            f"--- {t}\n" + "".join(traceback.format_stack(f))
            for t, f in sys._current_frames().items()
        )
        raise AssertionError(
            f"{exc}; the peer printed {peer.lines}; {err[-3000:]}\nthis process:\n{here}"
        ) from None


def _durable(connection: Connection, topic: str, name: str) -> TopicSubscriber[Quote]:
    """Durable subscription ``name`` (auto-acknowledged), once the store let a dead
    consumer of it go."""
    session = connection.create_topic_session()

    def subscribe() -> TopicSubscriber[Quote] | None:
        try:
            return session.create_durable_subscriber(session.create_topic(topic, Quote), name)
        except PreconditionNotMetError:  # the killed consumer is still active for 1 s
            return None

    return eventually(subscribe, timeout=TIMEOUT)


def _publish(connection: Connection, topic: str, seqs: range) -> None:
    session = connection.create_topic_session()
    pub = session.create_publisher(session.create_topic(topic, Quote))
    for s in seqs:
        pub.publish(Quote("in", float(s), s))
    pub.close()


@pytest.mark.parametrize("crash_before_commit", [True, False])
def test_a_client_crash_before_commit_publishes_and_acknowledges_nothing(
    crash_before_commit: bool,
    store: object,
    peers: list[LinePeer],
    monkeypatch: pytest.MonkeyPatch,
    topic_name: str,
    domain_id: int,
    namespace: str,
) -> None:
    """A transacted peer consumes 3 and publishes 3. Killed inside commit just before the
    store commits (all staged and enlisted): no output, the 3 come again. Killed after
    its commit: the 3 outputs are there and the 3 inputs never come again."""
    kw = {"domain_id": domain_id, "namespace": namespace, "channel_count": 1}
    in_topic, out_topic = f"{topic_name}_in", f"{topic_name}_out"
    with Connection("watcher", consumer_timeout=timedelta(seconds=2), **kw) as watcher:
        watcher.start()
        _durable(watcher, out_topic, "watch").close()  # keeps what OUT gets from now on
        if crash_before_commit:
            monkeypatch.setenv(CRASH_ENV, "jms-before-commit")
        args = [str(domain_id), namespace, in_topic, out_topic, "3", "1"]
        peer = LinePeer([str(PEERS_DIR / "jms_transactor.py"), *args])
        peers.append(peer)
        monkeypatch.delenv(CRASH_ENV, raising=False)
        peer.wait_line(lambda line: line == "ready")
        _publish(watcher, in_topic, range(1, 4))
        if crash_before_commit:
            _wait_line(peer, "got 3")
            eventually(lambda: peer.proc.poll() is not None, TIMEOUT, "the peer's crash")
            assert peer.proc.returncode == -9  # killed at its crash point, not failed
            assert "committed" not in peer.lines
        else:
            _wait_line(peer, "holding")
            peer.kill()
        outputs = _seqs(_durable(watcher, out_topic, "watch"))
    with Connection("tx-peer", consumer_timeout=timedelta(seconds=2), **kw) as again:
        again.start()
        inputs = _seqs(_durable(again, in_topic, "in"))
    if crash_before_commit:
        assert outputs == []
        assert inputs == [(1, True), (2, True), (3, True)]
    else:
        assert outputs == [(101, False), (102, False), (103, False)]
        assert inputs == []


def test_a_store_killed_after_its_commit_point_completes_the_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, topic_name: str, domain_id: int
) -> None:
    """The store dies (SIGKILL) right after writing the commit record, before applying it:
    when it starts again, the published messages are there and the consumed ones are
    acknowledged (never delivered again)."""
    namespace = f"tx_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv(CRASH_ENV, "store-after-commit-point")
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    monkeypatch.delenv(CRASH_ENV)
    kw = {
        "domain_id": domain_id,
        "namespace": namespace,
        "channel_count": 1,
        "consumer_timeout": timedelta(seconds=2),
    }
    in_topic, out_topic = f"{topic_name}_in", f"{topic_name}_out"
    try:
        with Connection("watcher", **kw) as watcher:
            watcher.start()
            _durable(watcher, out_topic, "watch").close()
        committer = Connection("tx-peer", **kw)
        try:
            committer.start()
            tx = committer.create_topic_session(AcknowledgeMode.TRANSACTED)
            sub = tx.create_durable_subscriber(tx.create_topic(in_topic, Quote), "in")
            pub = tx.create_publisher(tx.create_topic(out_topic, Quote))
            with Connection("watcher", **kw) as watcher:
                _publish(watcher, in_topic, range(1, 4))
            for _ in range(3):
                m = sub.receive(TIMEOUT)
                assert m is not None
                pub.publish(Quote("out", 0.0, m.body.seq + 100))
            with pytest.raises(DcpsError):  # the store died answering
                tx.commit()
            eventually(lambda: store.proc.poll() is not None, TIMEOUT, "the store's crash")
        finally:
            committer.close()
        store.restart()  # without the crash point now
        with Connection("watcher", **kw) as watcher:
            watcher.start()
            outputs = _seqs(_durable(watcher, out_topic, "watch"))
        with Connection("tx-peer", **kw) as again:
            again.start()
            inputs = _seqs(_durable(again, in_topic, "in"))
        assert outputs == [(101, False), (102, False), (103, False)]
        assert inputs == []
    finally:
        store.kill()


def test_a_commit_whose_consumed_message_was_redelivered_is_rolled_back(
    store: object, topic_name: str, domain_id: int, namespace: str
) -> None:
    """A consumer silent past its timeout loses what it held (the store redelivers it):
    its transaction's commit is refused whole, and nothing it published appears."""
    kw = {"domain_id": domain_id, "namespace": namespace, "channel_count": 1}
    in_topic, out_topic = f"{topic_name}_in", f"{topic_name}_out"
    physical = ChannelledTopic(in_topic, envelope_of(Quote), 1)
    with Connection("watcher", consumer_timeout=timedelta(seconds=2), **kw) as watcher:
        watcher.start()
        _durable(watcher, out_topic, "watch").close()
        tx_conn = Connection("tx-c", consumer_timeout=timedelta(seconds=1), **kw)
        try:
            tx_conn.start()
            tx = tx_conn.create_topic_session(AcknowledgeMode.TRANSACTED)
            sub = tx.create_durable_subscriber(tx.create_topic(in_topic, Quote), "in")
            _publish(watcher, in_topic, range(1, 2))
            assert sub.receive(TIMEOUT) is not None
            tx.create_publisher(tx.create_topic(out_topic, Quote)).publish(Quote("o", 0.0, 1))
            sub._durable._stop.set()  # it stops polling, as a hung process: timed out in 1 s

            def timed_out() -> bool:
                info = durable_info(
                    physical, "jms/tx-c/in", domain_id=domain_id, namespace=namespace
                )
                return info.subscribers == 0

            eventually(timed_out, TIMEOUT, "the store timing the consumer out")
            with pytest.raises(PreconditionNotMetError, match="rolled back"):
                tx.commit()
        finally:
            tx_conn.close()
        assert _seqs(_durable(watcher, out_topic, "watch")) == []


def test_a_transaction_commits_in_a_namespace_with_a_key(
    tmp_path: Path, topic_name: str, domain_id: int, namespace: str
) -> None:
    """With a namespace key, staging, the subscribers' enlisted acknowledgements (proven
    with their own secrets) and the commit are all accepted: both take effect."""
    from dcps.store import Store, SyncMode
    from dcps.wire._auth_keys import write_key_file

    key = write_key_file(tmp_path / "ns.key").source
    kw = {"domain_id": domain_id, "namespace": namespace, "channel_count": 1, "key": key}
    in_topic, out_topic = f"{topic_name}_in", f"{topic_name}_out"
    with (
        Store(
            tmp_path / "store",
            sync=SyncMode.NORMAL,
            key=key,
            admin_key=None,
            **{"domain_id": domain_id, "namespace": namespace},
        ),
        Connection("keyed", consumer_timeout=timedelta(seconds=5), **kw) as connection,
    ):
        connection.start()
        _durable(connection, out_topic, "watch").close()
        tx = connection.create_topic_session(AcknowledgeMode.TRANSACTED)
        sub = tx.create_durable_subscriber(tx.create_topic(in_topic, Quote), "in")
        _publish(connection, in_topic, range(1, 3))
        pub = tx.create_publisher(tx.create_topic(out_topic, Quote))
        for _ in range(2):
            m = sub.receive(TIMEOUT)
            assert m is not None
            pub.publish(Quote("out", 0.0, m.body.seq + 100))
        tx.commit()
        sub.close()
        assert _seqs(_durable(connection, out_topic, "watch")) == [(101, False), (102, False)]
        assert _seqs(_durable(connection, in_topic, "in")) == []
