"""Topic subscribers: non-durable, durable (unshared) and shared durable, on dcps durables.

Every JMS subscriber is a :class:`~dcps.durables.DurableSubscriber` of the
topic's channelled topic in the store:

* non-durable: an anonymous, non-persistent durable starting at the tail (only
  what is published while it is active; the store deletes it when it closes);
* durable: an exclusive, persistent durable named ``jms/<client id>/<name>``
  starting at the tail when created, subscribed with ``replace`` (the store
  deletes an idle one of another topic or selector and creates it anew);
* shared durable: a shared durable of the same name.

The selector and noLocal travel as the durable's filter text (:func:`filter_text`)
so the store keeps them with the durable; the subscriber compiles it into
the predicate that decides which messages the durable keeps: the others are
acknowledged unseen and, for the subscriber, never existed.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dcps.channels._position import Position
from dcps.durables._element import DurableElement
from dcps.durables._options import AckTiming
from dcps.durables._subscriber import DurableSubscriber
from dcps.sql._selector import compile_selector
from dcps.wire._durables import DurableKind
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    DcpsTimeoutError,
    IllegalOperationError,
    InconsistentPolicyError,
    InvalidSelectorError,
    PreconditionNotMetError,
)
from idl._public import show_as

from ._destination import TemporaryTopic, Topic
from ._envelope import SELECTOR_HEADERS, expiring, selector_headers
from ._message import Message, expired, from_envelope
from ._preselect import Preselect, preselect_of

if TYPE_CHECKING:
    from ._session import TopicSession

__all__ = ["TopicSubscriber", "durable_name", "filter_text"]

T = TypeVar("T")

_HEAD = "jms"
_log = logging.getLogger("dcps.jms")


def durable_name(client_id: str, name: str) -> str:
    """The store's name of JMS durable subscription ``name`` of ``client_id``."""
    return f"jms/{client_id}/{name}"


def filter_text(selector: str, no_local: tuple[str, str] | None) -> str:
    """The durable's filter text: ``jms[ no_local=<client|connection>:<id>]``, a newline,
    the selector. Changing either changes the text (JMS: a new subscription)."""
    head = _HEAD if no_local is None else f"{_HEAD} no_local={no_local[0]}:{no_local[1]}"
    return f"{head}\n{selector}"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class _Keep:
    """The predicate a JMS subscription keeps messages by (selector, noLocal, and for
    envelopes with an expiration: not expired)."""

    def __init__(self, text: str, body_type: type, envelope: type | None = None) -> None:
        headers = SELECTOR_HEADERS if envelope is None else selector_headers(envelope)
        head, _, selector = text.partition("\n")
        if not head.startswith(_HEAD):
            raise InvalidSelectorError(
                "the durable subscription was made with a DDS filter, not a JMS selector",
                expression=text,
                position=0,
            )
        match: Callable[[Any], bool] | None = None
        if selector:
            match = compile_selector(selector, body_type, root="s.body", headers=headers).match
        attr = ""
        origin = ""
        if " no_local=" in head:
            kind, _, origin = head.partition(" no_local=")[2].partition(":")
            attr = "client_id" if kind == "client" else "connection_id"
        self.matches_many: Callable[[list[Any]], list[bool]] | None = None
        #: Rules out, on the encoded batch, messages the selector drops (None: decode all).
        self.preselect: Preselect | None = preselect_of(selector, body_type, envelope, headers)
        if match is not None and not attr:
            self.matches_many = compile_selector(
                selector, body_type, root="s.body", headers=headers
            ).match_many
        if match is not None and attr:
            self.matches: Callable[[Any], bool] = lambda s: getattr(s, attr) != origin and match(s)
        elif attr:
            self.matches = lambda s: getattr(s, attr) != origin
        else:
            self.matches = match or (lambda s: True)
        if envelope is not None and expiring(envelope):
            self._expiring(self.matches, self.matches_many)

    def _expiring(
        self, one: Callable[[Any], bool], many: Callable[[list[Any]], list[bool]] | None
    ) -> None:
        """Keep only messages not expired, as well (checked after the selector)."""

        def matches(s: Any) -> bool:
            return one(s) and not 0 < s.expiration <= _now_ms()

        def matches_many(samples: list[Any]) -> list[bool]:
            now = _now_ms()
            flags = many(samples) if many is not None else [one(s) for s in samples]
            return [f and not 0 < s.expiration <= now for f, s in zip(flags, samples, strict=True)]

        self.matches = matches
        self.matches_many = matches_many


