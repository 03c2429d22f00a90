"""What a durability service keeps: per topic and partition, instances and their samples.

The limits are the topic's ``DurabilityService`` QoS as its first writer
announced it: history KEEP_LAST ``depth`` (the oldest sample of an instance
goes) or KEEP_ALL, ``max_samples_per_instance``, ``max_instances`` and
``max_samples`` (a sample beyond a limit is not kept, as a DDS reader
rejects it), and ``service_cleanup_delay``: a disposed instance is forgotten
that long after its dispose. TRANSIENT data lives in memory only;
PERSISTENT data is also written to the store's SQLite file (tables
``durability_*``, see docs/store-format.md) before the sample counts as
kept, and read back when the service starts.

Every kept sample gets the next number (``seq``, the cursor a reader pages by); a
number is never given twice, across restarts too: the file keeps a mark
(``durability_sequence.high``) at or above every number given that
``durability_samples`` does not hold (a sample dropped, a TRANSIENT one), and a
restarted service numbers after the mark and after every sample it keeps.
"""

from __future__ import annotations

import bisect
import fnmatch
import functools
import heapq
import logging
import operator
import sqlite3
import threading
from collections import deque
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Final

import attrs

import qos as q
from dcps.wire._durability import (
    FLAG_DISPOSED,
    FLAG_DISPOSES,
    FLAG_PERSISTENT,
    SampleIdentity,
    StoredSample,
    payload_crc,
)

__all__ = ["Arrival", "HistoryStore", "Limits"]

#: A sample the service took: (instance key, writer GUID, source timestamp, payload, disposes).
Arrival = tuple[bytes, bytes, int, bytes, bool]

#: A kept sample: the fields of a :class:`StoredSample`, in its order, as a plain tuple.
#: Python's collector stops tracking a plain tuple of strings, bytes and ints, never a
#: named tuple: 100 k kept named tuples made every full collection walk them all (measured:
#: 85% of the CPU of keeping a sample). A page turns them into StoredSamples.
_Kept = tuple[str, str, bytes, bytes, int, int, int, bytes]
_KEY: Final = 2
_WRITER: Final = 3
_TS: Final = 4
_SEQ: Final = 5
_FLAGS: Final = 6
_PAYLOAD: Final = 7
_stored = functools.partial(tuple.__new__, StoredSample)
_log = logging.getLogger("dcps.store.durability")
#: Numbers reserved at a time for samples the file does not keep (TRANSIENT topics'):
#: one write of the mark per this many samples; a restarted service skips at most this
#: many numbers (a cursor is opaque: a gap is harmless).
_RESERVE: Final = 4096


def _identity(s: _Kept) -> SampleIdentity:
    return (s[_WRITER], s[_TS], payload_crc(s[_PAYLOAD]))


@attrs.frozen
class Limits:
    """The DurabilityService settings a service honours for one topic."""

    depth: int | None = 1  # KEEP_LAST depth; None: KEEP_ALL
    max_samples: int | None = None
    max_instances: int | None = None
    max_samples_per_instance: int | None = None
    cleanup_delay_ns: int = 0

    @classmethod
    def of(cls, service: q.DurabilityService) -> Limits:
        """The limits a ``DurabilityService`` policy sets."""
        history = service.history
        return cls(
            history.depth if history.kind is q.HistoryKind.KEEP_LAST else None,
            _limit(service.max_samples),
            _limit(service.max_instances),
            _limit(service.max_samples_per_instance),
            _ns(service.service_cleanup_delay),
        )

    def to_text(self) -> str:
        """The limits as stored in the file (five integers, -1 for none)."""
        return ",".join(
            str(-1 if v is None else v)
            for v in (
                self.depth,
                self.max_samples,
                self.max_instances,
                self.max_samples_per_instance,
                self.cleanup_delay_ns,
            )
        )

    @classmethod
    def from_text(cls, text: str) -> Limits:
        """The limits :meth:`to_text` wrote."""
        d, ms, mi, mspi, delay = (int(v) for v in text.split(","))
        return cls(
            None if d < 0 else d,
            None if ms < 0 else ms,
            None if mi < 0 else mi,
            None if mspi < 0 else mspi,
            max(delay, 0),
        )


