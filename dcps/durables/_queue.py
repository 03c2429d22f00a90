"""Queues in the store (TIBCO FTL's point-to-point destinations).

A :class:`QueuePublisher` stores elements in a named queue of the store,
whether or not a subscriber ever existed, in confirm mode (``publish``
returns the element's sequence number once it is on disk) or no-confirm mode
(it returns at once). :class:`QueueSubscriber` s divide the queue's elements
between them: each element goes to one subscriber, which acknowledges it
(deleted for good) or rolls it back (redelivered, to any subscriber, with its
delivery count). A subscriber that closes, or dies and stays silent for its
``timeout``, gives back every element it had not acknowledged. Only an
administrator deletes a queue (:func:`delete_queue`, with the admin key),
discarding its pending elements.

The queue is built on the store's own tables (``dcps/store/_queues.py``),
not on a channelled topic: an element is deleted when acknowledged, and
nothing but the queue holds it.
"""

from __future__ import annotations

import builtins
import threading
import time
import uuid
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar

import attrs

from dcps._timeout import Timeout, timeout_seconds
from dcps.wire._codes import Op
from dcps.wire._names import check_name
from dcps.wire._queues import (
    MAX_RECEIVE_WAIT_MS,
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
    QueueSubscribeRequest,
)
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from idl._batch_codec import decoder_of, encoder_of
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)
from idl._identity import type_identity
from idl._public import show_as

from ._client import DurableClient
from ._options import AckMode
from ._store_link import StoreLink, seconds

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = [
    "QueueElement",
    "QueuePublisher",
    "QueueState",
    "QueueSubscriber",
    "delete_queue",
]

T = TypeVar("T")


def _check_type(cls: object) -> None:
    if not isinstance(cls, builtins.type) or not hasattr(cls, "__idl__"):
        raise BadParameterError(f"a queue's element type is an idl.Struct class, not {cls!r}")


def _ok(reply: Any) -> None:
    return None


