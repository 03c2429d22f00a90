"""Transactions over durables, handled without DDS (issue 20's mutation run of
``dcps/store/_transactions.py``: the commit point, its recovery, aborts, ownership).

A real log in a temporary directory behind a ``Store`` that is not started (the
``Answered`` store of ``test_service_mutants.py``: replies and live batches are kept
in lists). Each test stages chunks (STAGE), enlists a durable subscriber's
acknowledgements (DURABLE_TX_ACK) and sends TX_COMMIT or TX_ABORT as a JMS transacted
session does; it then reads what a user would see: the elements in the log, what was
pushed live, what the durable delivers next, the store's file after a restart.
A store "killed" at the commit point is made by a ``crash_point`` that raises.
End to end with a JMS session over DDS: tests/jms.
"""

from __future__ import annotations

import json
import logging
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dcps.store._transactions as transactions
from dcps import DcpsError
from dcps.store._log import STORE_FILE, SyncMode
from dcps.store._staging import staging_of
from dcps.store._transactions import recover_transactions
from dcps.wire._auth_keys import write_key_file
from dcps.wire._auth_stage import QueryKey, StageDigest, owned_query
from dcps.wire._codes import ErrorCode
from dcps.wire._durables import (
    DurableDelivery,
    DurableKind,
    DurablePollRequest,
    DurableRollbackRequest,
    DurableSubscribeRequest,
    DurableTxAckRequest,
    TxAbortRequest,
    TxCommitRequest,
    TxCommitted,
    tx_signed,
)
from dcps.wire._messages import Reply
from dcps.wire._requests import EnsureTopicRequest, PublishRequest
from dcps.wire._staging import StageRequest
from tests.store.test_service_mutants import Answered, _Call

Stage = tuple[str, str, int]


def open_store(path: Path, **kw: Any) -> Answered:
    kw.setdefault("key", None)
    return Answered(path, sync=SyncMode.NORMAL, admin_key=None, **kw)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Answered]:
    s = open_store(tmp_path / "store")
    try:
        yield s
    finally:
        s.log.close()


def ok(reply: Reply) -> Reply:
    assert reply.status == ErrorCode.OK, (reply.status, reply.error)
    return reply


def stage(
    store: Answered,
    topic: str,
    query: str,
    epoch: int,
    stage_id: str,
    seq: int,
    channel: int,
    *payloads: bytes,
) -> StageRequest:
    r = StageRequest(
        topic,
        query,
        epoch,
        0,
        stage_id,
        seq,
        channel,
        [len(p) for p in payloads],
        b"".join(payloads),
    )
    ok(store.ask(r))
    return r


def publish(store: Answered, topic: str, *blobs: bytes) -> None:
    store._publish(
        [_Call("c1", 1, PublishRequest(topic, 0, [len(b) for b in blobs], b"".join(blobs)))]
    )
    ok(store.replies[-1])


def elements(store: Answered, topic: str, channel: int = 0) -> list[bytes]:
    return [e.data for e in store.log.fetch(topic, channel, 0, 100)]


def records(path: Path) -> list[tuple[str, int, Any]]:
    """The commit records in the store's file (read by another connection)."""
    db = sqlite3.connect(path / STORE_FILE)
    try:
        rows = db.execute("SELECT query, epoch, record FROM durable_transactions").fetchall()
    finally:
        db.close()
    return [(q, e, json.loads(r)) for q, e, r in rows]


def hold(
    store: Answered, topic: str, name: str, subscriber: str, count: int
) -> list[tuple[int, int]]:
    """Subscribe ``subscriber`` to shared durable ``name`` and poll ``count`` elements: the
    positions it now holds."""
    ok(store.ask(DurableSubscribeRequest(topic, name, subscriber, DurableKind.SHARED)))
    got = DurableDelivery.from_wire(
        ok(store.ask(DurablePollRequest(topic, name, subscriber, count)))
    )
    assert len(got.offsets) == count
    return list(zip(got.channels, got.offsets, strict=True))


def poll(store: Answered, topic: str, name: str, subscriber: str) -> DurableDelivery:
    return DurableDelivery.from_wire(ok(store.ask(DurablePollRequest(topic, name, subscriber, 10))))


