"""Transactions over durables: staged publishes and enlisted acknowledgements, together.

A JMS transacted session (``dcps.jms``) commits what it published and what it
consumed as one transaction ``(query, epoch)``:

1. its publishes are staged (STAGE, ``_staging.py``: invisible until committed);
2. each of its subscribers enlists its acknowledgements (DURABLE_TX_ACK, proven
   like any acknowledgement of that subscriber): the store checks that the
   subscriber holds the elements and keeps the list, applying nothing;
3. TX_COMMIT names the stages. The store checks every stage is staged whole
   and every enlisted element still held, then writes the transaction's
   *commit record* (table ``durable_transactions``) in one SQLite transaction:
   that write is the commit point. It then makes the stages visible
   (``StagingLog.commit``, idempotent per topic), applies the
   acknowledgements and deletes the record.

A store killed before the commit point has published and acknowledged
nothing of the transaction (the elements are redelivered, the staged chunks
are never visible); one killed after it finds the record when it starts and
completes the transaction (a stage committed already is not appended again;
an acknowledgement is idempotent). Either way, both hold or neither does.
TX_ABORT drops the staged chunks and the enlisted acknowledgements.

With a namespace key a transaction belongs to its session: the session holds
a key of its own (``dcps/wire/_auth_stage.py``'s :class:`QueryKey`, from a
random secret that never leaves the session) whose fingerprint ends the
transaction's name, and signs its TX_COMMIT (every stage with its chunk
count and the digest of its chunks) and TX_ABORT (:func:`tx_signed`). The
store checks the proof (:func:`check_proof`: the transaction's key, a valid
signature, fresh) and the staged chunks against the digests before the
commit point: another holder of the namespace key can neither commit nor
abort the transaction, nor replace what it staged (refused with
``IllegalOperationError``, ``PreconditionNotMetError``; nothing changes).
"""

from __future__ import annotations

import json
import logging
import sqlite3
from typing import TYPE_CHECKING, Any

from dcps._crash import crash_point
from dcps.wire._auth_stage import check_proof
from dcps.wire._codes import Op
from dcps.wire._durables import TxAbortRequest, TxCommitRequest, TxCommitted, tx_signed
from dcps.wire._replies import ok_reply
from dcps.wire._requests import PublishRequest
from idl._errors import BadParameterError, PreconditionNotMetError, UnsupportedError

from ._log import ChannelLog
from ._staging import CommittedChunk, staging_of

if TYPE_CHECKING:
    from ._durable_state import Position
    from ._durables import DurableService
    from ._service import Store, _Call

__all__ = ["on_tx_abort", "on_tx_commit", "recover_transactions"]

_log = logging.getLogger("dcps.store.transactions")

#: The acknowledgements of a transaction: (durable name, positions) each.
Acks = list[tuple[str, list["Position"]]]


def _one_store(store: Store) -> None:
    if store.share.count != 1:
        raise UnsupportedError(
            f"transactions need one store for namespace {store.namespace!r}: this store "
            f"serves share {store.share}"
        )


def _check_owner(store: Store, r: TxCommitRequest) -> None:
    """With a namespace key: refuse a TX_COMMIT or TX_ABORT not signed by the key of the
    session that owns the transaction (IllegalOperationError; nothing changes)."""
    if not store._sealer.enabled:
        return
    if r.op is Op.TX_COMMIT and len(r.digests) != len(r.stages):
        raise BadParameterError(
            f"a TX_COMMIT of transaction {r.query!r} carries no stage digests: the store's "
            "namespace has a key"
        )
    op, topics, signed = tx_signed(r.op, r.stages, r.digests)
    check_proof(r.proof, op, topics, r.query, r.epoch, signed)


def _check_staged(log: ChannelLog, r: TxCommitRequest) -> None:
    """Refuse a commit whose stages are not all staged whole, or (with digests) not what
    the session staged (before the commit point)."""
    where = f"transaction {r.query!r} epoch {r.epoch}"
    with log.read(f"checking the staged chunks of {where}") as db:
        for topic, stage, chunks in r.stages:
            row = db.execute(
                "SELECT count(*) FROM staged s JOIN topics t ON t.id = s.topic_id"
                " WHERE t.name = ? AND s.query = ? AND s.epoch = ? AND s.stage = ?",
                (topic, r.query, r.epoch, stage),
            ).fetchone()
            if int(row[0]) != chunks:
                raise PreconditionNotMetError(
                    f"cannot commit {where}: stage {stage!r} of topic {topic!r} has "
                    f"{int(row[0])} of its {chunks} chunks staged (transaction rolled back)"
                )
    if r.digests:
        staging = staging_of(log)
        for (topic, stage, chunks), digest in zip(r.stages, r.digests, strict=True):
            tid, _ = log._topic(topic)
            staging._check_digests(tid, where, r.query, r.epoch, [(stage, chunks)], [digest])


