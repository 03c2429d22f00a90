"""Topic publishers: each defines a new sequence of messages (its own channel publishers)."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from dcps.channels._publisher import ChannelPublisher
from dcps.channels._topic import ChannelledTopic
from idl._errors import AlreadyClosedError, BadParameterError, InvalidDestinationError
from idl._public import show_as

from ._destination import TemporaryTopic, Topic
from ._envelope import envelope_of

if TYPE_CHECKING:
    from ._session import TopicSession

__all__ = ["TopicPublisher"]

T = TypeVar("T")


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
        if topic is not None:
            session.connection._check_usable(topic)

    def _channel_publisher(self, topic: Topic) -> ChannelPublisher[Any]:
        with self._lock:
            if self._closed:
                raise AlreadyClosedError("the publisher is closed")
            pub = self._channels.get(topic.name)
            if pub is None:
                connection = self.session.connection
                physical = ChannelledTopic(
                    topic.name, envelope_of(topic.message_type), connection.channel_count
                )
                pub = ChannelPublisher(physical, **connection._publisher_options())
                self._channels[topic.name] = pub
            return pub

    def _envelope(
        self,
        topic: Topic,
        body: Any,
        priority: int,
        correlation_id: str | None,
        jms_type: str | None,
    ) -> tuple[str, Any]:
        if not isinstance(body, topic.message_type):
            raise BadParameterError(
                f"topic {topic.name!r} carries {topic.message_type.__name__}, "
                f"not {type(body).__name__}"
            )
        if not (isinstance(priority, int) and 0 <= priority <= 9):
            raise BadParameterError(f"a JMS priority is 0..9, not {priority!r}")
        message_id = f"ID:{self.publisher_id}-{next(self._seq)}"
        connection = self.session.connection
        envelope = envelope_of(topic.message_type)(
            body=body,
            message_id=message_id,
            timestamp=time.time_ns() // 1_000_000,
            priority=priority,
            correlation_id=correlation_id or "",
            jms_type=jms_type or "",
            client_id=connection.client_id or "",
            connection_id=connection.connection_id,
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
    ) -> tuple[str, Future[str], ChannelPublisher[Any]]:
        self.session._check_open()
        target = self._target(topic)
        message_id, envelope = self._envelope(target, body, priority, correlation_id, jms_type)
        pub = self._channel_publisher(target)
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
    ) -> Future[str]:
        """Publish ``body``; the future completes with its message id once the store has it.

        In a transacted session the message is held until
        :meth:`TopicSession.commit` (and the future completes then).
        """
        return self._send(body, topic, priority, correlation_id, jms_type)[1]

    def publish(
        self,
        body: T,
        topic: Topic | None = None,
        *,
        priority: int = 4,
        correlation_id: str | None = None,
        jms_type: str | None = None,
        timeout: float = 10.0,
    ) -> str:
        """Publish ``body`` (to ``topic`` for an unidentified publisher) and return its message
        id once the store has it (persistent delivery; in a transacted session, at once: the
        message is sent at :meth:`TopicSession.commit`)."""
        message_id, fut, pub = self._send(body, topic, priority, correlation_id, jms_type)
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
