"""Queues in the store: the tables, delivery to consumers, acknowledgement and redelivery.

Each queue is a row of ``queues`` (its value type's identity, its next
sequence number) and one row of ``queue_elements`` per element not yet
acknowledged; acknowledging an element deletes its row, in the transaction
that answers the acknowledgement, so an acknowledged element is never
delivered again, even after a kill -9 of the store. Which consumer holds
which element, and how often an element was delivered, is kept in memory:
after a store restart every stored element is pending again (it may be
delivered a second time; it is never lost).

Delivery: elements go out lowest sequence number first (an element given
back comes before newer ones), each to one consumer at a time. A consumer
that leaves, or is silent longer than its timeout, gives back every element
it holds. A receive that finds nothing waits (parked) up to its ``wait_ms``
for a publish. Only the service thread uses this module.

Authentication (with a namespace key): a consumer agrees a secret of its own
with the store incarnation in QUEUE_SUBSCRIBE (the key exchange of
``dcps/wire/_auth_member.py``, as a group member's in JOIN and a durable
subscriber's in DURABLE_SUBSCRIBE); its receives, acks, heartbeats and leave
must carry the proof of it (the store checks it before any handler runs, see
:data:`QUEUE_MEMBER_OPS`), and a subscribe naming a live consumer too. So
another holder of the namespace key, even one sending under the consumer's
client id, cannot take, acknowledge, roll back or give back its elements.
"""

from __future__ import annotations

import heapq
import sqlite3
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Final

from dcps.wire._admin_objects import QueueConsumerReport, QueueReport
from dcps.wire._auth_member import MemberSecret
from dcps.wire._codes import Op
from dcps.wire._queues import (
    QueueAcked,
    QueueAckRequest,
    QueueDeleted,
    QueueDeleteRequest,
    QueueDelivery,
    QueueHeartbeatRequest,
    QueueLeaveRequest,
    QueuePublished,
    QueuePublishRequest,
    QueueReceiveRequest,
    QueueState,
    QueueStateRequest,
    QueueSubscribed,
    QueueSubscribeRequest,
    queue_secret_group,
)
from dcps.wire._replies import ok_reply
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    IllegalOperationError,
    PreconditionNotMetError,
)

from ._log import ChannelLog
from ._log_format import sql_error

if TYPE_CHECKING:
    from ._service import Store, _Call

__all__ = [
    "QUEUE_HANDLERS",
    "QUEUE_MEMBER_OPS",
    "QueueTable",
    "queue_secret_ident",
    "serve_queues",
]

#: Requests proven with the consumer's secret (QUEUE_SUBSCRIBE: when the consumer is live).
QUEUE_MEMBER_OPS: Final = frozenset(
    {Op.QUEUE_SUBSCRIBE, Op.QUEUE_RECEIVE, Op.QUEUE_ACK, Op.QUEUE_HEARTBEAT, Op.QUEUE_LEAVE}
)


def queue_secret_ident(queue: str, consumer: str) -> tuple[str, str, str]:
    """Where the store keeps the secret of ``consumer`` of ``queue`` (with the members')."""
    return (queue, queue_secret_group(queue), consumer)


#: SQLite host parameters per statement, kept well below its limit.
_CHUNK: Final = 500
#: Consumers of deleted queues remembered (to tell them why their queue is gone).
_DELETED_MEMORY: Final = 4096


class _Consumer:
    __slots__ = ("client", "held", "last_seen", "name", "timeout")

    def __init__(self, name: str, client: str, timeout: float, now: float) -> None:
        self.name = name
        self.client = client  # the only client that acts for it (as a durable's subscriber)
        self.timeout = timeout
        self.last_seen = now
        self.held: set[int] = set()


class _Queue:
    __slots__ = (
        "consumers",
        "deliveries",
        "held",
        "id",
        "identity",
        "name",
        "next_seq",
        "parked",
        "pending",
    )

    def __init__(self, queue_id: int, name: str, identity: str, next_seq: int) -> None:
        self.id = queue_id
        self.name = name
        self.identity = identity
        self.next_seq = next_seq
        self.pending: list[int] = []  # a heap of sequence numbers nobody holds
        self.held: dict[int, str] = {}  # sequence number -> consumer
        self.deliveries: dict[int, int] = {}
        self.consumers: dict[str, _Consumer] = {}
        self.parked: list[tuple[Any, float]] = []  # (call, deadline) of waiting receives