@pytest.fixture
def scene(store: Answered) -> dict[str, Any]:
    """Topic ``in`` (3 elements, a subscriber of durable ``d`` holding the first two, enlisted
    in transaction ``("q", 1)``), topics ``out`` (1 channel) and ``side`` (2 channels, kept),
    with chunks staged for the transaction: 2 elements to ``out``, 2 to ``side``."""
    ok(store.ask(EnsureTopicRequest("in", 1, True)))
    ok(store.ask(EnsureTopicRequest("out", 1, True)))
    ok(store.ask(EnsureTopicRequest("side", 2, True)))
    publish(store, "in", b"i0", b"i1", b"i2")
    held = hold(store, "in", "d", "s1", 2)
    assert held == [(0, 0), (0, 1)]
    ok(store.ask(DurableTxAckRequest("in", "d", "s1", tuple(held), "q", 1)))
    stage(store, "out", "q", 1, "s", 0, 0, b"o0", b"o1")
    stage(store, "side", "q", 1, "s", 0, 1, b"x0")
    stage(store, "side", "q", 1, "t", 0, 0, b"y0")
    stages: tuple[Stage, ...] = (("out", "s", 1), ("side", "s", 1), ("side", "t", 1))
    return {"stages": stages, "held": held}


class TestOneStore:
    @pytest.mark.parametrize("request_", [TxCommitRequest("q", 1), TxAbortRequest("q", 1)])
    def test_a_split_store_refuses_transactions_by_name(
        self, tmp_path: Path, request_: TxCommitRequest
    ) -> None:
        s = open_store(tmp_path / "s", share=(0, 2), namespace="ns1")
        try:
            refused = s.ask(request_)
            assert refused.status == ErrorCode.UNSUPPORTED
            assert refused.error == (
                "transactions need one store for namespace 'ns1': this store serves share 0/2"
            )
        finally:
            s.log.close()


