"""Subscribing to a channelled topic, anonymously or as a member of a subscriber group."""

from __future__ import annotations

import contextlib
import functools
import gc
import logging
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

import attrs

from dcps.wire._codes import SeekMode
from dcps.wire._messages import Assignment, LiveBatch
from dcps.wire._names import ASSIGN_QOS, BATCH_READER_QOS, batch_partition, check_name
from dcps.wire._replies import ChannelStates, Commits, Membership
from dcps.wire._transport import Endpoint, Waiter, drop_endpoint
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)

from ._client import StoreClient
from ._element import Element
from ._flow import FlowControl, ReceiveFlowControl
from ._position import CommitResult, CommitStatus, Position
from ._publisher import _seconds, connect_topic
from ._topic import ChannelledTopic

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = [
    "ChannelOwnershipListener",
    "ChannelSubscriber",
    "decoder_of",
    "destroy_subscriber_group",
]

_log = logging.getLogger("dcps.channels.subscriber")
#: Seconds the delivery thread waits for a FETCH or JOIN at least (see _round_timeout).
_ROUND_TIMEOUT_MIN = 5.0
T = TypeVar("T")
FETCH_MAX = 512
LIVE_KEPT = 64


_new_tuple = tuple.__new__
UNDECODABLE: Any = object()  # stands for an element whose bytes did not decode


class _Partial(list[Any]):
    """A decoded batch in which some elements are UNDECODABLE."""


_FIXED_MIN = 8  # below this many elements a numpy decode costs more than it saves


def decoder_of(cls: type) -> Callable[[bytes, list[int]], list[Any]]:
    """The fastest function decoding concatenated CDR samples (``blob``, ``sizes``) of ``cls``.

    ``idl.Struct`` types with a compiled codec are decoded by the codec without
    the binding's dispatch; fixed-size ones made of numbers, booleans and numeric
    arrays are decoded a whole batch at a time through a numpy structured dtype
    over the blob (as ``dcps.spark`` reads recordings). Anything else (other
    encodings, plain ``IdlStruct`` types) goes through ``cls.deserialize``.
    """
    slow = cls.deserialize  # type: ignore[attr-defined]
    idl = getattr(cls, "__idl__", None)
    codec = None
    if idl is not None:
        idl.populate()
        codec = getattr(idl, "_codec", None)  # set by idl.Struct types (idl/_struct.py)
    by_header: dict[int, Callable[[bytes], Any]] = {}
    if codec is not None:
        by_header = {0x01: codec.de[1], 0x07: codec.de[2]}  # CDR_LE, PLAIN_CDR2_LE
    columns = _fixed_columns(cls) if codec is not None else None
    dtypes: dict[tuple[int, int], Any] = {}  # (header byte, size) -> dtype, or False

    def split(blob: bytes, sizes: list[int]) -> list[bytes]:
        out = []
        pos = 0
        for size in sizes:
            out.append(blob[pos : pos + size])
            pos += size
        return out

    def per_element(blob: bytes, sizes: list[int]) -> list[Any]:
        get = by_header.get
        return [
            (get(p[1], slow) if len(p) >= 4 and not p[0] else slow)(p) for p in split(blob, sizes)
        ]

    def one_by_one(blob: bytes, sizes: list[int]) -> list[Any]:
        """Decode what can be; the rest become UNDECODABLE (and are logged)."""
        out: list[Any] = _Partial()
        for i, p in enumerate(split(blob, sizes)):
            try:
                out.append(slow(p))
            except Exception:
                _log.exception("element %d of a batch of %s cannot be decoded", i, cls.__name__)
                out.append(UNDECODABLE)
        return out

    def guarded(decode: Callable[[bytes, list[int]], list[Any]]) -> Any:
        def run(blob: bytes, sizes: list[int]) -> list[Any]:
            try:
                return decode(blob, sizes)
            except Exception:
                return one_by_one(blob, sizes)

        return run

    if columns is None:
        return guarded(per_element)  # type: ignore[no-any-return]

    import numpy as np

    def decode(blob: bytes, sizes: list[int]) -> list[Any]:
        n = len(sizes)
        if n < _FIXED_MIN or blob[0] or blob[1] not in by_header:
            return per_element(blob, sizes)
        size = sizes[0]
        key = (blob[1], size)
        dtype: Any = dtypes.get(key)
        if dtype is None:
            from dcps.spark._decode import cdr_dtype

            dtype = dtypes[key] = cdr_dtype(cls, 1 if blob[1] == 0x01 else 2, size) or False
        if dtype is False or len(blob) != n * size or min(sizes) != size or max(sizes) != size:
            return per_element(blob, sizes)
        headers = np.frombuffer(blob, dtype=np.uint8).reshape(n, size)[:, :2]
        if (headers != headers[0]).any():
            return per_element(blob, sizes)
        body: Any = np.frombuffer(blob, dtype=dtype)["_body"]
        values = [
            body[name].tolist() if not array else list(body[name].copy()) for name, array in columns
        ]
        return list(map(cls, *values))

    return guarded(decode)  # type: ignore[no-any-return]


