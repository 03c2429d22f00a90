"""The publisher of a channelled topic: channel choice, batching, confirmation, flow control.

Batches and element futures live in ``_batches.py``, the channel choice
policy in ``_order.py``, the sample encoder in ``idl._batch_codec``.
"""

from __future__ import annotations

import contextlib
import itertools
import operator
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dcps._timeout import Timeout, timeout_seconds
from dcps.wire._replies import Published
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from idl._batch_codec import encoder_of
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    InconsistentPolicyError,
)
from idl._public import show_as

from ._batches import DONE, Batch, ElementFuture, ManyResult
from ._connect import Connection, connect_topic
from ._flow import FlowControl, InFlightFlowControl
from ._lifecycle import ClientState
from ._order import OrderBy
from ._position import Position
from ._topic import ChannelledTopic

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["ChannelPublisher", "OrderBy"]

T = TypeVar("T")
_new_object = object.__new__
_monotonic = time.monotonic


def _seconds(value: Timeout, what: str) -> float:
    """Finite seconds of a timeout argument (``None``/forever is refused)."""
    seconds = timeout_seconds(value, what)
    if seconds is None:
        raise BadParameterError(f"{what} must be finite, got {value!r}")
    return seconds


#: A publisher's ``batch_bytes`` by default with Cyclone's 1,344-byte fragments (a LAN).
BATCH_BYTES = 256 << 10
#: ... and with fragments of :data:`LARGE_FRAGMENTS` bytes or more (loopback's default).
BATCH_BYTES_LARGE_FRAGMENTS = 1 << 20
LARGE_FRAGMENTS = 32 << 10


def default_batch_bytes(fragment_size: int | None) -> int:
    """A publisher's default ``batch_bytes`` on a domain with ``fragment_size``-byte
    fragments (None: Cyclone's 1,344): about 18-200 datagrams per batch."""
    if fragment_size is not None and fragment_size >= LARGE_FRAGMENTS:
        return BATCH_BYTES_LARGE_FRAGMENTS
    return BATCH_BYTES