class QueueTable:
    """The queues of one store file."""

    def __init__(self, log: ChannelLog) -> None:
        self._log = log
        self._queues: dict[str, _Queue] = {}
        self._deleted: dict[tuple[str, str], None] = {}
        try:
            db = log._conn
            for qid, name, identity, next_seq in db.execute(
                "SELECT id, name, type_identity, next_seq FROM queues"
            ).fetchall():
                q = _Queue(qid, name, identity, next_seq)
                q.pending = [
                    int(r[0])
                    for r in db.execute(
                        "SELECT seq FROM queue_elements WHERE queue_id = ? ORDER BY seq", (qid,)
                    )
                ]
                self._queues[name] = q
        except sqlite3.Error as exc:
            raise sql_error(exc, log.path, "loading the queues") from exc

    # -- helpers ------------------------------------------------------------------------

    def _queue(self, name: str, identity: str) -> _Queue:
        """The queue ``name``, created if new (its own transaction); its type checked."""
        q = self._queues.get(name)
        if q is not None:
            if identity and q.identity and identity != q.identity:
                raise PreconditionNotMetError(
                    f"queue {name!r} holds elements of type {q.identity!r} in the store "
                    f"({self._log.path}), not {identity!r}: a queue keeps the type it was "
                    "created with"
                )
            if identity and not q.identity:
                qid = q.id
                self._log._write(
                    f"recording the type of queue {name!r}",
                    lambda: self._log._conn.execute(
                        "UPDATE queues SET type_identity = ? WHERE id = ?", (identity, qid)
                    ),
                )
                q.identity = identity
            return q

        def create() -> int:
            cur = self._log._conn.execute(
                "INSERT INTO queues (name, type_identity, next_seq, created_ns)"
                " VALUES (?, ?, 1, ?)",
                (name, identity, self._log._clock()),
            )
            return int(cur.lastrowid or 0)

        q = _Queue(self._log._write(f"creating queue {name!r}", create), name, identity, 1)
        self._queues[name] = q
        return q

    def _consumer(
        self, name: str, consumer: str, client: str, now: float
    ) -> tuple[_Queue, _Consumer]:
        if (name, consumer) in self._deleted:
            raise AlreadyClosedError(
                f"queue {name!r} was deleted by an administrator while {consumer!r} "
                "was subscribed; its pending elements were discarded"
            )
        q = self._queues.get(name)
        c = None if q is None else q.consumers.get(consumer)
        if q is None or c is None:
            raise PreconditionNotMetError(
                f"{consumer!r} is not a subscriber of queue {name!r} (it never subscribed, "
                "left, timed out, or the store restarted): subscribe again"
            )
        _check_client(name, c, client)
        c.last_seen = now
        return q, c

    def _release(self, q: _Queue, c: _Consumer) -> None:
        for seq in c.held:
            q.held.pop(seq, None)
            heapq.heappush(q.pending, seq)
        c.held.clear()

    def _take(self, q: _Queue, c: _Consumer, count: int) -> QueueDelivery:
        seqs: list[int] = []
        while q.pending and len(seqs) < count:
            seqs.append(heapq.heappop(q.pending))
        if not seqs:
            return QueueDelivery((), (), (), b"")
        data: dict[int, bytes] = {}
        try:
            for i in range(0, len(seqs), _CHUNK):
                part = seqs[i : i + _CHUNK]
                marks = ",".join("?" * len(part))
                for seq, blob in self._log._conn.execute(
                    f"SELECT seq, data FROM queue_elements WHERE queue_id = ? AND seq IN ({marks})",
                    (q.id, *part),
                ):
                    data[int(seq)] = bytes(blob)
        except sqlite3.Error as exc:
            for seq in seqs:
                heapq.heappush(q.pending, seq)
            raise sql_error(exc, self._log.path, f"reading queue {q.name!r}") from exc
        out = [s for s in seqs if s in data]  # (a missing row was acknowledged: never again)
        for seq in out:
            q.held[seq] = c.name
            c.held.add(seq)
            q.deliveries[seq] = q.deliveries.get(seq, 0) + 1
        return QueueDelivery(
            tuple(out),
            tuple(q.deliveries[s] for s in out),
            tuple(len(data[s]) for s in out),
            b"".join(data[s] for s in out),
        )

    # -- requests ----------------------------------------------------------------------

    def publish(self, r: QueuePublishRequest) -> QueuePublished:
        """Store the elements (created queue if needed), in one transaction."""
        q = self._queue(r.queue, r.type_identity)
        first = q.next_seq
        rows = []
        pos = 0
        for i, size in enumerate(r.sizes):
            rows.append((q.id, first + i, r.blob[pos : pos + size]))
            pos += size

        def insert() -> None:
            db = self._log._conn
            db.executemany("INSERT INTO queue_elements VALUES (?, ?, ?)", rows)
            db.execute("UPDATE queues SET next_seq = ? WHERE id = ?", (first + len(rows), q.id))

        self._log._write(f"publishing to queue {r.queue!r}", insert, small=False)
        q.next_seq = first + len(rows)
        for i in range(len(rows)):
            heapq.heappush(q.pending, first + i)
        return QueuePublished(first, len(rows))

    def subscribe(self, r: QueueSubscribeRequest, client: str, now: float) -> None:
        """Add (or refresh) a consumer of the queue, creating the queue if needed.

        A consumer belongs to the client that subscribed it: another client
        naming it is refused until it leaves or times out.
        """
        existing = self._queues.get(r.queue)
        c = None if existing is None else existing.consumers.get(r.consumer)
        if c is not None:
            _check_client(r.queue, c, client)
        self._deleted.pop((r.queue, r.consumer), None)
        q = self._queue(r.queue, r.type_identity)
        if c is None:
            q.consumers[r.consumer] = _Consumer(r.consumer, client, r.timeout_ms / 1000, now)
        else:
            c.timeout, c.last_seen = r.timeout_ms / 1000, now

    def live(self, queue: str, consumer: str) -> bool:
        """Whether ``consumer`` is subscribed to ``queue`` now."""
        q = self._queues.get(queue)
        return q is not None and consumer in q.consumers

    def receive(self, call: Any, now: float) -> QueueDelivery | None:
        """Elements for the consumer; None when the call was parked to wait for some."""
        r: QueueReceiveRequest = call.request
        q, c = self._consumer(r.queue, r.consumer, call.client, now)
        delivery = self._take(q, c, r.max_count)
        if delivery.seqs or not r.wait_ms:
            return delivery
        q.parked.append((call, now + r.wait_ms / 1000))
        return None

    def ack(self, r: QueueAckRequest, client: str, now: float) -> QueueAcked:
        """Acknowledge (delete) or roll back elements the consumer holds; all or none."""
        q, c = self._consumer(r.queue, r.consumer, client, now)
        for seq in r.seqs:
            holder = q.held.get(seq)
            if holder == c.name:
                continue
            verb = "roll back" if r.rollback else "acknowledge"
            if holder is not None:
                raise PreconditionNotMetError(
                    f"{r.consumer!r} cannot {verb} element {seq} of queue {r.queue!r}: "
                    "another subscriber holds it"
                )
            raise IllegalOperationError(
                f"{r.consumer!r} cannot {verb} element {seq} of queue {r.queue!r}: it is not "
                "out for acknowledgement (acknowledged already, given back, or never delivered)"
            )
        if r.rollback:
            for seq in r.seqs:
                del q.held[seq]
                c.held.discard(seq)
                heapq.heappush(q.pending, seq)
            return QueueAcked(len(r.seqs))
        seqs = list(r.seqs)

        def delete() -> None:
            db = self._log._conn
            for i in range(0, len(seqs), _CHUNK):
                part = seqs[i : i + _CHUNK]
                marks = ",".join("?" * len(part))
                db.execute(
                    f"DELETE FROM queue_elements WHERE queue_id = ? AND seq IN ({marks})",
                    (q.id, *part),
                )

        self._log._write(f"acknowledging {len(seqs)} elements of queue {r.queue!r}", delete)
        for seq in seqs:
            del q.held[seq]
            c.held.discard(seq)
            q.deliveries.pop(seq, None)
        return QueueAcked(len(seqs))

    def heartbeat(self, r: QueueHeartbeatRequest, client: str, now: float) -> None:
        self._consumer(r.queue, r.consumer, client, now)

    def leave(self, r: QueueLeaveRequest, client: str) -> list[Any]:
        """Remove the consumer, giving back its elements; its parked receives (to answer)."""
        q = self._queues.get(r.queue)
        c = None if q is None else q.consumers.get(r.consumer)
        if q is None or c is None:
            return []
        _check_client(r.queue, c, client)
        del q.consumers[r.consumer]
        self._release(q, c)
        mine = [p for p in q.parked if p[0].request.consumer == r.consumer]
        q.parked = [p for p in q.parked if p[0].request.consumer != r.consumer]
        return [call for call, _ in mine]

    def delete(self, r: QueueDeleteRequest) -> tuple[QueueDeleted, list[Any]]:
        """Delete the queue and its elements; the parked receives (to refuse)."""
        q = self._queues.get(r.queue)
        if q is None:
            return QueueDeleted(False, 0), []

        def delete() -> int:
            db = self._log._conn
            n = db.execute("DELETE FROM queue_elements WHERE queue_id = ?", (q.id,)).rowcount
            db.execute("DELETE FROM queues WHERE id = ?", (q.id,))
            return int(n)

        discarded = self._log._write(f"deleting queue {r.queue!r}", delete)
        del self._queues[r.queue]
        for consumer in q.consumers:
            self._deleted[(r.queue, consumer)] = None
        while len(self._deleted) > _DELETED_MEMORY:
            del self._deleted[next(iter(self._deleted))]
        return QueueDeleted(True, discarded), [call for call, _ in q.parked]

    def state(self, r: QueueStateRequest) -> QueueState:
        q = self._queues.get(r.queue)
        if q is None:
            return QueueState(0, 0, 0)
        return QueueState(len(q.pending) + len(q.held), len(q.held), len(q.consumers))

    def reports(self, name: str = "", now: float | None = None) -> list[QueueReport]:
        """The queues (``name``: only that one) as ``dcps queues`` shows them.

        Raises :class:`~dcps.PreconditionNotMetError` when there is no queue ``name``.
        """
        if name and name not in self._queues:
            raise PreconditionNotMetError(f"no queue {name!r} in the store ({self._log.path})")
        now = time.monotonic() if now is None else now
        chosen = [self._queues[name]] if name else [self._queues[n] for n in sorted(self._queues)]
        return [
            QueueReport(
                q.name,
                q.identity,
                len(q.pending) + len(q.held),
                len(q.held),
                q.next_seq,
                tuple(
                    QueueConsumerReport(c.name, len(c.held), c.timeout, round(now - c.last_seen, 3))
                    for c in sorted(q.consumers.values(), key=lambda c: c.name)
                ),
            )
            for q in chosen
        ]

    def serve_parked(self, name: str, now: float) -> list[tuple[Any, QueueDelivery]]:
        """Answer the queue's parked receives that elements are now available for."""
        q = self._queues.get(name)
        out: list[tuple[Any, QueueDelivery]] = []
        if q is None:
            return out
        while q.parked and q.pending:
            call, _ = q.parked.pop(0)
            c = q.consumers.get(call.request.consumer)
            if c is None:
                continue
            c.last_seen = now
            out.append((call, self._take(q, c, call.request.max_count)))
        return out

    def expire(self, now: float) -> list[tuple[Any, QueueDelivery]]:
        """Expel silent consumers (their elements go back) and answer receives that
        waited long enough (empty)."""
        out: list[tuple[Any, QueueDelivery]] = []
        for q in self._queues.values():
            waiting = {call.request.consumer for call, _ in q.parked}
            for c in list(q.consumers.values()):
                if c.name in waiting:
                    c.last_seen = now
                elif now - c.last_seen > c.timeout:
                    del q.consumers[c.name]
                    self._release(q, c)
            if q.parked:
                due = [p for p in q.parked if p[1] <= now]
                if due:
                    q.parked = [p for p in q.parked if p[1] > now]
                    out.extend((call, QueueDelivery((), (), (), b"")) for call, _ in due)
            if q.pending and q.parked:
                out.extend(self.serve_parked(q.name, now))
        return out


