"""A JMS-style connection: the client identifier, sessions, and temporary topics."""

from __future__ import annotations

import contextlib
import itertools
import threading
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from dcps._timeout import Timeout, timeout_seconds
from dcps.channels._client import StoreClient
from dcps.channels._connect import connect_topic
from dcps.channels._topic import ChannelledTopic
from dcps.wire._durables import TEMPORARY_TOPIC_PREFIX, TemporaryAction, TemporaryTopicRequest
from dcps.wire._names import check_name
from dcps.wire._replies import raise_for_status
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Endpoint
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    IllegalOperationError,
    InvalidDestinationError,
    PreconditionNotMetError,
)
from idl._public import show_as

from ._destination import TemporaryTopic, Topic
from ._envelope import envelope_of
from ._session import AcknowledgeMode, TopicSession

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

    from ._subscriber import TopicSubscriber

__all__ = ["Connection"]

#: Temporary topics are named so: the owning connection's id is part of the name. The store
#: knows the prefix too: it serves such a topic only while its owner holds the topic's lease.
TEMPORARY_PREFIX = TEMPORARY_TOPIC_PREFIX


class Connection:
    """A JMS ``TopicConnection`` to the store of ``namespace`` on DDS domain ``domain_id``.

    ``client_id`` identifies the client for durable subscriptions (it may also be
    set once with :meth:`set_client_id` before anything else uses the
    connection). The connection owns its sessions and temporary topics; it
    delivers messages once :meth:`start` is called (JMS: a connection starts
    stopped), and :meth:`close` ends everything it made.

    ``consumer_timeout``: how long the store waits for a silent consumer (a
    crashed process) before it redelivers what that consumer held and frees its
    durable subscription. ``channel_count``: the channels of topics the store
    first sees through this connection (None: the store's default).

    .. versionadded:: 0.3
    """

    def __init__(
        self,
        client_id: str | None = None,
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        key: KeyOption = FROM_ENVIRONMENT,
        channel_count: int | None = None,
        consumer_timeout: Timeout = timedelta(seconds=10),
        connect_timeout: Timeout = timedelta(seconds=10),
    ) -> None:
        self._client_id: str | None = None
        if client_id is not None:
            self._client_id = self._valid_client_id(client_id)
        self.connection_id = uuid.uuid4().hex
        self.channel_count = channel_count
        seconds = timeout_seconds(consumer_timeout, "consumer_timeout")
        if seconds is None or seconds <= 0:
            raise BadParameterError("consumer_timeout must be a positive duration")
        self.consumer_timeout = timedelta(seconds=seconds)
        self._options: dict[str, Any] = {
            "domain_id": domain_id,
            "namespace": namespace,
            "network": network,
        }
        self._key = key
        self._connect_timeout = connect_timeout
        self._lock = threading.Lock()
        self._started = threading.Condition(self._lock)
        self._running = False
        self._used = False
        self._closed = False
        self._sessions: list[TopicSession] = []
        self._temporaries: dict[str, TemporaryTopic] = {}
        self._deleted: set[str] = set()
        self._consumers: dict[str, int] = {}
        self._temp_numbers = itertools.count(1)
        self._physicals: dict[str, ChannelledTopic] = {}
        self._endpoint: Endpoint | None = None
        self._client: StoreClient | None = None
        #: the store's lease of each temporary topic (renewed a third of the way through)
        self.temporary_lease = self.consumer_timeout
        self._renewer: threading.Thread | None = None
        self._stop_renewing = threading.Event()

    @staticmethod
    def _valid_client_id(client_id: str) -> str:
        if not isinstance(client_id, str) or not client_id or "/" in client_id:
            raise BadParameterError(
                f"a client id is a non-empty str without '/', not {client_id!r}"
            )
        return check_name("a client id", client_id)

    # -- identity ------------------------------------------------------------------

    @property
    def client_id(self) -> str | None:
        """The client identifier (JMS ``getClientID``), None until set."""
        return self._client_id

    def set_client_id(self, client_id: str) -> None:
        """Set the client identifier: once, before the connection is used (JMS rule)."""
        with self._lock:
            if self._client_id is not None or self._used:
                raise IllegalOperationError(
                    "the client id is set once, before the connection makes sessions"
                )
            self._client_id = self._valid_client_id(client_id)

    # -- options for the store entities ----------------------------------------------

    def _store_options(self) -> dict[str, Any]:
        return {**self._options, "key": self._key, "connect_timeout": self._connect_timeout}

    def _publisher_options(self) -> dict[str, Any]:
        return {
            **self._options,
            "store_key": self._key,
            "connect_timeout": timedelta(seconds=timeout_seconds(self._connect_timeout) or 10),
        }

    def _store_client(self) -> StoreClient:
        """The connection's own store client (administrative requests), connected on first use."""
        with self._lock:
            if self._client is None:
                self._endpoint = Endpoint(
                    self._options["domain_id"], self._options["namespace"], self._options["network"]
                )
                client = StoreClient(self._endpoint, key=self._key)
                try:
                    client.connect(timeout_seconds(self._connect_timeout) or 10.0)
                except BaseException:
                    client.close()
                    self._endpoint.close()
                    self._endpoint = None
                    raise
                self._client = client
            return self._client

    # -- lifecycle --------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError("the connection is closed")

    def create_topic_session(self, mode: AcknowledgeMode = AcknowledgeMode.AUTO) -> TopicSession:
        """A new session with acknowledgement ``mode`` (JMS ``createTopicSession``;
        :attr:`AcknowledgeMode.TRANSACTED` for a transacted session)."""
        self._check_open()
        session = TopicSession(self, mode)
        with self._lock:
            self._used = True
            self._sessions.append(session)
        return session

    create_session = create_topic_session

    def start(self) -> None:
        """Start (or restart) delivering messages to receivers."""
        self._check_open()
        with self._started:
            self._running = True
            self._used = True
            self._started.notify_all()

    def stop(self) -> None:
        """Pause delivery: ``receive`` waits until :meth:`start`."""
        with self._started:
            self._running = False

    def _wait_started(self, timeout: float | None) -> bool:
        with self._started:
            return self._started.wait_for(lambda: self._running or self._closed, timeout)

    def close(self) -> None:
        """Close every session (their unacknowledged messages are redelivered, transactions
        rolled back) and end the temporary topics (idempotent)."""
        with self._started:
            if self._closed:
                return
            self._closed = True
            self._started.notify_all()
            sessions = list(self._sessions)
        for session in sessions:
            session.close()
        self._stop_renewing.set()
        with self._lock:
            temporaries = list(self._temporaries)
        for name in temporaries:  # the store ends them (or their leases do, if it is away)
            with contextlib.suppress(Exception):
                self._temporary_request(name, TemporaryAction.RELEASE)
        with self._lock:
            self._deleted.update(self._temporaries)
            self._temporaries.clear()
            client, endpoint = self._client, self._endpoint
            self._client = self._endpoint = None
        if client is not None:
            client.close()
        if endpoint is not None:
            endpoint.close()

    def _drop_expired(self, name: str) -> None:
        """Every session lets go of the expired messages it holds of durable ``name``."""
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            session._drop_expired(name)

    def _session_closed(self, session: TopicSession) -> None:
        with self._lock:
            if session in self._sessions:
                self._sessions.remove(session)

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- physical topics -----------------------------------------------------------------

    def _physical(self, topic: Topic) -> ChannelledTopic:
        """The channelled topic of ``topic``, with the envelope version the store holds it
        in (asked once per topic: ``_envelope.py``). A new topic is created with the
        current envelope (version 2, with expiration); an existing one keeps its own."""
        with self._lock:
            known = self._physicals.get(topic.name)
        body = topic.message_type
        if known is not None and known.type in (envelope_of(body), envelope_of(body, 1)):
            return known
        client = self._store_client()
        physical = ChannelledTopic(topic.name, envelope_of(topic.message_type), self.channel_count)
        try:
            connect_topic(client, physical)
        except PreconditionNotMetError as exc:
            if "keeps the type it was created with" not in str(exc):
                raise
            legacy = ChannelledTopic(
                topic.name, envelope_of(topic.message_type, version=1), self.channel_count
            )
            try:  # a topic made before expiry existed: its messages carry the old envelope
                connect_topic(client, legacy)
            except PreconditionNotMetError:
                raise exc from None
            physical = legacy
        with self._lock:
            self._physicals[topic.name] = physical
        return physical

    # -- temporary topics --------------------------------------------------------------

    def _temporary_request(self, topic: str, action: TemporaryAction, subscriber: str = "") -> None:
        """Ask the store to claim, renew, delete or grant a consumer of a temporary topic."""
        lease = int(self.temporary_lease.total_seconds() * 1000)
        request = TemporaryTopicRequest(
            topic, action, lease if action is TemporaryAction.CLAIM else 0, subscriber
        )
        client = self._store_client()
        fut = client.request_async(request, raise_for_status)
        client.wait_for(request.op, fut, None)

    def _new_temporary(self, message_type: type) -> TemporaryTopic:
        with self._lock:
            self._used = True
            name = f"{TEMPORARY_PREFIX}{self.connection_id}.{next(self._temp_numbers)}"
            topic = TemporaryTopic(name, message_type, self.connection_id, self)
        # the store owns the topic's life: it serves it while this connection renews its lease
        self._temporary_request(name, TemporaryAction.CLAIM)
        with self._lock:
            self._temporaries[name] = topic
            if self._renewer is None:
                self._renewer = threading.Thread(
                    target=self._renew_loop, name="dcps-jms-temporaries", daemon=True
                )
                self._renewer.start()
        return topic

    def _renew_loop(self) -> None:
        """Renew the leases of this connection's temporary topics (a third of a lease apart)."""
        period = self.temporary_lease.total_seconds() / 3
        while not self._stop_renewing.wait(period):
            with self._lock:
                names = list(self._temporaries)
            for name in names:
                try:
                    self._temporary_request(name, TemporaryAction.CLAIM)
                except Exception:  # the store is away: the next round tries again
                    if self._stop_renewing.is_set():
                        return

    def _grant(self, topic: Topic, subscriber: str) -> None:
        """Let ``subscriber`` (a consumer of this connection) consume temporary ``topic``."""
        self._temporary_request(topic.name, TemporaryAction.GRANT, subscriber)

    def _delete_temporary(self, topic: TemporaryTopic) -> None:
        with self._lock:
            if topic.connection_id != self.connection_id:
                raise InvalidDestinationError(
                    f"temporary topic {topic.name!r} belongs to another connection"
                )
            if topic.name not in self._temporaries:
                raise InvalidDestinationError(f"temporary topic {topic.name!r} was deleted")
            if self._consumers.get(topic.name, 0) > 0:
                raise PreconditionNotMetError(
                    f"temporary topic {topic.name!r} has {self._consumers[topic.name]} active "
                    "consumer(s): close them before deleting it"
                )
        self._temporary_request(topic.name, TemporaryAction.DELETE)  # the store checks again
        with self._lock:
            self._temporaries.pop(topic.name, None)
            self._deleted.add(topic.name)

    def _check_usable(self, topic: Topic) -> None:
        """Publishing: a temporary topic of this connection must not be deleted."""
        self._check_open()
        if isinstance(topic, TemporaryTopic) or topic.name.startswith(TEMPORARY_PREFIX):
            with self._lock:
                if topic.name in self._deleted:
                    raise InvalidDestinationError(f"temporary topic {topic.name!r} was deleted")

    def _check_consumable(self, topic: Topic) -> None:
        """Consuming: a temporary topic only by its own connection, and only while it lives."""
        if not isinstance(topic, Topic):
            raise InvalidDestinationError(f"not a topic: {topic!r}")
        self._check_usable(topic)
        if isinstance(topic, TemporaryTopic) or topic.name.startswith(TEMPORARY_PREFIX):
            owner = topic.connection_id if isinstance(topic, TemporaryTopic) else ""
            if owner != self.connection_id or topic.name not in self._temporaries:
                raise InvalidDestinationError(
                    f"temporary topic {topic.name!r} belongs to another connection: only the "
                    "connection that created it may consume from it"
                )

    def _consumer_opened(self, sub: TopicSubscriber[Any]) -> None:
        with self._lock:
            self._consumers[sub.topic.name] = self._consumers.get(sub.topic.name, 0) + 1

    def _consumer_closed(self, sub: TopicSubscriber[Any]) -> None:
        with self._lock:
            left = self._consumers.get(sub.topic.name, 0) - 1
            if left > 0:
                self._consumers[sub.topic.name] = left
            else:
                self._consumers.pop(sub.topic.name, None)

    def __repr__(self) -> str:
        return f"Connection(client_id={self._client_id!r}, connection_id={self.connection_id!r})"


show_as("dcps.jms", Connection)