class TestCommit:
    def test_a_commit_publishes_every_stage_and_applies_the_acks_together(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any]
    ) -> None:
        """Elements of two topics and two stages appear, are pushed live at their offsets
        and timestamps, and the enlisted elements are never delivered again."""
        answer = ok(store.ask(TxCommitRequest("q", 1, scene["stages"])))
        assert TxCommitted.from_wire(answer) == TxCommitted(4, 2)
        assert elements(store, "out") == [b"o0", b"o1"]
        assert elements(store, "side", 0) == [b"y0"]
        assert elements(store, "side", 1) == [b"x0"]
        for (topic, channel), blob in [
            (("out", 0), b"o0o1"),
            (("side", 1), b"x0"),
            (("side", 0), b"y0"),
        ]:
            (batch,) = store.live[(topic, channel)].batches
            stored = store.log.fetch(topic, channel, 0, 1)[0]
            assert (batch.topic, batch.channel, batch.first, bytes(batch.blob)) == (
                topic,
                channel,
                0,
                blob,
            )
            assert batch.timestamp == stored.timestamp_ns
            assert list(batch.sizes) == [2] * (len(blob) // 2)
        assert records(tmp_path / "store") == []  # the commit record is gone once applied
        assert staging_of(store.log).staged_chunks() == 0
        # acknowledged: the subscriber is served the third element, not the first two again
        got = poll(store, "in", "d", "s1")
        assert (got.offsets, got.data) == ((2,), b"i2")

    def test_a_commit_with_nothing_enlisted_acknowledges_nothing(self, store: Answered) -> None:
        ok(store.ask(EnsureTopicRequest("out", 1, True)))
        stage(store, "out", "q", 3, "s", 0, 0, b"a")
        stage(store, "out", "q", 3, "s", 1, 0, b"b", b"c")
        answer = TxCommitted.from_wire(ok(store.ask(TxCommitRequest("q", 3, (("out", "s", 2),)))))
        assert answer == TxCommitted(3, 0)
        assert elements(store, "out") == [b"a", b"b", b"c"]
        assert [b.first for b in store.live[("out", 0)].batches] == [0, 1]

    def test_a_last_value_durable_sees_the_committed_elements(self, store: Answered) -> None:
        ok(store.ask(EnsureTopicRequest("out", 1, True)))
        ok(store.ask(DurableSubscribeRequest("out", "lv", "w", DurableKind.LAST_VALUE)))
        stage(store, "out", "q", 0, "s", 0, 0, b"a", b"b")
        ok(store.ask(TxCommitRequest("q", 0, (("out", "s", 1),))))
        got = poll(store, "out", "lv", "w")
        assert (got.offsets, got.data) == ((0, 1), b"ab")

    def test_a_topic_that_keeps_nothing_releases_the_committed_elements(
        self, store: Answered
    ) -> None:
        """No group, no retention: once pushed live, the elements are released (as after
        a publish)."""
        ok(store.ask(EnsureTopicRequest("gone", 1, False)))
        ok(store.ask(EnsureTopicRequest("kept", 1, True)))
        stage(store, "gone", "q", 0, "s", 0, 0, b"a", b"b")
        stage(store, "kept", "q", 0, "s", 0, 0, b"c")
        ok(store.ask(TxCommitRequest("q", 0, (("gone", "s", 1), ("kept", "s", 1)))))
        assert len(store.live[("gone", 0)].batches) == 1  # pushed
        gone = store.log.channel_state("gone", 0)
        assert (gone.head, gone.tail) == (2, 1)  # then released
        assert elements(store, "kept") == [b"c"]

    def test_missing_chunks_refuse_the_commit_and_change_nothing(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any]
    ) -> None:
        """A stage reporting more chunks than staged: refused by name before the commit
        point; nothing published, no record, the staged chunks stay."""
        stages = (("out", "s", 1), ("side", "s", 1), ("side", "t", 2))
        refused = store.ask(TxCommitRequest("q", 1, stages))
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert refused.error == (
            "cannot commit transaction 'q' epoch 1: stage 't' of topic 'side' has 1 of its 2 "
            "chunks staged (transaction rolled back)"
        )
        assert (elements(store, "out"), elements(store, "side", 0)) == ([], [])
        assert store.live.get(("out", 0)) is None or store.live[("out", 0)].batches == []
        assert records(tmp_path / "store") == []
        assert staging_of(store.log).staged_chunks() == 3
        assert poll(store, "in", "d", "s1").offsets == (2,)  # the two stay held, unacknowledged

    def test_a_stage_with_more_chunks_than_reported_is_refused(
        self, store: Answered, scene: dict[str, Any]
    ) -> None:
        refused = store.ask(TxCommitRequest("q", 1, (("out", "s", 0),)))
        assert refused.error == (
            "cannot commit transaction 'q' epoch 1: stage 's' of topic 'out' has 1 of its 0 "
            "chunks staged (transaction rolled back)"
        )

    def test_the_same_stage_id_in_another_epoch_is_not_counted(self, store: Answered) -> None:
        """The chunk count is of this query and epoch: another epoch's or query's chunks of
        the same stage id do not make up for a missing one."""
        ok(store.ask(EnsureTopicRequest("out", 1, True)))
        stage(store, "out", "q", 2, "s", 0, 0, b"other epoch")
        stage(store, "out", "p", 1, "s", 0, 0, b"other query")
        refused = store.ask(TxCommitRequest("q", 1, (("out", "s", 1),)))
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert "has 0 of its 1 chunks staged" in refused.error

    def test_an_element_no_longer_held_refuses_the_commit(
        self, store: Answered, scene: dict[str, Any]
    ) -> None:
        ok(store.ask(TxCommitRequest("q", 1, scene["stages"])))  # acknowledges (0, 0), (0, 1)
        assert poll(store, "in", "d", "s1").offsets == (2,)
        ok(store.ask(DurableTxAckRequest("in", "d", "s1", ((0, 2),), "q", 2)))
        ok(store.ask(DurableRollbackRequest("in", "d", "s1", ((0, 2),))))  # given back meanwhile
        refused = store.ask(TxCommitRequest("q", 2))
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert "rolled back: element (0, 2) of durable 'd'" in refused.error


class KilledAtTheCommitPointError(Exception):
    """Stands for SIGKILL at ``crash_point("store-after-commit-point")``."""


