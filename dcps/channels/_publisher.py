"""Publishing to a channelled topic: channel choice, batching, confirmation, flow control."""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import zlib
from concurrent.futures import Future
from datetime import timedelta
from typing import Any, Generic, TypeVar

import attrs

from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    InconsistentPolicyError,
)

from ._flow import FlowControl, InFlightFlowControl
from ._position import Position, trusted_position
from ._protocol import Endpoint, Op, Reply, StoreClient, pack, raise_for_reply
from ._topic import ChannelledTopic

__all__ = ["ChannelPublisher", "OrderBy", "connect_topic"]

T = TypeVar("T")

# what every unconfirmed publish returns: a future completed with None (shared,
# since a completed future never changes)
_DONE: Future[Position | None] = Future()
_DONE.set_result(None)


@attrs.frozen
class OrderBy:
    """How a publisher picks the channel of each sample.

    ``OrderBy.key()`` (the default) hashes the key fields' CDR bytes (CRC-32),
    so one key always lands in one channel and keeps its order; keyless types
    then use one channel per publisher. ``OrderBy.round_robin()`` spreads
    samples over all channels (no ordering). ``OrderBy.channel(c)`` pins one.
    """

    kind: str
    channel: int = -1

    @classmethod
    def key(cls) -> OrderBy:
        """Order per key: samples of one key go to one channel."""
        return cls("key")

    @classmethod
    def round_robin(cls) -> OrderBy:
        """Spread samples over the channels in turn."""
        return cls("round_robin")

    @classmethod
    def fixed(cls, channel: int) -> OrderBy:
        """Send every sample to ``channel``."""
        if not isinstance(channel, int) or channel < 0:
            raise BadParameterError(f"a fixed channel must be an int >= 0, got {channel!r}")
        return cls("fixed", channel)


def _seconds(value: timedelta, what: str) -> float:
    if not isinstance(value, timedelta) or value < timedelta(0):
        raise BadParameterError(f"{what} must be a non-negative datetime.timedelta, got {value!r}")
    return value.total_seconds()


def connect_topic(client: StoreClient, topic: ChannelledTopic) -> tuple[int, bool]:
    """Make sure the store knows ``topic``; return its ``(channel_count, retain_consumed)``."""
    flag = -1 if topic.retain_consumed is None else int(topic.retain_consumed)
    reply = client.call(
        Op.ENSURE_TOPIC,
        topic=topic.name,
        number=topic.channel_count or 0,
        flag=flag,
        text=getattr(topic.type, "__idl_typename__", topic.type.__name__),
    )
    return int(reply.number), bool(reply.flag)


@attrs.define
class _Batch:
    items: list[tuple[bytes, Future[Position | None]]] = attrs.Factory(list)
    size: int = 0
    started: float = 0.0


