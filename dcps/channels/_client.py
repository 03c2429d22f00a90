"""StoreClient: typed request/reply with the store (or the stores sharing the channels).

Client-side only: the store never imports this module. Each method builds
one typed request of ``dcps.wire._requests`` and returns the typed answer of
``dcps.wire._replies`` (or a future of it); a store error raises as the
:class:`~dcps.DcpsError` its wire code names.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from cyclonedds.core import GuardCondition, ReadCondition, WaitSet
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.util import duration

from dcps.wire._auth_member import MemberOffer, MemberSecret
from dcps.wire._codes import CommitStatus, ErrorCode, Op, SeekMode
from dcps.wire._messages import Reply, Request, StoreAnnouncement
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
from dcps.wire._transport import Endpoint, delete_entity, drop_endpoint, live_announcements
from idl._errors import AlreadyClosedError, DcpsTimeoutError

__all__ = ["StoreClient"]

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
#: Seconds between looks at the store announcements for a restarted store (with a key).
_ANNOUNCEMENT_POLL = 0.25


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
        #: The incarnation of the store of each share (learnt from verified announcements).
        self._incarnations: list[str] = [""]
        #: Each pending request: the store index and incarnation it went to, and the request.
        self._sent: dict[int, tuple[int, str, Request]] = {}
        self._offers: dict[tuple[str, str, str], MemberOffer] = {}
        self._secrets: dict[tuple[int, str, str, str], MemberSecret] = {}
        self._announced: DataReader[Any] | None = None
        self._next_announcement_poll = 0.0
        self.client_id = uuid.uuid4().hex
        self.request_timeout = request_timeout
        self._ids = itertools.count(1)
        self._pending: dict[int, tuple[Future[Any], float, _Decode]] = {}
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
        self.store_count = 1
        self._reader = endpoint.reader(
            endpoint.reply_topic, reply_partition(endpoint.namespace, self.client_id), REPLY_QOS
        )
        self._ws = WaitSet(endpoint.participant)
        self._cond = ReadCondition(self._reader, ANY_STATE)
        self._guard = GuardCondition(endpoint.participant)
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

    def _seal(self, index: int, request: Request) -> bytes | None:
        sent = self._sent.get(request.request_id)
        incarnation = sent[1] if sent is not None else self._incarnations[index]
        member = None
        if request.op in _MEMBER_OPS:
            member = self._secrets.get((index, request.topic, request.group, request.member))
        return self._sealer.seal_request(request, incarnation, member)

    def _authentic(self, reply: Reply, sent: tuple[int, str, Request]) -> bool:
        """Whether ``reply`` comes from the store incarnation its request went to.

        An authentic JOIN answer completes the member's key exchange first.
        """
        index, incarnation, request = sent
        if not self._sealer.accept_reply(reply, incarnation):
            return False
        if request.op == Op.JOIN and not reply.status and self._sealer.enabled:
            ident = (request.topic, request.group, request.member)
            offer = self._offers.get(ident)
            if offer is not None:
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

    def _learn_incarnations(self, announcements: list[StoreAnnouncement]) -> None:
        """Address each share's store by its newest verified, live announcement."""
        count = self.store_count
        newest: dict[int, StoreAnnouncement] = {}
        for a in announcements:
            if a.count == count and 0 <= a.index < count:
                old = newest.get(a.index)
                if old is None or (a.started_ns, a.incarnation) > (old.started_ns, old.incarnation):
                    newest[a.index] = a
        with self._lock:
            incarnations = list(self._incarnations) + [""] * (count - len(self._incarnations))
            for index, a in newest.items():
                incarnations[index] = a.incarnation
            self._incarnations = incarnations[:count]

    # -- connecting ----------------------------------------------------------------

    def connect(self, timeout: float) -> None:
        """Wait until every store share is announced and answers a ping.

        Raises ``DcpsTimeoutError`` after ``timeout`` s, naming the missing shares.
        """
        deadline = time.monotonic() + timeout
        ep = self.endpoint
        where = f"in namespace {ep.namespace!r} (domain {ep.participant.domain_id})"
        announced = ep.reader(ep.store_topic, ep.namespace, ANNOUNCE_QOS)
        try:
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
        except BaseException:
            drop_endpoint(announced)
            raise
        self._route(count)
        self._learn_incarnations(verified)
        if self._sealer.enabled and self._announced is None:
            self._announced = announced  # the reply thread follows restarted stores
        else:
            drop_endpoint(announced)
        waiting = set(range(count))
        while waiting:
            for index in sorted(waiting):
                if not self._writers[index].get_matched_subscriptions():
                    continue
                fut = self._send(index, PingRequest().to_wire(self.client_id, 0), Pong.from_wire)
                try:
                    fut.result(timeout=min(0.5, max(0.05, deadline - time.monotonic())))
                    waiting.discard(index)
                except (TimeoutError, DcpsTimeoutError):
                    self._forget(fut)
            if not waiting:
                return
            if time.monotonic() >= deadline:
                shares = ", ".join(f"{i}/{count}" for i in sorted(waiting))
                raise DcpsTimeoutError(
                    f"no dcps store answered {where} within {timeout:g} s "
                    f"(store share {shares} announced but did not answer)"
                )
            time.sleep(0.02)

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
        with self._lock:
            old, self._writers, self.store_count = self._writers, writers, count
        for writer in old:
            drop_endpoint(writer)

    # -- typed requests ------------------------------------------------------------------

    def ping(self, timeout: float | None = None) -> Pong:
        """Ask the (coordinating) store who it is."""
        return self._wait(Op.PING, self._call(PingRequest(), Pong.from_wire), timeout)

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
        return self._wait(Op.ENSURE_TOPIC, self._ensure(request), timeout)

    def publish_async(
        self, topic: str, channel: int, sizes: list[int], blob: bytes, key: str = ""
    ) -> Future[Published]:
        """Append a batch (``sizes`` of the elements concatenated in ``blob``) to a channel."""
        return self._call(PublishRequest(topic, channel, sizes, blob, key), Published.from_wire)

    def fetch_async(self, topic: str, channel: int, offset: int, count: int) -> Future[Fetched]:
        """Up to ``count`` stored elements of ``channel`` from ``offset`` (in bulk)."""
        return self._call(FetchRequest(topic, channel, offset, count), Fetched.from_wire)

    def fetch(
        self, topic: str, channel: int, offset: int, count: int, timeout: float | None = None
    ) -> Fetched:
        """:meth:`fetch_async`, waiting for the answer."""
        return self._wait(Op.FETCH, self.fetch_async(topic, channel, offset, count), timeout)

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
        return self._call(request, Commits.from_wire)

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
        return self._wait(Op.COMMIT, fut, timeout)

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
        return self._wait(Op.SEEK, self._call(request, Seeked.from_wire), timeout)

    def state_async(
        self, topic: str, group: str = "", channels: Iterable[int] = ()
    ) -> Future[ChannelStates]:
        """Heads and tails of ``channels`` (all if none), with ``group``'s commits."""
        return self._call(StateRequest(topic, group, tuple(channels)), ChannelStates.from_wire)

    def state(
        self,
        topic: str,
        group: str = "",
        channels: Iterable[int] = (),
        timeout: float | None = None,
    ) -> ChannelStates:
        """:meth:`state_async`, waiting for the answer."""
        return self._wait(Op.STATE, self.state_async(topic, group, channels), timeout)

    def join(
        self,
        topic: str,
        group: str,
        member: str,
        member_timeout_ms: int,
        *,
        anonymous: bool = False,
        timeout: float | None = None,
    ) -> Membership:
        """Join ``group``; expelled after ``member_timeout_ms`` without a heartbeat."""
        offer = self._sealer.member_offer()
        if offer is not None:
            self._offers[(topic, group, member)] = offer
        public = b"" if offer is None else offer.public
        request = JoinRequest(topic, group, member, member_timeout_ms, anonymous, public)
        return self._wait(Op.JOIN, self._call(request, Membership.from_wire), timeout)

    def heartbeat_async(self, topic: str, group: str, member: str) -> Future[Membership]:
        """Tell the coordinating store ``member`` is alive; its current channels."""
        return self._call(HeartbeatRequest(topic, group, member), Membership.from_wire)

    def leave(self, topic: str, group: str, member: str, timeout: float | None = None) -> None:
        """``member`` leaves ``group``."""
        fut = self._call(LeaveRequest(topic, group, member), _leave_done)
        self._wait(Op.LEAVE, fut, timeout)

    def destroy_group(self, topic: str, group: str, timeout: float | None = None) -> bool:
        """Delete ``group`` and its commits; False when it did not exist."""
        fut = self._call(DestroyGroupRequest(topic, group), _destroyed)
        return bool(self._wait(Op.DESTROY_GROUP, fut, timeout))

    # -- routing -------------------------------------------------------------------------------

    def _call(self, request: StoreRequest, decode: Callable[[Reply], T]) -> Future[T]:
        """Send ``request`` to the store(s) that must answer it; a future of the answer."""
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
            self._pending[rid] = (fut, time.monotonic() + self.request_timeout, decode)
            self._sent[rid] = (index, self._incarnations[index], wire)
            writer = self._writers[index]
        try:
            writer.write(wire)
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
        first = self._call_one(0, request, TopicConfig.from_wire)
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

    def _call_one(
        self, index: int, request: StoreRequest, decode: Callable[[Reply], T]
    ) -> Future[T]:
        if self._closed:
            raise AlreadyClosedError("the store client is closed")
        return self._send(index, request.to_wire(self.client_id, 0), decode)

    def _forget(self, fut: Future[Any]) -> None:
        with self._lock:
            for rid, (f, _, _) in list(self._pending.items()):
                if f is fut:
                    del self._pending[rid]
                    self._sent.pop(rid, None)
        fut.cancel()  # frees its place in the window

    def _wait(self, op: Op, fut: Future[T], timeout: float | None) -> T:
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
            self._ws.wait(duration(milliseconds=100))
            if self._closed:
                break
            replies = self._reader.take(N=512)
            done: list[tuple[Future[Any], Reply, _Decode]] = []
            now = time.monotonic()
            expired: list[Future[Any]] = []
            if self._announced is not None and now >= self._next_announcement_poll:
                self._next_announcement_poll = now + _ANNOUNCEMENT_POLL
                live = live_announcements(self._announced)
                self._learn_incarnations(self._sealer.verified_announcements(live))
            for reply in replies:
                if getattr(reply, "client", None) != self.client_id:
                    continue
                sent = self._sent.get(reply.request_id)
                if sent is None or not self._authentic(reply, sent):
                    continue  # not awaited, or not from the store it was sent to: dropped
                with self._lock:
                    entry = self._pending.pop(reply.request_id, None)
                    self._sent.pop(reply.request_id, None)
                if entry is not None:
                    done.append((entry[0], reply, entry[2]))
            with self._lock:
                for rid, (fut, deadline, _) in list(self._pending.items()):
                    if deadline < now:
                        del self._pending[rid]
                        self._sent.pop(rid, None)
                        expired.append(fut)
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
        for fut, _, _ in pending:
            if not fut.done():
                fut.set_exception(AlreadyClosedError("the store client was closed"))
        for entity in (self._cond, self._guard, self._ws):
            delete_entity(entity)
        drop_endpoint(self._reader)
        if self._announced is not None:
            drop_endpoint(self._announced)
        for writer in self._writers:
            drop_endpoint(writer)


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