def _fixed_columns(cls: type) -> list[tuple[str, bool]] | None:
    """``(field, is_array)`` of a type whose fields are all numbers/booleans or arrays of them."""
    from idl import describe
    from idl._introspect import NUMERIC_KINDS

    columns = []
    for f in describe(cls).fields:
        if f.optional:
            return None
        if f.kind in NUMERIC_KINDS:
            columns.append((f.name, False))
            continue
        leaf = f
        while leaf.kind == "array" and leaf.element is not None:
            leaf = leaf.element
        if f.kind != "array" or leaf.kind not in NUMERIC_KINDS:
            return None
        columns.append((f.name, True))
    return columns or None


class ChannelOwnershipListener:
    """Told when a group member's channel ownership changes (override what you need).

    Callbacks run on the subscriber's delivery thread; keep them short.
    """

    def on_channels_assigned(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        """``channels`` are now owned by ``subscriber``."""

    def on_channels_revoked(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        """``channels`` moved to other members in a rebalance."""

    def on_channels_lost(
        self, subscriber: ChannelSubscriber[Any], channels: frozenset[int]
    ) -> None:
        """``channels`` were taken because the member timed out (or the store restarted)."""


class _Run:
    """Elements of one channel at offsets ``first``, ``first + 1``, ... as received.

    Decoded all at once when first needed; ``taken`` of them are delivered.
    ``stamps`` is the accept time (ns) of all of them, or a list of one per element.
    """

    __slots__ = ("blob", "first", "sizes", "stamps", "taken", "values")

    def __init__(self, first: int, stamps: int | list[int], blob: bytes, sizes: list[int]) -> None:
        self.first = first
        self.stamps = stamps
        self.blob = blob
        self.sizes = sizes
        self.values: list[Any] | None = None
        self.taken = 0


@attrs.define
class _Channel:
    reader: Any
    next: int | None = None  # offset of the next element to deliver
    runs: deque[_Run] = attrs.Factory(deque)
    need_fetch: bool = True
    # live batches that arrived while a fetch was due, kept to spare the store
    # refetching them once the fetches catch up
    live: deque[LiveBatch] = attrs.Factory(lambda: deque(maxlen=LIVE_KEPT))

    @property
    def end(self) -> int:
        """The offset after the last buffered element (only when ``next`` is known)."""
        if self.runs:
            last = self.runs[-1]
            return last.first + len(last.sizes)
        assert self.next is not None
        return self.next


def _to_ns(when: datetime) -> int:
    if not isinstance(when, datetime):
        raise BadParameterError(f"a seek timestamp must be a datetime, got {when!r}")
    if when.tzinfo is None:
        raise BadParameterError("a seek timestamp must be timezone-aware (e.g. UTC)")
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


@functools.lru_cache(maxsize=1024)
def _from_ns(ns: int) -> datetime:
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC) + timedelta(
        microseconds=(ns % 1_000_000_000) // 1000
    )


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
    ``complete_on_empty`` completes receives with ``None``/``[]``
    when nothing is available instead of waiting. ``filter`` skips elements
    whose value it rejects; ``converter`` maps values before delivery.

    Commits of channels this subscriber does not own (any more: it timed
    out, or a rebalance moved them) are answered ``UNOWNED`` unless
    ``allow_unowned_commits`` is set; then the store records them, so a
    member that lost its channels mid-batch can still commit what it
    processed. :attr:`flow_control` reports the backlog of receive requests
    not completed yet (at most ``max_backlog`` before it counts as excessive;
    :meth:`receive` itself never blocks).
    """

    def __init__(
        self,
        topic: ChannelledTopic,
        *,
        group: str | None = None,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        complete_on_empty: bool = False,
        filter: Callable[[Any], bool] | None = None,
        converter: Callable[[Any], Any] | None = None,
        listeners: Iterable[ChannelOwnershipListener] = (),
        timeout: timedelta = timedelta(seconds=30),
        connect_timeout: timedelta = timedelta(seconds=10),
        request_timeout: timedelta = timedelta(seconds=10),
        allow_unowned_commits: bool = False,
        max_backlog: int = 1024,
    ) -> None:
        if not isinstance(max_backlog, int) or max_backlog < 1:
            raise BadParameterError(f"max_backlog must be an int >= 1, got {max_backlog!r}")
        self.topic = topic
        self.allow_unowned_commits = bool(allow_unowned_commits)
        self._flow = ReceiveFlowControl(max_backlog, self._flush_receives)
        self._type: Any = topic.type
        self._decode = decoder_of(topic.type)
        self.anonymous = group is None
        self.member = uuid.uuid4().hex
        self.group = f"~anonymous/{self.member}" if group is None else check_name("group", group)
        self._complete_on_empty = complete_on_empty
        self._filter = filter
        self._converter = converter
        self._listeners = list(listeners)
        self._on_close: list[Callable[[], None]] = []
        self._timeout = _seconds(timeout, "timeout")
        # Requests the delivery thread waits for give up after this (and are sent
        # again next round): a request lost to a cut link would otherwise hold the
        # thread, and with it heartbeats and rejoining, for the whole request_timeout.
        self._round_timeout = max(self._timeout, _ROUND_TIMEOUT_MIN)
        if self._timeout <= 0:
            raise BadParameterError("the subscriber timeout must be positive")
        self._lock = threading.RLock()
        self._requests: deque[tuple[int | None, Future[Any]]] = deque()
        self._chans: dict[int, _Channel] = {}
        self._carry: list[Element[Any]] = []  # taken for a receive that was cancelled
        self._generation = 0
        self._incarnation = ""
        self._need_join = False
        self._closed = False
        self._rr = 0
        self._last_heartbeat = 0.0
        self._last_poll = time.monotonic()
        # an anonymous subscriber commits what it delivered, one request at a time:
        # what is delivered meanwhile waits here (channel -> offset)
        self._consumed: dict[int, int] = {}
        self._consumed_lock = threading.Lock()
        self._commit_in_flight = False
        self._endpoint = Endpoint(domain_id, namespace, network)
        self._client = StoreClient(
            self._endpoint, request_timeout=_seconds(request_timeout, "request_timeout")
        )
        try:
            self._client.connect(_seconds(connect_timeout, "connect_timeout"))
            self.channel_count, self.retain_consumed = connect_topic(self._client, topic)
            self._waiter = Waiter(self._endpoint)
            self._assign_reader = self._endpoint.reader(
                self._endpoint.assign_topic, namespace, ASSIGN_QOS
            )
            self._waiter.watch(self._assign_reader)
            self._join(timeout=None)  # the store's request timeout
        except BaseException:
            self._client.close()
            self._endpoint.close()
            raise
        self._thread = threading.Thread(target=self._run, name="dcps-subscriber", daemon=True)
        self._thread.start()

    # -- membership --------------------------------------------------------------

    def _join(self, timeout: float | None) -> None:
        joined = self._client.join(
            self.topic.name,
            self.group,
            self.member,
            int(self._timeout * 1000),
            anonymous=self.anonymous,
            timeout=timeout,
        )
        self._need_join = False
        self._incarnation = joined.incarnation
        self._generation = joined.generation
        self._last_heartbeat = time.monotonic()
        self._set_owned(set(joined.channels), lost=False)

    def _set_owned(self, owned: set[int], *, lost: bool) -> None:
        with self._lock:
            current = set(self._chans)
            gained, gone = owned - current, current - owned
            self._carry = [e for e in self._carry if e.channel not in gone]
            for c in gone:
                ch = self._chans.pop(c)
                self._waiter.unwatch(ch.reader)
                drop_endpoint(ch.reader)
            for c in sorted(gained):
                reader = self._endpoint.reader(
                    self._endpoint.batch_topic,
                    batch_partition(self._endpoint.namespace, self.topic.name, c),
                    BATCH_READER_QOS,
                )
                self._waiter.watch(reader)
                self._chans[c] = _Channel(reader)
            if gained:
                self._refresh_cursors(sorted(gained))
        self._notify(gained, gone, lost)

    def _refresh_cursors(self, channels: list[int]) -> None:
        states = self._client.state(self.topic.name, self.group, channels)
        for i, c in enumerate(states.channels):
            ch = self._chans.get(c)
            if ch is None:
                continue
            committed = states.committed[i] if states.committed else states.heads[i] - 1
            ch.next = max(committed + 1, states.heads[i])
            ch.runs.clear()
            ch.need_fetch = True

    def _notify(self, gained: set[int], gone: set[int], lost: bool) -> None:
        for listener in self._listeners:
            try:
                if gone:
                    if lost:
                        listener.on_channels_lost(self, frozenset(gone))
                    else:
                        listener.on_channels_revoked(self, frozenset(gone))
                if gained:
                    listener.on_channels_assigned(self, frozenset(gained))
            except Exception:
                _log.exception("channel ownership listener %r failed", listener)

    def _apply_assignments(self) -> None:
        for sample in self._assign_reader.take(N=256):
            if not isinstance(sample, Assignment):
                continue
            if sample.topic != self.topic.name or sample.group != self.group:
                continue
            if sample.incarnation != self._incarnation or sample.generation <= self._generation:
                continue
            self._generation = sample.generation
            if self.member not in sample.members:
                self._expel()
                continue
            me = sample.members.index(self.member)
            owned = {c for c, owner in enumerate(sample.owners) if owner == me}
            self._set_owned(owned, lost=False)

    def _expel(self) -> None:
        if not self._need_join:
            self._need_join = True
            self._set_owned(set(), lost=True)

    def _send_heartbeat(self) -> None:
        self._last_heartbeat = time.monotonic()
        if self._need_join:
            return
        fut = self._client.heartbeat_async(self.topic.name, self.group, self.member)
        fut.add_done_callback(self._heartbeat_done)

    def _heartbeat_done(self, fut: Future[Membership]) -> None:
        try:
            membership = fut.result()
        except DcpsTimeoutError:
            return  # no answer (store down): the next heartbeat retries
        except Exception:
            membership = None  # refused: join again
        if membership is None or membership.incarnation != self._incarnation:
            self._need_join = True
            self._waiter.wake()

    def heartbeat(self) -> None:
        """Tell the store this member is alive (a no-op for anonymous subscribers)."""
        self._check_open()
        if not self.anonymous:
            self._send_heartbeat()

    # -- the delivery thread -----------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            self._waiter.wait(0.1)
            if self._closed:
                break
            try:
                with self._lock:
                    self._step()
            except DcpsError:
                time.sleep(0.05)  # store unreachable: retry on the next round
            except Exception:
                _log.exception("dcps subscriber of %r: delivery round failed", self.topic.name)
                time.sleep(0.05)

    def _step(self) -> None:
        self._apply_assignments()
        if self._need_join and (self._requests or self.anonymous):
            if self._chans:
                self._set_owned(set(), lost=True)
            self._join(timeout=self._round_timeout)
        now = time.monotonic()
        if (self._requests or self.anonymous) and now - self._last_heartbeat > self._timeout / 4:
            self._send_heartbeat()
        for c, ch in self._chans.items():
            for batch in ch.reader.take(N=256):
                if isinstance(batch, LiveBatch):
                    self._add_live(c, ch, batch)
        delivered = self._deliver()
        if self._requests and not delivered and now - self._last_poll > 1.0:
            self._poll_tails()

    def _add_live(self, c: int, ch: _Channel, batch: LiveBatch) -> None:
        if ch.next is None:
            return
        if ch.need_fetch or batch.first > ch.end:
            ch.need_fetch = True
            ch.live.append(batch)
            return
        self._append_live(ch, batch)

    @staticmethod
    def _append_live(ch: _Channel, batch: LiveBatch) -> None:
        """Buffer the part of ``batch`` after ``ch.end`` (which ``batch.first`` must not pass)."""
        first, sizes, blob = batch.first, batch.sizes, batch.blob
        skip = ch.end - first
        if skip >= len(sizes):
            return
        if skip:
            blob = blob[sum(sizes[:skip]) :]
            sizes = sizes[skip:]
        ch.runs.append(_Run(first + skip, batch.timestamp, blob, sizes))

    def _drain_live(self, ch: _Channel) -> None:
        """Buffer kept live batches that now follow on; drop those already covered."""
        live = ch.live
        while live and live[0].first <= ch.end:
            self._append_live(ch, live.popleft())

    def _poll_tails(self) -> None:
        """Safety net for live batches lost before discovery completed."""
        self._last_poll = time.monotonic()
        if not self._chans:
            return
        try:
            # A safety net must not hold the delivery thread: if the store is out of
            # reach, give up quickly and let the heartbeat/assignment path take over.
            states = self._client.state(self.topic.name, "", sorted(self._chans), timeout=1.0)
        except DcpsTimeoutError:
            return
        for i, c in enumerate(states.channels):
            ch = self._chans.get(c)
            if ch is not None and ch.next is not None and states.tails[i] >= ch.end:
                ch.need_fetch = True

    def _fetch(self, c: int, ch: _Channel) -> None:
        if ch.next is None:
            return
        self._drain_live(ch)
        expected = ch.end
        # with live batches kept, only the gap before the first of them is missing
        limit = min(FETCH_MAX, ch.live[0].first - expected) if ch.live else FETCH_MAX
        # the bulk form: the stored batches as they are (no per-element fields to
        # build in the store, encode, decode and turn back into lists here)
        fetched = self._client.fetch(self.topic.name, c, expected, limit, self._round_timeout)
        run = fetched.run
        count = run.count
        if count and run.first > expected and not ch.runs:
            ch.next = expected = run.first  # removed by retention: skip ahead
        elif not count and fetched.head > expected and not ch.runs:
            ch.next = fetched.head
        if count and run.first == expected:  # a run is dense: no gap inside it
            stamps: int | list[int] = (
                run.stamps[0] if len(run.stamps) == 1 else run.timestamps().tolist()
            )
            ch.runs.append(_Run(expected, stamps, run.data, run.element_sizes().tolist()))
        self._drain_live(ch)
        ch.need_fetch = count >= FETCH_MAX or bool(ch.live)

    def _collect(self, n: int) -> list[Element[Any]]:
        out: list[Element[Any]] = self._carry[:n]
        del self._carry[:n]
        if len(out) >= n:
            return out
        order = sorted(self._chans)
        if not order:
            return out
        start = self._rr % len(order)
        self._rr += 1
        committed: dict[int, int] = {}
        accept, convert = self._filter, self._converter
        for c in order[start:] + order[:start]:
            ch = self._chans[c]
            if ch.next is None:
                continue
            runs = ch.runs
            while len(out) < n:
                if not runs:
                    if ch.need_fetch:
                        try:
                            self._fetch(c, ch)
                        except DcpsError:
                            # this channel's store is out of reach: deliver what was already
                            # taken from the others (raising here would drop it) and retry
                            # the fetch next round
                            _log.debug("fetch of channel %s failed; retried", c, exc_info=True)
                    if not runs:
                        break
                run = runs[0]
                values = run.values
                if values is None:
                    values = run.values = self._decode(run.blob, run.sizes)
                    run.blob = b""
                begin = run.taken
                stop = min(len(values), begin + n - len(out))
                run.taken = stop
                if stop == len(values):
                    runs.popleft()
                first = run.first
                ch.next = first + stop
                committed[c] = first + stop - 1
                stamps = run.stamps
                if (
                    isinstance(stamps, int)
                    and accept is None
                    and convert is None
                    and values.__class__ is list
                ):
                    when = _from_ns(stamps)
                    out += [
                        _new_tuple(Element, (values[i], c, first + i, when, self))
                        for i in range(begin, stop)
                    ]
                    continue
                for i in range(begin, stop):
                    value = values[i]
                    if value is UNDECODABLE:
                        continue
                    try:
                        if accept is not None and not accept(value):
                            continue
                        if convert is not None:
                            value = convert(value)
                    except Exception:
                        _log.exception("filter or converter failed on %s:%s: skipped", c, first + i)
                        continue
                    stamp = stamps if isinstance(stamps, int) else stamps[i]
                    out.append(_new_tuple(Element, (value, c, first + i, _from_ns(stamp), self)))
            if len(out) >= n:
                break
        if committed and self.anonymous:
            with self._consumed_lock:
                self._consumed.update(committed)
                request = self._commit_consumed_locked()
            if request is not None:  # outside the lock: a done future calls back at once
                request.add_done_callback(self._consumed_committed)
        return out

    def _collect_without_gc(self, n: int) -> list[Element[Any]]:
        """:meth:`_collect` with the cyclic garbage collector paused while it runs.

        A batch builds thousands of tracked objects (values, elements, positions)
        that all outlive it; without the pause every 700 of them trigger a
        collection that walks them again (measured: ~2 us per element, a third
        of the delivery thread's time). The pause only defers collection: the
        first allocation after it collects as usual. A collector that was
        already disabled stays so.
        """
        if not gc.isenabled():
            return self._collect(n)
        gc.disable()
        try:
            return self._collect(n)
        finally:
            gc.enable()

    def _commit_consumed_locked(self) -> Future[Commits] | None:
        """Send the anonymous group's commit of what was delivered, unless one is in flight.

        (``_consumed_lock`` held.) One such commit is in flight at a time, so a
        subscriber receiving one element at a time costs the store one
        transaction per round trip, not one per receive.
        """
        if self._commit_in_flight or not self._consumed or self._closed:
            return None
        consumed, self._consumed = self._consumed, {}
        try:
            request = self._client.commit_async(self.topic.name, self.group, self.member, consumed)
        except DcpsError:
            return None  # closed: the anonymous group goes with the subscriber
        self._commit_in_flight = True
        return request

    def _consumed_committed(self, _: Future[Commits]) -> None:
        with self._consumed_lock:  # never self._lock: this runs on the client's reply thread
            self._commit_in_flight = False
            request = self._commit_consumed_locked()
        if request is not None:
            request.add_done_callback(self._consumed_committed)

    def _deliver(self) -> bool:
        delivered = False
        while self._requests:
            max_count, fut = self._requests[0]
            if fut.cancelled():
                self._requests.popleft()
                continue
            elements = self._collect_without_gc(1 if max_count is None else max_count)
            if not elements and not self._complete_on_empty:
                break
            self._requests.popleft()
            delivered = True
            result: Any = elements if max_count is not None else (elements[0] if elements else None)
            if fut.set_running_or_notify_cancel():
                fut.set_result(result)
            else:  # cancelled meanwhile: the next receive gets these elements
                self._carry[:0] = elements
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
        """
        self._check_open()
        if max_elements is not None and (not isinstance(max_elements, int) or max_elements < 1):
            raise BadParameterError(f"max_elements must be an int >= 1, got {max_elements!r}")
        fut: Future[Any] = Future()
        self._flow.track(fut)
        with self._lock:
            self._requests.append((max_elements, fut))
            if not self.anonymous and time.monotonic() - self._last_heartbeat > self._timeout / 4:
                self._send_heartbeat()
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
            return sorted(self._chans)

    def is_owner(self, channel: int) -> bool:
        """True when this subscriber owns ``channel`` now."""
        with self._lock:
            return channel in self._chans

    @property
    def is_active(self) -> bool:
        """False once closed."""
        return not self._closed

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
            incarnation=self._incarnation,
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
            unowned = [c for c in targets if c not in self._chans]
            if unowned:
                raise PreconditionNotMetError(
                    f"cannot seek channels {sorted(unowned)} of {self.topic.name!r}: "
                    "this subscriber does not own them"
                )
            seeked = self._client.seek(
                self.topic.name, self.group, self.member, mode, dict(targets)
            )
            result = {}
            self._carry = [e for e in self._carry if e.channel not in targets]
            with self._consumed_lock:  # a commit queued before the seek must not follow it
                for c in targets:
                    self._consumed.pop(c, None)
            for c, target in seeked.targets.items():
                ch = self._chans[c]
                ch.next = target + 1
                ch.runs.clear()
                ch.need_fetch = True
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
        element accepted at or after it). The position actually seeked to is
        returned (clamped to the channel's head - 1 and tail). Seeking back
        before the group's commit rolls the commit back; seeking forward does
        not commit. A map of channel to position seeks several channels.
        """
        if isinstance(channel_or_map, Mapping):
            positions = self._positions(channel_or_map, None)
            return self._seek(SeekMode.POSITION, {c: p.offset for c, p in positions.items()})
        if isinstance(to, datetime):
            return self._seek(SeekMode.TIMESTAMP, {channel_or_map: _to_ns(to)})[channel_or_map]
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

    def _state(self) -> ChannelStates:
        self._check_open()
        return (
            self._client.state(self.topic.name, self.group, self.channels)
            if self.channels
            else ChannelStates(0, (), (), ())
        )

    def heads(self) -> dict[int, Position]:
        """The first available element's position of each owned channel."""
        reply = self._state()
        return {c: Position(c, h) for c, h in zip(reply.channels, reply.heads, strict=True)}

    def tails(self) -> dict[int, Position]:
        """The last element's position of each owned channel (offset -1 when empty)."""
        reply = self._state()
        return {c: Position(c, t) for c, t in zip(reply.channels, reply.tails, strict=True)}

    def head(self, channel: int) -> Position | None:
        """The head of ``channel``, or None when not owned."""
        return self.heads().get(channel)

    def tail(self, channel: int) -> Position | None:
        """The tail of ``channel``, or None when not owned."""
        return self.tails().get(channel)

    def last_committed(self, channel: int | None = None) -> Any:
        """The group's last commit per owned channel (a dict), or of one channel (or None)."""
        reply = self._state()
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
        reply = self._state()
        total = 0
        with self._lock:
            for c, tail in zip(reply.channels, reply.tails, strict=True):
                ch = self._chans.get(c)
                if ch is None or ch.next is None or (channel is not None and c != channel):
                    continue
                total += max(0, tail + 1 - ch.next)
        return total

    # -- closing ---------------------------------------------------------------------------------

    def on_close(self, action: Callable[[], None]) -> None:
        """Run ``action`` when this subscriber closes (at once if it already has)."""
        if self._closed:
            action()
        else:
            self._on_close.append(action)

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"the subscriber of {self.topic.name!r} is closed")

    def close(self) -> None:
        """Leave the group, cancel pending receives, release DDS entities (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._waiter.wake()
        if threading.current_thread() is not self._thread:
            self._thread.join()
        with self._lock:
            for _, fut in self._requests:
                fut.cancel()
            self._requests.clear()
            with contextlib.suppress(DcpsError):  # else the store times this member out
                self._client.leave(self.topic.name, self.group, self.member, timeout=2.0)
            for ch in self._chans.values():
                self._waiter.unwatch(ch.reader)
                drop_endpoint(ch.reader)
            self._chans.clear()
        self._waiter.unwatch(self._assign_reader)
        drop_endpoint(self._assign_reader)
        self._waiter.close()
        self._client.close()
        self._endpoint.close()
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

    def __exit__(self, *exc: Any) -> None:
        self.close()


def destroy_subscriber_group(
    topic: ChannelledTopic,
    group: str,
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    network: NetworkConfig | None = None,
    connect_timeout: timedelta = timedelta(seconds=10),
) -> bool:
    """Delete subscriber group ``group`` of ``topic`` in the store, without joining it.

    Seed 000's ``destroySubscriberGroup``: the group's commits are forgotten
    and elements only it still held are released (unless the topic retains
    consumed elements). Members still running lose their channels; a member's
    next receive joins a new group of that name, starting at the head.
    Returns False when there was no such group.

    .. versionadded:: 0.3
    """
    check_name("group", group)
    endpoint = Endpoint(domain_id, namespace, network)
    client = StoreClient(endpoint)
    try:
        client.connect(_seconds(connect_timeout, "connect_timeout"))
        return client.destroy_group(topic.name, group)
    finally:
        client.close()
        endpoint.close()