class ChannelPublisher(Generic[T]):
    """Publishes samples of a :class:`ChannelledTopic` through the store.

    Samples are batched per channel and a batch is sent when it holds
    ``batch_count`` samples or ``batch_bytes`` bytes, or ``linger`` after its
    first sample. :meth:`publish` returns a future: in confirmed mode it
    completes with the element's :class:`Position` once the store persisted
    it; unconfirmed, it completes at once with ``None``. At most
    ``max_in_flight`` batches await the store; beyond that :meth:`publish`
    blocks up to ``timeout`` and then raises :class:`~dcps.DcpsTimeoutError`.
    :attr:`flow_control` shows that window, to throttle before blocking.
    """

    def __init__(
        self,
        topic: ChannelledTopic,
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        order_by: OrderBy | None = None,
        confirmed: bool = True,
        batch_count: int = 256,
        batch_bytes: int = 1 << 20,
        linger: timedelta = timedelta(milliseconds=2),
        max_in_flight: int = 8,
        timeout: timedelta = timedelta(seconds=10),
        connect_timeout: timedelta = timedelta(seconds=10),
    ) -> None:
        if batch_count < 1 or batch_bytes < 1 or max_in_flight < 1:
            raise BadParameterError("batch_count, batch_bytes and max_in_flight must be >= 1")
        self.topic = topic
        self.confirmed = confirmed
        self._order = order_by or OrderBy.key()
        self._batch_count = batch_count
        self._batch_bytes = batch_bytes
        self._linger = _seconds(linger, "linger")
        self._timeout = _seconds(timeout, "timeout")
        self._endpoint = Endpoint(domain_id, namespace)
        self._client = StoreClient(self._endpoint, request_timeout=max(self._timeout, 1.0))
        try:
            self._client.connect(_seconds(connect_timeout, "connect_timeout"))
            self.channel_count, self.retain_consumed = connect_topic(self._client, topic)
        except BaseException:
            self._client.close()
            self._endpoint.close()
            raise
        if self._order.kind == "fixed" and self._order.channel >= self.channel_count:
            self._client.close()
            self._endpoint.close()
            raise InconsistentPolicyError(
                f"fixed channel {self._order.channel} does not exist: topic {topic.name!r} "
                f"has {self.channel_count} channels"
            )
        self._rr = itertools.count()
        self._key_fields: list[str] | None = None  # known once the type is populated
        self._key_memo: dict[tuple[Any, ...], int] = {}
        self._own_channel = zlib.crc32(self._client.client_id.encode()) % self.channel_count
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(max_in_flight)
        self._pending: dict[int, _Batch] = {}
        self._in_flight: set[Future[Reply]] = set()
        # in-flight bookkeeping has its own lock: confirmations (on the client's
        # reply thread) must never wait for a publish/flush holding self._lock
        self._idle = threading.Condition(threading.Lock())
        self._flow = InFlightFlowControl(
            max_in_flight, self._idle, self._in_flight, self._flush_now
        )
        self._flusher: threading.Thread | None = None
        self._closed = False
        self._wake = threading.Event()
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
        idl = type(sample).__idl__  # type: ignore[attr-defined]
        if idl.keyless:
            return self._own_channel
        # memoised by the key fields' values: computing the key CDR costs as
        # much as serialising the whole sample
        if self._key_fields is None:
            idl.populate()
            annotations = getattr(type(sample), "__idl_field_annotations__", None) or {}
            self._key_fields = [f for f, a in annotations.items() if a.get("key")]
        memo_key: tuple[Any, ...] | None = None
        if self._key_fields:
            try:
                memo_key = tuple(getattr(sample, f) for f in self._key_fields)
                return self._key_memo[memo_key]
            except KeyError:
                pass
            except TypeError:  # unhashable key values: no memo
                memo_key = None
        channel = zlib.crc32(idl.serialize_key(sample)) % self.channel_count
        if memo_key is not None:
            if len(self._key_memo) >= 65536:
                self._key_memo.clear()
            self._key_memo[memo_key] = channel
        return channel

    def publish(self, sample: T) -> Future[Position | None]:
        """Queue ``sample``; the future completes with its position (or None unconfirmed)."""
        if self._closed:
            raise AlreadyClosedError(f"the publisher of {self.topic.name!r} is closed")
        if not isinstance(sample, self.topic.type):
            raise BadParameterError(
                f"topic {self.topic.name!r} carries {self.topic.type.__name__}, "
                f"not {type(sample).__name__}"
            )
        data = sample.serialize()  # type: ignore[attr-defined]
        channel = self.channel_of(sample)
        fut: Future[Position | None] = Future() if self.confirmed else _DONE
        with self._lock:
            batch = self._pending.get(channel)
            if batch is None:
                batch = self._pending[channel] = _Batch(started=time.monotonic())
            full = (
                len(batch.items) + 1 >= self._batch_count
                or batch.size + len(data) >= self._batch_bytes
            )
            if full and not self._slots.acquire(timeout=self._timeout):
                if not batch.items:
                    del self._pending[channel]
                raise DcpsTimeoutError(
                    f"publish to {self.topic.name!r} timed out: {self._timeout:g} s with "
                    "every in-flight batch unconfirmed (the store is falling behind)"
                )
            batch.items.append((data, fut))
            batch.size += len(data)
            if full:
                self._send_locked(channel)
            elif len(batch.items) == 1:
                self._wake.set()
        return fut

    def _send_locked(self, channel: int) -> None:
        """Send the channel's batch; the caller holds the lock and one in-flight slot."""
        batch = self._pending.pop(channel)
        try:
            reply = self._client.call_async(
                Op.PUBLISH,
                topic=self.topic.name,
                channels=[channel],
                **pack([data for data, _ in batch.items]),
            )
        except BaseException as exc:
            self._slots.release()
            for _, fut in batch.items:
                if not fut.done():
                    fut.set_exception(exc)
            raise
        with self._idle:
            self._in_flight.add(reply)
        reply.add_done_callback(lambda r: self._confirmed(r, channel, batch))

    def _confirmed(self, reply_future: Future[Reply], channel: int, batch: _Batch) -> None:
        self._slots.release()
        try:
            reply = raise_for_reply(reply_future.result())
        except BaseException as exc:
            error = exc if isinstance(exc, DcpsError) else DcpsError(str(exc))
            for _, fut in batch.items:
                if not fut.done():
                    fut.set_exception(error)
        else:
            first = reply.offsets[0]
            for i, (_, fut) in enumerate(batch.items):
                if not fut.done():
                    fut.set_result(trusted_position(channel, first + i))
        with self._idle:
            self._in_flight.discard(reply_future)
            self._idle.notify_all()

    def _linger_loop(self) -> None:
        """Send each batch ``linger`` after its first sample unless it filled up before."""
        while not self._closed:
            with self._lock:
                oldest = min((b.started for b in self._pending.values()), default=None)
                self._wake.clear()
            if oldest is None:
                self._wake.wait()  # set when a batch starts (or on close)
                continue
            delay = oldest + self._linger - time.monotonic()
            if delay > 0:  # later batches cannot be due earlier; a flush or close wakes it
                self._wake.wait(delay)
                continue
            if not self._send_stale(force=False):
                time.sleep(min(self._linger, 0.001) or 0.0005)  # every slot is busy

    def _send_stale(self, *, force: bool, deadline: float | None = None) -> bool:
        """Send due (or, forced, all) batches; False if a due batch found no free slot."""
        with self._lock:
            now = time.monotonic()
            for channel, batch in list(self._pending.items()):
                if not force and now - batch.started < self._linger:
                    continue
                if deadline is None:
                    if not self._slots.acquire(blocking=False):
                        return False
                elif not self._slots.acquire(timeout=max(0.0, deadline - time.monotonic())):
                    raise DcpsTimeoutError(
                        f"flushing {self.topic.name!r} timed out waiting for the store"
                    )
                self._send_locked(channel)
        return True

    def flush(self, timeout: timedelta | None = None) -> None:
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
    def flow_control(self) -> FlowControl:
        """This publisher's flow control (seed 000's ``getFlowControl()``).

        Its backlog is the batches sent to the store and not confirmed yet;
        it is excessive at ``max_in_flight`` of them, when the store falls
        behind and the next full batch would make :meth:`publish` block.
        ``drain_backlog()`` waits for confirmations, ``check_backlog(fn)``
        calls ``fn`` once they came, ``flush()`` sends queued batches now
        without waiting for them (unlike :meth:`flush`).

        .. versionadded:: 0.2
        """
        return self._flow

    def _flush_now(self) -> None:
        """Send queued batches now; those finding the window full go from a helper thread."""
        if self._closed or self._send_stale(force=True):
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

    def close(self) -> None:
        """Flush, then release the publisher's DDS entities (idempotent)."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._wake.set()
            self._linger_thread.join()
            self._client.close()
            self._endpoint.close()

    def __enter__(self) -> ChannelPublisher[T]:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
