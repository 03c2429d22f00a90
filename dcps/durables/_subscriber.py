"""Durable subscribers: Universal Messaging named objects and FTL durables on the store.

A :class:`DurableSubscriber` subscribes to a durable of a channelled topic
(creating it if new) and receives its elements from the store: one daemon
thread polls the store (a poll waits there until elements come), decodes
what it gets in bulk and either queues it for
:meth:`~DurableSubscriber.receive` or hands it to ``on_element``.
Acknowledgements go back as the ack mode and timing say (``_options.py``).

The hot path is batched end to end: asynchronous acknowledgements ride on
the next poll (one request: "acknowledge these, give me up to N more"), and
the next poll goes out as soon as half the window is free, while the
application still works through the rest of the previous one, so a window
never waits for a round trip.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dcps._timeout import Timeout, timeout_seconds
from dcps.channels._connect import connect_topic
from dcps.channels._topic import ChannelledTopic
from dcps.sql import ContentFilter
from dcps.wire._durables import (
    MAX_DURABLE_WINDOW,
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
    Notice,
)
from dcps.wire._names import check_name
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Endpoint
from idl._batch_codec import decoder_of, select_elements
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)
from idl._public import show_as

from ._client import RESUBSCRIBE_MARKERS, DurableClient
from ._element import DurableElement
from ._options import AckMode, AckTiming, FilterConflictError, Start, start_fields

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["DurableSubscriber"]

T = TypeVar("T")

#: How long one poll may wait at the store for elements.
_POLL_WAIT_MS = 1000
#: Longest a subscriber goes without polling (the poll tells the store it is alive).
_KEEPALIVE = _POLL_WAIT_MS / 1000
#: Most elements a subscriber keeps received but not taken (an unlimited window).
_MAX_BUFFERED = 4096
#: An element held or settled here: (topic, channel, offset).
PositionKey = tuple[str, int, int]
#: Anonymous durables are named so (the store deletes them when their subscriber closes).
ANONYMOUS_DURABLE_PREFIX = "~anonymous-durable/"


class FilterLike(Protocol):
    """What decides which elements a durable keeps: a ContentFilter, or a layer's own.

    It may also have ``matches_many(values) -> flags`` (one call per delivery) and
    ``preselect(blob, sizes) -> flags | None``, run on the encoded delivery: False rules
    an element out (acknowledged unseen, never decoded), True leaves it to ``matches``;
    None (or no such attribute) decodes every element. It must never rule out an element
    ``matches`` would keep (``dcps.jms._preselect``).
    """

    def matches(self, sample: Any) -> bool: ...


def _preselected(keep: FilterLike | None, blob: bytes, sizes: list[int]) -> list[bool] | None:
    """Per element of an encoded delivery, whether ``keep`` may keep it (False: ruled out
    undecoded); None when the filter cannot tell so or keeps them all (decode every one)."""
    preselect = getattr(keep, "preselect", None)
    if preselect is None:
        return None
    maybe: list[bool] | None = preselect(blob, sizes)
    return None if maybe is None or all(maybe) else maybe


def _positive_seconds(value: Timeout, what: str) -> float:
    seconds = timeout_seconds(value, what)
    if seconds is None or seconds <= 0:
        raise BadParameterError(f"{what} must be a positive duration, got {value!r}")
    return seconds


class DurableSubscriber(Generic[T]):
    """A subscriber of durable ``name`` of ``topic`` in the store (created if new).

    ``kind`` (:class:`DurableKind`) says how the durable serves its
    subscribers; an existing durable of another kind or topic raises
    :class:`~dcps.InconsistentPolicyError`. A second subscriber of an
    exclusive durable raises :class:`~dcps.PreconditionNotMetError` (until the
    first one closes or times out); one of a standard durable takes over (the
    first one is closed: its ``receive`` raises
    :class:`~dcps.AlreadyClosedError`). ``name=None`` makes an anonymous
    durable, deleted when this subscriber closes.

    ``window``: the most unacknowledged elements this subscriber holds (None:
    unlimited); a full window gets nothing more until elements are
    acknowledged or rolled back. ``persistent``: the durable's acknowledgement
    state survives a store restart (else it lives in the store's memory).
    ``start`` (for a new durable): ``"head"``, ``"tail"`` or positions.
    ``ttl``: a durable without subscribers for that long is deleted.

    ``filter`` (with ``filter_parameters``) is a :class:`dcps.sql.ContentFilter`
    expression on the topic's type: the first subscriber's filter decides
    which elements the durable keeps (the others are acknowledged unseen); a
    later subscriber naming a different one replaces it, and the earlier
    subscribers get a :class:`FilterConflictError` (raised by their next
    ``receive``, or passed to ``on_error``).

    ``filter_compiler`` (for layers on top, such as ``dcps.jms``) compiles the
    filter text instead of :class:`~dcps.sql.ContentFilter` (anything with
    ``matches(value)``). ``replace``: an idle durable of this name and kind
    with another topic or filter is deleted and created anew (JMS's rule).

    ``ack``/``ack_timing``: see :class:`AckMode` and :class:`AckTiming`.
    ``on_element``: a callback run on the subscriber's thread for every
    element (instead of :meth:`receive`). ``timeout``: a subscriber silent
    for that long is closed by the store and its unacknowledged elements are
    redelivered (the subscriber polls at least every second while open).
    ``subscriber_id``: the id the store knows the subscriber by (default: a
    fresh random one; ``dcps.jms`` names it to grant a temporary topic's
    consumer before it subscribes).

    Use it as a context manager, or call :meth:`close`.

    .. versionadded:: 0.3
    """

    def __init__(
        self,
        topic: ChannelledTopic,
        name: str | None,
        *,
        kind: DurableKind = DurableKind.SHARED,
        window: int | None = 64,
        persistent: bool = True,
        start: Start = "head",
        filter: str | None = None,
        filter_parameters: Sequence[str] = (),
        ack: AckMode = AckMode.EXPLICIT,
        ack_timing: AckTiming = AckTiming.SYNC,
        ack_interval: Timeout = timedelta(milliseconds=20),
        filter_compiler: Callable[[str], FilterLike] | None = None,
        replace: bool = False,
        on_element: Callable[[DurableElement[T]], None] | None = None,
        on_error: Callable[[DcpsError], None] | None = None,
        ttl: Timeout | None = None,
        timeout: Timeout = timedelta(seconds=10),
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        connect_timeout: Timeout = timedelta(seconds=10),
        request_timeout: Timeout = timedelta(seconds=10),
        key: KeyOption = FROM_ENVIRONMENT,
        subscriber_id: str | None = None,
    ) -> None:
        if not isinstance(kind, DurableKind):
            raise BadParameterError(f"kind must be a DurableKind, got {kind!r}")
        if window is not None and (
            not isinstance(window, int)
            or isinstance(window, bool)
            or not 1 <= window <= MAX_DURABLE_WINDOW
        ):
            raise BadParameterError(
                f"window must be an int 1..{MAX_DURABLE_WINDOW} or None (unlimited), got {window!r}"
            )
        if not isinstance(ack, AckMode) or not isinstance(ack_timing, AckTiming):
            raise BadParameterError("ack must be an AckMode and ack_timing an AckTiming")
        self.topic = topic
        self.kind = kind
        self.anonymous = name is None
        self.subscriber_id = (
            uuid.uuid4().hex
            if subscriber_id is None
            else check_name("subscriber id", subscriber_id)
        )
        self.name = (
            f"{ANONYMOUS_DURABLE_PREFIX}{self.subscriber_id}"
            if name is None
            else check_name("durable name", name)
        )
        self.window = window
        self.ack_mode = ack
        self.ack_timing = ack_timing
        self._ack_interval = _positive_seconds(ack_interval, "ack_interval")
        self._start = start_fields(start)
        self._filter_compiler = filter_compiler
        self._replace = bool(replace)
        self._filter_text = filter or ""
        self._filter_parameters = tuple(filter_parameters)
        self._keep = self._compile(self._filter_text)
        self._on_element = on_element
        self._on_error = on_error
        ttl_s = timeout_seconds(ttl, "ttl")
        self._ttl_ms = -1 if ttl_s is None else int(ttl_s * 1000)
        self._timeout_ms = int(_positive_seconds(timeout, "timeout") * 1000)
        self._persistent = bool(persistent)
        self._decode = decoder_of(topic.type)
        self._lock = threading.Condition()
        self._buffer: deque[DurableElement[T]] = deque()
        self._held: dict[PositionKey, DurableElement[T]] = {}
        self._settled: set[PositionKey] = set()  # acked here, for "acked twice"
        self._to_auto_ack: list[DurableElement[T]] = []
        self._pending_acks: list[tuple[int, int]] = []
        #: Asynchronous acks sent at once (with a poll) when this many wait (a window).
        self._ack_batch = window or 128
        self._wake = threading.Event()  # the subscriber's thread has work
        self._failures: list[BaseException] = []
        self._calls: list[list[DurableElement[T]]] = []  # deliveries for on_element
        self._queued = 0  # elements in _calls
        self._in_flight = 0  # polls sent, not answered
        self._last_poll = 0.0
        self._errors: deque[DcpsError] = deque()
        self._closed = False
        self._closed_why = ""
        self._need_subscribe = False
        #: Elements not acknowledged yet in the durable, as of the last poll (-1: last-value).
        self.outstanding = 0
        #: Elements acknowledged unseen because the durable's filter does not keep them.
        self.filtered = 0
        self._endpoint = Endpoint(domain_id, namespace, network)
        self._client = DurableClient(
            self._endpoint,
            request_timeout=_positive_seconds(request_timeout, "request_timeout"),
            key=key,
        )
        try:
            self._client.connect(_positive_seconds(connect_timeout, "connect_timeout"))
            self.channel_count, _ = connect_topic(self._client, topic)
            subscribed = self._subscribe()
        except BaseException:
            self._client.close()
            self._endpoint.close()
            raise
        #: Whether this subscriber created the durable.
        self.created = subscribed.created
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dcps-durable", daemon=True)
        self._thread.start()
        self._acker: threading.Thread | None = None
        if ack_timing is AckTiming.ASYNC:
            self._acker = threading.Thread(target=self._ack_loop, name="dcps-durable-acks")
            self._acker.daemon = True
            self._acker.start()

    # -- subscribing --------------------------------------------------------------------

    def _compile(self, text: str) -> FilterLike | None:
        if not text:
            return None
        if self._filter_compiler is not None:
            return self._filter_compiler(text)
        return ContentFilter(text, self.topic.type, self._filter_parameters)

    def _subscribe(self) -> DurableSubscribed:
        mode, starts = self._start
        request = DurableSubscribeRequest(
            self.topic.name,
            self.name,
            self.subscriber_id,
            self.kind,
            self.window or 0,
            self._persistent,
            self.anonymous,
            self._filter_text,
            mode,
            starts,
            self._timeout_ms,
            self._ttl_ms,
            self._replace,
            self._client.offer(),
        )
        subscribed: DurableSubscribed = self._request(request, DurableSubscribed.from_wire)
        if subscribed.filter != self._filter_text:  # an earlier subscriber's filter decides
            self._keep = self._compile(subscribed.filter)
        return subscribed

    def _request(
        self, request: Any, decode: Callable[[Any], Any], timeout: float | None = None
    ) -> Any:
        fut = self._client.request_async(request, decode)
        return self._client.wait_for(request.op, fut, timeout)

    # -- receiving ----------------------------------------------------------------------

    def receive(self, timeout: Timeout | None = None) -> DurableElement[T]:
        """The next element (waiting up to ``timeout``; None: forever).

        Raises :class:`~dcps.DcpsTimeoutError` when none came in time,
        :class:`~dcps.AlreadyClosedError` once closed (or taken over), and any
        asynchronous error due (a :class:`FilterConflictError`). In
        :attr:`AckMode.AUTO` the element returned by the previous call is
        acknowledged first.
        """
        if self._on_element is not None:
            raise PreconditionNotMetError("this subscriber delivers through on_element")
        seconds = timeout_seconds(timeout)
        self._auto_ack()
        with self._lock:
            if not self._lock.wait_for(
                lambda: self._buffer or self._errors or self._closed, seconds
            ):
                raise DcpsTimeoutError(f"no element of durable {self.name!r} within {seconds:g} s")
            if self._errors:
                raise self._errors.popleft()
            if not self._buffer:
                raise AlreadyClosedError(self._closed_text())
            element = self._buffer.popleft()
            self._lock.notify_all()
            if self.ack_mode is AckMode.AUTO:
                self._to_auto_ack.append(element)
            return element

    def receive_many(
        self, max_count: int = _MAX_BUFFERED, timeout: Timeout | None = None
    ) -> list[DurableElement[T]]:
        """The next elements: at least one (waiting up to ``timeout``), at most ``max_count``.

        What has arrived is returned at once, without waiting for more; it
        raises as :meth:`receive` does. Each element is still acknowledged
        (or rolled back) on its own, e.g. ``sub.ack(elements)``. In
        :attr:`AckMode.AUTO` the elements of the previous call are
        acknowledged first.

        .. versionadded:: 0.3
        """
        if self._on_element is not None:
            raise PreconditionNotMetError("this subscriber delivers through on_element")
        if not isinstance(max_count, int) or isinstance(max_count, bool) or max_count < 1:
            raise BadParameterError(f"max_count must be an int >= 1, got {max_count!r}")
        seconds = timeout_seconds(timeout)
        self._auto_ack()
        with self._lock:
            if not self._lock.wait_for(
                lambda: self._buffer or self._errors or self._closed, seconds
            ):
                raise DcpsTimeoutError(f"no element of durable {self.name!r} within {seconds:g} s")
            if self._errors:
                raise self._errors.popleft()
            if not self._buffer:
                raise AlreadyClosedError(self._closed_text())
            buffer = self._buffer
            if max_count >= len(buffer):
                elements = list(buffer)
                buffer.clear()
            else:
                elements = [buffer.popleft() for _ in range(max_count)]
            self._lock.notify_all()
            if self.ack_mode is AckMode.AUTO:
                self._to_auto_ack.extend(elements)
            return elements

    def receive_async(self) -> Future[DurableElement[T]]:
        """A future of the next element (completed on a helper thread)."""
        fut: Future[DurableElement[T]] = Future()

        def wait() -> None:
            try:
                fut.set_result(self.receive())
            except BaseException as exc:  # handed to the future's owner
                fut.set_exception(exc)

        threading.Thread(target=wait, name="dcps-durable-receive", daemon=True).start()
        return fut

    def __iter__(self) -> Iterator[DurableElement[T]]:
        """Elements as they come, until the subscriber is closed."""
        while True:
            try:
                yield self.receive()
            except AlreadyClosedError:
                return

    def _closed_text(self) -> str:
        why = f" ({self._closed_why})" if self._closed_why else ""
        return f"the subscriber of durable {self.name!r} is closed{why}"

    # -- acknowledging ------------------------------------------------------------------

    def _refusal(self, element: Any) -> DcpsError:
        """Why ``element`` cannot be acknowledged or rolled back here (lock held)."""
        if not isinstance(element, DurableElement):
            return BadParameterError(f"not a DurableElement: {element!r}")
        if element.subscriber is not self:
            return PreconditionNotMetError(
                f"element at {element.position} of durable {self.name!r} was delivered to "
                "another subscriber: only its receiver may acknowledge or roll it back"
            )
        if (element.topic, element.channel, element.offset) in self._settled:
            return PreconditionNotMetError(
                f"element at {element.position} of durable {self.name!r} was already "
                "acknowledged or rolled back"
            )
        if self._closed:  # closed by the store (an administrator's delete, a takeover)
            return AlreadyClosedError(self._closed_text())
        return PreconditionNotMetError(
            f"element at {element.position} of durable {self.name!r} is not held by "
            "this subscriber any more (it was redelivered after a timeout or restart)"
        )

    def _take_held_locked(self, elements: Sequence[DurableElement[Any]]) -> list[tuple[int, int]]:
        """Settle ``elements`` here, all or none (lock held); their positions."""
        held = self._held
        keys = self._held_keys(elements)
        if keys is None:  # the checks, one element at a time, to name what is wrong
            keys = self._checked_keys(elements)
        settled = self._settled
        for key in keys:
            del held[key]
        settled.update(keys)
        while len(settled) > 65536:
            settled.pop()
        return [(c, o) for _, c, o in keys]

    def _held_keys(self, elements: Sequence[DurableElement[Any]]) -> list[PositionKey] | None:
        """The keys of ``elements`` when each is the very element held here, once (the
        common case, checked in bulk); None otherwise."""
        try:
            keys = [(e.topic, e.channel, e.offset) for e in elements]
        except AttributeError:  # not an element
            return None
        if not all(map(operator.is_, map(self._held.get, keys), elements)):
            return None
        return keys if len(set(keys)) == len(keys) else None

    def _checked_keys(self, elements: Sequence[DurableElement[Any]]) -> list[PositionKey]:
        held = self._held
        keys = []
        for e in elements:
            key = (e.topic, e.channel, e.offset) if isinstance(e, DurableElement) else None
            if key is None or key not in held:
                raise self._refusal(e)
            keys.append(key)
        if len(set(keys)) != len(keys):
            raise PreconditionNotMetError("the same element is named twice")
        return keys

    def _take_held(self, elements: Sequence[DurableElement[Any]]) -> list[tuple[int, int]]:
        with self._lock:
            return self._take_held_locked(elements)

    def ack(self, elements: DurableElement[Any] | Iterable[DurableElement[Any]]) -> None:
        """Acknowledge ``elements`` (one or several received by this subscriber).

        With :attr:`AckTiming.SYNC` it returns once the store recorded them;
        with :attr:`AckTiming.ASYNC` at once (sent on a timer). Acknowledging
        an element twice, or one another subscriber received, raises
        :class:`~dcps.PreconditionNotMetError`.
        """
        batch = (elements,) if isinstance(elements, DurableElement) else list(elements)
        if self.kind is DurableKind.LAST_VALUE:
            raise PreconditionNotMetError("last-value durables are not acknowledged")
        if self.ack_timing is AckTiming.ASYNC:
            with self._lock:
                positions = self._take_held_locked(batch)
                self._pending_acks.extend(positions)
                # a window acknowledged, or nothing left to receive: a poll takes the acks
                # now and asks for more (fewer, larger polls cost the store less than the
                # overlap of half-window polls gains)
                due = len(self._pending_acks) >= self._ack_batch or not self._buffer
                acks = self._take_acks() if due else ()
            if acks:
                self._poll(acks)
            return
        self._settle(DurableAckRequest, self._take_held(batch))

    def ack_async(
        self, elements: DurableElement[Any] | Iterable[DurableElement[Any]]
    ) -> Future[None]:
        """Acknowledge ``elements``; the future completes once the store has recorded them."""
        batch = [elements] if isinstance(elements, DurableElement) else list(elements)
        positions = self._take_held(batch)
        request = DurableAckRequest(
            self.topic.name, self.name, self.subscriber_id, tuple(positions)
        )
        out: Future[None] = Future()
        inner = self._client.request_async(request, DurableAcked.from_wire)

        def done(f: Future[DurableAcked]) -> None:
            try:
                self._check(f.result(), positions, "acknowledge")
                out.set_result(None)
            except BaseException as exc:  # the future's owner sees it
                out.set_exception(exc)

        inner.add_done_callback(done)
        return out

    def _enlist(self, elements: Sequence[DurableElement[Any]], query: str, epoch: int) -> None:
        """Enlist the acknowledgement of ``elements`` in transaction ``(query, epoch)`` (they
        stay held here until the transaction commits: :meth:`_committed`)."""
        if not elements:
            return
        with self._lock:
            for e in elements:
                if (e.topic, e.channel, e.offset) not in self._held:
                    raise self._refusal(e)
            positions = [(e.channel, e.offset) for e in elements]
        self._flush_acks()  # keep earlier acknowledgements before the transaction's
        request = DurableTxAckRequest(
            self.topic.name, self.name, self.subscriber_id, tuple(positions), query, epoch
        )
        acked: DurableAcked = self._request(request, DurableAcked.from_wire)
        self._check(acked, positions, "acknowledge in a transaction")

    def _committed(self, elements: Sequence[DurableElement[Any]]) -> None:
        """A transaction acknowledged ``elements`` at the store: settle them here."""
        with contextlib.suppress(PreconditionNotMetError):
            self._take_held(elements)

    def rollback(self, elements: DurableElement[Any] | Iterable[DurableElement[Any]]) -> None:
        """Give ``elements`` back: each is redelivered (to any subscriber) with a higher count."""
        batch = [elements] if isinstance(elements, DurableElement) else list(elements)
        if self.kind is DurableKind.LAST_VALUE:
            raise PreconditionNotMetError("last-value durables are not acknowledged")
        self._flush_acks()  # keep acks and rollbacks in the order they were made
        self._settle(DurableRollbackRequest, self._take_held(batch))

    def _settle(self, cls: type[DurableAckRequest], positions: list[tuple[int, int]]) -> None:
        if not positions:
            return
        request = cls(self.topic.name, self.name, self.subscriber_id, tuple(positions))
        acked: DurableAcked = self._request(request, DurableAcked.from_wire)
        verb = "roll back" if cls is DurableRollbackRequest else "acknowledge"
        self._check(acked, positions, verb)

    def _check(self, acked: DurableAcked, positions: list[tuple[int, int]], verb: str) -> None:
        bad = [
            (p, s)
            for p, s in zip(positions, acked.statuses, strict=False)
            if s is not AckStatus.DONE
        ]
        if bad:
            (c, o), status = bad[0]
            raise PreconditionNotMetError(
                f"cannot {verb} element ({c}, {o}) of durable {self.name!r}: "
                f"{status.name.lower().replace('_', ' ')}"
                + (f" (and {len(bad) - 1} more)" if len(bad) > 1 else "")
            )

    def _auto_ack(self) -> None:
        with self._lock:
            done, self._to_auto_ack = self._to_auto_ack, []
        if done and not self._closed:
            self.ack(done)

    def _flush_acks(self) -> None:
        """Send the acknowledgements waiting (asynchronous timing); errors go to on_error."""
        with self._lock:
            positions, self._pending_acks = self._pending_acks, []
        if not positions:
            return
        request = DurableAckRequest(
            self.topic.name, self.name, self.subscriber_id, tuple(positions)
        )
        try:
            fut = self._client.request_async(request, DurableAcked.from_wire)
        except DcpsError as exc:
            self._report(exc)
            return

        def done(f: Future[DurableAcked]) -> None:
            try:
                self._check(f.result(), positions, "acknowledge")
            except DcpsError as exc:
                self._report(exc)

        fut.add_done_callback(done)

    def _ack_loop(self) -> None:
        # the acks no poll took within the interval (fewer than half a window)
        while not self._stop.wait(self._ack_interval):
            self._flush_acks()

    # -- the store --------------------------------------------------------------------------

    def info(self, timeout: Timeout | None = None) -> DurableInfo:
        """The durable's state in the store: kind, subscribers, outstanding elements."""
        reply = self._request(
            DurableInfoRequest(self.topic.name, self.name),
            lambda r: DurableInfo.from_wire_for(r, self.topic.name, self.name),
            timeout_seconds(timeout),
        )
        info: DurableInfo = reply
        return info

    def _report(self, exc: DcpsError) -> None:
        if self._on_error is not None:
            with contextlib.suppress(Exception):  # a failing callback must not stop delivery
                self._on_error(exc)
            return
        with self._lock:
            self._errors.append(exc)
            self._lock.notify_all()

    # -- polling ------------------------------------------------------------------------
    #
    # One poll is always in flight: its answer is handled on the store client's reply
    # thread, which sends the next poll at once (with the acknowledgements waiting), so
    # the store learns of a closed window's acks and the application gets the next window
    # without a hop through another thread. A poll waits at the store while nothing can
    # be delivered (a full window, no new element), and brings news (closed, filter
    # conflict) at once. An application that acknowledges half a window sends a poll
    # itself, carrying those acks: the store answers the waiting poll empty and this one
    # with the next elements, while the application works through the rest.

    def _take_acks(self) -> tuple[tuple[int, int], ...]:
        """The asynchronous acknowledgements waiting, taken to ride on a poll (lock held)."""
        if not self._pending_acks:
            return ()
        acks, self._pending_acks = tuple(self._pending_acks), []
        return acks

    def _poll(self, acks: tuple[tuple[int, int], ...] = ()) -> None:
        """Send a poll carrying ``acks`` (any thread); its answer goes to :meth:`_polled`."""
        with self._lock:
            if self._stop.is_set() or self._closed or self._need_subscribe:
                return
            room = _MAX_BUFFERED - len(self._buffer) - self._queued
            count = max(1, min(room, self.window or room))  # the store keeps to the window
            self._in_flight += 1
            self._last_poll = time.monotonic()
        request = DurablePollRequest(
            self.topic.name, self.name, self.subscriber_id, count, _POLL_WAIT_MS, acks
        )
        try:
            fut = self._client.request_async(request, DurableDelivery.from_wire)
        except DcpsError as exc:
            with self._lock:
                self._in_flight -= 1
            self._failed(exc)
            return
        fut.add_done_callback(self._polled)

    def _polled(self, fut: Future[DurableDelivery]) -> None:
        """A poll's answer (the reply thread): deliver it, and poll again if none is in flight."""
        with self._lock:
            self._in_flight -= 1
        if self._stop.is_set():
            return
        try:
            self._handle(fut.result())
        except BaseException as exc:  # a failed poll, or a malformed answer: the supervisor's
            self._failed(exc)
            return
        with self._lock:
            room = _MAX_BUFFERED - len(self._buffer) - self._queued
            again = not self._in_flight and room > 0 and not self._closed
            more = self._take_acks() if again else ()
        if again:
            self._poll(more)

    def _handle(self, d: DurableDelivery) -> None:
        if d.refused:
            (c, o, why), more = d.refused[0], len(d.refused) - 1
            self._report(
                PreconditionNotMetError(
                    f"cannot acknowledge element ({c}, {o}) of durable {self.name!r}: "
                    f"{why.name.lower().replace('_', ' ')}"
                    + (f" (and {more} more)" if more else "")
                )
            )
        self.outstanding = d.outstanding
        if d.notice & Notice.FILTER_CONFLICT:
            self._keep = self._compile(d.message)
            self._report(FilterConflictError(self.name, d.message))
        if d.notice & Notice.CLOSED:
            self._close_by_store(d.message)
            return
        if d.channels:
            self._deliver(d)

    def _deliver(self, d: DurableDelivery) -> None:
        sizes = list(d.sizes)
        columns: tuple[Sequence[int], ...] = (d.channels, d.offsets, d.stamps, d.redeliveries)
        keep = self._keep if self.kind.acknowledged else None
        maybe = _preselected(keep, d.data, sizes)
        if maybe is None:
            values = self._decode(d.data, sizes)
        else:  # only the elements the filter may keep are decoded
            picked = list(itertools.compress(range(len(sizes)), maybe))
            values = self._decode(*select_elements(d.data, sizes, picked))
            columns = tuple(list(itertools.compress(c, maybe)) for c in columns)
        rows = zip(values, *columns, strict=True)
        unseen: list[tuple[int, int]] = []
        if keep is not None:
            # the filter runs on the values first: no element is made for what it drops
            many = getattr(keep, "matches_many", None)
            flags = many(values) if many is not None else [keep.matches(v) for v in values]
            every = flags
            if maybe is not None:  # a flag per element of the delivery: acks go in its order
                decoded = iter(flags)
                every = [m and next(decoded) for m in maybe]
            unseen = [(c, o) for f, c, o in zip(every, d.channels, d.offsets, strict=True) if not f]
            rows = (r for f, r in zip(flags, rows, strict=True) if f)  # type: ignore[assignment]
            self.filtered += len(unseen)
        topic = self.topic.name
        elements = [DurableElement(v, c, o, ts, n, topic, self) for v, c, o, ts, n in rows]
        with self._lock:
            # elements the durable's filter does not keep: acknowledged unseen, with the next poll
            self._pending_acks.extend(unseen)
            if self.kind.acknowledged:
                if unseen:
                    self._held.update(((topic, e.channel, e.offset), e) for e in elements)
                else:  # (every element kept: the keys come from the delivery's columns)
                    keys = zip(itertools.repeat(topic), d.channels, d.offsets)
                    self._held.update(zip(keys, elements, strict=True))
            if self._on_element is None:
                self._buffer.extend(elements)
                self._lock.notify_all()
                return
            self._calls.append(elements)  # the callbacks run on the subscriber's thread
            self._queued += len(elements)
        self._wake.set()

    def _failed(self, exc: BaseException) -> None:
        """A poll failed: the subscriber's thread decides (subscribe again, report, close)."""
        with self._lock:
            self._failures.append(exc)
        self._wake.set()

    def _run(self) -> None:
        """The subscriber's thread: restarts polling after failures, runs on_element callbacks,
        keeps a poll in flight (a keepalive while the application is behind)."""
        self._poll()
        while not self._stop.is_set():
            self._wake.wait(0.2)
            self._wake.clear()
            with self._lock:
                failures, self._failures = self._failures, []
                calls, self._calls = self._calls, []
            for elements in calls:
                self._callbacks(elements)
            if self._stop.is_set() or self._closed:
                return
            if failures:
                if not self._recover(failures[-1]):
                    return
                continue
            with self._lock:
                room = _MAX_BUFFERED - len(self._buffer) - self._queued
                due = not self._in_flight and (
                    room > 0 or time.monotonic() >= self._last_poll + _KEEPALIVE
                )
                acks = self._take_acks() if due else ()
            if due:
                self._poll(acks)

    def _recover(self, exc: BaseException) -> bool:
        """After a failed poll: subscribe again if the store forgot us; False once closed."""
        if not isinstance(exc, DcpsError):
            self._report(DcpsError(f"durable {self.name!r}: {type(exc).__name__}: {exc}"))
            self._stop.wait(0.1)
            self._poll()
            return True
        text = str(exc)
        # an anonymous durable is not persistent: a restarted store has none ("no durable")
        gone = self.anonymous and text.startswith("no durable")
        if gone or "not a subscriber" in text or any(m in text for m in RESUBSCRIBE_MARKERS):
            # the store restarted, or we timed out: what we held comes again
            self._forget_held()
            with self._lock:
                self._need_subscribe = True  # no polls until subscribed again
            try:
                self._subscribe()
            except DcpsError as again:
                if not isinstance(again, DcpsTimeoutError):
                    self._report(again)
                self._stop.wait(0.1)
                self._failed(exc)  # try again
                return True
            with self._lock:
                self._need_subscribe = False
            self._poll()
            return True
        if "was closed" in text:
            self._close_by_store(text)
            return False
        if not isinstance(exc, DcpsTimeoutError):
            self._report(exc)
        self._stop.wait(0.1)
        self._poll()
        return True

    def _callbacks(self, elements: list[DurableElement[T]]) -> None:
        """Run on_element for a delivery (the subscriber's thread); automatic acks after it."""
        assert self._on_element is not None
        processed: list[DurableElement[T]] = []
        try:
            for e in elements:
                if self._closed:
                    break
                self._on_element(e)
                processed.append(e)
        except Exception as exc:  # an on_element callback failed: report, go on
            self._report(DcpsError(f"on_element raised {type(exc).__name__}: {exc}"))
        finally:
            with self._lock:
                self._queued -= len(elements)
        # automatic: acknowledged once the callbacks returned, for what they processed
        if self.ack_mode is AckMode.AUTO and self.kind.acknowledged and processed:
            try:
                self.ack(processed)
            except DcpsError as exc:
                self._report(exc)

    # -- closing ------------------------------------------------------------------------------

    def _forget_held(self) -> None:
        """The store forgot this subscriber (restart, timeout): it redelivers what we held."""
        with self._lock:
            self._buffer.clear()
            self._held.clear()
            self._pending_acks.clear()

    def _close_by_store(self, why: str) -> None:
        """The store closed this subscriber: what it received is not its own any more."""
        with self._lock:
            self._closed = True
            self._closed_why = why
            self._buffer.clear()
            self._held.clear()
            self._lock.notify_all()

    @property
    def closed(self) -> bool:
        """True once closed (by :meth:`close`, or by the store: taken over, durable deleted)."""
        return self._closed

    def close(self) -> None:
        """Leave the durable (idempotent).

        Sends the acknowledgements due (automatic mode, asynchronous timing);
        elements received but not acknowledged are redelivered. An anonymous
        durable is deleted.
        """
        if getattr(self, "_stop", None) is None or self._stop.is_set():
            return
        try:
            if not self._closed:
                self._auto_ack()
                self._flush_acks()
        except DcpsError:
            pass  # the store is gone or has closed us: it redelivers what was not acked
        self._stop.set()
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._wake.set()
        if self._acker is not None:
            self._acker.join()
        # also ends the poll waiting at the store; a store gone closes silent subscribers itself
        with contextlib.suppress(DcpsError):
            self._request(DurableCloseRequest(self.topic.name, self.name, self.subscriber_id), bool)
        self._thread.join()
        self._client.close()
        self._endpoint.close()

    def __enter__(self) -> DurableSubscriber[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


show_as("dcps.durables", DurableSubscriber)
