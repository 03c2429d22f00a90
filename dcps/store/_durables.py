"""Durable subscriptions in the store (seeds 001 and 002): their state, rules and persistence.

A durable is a named consumer of one channelled topic. Its floor per
channel (every offset at or below it acknowledged) is the commit of a log
group named :data:`DURABLE_GROUP_PREFIX` + its name, so the log's retention
keeps every element a durable has not acknowledged (and, as for groups, a
topic without groups or durables discards what is published). The offsets
acknowledged above the floor live in table ``durable_acks``, the durable's
configuration in ``durables``, the last values of last-value durables in
``durable_values`` (``docs/store-format.md``). Redelivery counts survive a
restart: per channel the highest offset ever delivered is kept in
``durable_delivered`` (every unacknowledged element at or below it went out
at least once), and the count of each element delivered twice or more in
``durable_deliveries``; both are written in the store round that delivered,
with the round's acknowledgements, and a redelivery is answered only once its
count is on disk. A first delivery is answered at once and writes nothing of
its own: a store killed within that round forgets only that it went out once.
Who holds which element and windows live in memory (``_durable_state.py``):
after a store restart every unacknowledged element is delivered again, its
redelivery count counting the deliveries before the restart.

Non-persistent durables write nothing but their floors (which retention
needs) and are deleted when the store starts again.

Subscribers poll (``DURABLE_POLL``); a poll with nothing to deliver waits at
the store up to its ``wait_ms`` and is answered as soon as elements come (a
publish, an acknowledgement freeing a window, a rollback). Polls also tell
the store the subscriber is alive: one silent for its timeout is closed and
its unacknowledged elements are redelivered.

Requests of a subscriber are accepted only from the client that subscribed
it; with a namespace key, only with the proof of the subscriber's own
secret, agreed by a key exchange in DURABLE_SUBSCRIBE as a channel group
member's is in JOIN (``dcps/wire/_auth_member.py``): another holder of the
namespace key, even one sending under the subscriber's client id, cannot
poll, acknowledge, roll back or close for it, nor subscribe again in its
name while it is live. The secrets are kept with the members' (under the
durable's log group name, which no JOIN can name) and forgotten when the
subscriber leaves.

A poll carries the acknowledgements its subscriber made since the previous
one (:attr:`DurablePollRequest.acks`, asynchronous acknowledgements): one
round trip settles a window and fetches the next. Their state is written
once per store round for every durable they touched (DURABLE_ACK, the
synchronous acknowledgement, is written before it is answered): a store
killed within the round delivers those elements again, as the asynchronous
acknowledgement timing documents.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs

from dcps.wire._admin_objects import (
    DurableChannelReport,
    DurableDeleted,
    DurableReport,
    DurableSubscriberReport,
)
from dcps.wire._auth_member import MemberSecret
from dcps.wire._codes import Op
from dcps.wire._durables import (
    DURABLE_GROUP_PREFIX,
    TEMPORARY_TOPIC_PREFIX,
    AckStatus,
    DurableAcked,
    DurableAckRequest,
    DurableCloseRequest,
    DurableDelivery,
    DurableInfo,
    DurableInfoRequest,
    DurableKind,
    DurablePollRequest,
    DurableRollbackRequest,
    DurableSubscribed,
    DurableSubscribeRequest,
    DurableTxAckRequest,
    DurableUnsubscribed,
    DurableUnsubscribeRequest,
    Notice,
    StartMode,
    TemporaryTopicRequest,
    TxAbortRequest,
    TxCommitRequest,
)
from dcps.wire._replies import ok_reply
from dcps.wire._sealing import Sealer
from idl._errors import (
    BadParameterError,
    InconsistentPolicyError,
    OutOfResourcesError,
    PreconditionNotMetError,
    UnsupportedError,
)

from ._durable_reads import ReadAhead
from ._durable_state import DurableState, Position
from ._log import ChannelLog
from ._temporaries import TemporaryTopics
from ._transactions import on_tx_abort, on_tx_commit, recover_transactions

__all__ = [
    "DURABLE_GROUP_PREFIX",
    "DURABLE_HANDLERS",
    "DURABLE_MEMBER_OPS",
    "DurableService",
    "secret_ident",
    "siblings",
]

_log = logging.getLogger("dcps.store.durables")

#: Live updates a last-value subscriber may have waiting before older ones are dropped.
_LAST_VALUE_QUEUE = 1024
#: Subscribers closed by the store remembered per durable (to tell them so when they poll).
_CLOSED_KEPT = 1024
#: How often consumed elements are released from the log (the floors move at every ack).
_TRIM_INTERVAL = 0.05


#: Requests proven with the subscriber's secret (DURABLE_SUBSCRIBE: when it is live).
DURABLE_MEMBER_OPS = frozenset(
    {
        Op.DURABLE_SUBSCRIBE,
        Op.DURABLE_POLL,
        Op.DURABLE_ACK,
        Op.DURABLE_ROLLBACK,
        Op.DURABLE_CLOSE,
        Op.DURABLE_TX_ACK,
    }
)
#: How long enlisted acknowledgements of a transaction never committed are kept (s).
_ENLISTED_KEPT = 600.0
#: Most positions enlisted in one transaction.
_MAX_ENLISTED = 1_000_000


def secret_ident(topic: str, name: str, subscriber: str) -> tuple[str, str, str]:
    """Where the store keeps the secret of ``subscriber`` of durable ``name`` (with members')."""
    return (topic, DURABLE_GROUP_PREFIX + name, subscriber)


def siblings(a: str, b: str) -> bool:
    """Whether topics ``a`` and ``b`` are siblings (``foo.1`` and ``foo.2``; not ``foo.1.2``)."""
    return a.rpartition(".")[0] == b.rpartition(".")[0] and a.count(".") == b.count(".")


@attrs.define
class _Sub:
    name: str
    client: str
    topic: str
    timeout: float
    last_seen: float
    filter: str = ""
    notice: Notice = Notice.NONE
    message: str = ""
    updates: deque[tuple[int, int, int, bytes]] = attrs.Factory(
        lambda: deque(maxlen=_LAST_VALUE_QUEUE)
    )


@attrs.define
class _Durable:
    name: str
    topic: str
    kind: DurableKind
    persistent: bool
    filter: str
    ttl_ms: int
    anonymous: bool
    state: DurableState
    subs: dict[str, _Sub] = attrs.Factory(dict)
    idle_since: float = attrs.Factory(time.monotonic)
    #: last-value durables: topic -> (channel, offset, ts, data)
    values: dict[str, tuple[int, int, int, bytes]] = attrs.Factory(dict)
    #: subscribers the store closed (taken over), and why: their next poll is told so
    closed: dict[str, str] = attrs.Factory(dict)

    @property
    def group(self) -> str:
        return DURABLE_GROUP_PREFIX + self.name


#: Refused acknowledgements: (channel, offset, why).
_Refused = tuple[tuple[int, int, AckStatus], ...]


@attrs.define
class _Parked:
    call: Any
    deadline: float
    #: refusals of the acknowledgements the poll carried (empty: all done)
    refused: _Refused = ()


class DurableService(TemporaryTopics):
    """The durables of one store (service thread only).

    ``reply(call, answer)`` and ``fail(call, exc)`` answer a request (a
    typed answer with ``to_wire``, or an error); handlers raise for
    refusals, which the store answers.
    """

    def __init__(
        self,
        log: ChannelLog,
        reply: Callable[[Any, Any], None],
        fail: Callable[[Any, BaseException], None],
        *,
        split: bool = False,
        clock: Callable[[], float] = time.monotonic,
        sealer: Sealer | None = None,
        incarnation: str = "",
        secrets: Callable[[tuple[str, str, str], MemberSecret | None], None] | None = None,
    ) -> None:
        """``sealer``, ``incarnation`` and ``secrets`` (keep a secret; None forgets it)
        authenticate subscribers per member with a namespace key."""
        self._log = log
        self._sealer = sealer
        self._incarnation = incarnation
        self._keep_secret = secrets
        self._reply = reply
        self._fail = fail
        self._split = split
        self._clock = clock
        self._durables: dict[str, _Durable] = {}
        self._reads = ReadAhead(log)
        self._parked: dict[tuple[str, str], _Parked] = {}  # (durable, subscriber) -> poll
        self._next_trim: dict[str, float] = {}
        self._topic_ids: dict[str, int] = {}  # topics keep their id while the store runs
        self._init_temporaries()
        #: (query, epoch) -> (first enlisted at, [(durable, subscriber, positions)])
        self._enlisted: dict[tuple[str, int], tuple[float, list[tuple[str, str, list[Position]]]]]
        self._enlisted = {}
        self._dirty: set[str] = set()  # durables whose acks (carried by polls) are not written
        #: deliveries of persistent durables answered once their counts are written (tick)
        self._held: dict[str, list[tuple[Any, DurableDelivery]]] = {}
        #: persistent durables that redelivered this round: their answers wait for the counts
        self._redelivered: set[str] = set()
        self._load()
        recover_transactions(log, self)

    # -- loading and persisting ------------------------------------------------------

    def _load(self) -> None:
        """Load persistent durables; delete non-persistent ones (they do not outlive a store)."""
        with self._log.read("loading the durables") as db:
            rows = db.execute(
                "SELECT d.name, t.name, d.kind, d.persistent, d.filter, d.ttl_ms"
                " FROM durables d JOIN topics t ON t.id = d.topic_id"
            ).fetchall()
        for name, topic, kind_code, persistent, filter_, ttl_ms in rows:
            if not persistent:
                self._delete(name, topic)
                continue
            kind = DurableKind.from_code(int(kind_code))
            floors = self._floors(topic, name)
            with self._log.read(f"loading durable {name!r}") as db:
                acked = [
                    (int(c), int(o))
                    for c, o in db.execute(
                        'SELECT channel, "offset" FROM durable_acks WHERE name = ?', (name,)
                    )
                ]
                deliveries = {
                    (int(c), int(o)): int(n)
                    for c, o, n in db.execute(
                        'SELECT channel, "offset", times FROM durable_deliveries WHERE name = ?',
                        (name,),
                    )
                }
                delivered = {
                    int(c): int(o)
                    for c, o in db.execute(
                        'SELECT channel, "offset" FROM durable_delivered WHERE name = ?', (name,)
                    )
                }
                values = {
                    t: (int(c), int(o), int(ts), bytes(data))
                    for t, c, o, ts, data in db.execute(
                        'SELECT topic, channel, "offset", ts, data FROM durable_values'
                        " WHERE name = ?",
                        (name,),
                    )
                }
            durable = _Durable(
                name,
                topic,
                kind,
                True,
                filter_,
                int(ttl_ms),
                False,
                DurableState(kind, floors, acked, deliveries, delivered),
                values=values,
            )
            self._durables[name] = durable

    def _floors(self, topic: str, name: str) -> dict[int, int]:
        info = self._log.topic(topic)
        group = DURABLE_GROUP_PREFIX + name
        if not self._log.has_group(topic, group):
            self._log.create_group(topic, group)
        return {c: self._log.committed(topic, group, c)[0] for c in range(info.channel_count)}

    def _delete(self, name: str, topic: str) -> None:
        def delete(db: sqlite3.Connection) -> None:
            db.execute("DELETE FROM durables WHERE name = ?", (name,))
            db.execute("DELETE FROM durable_acks WHERE name = ?", (name,))
            db.execute("DELETE FROM durable_values WHERE name = ?", (name,))
            db.execute("DELETE FROM durable_deliveries WHERE name = ?", (name,))
            db.execute("DELETE FROM durable_delivered WHERE name = ?", (name,))

        self._log.write(f"deleting durable {name!r}", delete)
        self._log.destroy_group(topic, DURABLE_GROUP_PREFIX + name)
        _log.info("durable %r of topic %r deleted", name, topic)

    def _persist_acks(self, d: _Durable) -> None:
        """Write what the durable's acknowledgements changed (floors always; acks and delivery
        counts if persistent)."""
        acks, floors = d.state.take_changes()
        counted = d.state.take_counts()  # (taken always: a durable in memory keeps none)
        if not d.persistent:
            acks = set()
        if not acks and not floors and not (d.persistent and counted):
            return
        tid = self._topic_id(d.topic)
        group = d.group
        name = d.name

        def write(db: sqlite3.Connection) -> None:
            if floors:
                db.executemany(
                    "UPDATE commits SET committed = ?, explicit = 1"
                    " WHERE topic_id = ? AND grp = ? AND channel = ?",
                    [(f, tid, group, c) for c, f in floors.items()],
                )
            if not d.persistent:
                return
            if floors:
                db.executemany(
                    'DELETE FROM durable_acks WHERE name = ? AND channel = ? AND "offset" <= ?',
                    [(name, c, f) for c, f in floors.items()],
                )
            if acks:
                db.executemany(
                    "INSERT OR IGNORE INTO durable_acks VALUES (?, ?, ?)",
                    [(name, c, o) for c, o in acks],
                )
            if counted.cleared:
                db.executemany(
                    "DELETE FROM durable_deliveries"
                    ' WHERE name = ? AND channel = ? AND "offset" = ?',
                    [(name, c, o) for c, o in counted.cleared],
                )
            if counted.counts:
                db.executemany(
                    "INSERT OR REPLACE INTO durable_deliveries VALUES (?, ?, ?, ?)",
                    [(name, c, o, n) for (c, o), n in counted.counts.items()],
                )
            if counted.delivered:
                db.executemany(
                    "INSERT OR REPLACE INTO durable_delivered VALUES (?, ?, ?)",
                    [(name, c, o) for c, o in counted.delivered.items()],
                )

        self._log.write(f"acknowledging elements of durable {name!r}", write)

    def _topic_id(self, topic: str) -> int:
        known = self._topic_ids.get(topic)
        if known is not None:
            return known
        with self._log.read(f"looking up topic {topic!r}") as db:
            row = db.execute("SELECT id FROM topics WHERE name = ?", (topic,)).fetchone()
        if row is None:
            raise BadParameterError(f"no channelled topic {topic!r} in the store")
        self._topic_ids[topic] = int(row[0])
        return int(row[0])

    # -- requests ------------------------------------------------------------------------

    def handle(self, call: Any) -> None:
        """Serve one durable request (the store answers what raises)."""
        r = call.request
        if isinstance(r, DurableSubscribeRequest):
            self._reply(call, self._subscribe(call.client, r))
        elif isinstance(r, DurablePollRequest):
            self._poll(call)
        elif isinstance(r, DurableTxAckRequest):  # (a DurableAckRequest: asked first)
            self._reply(call, self._enlist(call.client, r))
        elif isinstance(r, DurableRollbackRequest):
            d, _ = self._subscriber(call.client, r.topic, r.name, r.subscriber)
            statuses = d.state.rollback(r.subscriber, r.positions)
            self._reply(call, DurableAcked(tuple(statuses)))
            self._serve_parked()
        elif isinstance(r, DurableAckRequest):
            d, _ = self._subscriber(call.client, r.topic, r.name, r.subscriber)
            statuses = d.state.ack(r.subscriber, r.positions)
            self._persist_acks(d)
            self._reply(call, DurableAcked(tuple(statuses)))
            self._serve_parked()

        elif isinstance(r, DurableCloseRequest):
            d, _ = self._subscriber(call.client, r.topic, r.name, r.subscriber)
            self._drop_subscriber(d, r.subscriber)
            self._reply_ok(call)
        elif isinstance(r, DurableInfoRequest):
            self._reply(call, self._info(r))
        elif isinstance(r, TemporaryTopicRequest):
            self._temporary(call.client, r)
            self._reply_ok(call)
        elif isinstance(r, DurableUnsubscribeRequest):
            existing = self._durables.get(r.name)
            topic = existing.topic if existing is not None and r.any_topic else r.topic
            self._reply(call, DurableUnsubscribed(self._unsubscribe(topic, r.name)))
        else:  # pragma: no cover - the decoder hands out only the kinds above
            raise BadParameterError(f"not a durable request: {r!r}")

    def _reply_ok(self, call: Any) -> None:
        class _Ok:
            @staticmethod
            def to_wire(client: str, request_id: int) -> Any:
                return ok_reply(client, request_id)

        self._reply(call, _Ok)

    # -- transactions (``_transactions.py``) ------------------------------------------------

    def _enlist(self, client: str, r: DurableTxAckRequest) -> DurableAcked:
        """Check ``r``'s positions are held by its subscriber; keep them for the commit."""
        d, _ = self._subscriber(client, r.topic, r.name, r.subscriber)
        if not d.kind.acknowledged:
            raise PreconditionNotMetError("last-value durables are not acknowledged")
        statuses = d.state.check(r.subscriber, r.positions)
        if all(s is AckStatus.DONE for s in statuses):
            key = (r.query, r.epoch)
            since, acks = self._enlisted.get(key, (self._clock(), []))
            if sum(len(p) for *_, p in acks) + len(r.positions) > _MAX_ENLISTED:
                raise OutOfResourcesError(
                    f"transaction {r.query!r} epoch {r.epoch} enlists more than "
                    f"{_MAX_ENLISTED} acknowledgements"
                )
            acks.append((d.name, r.subscriber, list(r.positions)))
            self._enlisted[key] = (since, acks)
        return DurableAcked(tuple(statuses))

    def take_enlisted(self, query: str, epoch: int) -> list[tuple[str, list[Position]]]:
        """The acknowledgements enlisted in ``(query, epoch)``, each still held by its
        subscriber (else the transaction is refused: PreconditionNotMetError)."""
        _, acks = self._enlisted.pop((query, epoch), (0.0, []))
        out: list[tuple[str, list[Position]]] = []
        for name, subscriber, positions in acks:
            d = self._durables.get(name)
            statuses = (
                [AckStatus.NO_ELEMENT] * len(positions)
                if d is None
                else d.state.check(subscriber, positions)
            )
            bad = [
                (p, s) for p, s in zip(positions, statuses, strict=True) if s is not AckStatus.DONE
            ]
            if bad:
                (c, o), status = bad[0]
                raise PreconditionNotMetError(
                    f"transaction {query!r} epoch {epoch} rolled back: element ({c}, {o}) of "
                    f"durable {name!r} is {status.name.lower().replace('_', ' ')} for "
                    f"subscriber {subscriber!r} (it left, timed out, or the store restarted)"
                )
            out.append((name, positions))
        return out

    def drop_enlisted(self, query: str, epoch: int) -> None:
        """Forget the acknowledgements enlisted in ``(query, epoch)`` (aborted)."""
        self._enlisted.pop((query, epoch), None)

    def apply_acks(self, acks: list[tuple[str, list[Position]]]) -> int:
        """Acknowledge (and write) each durable's positions, whoever holds them; how many."""
        done = 0
        for name, positions in acks:
            d = self._durables.get(name)
            if d is None:
                continue
            done += d.state.ack_any(positions)
            self._persist_acks(d)
        if acks:
            self._serve_parked()  # windows freed
        return done

    def _subscribe(self, client: str, r: DurableSubscribeRequest) -> DurableSubscribed:
        if r.topic.startswith(TEMPORARY_TOPIC_PREFIX):
            self._check_temporary_consumer(r)
        if self._split:
            raise UnsupportedError(
                "durables need the namespace's channels in one store: this store serves a "
                "share of them (split stores do not serve durables yet)"
            )
        info = self._log.topic(r.topic)
        now = self._clock()
        d = self._durables.get(r.name)
        old = None if d is None else d.subs.get(r.subscriber)
        if old is not None and old.client != client:  # refused before anything changes
            raise PreconditionNotMetError(
                f"subscriber {r.subscriber!r} of durable {r.name!r} belongs to another client"
            )
        if (
            d is not None
            and r.replace
            and d.kind is r.kind
            and (d.topic, d.filter)
            != (
                r.topic,
                r.filter,
            )
        ):
            self._replace(d, r)
            d = None
        created = d is None
        if d is None:
            d = self._create(r, info.channel_count)
            _log.info(
                "durable %r of topic %r created (%s, %s)",
                d.name,
                d.topic,
                d.kind.name.lower(),
                "persistent" if d.persistent else "in memory",
            )
        else:
            self._check_same(d, r)
        window = r.window or None
        if d.kind in (DurableKind.EXCLUSIVE, DurableKind.STANDARD):
            others = [s for s in d.subs if s != r.subscriber]
            if others and d.kind is DurableKind.EXCLUSIVE:
                raise PreconditionNotMetError(
                    f"exclusive durable {r.name!r} of topic {r.topic!r} already has an active "
                    "subscriber; a second one is refused until it closes or times out"
                )
            for other in others:  # standard: the newcomer takes over
                self._close_by_store(d, other, f"standard durable {r.name!r} was taken over")
        sub = _Sub(r.subscriber, client, r.topic, r.timeout_ms / 1000, now, r.filter)
        if r.filter and r.filter != d.filter:
            for earlier in d.subs.values():
                if earlier.filter and earlier.filter != r.filter:
                    earlier.notice |= Notice.FILTER_CONFLICT
                    earlier.message = r.filter
            d.filter = r.filter
            if d.persistent:
                self._log.write(
                    f"recording the filter of durable {r.name!r}",
                    lambda db: db.execute(
                        "UPDATE durables SET filter = ? WHERE name = ?", (d.filter, d.name)
                    ),
                )
        exchange, secret = self._exchange(r)
        d.subs[r.subscriber] = sub
        d.closed.pop(r.subscriber, None)
        if d.kind.acknowledged:
            d.state.add(r.subscriber, window)
        elif r.topic in d.values:  # last-value: start with the topic's last element
            sub.updates.append(d.values[r.topic])
        if secret is not None and self._keep_secret is not None:
            self._keep_secret(secret_ident(r.topic, r.name, r.subscriber), secret)
        return DurableSubscribed(d.kind, info.channel_count, created, d.filter, exchange)

    def _exchange(self, r: DurableSubscribeRequest) -> tuple[bytes, MemberSecret | None]:
        """The store's half of a subscriber's key exchange (none without a namespace key)."""
        if self._sealer is None or not self._sealer.enabled:
            return b"", None
        if not r.offer:
            raise BadParameterError(
                f"a DURABLE_SUBSCRIBE of {r.subscriber!r} to durable {r.name!r} of topic "
                f"{r.topic!r} carries no key-exchange offer: the store's namespace has a key"
            )
        return self._sealer.answer_member_offer(
            r.offer,
            group=DURABLE_GROUP_PREFIX + r.name,
            member=r.subscriber,
            incarnation=self._incarnation,
        )

    def live(self, name: str, subscriber: str) -> bool:
        """Whether ``subscriber`` of durable ``name`` is subscribed now (its secret proves it)."""
        d = self._durables.get(name)
        return d is not None and subscriber in d.subs

    def _forget(self, sub: _Sub, durable: str) -> None:
        if self._keep_secret is not None:
            self._keep_secret(secret_ident(sub.topic, durable, sub.name), None)

    def _replace(self, d: _Durable, r: DurableSubscribeRequest) -> None:
        """Delete durable ``d`` to create it anew with another topic or filter (JMS)."""
        if d.subs:
            raise PreconditionNotMetError(
                f"durable {r.name!r} has an active subscriber: it cannot be replaced by one "
                f"of topic {r.topic!r} with another selector until it closes"
            )
        _log.info("durable %r: replaced (topic or filter changed)", d.name)
        self._destroy(d)

    def _check_same(self, d: _Durable, r: DurableSubscribeRequest) -> None:
        if d.kind is not r.kind:
            raise InconsistentPolicyError(
                f"durable {r.name!r} is a {d.kind.value} durable, not {r.kind.value}"
            )
        same_topic = d.topic == r.topic or (
            d.kind is DurableKind.LAST_VALUE and siblings(d.topic, r.topic)
        )
        if not same_topic:
            raise InconsistentPolicyError(
                f"durable {r.name!r} is a durable of topic {d.topic!r}, not {r.topic!r} "
                "(durable names are unique in a store)"
            )

    def _create(self, r: DurableSubscribeRequest, channel_count: int) -> _Durable:
        group = DURABLE_GROUP_PREFIX + r.name
        tid = self._topic_id(r.topic)
        self._log.create_group(r.topic, group)
        states = self._log.channel_states(r.topic)
        starts: dict[int, int] = {}
        if r.start is StartMode.TAIL:
            starts = {c: s.tail + 1 for c, s in enumerate(states)}
        elif r.start is StartMode.POSITIONS:
            for c, o in r.starts:
                if c >= channel_count:
                    raise BadParameterError(
                        f"topic {r.topic!r} has channels 0..{channel_count - 1}, not {c}"
                    )
                starts[c] = min(max(o, states[c].head), states[c].tail + 1)
        floors = {c: s.head - 1 for c, s in enumerate(states)}
        floors.update({c: o - 1 for c, o in starts.items()})

        def create(db: sqlite3.Connection) -> None:
            db.executemany(
                "UPDATE commits SET committed = ?, explicit = 1"
                " WHERE topic_id = ? AND grp = ? AND channel = ?",
                [(f, tid, group, c) for c, f in floors.items()],
            )
            db.execute(
                "INSERT OR REPLACE INTO durables VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    r.name,
                    tid,
                    r.kind.code,
                    int(r.persistent),
                    r.filter,
                    r.ttl_ms,
                    time.time_ns(),
                ),
            )

        try:
            self._log.write(f"creating durable {r.name!r} of topic {r.topic!r}", create)
        except BaseException:
            self._log.destroy_group(r.topic, group)
            raise
        d = _Durable(
            r.name,
            r.topic,
            r.kind,
            r.persistent,
            r.filter,
            r.ttl_ms,
            r.anonymous,
            DurableState(r.kind, floors),
        )
        self._durables[r.name] = d
        return d

    def _subscriber(
        self, client: str, topic: str, name: str, subscriber: str
    ) -> tuple[_Durable, _Sub]:
        d = self._durables.get(name)
        if d is None or (d.topic != topic and not siblings(d.topic, topic)):
            raise PreconditionNotMetError(f"no durable {name!r} of topic {topic!r} in the store")
        sub = d.subs.get(subscriber)
        if sub is None and subscriber in d.closed:
            raise PreconditionNotMetError(
                f"subscriber {subscriber!r} of durable {name!r} was closed: {d.closed[subscriber]}"
            )
        if sub is None:
            raise PreconditionNotMetError(
                f"{subscriber!r} is not a subscriber of durable {name!r} (closed, taken over, "
                "timed out, or the store restarted: subscribe again)"
            )
        if sub.client != client:
            raise PreconditionNotMetError(
                f"subscriber {subscriber!r} of durable {name!r} belongs to another client"
            )
        sub.last_seen = self._clock()
        return d, sub

    def _poll(self, call: Any) -> None:
        r: DurablePollRequest = call.request
        closed = self._durables.get(r.name)
        if closed is not None and r.subscriber in closed.closed:
            why = closed.closed[r.subscriber]
            self._reply(call, DurableDelivery(notice=Notice.CLOSED, message=why))
            return
        d, sub = self._subscriber(call.client, r.topic, r.name, r.subscriber)
        key = (d.name, sub.name)
        refused: _Refused = ()
        if r.acks:
            if not d.kind.acknowledged:
                raise PreconditionNotMetError("last-value durables are not acknowledged")
            done = d.state.ack(r.subscriber, r.acks)
            self._dirty.add(d.name)  # written at the end of the store's round, with the others'
            refused = tuple(
                (c, o, s) for (c, o), s in zip(r.acks, done, strict=True) if s is not AckStatus.DONE
            )
        earlier = self._parked.pop(key, None)
        if earlier is not None:
            # the waiting poll is answered with what this one's acks freed (or empty), and
            # this one waits in its place: one answer per poll, none of them wasted
            refused = earlier.refused + refused
            got = self._take(d, sub, earlier.call.request.count, refused)
            self._answer(d, earlier.call, got or self._delivery(d, sub, [], refused))
            refused = ()
        delivery = self._take(d, sub, r.count, refused)
        if r.acks:
            self._serve_parked()  # the acks may free elements for others (serial)
        if delivery is None and r.wait_ms > 0:
            self._parked[key] = _Parked(call, self._clock() + r.wait_ms / 1000, refused)
            return
        self._answer(d, call, delivery or self._delivery(d, sub, [], refused))

    def _answer(self, d: _Durable, call: Any, delivery: DurableDelivery) -> None:
        """Answer a poll; a persistent durable's redelivery waits for the end of the round, when
        its delivery counts are written: a store killed before that never let the
        subscriber see a count it would not keep."""
        if d.persistent and d.name in self._redelivered:
            self._held.setdefault(d.name, []).append((call, delivery))
        else:
            self._reply(call, delivery)

    def _tails(self, d: _Durable) -> dict[int, int]:
        return {c: s.tail + 1 for c, s in enumerate(self._log.channel_states(d.topic))}

    def _take(
        self, d: _Durable, sub: _Sub, count: int, refused: _Refused = ()
    ) -> DurableDelivery | None:
        """What ``sub`` gets now, or None when there is nothing (no notice, no refusal) for it."""
        if not d.kind.acknowledged:
            items = [sub.updates.popleft() for _ in range(min(count, len(sub.updates)))]
            if not items and not sub.notice:
                return None
            return self._last_values(d, sub, items)
        tails = self._tails(d)
        got = d.state.deliver(sub.name, count, tails)
        if got and d.persistent:
            self._dirty.add(d.name)  # the delivery counts are written in this round's tick
            if any(times for _, times in got):
                # a redelivery's count must be on disk before the subscriber sees it; a first
                # delivery is answered at once (waiting for the round's write halved the
                # shared-durable rate): a store killed within that round forgets only
                # that it was delivered once, and sends it again as new
                self._redelivered.add(d.name)
        if not got and not sub.notice and not refused:
            return None
        return self._delivery(d, sub, got, refused, tails)

    def _delivery(
        self,
        d: _Durable,
        sub: _Sub,
        got: list[tuple[Position, int]],
        refused: _Refused = (),
        tails: dict[int, int] | None = None,
    ) -> DurableDelivery:
        """The answer delivering ``got`` (``tails``: the log's, when the caller has them)."""
        channels: list[int] = []
        offsets: list[int] = []
        counts: list[int] = []
        stamps: list[int] = []
        sizes: list[int] = []
        data: list[bytes] = []
        by_position = dict(got)
        for c, first, n in _runs(sorted(by_position)):
            payloads, run_stamps = self._reads.read(d.name, d.topic, c, first, n)
            channels.extend([c] * n)
            offsets.extend(range(first, first + n))
            counts.extend([by_position[(c, o)] for o in range(first, first + n)])
            stamps.extend(run_stamps)
            sizes.extend(map(len, payloads))
            data.extend(payloads)
        notice, message = sub.notice, sub.message
        sub.notice, sub.message = Notice.NONE, ""
        if tails is None:
            tails = self._tails(d)
        return DurableDelivery(
            tuple(channels),
            tuple(offsets),
            tuple(counts),
            tuple(stamps),
            tuple(sizes),
            b"".join(data),
            notice,
            message,
            d.state.outstanding(tails),
            refused,
        )

    def _last_values(
        self, d: _Durable, sub: _Sub, items: list[tuple[int, int, int, bytes]]
    ) -> DurableDelivery:
        notice, message = sub.notice, sub.message
        sub.notice, sub.message = Notice.NONE, ""
        return DurableDelivery(
            tuple(i[0] for i in items),
            tuple(i[1] for i in items),
            (0,) * len(items),
            tuple(i[2] for i in items),
            tuple(len(i[3]) for i in items),
            b"".join(i[3] for i in items),
            notice,
            message,
            -1,
        )

    def _info(self, r: DurableInfoRequest) -> DurableInfo:
        d = self._durables.get(r.name)
        if d is None or (d.topic != r.topic and not r.any_topic):
            raise PreconditionNotMetError(f"no durable {r.name!r} of topic {r.topic!r}")
        outstanding = d.state.outstanding(self._tails(d)) if d.kind.acknowledged else -1
        return DurableInfo(
            d.name, d.topic, d.kind, d.persistent, len(d.subs), outstanding, d.filter
        )

    def _unsubscribe(self, topic: str, name: str) -> bool:
        d = self._durables.get(name)
        if d is None:
            return False
        if d.topic != topic:
            raise PreconditionNotMetError(
                f"durable {name!r} is a durable of topic {d.topic!r}, not {topic!r}"
            )
        if d.subs:
            raise PreconditionNotMetError(
                f"durable {name!r} of topic {topic!r} has {len(d.subs)} active subscriber(s): "
                "close them before unsubscribing"
            )
        self._destroy(d)
        return True

    def _destroy(self, d: _Durable) -> None:
        for sub in list(d.subs):
            self._close_by_store(d, sub, f"durable {d.name!r} was deleted")
        del self._durables[d.name]
        self._reads.forget(d.name)
        self._delete(d.name, d.topic)

    # -- administration (dcps durables ...; handlers in _admin_objects.py) -------------------

    def reports(
        self, topic: str = "", name: str = "", *, channels: bool = False
    ) -> list[DurableReport]:
        """The durables (of ``topic``; ``name`` of it) as ``dcps durables`` shows them
        (``channels``: with their positions per channel).

        Raises :class:`~dcps.PreconditionNotMetError` when ``name`` is not a durable of
        ``topic``.
        """
        if name:
            d = self._durables.get(name)
            if d is None or d.topic != topic:
                raise PreconditionNotMetError(
                    f"no durable {name!r} of topic {topic!r} in the store"
                )
            chosen = [d]
        else:
            chosen = [d for d in self._durables.values() if not topic or d.topic == topic]
        return [self._report(d, channels) for d in sorted(chosen, key=lambda d: (d.topic, d.name))]

    def _report(self, d: _Durable, with_channels: bool) -> DurableReport:
        now = self._clock()
        acked = d.kind.acknowledged
        subs = tuple(
            DurableSubscriberReport(
                s.name,
                len(d.state.held_by(s.name)) if acked else 0,
                (d.state.subscribers[s.name].window or 0) if s.name in d.state.subscribers else 0,
                s.timeout,
                round(now - s.last_seen, 3),
                s.filter,
            )
            for s in sorted(d.subs.values(), key=lambda s: s.name)
        )
        channels: tuple[DurableChannelReport, ...] = ()
        if with_channels and acked:
            states = self._log.channel_states(d.topic)
            channels = tuple(
                DurableChannelReport(c, floor, above, nxt, states[c].head, states[c].tail)
                for c, (floor, above, nxt) in d.state.channel_positions().items()
                if c < len(states)
            )
        return DurableReport(
            d.topic,
            d.name,
            d.kind.value,
            d.persistent,
            d.filter,
            d.ttl_ms,
            d.state.outstanding(self._tails(d)) if acked else -1,
            sum(s.held for s in subs),
            subs,
            channels,
            0.0 if d.subs else round(now - d.idle_since, 3),
        )

    def _take_over(self, topic: str, name: str, doing: str, force: bool) -> _Durable | None:
        """Durable ``name`` of ``topic`` with its subscribers closed (None: no such durable);
        refused while it has subscribers unless ``force``."""
        d = self._durables.get(name)
        if d is None or d.topic != topic:
            return None
        if d.subs and not force:
            names = ", ".join(sorted(d.subs)[:5]) + (" ..." if len(d.subs) > 5 else "")
            raise PreconditionNotMetError(
                f"cannot {doing} durable {name!r} of topic {topic!r}: it has {len(d.subs)} "
                f"active subscriber(s) ({names}); close them first, or force it "
                f"(dcps durables {doing} ... --force)"
            )
        for sub in list(d.subs):
            self._close_by_store(d, sub, f"an administrator ran {doing} on durable {name!r}")
        return d

    def delete(self, topic: str, name: str, *, force: bool = False) -> DurableDeleted:
        """Delete durable ``name`` of ``topic``, discarding what it has not acknowledged."""
        d = self._durables.get(name)
        if d is None or d.topic != topic:
            return DurableDeleted(False)
        subscribers = len(d.subs)
        discarded = d.state.outstanding(self._tails(d)) if d.kind.acknowledged else -1
        found = self._take_over(topic, name, "delete", force)
        assert found is not None
        self._destroy(found)
        self._dirty.discard(name)
        _log.info(
            "durable %r of topic %r deleted by an administrator%s: %d element(s) discarded",
            name,
            topic,
            " (forced)" if force else "",
            max(discarded, 0),
        )
        return DurableDeleted(True, subscribers, discarded)

    def reset(self, topic: str, name: str, move: Callable[[str], object], *, force: bool) -> None:
        """Reset what durable ``name`` of ``topic`` acknowledged: ``move(group)`` moves the
        commits of its log group (its floors); acknowledgements above them are forgotten."""
        d = self._durables.get(name)
        if d is None or d.topic != topic:
            raise PreconditionNotMetError(f"no durable {name!r} of topic {topic!r} in the store")
        if not d.kind.acknowledged:
            raise PreconditionNotMetError(
                f"durable {name!r} of topic {topic!r} is a last-value durable: it acknowledges "
                "nothing, so there is nothing to reset"
            )
        self._take_over(topic, name, "reset", force)
        self._persist_acks(d)
        self._dirty.discard(name)

        # The acknowledgements above the floors go first, then the floors move (one write per
        # channel): a crash or a failed move in between leaves old floors without those
        # acknowledgements, so elements are delivered again, never skipped. The other order
        # left a reset to an earlier offset redelivering the floor's elements but skipping the
        # out-of-order acknowledged ones after a restart.
        def forget(db: sqlite3.Connection) -> None:
            # (the delivery counts too: the state built after the move starts them over)
            db.execute("DELETE FROM durable_acks WHERE name = ?", (name,))
            db.execute("DELETE FROM durable_deliveries WHERE name = ?", (name,))
            db.execute("DELETE FROM durable_delivered WHERE name = ?", (name,))

        self._log.write(f"forgetting the acknowledgements of durable {name!r}", forget)
        try:
            move(d.group)
        finally:  # memory follows the file, whatever part of the move was written
            d.state = DurableState(d.kind, self._floors(topic, name))
            d.idle_since = self._clock()
        _log.info("durable %r of topic %r reset by an administrator", name, topic)

    # -- subscribers leaving --------------------------------------------------------------

    def _drop_subscriber(self, d: _Durable, name: str) -> None:
        gone = d.subs.pop(name, None)
        if gone is not None:
            self._forget(gone, d.name)
        d.state.remove(name)
        parked = self._parked.pop((d.name, name), None)
        if parked is not None:
            self._fail(parked.call, PreconditionNotMetError(f"subscriber {name!r} closed"))
        if not d.subs:
            d.idle_since = self._clock()
            if d.anonymous:  # FTL: a durable without a name goes with its subscriber
                self._destroy(d)
                return
        self._serve_parked()

    def _close_by_store(self, d: _Durable, name: str, why: str) -> None:
        """Close subscriber ``name`` (its parked poll is told why; its elements are redelivered)."""
        gone = d.subs.pop(name, None)
        if gone is not None:
            self._forget(gone, d.name)
        d.state.remove(name)
        parked = self._parked.pop((d.name, name), None)
        if parked is not None:
            self._reply(parked.call, DurableDelivery(notice=Notice.CLOSED, message=why))
        elif why != "timed out":
            d.closed[name] = why
            while len(d.closed) > _CLOSED_KEPT:
                del d.closed[next(iter(d.closed))]
        if not d.subs:
            d.idle_since = self._clock()

    # -- the store's rounds -----------------------------------------------------------------

    def wants(self, topic: str) -> bool:
        """Whether a publish to ``topic`` matters to a durable (a last-value sibling)."""
        return any(
            d.kind is DurableKind.LAST_VALUE and siblings(d.topic, topic)
            for d in self._durables.values()
        )

    def published(
        self, topic: str, channel: int, first: int, stamp: int, payloads: list[bytes]
    ) -> None:
        """A batch was appended to ``topic``: last-value durables keep its last element."""
        if not payloads:
            return
        last = (channel, first + len(payloads) - 1, stamp, payloads[-1])
        for d in self._durables.values():
            if d.kind is not DurableKind.LAST_VALUE or not siblings(d.topic, topic):
                continue
            d.values[topic] = last
            for sub in d.subs.values():
                if sub.topic == topic:
                    sub.updates.extend(
                        (channel, first + i, stamp, p) for i, p in enumerate(payloads)
                    )
            if d.persistent:
                row = (d.name, topic, *last)

                def keep(db: sqlite3.Connection, row: tuple[Any, ...] = row) -> None:
                    db.execute(
                        "INSERT OR REPLACE INTO durable_values VALUES (?, ?, ?, ?, ?, ?)", row
                    )

                self._log.write(f"keeping the last value of topic {topic!r} for {d.name!r}", keep)
        self._serve_parked()

    def tick(self) -> None:
        """Once per store round: write acks, expire silent subscribers and idle durables,
        answer polls."""
        now = self._clock()
        for key, (since, _) in list(self._enlisted.items()):
            if now - since > _ENLISTED_KEPT:
                del self._enlisted[key]
        self._tick_temporaries(now)
        for d in list(self._durables.values()):
            for sub in list(d.subs.values()):
                if now - sub.last_seen > sub.timeout and (d.name, sub.name) not in self._parked:
                    _log.info("durable %r: subscriber %r timed out", d.name, sub.name)
                    self._close_by_store(d, sub.name, "timed out")
                    if d.anonymous and not d.subs:
                        self._destroy(d)
            if (
                d.name in self._durables
                and not d.subs
                and d.ttl_ms >= 0
                and now - d.idle_since > d.ttl_ms / 1000
            ):
                _log.info("durable %r: no subscriber for its TTL: deleted", d.name)
                self._destroy(d)
        self._serve_parked(now)
        # after the polls: the acks they carried and the delivery counts of what went out
        for name in self._dirty:
            dirty = self._durables.get(name)
            held = self._held.pop(name, [])
            try:
                if dirty is not None:
                    self._persist_acks(dirty)
            except Exception as exc:  # (a full disk): those polls are refused, the rest go on
                for call, delivery in held:
                    if dirty is not None:  # never seen: given back, to be delivered again
                        positions = list(zip(delivery.channels, delivery.offsets, strict=True))
                        dirty.state.rollback(call.request.subscriber, positions)
                    self._fail(call, exc)
                continue
            for call, delivery in held:
                self._reply(call, delivery)
        self._dirty.clear()
        self._redelivered.clear()
        for held in self._held.values():  # (a durable deleted meanwhile)
            for call, delivery in held:
                self._reply(call, delivery)
        self._held.clear()
        for topic in {d.topic for d in self._durables.values()}:
            if now >= self._next_trim.get(topic, 0.0):
                self._next_trim[topic] = now + _TRIM_INTERVAL
                self._log.trim(topic)

    def _serve_parked(self, now: float | None = None) -> None:
        """Answer the waiting polls that have something now (round-robin order), or expired."""
        if not self._parked:
            return
        now = self._clock() if now is None else now
        for key in list(self._parked):
            parked = self._parked.pop(key)
            d = self._durables.get(key[0])
            sub = None if d is None else d.subs.get(key[1])
            if d is None or sub is None:
                continue
            sub.last_seen = now
            try:
                delivery = self._take(d, sub, parked.call.request.count, parked.refused)
            except Exception as exc:  # answered alone; the others go on
                self._fail(parked.call, exc)
                continue
            if delivery is not None:
                self._answer(d, parked.call, delivery)
            elif now >= parked.deadline:
                self._reply(parked.call, self._delivery(d, sub, [], parked.refused))
            else:
                self._parked[key] = parked  # back at the end: the next round starts elsewhere


def _runs(positions: list[Position]) -> list[tuple[int, int, int]]:
    """Sorted positions as ``(channel, first, count)`` runs of consecutive offsets."""
    runs: list[tuple[int, int, int]] = []
    for c, o in positions:
        if runs and runs[-1][0] == c and runs[-1][1] + runs[-1][2] == o:
            runs[-1] = (c, runs[-1][1], runs[-1][2] + 1)
        else:
            runs.append((c, o, 1))
    return runs


def _serve(store: Any, call: Any) -> None:
    store.durables.handle(call)


#: The store's handlers of durable requests (``Store._HANDLERS``).
DURABLE_HANDLERS: dict[int, Callable[[Any, Any], None]] = {
    cls.op: _serve
    for cls in (
        DurableSubscribeRequest,
        DurablePollRequest,
        DurableAckRequest,
        DurableRollbackRequest,
        DurableCloseRequest,
        DurableUnsubscribeRequest,
        DurableInfoRequest,
        TemporaryTopicRequest,
        DurableTxAckRequest,
    )
}
DURABLE_HANDLERS[TxCommitRequest.op] = on_tx_commit
DURABLE_HANDLERS[TxAbortRequest.op] = on_tx_abort