def _limit(value: int) -> int | None:
    return None if value < 0 else value


def _ns(delay: timedelta) -> int:
    if delay >= timedelta.max:
        return 2**62
    return int(delay.total_seconds() * 1e9)


@attrs.define
class _Instance:
    samples: deque[_Kept] = attrs.field(factory=deque)
    disposed_ns: int | None = None


@attrs.define
class _Topic:
    name: str
    partition: str
    limits: Limits
    persistent: bool
    instances: dict[bytes, _Instance] = attrs.field(factory=dict)
    count: int = 0
    #: every sample kept, in seq order, including dropped ones until compacted: a page
    #: starts by bisection instead of a walk over every instance
    order: list[_Kept] = attrs.field(factory=list)
    #: seqs of the samples in ``order`` that are no longer kept
    dropped: set[int] = attrs.field(factory=set)
    #: the identities of the samples kept: a sample is one per topic and partition (a
    #: writer in two partitions reaches the late joiners of both)
    seen: set[SampleIdentity] = attrs.field(factory=set)


def _insert_by_time(samples: deque[_Kept], sample: _Kept) -> None:
    """Append ``sample``, or insert it in source-timestamp order if it is older than the
    newest kept (a sample another service served while aligning)."""
    if not samples or samples[-1][_TS] <= sample[_TS]:
        samples.append(sample)
        return
    at = len(samples)
    while at > 0 and samples[at - 1][_TS] > sample[_TS]:
        at -= 1
    samples.insert(at, sample)


