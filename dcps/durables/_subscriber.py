"""Durable subscribers: Universal Messaging named objects and FTL durables on the store.

A :class:`DurableSubscriber` subscribes to a durable of a channelled topic
(creating it if new) and receives its elements from the store: one daemon
thread polls the store (a poll waits there until elements come), decodes
what it gets and either queues it for :meth:`~DurableSubscriber.receive` or
hands it to ``on_element``. Acknowledgements go back as the ack mode and
timing say (``_options.py``).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from dcps._timeout import Timeout, timeout_seconds
from dcps.channels._client import StoreClient
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
    Notice,
)
from dcps.wire._names import check_name
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Endpoint
from idl._batch_codec import decoder_of
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)
from idl._public import show_as

from ._element import DurableElement
from ._options import AckMode, AckTiming, FilterConflictError, Start, start_fields

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["DurableSubscriber"]

T = TypeVar("T")

#: How long one poll may wait at the store for elements.
_POLL_WAIT_MS = 1000
#: Most elements a subscriber keeps received but not taken (an unlimited window).
_MAX_BUFFERED = 4096
#: Anonymous durables are named so (the store deletes them when their subscriber closes).
ANONYMOUS_DURABLE_PREFIX = "~anonymous-durable/"


class FilterLike(Protocol):
    """What decides which elements a durable keeps: a ContentFilter, or a layer's own."""

    def matches(self, sample: Any) -> bool: ...


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
        self.subscriber_id = uuid.uuid4().hex
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
        self._held: dict[tuple[str, int, int], DurableElement[T]] = {}
        self._settled: set[tuple[str, int, int]] = set()  # acked here, for "acked twice"
        self._to_auto_ack: list[DurableElement[T]] = []
        self._pending_acks: list[tuple[int, int]] = []
        self._errors: deque[DcpsError] = deque()
        self._closed = False
        self._closed_why = ""
        self._need_subscribe = False
        #: Elements not acknowledged yet in the durable, as of the last poll (-1: last-value).
        self.outstanding = 0
        #: Elements acknowledged unseen because the durable's filter does not keep them.
        self.filtered = 0
        self._endpoint = Endpoint(domain_id, namespace, network)
        self._client = StoreClient(
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
        )
        subscribed: DurableSubscribed = self._request(request, DurableSubscribed.from_wire)
        if subscribed.filter != self._filter_text:  # an earlier subscriber's filter decides
            self._keep = self._compile(subscribed.filter)
        return subscribed

    def _request(
        self, request: Any, decode: Callable[[Any], Any], timeout: float | None = None
    ) -> Any:
        fut = self._client._call(request, decode)
        return self._client._wait(request.op, fut, timeout)

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

    def _key(self, element: DurableElement[Any]) -> tuple[str, int, int]:
        if not isinstance(element, DurableElement):
            raise BadParameterError(f"not a DurableElement: {element!r}")
        if element.subscriber is not self:
            raise PreconditionNotMetError(
                f"element at {element.position} of durable {self.name!r} was delivered to "
                "another subscriber: only its receiver may acknowledge or roll it back"
            )
        key = (element.topic, element.channel, element.offset)
        with self._lock:
            if key in self._settled and key not in self._held:
                raise PreconditionNotMetError(
                    f"element at {element.position} of durable {self.name!r} was already "
                    "acknowledged or rolled back"
                )
            if key not in self._held:
                raise PreconditionNotMetError(
                    f"element at {element.position} of durable {self.name!r} is not held by "
                    "this subscriber any more (it was redelivered after a timeout or restart)"
                )
        return key

    def _take_held(self, elements: Iterable[DurableElement[Any]]) -> list[tuple[int, int]]:
        keys = [self._key(e) for e in elements]
        if len(set(keys)) != len(keys):
            raise PreconditionNotMetError("the same element is named twice")
        with self._lock:
            for key in keys:
                del self._held[key]
                self._settled.add(key)
                if len(self._settled) > 65536:
                    self._settled.pop()
        return [(c, o) for _, c, o in keys]

    def ack(self, elements: DurableElement[Any] | Iterable[DurableElement[Any]]) -> None:
        """Acknowledge ``elements`` (one or several received by this subscriber).

        With :attr:`AckTiming.SYNC` it returns once the store recorded them;
        with :attr:`AckTiming.ASYNC` at once (sent on a timer). Acknowledging
        an element twice, or one another subscriber received, raises
        :class:`~dcps.PreconditionNotMetError`.
        """
        batch = [elements] if isinstance(elements, DurableElement) else list(elements)
        if self.kind is DurableKind.LAST_VALUE:
            raise PreconditionNotMetError("last-value durables are not acknowledged")
        positions = self._take_held(batch)
        if self.ack_timing is AckTiming.ASYNC:
            with self._lock:
                self._pending_acks.extend(positions)
            return
        self._settle(DurableAckRequest, positions)

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
        inner = self._client._call(request, DurableAcked.from_wire)

        def done(f: Future[DurableAcked]) -> None:
            try:
                self._check(f.result(), positions, "acknowledge")
                out.set_result(None)
            except BaseException as exc:  # the future's owner sees it
                out.set_exception(exc)

        inner.add_done_callback(done)
        return out

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
            fut = self._client._call(request, DurableAcked.from_wire)
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

    def _room(self) -> int:
        with self._lock:
            return _MAX_BUFFERED - len(self._buffer)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except AlreadyClosedError:
                return
            except DcpsError as exc:
                if "not a subscriber" in str(exc):  # store restarted, or we timed out
                    self._forget_held()
                    self._need_subscribe = True
                    continue
                if "was closed" in str(exc):
                    self._close_by_store(str(exc))
                    return
                if not isinstance(exc, DcpsTimeoutError):
                    self._report(exc)
                self._stop.wait(0.1)
            except Exception as exc:  # an on_element callback failed: report, go on
                self._report(DcpsError(f"on_element raised {type(exc).__name__}: {exc}"))

    def _round(self) -> None:
        if self._need_subscribe:
            self._subscribe()
            self._need_subscribe = False
        room = self._room()
        if room <= 0:
            with self._lock:
                self._lock.wait_for(lambda: len(self._buffer) < _MAX_BUFFERED or self._closed, 0.2)
            return
        if self.ack_timing is AckTiming.ASYNC:
            self._flush_acks()
        request = DurablePollRequest(
            self.topic.name,
            self.name,
            self.subscriber_id,
            min(room, self.window or room),
            _POLL_WAIT_MS,
        )
        delivery: DurableDelivery = self._request(request, DurableDelivery.from_wire)
        if self._stop.is_set():
            return
        self.outstanding = delivery.outstanding
        if delivery.notice & Notice.FILTER_CONFLICT:
            self._keep = self._compile(delivery.message)
            self._report(FilterConflictError(self.name, delivery.message))
        if delivery.notice & Notice.CLOSED:
            self._close_by_store(delivery.message)
            raise AlreadyClosedError(self._closed_text())
        if delivery.channels:
            self._deliver(delivery)

    def _deliver(self, d: DurableDelivery) -> None:
        values = self._decode(d.data, list(d.sizes))
        rows = zip(values, d.channels, d.offsets, d.stamps, d.redeliveries, strict=True)
        keep = self._keep
        if keep is not None and self.kind.acknowledged:
            # the filter runs on the values first: no element is made for what it drops
            many = getattr(keep, "matches_many", None)
            flags = many(values) if many is not None else [keep.matches(v) for v in values]
            unseen = [(c, o) for f, c, o in zip(flags, d.channels, d.offsets, strict=True) if not f]
            rows = (r for f, r in zip(flags, rows, strict=True) if f)  # type: ignore[assignment]
            if unseen:
                self.filtered += len(unseen)
                if self.ack_timing is AckTiming.ASYNC:  # sent with the next batch of acks
                    with self._lock:
                        self._pending_acks.extend(unseen)
                else:
                    self._settle(DurableAckRequest, unseen)
        elements = [
            DurableElement(v, c, o, ts, n, self.topic.name, self) for v, c, o, ts, n in rows
        ]
        with self._lock:
            if self.kind.acknowledged:
                for e in elements:
                    self._held[(e.topic, e.channel, e.offset)] = e
            if self._on_element is None:
                self._buffer.extend(elements)
                self._lock.notify_all()
                return
        for e in elements:
            self._on_element(e)
            if self.ack_mode is AckMode.AUTO and self.kind.acknowledged:
                self.ack(e)

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
