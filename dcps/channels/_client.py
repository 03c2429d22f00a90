"""StoreClient: typed request/reply with the store (or the stores sharing the channels).

Client-side only: the store never imports this module. Each method builds
one typed request of ``dcps.wire._requests`` and returns the typed answer of
``dcps.wire._replies`` (or a future of it); a store error raises as the
:class:`~dcps.DcpsError` its wire code names.

A store that restarts (a new incarnation announces the same share) is noticed
at once: see :class:`StoreClient` for what happens to outstanding requests.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import attrs
from cyclonedds.core import (
    GuardCondition,
    InstanceState,
    Listener,
    ReadCondition,
    SampleState,
    ViewState,
    WaitSet,
)
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.util import duration

from dcps._cyclone.binding import matched_readers
from dcps.wire._auth_member import MemberOffer, MemberSecret
from dcps.wire._codes import CommitStatus, ErrorCode, Op, SeekMode
from dcps.wire._messages import LiveBatch, Reply, Request, StoreAnnouncement
from dcps.wire._names import (
    ANNOUNCE_QOS,
    ANY_STATE,
    MAX_OUTSTANDING,
    REPLY_QOS,
    REQUEST_WRITER_QOS,
    reply_partition,
    request_partition,
    share_count,
)
from dcps.wire._replies import (
    ChannelStates,
    Commits,
    Fetched,
    GroupDestroyed,
    Membership,
    Pong,
    Published,
    Seeked,
    TopicConfig,
    raise_for_status,
)
from dcps.wire._requests import (
    CommitRequest,
    DestroyGroupRequest,
    EnsureTopicRequest,
    FetchRequest,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    PingRequest,
    PublishRequest,
    SeekRequest,
    StateRequest,
    StoreRequest,
)
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption, Sealer
from dcps.wire._transport import (
    Endpoint,
    delete_entity,
    drop_endpoint,
    live_announcements,
    write_message,
)
from idl._errors import AlreadyClosedError, DcpsTimeoutError, PreconditionNotMetError

__all__ = ["StoreClient"]

_log = logging.getLogger("dcps.channels")

T = TypeVar("T")
#: Turns a successful wire reply into its typed answer (None: hand the raw reply over).
_Decode = Callable[[Reply], Any] | None

#: Requests that go to every store (the coordinator's reply first).
_TO_ALL = frozenset({Op.JOIN, Op.DESTROY_GROUP})
#: Requests only the coordinating store (share 0/n) answers.
_TO_COORDINATOR = frozenset({Op.PING, Op.HEARTBEAT, Op.LEAVE})
#: Per-channel reply fields, merged back in channel order.
_PER_CHANNEL = ("heads", "tails", "offsets", "codes")
#: Requests sealed with the member's proof (JOIN: when the client holds a secret already).
_MEMBER_OPS = frozenset({Op.COMMIT, Op.SEEK, Op.HEARTBEAT, Op.LEAVE, Op.JOIN})
#: Requests a restarted store may be sent again: doing them twice is doing them once.
#: (A PUBLISH is too when it carries an idempotence key; DESTROY_GROUP is not: its
#: answer, whether the group existed, would be wrong the second time.)
_RESENDABLE = frozenset(
    {
        Op.PING,
        Op.ENSURE_TOPIC,
        Op.FETCH,
        Op.STATE,
        Op.COMMIT,
        Op.SEEK,
        Op.JOIN,
        Op.HEARTBEAT,
        Op.LEAVE,
        # reads, and hand-outs whose holders the new store does not know (it delivers
        # every unacknowledged element again): asking the new store is asking once
        Op.DURABLE_POLL,
        Op.DURABLE_INFO,
        Op.MAP_GET,
        Op.MAP_LIST,
        Op.MAP_CHANGES,
        Op.QUEUE_RECEIVE,
        Op.QUEUE_STATE,
        Op.QUEUE_HEARTBEAT,
        Op.DESCRIBE_TOPICS,
        Op.DESCRIBE_GROUPS,
        Op.STORE_STATUS,
        Op.HISTORY_FETCH,
    }
)
#: Requests a store found again (the same incarnation, after the hosts forgot each other)
#: may be sent again. Not the hand-outs: a QUEUE_RECEIVE or DURABLE_POLL the store took
#: before the cut was answered then (its reply arrives: replies are TRANSIENT_LOCAL), and
#: a second copy would be handed elements of its own that the client, taking the first
#: reply, never sees; they stay held by a live consumer.
_FOUND_AGAIN_RESENDABLE = _RESENDABLE - {Op.QUEUE_RECEIVE, Op.DURABLE_POLL}
#: Longest wait (s) for a restarted store's request reader to match before re-sending anyway.
_MATCH_WAIT = 2.0
#: The reply thread's wait (s) while a restarted store's request reader is not matched yet.
_MATCH_POLL = 0.005
#: An unkeyed PUBLISH written this close (s) before the restarted store's reader was seen
#: matching may have reached it: its outcome is unknown.
_MATCH_MARGIN = 0.05


@attrs.define
class _Pending:
    """One request awaiting its reply: where it went, and what to send again."""

    future: Future[Any]
    deadline: float
    decode: _Decode
    index: int  # the store it went to
    wire: Request
    #: The store incarnation it is (re-)sealed for; with a key, a reply is accepted only from it.
    incarnation: str
    held: bool = False  # not (to be) written now: waiting for a restarted store to match
    sent_ns: int = 0  # wall clock of the (last) write, 0 if not written
    sent_at: float = 0.0  # monotonic time of the (last) write
    #: An unkeyed PUBLISH written after the restarted store started: it reached that
    #: store iff written after its request reader matched (decided once matched).
    undecided: bool = False


@attrs.define
class _Restart:
    """A store share that restarted, while its new request reader is not matched yet."""

    incarnation: str
    participant: Any  # the new store's participant key (uuid), None if unknown
    give_up: float  # monotonic: re-send even if no match was seen by then


def _resendable(wire: Request, ops: frozenset[Op] = _RESENDABLE) -> bool:
    """Whether ``wire`` may be sent again: its op is one of ``ops``, or it is a keyed PUBLISH."""
    return wire.op in ops or (wire.op == Op.PUBLISH and bool(wire.text))


def _leave_done(reply: Reply) -> None:
    return None


def _destroyed(reply: Reply) -> bool:
    return GroupDestroyed.from_wire(reply).existed


class StoreClient:
    """Typed request/reply with the store (or the stores sharing the channels) of a namespace.

    One daemon thread takes replies and completes the futures of the
    ``*_async`` methods; requests unanswered within ``request_timeout`` fail
    with :class:`~dcps.DcpsTimeoutError`. :meth:`connect` learns how many
    stores share the channels; requests are then routed to the store(s) that
    must answer them and split replies merged (see ``dcps/store/_shares.py``).

    ``key`` and ``admin_key`` (see ``docs/security.md``): a
    :class:`~dcps.wire._auth_keys.StoreKey`, a key file's path, None, or (the
    default) the files named by ``DCPS_STORE_KEY_FILE`` and
    ``DCPS_STORE_ADMIN_KEY_FILE`` if set. With a key, requests are sealed for
    the store incarnation they are addressed to, and a reply is accepted only
    when it verifies as coming from that incarnation (others are dropped,
    counted and logged; the request stays pending).

    **Store restarts.** After :meth:`connect` the client watches the stores'
    announcements. When a new incarnation announces a share (the store was
    killed and restarted, say), the client, on its own thread and at once:

    1. fails each request outstanding at that store whose outcome is unknown
       with :class:`~dcps.PreconditionNotMetError` (saying "unknown outcome"):
       a PUBLISH without an idempotence key (the dead store may have stored
       it; the store does not deduplicate such publishes) and DESTROY_GROUP;
    2. waits until its request writer matches the new store's request reader
       (at most 2 s), holding requests made meanwhile, then sends the held
       ones and sends again every other outstanding request (same request
       id; PING, ENSURE_TOPIC, FETCH, STATE, COMMIT, SEEK, JOIN, HEARTBEAT,
       LEAVE, and PUBLISH with an idempotence key, which the store
       deduplicates), each with a
       fresh ``request_timeout``. An unkeyed PUBLISH written after the new
       store started (its announcement's ``started_ns``; the clocks of client
       and store hosts are assumed to agree within the restart time) cannot
       have reached the dead store: written before the new store's reader
       matched, it reached nobody and is sent again; written after, the new
       store answers it; written within 50 ms before the match was seen, it
       fails as in 1;
    3. then calls every restart listener (:meth:`add_restart_listener`), once.

    **A store found again.** When the link to a store was cut for longer than
    the participant lease, the two participants forget each other: requests
    written meanwhile, or not yet delivered when the lease ended, reach nobody
    (the request writer is VOLATILE), and would wait out ``request_timeout``.
    When the request reader of the same store participant matches again, the
    client sends again, at once and with a fresh ``request_timeout``, every
    outstanding request written before that match that may be sent twice
    (the list above but QUEUE_RECEIVE and DURABLE_POLL); the store answers
    both copies and the second answer is dropped. The others stay
    outstanding: the store may have taken them before the cut, and then its
    answer arrives (replies are TRANSIENT_LOCAL), else they time out. Those
    are a PUBLISH without idempotence key and DESTROY_GROUP (the store would
    do them twice), and the hand-outs QUEUE_RECEIVE and DURABLE_POLL: a
    second copy taken by the same store is handed elements of its own, which
    the client, taking the first answer, would never see.

    With a namespace key the same tracking serves authentication: only
    announcements that verify can restart anything, every request (re-sent
    ones too) is sealed when written for the incarnation its entry names, and
    a reply is accepted only from that incarnation. A restart forgets the
    member secrets agreed with the dead incarnation: a COMMIT, SEEK, HEARTBEAT
    or LEAVE of a member that has not joined the new incarnation yet fails
    with :class:`~dcps.PreconditionNotMetError` ("join again first") instead
    of being sent. A PUBLISH without idempotence key written after the new
    store started was sealed for the dead one, which the new store refuses:
    it reached nobody, so it is sent again, re-sealed.

    A group member that hears of the restart rejoins with
    ``join(..., previous_channels=<the channels it owned>)``: the restarted
    store gives it those channels back unless another rejoining member claimed
    them first, and keeps the channels nobody claimed yet for their previous
    owners for a member timeout (``dcps/store/_groups.py``). A member that gets
    its channels back keeps its cursors (no need to fetch from the commits
    again), so nothing is delivered twice.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        request_timeout: float = 10.0,
        key: KeyOption = FROM_ENVIRONMENT,
        admin_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        self.endpoint = endpoint
        self._sealer = Sealer.from_keys(key, admin_key)
        #: Key-exchange offers of JOINs awaiting their answers, by public value (the blob
        #: of the JOIN, so a re-sent JOIN completes with its own offer).
        self._offers: dict[bytes, MemberOffer] = {}
        #: Member secrets by (store index, topic, group, member): each is agreed with one
        #: store incarnation, so a restart of that store forgets them (the member rejoins).
        self._secrets: dict[tuple[int, str, str, str], MemberSecret] = {}
        self.client_id = uuid.uuid4().hex
        self.request_timeout = request_timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, _Pending] = {}
        #: By store index: the incarnation answering there, and when it started (ns). The one
        #: incarnation tracking for both authentication (requests are sealed for it, replies
        #: accepted only from it) and resumption (a new one is a restart).
        self._incarnations: dict[int, tuple[str, int]] = {}
        self._seen: set[str] = set()  # every incarnation announced so far
        self._restarts: dict[int, _Restart] = {}  # by store index
        self._restart_listeners: list[Callable[[], None]] = []
        self._announced: DataReader[Any] | None = None  # the announcements, once connected
        self._announced_cond: ReadCondition | None = None
        #: (id of a request writer, subscription handle) -> monotonic time it matched.
        self._matched_at: dict[tuple[int, int], float] = {}
        #: Matches the reply thread has not looked at yet: (writer, handle, monotonic time).
        self._new_matches: deque[tuple[DataWriter[Any], int, float]] = deque()
        #: By store index: the participant key of the store answering there (None: unknown).
        self._store_participants: dict[int, Any] = {}
        self._match_listener = Listener(on_publication_matched=self._on_matched)  # type: ignore[no-untyped-call]
        self._window = threading.BoundedSemaphore(MAX_OUTSTANDING)  # see REQUEST_WRITER_QOS
        self._lock = threading.Lock()
        self._writers: list[DataWriter[Any]] = [
            endpoint.writer(
                endpoint.request_topic,
                endpoint.namespace,
                REQUEST_WRITER_QOS,
                seal=self._sealing(0),
            )
        ]  # by store index
        self._writers[0].set_listener(self._match_listener)
        self.store_count = 1
        self._reader = endpoint.reader(
            endpoint.reply_topic, reply_partition(endpoint.namespace, self.client_id), REPLY_QOS
        )
        self._ws = endpoint.own(WaitSet(endpoint.participant))
        self._cond = ReadCondition(self._reader, ANY_STATE)
        self._guard = endpoint.own(GuardCondition(endpoint.participant))
        self._ws.attach(self._cond)
        self._ws.attach(self._guard)
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="dcps-store-client", daemon=True)
        self._thread.start()

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    @property
    def sealer(self) -> Sealer:
        """How this client authenticates (``sealer.drops()``: the replies it refused)."""
        return self._sealer

    # -- authentication (dcps/wire/_sealing.py) -------------------------------------------

    def _sealing(self, index: int) -> Callable[[Request], bytes | None] | None:
        """The seal hook of the request writer to store ``index`` (None without a key)."""
        if not self._sealer.enabled:
            return None
        return functools.partial(self._seal, index)

    def _incarnation(self, index: int) -> str:
        """The incarnation of store ``index`` requests are addressed to ("" if unknown)."""
        known = self._incarnations.get(index)
        return "" if known is None else known[0]

    def _seal(self, index: int, request: Request) -> bytes | None:
        """Seal ``request`` for the incarnation its pending entry names (the writer's hook).

        Called by the request writer on every write, first or re-sent, so a
        request re-sent to a restarted store is sealed for the new incarnation.
        Runs under ``self._lock`` when :meth:`_resume` writes: it must not take it.
        """
        entry = self._pending.get(request.request_id)
        incarnation = entry.incarnation if entry is not None else self._incarnation(index)
        member = None
        if request.op in _MEMBER_OPS:
            member = self._secrets.get((index, request.topic, request.group, request.member))
        return self._sealer.seal_request(request, incarnation, member)

    def accept_live(self, batch: LiveBatch, topic: str, channel: int) -> bool:
        """Whether a live batch taken from the live partition of ``channel`` of ``topic``
        was pushed there by the store serving that channel now.

        Always True without a key. With one, a forged push, a replayed one, or
        one of another store incarnation is dropped: counted in
        :meth:`Sealer.drops`, logged (rate-limited). A push dropped while a
        restarted store is not yet known leaves a gap the subscriber fetches.
        """
        if not self._sealer.enabled:
            return True
        index = channel % self.store_count if self.store_count > 0 else 0
        return self._sealer.accept_live(batch, self._incarnation(index), topic, channel)

    def accept_map_change(self, push: LiveBatch, name: str) -> bool:
        """:meth:`accept_live` for a change push of map ``name`` (maps live in the
        coordinating store)."""
        if not self._sealer.enabled:
            return True
        return self._sealer.accept_map_change(push, self._incarnation(0), name)

    def _needs_rejoin(self, index: int, wire: Request) -> PreconditionNotMetError | None:
        """Why a member request cannot be sealed for store ``index`` (None: it can).

        With a key, COMMIT, SEEK, HEARTBEAT and LEAVE carry the proof of the
        member secret agreed with the store incarnation at JOIN; a restarted
        store knows no secret, so the member must join again first.
        """
        if not self._sealer.enabled or wire.op not in _MEMBER_OPS or wire.op == Op.JOIN:
            return None
        if (index, wire.topic, wire.group, wire.member) in self._secrets:
            return None
        return PreconditionNotMetError(
            f"{Op(wire.op).name} of member {wire.member!r} of group {wire.group!r} of topic "
            f"{wire.topic!r}: no member secret for store share {index}/{self.store_count} "
            f"(incarnation {self._incarnation(index) or '?'}); the member has not joined it, or "
            "the store restarted since: join again first"
        )

    def _authentic(self, reply: Reply, entry: _Pending) -> bool:
        """Whether ``reply`` comes from the store incarnation its request went to.

        An authentic JOIN answer completes the member's key exchange first.
        """
        index, incarnation, request = entry.index, entry.incarnation, entry.wire
        if not self._sealer.accept_reply(reply, incarnation):
            return False
        if request.op == Op.JOIN and not reply.status and self._sealer.enabled:
            ident = (request.topic, request.group, request.member)
            public = bytes(request.blob)
            offer = self._offers.get(public)
            if offer is not None:
                self._drop_offer(public, entry)
                try:
                    secret = offer.finish(
                        bytes(reply.blob),
                        group=request.group,
                        member=request.member,
                        incarnation=incarnation,
                    )
                except Exception as exc:  # a store answering with a bad exchange value
                    reply.status, reply.error = int(ErrorCode.ILLEGAL_OPERATION), str(exc)
                else:
                    self._secrets[(index, *ident)] = secret
        return True

    def _drop_offer(self, public: bytes, answered: _Pending) -> None:
        """Forget an offer once no other JOIN awaiting an answer carries it."""
        with self._lock:
            if not any(
                e is not answered and e.wire.op == Op.JOIN and bytes(e.wire.blob) == public
                for e in self._pending.values()
            ):
                self._offers.pop(public, None)

    # -- connecting ----------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        """Wait until every store share is announced and answers a ping.

        Raises ``DcpsTimeoutError`` after ``timeout`` s, naming the missing shares.
        """
        deadline = time.monotonic() + timeout
        ep = self.endpoint
        where = f"in namespace {ep.namespace!r} (domain {ep.participant.domain_id})"
        announced = self._announced
        if announced is None:  # kept: the reply thread watches it for restarts
            announced = self._announced = ep.reader(ep.store_topic, ep.namespace, ANNOUNCE_QOS)
        while True:
            live = live_announcements(announced)
            verified = self._sealer.verified_announcements(live)
            count, why = share_count(verified)
            if count is not None:
                break
            if time.monotonic() >= deadline:
                if len(verified) < len(live):
                    why = (
                        f"{why}; {len(live) - len(verified)} store announcement(s) did not "
                        "verify with this client's key (is the store using the same key?)"
                    )
                raise DcpsTimeoutError(
                    f"no dcps store answered {where} within {timeout:g} s: {why}"
                )
            time.sleep(0.02)
        self._route(count)
        self._address(count, verified)
        waiting = set(range(count))
        while waiting:
            for index in sorted(waiting):
                if not matched_readers(self._writers[index]):
                    continue
                fut = self._send(index, PingRequest().to_wire(self.client_id, 0), Pong.from_wire)
                try:
                    pong = fut.result(timeout=min(0.5, max(0.05, deadline - time.monotonic())))
                    waiting.discard(index)
                    live = self._sealer.verified_announcements(live_announcements(announced))
                    self._learn(index, pong.incarnation, live)
                except (TimeoutError, DcpsTimeoutError):
                    self._forget(fut)
            if not waiting:
                self._watch_announcements()
                return
            if time.monotonic() >= deadline:
                shares = ", ".join(f"{i}/{count}" for i in sorted(waiting))
                raise DcpsTimeoutError(
                    f"no dcps store answered {where} within {timeout:g} s "
                    f"(store share {shares} announced but did not answer)"
                )
            time.sleep(0.02)

    def _address(self, count: int, verified: list[StoreAnnouncement]) -> None:
        """Address each share's store by its newest verified, live announcement.

        Only the first PING needs it (a keyed PING is sealed for the incarnation
        it goes to); the PING's answer then settles it (:meth:`_learn`).
        """
        newest: dict[int, StoreAnnouncement] = {}
        for a in verified:
            if a.count == count and 0 <= a.index < count:
                old = newest.get(a.index)
                if old is None or (a.started_ns, a.incarnation) > (old.started_ns, old.incarnation):
                    newest[a.index] = a
        with self._lock:
            for index, a in newest.items():
                self._incarnations[index] = (a.incarnation, a.started_ns)

    def _learn(self, index: int, incarnation: str, live: list[StoreAnnouncement]) -> None:
        """Store ``index`` answers as ``incarnation``; the stores announced before it are old."""
        started = next((a.started_ns for a in live if a.incarnation == incarnation), 0)
        participant = next(
            (
                self._participant_of(a.sample_info)  # type: ignore[attr-defined]
                for a in live
                if a.incarnation == incarnation
            ),
            None,
        )
        with self._lock:
            self._set_store_participant(index, participant)
            self._seen.update(a.incarnation for a in live if a.started_ns <= started)
            self._seen.add(incarnation)
            self._incarnations[index] = (incarnation, started)

    def _set_store_participant(self, index: int, participant: Any) -> None:
        """Store ``index``'s participant is ``participant`` (``_lock`` held)."""
        if participant is None:
            _log.info(
                "dcps store client: the participant of store share %d/%d is not known: requests "
                "lost to an outage past the lease wait for their timeout",
                index,
                self.store_count,
            )
        self._store_participants[index] = participant

    def _watch_announcements(self) -> None:
        """Have the reply thread notice announcements (new store incarnations) at once."""
        if self._announced_cond is None and self._announced is not None:
            fresh = SampleState.NotRead | ViewState.Any | InstanceState.Any
            self._announced_cond = ReadCondition(self._announced, fresh)
            self._ws.attach(self._announced_cond)
            self._guard.set(True)  # take what is there already

    def _on_matched(self, writer: DataWriter[Any], status: Any) -> None:
        """When a request writer (un)matches a reader (on a Cyclone thread: record only)."""
        handle = status.last_subscription_handle
        if status.current_count_change > 0:
            at = time.monotonic()
            self._matched_at[(id(writer), handle)] = at
            self._new_matches.append((writer, handle, at))
        elif status.current_count_change < 0:
            self._matched_at.pop((id(writer), handle), None)

    def add_restart_listener(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once each time a store of this namespace restarts.

        It runs on the client's reply thread, after the outstanding requests
        were sent again or failed (see the class docstring). Keep it short:
        it may send requests (``join_async`` and the other ``*_async``
        methods) but must not wait for their answers, which that same thread
        takes afterwards. Only stores the client has connected to are watched.
        """
        with self._lock:
            self._restart_listeners.append(callback)

    def _route(self, count: int) -> None:
        """Send requests to ``count`` stores (one writer per store partition)."""
        if count == self.store_count:
            return
        ep = self.endpoint
        writers = [
            ep.writer(
                ep.request_topic,
                request_partition(ep.namespace, i, count),
                REQUEST_WRITER_QOS,
                seal=self._sealing(i),
            )
            for i in range(count)
        ]
        for writer in writers:
            writer.set_listener(self._match_listener)
        with self._lock:
            old, self._writers, self.store_count = self._writers, writers, count
        for writer in old:
            drop_endpoint(writer)

    # -- typed requests ------------------------------------------------------------------

    def ping(self, timeout: float | None = None) -> Pong:
        """Ask the (coordinating) store who it is."""
        return self.wait_for(Op.PING, self.request_async(PingRequest(), Pong.from_wire), timeout)

    def ensure_topic(
        self,
        topic: str,
        channel_count: int = 0,
        retain_consumed: bool | None = None,
        type_name: str = "",
        timeout: float | None = None,
        type_identity: str = "",
    ) -> TopicConfig:
        """Create ``topic`` unless the store has it; its configuration there.

        ``type_identity`` (:func:`idl.type_identity`) is recorded for a new
        topic and checked against an existing one's: another type raises
        :class:`~dcps.PreconditionNotMetError` naming the topic and both types.
        """
        request = EnsureTopicRequest(
            topic, channel_count, retain_consumed, type_name, type_identity
        )
        return self.wait_for(Op.ENSURE_TOPIC, self._ensure(request), timeout)

    def publish_async(
        self, topic: str, channel: int, sizes: list[int], blob: bytes, key: str = ""
    ) -> Future[Published]:
        """Append a batch (``sizes`` of the elements concatenated in ``blob``) to a channel."""
        return self.request_async(
            PublishRequest(topic, channel, sizes, blob, key), Published.from_wire
        )

    def fetch_async(self, topic: str, channel: int, offset: int, count: int) -> Future[Fetched]:
        """Up to ``count`` stored elements of ``channel`` from ``offset`` (in bulk)."""
        return self.request_async(FetchRequest(topic, channel, offset, count), Fetched.from_wire)

    def fetch(
        self, topic: str, channel: int, offset: int, count: int, timeout: float | None = None
    ) -> Fetched:
        """:meth:`fetch_async`, waiting for the answer."""
        return self.wait_for(Op.FETCH, self.fetch_async(topic, channel, offset, count), timeout)

    def commit_async(
        self,
        topic: str,
        group: str,
        member: str,
        offsets: dict[int, int],
        *,
        allow_unowned: bool = False,
        incarnation: str = "",
        member_timeout_ms: int = 0,
    ) -> Future[Commits]:
        """Commit ``offsets`` (channel -> offset) for ``member`` of ``group``."""
        request = CommitRequest(
            topic,
            group,
            member,
            tuple(offsets),
            tuple(offsets.values()),
            allow_unowned,
            incarnation,
            member_timeout_ms,
        )
        return self.request_async(request, Commits.from_wire)

    def commit(
        self,
        topic: str,
        group: str,
        member: str,
        offsets: dict[int, int],
        timeout: float | None = None,
        **options: Any,
    ) -> Commits:
        """:meth:`commit_async`, waiting for the answer."""
        fut = self.commit_async(topic, group, member, offsets, **options)
        return self.wait_for(Op.COMMIT, fut, timeout)

    def seek(
        self,
        topic: str,
        group: str,
        member: str,
        mode: SeekMode,
        targets: dict[int, int],
        timeout: float | None = None,
    ) -> Seeked:
        """Move the group's channels to ``targets`` (read as ``mode`` says)."""
        request = SeekRequest(topic, group, member, mode, tuple(targets), tuple(targets.values()))
        return self.wait_for(Op.SEEK, self.request_async(request, Seeked.from_wire), timeout)

    def state_async(
        self, topic: str, group: str = "", channels: Iterable[int] = ()
    ) -> Future[ChannelStates]:
        """Heads and tails of ``channels`` (all if none), with ``group``'s commits."""
        return self.request_async(
            StateRequest(topic, group, tuple(channels)), ChannelStates.from_wire
        )

    def state(
        self,
        topic: str,
        group: str = "",
        channels: Iterable[int] = (),
        timeout: float | None = None,
    ) -> ChannelStates:
        """:meth:`state_async`, waiting for the answer."""
        return self.wait_for(Op.STATE, self.state_async(topic, group, channels), timeout)

    def join_async(
        self,
        topic: str,
        group: str,
        member: str,
        member_timeout_ms: int,
        *,
        anonymous: bool = False,
        previous_channels: Sequence[int] = (),
    ) -> Future[Membership]:
        """Join ``group``; expelled after ``member_timeout_ms`` without a heartbeat.

        A member rejoining a restarted store names the channels it owned in
        ``previous_channels``: it gets them back unless another rejoining
        member claimed them first (see the class docstring). A restart
        listener rejoins with this form (it must not wait for an answer).

        With a key, each JOIN carries a fresh key-exchange offer: the member
        secret its answer completes is the one the member's later requests
        prove themselves with (a rejoin after a restart agrees a new one).
        """
        offer = self._sealer.member_offer()
        if offer is not None:
            with self._lock:
                self._offers[offer.public] = offer
        request = JoinRequest(
            topic,
            group,
            member,
            member_timeout_ms,
            anonymous,
            offer=b"" if offer is None else offer.public,
            previous_channels=tuple(previous_channels),
        )
        return self.request_async(request, Membership.from_wire)

    def join(
        self,
        topic: str,
        group: str,
        member: str,
        member_timeout_ms: int,
        *,
        anonymous: bool = False,
        previous_channels: Sequence[int] = (),
        timeout: float | None = None,
    ) -> Membership:
        """:meth:`join_async`, waiting for the answer."""
        fut = self.join_async(
            topic,
            group,
            member,
            member_timeout_ms,
            anonymous=anonymous,
            previous_channels=previous_channels,
        )
        return self.wait_for(Op.JOIN, fut, timeout)

    def heartbeat_async(self, topic: str, group: str, member: str) -> Future[Membership]:
        """Tell the coordinating store ``member`` is alive; its current channels."""
        return self.request_async(HeartbeatRequest(topic, group, member), Membership.from_wire)

    def leave(self, topic: str, group: str, member: str, timeout: float | None = None) -> None:
        """``member`` leaves ``group``."""
        fut = self.request_async(LeaveRequest(topic, group, member), _leave_done)
        self.wait_for(Op.LEAVE, fut, timeout)

    def destroy_group(self, topic: str, group: str, timeout: float | None = None) -> bool:
        """Delete ``group`` and its commits; False when it did not exist."""
        fut = self.request_async(DestroyGroupRequest(topic, group), _destroyed)
        return bool(self.wait_for(Op.DESTROY_GROUP, fut, timeout))

    # -- routing -------------------------------------------------------------------------------

    def request_async(self, request: StoreRequest, decode: Callable[[Reply], T]) -> Future[T]:
        """Send a typed ``request`` to the store(s) that must answer it; a future of the
        answer as ``decode`` reads the reply (the one way the feature clients talk to the
        store: durables, maps, queues, JMS, admin, Spark staging)."""
        if self._closed:
            raise AlreadyClosedError("the store client is closed")
        wire = request.to_wire(self.client_id, 0)
        count = self.store_count
        op = request.op
        if count == 1 or op in _TO_COORDINATOR:
            return self._send(0, wire, decode)
        if op in _TO_ALL:
            return self._gather(op, [(i, wire) for i in range(count)], _merge_all, decode)
        channels = list(wire.channels)
        if not channels:
            if op == Op.STATE:  # every channel: each store answers for its own
                parts = [(i, wire) for i in range(count)]
                return self._gather(op, parts, _merge_every_channel, decode)
            return self._send(0, wire, decode)  # a malformed request: let a store refuse it
        stores: dict[int, list[int]] = {}
        for position, channel in enumerate(channels):
            stores.setdefault(int(channel) % count, []).append(position)
        if len(stores) == 1:
            return self._send(next(iter(stores)), wire, decode)
        offsets = list(wire.offsets)
        split = []
        for index, positions in sorted(stores.items()):
            part = dataclasses.replace(wire, channels=[channels[p] for p in positions])
            if len(offsets) == len(channels):
                part.offsets = [offsets[p] for p in positions]
            split.append((index, part))
        part_channels = [list(p.channels) for _, p in split]

        def merge(op: Op, replies: list[Reply]) -> Reply:
            return _merge_split(op, channels, part_channels, replies)

        return self._gather(op, split, merge, decode)

    def _send(self, index: int, wire: Request, decode: _Decode) -> Future[Any]:
        """Write one request to store ``index``; its future completes on the reply thread."""
        fut: Future[Any] = Future()
        # the reply thread must not wait for a place only it can free (a done-callback
        # sending a request): its requests go beyond the window
        if threading.current_thread() is not self._thread:
            if not self._window.acquire(timeout=self.request_timeout):
                raise DcpsTimeoutError(
                    f"{MAX_OUTSTANDING} requests to the store unanswered for "
                    f"{self.request_timeout:g} s: the store is not keeping up"
                )
            fut.add_done_callback(lambda _: self._window.release())
        rid = next(self._ids)
        wire.request_id = rid
        with self._lock:
            entry = _Pending(
                fut,
                time.monotonic() + self.request_timeout,
                decode,
                index,
                wire,
                self._incarnation(index),
            )
            entry.held = index in self._restarts  # sent once the restarted store matched
            self._pending[rid] = entry
            writer = self._writers[index]
        if entry.held:
            return fut
        refused = self._needs_rejoin(index, wire)
        if refused is not None:
            with self._lock:
                self._pending.pop(rid, None)
            fut.set_exception(refused)
            return fut
        entry.sent_ns, entry.sent_at = time.time_ns(), time.monotonic()
        try:
            write_message(writer, wire, whole=self._sealer.enabled)
        except BaseException:
            self._forget(fut)
            raise
        return fut

    def _gather(
        self,
        op: Op,
        parts: Sequence[tuple[int, Request]],
        merge: Callable[[Op, list[Reply]], Reply],
        decode: _Decode,
    ) -> Future[Any]:
        """Send one request per part (store, wire); one future for the merged answer."""
        futures = [self._send(index, dataclasses.replace(wire), None) for index, wire in parts]
        out: Future[Any] = Future()
        left = [len(futures)]
        lock = threading.Lock()

        def done(_: Future[Reply]) -> None:
            with lock:
                left[0] -= 1
                if left[0]:
                    return
            for fut in futures:
                exc = fut.exception()
                if exc is not None:
                    out.set_exception(exc)
                    return
            try:
                merged = merge(op, [fut.result() for fut in futures])
                out.set_result(merged if decode is None else decode(raise_for_status(merged)))
            except Exception as exc:  # a reply that does not fit, or a store's error
                out.set_exception(exc)

        for fut in futures:
            fut.add_done_callback(done)
        return out

    def _ensure(self, request: EnsureTopicRequest) -> Future[TopicConfig]:
        """ENSURE_TOPIC on the coordinator, then on the others with its configuration.

        A topic new to some store (say one restarted on an empty directory)
        then gets the same channel count and retention everywhere.
        """
        first = self.request_store_async(0, request, TopicConfig.from_wire)
        count = self.store_count
        if count == 1:
            return first
        out: Future[TopicConfig] = Future()

        def first_done(fut: Future[TopicConfig]) -> None:
            exc = fut.exception()
            if exc is not None:
                out.set_exception(exc)
                return
            config = fut.result()
            same = EnsureTopicRequest(
                request.topic,
                config.channel_count,
                config.retain_consumed,
                request.type_name,
                request.type_identity,
            )
            wire = same.to_wire(self.client_id, 0)
            rest = self._gather(
                Op.ENSURE_TOPIC, [(i, wire) for i in range(1, count)], _merge_all, None
            )

            def rest_done(f: Future[Reply]) -> None:
                exc = f.exception()
                if exc is None:
                    try:
                        raise_for_status(f.result())
                    except Exception as failed:
                        exc = failed
                if exc is not None:
                    out.set_exception(exc)
                else:
                    out.set_result(config)

            rest.add_done_callback(rest_done)

        first.add_done_callback(first_done)
        return out

    def request_store_async(
        self, index: int, request: StoreRequest, decode: Callable[[Reply], T]
    ) -> Future[T]:
        """:meth:`request_async` to the store of share ``index`` only (admin looks at each)."""
        if self._closed:
            raise AlreadyClosedError("the store client is closed")
        return self._send(index, request.to_wire(self.client_id, 0), decode)

    def _forget(self, fut: Future[Any]) -> None:
        with self._lock:
            for rid, entry in list(self._pending.items()):
                if entry.future is fut:
                    del self._pending[rid]
        fut.cancel()  # frees its place in the window

    def wait_for(self, op: Op, fut: Future[T], timeout: float | None) -> T:
        """The answer of a :meth:`request_async` future, or :class:`~dcps.DcpsTimeoutError`
        naming ``op`` after ``timeout`` s (None: the client's request timeout)."""
        try:
            return fut.result(timeout=timeout if timeout is not None else self.request_timeout + 1)
        except TimeoutError as exc:
            if isinstance(exc, DcpsTimeoutError):
                raise
            self._forget(fut)
            raise DcpsTimeoutError(f"the store did not answer {op.name} in time") from exc

    # -- the reply thread ---------------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            wait = _MATCH_POLL if self._restarts else 0.1
            self._ws.wait(duration(seconds=wait))
            if self._closed:
                break
            self._guard.set(False)
            if self._announced_cond is not None:
                self._watch_stores()
            if self._restarts:
                self._resume()
            if self._new_matches:
                self._found_again()
            replies = self._reader.take(N=512)
            done: list[tuple[Future[Any], Reply, _Decode]] = []
            now = time.monotonic()
            expired: list[Future[Any]] = []
            for reply in replies:
                if getattr(reply, "client", None) != self.client_id:
                    continue
                awaited = self._pending.get(reply.request_id)
                if awaited is None or not self._authentic(reply, awaited):
                    continue  # not awaited, or not from the store it was sent to: dropped
                with self._lock:
                    entry = self._pending.pop(reply.request_id, None)
                if entry is not None:
                    done.append((entry.future, reply, entry.decode))
            with self._lock:
                for rid, entry in list(self._pending.items()):
                    if entry.deadline < now:
                        del self._pending[rid]
                        expired.append(entry.future)
            for fut, reply, decode in done:
                if fut.done():
                    continue
                if decode is None:
                    fut.set_result(reply)
                    continue
                try:
                    result = decode(raise_for_status(reply))
                except Exception as exc:  # the store's error, or an answer that does not fit
                    fut.set_exception(exc)
                else:
                    fut.set_result(result)
            for fut in expired:
                if not fut.done():
                    fut.set_exception(DcpsTimeoutError("the store did not answer in time"))

    # -- store restarts (see the class docstring) ----------------------------------------------

    def _watch_stores(self) -> None:
        """On new announcements: a new incarnation of a share we use is a restart.

        With a key only verified announcements count: a forged one restarts nothing.
        """
        announced, cond = self._announced, self._announced_cond
        if announced is None or cond is None or not announced.read(N=64, condition=cond):
            return  # (reading them untriggers the condition; they stay for connect())
        live = self._sealer.verified_announcements(live_announcements(announced))
        for sample in sorted(live, key=lambda a: a.started_ns):
            with self._lock:
                if sample.incarnation in self._seen:
                    continue
                self._seen.add(sample.incarnation)
                current = self._incarnations.get(sample.index)
            if (
                current is None
                or sample.count != self.store_count
                or sample.started_ns < current[1]
            ):
                continue  # another layout of shares, or an older store: not ours to follow
            info = sample.sample_info  # type: ignore[attr-defined]
            self._restarted(sample.index, sample, self._participant_of(info))

    def _participant_of(self, info: Any) -> Any:
        """The participant key of the writer of an announcement sample (None if unknown)."""
        if self._announced is None:
            return None
        try:
            endpoint = self._announced.get_matched_publication_data(info.publication_handle)
        except Exception:  # no longer matched, or the binding cannot tell
            return None
        return None if endpoint is None else endpoint.participant_key

    def _restarted(self, index: int, announcement: StoreAnnouncement, participant: Any) -> None:
        """Store ``index`` restarted: fail what has an unknown outcome, hold the rest.

        The member secrets agreed with the dead incarnation are forgotten: the
        new one knows none, so members must join again (a fresh key exchange).
        """
        failed: list[_Pending] = []
        with self._lock:
            self._incarnations[index] = (announcement.incarnation, announcement.started_ns)
            self._set_store_participant(index, participant)
            for ident in [k for k in self._secrets if k[0] == index]:
                del self._secrets[ident]
            self._restarts[index] = _Restart(
                announcement.incarnation, participant, time.monotonic() + _MATCH_WAIT
            )
            for rid, entry in list(self._pending.items()):
                if entry.index != index or entry.held:
                    continue
                if _resendable(entry.wire):
                    entry.held = True  # sent again once the new store matched
                elif entry.wire.op == Op.PUBLISH and entry.sent_ns > announcement.started_ns:
                    entry.held = entry.undecided = True  # not taken by the dead store
                else:
                    del self._pending[rid]
                    failed.append(entry)
        self._fail_unknown(index, failed)
        _log.info(
            "dcps store client: %s restarted (incarnation %s); %d requests with an unknown "
            "outcome failed, the others are sent again",
            f"store share {index}/{self.store_count}",
            announcement.incarnation,
            len(failed),
        )

    def _found_again(self) -> None:
        """Send again what a store found again may never have received (see the class docstring).

        Only a match of the request reader of the store's own participant counts:
        another reader of the request topic (a tool, or a hostile participant)
        makes nothing be sent again.
        """
        while self._new_matches:
            writer, handle, matched = self._new_matches.popleft()
            with self._lock:
                index = next((i for i, w in enumerate(self._writers) if w is writer), None)
                if index is None or index in self._restarts:
                    continue  # an old writer, or a restart: _resume sends again
                participant = self._store_participants.get(index)
            if participant is None:  # not known (logged where it was looked up)
                continue
            try:
                endpoint = writer.get_matched_subscription_data(handle)
            except Exception:  # unmatched again meanwhile: a later match will count
                continue
            if endpoint is None or endpoint.participant_key != participant:
                continue
            now = time.monotonic()
            failed: list[tuple[_Pending, Exception]] = []
            again = 0
            with self._lock:  # held: requests made meanwhile go after these, in order
                for rid, entry in list(self._pending.items()):
                    if (
                        entry.index != index
                        or entry.held
                        or not entry.sent_at  # _send is about to write it (after the match)
                        or entry.sent_at >= matched
                        or not _resendable(entry.wire, _FOUND_AGAIN_RESENDABLE)
                    ):
                        continue
                    again += self._send_again(rid, entry, writer, now, failed)
            for entry, error in failed:
                if not entry.future.done():
                    entry.future.set_exception(error)
            if again:
                _log.info(
                    "dcps store client: store share %d/%d found again; %d requests sent again",
                    index,
                    self.store_count,
                    again,
                )

    def _fail_unknown(self, index: int, failed: list[_Pending]) -> None:
        where = f"store share {index}/{self.store_count}"
        for entry in failed:
            if not entry.future.done():
                entry.future.set_exception(
                    PreconditionNotMetError(
                        f"unknown outcome: the {where} restarted before answering "
                        f"{Op(entry.wire.op).name} {_what(entry.wire)}; the dead store may or "
                        "may not have applied it, so it is not sent again"
                    )
                )

    def _resume(self) -> None:
        """Send the held requests to each restarted store whose request reader matched."""
        now = time.monotonic()
        for index, restart in list(self._restarts.items()):
            writer = self._writers[index]
            if now < restart.give_up and not _matches(writer, restart.participant):
                continue
            matched = self._match_time(writer, restart.participant)
            failed: list[tuple[_Pending, Exception]] = []
            unknown: list[_Pending] = []
            with self._lock:  # held: requests made meanwhile go after these, in order
                del self._restarts[index]
                for rid, entry in list(self._pending.items()):  # in request order
                    if entry.index != index or not entry.held:
                        continue
                    entry.held = False
                    if entry.undecided:
                        entry.undecided = False
                        # with a key it was sealed for the dead incarnation, which the new
                        # store refuses: it reached nobody, and is sent again (re-sealed)
                        sealed_for_dead = (
                            self._sealer.enabled and entry.incarnation != restart.incarnation
                        )
                        if not sealed_for_dead:
                            if matched is not None and entry.sent_at > matched:
                                continue  # it reached the new store, which answers it
                            if matched is None or entry.sent_at > matched - _MATCH_MARGIN:
                                del self._pending[rid]
                                unknown.append(entry)
                                continue
                    refused = self._needs_rejoin(index, entry.wire)
                    if refused is not None:  # a member request: its secret died with the store
                        del self._pending[rid]
                        failed.append((entry, refused))
                        continue
                    entry.incarnation = restart.incarnation  # re-sealed for it by the writer
                    self._send_again(rid, entry, writer, now, failed)
                listeners = list(self._restart_listeners)
            self._fail_unknown(index, unknown)
            for entry, error in failed:
                if not entry.future.done():
                    entry.future.set_exception(error)
            for listener in listeners:
                try:
                    listener()
                except Exception:
                    _log.exception("dcps store client: restart listener %r failed", listener)

    def _send_again(
        self,
        rid: int,
        entry: _Pending,
        writer: DataWriter[Any],
        now: float,
        failed: list[tuple[_Pending, Exception]],
    ) -> bool:
        """Write ``entry`` again with a fresh timeout (``_lock`` held); False, and the entry
        dropped into ``failed``, when the writer fails."""
        entry.deadline = now + self.request_timeout
        entry.sent_ns, entry.sent_at = time.time_ns(), time.monotonic()
        try:
            writer.write(entry.wire)
        except Exception as exc:  # the writer failed: the request cannot go
            del self._pending[rid]
            failed.append((entry, exc))
            return False
        return True

    def _match_time(self, writer: DataWriter[Any], participant: Any) -> float | None:
        """When ``writer`` matched the request reader of ``participant`` (None: unknown)."""
        if participant is None:
            return None
        times = []
        try:
            for handle in matched_readers(writer):
                endpoint = writer.get_matched_subscription_data(handle)
                if endpoint is not None and endpoint.participant_key == participant:
                    at = self._matched_at.get((id(writer), handle))
                    if at is not None:
                        times.append(at)
        except Exception:  # a reader that went away meanwhile
            return None
        return min(times, default=None)

    def close(self) -> None:
        """Stop the reply thread and fail pending requests (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._guard.set(True)
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for entry in pending:
            if not entry.future.done():
                entry.future.set_exception(AlreadyClosedError("the store client was closed"))
        conditions = [self._cond, self._guard]
        if self._announced_cond is not None:
            conditions.append(self._announced_cond)
        for entity in (*conditions, self._ws):
            delete_entity(entity)
        drop_endpoint(self._reader)
        if self._announced is not None:
            drop_endpoint(self._announced)
        for writer in self._writers:
            drop_endpoint(writer)


def _matches(writer: DataWriter[Any], participant: Any) -> bool:
    """Whether ``writer`` is matched by a reader of ``participant`` (None: by any reader)."""
    try:
        handles = matched_readers(writer)
        if participant is None:
            return bool(handles)
        for handle in handles:
            endpoint = writer.get_matched_subscription_data(handle)
            if endpoint is not None and endpoint.participant_key == participant:
                return True
    except Exception:  # a reader that went away meanwhile: look again next round
        return False
    return False


def _what(wire: Request) -> str:
    """Where a request went, for an error message."""
    where = f"(request {wire.request_id}"
    if wire.topic:
        where += f", topic {wire.topic!r}"
    if wire.op == Op.PUBLISH and wire.channels:
        where += f", channel {wire.channels[0]}, {len(wire.sizes)} elements"
    if wire.group:
        where += f", group {wire.group!r}"
    return where + ")"


def _merge_all(op: Op, replies: list[Reply]) -> Reply:
    """Every store's reply to one request: the first failure, else the coordinator's."""
    failed = next((r for r in replies if r.status), None)
    if failed is not None:
        return failed
    first = replies[0]
    if op == Op.DESTROY_GROUP:  # existed in any store
        first = dataclasses.replace(first, flag=int(any(r.flag for r in replies)))
    return first


def _merge_every_channel(op: Op, replies: list[Reply]) -> Reply:
    """Every store's STATE of its own channels, merged in channel order."""
    failed = next((r for r in replies if r.status), None)
    if failed is not None:
        return failed
    order = sorted(c for r in replies for c in r.channels)
    return _merge_split(op, order, [list(r.channels) for r in replies], replies)


def _merge_split(
    op: Op, order: list[int], part_channels: list[list[int]], replies: list[Reply]
) -> Reply:
    """The replies to a request split by store, as one reply with channels in ``order``.

    A store refusing a COMMIT's member (not, or no longer, a member it knows)
    makes that store's channels UNOWNED; other failures fail the whole.
    """
    values: dict[int, dict[str, int]] = {c: {} for c in order}
    present = dict.fromkeys(_PER_CHANNEL, False)
    refused: Reply | None = None
    number = 0
    for channels, reply in zip(part_channels, replies, strict=True):
        if reply.status:
            if op == Op.COMMIT and reply.status == ErrorCode.PRECONDITION_NOT_MET:
                refused = reply
                present["codes"] = True
                for c in channels:
                    values[c]["codes"] = CommitStatus.UNOWNED.code
                continue
            return reply
        number = number or int(reply.number)
        for name in _PER_CHANNEL:
            column = getattr(reply, name)
            if column and len(column) == len(reply.channels):
                present[name] = True
                for c, value in zip(reply.channels, column, strict=True):
                    values.setdefault(c, {})[name] = value
    if refused is not None and all(r.status for r in replies):
        return refused
    first = replies[0]
    merged = Reply(client=first.client, request_id=first.request_id, number=number)
    merged.channels = list(order)
    for name in _PER_CHANNEL:
        if present[name]:
            setattr(merged, name, [_value(values[c], name) for c in order])
    return merged


def _value(values: dict[str, int], name: str) -> int:
    """A channel's value of a merged reply column; the default where its store sent none."""
    if name in values:
        return values[name]
    if name == "offsets":  # no commit on that store yet: just before the head
        return values.get("heads", 0) - 1
    return -1 if name == "tails" else 0