class ChannelPublisher(Generic[T]):
    """Publishes samples of a :class:`ChannelledTopic` through the store.

    Samples are batched per channel and a batch is sent when it holds
    ``batch_count`` samples or ``batch_bytes`` bytes, or ``linger`` after its
    first sample; when no batch awaits the store, a sample is sent at once (so
    batching costs no latency on an idle link, and batches grow under load).
    :meth:`publish` returns a future: in confirmed mode it
    completes with the element's :class:`Position` once the store persisted
    it; unconfirmed, it completes at once with ``None``. A topic with no
    subscriber group nor durable (nor retention) keeps nothing: the store
    then confirms the element as *discarded* (FTL's confirm of a discard): the
    future's ``discarded`` is True and :attr:`discarded_count` counts it. At most
    ``max_in_flight`` batches await the store (each store, when several split
    the channels); beyond that :meth:`publish` of a full batch blocks up to
    ``timeout`` and then raises :class:`~dcps.DcpsTimeoutError`.
    :attr:`flow_control` shows that window, to throttle before blocking.

    The defaults suit both ends: at low rates a sample goes out at once (and
    ``linger`` bounds the wait of one that arrives while a batch is in flight);
    at high rates batches grow while the in-flight window is full, up to
    ``batch_count``, and each batch's fixed cost (a request, a reply and a
    live sample, ~150-200 us of CPU over client and store) is shared by
    more elements. ``batch_bytes`` follows the domain's fragment size: with
    Cyclone's 1,344-byte fragments (a LAN) it is 256 KiB, which keeps a batch's
    request and live sample to ~200 datagrams, few enough to pipeline
    through publisher, store and subscriber without overrunning socket buffers;
    with fragments of 32 KiB or more (dcps's loopback default of 60,000 bytes,
    or a ``NetworkConfig.fragment_size`` set so large) a 1 MiB batch is still
    18 datagrams, and it is 1 MiB (measured in ``docs/large-payloads.md``:
    4 KiB elements 1.25x and 64 KiB elements 1.45x the rate with 256 KiB
    batches on loopback; with 1,344-byte fragments 1 MiB batches halve both).
    A sample that comes ``linger``/4 or more after the previous publish, itself
    as far from the one before, is sent at once (with its channel's queued
    batch) if its store's window has room: a sparse stream is not held for
    ``linger`` just because a batch is in flight.

    ``store_key`` authenticates the publisher to a store namespace that has a
    key (``docs/security.md``): a key file's path or a ``StoreKey``; by default
    the file named by ``DCPS_STORE_KEY_FILE``, if set.
    """

    def __init__(
        self,
        topic: ChannelledTopic,
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        order_by: OrderBy | None = None,
        confirmed: bool = True,
        batch_count: int = 1024,
        batch_bytes: int | None = None,
        linger: Timeout = timedelta(milliseconds=2),
        max_in_flight: int = 8,
        timeout: Timeout = timedelta(seconds=10),
        connect_timeout: Timeout = timedelta(seconds=10),
        store_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        if batch_count < 1 or (batch_bytes is not None and batch_bytes < 1) or max_in_flight < 1:
            raise BadParameterError("batch_count, batch_bytes and max_in_flight must be >= 1")
        self.topic = topic
        self.confirmed = confirmed
        self._order = order_by or OrderBy.key()
        self._batch_count = batch_count
        self._linger = _seconds(linger, "linger")
        self._timeout = _seconds(timeout, "timeout")
        self._connection = Connection(
            domain_id,
            namespace,
            network,
            connect_timeout=timeout_seconds(connect_timeout, "connect_timeout"),
            request_timeout=max(self._timeout, 1.0),
            store_key=store_key,
        )
        self._client = self._connection.client
        self._batch_bytes = (
            batch_bytes
            if batch_bytes is not None
            else default_batch_bytes(self._connection.endpoint.fragment_size)
        )
        try:
            self.channel_count, self.retain_consumed = connect_topic(self._client, topic)
        except BaseException:
            self._connection.close()
            raise
        if self._order.kind == "fixed" and self._order.channel >= self.channel_count:
            self._connection.close()
            raise InconsistentPolicyError(
                f"fixed channel {self._order.channel} does not exist: topic {topic.name!r} "
                f"has {self.channel_count} channels"
            )
        self._rr = itertools.count()
        self._type: Any = topic.type
        self._encode = encoder_of(topic.type)
        self._key_of: Callable[[Any], Any] | None = None  # known once the type is populated
        self._key_memo: dict[Any, int] = {}
        self._own_channel = zlib.crc32(self._client.client_id.encode()) % self.channel_count
        self._lock = threading.Lock()
        # one in-flight window per store (share): with several stores, one that is
        # down fills only its own window, and the others' channels keep flowing
        stores = max(1, self._client.store_count)
        self._slots = [threading.Semaphore(max_in_flight) for _ in range(stores)]
        self._pending: dict[int, Batch] = {}
        # A sample arriving at least this long after the previous publish, which came as
        # long after its own predecessor, goes out at once if its store's window has room,
        # even with a batch in flight: at such rates lingering only adds latency.
        # (linger=0 sends every batch as soon as it can anyway: no such rule)
        self._sparse_gap = self._linger / 4 if self._linger > 0 else float("inf")
        self._last_publish = 0.0
        self._last_gap = 0.0
        self._in_flight: set[Future[Published]] = set()
        self._discarded = 0
        # in-flight bookkeeping has its own lock: confirmations (on the client's
        # reply thread) must never wait for a publish/flush holding self._lock
        self._idle = threading.Condition(threading.Lock())
        self._flow = InFlightFlowControl(
            max_in_flight * stores, self._idle, self._in_flight, self._flush_now
        )
        self._flusher: threading.Thread | None = None
        self._state = ClientState.OPEN
        self._wake = threading.Event()
        # the linger thread waits with no batch queued (for one to start): only then
        # does a new batch need to wake it (under the lock, like the queue itself)
        self._linger_idle = False
        self._starved = False  # the linger thread waits for a free in-flight slot
        self._linger_thread = threading.Thread(
            target=self._linger_loop, name="dcps-publisher-linger", daemon=True
        )
        self._linger_thread.start()

    # -- publishing ------------------------------------------------------------

    def channel_of(self, sample: T) -> int:
        """The channel this publisher sends ``sample`` to (round robin advances)."""
        kind = self._order.kind
        if kind == "fixed":
            return self._order.channel
        if kind == "round_robin":
            return next(self._rr) % self.channel_count
        key_of = self._key_of
        if key_of is not None:
            # memoised by the key fields' values: computing the key CDR costs as
            # much as serialising the whole sample
            try:
                return self._key_memo[key_of(sample)]
            except (KeyError, TypeError):  # new key, or unhashable key values
                pass
        idl = type(sample).__idl__  # type: ignore[attr-defined]
        if idl.keyless:
            return self._own_channel
        if key_of is None:
            idl.populate()
            annotations = getattr(type(sample), "__idl_field_annotations__", None) or {}
            fields = [f for f, a in annotations.items() if a.get("key")]
            if not fields:
                channel: int = zlib.crc32(idl.serialize_key(sample)) % self.channel_count
                return channel
            key_of = self._key_of = operator.attrgetter(*fields)
        channel = zlib.crc32(idl.serialize_key(sample)) % self.channel_count
        try:
            memo_key = key_of(sample)
            if len(self._key_memo) >= 65536:
                self._key_memo.clear()
            self._key_memo[memo_key] = channel
        except TypeError:  # unhashable key values: no memo
            pass
        return channel

    def _check_sample(self, sample: Any) -> None:
        if sample.__class__ is not self._type and not isinstance(sample, self._type):
            raise BadParameterError(
                f"topic {self.topic.name!r} carries {self.topic.type.__name__}, "
                f"not {type(sample).__name__}"
            )

    def publish(self, sample: T) -> Future[Position | None]:
        """Queue ``sample``; the future completes with its position (or None unconfirmed).

        In confirmed mode the future fails with the store's error (a
        :class:`~dcps.DcpsError`) if the store refused or never answered the
        sample's batch.
        """
        if self._state is not ClientState.OPEN:
            raise AlreadyClosedError(f"the publisher of {self.topic.name!r} is closed")
        if sample.__class__ is not self._type:
            self._check_sample(sample)
        data = self._encode(sample)
        # the hot path inlined (this runs once per element): a known key's
        # channel, then an append to a batch that does not fill up
        key_of = self._key_of
        if key_of is None:
            channel = self.channel_of(sample)
        else:
            try:
                channel = self._key_memo[key_of(sample)]
            except (KeyError, TypeError):  # a new key, or unhashable key values
                channel = self.channel_of(sample)
        now = _monotonic()
        # acquire/release rather than ``with``: half the cost (0.1-0.2 us per element)
        lock = self._lock
        lock.acquire()
        try:
            # the shorter of the last two gaps: one pause of the publishing thread (the
            # scheduler, another thread holding the GIL) does not make a stream sparse
            gap = now - self._last_publish
            gap, self._last_gap = (gap if gap < self._last_gap else self._last_gap), gap
            self._last_publish = now
            batch = self._pending.get(channel)
            if (
                batch is not None
                and (index := len(batch.payloads)) + 1 < self._batch_count
                and batch.size + len(data) < self._batch_bytes
                and gap < self._sparse_gap
            ):
                batch.payloads.append(data)
                batch.size += len(data)
            else:
                batch, index = self._enqueue_locked(channel, data, gap)
        finally:
            lock.release()
        if not self.confirmed:
            return DONE
        future = _new_object(ElementFuture)  # ElementFuture(batch, index) without a frame
        future._batch = batch
        future._index = index
        return future

    def publish_many(self, samples: Iterable[T]) -> Future[list[Position] | None]:
        """Queue several samples at once; one future for all of them.

        The samples are checked first (nothing is queued if one has the wrong
        type), then queued in order as by :meth:`publish`, at a lower cost per
        sample. In confirmed mode the future completes with the list of their
        positions, in the order given, once the store accepted every one (or
        fails with the first batch's error); unconfirmed, it completes at once
        with ``None``.

        .. versionadded:: 0.1
        """
        if self._state is not ClientState.OPEN:
            raise AlreadyClosedError(f"the publisher of {self.topic.name!r} is closed")
        items = list(samples)
        for sample in items:
            self._check_sample(sample)
        encode, channel_of = self._encode, self.channel_of
        encoded = [(channel_of(s), encode(s)) for s in items]
        if not self.confirmed:
            with self._lock:
                for channel, data in encoded:
                    self._enqueue_locked(channel, data)
            return DONE  # type: ignore[return-value]
        out: Future[list[Position] | None] = Future()
        if not encoded:
            out.set_result([])
            return out
        with self._lock:
            placed = [self._enqueue_locked(channel, data) for channel, data in encoded]
        ManyResult(out, placed).start()
        return out

    def _enqueue_locked(self, channel: int, data: bytes, gap: float = 0.0) -> tuple[Batch, int]:
        """Append to the channel's batch (sent when full); the caller holds the lock.

        ``gap``: seconds since the previous publish (a sparse stream sends at once).
        """
        batch = self._pending.get(channel)
        if batch is None:
            batch = self._pending[channel] = Batch(channel, time.monotonic())
        payloads = batch.payloads
        full = len(payloads) + 1 >= self._batch_count or batch.size + len(data) >= self._batch_bytes
        if full and not self._slot(channel).acquire(timeout=self._timeout):
            if not payloads:
                del self._pending[channel]
            raise DcpsTimeoutError(
                f"publish to {self.topic.name!r} timed out: {self._timeout:g} s with "
                "every in-flight batch unconfirmed (the store is falling behind)"
            )
        index = len(payloads)
        payloads.append(data)
        batch.size += len(data)
        if full:
            self._send_locked(channel)
        elif not index or gap >= self._sparse_gap:
            # Nothing awaits the store, or samples come too seldom to share a batch:
            # lingering would only add latency, send at once (with a sample queued
            # before, after a burst). Under load (batches in flight, samples close
            # together) the batch lingers and grows instead.
            if (not self._in_flight or gap >= self._sparse_gap) and self._slot(channel).acquire(
                blocking=False
            ):
                self._send_locked(channel)
            elif self._linger_idle:
                # it starts timing this batch's linger. Otherwise it waits already for
                # an older batch (due sooner) or for a free slot (which a confirmation
                # signals): a wake-up per new batch cost ~0.1 us per element at 64 B.
                self._linger_idle = False
                self._wake.set()
        return batch, index

    def _slot(self, channel: int) -> threading.Semaphore:
        """The in-flight window of the store serving ``channel`` (``c % count``, _shares.py)."""
        return self._slots[channel % len(self._slots)]

    def _send_locked(self, channel: int) -> None:
        """Send the channel's batch; the caller holds the lock and one in-flight slot."""
        batch = self._pending.pop(channel)
        try:
            reply = self._client.publish_async(
                self.topic.name,
                channel,
                list(map(len, batch.payloads)),  # a C loop
                b"".join(batch.payloads),
            )
        except BaseException as exc:
            self._slot(channel).release()
            batch.resolve(0, exc)
            raise
        finally:
            batch.payloads = []  # element futures keep the batch: not its bytes
        with self._idle:
            self._in_flight.add(reply)
        reply.add_done_callback(lambda r: self._confirmed(r, batch))

    def _confirmed(self, reply_future: Future[Published], batch: Batch) -> None:
        self._slot(batch.channel).release()
        try:
            published = reply_future.result()
        except BaseException as exc:
            batch.resolve(0, exc if isinstance(exc, DcpsError) else DcpsError(str(exc)))
        else:
            batch.resolve(published.first, None, discarded=published.discarded)
            if published.discarded:
                with self._idle:
                    self._discarded += published.count
        with self._idle:
            self._in_flight.discard(reply_future)
            self._idle.notify_all()
            idle = not self._in_flight
        if idle and self._pending and not self._send_on_idle():
            self._wake.set()  # the link is idle: queued batches need not wait out linger
        elif self._starved:  # the linger thread waits for a slot: one was freed
            self._starved = False
            self._wake.set()

    def _send_on_idle(self) -> bool:
        """Send the queued batches from the confirming thread, the link having gone idle.

        This spares the latency path a wake-up of the linger thread (a thread
        hand-off: several milliseconds on a loaded machine). It runs on the
        client's reply thread, which must never wait for a publish holding the
        lock: False (the linger thread must send them) if the lock is taken, a
        window is full or a send failed (its batch's futures hold the error).
        """
        if not self._lock.acquire(blocking=False):
            return False
        try:
            for channel in list(self._pending):
                if not self._slot(channel).acquire(blocking=False):
                    return False
                self._send_locked(channel)
        except Exception:  # _send_locked failed the batch's futures with it
            return False
        finally:
            self._lock.release()
        return True

    def _linger_loop(self) -> None:
        """Send each batch ``linger`` after its first sample unless it filled up before."""
        while True:
            with self._lock:
                if self._state is ClientState.CLOSED:
                    return
                oldest = min((b.started for b in self._pending.values()), default=None)
                self._wake.clear()
                self._linger_idle = oldest is None
            if oldest is None:
                self._wake.wait()  # set when a batch starts (or on close)
                continue
            idle = not self._in_flight  # nothing awaits the store: every batch is due
            delay = 0.0 if idle else oldest + self._linger - time.monotonic()
            if delay > 0:  # later batches cannot be due earlier; a flush or close wakes it
                self._wake.wait(delay)
                continue
            if not self._send_stale(force=idle):
                # every slot of a due batch's store is busy: the next confirmation wakes
                # this thread (_confirmed), else it looks again after linger; no 1 ms
                # polling, which took the lock from publish() and the GIL from the others
                self._starved = True
                self._wake.wait(self._linger or 0.001)
                self._starved = False

    def _send_stale(self, *, force: bool, deadline: float | None = None) -> bool:
        """Send due (or, forced, all) batches; False if a due batch found no free slot."""
        blocked = False
        with self._lock:
            now = time.monotonic()
            for channel, batch in list(self._pending.items()):
                if not force and now - batch.started < self._linger:
                    continue
                slot = self._slot(channel)
                if deadline is None:
                    if not slot.acquire(blocking=False):
                        blocked = True  # its store's window is full; others may not be
                        continue
                elif not slot.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    raise DcpsTimeoutError(
                        f"flushing {self.topic.name!r} timed out waiting for the store"
                    )
                self._send_locked(channel)
        return not blocked

    def flush(self, timeout: Timeout | None = None) -> None:
        """Send every queued batch and wait until the store answered all of them."""
        limit = self._timeout if timeout is None else _seconds(timeout, "timeout")
        deadline = time.monotonic() + limit
        self._send_stale(force=True, deadline=deadline)
        with self._idle:
            while self._in_flight:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DcpsTimeoutError(
                        f"flushing {self.topic.name!r}: "
                        f"the store did not confirm within {limit:g} s"
                    )
                self._idle.wait(left)

    @property
    def discarded_count(self) -> int:
        """Confirmed elements the store discarded (their topic had no group nor durable)."""
        with self._idle:
            return self._discarded

    @property
    def batch_bytes(self) -> int:
        """The size at which a batch is sent: ``batch_bytes`` as given, or the default of
        the domain's fragment size (see the class documentation)."""
        return self._batch_bytes

    @property
    def flow_control(self) -> FlowControl:
        """This publisher's flow control (seed 000's ``getFlowControl()``).

        Its backlog is the batches sent to the store and not confirmed yet;
        it is excessive at ``max_in_flight`` of them (times the number of
        stores splitting the channels), when the store falls behind and the
        next full batch would make :meth:`publish` block.
        ``drain_backlog()`` waits for confirmations, ``check_backlog(fn)``
        calls ``fn`` once they came, ``flush()`` sends queued batches now
        without waiting for them (unlike :meth:`flush`).

        .. versionadded:: 0.2
        """
        return self._flow

    def _flush_now(self) -> None:
        """Send queued batches now; those finding the window full go from a helper thread."""
        if self._state is ClientState.CLOSED or self._send_stale(force=True):
            self._wake.set()
            return
        with self._idle:
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(
                target=self._flush_in_background, name="dcps-publisher-flush", daemon=True
            )
            self._flusher.start()

    def _flush_in_background(self) -> None:
        # on a timeout they stay queued: the linger thread or a later flush sends them
        with contextlib.suppress(DcpsError):
            self._send_stale(force=True, deadline=time.monotonic() + self._timeout)

    @property
    def state(self) -> ClientState:
        """Where this publisher is in its life (open, closing, closed).

        .. versionadded:: 0.4
        """
        return self._state

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (publishing then raises ``AlreadyClosedError``).

        .. versionadded:: 0.4
        """
        return self._state is not ClientState.OPEN

    def close(self) -> None:
        """Flush, then release the publisher's DDS entities (idempotent)."""
        with self._lock:
            if self._state is not ClientState.OPEN:
                return
            self._state = ClientState.CLOSING
        try:
            self.flush()
        finally:
            with self._lock:  # the linger loop reads the state and clears the wake-up under it
                self._state = ClientState.CLOSED
                self._wake.set()
            self._linger_thread.join()
            self._connection.close()

    def __enter__(self) -> ChannelPublisher[T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


show_as("dcps.channels", ChannelPublisher)