@pytest.fixture
def killed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make ``crash_point`` raise at the commit point (the store "dies" there)."""
    points: list[str] = []

    def crash(point: str) -> None:
        points.append(point)
        if point == "store-after-commit-point":
            raise KilledAtTheCommitPointError(point)

    monkeypatch.setattr(transactions, "crash_point", crash)
    return points


class TestCommitPoint:
    def test_the_record_is_written_before_anything_is_applied(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any], killed: list[str]
    ) -> None:
        """At the commit point the file holds the whole transaction (stages and acks) and
        nothing of it is visible yet."""
        failed = store.ask(TxCommitRequest("q", 1, scene["stages"]))
        assert killed == ["store-after-commit-point"]
        assert failed.status != ErrorCode.OK
        assert records(tmp_path / "store") == [
            (
                "q",
                1,
                {
                    "stages": [["out", "s", 1], ["side", "s", 1], ["side", "t", 1]],
                    "acks": [["d", [[0, 0], [0, 1]]]],
                },
            )
        ]
        assert elements(store, "out") == []
        assert staging_of(store.log).staged_chunks() == 3

    def test_a_restarted_store_completes_the_recorded_transaction(
        self,
        store: Answered,
        tmp_path: Path,
        scene: dict[str, Any],
        killed: list[str],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        store.ask(TxCommitRequest("q", 1, scene["stages"]))
        store.log.close()
        caplog.set_level(logging.INFO, logger="dcps.store.transactions")
        again = open_store(tmp_path / "store")
        try:
            assert elements(again, "out") == [b"o0", b"o1"]
            assert (elements(again, "side", 0), elements(again, "side", 1)) == ([b"y0"], [b"x0"])
            assert records(tmp_path / "store") == []
            assert staging_of(again.log).staged_chunks() == 0
            assert [r.getMessage() for r in caplog.records] == [
                "transaction 'q' epoch 1 completed at start: 4 published, 2 acknowledged"
            ]
            # the acknowledged elements are never delivered again; the third one is
            ok(again.ask(DurableSubscribeRequest("in", "d", "s2", DurableKind.SHARED)))
            got = poll(again, "in", "d", "s2")
            assert (got.offsets, got.data) == ((2,), b"i2")
        finally:
            again.log.close()

    def test_a_recorded_transaction_is_committed_once(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any], killed: list[str]
    ) -> None:
        """Recovery run twice (a second start) appends nothing again: each stage is
        committed once per topic, and the record is gone."""
        store.ask(TxCommitRequest("q", 1, scene["stages"]))
        assert recover_transactions(store.log, store.durables) == 1
        assert recover_transactions(store.log, store.durables) == 0
        assert elements(store, "out") == [b"o0", b"o1"]
        assert poll(store, "in", "d", "s1").offsets == (2,)

    def test_a_record_that_cannot_be_completed_is_dropped_and_the_store_starts(
        self,
        store: Answered,
        tmp_path: Path,
        scene: dict[str, Any],
        killed: list[str],
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Its chunks gone (a damaged file): logged by name, forgotten, and the next
        record is still completed."""
        store.ask(TxCommitRequest("q", 1, scene["stages"]))
        stage(store, "out", "z", 0, "s", 0, 0, b"z0")
        store.ask(TxCommitRequest("z", 0, (("out", "s", 1),)))
        db = store.log._conn
        db.execute("DELETE FROM staged WHERE query = 'q'")
        caplog.set_level(logging.INFO, logger="dcps.store.transactions")
        assert recover_transactions(store.log, store.durables) == 2
        messages = [(r.levelno, r.getMessage()) for r in caplog.records]
        assert (logging.ERROR, "transaction 'q' epoch 1 could not be completed") in messages
        assert (
            logging.INFO,
            "transaction 'z' epoch 0 completed at start: 1 published, 0 acknowledged",
        ) in messages
        assert records(tmp_path / "store") == []
        assert elements(store, "out") == [b"z0"]


class TestAbort:
    def test_abort_drops_the_staged_chunks_and_the_enlisted_acks(
        self, store: Answered, scene: dict[str, Any]
    ) -> None:
        """Every topic's chunks of the transaction go; other transactions' stay; the
        enlisted elements stay held (a later commit of the same name acknowledges none)."""
        stage(store, "out", "q", 2, "s", 0, 0, b"next epoch")
        reply = ok(store.ask(TxAbortRequest("q", 1, scene["stages"])))
        assert (reply.client, int(reply.request_id)) == ("c1", 1)
        staging = staging_of(store.log)
        assert (staging.staged_chunks("out"), staging.staged_chunks("side")) == (1, 0)
        committed = TxCommitted.from_wire(ok(store.ask(TxCommitRequest("q", 1))))
        assert committed == TxCommitted(0, 0)
        ok(store.ask(DurableSubscribeRequest("in", "d", "s2", DurableKind.SHARED)))
        assert poll(store, "in", "d", "s2").offsets == (2,)  # (0, 0), (0, 1): s1 holds them

    def test_a_committed_transaction_cannot_be_aborted(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any], killed: list[str]
    ) -> None:
        store.ask(TxCommitRequest("q", 1, scene["stages"]))  # recorded, not applied
        refused = store.ask(TxAbortRequest("q", 1, scene["stages"]))
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert refused.error == "transaction 'q' epoch 1 is committed: it cannot be aborted"
        assert staging_of(store.log).staged_chunks() == 3
        assert len(records(tmp_path / "store")) == 1

    def test_another_epochs_record_does_not_stop_an_abort(
        self, store: Answered, scene: dict[str, Any], killed: list[str]
    ) -> None:
        stage(store, "out", "q", 2, "s", 0, 0, b"z")
        store.ask(TxCommitRequest("q", 2, (("out", "s", 1),)))  # q/2 recorded
        ok(store.ask(TxAbortRequest("q", 1, scene["stages"])))
        ok(store.ask(TxAbortRequest("p", 2, scene["stages"])))
        assert staging_of(store.log).staged_chunks() == 1  # q/2's, recorded