class HistoryStore:
    """The kept samples of every served topic, in memory, PERSISTENT ones also in ``db``.

    Thread-safe: the service's DDS thread adds, its request thread pages.
    """

    def __init__(self, db: sqlite3.Connection | None = None) -> None:
        self._db = db
        self._topics: dict[tuple[str, str], _Topic] = {}
        self._seq = 0
        #: the mark in the file: no number at or below it is given again
        self._mark = 0
        #: whether ``_mark`` moved past the file's (a dropped PERSISTENT sample's number)
        self._mark_moved = False
        self._lock = threading.Lock()
        #: samples not kept because a limit was reached (for operators and tests)
        self.rejected = 0
        if db is not None:
            self._load(db)

    # -- loading -------------------------------------------------------------------
    def _load(self, db: sqlite3.Connection) -> None:
        for name, partition, limits in db.execute(
            "SELECT topic, partition, limits FROM durability_topics"
        ):
            self._topics[(name, partition)] = _Topic(
                name, partition, Limits.from_text(limits), True
            )
        for name, partition, key, disposed in db.execute(
            "SELECT topic, partition, key, disposed_ns FROM durability_instances"
        ):
            topic = self._topics.get((name, partition))
            if topic is not None:
                topic.instances.setdefault(bytes(key), _Instance()).disposed_ns = disposed
        rows = db.execute(
            "SELECT seq, topic, partition, key, writer, ts, flags, payload "
            "FROM durability_samples ORDER BY seq"
        )
        for seq, name, partition, key, writer, ts, flags, payload in rows:
            topic = self._topics.get((name, partition))
            if topic is None:
                continue
            sample = (name, partition, bytes(key), bytes(writer), ts, seq, flags, bytes(payload))
            topic.instances.setdefault(sample[_KEY], _Instance()).samples.append(sample)
            topic.order.append(sample)  # in seq order (ORDER BY seq)
            topic.count += 1
            topic.seen.add(_identity(sample))
            self._seq = max(self._seq, seq)
        row = db.execute("SELECT high FROM durability_sequence").fetchone()
        self._mark = 0 if row is None else row[0]
        self._seq = max(self._seq, self._mark)

    # -- topics ----------------------------------------------------------------------
    def serve(self, topic: str, partition: str, limits: Limits, persistent: bool) -> None:
        """Keep samples of ``topic`` in ``partition`` from now on, with ``limits`` (the
        latest writer's: the limits of one topic are the same for all its writers)."""
        with self._lock:
            if (topic, partition) in self._topics:
                found = self._topics[(topic, partition)]
                if (persistent and not found.persistent) or limits != found.limits:
                    found.persistent = found.persistent or persistent
                    found.limits = limits
                    if found.persistent:
                        self._save_topic(found)
                return
            found = self._topics[(topic, partition)] = _Topic(topic, partition, limits, persistent)
            if persistent:
                self._save_topic(found)

    def _save_topic(self, topic: _Topic) -> None:
        if self._db is None:
            return
        with self._db:
            self._db.execute(
                "INSERT OR REPLACE INTO durability_topics VALUES (?, ?, ?)",
                (topic.name, topic.partition, topic.limits.to_text()),
            )
            for key, inst in topic.instances.items():
                self._save_instance(topic, key, inst)
            for inst in topic.instances.values():
                for s in inst.samples:
                    self._insert(s)

    def topics(self) -> list[tuple[str, str]]:
        """(topic, partition) of everything served."""
        with self._lock:
            return list(self._topics)

    # -- adding ----------------------------------------------------------------------
    def add(
        self,
        topic: str,
        partition: str,
        key: bytes,
        writer: bytes,
        timestamp: int,
        payload: bytes,
        disposes: bool,
        now_ns: int,
    ) -> StoredSample | None:
        """Keep one sample (a no-op for one already kept); the kept record, or None."""
        row = (key, writer, timestamp, payload, disposes)
        kept = self.add_batch(topic, partition, [row], now_ns)
        return _stored(kept[0]) if kept else None

    def add_batch(
        self, topic: str, partition: str, rows: Iterable[Arrival], now_ns: int
    ) -> list[_Kept]:
        """Keep samples taken together, each ``(key, writer, timestamp, payload, disposes)``
        (those already kept are skipped); the kept records.

        One lock and, for a PERSISTENT topic, one transaction for the batch: the
        service takes what its reader holds in bulk, so a fast writer costs a
        commit per take, not per sample.
        """
        with self._lock:
            t = self._topics.get((topic, partition))
            if t is None:
                return []
            db = self._db if t.persistent else None
            if db is None:
                if self._db is not None:  # numbers the file will not hold: reserve them
                    rows = rows if isinstance(rows, list) else list(rows)
                    self._reserve(self._db, len(rows))
                return self._keep(t, rows, now_ns, None)
            with db:  # the drops' deletes, the mark and these inserts commit together
                kept = self._keep(t, rows, now_ns, db)
                self._save_mark(db)
                db.executemany(
                    "INSERT OR REPLACE INTO durability_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    [(s[_SEQ], *s[:5], s[_FLAGS], s[_PAYLOAD]) for s in kept],  # table order
                )
                touched = {s[_KEY] for s in kept}
                db.executemany(
                    "INSERT OR REPLACE INTO durability_instances VALUES (?, ?, ?, ?)",
                    [
                        (t.name, t.partition, k, t.instances[k].disposed_ns)
                        for k in touched
                        if k in t.instances
                    ],
                )
            return kept

    def _keep(
        self, t: _Topic, rows: Iterable[Arrival], now_ns: int, db: sqlite3.Connection | None
    ) -> list[_Kept]:
        """Apply the limits and keep ``rows`` in memory (under the lock); the kept records."""
        kept: list[_Kept] = []
        first = self._seq + 1  # the first seq this batch gives
        dropped: set[int] = set()  # seqs of this batch pushed out by later samples of it
        seen, limits, instances = t.seen, t.limits, t.instances
        depth, max_samples = limits.depth, limits.max_samples
        for key, writer, timestamp, payload, disposes in rows:
            identity = (writer, timestamp, payload_crc(payload))
            if identity in seen:
                continue
            inst = instances.get(key)
            if inst is None:
                if limits.max_instances is not None and len(instances) >= limits.max_instances:
                    self.rejected += 1
                    continue
                inst = instances[key] = _Instance()
            elif depth is None and (
                limits.max_samples_per_instance is not None
                and len(inst.samples) >= limits.max_samples_per_instance
            ):
                self.rejected += 1
                continue
            if depth is not None and len(inst.samples) >= depth:
                if timestamp < inst.samples[0][_TS]:
                    # older than all it keeps (another service's, aligning): KEEP_LAST
                    # keeps the newest samples, whatever order they come in
                    continue
                old = inst.samples.popleft()
                self._drop(t, old, db)
                if old[_SEQ] >= first:
                    dropped.add(old[_SEQ])
            elif max_samples is not None and t.count >= max_samples:
                self.rejected += 1
                if not inst.samples:
                    del instances[key]
                continue
            self._seq += 1
            flags = FLAG_DISPOSES if disposes else 0  # FLAG_DISPOSED/PERSISTENT: when served
            sample = (t.name, t.partition, key, writer, timestamp, self._seq, flags, payload)
            _insert_by_time(inst.samples, sample)
            t.order.append(sample)  # seqs only grow
            t.count += 1
            seen.add(identity)
            if inst.samples[-1] is sample:  # the instance's state is its newest sample's
                inst.disposed_ns = now_ns if disposes else None
            kept.append(sample)
        return [s for s in kept if s[_SEQ] not in dropped] if dropped else kept

    def add_many(self, records: Iterable[StoredSample], now_ns: int) -> int:
        """Keep records another service served (alignment); how many were new."""
        added = 0
        for r in records:
            if (r.topic, r.partition) not in self._topics:  # limits come with its writers
                self.serve(r.topic, r.partition, Limits(depth=None), r.persistent)
            kept = self.add(
                r.topic, r.partition, r.key, r.writer, r.timestamp, r.payload, r.disposes, now_ns
            )
            if kept is not None:
                added += 1
            if r.disposed and not r.disposes:
                # disposed after this sample (maybe while we could not hear it), unless
                # we keep a newer sample of the instance
                self.dispose(r.topic, r.partition, r.key, now_ns, unless_newer_than=r.timestamp)
        return added

    def dispose(
        self,
        topic: str,
        partition: str,
        key: bytes,
        now_ns: int,
        *,
        unless_newer_than: int | None = None,
    ) -> None:
        """Mark an instance disposed (a dispose without data); ``unless_newer_than``: not
        if the instance keeps a sample with a later source timestamp."""
        with self._lock:
            t = self._topics.get((topic, partition))
            inst = None if t is None else t.instances.get(key)
            if t is None or inst is None or inst.disposed_ns is not None:
                return
            if (
                unless_newer_than is not None
                and inst.samples
                and inst.samples[-1][_TS] > unless_newer_than
            ):
                return
            inst.disposed_ns = now_ns
            if t.persistent and self._db is not None:
                with self._db:
                    self._save_instance(t, key, inst)

    def cleanup(self, now_ns: int) -> int:
        """Forget instances disposed longer than their topic's cleanup delay ago; how many."""
        gone = 0
        with self._lock:
            for t in self._topics.values():
                delay = t.limits.cleanup_delay_ns
                for key, inst in list(t.instances.items()):
                    if inst.disposed_ns is not None and now_ns - inst.disposed_ns >= delay:
                        for s in inst.samples:
                            self._drop(t, s, self._db if t.persistent else None)
                        del t.instances[key]
                        gone += 1
                        if t.persistent and self._db is not None:
                            with self._db:  # with the samples' deletes and the mark
                                self._save_mark(self._db)
                                self._db.execute(
                                    "DELETE FROM durability_instances "
                                    "WHERE topic = ? AND partition = ? AND key = ?",
                                    (t.name, t.partition, key),
                                )
        return gone

    def _drop(self, t: _Topic, sample: _Kept, db: sqlite3.Connection | None) -> None:
        """Forget a kept sample (in ``db``'s open transaction, if given)."""
        t.count -= 1
        t.seen.discard(_identity(sample))
        t.dropped.add(sample[_SEQ])
        if len(t.dropped) > 1024 and len(t.dropped) * 2 > len(t.order):
            gone = t.dropped  # compacted when most of ``order`` is gone: amortised O(1)
            t.order = [s for s in t.order if s[_SEQ] not in gone]
            t.dropped = set()
        if db is not None:
            db.execute("DELETE FROM durability_samples WHERE seq = ?", (sample[_SEQ],))
            if sample[_SEQ] > self._mark:  # saved by the caller, in the same transaction
                self._mark = sample[_SEQ]
                self._mark_moved = True

    def _reserve(self, db: sqlite3.Connection, count: int) -> None:
        """Make the file's mark cover the next ``count`` numbers, before they are given."""
        if self._seq + count > self._mark:
            self._mark = self._seq + count + _RESERVE
            try:
                with db:
                    self._save_mark(db, force=True)
            except sqlite3.Error as exc:  # TRANSIENT samples are kept all the same
                _log.warning(
                    "durability: could not save the sample numbering mark %d (%s); after a "
                    "restart, numbers up to it may be given again",
                    self._mark,
                    exc,
                )

    def _save_mark(self, db: sqlite3.Connection, *, force: bool = False) -> None:
        """Write the mark if it moved (in ``db``'s open transaction)."""
        if force or self._mark_moved:
            db.execute("INSERT OR REPLACE INTO durability_sequence VALUES (0, ?)", (self._mark,))
            self._mark_moved = False

    def _insert(self, s: _Kept) -> None:
        assert self._db is not None
        self._db.execute(
            "INSERT OR REPLACE INTO durability_samples VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (s[_SEQ], *s[:5], s[_FLAGS], s[_PAYLOAD]),
        )

    def _save_instance(self, t: _Topic, key: bytes, inst: _Instance) -> None:
        assert self._db is not None
        self._db.execute(
            "INSERT OR REPLACE INTO durability_instances VALUES (?, ?, ?, ?)",
            (t.name, t.partition, key, inst.disposed_ns),
        )

    # -- serving ---------------------------------------------------------------------
    def page(
        self, topic: str, partitions: tuple[str, ...], after: int, count: int, max_bytes: int
    ) -> tuple[list[StoredSample], int, bool]:
        """Samples of ``topic`` ("" every topic) in ``partitions`` (empty: all) with a cursor
        above ``after``, oldest first: (samples, cursor to continue from, more remain)."""
        with self._lock:
            streams = [
                _after(t, after)
                for (name, partition), t in self._topics.items()
                if (not topic or name == topic)
                and (not partitions or any(fnmatch.fnmatchcase(partition, p) for p in partitions))
            ]
            merged = streams[0] if len(streams) == 1 else heapq.merge(*streams, key=_seq)
            out: list[_Kept] = []
            size = 0
            more = False
            for s in merged:
                if len(out) >= count or (out and size + len(s[_PAYLOAD]) > max_bytes):
                    more = True
                    break
                out.append(s)
                size += len(s[_PAYLOAD]) + 64
        cursor = out[-1][_SEQ] if out else after
        return list(map(_stored, out)), cursor, more

    def disposed(self, topic: str = "") -> int:
        """How many kept instances are disposed (of ``topic``, or of all)."""
        with self._lock:
            return sum(
                1
                for (n, _), t in self._topics.items()
                if not topic or n == topic
                for inst in t.instances.values()
                if inst.disposed_ns is not None
            )

    def count(self, topic: str = "") -> int:
        """How many samples are kept (of ``topic``, or of all)."""
        with self._lock:
            return sum(t.count for (n, _), t in self._topics.items() if not topic or n == topic)


_seq = operator.itemgetter(_SEQ)


def _after(t: _Topic, after: int) -> Iterator[_Kept]:
    """The samples ``t`` keeps with a seq above ``after``, in seq order, flagged as served
    (FLAG_PERSISTENT for a PERSISTENT topic, FLAG_DISPOSED for a disposed instance)."""
    order, dropped, instances = t.order, t.dropped, t.instances
    extra = FLAG_PERSISTENT if t.persistent else 0
    for i in range(bisect.bisect_right(order, after, key=_seq), len(order)):
        s = order[i]
        if dropped and s[_SEQ] in dropped:
            continue
        flags = extra | (FLAG_DISPOSED if instances[s[_KEY]].disposed_ns is not None else 0)
        yield (*s[:_FLAGS], s[_FLAGS] | flags, s[_PAYLOAD]) if flags else s