def _check_client(queue: str, c: _Consumer, client: str) -> None:
    """Refuse a request naming consumer ``c`` that comes from another client than its own."""
    if c.client != client:
        raise PreconditionNotMetError(
            f"consumer {c.name!r} of queue {queue!r} belongs to another client"
        )


# -- the store's handlers (registered in dcps/store/_service.py) --------------------------------


def _answer_all(store: Store, answers: Iterable[tuple[Any, QueueDelivery]]) -> None:
    for call, delivery in answers:
        store._reply(call, delivery)


def _on_publish(store: Store, call: _Call[QueuePublishRequest]) -> None:
    store._reply(call, store._queues.publish(call.request))
    _answer_all(store, store._queues.serve_parked(call.request.queue, time.monotonic()))


def _on_subscribe(store: Store, call: _Call[QueueSubscribeRequest]) -> None:
    r = call.request
    exchange, secret = _exchange(store, r)
    store._queues.subscribe(r, call.client, time.monotonic())
    if secret is not None:
        store._keep_member_secret(queue_secret_ident(r.queue, r.consumer), secret)
    store._reply(call, QueueSubscribed(exchange))


def _exchange(store: Store, r: QueueSubscribeRequest) -> tuple[bytes, MemberSecret | None]:
    """The store's half of a consumer's key exchange (none without a namespace key)."""
    if not store._sealer.enabled:
        return b"", None
    if not r.offer:
        raise BadParameterError(
            f"a QUEUE_SUBSCRIBE of consumer {r.consumer!r} to queue {r.queue!r} carries no "
            "key-exchange offer: the store's namespace has a key"
        )
    return store._sealer.answer_member_offer(
        r.offer, group=queue_secret_group(r.queue), member=r.consumer, incarnation=store.incarnation
    )