def _apply(
    log: ChannelLog,
    service: DurableService,
    query: str,
    epoch: int,
    stages: list[tuple[str, str, int]],
    acks: Acks,
) -> tuple[int, int, list[tuple[str, CommittedChunk]]]:
    """Complete a recorded transaction: stages visible, acks applied, record deleted."""
    staging = staging_of(log)
    by_topic: dict[str, list[tuple[str, int]]] = {}
    for topic, stage, count in stages:
        by_topic.setdefault(topic, []).append((stage, count))
    published = 0
    placed: list[tuple[str, CommittedChunk]] = []
    for topic, named in by_topic.items():
        answer, committed = staging.commit(topic, query, epoch, named)
        published += answer.elements
        placed.extend((topic, c) for c in committed)
    acknowledged = service.apply_acks(acks)

    _forget(log, query, epoch)
    return published, acknowledged, placed


def _forget(log: ChannelLog, query: str, epoch: int) -> None:
    """Delete the commit record of ``(query, epoch)``."""

    def forget(db: sqlite3.Connection) -> None:
        db.execute("DELETE FROM durable_transactions WHERE query = ? AND epoch = ?", (query, epoch))

    log.write(f"ending transaction {query!r} epoch {epoch}", forget)


def on_tx_commit(store: Store, call: _Call[TxCommitRequest]) -> None:
    """TX_COMMIT: check, write the commit record (the commit point), apply, push live."""
    r = call.request
    _one_store(store)
    _check_owner(store, r)
    service = store.durables
    acks = service.take_enlisted(r.query, r.epoch)  # raises if one is no longer held
    _check_staged(store.log, r)
    record = json.dumps(
        {
            "stages": [list(s) for s in r.stages],
            "acks": [[name, [list(p) for p in positions]] for name, positions in acks],
        }
    )

    def commit_point(db: sqlite3.Connection) -> None:
        db.execute(
            "INSERT OR REPLACE INTO durable_transactions VALUES (?, ?, ?)",
            (r.query, r.epoch, record),
        )

    store.log.write(f"committing transaction {r.query!r} epoch {r.epoch}", commit_point)
    crash_point("store-after-commit-point")  # test-only (dcps/_crash.py)
    published, acknowledged, placed = _apply(
        store.log, service, r.query, r.epoch, list(r.stages), acks
    )
    store._reply(call, TxCommitted(published, acknowledged))
    staging = staging_of(store.log)
    for topic, chunk in placed:  # live, as on_commit_staged pushes a Spark commit
        packed = staging.chunk_payloads(topic, chunk)
        batch = PublishRequest(topic, chunk.channel, list(packed.sizes), packed.blob)
        store._push(batch, (chunk.first, chunk.stamp))
        store._tell_durables(batch, chunk.first, chunk.stamp)
    for topic in {t for t, _ in placed}:
        store.log.trim_unconsumed(topic)


def on_tx_abort(store: Store, call: _Call[TxAbortRequest]) -> None:
    """TX_ABORT: drop the transaction's staged chunks and enlisted acknowledgements."""
    r = call.request
    _one_store(store)
    _check_owner(store, r)
    with store.log.read("looking up a transaction") as db:
        recorded = db.execute(
            "SELECT 1 FROM durable_transactions WHERE query = ? AND epoch = ?", (r.query, r.epoch)
        ).fetchone()
    if recorded is not None:
        raise PreconditionNotMetError(
            f"transaction {r.query!r} epoch {r.epoch} is committed: it cannot be aborted"
        )
    store.durables.drop_enlisted(r.query, r.epoch)
    staging = staging_of(store.log)
    for topic in {t for t, _, _ in r.stages}:
        staging.abort(topic, r.query, r.epoch)
    store._answer(call.client, call.request_id, ok_reply(call.client, call.request_id))


def recover_transactions(log: ChannelLog, service: DurableService) -> int:
    """Complete the transactions a killed store had recorded but not applied; how many."""
    with log.read("reading the recorded transactions") as db:
        rows = db.execute("SELECT query, epoch, record FROM durable_transactions").fetchall()
    for query, epoch, text in rows:
        record: dict[str, Any] = json.loads(text)
        stages = [(str(t), str(s), int(n)) for t, s, n in record["stages"]]
        acks: Acks = [(str(n), [(int(c), int(o)) for c, o in p]) for n, p in record["acks"]]
        try:
            published, acknowledged, _ = _apply(log, service, str(query), int(epoch), stages, acks)
        except Exception:  # (its chunks gone: a damaged file) the store starts all the same
            _log.exception("transaction %r epoch %d could not be completed", query, epoch)
            _forget(log, str(query), int(epoch))
            continue
        _log.info(
            "transaction %r epoch %d completed at start: %d published, %d acknowledged",
            query,
            epoch,
            published,
            acknowledged,
        )
    return len(rows)
