"""Staged publishing in the store: the store's half of a two-phase commit.

A transaction is ``(topic, query, epoch)`` (for Spark: the streaming query's
id and the micro-batch id). Writers stage chunks of one channel each under a
stage id of their own (one per task attempt) and a chunk number; staged
chunks sit in table ``staged`` and are invisible to readers. A commit names
the stages to keep and how many chunks each staged; in ONE SQLite
transaction the store then appends exactly those chunks to their channels
(offsets and the accept timestamp are assigned now, in the order partition,
stage, chunk), records the transaction in ``staged_commits`` and deletes
every staged chunk of the transaction, kept or not. After the commit the new
batches are pushed live like published ones.

* A commit of a transaction already committed appends nothing and answers
  with the first commit's counts (``already``): a driver that restarts from
  its checkpoint and commits the same micro-batch again adds nothing.
* A commit naming a stage whose chunks are not all staged is refused
  (``PreconditionNotMetError`` naming topic, query, epoch and stage) and
  changes nothing.
* Abort deletes the transaction's staged chunks.
* Staged chunks never committed are cleaned up: at each commit of a query,
  those of its earlier epochs (a micro-batch is committed before the next
  starts, so they can never be committed), and at every commit those older
  than :data:`STAGED_TTL_NS`. The record of committed transactions keeps the
  last :data:`KEPT_EPOCHS` epochs of each query.

A staged chunk's body is written once: a body of ``INLINE_MAX`` bytes or
more goes, as the log's large batches do, to the end of its topic's segment
file (``dcps/store/_log_segments.py``) and its ``staged`` row keeps where
(``segment``, ``pos``, ``crc``); the commit's ``batches`` row takes over that
reference, so committing copies no payload byte and deleting the staged rows
touches no overflow page (format version 12). Smaller bodies stay inline and
are copied at the commit. The log keeps a segment while a staged row refers
to it (its open-time tidy and its retention count them); the segments that
only dropped staged chunks referred to are released as retention releases
its own.

Staging writes the chunk with ``synchronous=NORMAL`` whatever the log's sync
mode: a staged chunk lost in a power failure makes the commit fail (chunks
missing) and Spark run the micro-batch again, while the commit itself is as
durable as any publish (its fsync covers the staged pages before it, and
with ``SyncMode.FULL`` the segment files of the committed chunks are
``fdatasync``-ed before it).

With a namespace key a transaction belongs to the query key whose
fingerprint ends its name (``dcps/wire/_auth_stage.py``): COMMIT_STAGED and
ABORT_STAGED must carry that key's fresh signature, and a commit names each
stage's digest, which the staged chunks must hash to. Another key holder can
then neither commit nor abort the transaction, nor change a chunk it holds.

This module works on the :class:`~dcps.store._log.ChannelLog`'s connection,
transactions and channel states (one package, one thread: the store's).
"""

from __future__ import annotations

import os
import sqlite3
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING

import attrs
import numpy as np

from dcps.wire._auth_stage import PROOF_WINDOW_NS, StageDigest, check_proof
from dcps.wire._batches import ELEMENT_STEP_NS, PackedPayloads
from dcps.wire._requests import PublishRequest
from dcps.wire._staging import (
    AbortStagedRequest,
    CommitStagedRequest,
    Staged,
    StagedAborted,
    StagedCommitted,
    StageRequest,
)
from idl._errors import BadParameterError, PreconditionNotMetError, UnsupportedError

from ._log import ChannelLog
from ._log_format import first_stamp, os_error, sql_error

if TYPE_CHECKING:
    from ._service import Store, _Call

__all__ = [
    "KEPT_EPOCHS",
    "STAGED_TTL_NS",
    "CommittedChunk",
    "StagingLog",
    "on_abort_staged",
    "on_commit_staged",
    "on_stage",
    "staging_of",
]

#: Staged chunks older than this (ns) are deleted at the next commit (7 days).
STAGED_TTL_NS = 7 * 24 * 3600 * 10**9
#: Committed transactions remembered per query (the newest epochs).
KEPT_EPOCHS = 1000


@attrs.frozen
class CommittedChunk:
    """A staged chunk made visible: elements ``first .. first + count - 1`` of ``channel``."""

    channel: int
    first: int
    count: int
    stamp: int