class QueuePublisher(Generic[T]):
    """Publishes elements of ``type`` to queue ``name`` (created if the store lacks it).

    ``confirm`` (default True) is FTL's *store_confirm_send*: :meth:`publish`
    returns once the store has the element on disk; False is
    *store_send_noconfirm*: it returns at once. A queue recorded with another
    element type raises :class:`~dcps.PreconditionNotMetError` naming both.
    """

    def __init__(
        self,
        name: str,
        type: type[T],
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        confirm: bool = True,
        timeout: Timeout = timedelta(seconds=10),
        connect_timeout: Timeout = timedelta(seconds=10),
        store_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        self.name = check_name("queue name", name)
        _check_type(type)
        self.type: builtins.type[T] = type
        self.confirm = confirm
        self._identity = type_identity(type)
        self._encode = encoder_of(type)
        self._link = StoreLink(
            domain_id=domain_id,
            namespace=namespace,
            network=network,
            timeout=timeout,
            connect_timeout=connect_timeout,
            store_key=store_key,
        )
        self._closed = False
        self._unconfirmed: set[Future[QueuePublished]] = set()
        self._lock = threading.Lock()

    def _request(self, values: Iterable[T]) -> QueuePublishRequest:
        if self._closed:
            raise AlreadyClosedError(f"the publisher of queue {self.name!r} is closed")
        sizes: list[int] = []
        parts: list[bytes] = []
        for value in values:
            if not isinstance(value, self.type):
                raise BadParameterError(
                    f"queue {self.name!r} holds {self.type.__name__} elements, "
                    f"not {type(value).__name__}"
                )
            raw = bytes(self._encode(value))
            sizes.append(len(raw))
            parts.append(raw)
        if not sizes:
            raise BadParameterError(f"nothing to publish to queue {self.name!r}")
        return QueuePublishRequest(self.name, tuple(sizes), b"".join(parts), self._identity)

    def publish_many_async(self, values: Iterable[T]) -> Future[list[int]]:
        """Store ``values`` in one request and transaction; a future of their sequence numbers."""
        request = self._request(values)

        def decode(reply: Any) -> list[int]:
            done = QueuePublished.from_wire(reply)
            return list(range(done.first, done.first + done.count))

        fut = self._link.call_async(request, decode)
        with self._lock:
            self._unconfirmed.add(fut)  # type: ignore[arg-type]
        fut.add_done_callback(self._confirmed)
        return fut

    def _confirmed(self, fut: Future[Any]) -> None:
        with self._lock:
            self._unconfirmed.discard(fut)

    def publish_many(self, values: Iterable[T], *, confirm: bool | None = None) -> list[int] | None:
        """Store ``values`` at once; their sequence numbers (None in no-confirm mode)."""
        fut = self.publish_many_async(values)
        if not (self.confirm if confirm is None else confirm):
            return None
        return self._link.wait(Op.QUEUE_PUBLISH, fut)

    def publish(self, value: T, *, confirm: bool | None = None) -> int | None:
        """Store ``value``; its sequence number once stored, or None at once in no-confirm
        mode (``confirm`` overrides the publisher's mode for this call)."""
        seqs = self.publish_many([value], confirm=confirm)
        return None if seqs is None else seqs[0]

    def flush(self, timeout: Timeout | None = None) -> None:
        """Wait until every element published so far (in either mode) is confirmed; a failed
        one raises its error."""
        limit = timeout_seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        with self._lock:
            pending = list(self._unconfirmed)
        for fut in pending:
            if deadline is None:
                self._link.wait(Op.QUEUE_PUBLISH, fut)
                continue
            try:
                fut.result(max(0.0, deadline - time.monotonic()))
            except TimeoutError as exc:
                raise DcpsTimeoutError(
                    f"elements published to queue {self.name!r} were not confirmed within "
                    f"{limit:g} s"
                ) from exc

    def state(self) -> QueueState:
        """How many elements the queue stores, has out with subscribers, and its subscribers."""
        return self._link.call(QueueStateRequest(self.name), QueueState.from_wire)

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the connection (unconfirmed elements may be lost). Idempotent."""
        if not self._closed:
            self._closed = True
            self._link.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


@attrs.frozen
class QueueElement(Generic[T]):
    """One element received from a queue: its value, sequence number (in the queue's order
    of publication) and delivery count (1: first delivery; more: redelivered)."""

    value: T
    seq: int
    delivery_count: int

    @property
    def redelivered(self) -> bool:
        """True when the element was delivered before (rolled back, or its subscriber died)."""
        return self.delivery_count > 1


class QueueSubscriber(Generic[T]):
    """A subscriber of queue ``name`` (created if the store lacks it).

    Elements are divided between a queue's subscribers. :meth:`receive`
    returns up to ``max_count`` of them; each is acknowledged (:meth:`ack`:
    deleted from the queue) or rolled back (:meth:`rollback`: redelivered).
    ``timeout`` (default 10 s) is how long the store waits for a silent
    subscriber (a thread sends heartbeats) before giving its unacknowledged
    elements to others; :meth:`close` gives them back at once. ``ack``
    (:class:`AckMode`): EXPLICIT, or AUTO (each ``receive`` first acknowledges
    what the previous one returned, FTL's automatic mode). ``consumer``
    names the subscriber (default: a random name). Acknowledging an element
    another subscriber holds raises :class:`~dcps.PreconditionNotMetError`;
    acknowledging one twice, :class:`~dcps.IllegalOperationError`.
    """

    def __init__(
        self,
        name: str,
        type: type[T],
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        consumer: str | None = None,
        ack: AckMode = AckMode.EXPLICIT,
        timeout: Timeout = timedelta(seconds=10),
        request_timeout: Timeout = timedelta(seconds=10),
        connect_timeout: Timeout = timedelta(seconds=10),
        store_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        self.name = check_name("queue name", name)
        _check_type(type)
        self.type: builtins.type[T] = type
        self.consumer = check_name("consumer", consumer or uuid.uuid4().hex)
        if not isinstance(ack, AckMode):
            raise BadParameterError(f"ack must be an AckMode, not {ack!r}")
        self.ack_mode = ack
        self._timeout_ms = max(1, int(seconds(timeout, "timeout") * 1000))
        self._identity = type_identity(type)
        self._decode = decoder_of(type)
        self._link = StoreLink(
            domain_id=domain_id,
            namespace=namespace,
            network=network,
            timeout=request_timeout,
            connect_timeout=connect_timeout,
            store_key=store_key,
            client_class=DurableClient,  # receives, acks, beats, leave: proven (auth)
        )
        self._closed = False
        self._outstanding: dict[int, QueueElement[T]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        try:
            self._subscribe()
        except BaseException:
            self._link.close()
            raise
        self._heart = threading.Thread(
            target=self._beat, name=f"dcps-queue-{self.name}", daemon=True
        )
        self._heart.start()

    def _subscribe(self) -> None:
        client = self._link.client
        assert isinstance(client, DurableClient)
        request = QueueSubscribeRequest(
            self.name, self.consumer, self._timeout_ms, self._identity, client.offer()
        )
        self._link.call(request, _ok)
        with self._lock:  # anything held before (expelled, store restarted) went back
            self._outstanding.clear()

    def _beat(self) -> None:
        period = self._timeout_ms / 4000
        while not self._stop.wait(period):
            try:
                self._link.call(QueueHeartbeatRequest(self.name, self.consumer), _ok)
            except PreconditionNotMetError:  # expelled, or the store restarted
                try:
                    self._subscribe()
                except DcpsError:
                    continue
            except DcpsError:  # the store is away: the next beat tries again
                continue

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"the subscriber of queue {self.name!r} is closed")

    # -- receiving ------------------------------------------------------------------------

    def receive(self, max_count: int = 64, timeout: Timeout | None = None) -> list[QueueElement[T]]:
        """Up to ``max_count`` elements, waiting up to ``timeout`` (None: forever) for the
        first; an empty list when none came in time."""
        self._check_open()
        if not isinstance(max_count, int) or max_count < 1:
            raise BadParameterError(f"max_count must be an int >= 1, got {max_count!r}")
        if self.ack_mode is AckMode.AUTO:
            with self._lock:
                done = list(self._outstanding.values())
            if done:
                self.ack(done)
        limit = timeout_seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        while True:
            left_ms = MAX_RECEIVE_WAIT_MS
            if deadline is not None:
                left_ms = min(left_ms, max(0, int((deadline - time.monotonic()) * 1000)))
            request = QueueReceiveRequest(self.name, self.consumer, max_count, left_ms)
            try:
                delivery = self._link.call(
                    request, QueueDelivery.from_wire, self._link.timeout + left_ms / 1000
                )
            except PreconditionNotMetError:  # expelled, or the store restarted
                self._subscribe()
                continue
            if delivery.seqs:
                return self._elements(delivery)
            if deadline is not None and time.monotonic() >= deadline:
                return []
            self._check_open()

    def _elements(self, d: QueueDelivery) -> list[QueueElement[T]]:
        values = self._decode(d.blob, list(d.sizes))
        out = [
            QueueElement(v, seq, n) for v, seq, n in zip(values, d.seqs, d.deliveries, strict=True)
        ]
        with self._lock:
            for e in out:
                self._outstanding[e.seq] = e
        return out

    @property
    def outstanding(self) -> list[QueueElement[T]]:
        """The elements received and neither acknowledged nor rolled back, by sequence number."""
        with self._lock:
            return [self._outstanding[s] for s in sorted(self._outstanding)]

    # -- acknowledging --------------------------------------------------------------------

    def _seqs(self, elements: QueueElement[T] | Sequence[QueueElement[T]]) -> tuple[int, ...]:
        items = [elements] if isinstance(elements, QueueElement) else list(elements)
        if not items:
            raise BadParameterError("no element to acknowledge")
        return tuple(e.seq for e in items)

    def ack_async(
        self, elements: QueueElement[T] | Sequence[QueueElement[T]], *, rollback: bool = False
    ) -> Future[int]:
        """Acknowledge (or roll back) elements without waiting; a future of their count."""
        self._check_open()
        seqs = self._seqs(elements)

        def decode(reply: Any) -> int:
            count = QueueAcked.from_wire(reply).count
            with self._lock:
                for seq in seqs:
                    self._outstanding.pop(seq, None)
            return count

        return self._link.call_async(
            QueueAckRequest(self.name, self.consumer, seqs, rollback), decode
        )

    def ack(self, elements: QueueElement[T] | Sequence[QueueElement[T]]) -> None:
        """Acknowledge elements: they are deleted from the queue once this returns.

        An element this subscriber does not hold (another one does, it was
        acknowledged already, or it was redelivered elsewhere after this
        subscriber timed out) raises, and none of ``elements`` is acknowledged.
        """
        self._link.wait(Op.QUEUE_ACK, self.ack_async(elements))

    def rollback(self, elements: QueueElement[T] | Sequence[QueueElement[T]]) -> None:
        """Give elements back: they are redelivered (to any subscriber), before newer ones."""
        self._link.wait(Op.QUEUE_ACK, self.ack_async(elements, rollback=True))

    def state(self) -> QueueState:
        """How many elements the queue stores, has out with subscribers, and its subscribers."""
        return self._link.call(QueueStateRequest(self.name), QueueState.from_wire)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Leave the queue (unacknowledged elements go to other subscribers). Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        self._heart.join()
        try:
            self._link.call(QueueLeaveRequest(self.name, self.consumer), _ok)
        except DcpsError:  # the store is away: it expels this subscriber after its timeout
            pass
        finally:
            self._link.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


def delete_queue(
    name: str,
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    network: NetworkConfig | None = None,
    store_key: KeyOption = FROM_ENVIRONMENT,
    admin_key: KeyOption = FROM_ENVIRONMENT,
    timeout: Timeout = timedelta(seconds=10),
) -> int:
    """Delete queue ``name`` and discard its pending elements (an administrator's operation).

    With a namespace key, the request is sealed with ``admin_key`` (default:
    the file named by ``DCPS_STORE_ADMIN_KEY_FILE``); without it the store
    drops the request and this raises :class:`~dcps.PreconditionNotMetError`
    (no admin key here) or :class:`~dcps.DcpsTimeoutError`. Returns how many
    elements were discarded; an unknown queue raises
    :class:`~dcps.PreconditionNotMetError`.
    """
    check_name("queue name", name)
    link = StoreLink(
        domain_id=domain_id,
        namespace=namespace,
        network=network,
        timeout=timeout,
        connect_timeout=timeout,
        store_key=store_key,
        admin_key=admin_key,
    )
    try:
        done = link.call(QueueDeleteRequest(name), QueueDeleted.from_wire)
    finally:
        link.close()
    if not done.existed:
        raise PreconditionNotMetError(f"the store has no queue {name!r} to delete")
    return done.discarded


show_as(
    "dcps.durables",
    QueueElement,
    QueuePublisher,
    QueueState,
    QueueSubscriber,
    delete_queue,
)
