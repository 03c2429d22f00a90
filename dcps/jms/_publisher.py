"""Topic publishers: each defines a new sequence of messages (its own channel publishers)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from concurrent.futures import Future
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dcps._timeout import Timeout, timeout_seconds
from dcps.channels._publisher import ChannelPublisher
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    InvalidDestinationError,
    UnsupportedError,
)
from idl._public import show_as

from ._destination import TemporaryTopic, Topic
from ._envelope import expiring

if TYPE_CHECKING:
    from ._session import TopicSession

__all__ = ["TopicPublisher"]

T = TypeVar("T")


class _Default:
    """The publisher's own time to live (``publish``'s default)."""


_DEFAULT = _Default()


def _ttl(value: Timeout | None) -> timedelta | None:
    """A time to live as a positive timedelta, or None for never (None or 0)."""
    seconds = timeout_seconds(value, "time_to_live")
    if seconds is None or seconds == 0:
        return None
    if seconds < 0:
        raise BadParameterError(f"a time to live is >= 0, not {value!r}")
    return timedelta(seconds=seconds)


def _ms(ttl: timedelta) -> int:
    return max(1, round(ttl.total_seconds() * 1000))


class TopicPublisher(Generic[T]):
    """Publishes messages to a topic (JMS ``TopicPublisher``); made by a session.

    ``topic=None`` makes an unidentified publisher: each :meth:`publish` names
    its topic. Each publisher is a new sequence of messages: its messages
    keep their order among themselves (one channel per publisher and topic),
    with no order relative to other publishers, earlier ones included.

    .. versionadded:: 0.3
    """

    def __init__(self, session: TopicSession, topic: Topic | None) -> None:
        if topic is not None and not isinstance(topic, Topic):
            raise InvalidDestinationError(f"not a topic: {topic!r}")
        self.session = session
        self.topic = topic
        self.publisher_id = uuid.uuid4().hex[:16]
        self._seq = itertools.count(1)
        self._channels: dict[str, ChannelPublisher[Any]] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._time_to_live: timedelta | None = None
        if topic is not None:
            session.connection._check_usable(topic)

    def _channel_publisher(self, topic: Topic) -> ChannelPublisher[Any]:
        with self._lock:
            if self._closed:
                raise AlreadyClosedError("the publisher is closed")
            pub = self._channels.get(topic.name)
        if pub is not None:
            return pub
        connection = self.session.connection
        physical = connection._physical(topic)  # (a store round trip, once per topic)
        with self._lock:
            if self._closed:
                raise AlreadyClosedError("the publisher is closed")
            pub = self._channels.get(topic.name)
            if pub is None:
                pub = ChannelPublisher(physical, **connection._publisher_options())
                self._channels[topic.name] = pub
            return pub

    @property
    def time_to_live(self) -> timedelta | None:
        """How long its messages live by default (JMS ``getTimeToLive``; None: for ever)."""
        return self._time_to_live

    @time_to_live.setter
    def time_to_live(self, value: Timeout | None) -> None:
        self._time_to_live = _ttl(value)

    def set_time_to_live(self, value: Timeout | None) -> None:
        """Set :attr:`time_to_live` (JMS ``setTimeToLive``; None or 0: messages never expire)."""
        self.time_to_live = value

    def _envelope(
        self,
        topic: Topic,
        pub: ChannelPublisher[Any],
        body: Any,
        priority: int,
        correlation_id: str | None,
        jms_type: str | None,
        ttl: timedelta | None,
    ) -> tuple[str, Any]:
        if not isinstance(body, topic.message_type):
            raise BadParameterError(
                f"topic {topic.name!r} carries {topic.message_type.__name__}, "
                f"not {type(body).__name__}"
            )
        if not (isinstance(priority, int) and 0 <= priority <= 9):
            raise BadParameterError(f"a JMS priority is 0..9, not {priority!r}")
        envelope_type = pub.topic.type
        fields: dict[str, Any] = {}
        now_ms = time.time_ns() // 1_000_000
        if expiring(envelope_type):
            fields["expiration"] = 0 if ttl is None else now_ms + _ms(ttl)
        elif ttl is not None:
            raise UnsupportedError(
                f"topic {topic.name!r} was created with the JMS envelope of dcps before "
                "message expiry (version 1, no JMSExpiration): its messages cannot expire; "
                "publish without a time to live, or to a topic created now"
            )
        message_id = f"ID:{self.publisher_id}-{next(self._seq)}"
        connection = self.session.connection
        envelope = envelope_type(
            body=body,
            message_id=message_id,
            timestamp=now_ms,
            priority=priority,
            correlation_id=correlation_id or "",
            jms_type=jms_type or "",
            client_id=connection.client_id or "",
            connection_id=connection.connection_id,
            **fields,
        )
        return message_id, envelope

    def _target(self, topic: Topic | None) -> Topic:
        if self.topic is not None:
            if topic is not None and topic != self.topic:
                raise BadParameterError(
                    f"this publisher publishes to {self.topic.name!r}; an unidentified "
                    "publisher (topic None) names the topic on each publish"
                )
            target = self.topic
        elif topic is None:
            raise InvalidDestinationError("an unidentified publisher needs a topic on each publish")
        else:
            target = topic
        self.session.connection._check_usable(target)
        return target

    def _send(
        self,
        body: Any,
        topic: Topic | None,
        priority: int,
        correlation_id: str | None,
        jms_type: str | None,
        time_to_live: Timeout | _Default | None,
    ) -> tuple[str, Future[str], ChannelPublisher[Any]]:
        self.session._check_open()
        target = self._target(topic)
        ttl = self._time_to_live if isinstance(time_to_live, _Default) else _ttl(time_to_live)
        pub = self._channel_publisher(target)
        message_id, envelope = self._envelope(
            target, pub, body, priority, correlation_id, jms_type, ttl
        )
        out: Future[str] = Future()
        if self.session.transacted:
            self.session._hold(pub, envelope, message_id, out)
            return message_id, out, pub
        inner = pub.publish(envelope)

        def done(f: Future[Any]) -> None:
            exc = f.exception()
            if exc is not None:
                out.set_exception(exc)
            else:
                out.set_result(message_id)

        inner.add_done_callback(done)
        return message_id, out, pub

    def publish_async(
        self,
        body: T,
        topic: Topic | None = None,
        *,
        priority: int = 4,
        correlation_id: str | None = None,
        jms_type: str | None = None,
        time_to_live: Timeout | _Default | None = _DEFAULT,
    ) -> Future[str]:
        """Publish ``body``; the future completes with its message id once the store has it.

        In a transacted session the message is held until
        :meth:`TopicSession.commit` (and the future completes then).
        ``time_to_live`` as in :meth:`publish`.
        """
        return self._send(body, topic, priority, correlation_id, jms_type, time_to_live)[1]

    def publish(
        self,
        body: T,
        topic: Topic | None = None,
        *,
        priority: int = 4,
        correlation_id: str | None = None,
        jms_type: str | None = None,
        time_to_live: Timeout | _Default | None = _DEFAULT,
        timeout: float = 10.0,
    ) -> str:
        """Publish ``body`` (to ``topic`` for an unidentified publisher) and return its message
        id once the store has it (persistent delivery; in a transacted session, at once: the
        message is sent at :meth:`TopicSession.commit`).

        ``time_to_live`` (a ``timedelta`` or seconds; default :attr:`time_to_live`; None or
        0: never): the message expires that long after it is published
        (``JMSExpiration``) and is never delivered once expired. A topic created by dcps
        before expiry existed refuses it (:class:`~dcps.UnsupportedError` naming the topic).
        """
        message_id, fut, pub = self._send(
            body, topic, priority, correlation_id, jms_type, time_to_live
        )
        if self.session.transacted:
            return message_id
        pub.flush()
        fut.result(timeout)
        return message_id

    def flush(self) -> None:
        """Send what is batched now."""
        for pub in list(self._channels.values()):
            pub.flush()

    def close(self) -> None:
        """Send what is batched and close (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            pubs = list(self._channels.values())
        for pub in pubs:
            pub.close()

    def __enter__(self) -> TopicPublisher[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        name = "unidentified" if self.topic is None else repr(self.topic.name)
        temp = " (temporary)" if isinstance(self.topic, TemporaryTopic) else ""
        return f"TopicPublisher({name}{temp})"


show_as("dcps.jms", TopicPublisher)
