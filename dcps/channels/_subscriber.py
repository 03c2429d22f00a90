"""The public subscriber: receive, commit, seek, state and close, over a delivery thread.

Membership lives in ``_membership.py``, per-channel buffering and element
building in ``_cursors.py``, the undecodable-element policy in
``_undecodable.py``; this module ties them to one delivery thread.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from dcps._timeout import Timeout, timeout_seconds
from dcps.wire._codes import SeekMode
from dcps.wire._names import ASSIGN_QOS, check_name
from dcps.wire._replies import ChannelStates, Commits
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Waiter, drop_endpoint
from idl._batch_codec import decoder_of
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    PreconditionNotMetError,
)
from idl._public import show_as

from ._connect import Connection, connect_topic, require_topic
from ._cursors import ChannelCursors, to_ns
from ._element import Element
from ._flow import FlowControl, ReceiveFlowControl
from ._lifecycle import ClientState
from ._membership import ChannelOwnershipListener, GroupMembership, notify_listeners
from ._position import CommitResult, CommitStatus, Position
from ._topic import ChannelledTopic
from ._undecodable import OnUndecodable, UndecodableElementError, UndecodablePolicy

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["ChannelOwnershipListener", "ChannelSubscriber", "destroy_subscriber_group"]

_log = logging.getLogger("dcps.channels.subscriber")
#: Seconds the delivery thread waits for a FETCH or JOIN at least (see _round_timeout).
_ROUND_TIMEOUT_MIN = 5.0
#: Seconds between an anonymous subscriber's commits at least (see _commit_consumed_locked).
ANONYMOUS_COMMIT_INTERVAL = 0.01
#: Seconds the delivery thread waits for data or a wake-up at most.
_IDLE_WAIT = 0.1
T = TypeVar("T")


def _positive_seconds(value: Timeout, what: str) -> float:
    seconds = timeout_seconds(value, what)
    if seconds is None or seconds <= 0:
        raise BadParameterError(f"{what} must be positive and finite, got {value!r}")
    return seconds


class ChannelSubscriber(Generic[T]):
    """Receives a :class:`ChannelledTopic`'s elements through channels.

    Without ``group`` the subscriber is anonymous and owns every channel (a
    private group the store removes when it closes, so it keeps its place
    while alive). With ``group`` it joins that subscriber group and owns the
    channels the store assigns it; each element reaches one member of the
    group. :meth:`receive` returns futures completed in order, on one thread.
    A member that neither calls :meth:`receive` (nor waits in it) nor
    :meth:`heartbeat` for ``timeout`` loses its channels; its next receive
    rejoins. Each request to the store fails with
    :class:`~dcps.DcpsTimeoutError` when unanswered within ``request_timeout``.
    Timeouts are a ``timedelta`` or seconds.
    ``complete_on_empty`` completes receives with ``None``/``[]``
    when nothing is available instead of waiting. ``filter`` skips elements
    whose value it rejects; ``converter`` maps values before delivery.

    The topic must exist in the store (else :class:`~dcps.BadParameterError`
    names topic and namespace) unless ``create`` is set or the topic gives a
    ``channel_count``: then the subscriber creates it.

    An element that does not decode as the topic's type (say, published
    with another type under the same name) fails the receive reaching it
    with :class:`UndecodableElementError` naming topic, channel and offset,
    and is logged at ERROR; the subscriber stays before it (``seek(channel,
    error.position)`` moves past). ``on_undecodable="skip"`` skips such
    elements instead, and a callable is a dead-letter handler: called with
    the error, then the element is skipped.

    Commits of channels this subscriber does not own (any more: it timed
    out, or a rebalance moved them) are answered ``UNOWNED`` unless
    ``allow_unowned_commits`` is set; then the store records them, so a
    member that lost its channels mid-batch can still commit what it
    processed. :attr:`flow_control` reports the backlog of receive requests
    not completed yet (at most ``max_backlog`` before it counts as excessive;
    :meth:`receive` itself never blocks).

    ``store_key`` authenticates the subscriber to a store namespace that has a
    key (``docs/security.md``): a key file's path or a ``StoreKey``; by default
    the file named by ``DCPS_STORE_KEY_FILE``, if set. With a key, group
    assignments that do not verify (forged by a participant without the key)
    are ignored, and after a store restart the member rejoins with a fresh
    key exchange.
    """

    def __init__(
        self,
        topic: ChannelledTopic,
        *,
        group: str | None = None,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        create: bool = False,
        complete_on_empty: bool = False,
        filter: Callable[[Any], bool] | None = None,
        converter: Callable[[Any], Any] | None = None,
        on_undecodable: OnUndecodable = "raise",
        listeners: Iterable[ChannelOwnershipListener] = (),
        timeout: Timeout = timedelta(seconds=30),
        connect_timeout: Timeout = timedelta(seconds=10),
        request_timeout: Timeout = timedelta(seconds=10),
        allow_unowned_commits: bool = False,
        max_backlog: int = 1024,
        store_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        if not isinstance(max_backlog, int) or max_backlog < 1:
            raise BadParameterError(f"max_backlog must be an int >= 1, got {max_backlog!r}")
        policy = UndecodablePolicy(on_undecodable)
        self.topic = topic
        self.allow_unowned_commits = bool(allow_unowned_commits)
        self._flow = ReceiveFlowControl(max_backlog, self._flush_receives)
        self.anonymous = group is None
        self.member = uuid.uuid4().hex
        self.group = f"~anonymous/{self.member}" if group is None else check_name("group", group)
        self._complete_on_empty = complete_on_empty
        self._listeners = list(listeners)
        self._on_close: list[Callable[[], None]] = []
        self._timeout = _positive_seconds(timeout, "the subscriber timeout")
        # Requests the delivery thread waits for give up after this (and are sent
        # again next round): a request lost to a cut link would otherwise hold the
        # thread, and with it heartbeats and rejoining, for the whole request_timeout.
        self._round_timeout = max(self._timeout, _ROUND_TIMEOUT_MIN)
        self._lock = threading.RLock()
        self._requests: deque[tuple[int | None, Future[Any]]] = deque()
        self._state = ClientState.OPEN
        self._last_poll = time.monotonic()
        # an anonymous subscriber commits what it delivered, one request at a time:
        # what is delivered meanwhile waits here (channel -> offset)
        self._consumed: dict[int, int] = {}
        self._consumed_lock = threading.Lock()
        self._commit_in_flight = False
        self._next_commit = 0.0  # monotonic time before which no auto-commit is sent
        self._connection = Connection(
            domain_id,
            namespace,
            network,
            connect_timeout=timeout_seconds(connect_timeout, "connect_timeout"),
            request_timeout=_positive_seconds(request_timeout, "request_timeout"),
            store_key=store_key,
        )
        self._client = client = self._connection.client
        endpoint = self._connection.endpoint
        try:
            if not create and topic.channel_count is None:
                require_topic(client, topic)
            self.channel_count, self.retain_consumed = connect_topic(client, topic)
            self._waiter = Waiter(endpoint)
            self._assign_reader = endpoint.reader(endpoint.assign_topic, namespace, ASSIGN_QOS)
            self._waiter.watch(self._assign_reader)
            self._cursors = ChannelCursors(
                endpoint,
                self._waiter,
                client,
                topic.name,
                self.group,
                type_name=getattr(topic.type, "__idl_typename__", topic.type.__name__),
                decode=decoder_of(topic.type),
                accept=filter,
                convert=converter,
                policy=policy,
                subscriber=self,
            )
            self._membership = GroupMembership(
                client,
                topic.name,
                self.group,
                self.member,
                anonymous=self.anonymous,
                timeout=self._timeout,
                owned=lambda: set(self._cursors.chans),
                on_owned=self._set_owned,
                wake=self._waiter.wake,
            )
            self._membership.join(timeout=None)  # the store's request timeout
            client.add_restart_listener(self._membership.on_store_restart)
        except BaseException:
            self._connection.close()
            raise
        self._thread = threading.Thread(target=self._run, name="dcps-subscriber", daemon=True)
        self._thread.start()

    # -- membership --------------------------------------------------------------

    def _set_owned(self, owned: set[int], lost: bool) -> None:
        with self._lock:
            gained, gone = self._cursors.own(owned)
        notify_listeners(self._listeners, self, gained, gone, lost=lost)

    def heartbeat(self) -> None:
        """Tell the store this member is alive (a no-op for anonymous subscribers)."""
        self._check_open()
        if not self.anonymous:
            self._membership.send_heartbeat()

    # -- the delivery thread -----------------------------------------------------------

    def _run(self) -> None:
        while self._state is ClientState.OPEN:
            self._waiter.wait(self._idle_wait())
            if self._state is not ClientState.OPEN:
                break
            try:
                with self._lock:
                    self._step()
                if self.anonymous:
                    self._commit_consumed()  # a deferred auto-commit that came due
            except DcpsError:
                time.sleep(0.05)  # store unreachable: retry on the next round
            except Exception:
                _log.exception("dcps subscriber of %r: delivery round failed", self.topic.name)
                time.sleep(0.05)

    def _step(self) -> None:
        membership = self._membership
        membership.apply(self._assign_reader.take(N=256))
        active = bool(self._requests) or self.anonymous
        if membership.store_restarted:  # at once, idle or not: keeps the channels sticky
            membership.rejoin(timeout=self._round_timeout, keep=True)
        elif membership.need_join and active:
            membership.rejoin(timeout=self._round_timeout)
        now = time.monotonic()
        if active and membership.heartbeat_due(now):
            membership.send_heartbeat()
        self._cursors.take_live()
        delivered = self._deliver()
        if self._requests and not delivered and now - self._last_poll > 1.0:
            self._last_poll = time.monotonic()
            self._cursors.poll_tails()

    def _collect(self, n: int) -> list[Element[Any]]:
        """Up to ``n`` elements; an anonymous subscriber then commits what it took.

        The cyclic garbage collector is paused meanwhile: a batch builds
        thousands of tracked objects (values, elements) that all outlive it;
        without the pause every 700 of them trigger a collection that walks
        them again (measured: ~2 us per element, a third of the delivery
        thread's time). The pause only defers collection. A collector that
        was already disabled stays so.
        """
        enabled = gc.isenabled()
        if enabled:
            gc.disable()
        try:
            out, committed = self._cursors.collect(n, self._round_timeout)
        finally:
            if enabled:
                gc.enable()
        if committed and self.anonymous:
            with self._consumed_lock:
                self._consumed.update(committed)
        return out

    def _idle_wait(self) -> float:
        """How long the delivery thread may wait: until a deferred auto-commit is due."""
        if not self._consumed or self._commit_in_flight:  # (read without the lock: a hint)
            return _IDLE_WAIT
        return min(_IDLE_WAIT, max(0.0, self._next_commit - time.monotonic()))

    def _commit_consumed(self) -> None:
        """Send the anonymous group's commit of what was delivered, if one is due."""
        with self._consumed_lock:
            request = self._commit_consumed_locked()
        if request is not None:  # outside the lock: a done future calls back at once
            request.add_done_callback(self._consumed_committed)

    def _commit_consumed_locked(self) -> Future[Commits] | None:
        """Send the anonymous group's commit of what was delivered, if due and none is in flight.

        (``_consumed_lock`` held.) One such commit is in flight at a time, and
        they leave ``ANONYMOUS_COMMIT_INTERVAL`` apart at least: what is
        delivered meanwhile is committed by the next. A subscriber receiving
        one element at a time thus costs the store one transaction per 10 ms at
        most, not one per receive nor per round trip: at 1,000 elements/s
        those commits took 30 % of the store's thread, and each publish that
        found it busy with one waited (the publish->receive latency). The
        commits only let the store release what this private group read (it
        goes with the subscriber): a later one releases nothing less.
        """
        if self._commit_in_flight or not self._consumed or self._state is not ClientState.OPEN:
            return None
        now = time.monotonic()
        if now < self._next_commit:
            return None  # the delivery thread sends it when due (_idle_wait)
        consumed, self._consumed = self._consumed, {}
        try:
            request = self._client.commit_async(self.topic.name, self.group, self.member, consumed)
        except DcpsError:
            return None  # closed: the anonymous group goes with the subscriber
        self._commit_in_flight = True
        self._next_commit = now + ANONYMOUS_COMMIT_INTERVAL
        return request

    def _consumed_committed(self, _: Future[Commits]) -> None:
        with self._consumed_lock:  # never self._lock: this runs on the client's reply thread
            self._commit_in_flight = False
            request = self._commit_consumed_locked()
            deferred = request is None and bool(self._consumed)
        if request is not None:
            request.add_done_callback(self._consumed_committed)
        elif deferred:
            self._waiter.wake()  # it waits for data, not for this commit: let it time the next

    def _deliver(self) -> bool:
        delivered = False
        while self._requests:
            max_count, fut = self._requests[0]
            if fut.cancelled():
                self._requests.popleft()
                continue
            try:
                elements = self._collect(1 if max_count is None else max_count)
            except UndecodableElementError as error:
                self._requests.popleft()
                delivered = True
                if fut.set_running_or_notify_cancel():
                    fut.set_exception(error)
                continue
            if not elements and not self._complete_on_empty:
                break
            self._requests.popleft()
            delivered = True
            result: Any = elements if max_count is not None else (elements[0] if elements else None)
            if fut.set_running_or_notify_cancel():
                fut.set_result(result)
            else:  # cancelled meanwhile: the next receive gets these elements
                self._cursors.carry[:0] = elements
        return delivered

    # -- receiving -------------------------------------------------------------------

    @overload
    def receive(self) -> Future[Element[T] | None]: ...

    @overload
    def receive(self, max_elements: int) -> Future[list[Element[T]]]: ...

    def receive(self, max_elements: int | None = None) -> Future[Any]:
        """Receive one element, or up to ``max_elements``; futures complete in order.

        Without ``max_elements`` the future's value is an :class:`Element` (or
        ``None`` when completing on empty); with it, a list (maybe shorter).
        The future fails with :class:`UndecodableElementError` when the next
        element does not decode (see the class documentation).
        """
        self._check_open()
        if max_elements is not None and (not isinstance(max_elements, int) or max_elements < 1):
            raise BadParameterError(f"max_elements must be an int >= 1, got {max_elements!r}")
        fut: Future[Any] = Future()
        self._flow.track(fut)
        with self._lock:
            self._requests.append((max_elements, fut))
            if not self.anonymous and self._membership.heartbeat_due(time.monotonic()):
                self._membership.send_heartbeat()
        self._waiter.wake()
        return fut

    # -- flow control ------------------------------------------------------------------

    @property
    def flow_control(self) -> FlowControl:
        """This subscriber's flow control (seed 000's ``getFlowControl()``).

        Its backlog is the receive requests neither completed nor cancelled;
        it is excessive at ``max_backlog`` of them. Use it to stop asking for
        more than arrives: ``drain_backlog()`` waits until receives complete,
        ``check_backlog(fn)`` calls ``fn`` once they have; ``flush()`` hands
        queued receives to the delivery thread at once.

        .. versionadded:: 0.2
        """
        return self._flow

    def _flush_receives(self) -> None:
        self._last_poll = 0.0  # also ask the store for what the live tail may have missed
        self._waiter.wake()

    # -- ownership ---------------------------------------------------------------------

    @property
    def channels(self) -> list[int]:
        """The channels this subscriber owns now, sorted."""
        with self._lock:
            return sorted(self._cursors.chans)

    def is_owner(self, channel: int) -> bool:
        """True when this subscriber owns ``channel`` now."""
        with self._lock:
            return channel in self._cursors.chans

    @property
    def state(self) -> ClientState:
        """Where this subscriber is in its life (open, closing, closed).

        .. versionadded:: 0.4
        """
        return self._state

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called.

        .. versionadded:: 0.4
        """
        return self._state is not ClientState.OPEN

    # -- commits -------------------------------------------------------------------------

    @staticmethod
    def _positions(
        channel_or_map: int | Mapping[int, Position], position: Position | None
    ) -> dict[int, Position]:
        if isinstance(channel_or_map, Mapping):
            positions = dict(channel_or_map)
        else:
            if position is None:
                raise BadParameterError("commit(channel, position) needs a position")
            positions = {channel_or_map: position}
        for c, p in positions.items():
            if not isinstance(p, Position) or p.channel != c:
                raise BadParameterError(f"{p!r} is not a Position of channel {c}")
        return positions

    def commit_async(
        self, channel_or_map: int | Mapping[int, Position], position: Position | None = None
    ) -> Future[Any]:
        """Commit asynchronously; the future holds a :class:`CommitResult` (or a dict of them)."""
        self._check_open()
        positions = self._positions(channel_or_map, position)
        single = not isinstance(channel_or_map, Mapping)
        request = self._client.commit_async(
            self.topic.name,
            self.group,
            self.member,
            {c: p.offset for c, p in positions.items()},
            allow_unowned=self.allow_unowned_commits,
            # lets a restarted store re-admit this member (see GroupCoordinator.readmit)
            incarnation=self._membership.incarnation,
            member_timeout_ms=int(self._timeout * 1000),
        )
        out: Future[Any] = Future()

        def done(f: Future[Commits]) -> None:
            try:
                commits = f.result()
            except BaseException as exc:
                if isinstance(exc, PreconditionNotMetError):
                    results = {
                        c: CommitResult(c, p, CommitStatus.UNOWNED, str(exc))
                        for c, p in positions.items()
                    }
                else:
                    out.set_exception(exc)
                    return
            else:
                results = {
                    c: CommitResult(c, positions[c], status)
                    for c, status in commits.statuses.items()
                }
            out.set_result(next(iter(results.values())) if single else results)

        request.add_done_callback(done)
        return out

    @overload
    def commit(self, channel_or_map: int, position: Position) -> CommitResult: ...

    @overload
    def commit(self, channel_or_map: Mapping[int, Position]) -> dict[int, CommitResult]: ...

    def commit(
        self, channel_or_map: int | Mapping[int, Position], position: Position | None = None
    ) -> Any:
        """Commit a position (and every earlier one of its channel), or a map of them."""
        return self.commit_async(channel_or_map, position).result()

    # -- seeking ---------------------------------------------------------------------------

    def _seek(self, mode: SeekMode, targets: Mapping[int, int]) -> dict[int, Position]:
        self._check_open()
        with self._lock:
            chans = self._cursors.chans
            unowned = [c for c in targets if c not in chans]
            if unowned:
                raise PreconditionNotMetError(
                    f"cannot seek channels {sorted(unowned)} of {self.topic.name!r}: "
                    "this subscriber does not own them"
                )
            seeked = self._client.seek(
                self.topic.name, self.group, self.member, mode, dict(targets)
            )
            result = {}
            self._cursors.forget(targets)
            with self._consumed_lock:  # a commit queued before the seek must not follow it
                for c in targets:
                    self._consumed.pop(c, None)
            for c, target in seeked.targets.items():
                chans[c].reset(target + 1)
                result[c] = Position(c, target)
        self._waiter.wake()
        return result

    @overload
    def seek(self, channel_or_map: int, to: Position | datetime) -> Position: ...

    @overload
    def seek(self, channel_or_map: Mapping[int, Position]) -> dict[int, Position]: ...

    def seek(
        self, channel_or_map: int | Mapping[int, Position], to: Position | datetime | None = None
    ) -> Any:
        """Reposition so the next element received from the channel follows ``to``.

        ``to`` is a :class:`Position` or an aware ``datetime`` (resume at the first
        element accepted strictly after it, as seed 000 says: seeking to an element's
        own timestamp resumes after that element). The position actually seeked to is
        returned (clamped to the channel's head - 1 and tail). Seeking back
        before the group's commit rolls the commit back; seeking forward does
        not commit. A map of channel to position seeks several channels.
        """
        if isinstance(channel_or_map, Mapping):
            positions = self._positions(channel_or_map, None)
            return self._seek(SeekMode.POSITION, {c: p.offset for c, p in positions.items()})
        if isinstance(to, datetime):
            return self._seek(SeekMode.TIMESTAMP, {channel_or_map: to_ns(to)})[channel_or_map]
        positions = self._positions(channel_or_map, to)
        return self._seek(SeekMode.POSITION, {channel_or_map: positions[channel_or_map].offset})[
            channel_or_map
        ]

    def seek_and_commit(
        self, channel_or_map: int | Mapping[int, Position], to: Position | datetime | None = None
    ) -> Any:
        """:meth:`seek`, then commit the position seeked to."""
        seek: Any = self.seek
        result = seek(channel_or_map, to)
        targets = result if isinstance(result, dict) else {result.channel: result}
        self._commit_targets(targets)
        return result

    def _commit_targets(self, targets: Mapping[int, Position]) -> None:
        real = {c: p for c, p in targets.items() if p.offset >= 0}
        if real:
            self.commit(real)

    def seek_to_head(self, *channels: int) -> dict[int, Position]:
        """Reposition channels (all owned if none given) at their heads, clearing commits."""
        return self._seek(SeekMode.HEAD, dict.fromkeys(channels or self.channels, 0))

    def seek_to_tail(self, *channels: int) -> dict[int, Position]:
        """Reposition channels (all owned if none given) after their last element."""
        return self._seek(SeekMode.TAIL, dict.fromkeys(channels or self.channels, 0))

    def seek_to_tail_and_commit(self, *channels: int) -> dict[int, Position]:
        """:meth:`seek_to_tail`, then commit the tails."""
        result = self.seek_to_tail(*channels)
        self._commit_targets(result)
        return result

    # -- state ---------------------------------------------------------------------------------

    def _channel_states(self) -> ChannelStates:
        self._check_open()
        return (
            self._client.state(self.topic.name, self.group, self.channels)
            if self.channels
            else ChannelStates(0, (), (), ())
        )

    def heads(self) -> dict[int, Position]:
        """The first available element's position of each owned channel."""
        reply = self._channel_states()
        return {c: Position(c, h) for c, h in zip(reply.channels, reply.heads, strict=True)}

    def tails(self) -> dict[int, Position]:
        """The last element's position of each owned channel (offset -1 when empty)."""
        reply = self._channel_states()
        return {c: Position(c, t) for c, t in zip(reply.channels, reply.tails, strict=True)}

    def head(self, channel: int) -> Position | None:
        """The head of ``channel``, or None when not owned."""
        return self.heads().get(channel)

    def tail(self, channel: int) -> Position | None:
        """The tail of ``channel``, or None when not owned."""
        return self.tails().get(channel)

    def last_committed(self, channel: int | None = None) -> Any:
        """The group's last commit per owned channel (a dict), or of one channel (or None)."""
        reply = self._channel_states()
        result = {
            c: Position(c, off)
            for c, off, explicit in zip(
                reply.channels, reply.committed, reply.explicit, strict=False
            )
            if explicit
        }
        return result if channel is None else result.get(channel)

    def remaining_messages(self, channel: int | None = None) -> int:
        """Elements not yet received in ``channel`` (0 when not owned), or in all owned ones."""
        reply = self._channel_states()
        total = 0
        with self._lock:
            for c, tail in zip(reply.channels, reply.tails, strict=True):
                ch = self._cursors.chans.get(c)
                if ch is None or ch.next is None or (channel is not None and c != channel):
                    continue
                total += max(0, tail + 1 - ch.next)
        return total

    # -- closing ---------------------------------------------------------------------------------

    def on_close(self, action: Callable[[], None]) -> None:
        """Run ``action`` when this subscriber closes (at once if it already has)."""
        if self._state is ClientState.CLOSED:
            action()
        else:
            self._on_close.append(action)

    def _check_open(self) -> None:
        if self._state is not ClientState.OPEN:
            raise AlreadyClosedError(f"the subscriber of {self.topic.name!r} is closed")

    def close(self) -> None:
        """Leave the group, cancel pending receives, release DDS entities (idempotent)."""
        with self._lock:
            if self._state is not ClientState.OPEN:
                return
            self._state = ClientState.CLOSING
        self._waiter.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            for _, fut in self._requests:
                fut.cancel()
            self._requests.clear()
            with contextlib.suppress(DcpsError):  # else the store times this member out
                self._membership.leave(timeout=2.0)
            self._cursors.close()
        self._waiter.unwatch(self._assign_reader)
        drop_endpoint(self._assign_reader)
        self._waiter.close()
        self._connection.close()
        self._state = ClientState.CLOSED
        for action in self._on_close:
            try:
                action()
            except Exception:
                _log.exception("on_close action %r failed", action)

    def destroy_group(self) -> bool:
        """Close this member and delete its group (and its commits) in the store.

        Returns False when the group did not exist any more.
        """
        if self.anonymous:
            raise BadParameterError("an anonymous subscriber has no group to destroy")
        self._check_open()
        existed = self._client.destroy_group(self.topic.name, self.group)
        self.close()
        return existed

    def __enter__(self) -> ChannelSubscriber[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def destroy_subscriber_group(
    topic: ChannelledTopic,
    group: str,
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    network: NetworkConfig | None = None,
    connect_timeout: Timeout = timedelta(seconds=10),
    store_key: KeyOption = FROM_ENVIRONMENT,
    admin_key: KeyOption = FROM_ENVIRONMENT,
) -> bool:
    """Delete subscriber group ``group`` of ``topic`` in the store, without joining it.

    Seed 000's ``destroySubscriberGroup``: the group's commits are forgotten
    and elements only it still held are released (unless the topic retains
    consumed elements). Members still running lose their channels; a member's
    next receive joins a new group of that name, starting at the head.
    Returns False when there was no such group.

    In a store namespace with a key (``docs/security.md``) this needs the
    namespace key (``store_key``) and the admin key (``admin_key``); by default
    the files named by ``DCPS_STORE_KEY_FILE`` and ``DCPS_STORE_ADMIN_KEY_FILE``.
    Without the admin key it raises :class:`~dcps.PreconditionNotMetError`.

    .. versionadded:: 0.3
    """
    check_name("group", group)
    connection = Connection(
        domain_id,
        namespace,
        network,
        connect_timeout=timeout_seconds(connect_timeout, "connect_timeout"),
        request_timeout=10.0,
        store_key=store_key,
        admin_key=admin_key,
    )
    try:
        return connection.client.destroy_group(topic.name, group)
    finally:
        connection.close()


show_as("dcps.channels", ChannelSubscriber, destroy_subscriber_group)