#: Seconds a signed abort's proof is accepted (either side of the store's clock).
_WINDOW_S = PROOF_WINDOW_NS / 1e9
#: Signed aborts remembered at most (each costs its signer a signature, the store a check).
_MAX_ABORTS = 4096


class StagingLog:
    """Staged chunks and committed transactions of one :class:`ChannelLog` (see module doc)."""

    def __init__(self, log: ChannelLog) -> None:
        self.log = log
        self._sync: str | None = None
        # signed aborts that took effect (proof -> when, answer): see ``aborted_by``
        self._aborts: OrderedDict[str, tuple[float, StagedAborted]] = OrderedDict()

    # -- signed aborts take effect once ------------------------------------

    def aborted_by(self, proof: str) -> StagedAborted | None:
        """The answer of the abort that ``proof`` signed, if it took effect already.

        A signed ABORT_STAGED stays fresh for ``PROOF_WINDOW_NS``. Spark runs an
        aborted micro-batch again under the same epoch, so the same proof sent
        again by whoever read it off the wire would drop what the retry staged:
        instead it gets the first answer and drops nothing (a resend by the
        driver itself gets the answer it missed).
        """
        now = time.monotonic()
        while self._aborts and next(iter(self._aborts.values()))[0] < now - 2 * _WINDOW_S:
            self._aborts.popitem(last=False)
        kept = self._aborts.get(proof)
        return None if kept is None else kept[1]

    def abort_took_effect(self, proof: str, answer: StagedAborted) -> None:
        """Remember that ``proof``'s abort was applied (bounded, forgotten after the window
        in which ``check_proof`` would still accept it)."""
        self._aborts[proof] = (time.monotonic(), answer)
        while len(self._aborts) > _MAX_ABORTS:
            self._aborts.popitem(last=False)

    # -- staging -----------------------------------------------------------

    def stage(self, r: StageRequest, now: int | None = None) -> int:
        """Stage one chunk (replacing a chunk staged before under the same numbers)."""
        log = self.log
        tid, _ = log._state(r.topic, r.channel)  # the topic and channel must exist
        sizes = PackedPayloads(r.sizes, r.blob).check()
        stamp = log._clock() if now is None else now
        db = log._conn
        body = self._body(tid, r.blob)

        def insert() -> None:
            db.execute(
                "INSERT OR REPLACE INTO staged (topic_id, query, epoch, stage, seq, partition,"
                " channel, count, staged_ns, sizes, data, segment, pos, crc)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    tid,
                    r.query,
                    r.epoch,
                    r.stage,
                    r.seq,
                    r.partition,
                    r.channel,
                    len(r.sizes),
                    stamp,
                    sizes,
                    *body,
                ),
            )

        self._relaxed(True)
        try:
            log._write(f"staging to topic {r.topic!r} channel {r.channel}", insert, small=False)
        finally:
            self._relaxed(False)
        return len(r.sizes)

    def _body(self, tid: int, blob: bytes | memoryview) -> tuple[bytes, int | None, int, int]:
        """``(data, segment, pos, crc)`` of a staged row: large bodies go to a segment file
        (not synced: see the module doc; a body whose row never commits is garbage the
        log's next open cuts off or deletes)."""
        return self.log.store_body(tid, blob, "writing a staged chunk to a segment file")

    def _sync_bodies(self, tid: int, segments: set[int]) -> None:
        """With ``SyncMode.FULL``: make the segment files of committed chunks durable.

        The staging write synced nothing, and a failed transaction since may have
        made the log forget which files are dirty: each file is synced by name.
        """
        log = self.log
        if not log._full_sync:
            return
        try:
            for seq in sorted(segments):
                fd = os.open(log._segments.path(tid, seq), os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                finally:
                    os.close(fd)
            log._segments.sync()  # directories created since
        except OSError as exc:
            raise os_error(exc, log._segments.root, "syncing staged chunks' segments") from exc

    def _release(self, tid: int, segments: set[int]) -> None:
        """Inside a transaction that deleted staged rows: release the segments of
        ``segments`` no row refers to any more (deleted after the commit, as the
        log's retention deletes its own)."""
        log = self.log
        db = log._conn
        for seq in sorted(segments):
            used = db.execute(
                "SELECT 1 FROM batches WHERE topic_id = ? AND segment = ? UNION ALL"
                " SELECT 1 FROM staged WHERE topic_id = ? AND segment = ? LIMIT 1",
                (tid, seq, tid, seq),
            ).fetchone()
            if used is None:
                log._released.append((tid, seq))
                log._segments.retire(tid, seq)

    def _relaxed(self, on: bool) -> None:
        """Switch to ``synchronous=NORMAL`` for a staging write, and back."""
        db = self.log._conn
        try:
            if self._sync is None:
                self._sync = str(db.execute("PRAGMA synchronous").fetchone()[0])
            db.execute(f"PRAGMA synchronous={'NORMAL' if on else self._sync}")
        except sqlite3.Error as exc:
            raise sql_error(exc, self.log.path, "setting the staging sync mode") from exc

    # -- committing --------------------------------------------------------

    def commit(
        self,
        topic: str,
        query: str,
        epoch: int,
        stages: Sequence[tuple[str, int]],
        digests: Sequence[str] = (),
    ) -> tuple[StagedCommitted, list[CommittedChunk]]:
        """Make exactly ``stages``' chunks visible in one transaction (see the module doc).

        ``digests`` (one per stage, if given): what each stage's chunks must hash to
        (:class:`~dcps.wire._auth_stage.StageDigest`); a mismatch refuses the commit whole.
        """
        log = self.log
        tid, _ = log._topic(topic)
        db = log._conn
        where = f"topic {topic!r} query {query!r} epoch {epoch}"
        try:
            done = db.execute(
                "SELECT elements, chunks FROM staged_commits"
                " WHERE topic_id = ? AND query = ? AND epoch = ?",
                (tid, query, epoch),
            ).fetchone()
            rows = (
                []
                if done is not None
                else db.execute(
                    "SELECT rowid, stage, seq, partition, channel, count, segment FROM staged"
                    " WHERE topic_id = ? AND query = ? AND epoch = ?",
                    (tid, query, epoch),
                ).fetchall()
            )
        except sqlite3.Error as exc:
            raise sql_error(exc, log.path, f"reading the staged chunks of {where}") from exc
        now = log._clock()
        if done is not None:  # committed before: drop late chunks, append nothing
            log._write(f"committing {where} again", lambda: self._cleanup(tid, query, epoch, now))
            return StagedCommitted(int(done[0]), int(done[1]), already=True), []
        wanted = dict(stages)
        kept: dict[str, list[tuple[int, str, int, int, int, int]]] = {s: [] for s in wanted}
        segments: set[int] = set()  # of the kept chunks' bodies
        for rowid, stage, seq, partition, channel, count, segment in rows:
            if stage in kept:
                kept[stage].append((partition, stage, seq, channel, count, rowid))
                if segment is not None:
                    segments.add(int(segment))
        for stage, chunks in kept.items():
            if sorted(c[2] for c in chunks) != list(range(wanted[stage])):
                raise PreconditionNotMetError(
                    f"cannot commit {where}: stage {stage!r} reported {wanted[stage]} staged "
                    f"chunks, the store holds {len(chunks)} of them (chunks lost: run the "
                    "batch again)"
                )
        if digests:
            self._check_digests(tid, where, query, epoch, stages, digests)
        order = sorted(c for chunks in kept.values() for c in chunks)  # partition, stage, seq
        placed: list[CommittedChunk] = []
        touched: dict[int, list[int]] = {}
        copies: list[tuple[int, int, int]] = []
        for _, _, _, channel, count, rowid in order:
            if not count:
                continue
            _, state = log._state(topic, channel)
            st = touched.setdefault(channel, list(state))
            ts = first_stamp(now, st[2])  # one timestamp per element, as the log's appends
            placed.append(CommittedChunk(channel, st[1], count, ts))
            copies.append((st[1], ts, rowid))
            st[1] += count
            st[2] = ts + (count - 1) * ELEMENT_STEP_NS
        elements = sum(c.count for c in placed)

        def apply() -> None:
            self._sync_bodies(tid, segments)
            db.executemany(
                # a body in a segment file moves by reference; an inline one is copied
                "INSERT INTO batches (topic_id, channel, first_offset, count, ts, sizes, data,"
                " segment, pos, crc) SELECT topic_id, channel, ?, count, ?, sizes, data,"
                " segment, pos, crc FROM staged WHERE rowid = ?",
                copies,
            )
            db.executemany(
                "UPDATE channels SET next_offset = ?, last_ts = ?"
                " WHERE topic_id = ? AND channel = ?",
                [(st[1], st[2], tid, ch) for ch, st in touched.items()],
            )
            db.execute(
                "INSERT INTO staged_commits VALUES (?, ?, ?, ?, ?, ?)",
                (tid, query, epoch, elements, len(placed), now),
            )
            self._cleanup(tid, query, epoch, now)

        log._write(f"committing {where}", apply, small=False)
        for channel, st in touched.items():
            log._state(topic, channel)[1][:] = st
        return StagedCommitted(elements, len(placed)), placed

    def _check_digests(
        self,
        tid: int,
        where: str,
        query: str,
        epoch: int,
        stages: Sequence[tuple[str, int]],
        digests: Sequence[str],
    ) -> None:
        """Refuse the commit if a stage's chunks are not what its writer staged."""
        db = self.log._conn
        for (stage, chunks), expected in zip(stages, digests, strict=True):
            digest = StageDigest()
            try:
                rows = db.execute(
                    "SELECT seq, channel, sizes, data, segment, pos FROM staged WHERE"
                    " topic_id = ? AND query = ? AND epoch = ? AND stage = ? AND seq < ?"
                    " ORDER BY seq",
                    (tid, query, epoch, stage, chunks),
                )
                for seq, channel, sizes, data, segment, pos in rows:
                    body = self._read_body(tid, sizes, data, segment, pos)
                    digest.add(int(seq), int(channel), bytes(sizes), body)
            except sqlite3.Error as exc:
                raise sql_error(
                    exc, self.log.path, f"reading the staged chunks of {where}"
                ) from exc
            except OSError as exc:  # a body's segment gone: not what was staged
                raise os_error(
                    exc, self.log._segments.root, f"reading the staged chunks of {where}"
                ) from exc
            if digest.hexdigest() != expected:
                raise PreconditionNotMetError(
                    f"cannot commit {where}: the chunks of stage {stage!r} are not what its "
                    "writer staged (replaced by another client?): nothing committed, run the "
                    "batch again"
                )

    def _cleanup(self, tid: int, query: str, epoch: int, now: int) -> None:
        """Delete staged chunks that can never be committed; forget old transactions."""
        db = self.log._conn
        dropped = db.execute(
            "SELECT DISTINCT topic_id, segment FROM staged WHERE segment IS NOT NULL AND"
            " ((topic_id = ? AND query = ? AND epoch <= ?) OR staged_ns < ?)",
            (tid, query, epoch, now - STAGED_TTL_NS),
        ).fetchall()
        db.execute(
            "DELETE FROM staged WHERE topic_id = ? AND query = ? AND epoch <= ?",
            (tid, query, epoch),
        )
        db.execute("DELETE FROM staged WHERE staged_ns < ?", (now - STAGED_TTL_NS,))
        db.execute(
            "DELETE FROM staged_commits WHERE topic_id = ? AND query = ? AND epoch < ?",
            (tid, query, epoch - KEPT_EPOCHS),
        )
        by_topic: dict[int, set[int]] = {}
        for t, seq in dropped:
            by_topic.setdefault(int(t), set()).add(int(seq))
        for t, seqs in by_topic.items():
            self._release(t, seqs)

    def abort(self, topic: str, query: str, epoch: int) -> int:
        """Delete the staged chunks of ``(topic, query, epoch)``; how many there were."""
        log = self.log
        tid, _ = log._topic(topic)
        db = log._conn

        def delete() -> int:
            segments = db.execute(
                "SELECT DISTINCT segment FROM staged WHERE topic_id = ? AND query = ?"
                " AND epoch = ? AND segment IS NOT NULL",
                (tid, query, epoch),
            ).fetchall()
            cur = db.execute(
                "DELETE FROM staged WHERE topic_id = ? AND query = ? AND epoch = ?",
                (tid, query, epoch),
            )
            self._release(tid, {int(seq) for (seq,) in segments})
            return int(cur.rowcount)

        return log._write(f"aborting topic {topic!r} query {query!r} epoch {epoch}", delete)

    def staged_chunks(self, topic: str | None = None) -> int:
        """How many chunks are staged (of ``topic``, or of every topic)."""
        db = self.log._conn
        if topic is None:
            return int(db.execute("SELECT count(*) FROM staged").fetchone()[0])
        tid, _ = self.log._topic(topic)
        return int(
            db.execute("SELECT count(*) FROM staged WHERE topic_id = ?", (tid,)).fetchone()[0]
        )

    def chunk_payloads(self, topic: str, chunk: CommittedChunk) -> PackedPayloads:
        """The elements of a committed chunk, as stored (to push them live)."""
        tid, _ = self.log._topic(topic)
        row = self.log._conn.execute(
            "SELECT sizes, data, segment, pos FROM batches"
            " WHERE topic_id = ? AND channel = ? AND first_offset = ?",
            (tid, chunk.channel, chunk.first),
        ).fetchone()
        try:
            body = self._read_body(tid, row[0], row[1], row[2], row[3])
        except OSError as exc:
            raise os_error(
                exc, self.log._segments.root, f"reading back a committed chunk of {topic!r}"
            ) from exc
        sizes = np.frombuffer(row[0], dtype="<i4").tolist()
        return PackedPayloads(sizes, body)

    def _read_body(
        self, tid: int, sizes: bytes, data: bytes, segment: int | None, pos: int
    ) -> bytes:
        """A staged or committed chunk's payload bytes, inline or from its segment file."""
        if segment is None:
            return bytes(data)
        length = int(np.frombuffer(sizes, dtype="<i4").sum(dtype=np.int64))
        return self.log._segments.read(tid, int(segment), int(pos), length)


_stagings: weakref.WeakKeyDictionary[ChannelLog, StagingLog] = weakref.WeakKeyDictionary()


def staging_of(log: ChannelLog) -> StagingLog:
    """The :class:`StagingLog` of ``log`` (one per log)."""
    staging = _stagings.get(log)
    if staging is None:
        staging = _stagings[log] = StagingLog(log)
    return staging


# -- the store's handlers (registered in Store._HANDLERS) ----------------------------


def _one_store(store: Store) -> None:
    if store.share.count != 1:
        raise UnsupportedError(
            f"staged publishing (the Spark sink's two-phase commit) needs one store for "
            f"namespace {store.namespace!r}: this store serves share {store.share}"
        )


def on_stage(store: Store, call: _Call[StageRequest]) -> None:
    """STAGE: keep one chunk, invisible until committed."""
    r = call.request
    _one_store(store)
    count = staging_of(store.log).stage(r)
    store._reply(call, Staged(count))


def on_commit_staged(store: Store, call: _Call[CommitStagedRequest]) -> None:
    """COMMIT_STAGED: append the named stages' chunks in one transaction, then push them live."""
    r = call.request
    _one_store(store)
    if store._sealer.enabled:
        if len(r.digests) != len(r.stages):
            raise BadParameterError(
                f"a COMMIT_STAGED of {r.query!r} carries no stage digests: the store's "
                "namespace has a key"
            )
        signed = [(s, n, d) for (s, n), d in zip(r.stages, r.digests, strict=True)]
        check_proof(r.proof, "commit", r.topic, r.query, r.epoch, signed)
    staging = staging_of(store.log)
    answer, placed = staging.commit(r.topic, r.query, r.epoch, r.stages, r.digests)
    store._reply(call, answer)
    for chunk in placed:
        packed = staging.chunk_payloads(r.topic, chunk)
        batch = PublishRequest(r.topic, chunk.channel, list(packed.sizes), packed.blob)
        store._push(batch, (chunk.first, chunk.stamp))
    if placed:
        info = store.log.topic(r.topic)
        if not info.retain_consumed and not store.log.groups(r.topic):
            store.log.trim(r.topic)


def on_abort_staged(store: Store, call: _Call[AbortStagedRequest]) -> None:
    """ABORT_STAGED: drop the transaction's staged chunks (a signed abort takes effect once)."""
    r = call.request
    staging = staging_of(store.log)
    if store._sealer.enabled:
        check_proof(r.proof, "abort", r.topic, r.query, r.epoch)
        done = staging.aborted_by(r.proof)
        if done is not None:
            store._reply(call, done)
            return
    answer = StagedAborted(staging.abort(r.topic, r.query, r.epoch))
    if store._sealer.enabled:
        staging.abort_took_effect(r.proof, answer)
    store._reply(call, answer)