def _on_receive(store: Store, call: _Call[QueueReceiveRequest]) -> None:
    delivery = store._queues.receive(call, time.monotonic())
    if delivery is not None:
        store._reply(call, delivery)


def _on_ack(store: Store, call: _Call[QueueAckRequest]) -> None:
    store._reply(call, store._queues.ack(call.request, call.client, time.monotonic()))
    if call.request.rollback:
        _answer_all(store, store._queues.serve_parked(call.request.queue, time.monotonic()))


def _on_heartbeat(store: Store, call: _Call[QueueHeartbeatRequest]) -> None:
    store._queues.heartbeat(call.request, call.client, time.monotonic())
    store._answer(call.client, call.request_id, ok_reply(call.client, call.request_id))


def _on_leave(store: Store, call: _Call[QueueLeaveRequest]) -> None:
    parked = store._queues.leave(call.request, call.client)
    store._keep_member_secret(queue_secret_ident(call.request.queue, call.request.consumer), None)
    store._answer(call.client, call.request_id, ok_reply(call.client, call.request_id))
    _answer_all(store, ((p, QueueDelivery((), (), (), b"")) for p in parked))
    _answer_all(store, store._queues.serve_parked(call.request.queue, time.monotonic()))


def _on_delete(store: Store, call: _Call[QueueDeleteRequest]) -> None:
    answer, parked = store._queues.delete(call.request)
    store._reply(call, answer)
    for p in parked:
        store._fail(
            p,
            AlreadyClosedError(
                f"queue {call.request.queue!r} was deleted by an administrator; "
                "its pending elements were discarded"
            ),
        )


def _on_state(store: Store, call: _Call[QueueStateRequest]) -> None:
    store._reply(call, store._queues.state(call.request))


def serve_queues(store: Store) -> None:
    """Once per service round: expel silent consumers, answer receives that waited enough."""
    _answer_all(store, store._queues.expire(time.monotonic()))


#: Queue request kind -> handler, merged into ``Store._HANDLERS``.
QUEUE_HANDLERS: Final[dict[int, Callable[[Any, Any], None]]] = {
    QueuePublishRequest.op: _on_publish,
    QueueSubscribeRequest.op: _on_subscribe,
    QueueReceiveRequest.op: _on_receive,
    QueueAckRequest.op: _on_ack,
    QueueHeartbeatRequest.op: _on_heartbeat,
    QueueLeaveRequest.op: _on_leave,
    QueueDeleteRequest.op: _on_delete,
    QueueStateRequest.op: _on_state,
}