class TopicSubscriber(Generic[T]):
    """Receives the messages of a topic (JMS ``TopicSubscriber``); made by a session.

    :meth:`receive` returns the next :class:`Message` (``None`` when none
    came in time, as JMS's ``receive(timeout)`` returns null). The session's
    acknowledgement mode says when a message counts as acknowledged.

    .. versionadded:: 0.3
    """

    def __init__(
        self,
        session: TopicSession,
        topic: Topic,
        *,
        name: str | None,
        selector: str | None,
        no_local: bool,
        shared: bool = False,
    ) -> None:
        self.session = session
        self.topic = topic
        self.name = name
        self.message_selector = selector or None
        self.no_local = bool(no_local)
        connection = session.connection
        durable = name is not None
        if durable:
            origin = ("client", connection.client_id or "")
        else:
            origin = ("connection", connection.connection_id)
        text = filter_text(selector or "", origin if no_local else None)
        body_type = topic.message_type
        _Keep(text, body_type)  # an invalid selector raises here, before the store hears of it
        self._closed = False
        self._closing = False
        self._lock = threading.Lock()
        self._listener: Callable[[Message[Any]], None] | None = None
        self._listening: threading.Thread | None = None
        physical = connection._physical(topic)  # the envelope version the store holds
        envelope = physical.type
        kind = DurableKind.SHARED if shared else DurableKind.EXCLUSIVE
        store_name = durable_name(connection.client_id or "", name) if name is not None else None
        subscriber_id = uuid.uuid4().hex
        if isinstance(topic, TemporaryTopic):  # the store lets only granted consumers in
            connection._grant(topic, subscriber_id)
        try:
            self._durable: DurableSubscriber[Any] = DurableSubscriber(
                physical,
                store_name,
                kind=kind,
                window=None,
                persistent=durable,
                start="tail",
                filter=text,
                filter_compiler=lambda t: _Keep(t, body_type, envelope),
                replace=durable and not shared,
                ack_timing=AckTiming.ASYNC if session._dups_ok else AckTiming.SYNC,
                timeout=connection.consumer_timeout,
                subscriber_id=subscriber_id,
                **connection._store_options(),
            )
        except InconsistentPolicyError as exc:
            other = "an unshared" if shared else "a shared"
            raise PreconditionNotMetError(
                f"{other} durable subscription named {name!r} exists for client id "
                f"{connection.client_id!r}: {exc}"
            ) from None
        except PreconditionNotMetError as exc:
            if name is None:
                raise
            raise PreconditionNotMetError(
                f"durable subscription {name!r} of client id {connection.client_id!r} has an "
                f"active consumer (or messages not acknowledged yet): {exc}"
            ) from None

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def receive(self, timeout: float | None = None) -> Message[T] | None:
        """The next message, waiting up to ``timeout`` seconds (None: until one comes).

        Returns None when none came in time; raises
        :class:`~dcps.AlreadyClosedError` once closed, and
        :class:`~dcps.IllegalOperationError` while a message listener is set.
        """
        if self._listener is not None:
            raise IllegalOperationError(
                "this subscriber delivers to its message listener: receive is refused (JMS)"
            )
        got = self._next(timeout)
        if got is None:
            return None
        message, element = got
        self.session._consumed(self, element)
        return message

    def _next(self, timeout: float | None) -> tuple[Message[T], DurableElement[Any]] | None:
        if self._closed:
            raise AlreadyClosedError(f"the subscriber of topic {self.topic.name!r} is closed")
        connection = self.session.connection
        if not connection._wait_started(timeout):
            return None
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                element: DurableElement[Any] = self._durable.receive(left)
            except DcpsTimeoutError:
                return None
            except AlreadyClosedError:
                raise AlreadyClosedError(
                    f"the subscriber of topic {self.topic.name!r} is closed"
                ) from None
            if not expired(element.value, _now_ms()):
                break
            self._durable.ack(element)  # expired while it waited here: gone, never delivered
        message: Message[T] = from_envelope(
            element.value,
            self.topic,
            element.redelivery_count,
            Position(element.channel, element.offset),
            self.session,
        )
        return message, element

    # -- message listeners ----------------------------------------------------------

    @property
    def message_listener(self) -> Callable[[Message[T]], None] | None:
        """The message listener (JMS ``getMessageListener``), None when unset."""
        return self._listener

    def set_message_listener(self, listener: Callable[[Message[T]], None] | None) -> None:
        """Deliver every message to ``listener`` on a thread of this subscriber (JMS
        ``setMessageListener``); None stops it, and ``receive`` works again.

        In AUTO and DUPS_OK modes a message is acknowledged after the listener
        returns; if the listener raises, the message is redelivered (marked
        redelivered; the error is logged). In CLIENT and TRANSACTED modes the
        session acknowledges or commits, as for received messages. Delivery
        waits while the connection is stopped.
        """
        if listener is not None and not callable(listener):
            raise BadParameterError(f"a message listener is a callable, not {listener!r}")
        with self._lock:
            if self._closed:
                raise AlreadyClosedError(f"the subscriber of topic {self.topic.name!r} is closed")
            previous = self._listening
            self._listener = listener
            self._listening = None
        if previous is not None and previous is not threading.current_thread():
            previous.join()  # the old listener's loop ends after its current message
        if listener is not None:
            thread = threading.Thread(
                target=self._listen, args=(listener,), name="dcps-jms-listener", daemon=True
            )
            with self._lock:
                self._listening = thread
            thread.start()

    def _listen(self, listener: Callable[[Message[T]], None]) -> None:
        """Deliver messages to ``listener`` until it is replaced or the subscriber closes."""
        while self._listener is listener and not self._closed:
            try:
                got = self._next(0.2)
            except AlreadyClosedError:
                return
            except DcpsError as exc:
                _log.warning("message listener of topic %r: %s", self.topic.name, exc)
                continue
            if got is None:
                continue
            message, element = got
            try:
                listener(message)
            except Exception:
                _log.exception("message listener of topic %r raised", self.topic.name)
                if self.session.acknowledge_mode.value in ("auto", "dups_ok"):
                    # JMS: an automatically acknowledged message is redelivered
                    try:
                        self._durable.rollback(element)
                    except DcpsError as exc:
                        _log.warning("redelivering a message of %r: %s", self.topic.name, exc)
                    continue
            try:
                self.session._consumed(self, element)
            except DcpsError as exc:
                _log.warning("acknowledging a message of %r: %s", self.topic.name, exc)

    def receive_no_wait(self) -> Message[T] | None:
        """The next message if one is there now, else None (JMS ``receiveNoWait``)."""
        return self.receive(timeout=0.0)

    def _unreceived(self) -> list[DurableElement[Any]]:
        """Take back what the durable subscriber fetched but ``receive`` has not returned
        (recover and rollback redeliver from the oldest unacknowledged message)."""
        durable = self._durable
        with durable._lock:  # the subscriber's own buffer: same project, one lock
            taken = list(durable._buffer)
            durable._buffer.clear()
        return taken

    def _settled(self) -> None:
        """The session acknowledged or recovered this subscriber's messages."""
        if self._closing:
            self._closing = False
            self._durable.close()

    def close(self) -> None:
        """Close the subscriber (idempotent). Messages it delivered that the session has not
        acknowledged stay the session's to acknowledge or recover; until then the durable
        subscription counts as in use."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            listening, self._listening = self._listening, None
        if listening is not None and listening is not threading.current_thread():
            listening.join()
        self.session._forget(self)
        if self.session._holds(self):
            self._closing = True
        else:
            self._durable.close()

    def __enter__(self) -> TopicSubscriber[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        what = f"durable {self.name!r}" if self.name else "non-durable"
        temp = " (temporary)" if isinstance(self.topic, TemporaryTopic) else ""
        return f"TopicSubscriber({what}, topic={self.topic.name!r}{temp})"


show_as("dcps.jms", TopicSubscriber)