# -- with a namespace key: a transaction belongs to its session's key ----------------


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[Answered, QueryKey, str]]:
    key = write_key_file(tmp_path / "ns.key")
    s = open_store(tmp_path / "keyed", key=str(tmp_path / "ns.key"))
    own = QueryKey(key.secret, "q")
    try:
        yield s, own, owned_query("q", own)
    finally:
        s.log.close()


def digest_of(*chunks: StageRequest) -> str:
    d = StageDigest()
    for c in chunks:
        d.add(c.seq, c.channel, b"".join(n.to_bytes(4, "little") for n in c.sizes), c.blob)
    return d.hexdigest()


def signed(
    key: QueryKey, cls: type[TxCommitRequest], query: str, epoch: int, stages: Any, digests: Any
) -> TxCommitRequest:
    op, topics, what = tx_signed(cls.op, stages, digests)
    return cls(query, epoch, stages, digests, key.prove(op, topics, query, epoch, what))


class TestOwnedTransactions:
    def test_the_owner_commits_with_digests_of_two_topics(
        self, keyed: tuple[Answered, QueryKey, str]
    ) -> None:
        store, key, query = keyed
        ok(store.ask(EnsureTopicRequest("a", 1, True)))
        ok(store.ask(EnsureTopicRequest("b", 1, True)))
        a0 = stage(store, "a", query, 1, "s", 0, 0, b"a0")
        a1 = stage(store, "a", query, 1, "s", 1, 0, b"a1", b"a2")
        b0 = stage(store, "b", query, 1, "s", 0, 0, b"b0")
        stages = (("a", "s", 2), ("b", "s", 1))
        digests = (digest_of(a0, a1), digest_of(b0))
        done = ok(store.ask(signed(key, TxCommitRequest, query, 1, stages, digests)))
        assert TxCommitted.from_wire(done) == TxCommitted(4, 0)
        assert (elements(store, "a"), elements(store, "b")) == ([b"a0", b"a1", b"a2"], [b"b0"])

    def test_a_commit_without_digests_is_refused(
        self, keyed: tuple[Answered, QueryKey, str]
    ) -> None:
        store, key, query = keyed
        ok(store.ask(EnsureTopicRequest("a", 1, True)))
        stage(store, "a", query, 1, "s", 0, 0, b"a0")
        refused = store.ask(signed(key, TxCommitRequest, query, 1, (("a", "s", 1),), ()))
        assert refused.status == ErrorCode.BAD_PARAMETER
        assert refused.error == (
            f"a TX_COMMIT of transaction {query!r} carries no stage digests: the store's "
            "namespace has a key"
        )
        assert elements(store, "a") == []

    def test_a_replaced_chunk_refuses_the_commit(
        self, keyed: tuple[Answered, QueryKey, str]
    ) -> None:
        """The second topic's stage does not hash to its digest: nothing of either topic."""
        store, key, query = keyed
        ok(store.ask(EnsureTopicRequest("a", 1, True)))
        ok(store.ask(EnsureTopicRequest("b", 1, True)))
        a0 = stage(store, "a", query, 1, "s", 0, 0, b"a0")
        b0 = stage(store, "b", query, 1, "s", 0, 0, b"b0")
        stage(store, "b", query, 1, "s", 0, 0, b"XX")  # replaced by another key holder
        stages = (("a", "s", 1), ("b", "s", 1))
        refused = store.ask(
            signed(key, TxCommitRequest, query, 1, stages, (digest_of(a0), digest_of(b0)))
        )
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert refused.error == (
            f"cannot commit transaction {query!r} epoch 1: the chunks of stage 's' are not what "
            "its writer staged (replaced by another client?): nothing committed, run the batch "
            "again"
        )
        assert (elements(store, "a"), elements(store, "b")) == ([], [])

    def test_another_keys_commit_and_abort_are_refused(
        self, keyed: tuple[Answered, QueryKey, str]
    ) -> None:
        store, key, query = keyed
        ok(store.ask(EnsureTopicRequest("a", 1, True)))
        a0 = stage(store, "a", query, 1, "s", 0, 0, b"a0")
        stages, digests = (("a", "s", 1),), (digest_of(a0),)
        other = QueryKey(secrets.token_bytes(32), "q")
        for cls in (TxCommitRequest, TxAbortRequest):
            forged = store.ask(
                signed(other, cls, query, 1, stages, digests if cls is TxCommitRequest else ())
            )
            assert forged.status == ErrorCode.ILLEGAL_OPERATION
            assert "not the transaction's" in forged.error
        unsigned = store.ask(TxAbortRequest(query, 1, stages))
        assert unsigned.status == ErrorCode.ILLEGAL_OPERATION
        assert "no proof of the query's key" in unsigned.error
        assert staging_of(store.log).staged_chunks() == 1
        ok(store.ask(signed(key, TxCommitRequest, query, 1, stages, digests)))
        assert elements(store, "a") == [b"a0"]

    def test_the_owner_aborts_without_digests(self, keyed: tuple[Answered, QueryKey, str]) -> None:
        store, key, query = keyed
        ok(store.ask(EnsureTopicRequest("a", 1, True)))
        stage(store, "a", query, 1, "s", 0, 0, b"a0")
        ok(store.ask(signed(key, TxAbortRequest, query, 1, (("a", "s", 1),), ())))
        assert staging_of(store.log).staged_chunks() == 0


def sabotage(path: Path, sql: str) -> None:
    """Change the store's file as another program would (a second connection)."""
    db = sqlite3.connect(path / STORE_FILE)
    try:
        db.execute(sql)
        db.commit()
    finally:
        db.close()


class TestFailuresNameTheStep:
    """A SQLite failure at each step is a typed error naming the step and the file, and
    changes nothing."""

    def test_checking_the_staged_chunks(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any]
    ) -> None:
        sabotage(tmp_path / "store", "ALTER TABLE staged RENAME TO hidden")
        failed = store.ask(TxCommitRequest("q", 1, scene["stages"]))
        assert "checking the staged chunks of transaction 'q' epoch 1" in failed.error
        assert str(tmp_path / "store" / STORE_FILE) in failed.error
        assert records(tmp_path / "store") == []

    def test_writing_the_commit_record(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any]
    ) -> None:
        sabotage(
            tmp_path / "store",
            "CREATE TRIGGER no_commit BEFORE INSERT ON durable_transactions"
            " BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END",
        )
        failed = store.ask(TxCommitRequest("q", 1, scene["stages"]))
        assert "committing transaction 'q' epoch 1" in failed.error
        assert "refused by a trigger" in failed.error
        assert elements(store, "out") == []
        assert staging_of(store.log).staged_chunks() == 3

    def test_deleting_the_commit_record(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any]
    ) -> None:
        """Applied, but the record cannot be deleted: the error names the step, and the
        record stays for the next start (which commits nothing twice)."""
        sabotage(
            tmp_path / "store",
            "CREATE TRIGGER keep BEFORE DELETE ON durable_transactions"
            " BEGIN SELECT RAISE(ABORT, 'kept by a trigger'); END",
        )
        failed = store.ask(TxCommitRequest("q", 1, scene["stages"]))
        assert "ending transaction 'q' epoch 1" in failed.error
        assert "kept by a trigger" in failed.error
        assert len(records(tmp_path / "store")) == 1

    def test_looking_up_a_transaction_to_abort(
        self, store: Answered, tmp_path: Path, scene: dict[str, Any]
    ) -> None:
        sabotage(tmp_path / "store", "ALTER TABLE durable_transactions RENAME TO hidden")
        failed = store.ask(TxAbortRequest("q", 1, scene["stages"]))
        path = tmp_path / "store" / STORE_FILE
        assert failed.error.startswith(f"{path}: looking up a transaction failed: ")
        assert staging_of(store.log).staged_chunks() == 3

    def test_reading_the_records_at_start(self, store: Answered, tmp_path: Path) -> None:
        sabotage(tmp_path / "store", "ALTER TABLE durable_transactions RENAME TO hidden")
        with pytest.raises(DcpsError) as failed:
            recover_transactions(store.log, store.durables)
        path = tmp_path / "store" / STORE_FILE
        assert str(failed.value).startswith(f"{path}: reading the recorded transactions failed: ")
