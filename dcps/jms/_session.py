"""Topic sessions (JMS ``TopicSession``) and their acknowledgement modes."""

from __future__ import annotations

import contextlib
import enum
import itertools
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import attrs
import numpy as np

from dcps._crash import crash_point
from dcps.channels._publisher import ChannelPublisher
from dcps.durables._element import DurableElement
from dcps.wire._auth_stage import QueryKey, StageDigest, owned_query
from dcps.wire._durables import (
    DurableUnsubscribed,
    DurableUnsubscribeRequest,
    TxAbortRequest,
    TxCommitRequest,
    TxCommitted,
    tx_signed,
)
from dcps.wire._replies import raise_for_status
from dcps.wire._staging import Staged, StageRequest
from idl._batch_codec import encoder_of
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsError,
    IllegalOperationError,
    InvalidDestinationError,
    PreconditionNotMetError,
)
from idl._public import show_as

from ._destination import TemporaryTopic, Topic
from ._message import expired
from ._publisher import TopicPublisher
from ._subscriber import TopicSubscriber, durable_name

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["AcknowledgeMode", "TopicSession"]

T = TypeVar("T")


class AcknowledgeMode(enum.Enum):
    """How a session acknowledges the messages its subscribers deliver (JMS's session modes).

    .. versionadded:: 0.3
    """

    AUTO = "auto"
    """``AUTO_ACKNOWLEDGE``: each message is acknowledged (synchronously, with the store)
    before ``receive`` returns it: at most once to the application."""
    CLIENT = "client"
    """``CLIENT_ACKNOWLEDGE``: :meth:`Message.acknowledge` (or :meth:`TopicSession.acknowledge`)
    acknowledges every message the session consumed so far; unacknowledged ones come
    back after :meth:`TopicSession.recover`, a close of the session, or a crash."""
    DUPS_OK = "dups_ok"
    """``DUPS_OK_ACKNOWLEDGE``: messages are acknowledged lazily, in batches on a timer; a
    crash may deliver some again (duplicates), never loses one."""
    TRANSACTED = "transacted"
    """``SESSION_TRANSACTED``: published messages are held and consumed ones unacknowledged
    until :meth:`TopicSession.commit`, which makes both take effect in one store
    transaction (a crash before it: neither; after it: both);
    :meth:`TopicSession.rollback` discards the first and redelivers the second."""


class TopicSession:
    """A JMS ``TopicSession``: creates topics, publishers, subscribers and temporary topics.

    Made by :meth:`Connection.create_topic_session`. Point-to-point methods
    (:meth:`create_browser`, :meth:`create_queue`,
    :meth:`create_temporary_queue`) raise :class:`~dcps.IllegalOperationError`,
    as the JMS specification requires of a topic session.

    .. versionadded:: 0.3
    """

    def __init__(self, connection: Connection, mode: AcknowledgeMode) -> None:
        if not isinstance(mode, AcknowledgeMode):
            raise BadParameterError(f"mode must be an AcknowledgeMode, not {mode!r}")
        self.connection = connection
        self.acknowledge_mode = mode
        self._lock = threading.RLock()
        self._subscribers: list[TopicSubscriber[Any]] = []
        self._publishers: list[TopicPublisher[Any]] = []
        self._pending: list[tuple[TopicSubscriber[Any], DurableElement[Any]]] = []
        self._held: list[tuple[ChannelPublisher[Any], Any, str, Future[str]]] = []
        self._closed = False
        #: transactions are (query, epoch): this session's query and its next epoch. With a
        #: namespace key the query ends with the fingerprint of the session's own key, which
        #: signs its commits and aborts (the store checks them: ``_transactions.py``); the
        #: key is made at the first commit (~85 ms), only then
        self._tx_key: QueryKey | None = None
        self._tx_query = f"jms/{uuid.uuid4().hex}"
        self._tx_epochs = itertools.count(1)

    @property
    def transacted(self) -> bool:
        """Whether the session is transacted (JMS ``getTransacted``)."""
        return self.acknowledge_mode is AcknowledgeMode.TRANSACTED

    @property
    def _dups_ok(self) -> bool:
        return self.acknowledge_mode is AcknowledgeMode.DUPS_OK

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError("the session is closed")
        self.connection._check_open()

    # -- destinations -------------------------------------------------------------

    def create_topic(self, name: str, message_type: type) -> Topic:
        """A topic identity for ``name`` whose messages carry ``message_type`` bodies
        (JMS ``createTopic``); the physical topic is not created here."""
        self._check_open()
        return Topic(name, message_type)

    def create_temporary_topic(self, message_type: type) -> TemporaryTopic:
        """A temporary topic, alive as long as the connection unless deleted earlier."""
        self._check_open()
        return self.connection._new_temporary(message_type)

    # -- subscribers ---------------------------------------------------------------

    def _add(self, sub: TopicSubscriber[Any]) -> TopicSubscriber[Any]:
        with self._lock:
            self._subscribers.append(sub)
        self.connection._consumer_opened(sub)
        return sub

    def create_subscriber(
        self, topic: Topic, selector: str | None = None, no_local: bool = False
    ) -> TopicSubscriber[Any]:
        """A non-durable subscriber: it receives what is published while it is active and
        matches ``selector``; ``no_local`` drops what this connection published."""
        self._check_open()
        self.connection._check_consumable(topic)
        return self._add(
            TopicSubscriber(self, topic, name=None, selector=selector, no_local=no_local)
        )

    def create_durable_subscriber(
        self, topic: Topic, name: str, selector: str | None = None, no_local: bool = False
    ) -> TopicSubscriber[Any]:
        """The consumer of unshared durable subscription ``name`` of this connection's client
        id, created if new (JMS ``createDurableSubscriber``; every rule of the seed: see
        the README's JMS section)."""
        self._check_open()
        self._check_durable(topic, name)
        self.connection._drop_expired(name)
        return self._add(
            TopicSubscriber(self, topic, name=name, selector=selector, no_local=no_local)
        )

    def create_shared_durable_subscriber(
        self, topic: Topic, name: str, selector: str | None = None
    ) -> TopicSubscriber[Any]:
        """A consumer of shared durable subscription ``name`` (JMS 2.0
        ``createSharedDurableConsumer``): several consumers share its messages."""
        self._check_open()
        self._check_durable(topic, name)
        return self._add(
            TopicSubscriber(self, topic, name=name, selector=selector, no_local=False, shared=True)
        )

    def _check_durable(self, topic: Topic, name: str) -> None:
        if isinstance(topic, TemporaryTopic):
            raise InvalidDestinationError(
                f"a durable subscription needs a non-temporary topic, not {topic.name!r}"
            )
        if not isinstance(topic, Topic):
            raise InvalidDestinationError(f"not a topic: {topic!r}")
        if not self.connection.client_id:
            raise PreconditionNotMetError(
                "a durable subscription needs the connection's client id: set it first "
                "(Connection(client_id=...) or set_client_id)"
            )
        if not isinstance(name, str) or not name:
            raise InvalidDestinationError(f"invalid durable subscription name {name!r}")

    def unsubscribe(self, name: str) -> None:
        """Delete durable subscription ``name`` of this client id and its messages.

        Raises :class:`~dcps.PreconditionNotMetError` while a consumer of it is
        active or the session holds messages of it unacknowledged, and
        :class:`~dcps.InvalidDestinationError` when there is no such subscription.
        """
        self._check_open()
        client_id = self.connection.client_id
        if not client_id:
            raise PreconditionNotMetError("unsubscribe needs the connection's client id")
        self.connection._drop_expired(name)  # expired messages do not keep it in use
        with self._lock:
            if any(s.name == name for s, _ in self._pending):
                raise PreconditionNotMetError(
                    f"durable subscription {name!r}: this session holds messages of it not "
                    "acknowledged yet"
                )
        request = DurableUnsubscribeRequest("", durable_name(client_id, name), any_topic=True)
        client = self.connection._store_client()
        try:
            fut = client.request_async(request, DurableUnsubscribed.from_wire)
            result: DurableUnsubscribed = client.wait_for(request.op, fut, None)
        except PreconditionNotMetError as exc:
            raise PreconditionNotMetError(
                f"durable subscription {name!r} of client id {client_id!r} is in use: {exc}"
            ) from None
        if not result.existed:
            raise InvalidDestinationError(
                f"no durable subscription {name!r} for client id {client_id!r}"
            )

    # -- publishers ------------------------------------------------------------------

    def create_publisher(self, topic: Topic | None) -> TopicPublisher[Any]:
        """A publisher of ``topic`` (None: an unidentified publisher naming the topic on
        each publish); each one is a new sequence of messages."""
        self._check_open()
        pub: TopicPublisher[Any] = TopicPublisher(self, topic)
        with self._lock:
            self._publishers.append(pub)
        return pub

    # -- point-to-point methods a topic session refuses ------------------------------

    def _refuse(self, what: str) -> NoReturn:
        raise IllegalOperationError(
            f"{what} is a point-to-point method: a TopicSession refuses it (JMS IllegalState)"
        )

    def create_browser(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: raises :class:`~dcps.IllegalOperationError` (JMS ``IllegalStateException``)."""
        self._refuse("create_browser")

    def create_queue(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: raises :class:`~dcps.IllegalOperationError` (JMS ``IllegalStateException``)."""
        self._refuse("create_queue")

    def create_temporary_queue(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused: raises :class:`~dcps.IllegalOperationError` (JMS ``IllegalStateException``)."""
        self._refuse("create_temporary_queue")

    # -- acknowledging and transactions ---------------------------------------------

    def _consumed(self, sub: TopicSubscriber[Any], element: DurableElement[Any]) -> None:
        mode = self.acknowledge_mode
        if mode in (AcknowledgeMode.AUTO, AcknowledgeMode.DUPS_OK):
            sub._durable.ack(element)  # DUPS_OK: the subscriber's timing is asynchronous
            return
        with self._lock:
            self._pending.append((sub, element))

    def _drop_expired(self, name: str) -> None:
        """Acknowledge the expired messages this session holds of durable subscription
        ``name``: an expired message is gone (JMS), so it keeps the subscription in use no
        longer (a consumer closed with only expired messages pending closes now)."""
        now = time.time_ns() // 1_000_000
        with self._lock:
            gone = [(s, e) for s, e in self._pending if s.name == name and expired(e.value, now)]
            if not gone:
                return
            ids = {id(e) for _, e in gone}
            self._pending = [(s, e) for s, e in self._pending if id(e) not in ids]
            still = {id(s) for s, _ in self._pending}
        subs = {id(s): s for s, _ in gone}
        for sub in subs.values():
            sub._durable.ack([e for s, e in gone if s is sub])
            if id(sub) not in still:
                sub._settled()

    def _holds(self, sub: TopicSubscriber[Any]) -> bool:
        with self._lock:
            return any(s is sub for s, _ in self._pending)

    def _forget(self, sub: TopicSubscriber[Any]) -> None:
        with self._lock:
            if sub in self._subscribers:
                self._subscribers.remove(sub)
        self.connection._consumer_closed(sub)

    def _settle(
        self,
        action: Callable[[TopicSubscriber[Any], list[Any]], None],
        *,
        unreceived: bool = False,
    ) -> None:
        with self._lock:
            pending, self._pending = self._pending, []
            subs = list(self._subscribers)
        by_sub: dict[int, tuple[TopicSubscriber[Any], list[Any]]] = {}
        for sub, element in pending:
            by_sub.setdefault(id(sub), (sub, []))[1].append(element)
        if unreceived:  # recover/rollback: what was fetched but not received goes back too
            for sub in subs:
                taken = sub._unreceived()
                if taken:
                    by_sub.setdefault(id(sub), (sub, []))[1].extend(taken)
        errors: list[DcpsError] = []
        for sub, elements in by_sub.values():
            try:
                action(sub, elements)
            except DcpsError as exc:  # one subscriber's store trouble does not stop the others
                errors.append(exc)
            sub._settled()
        if errors:
            raise errors[0]

    def _acknowledge_from_message(self) -> None:
        if self.acknowledge_mode is AcknowledgeMode.CLIENT:
            self.acknowledge()

    def acknowledge(self) -> None:
        """Acknowledge every message this session consumed so far (client mode; JMS 2.0
        ``Session.acknowledge``)."""
        self._check_open()
        self._settle(lambda sub, elements: sub._durable.ack(elements))

    def recover(self) -> None:
        """Stop and redeliver every unacknowledged message (JMS ``recover``); they come
        again marked redelivered."""
        self._check_open()
        if self.transacted:
            raise IllegalOperationError("recover is for non-transacted sessions: use rollback")
        self._settle(lambda sub, elements: sub._durable.rollback(elements), unreceived=True)

    def _hold(self, pub: ChannelPublisher[Any], envelope: Any, mid: str, fut: Future[str]) -> None:
        with self._lock:
            self._held.append((pub, envelope, mid, fut))

    def commit(self) -> None:
        """Commit the transaction: what it published becomes visible and what it consumed is
        acknowledged in ONE store transaction (``dcps/store/_transactions.py``).

        The messages are staged (invisible), each subscriber enlists its
        acknowledgements, and TX_COMMIT applies both at once: a crash of this
        process or of the store before the commit publishes and acknowledges
        nothing (the consumed messages come again); after it, both hold. If the
        store refuses (a consumed message was redelivered meanwhile: its
        subscriber timed out), the transaction is rolled back and
        :class:`~dcps.PreconditionNotMetError` raised.
        """
        self._check_open()
        if not self.transacted:
            raise IllegalOperationError("commit is for transacted sessions")
        with self._lock:
            held, self._held = self._held, []
            pending, self._pending = self._pending, []
        epoch = next(self._tx_epochs)
        by_sub: dict[int, tuple[TopicSubscriber[Any], list[DurableElement[Any]]]] = {}
        for sub, element in pending:
            by_sub.setdefault(id(sub), (sub, []))[1].append(element)
        client = self.connection._store_client()
        if self._tx_key is None and client.sealer.enabled:
            self._tx_key = QueryKey(secrets.token_bytes(32), self._tx_query)
            self._tx_query = owned_query(self._tx_query, self._tx_key)
        stages: tuple[tuple[str, str, int], ...] = ()
        try:
            stages, digests = self._stage(held, epoch)
            for sub, elements in by_sub.values():
                sub._durable._enlist(elements, self._tx_query, epoch)
            crash_point("jms-before-commit")  # test-only (dcps/_crash.py)
            request = self._signed(TxCommitRequest(self._tx_query, epoch, stages, digests))
            fut = client.request_async(request, TxCommitted.from_wire)
            client.wait_for(request.op, fut, None)
        except BaseException as exc:
            with contextlib.suppress(DcpsError):
                abort = self._signed(TxAbortRequest(self._tx_query, epoch, tuple(stages)))
                client.wait_for(abort.op, client.request_async(abort, raise_for_status), None)
            for *_, out in held:
                out.set_exception(exc if isinstance(exc, DcpsError) else DcpsError(str(exc)))
            with self._lock:  # rolled back: the consumed messages are redelivered
                self._pending = pending + self._pending
            with contextlib.suppress(DcpsError):
                self._settle(lambda sub, elements: sub._durable.rollback(elements), unreceived=True)
            if isinstance(exc, DcpsError) and not isinstance(exc, PreconditionNotMetError):
                raise
            raise PreconditionNotMetError(f"the transaction was rolled back: {exc}") from exc
        for _, _, mid, out in held:
            out.set_result(mid)
        for sub, elements in by_sub.values():
            sub._durable._committed(elements)
            sub._settled()

    def _signed(self, request: TxCommitRequest) -> TxCommitRequest:
        """``request`` with the session key's proof (when the connection has a namespace
        key)."""
        if self._tx_key is None:  # (no namespace key: a store without one checks none)
            return request
        op, topics, signed = tx_signed(request.op, request.stages, request.digests)
        proof = self._tx_key.prove(op, topics, request.query, request.epoch, signed)
        return attrs.evolve(request, proof=proof)

    def _stage(
        self, held: list[tuple[ChannelPublisher[Any], Any, str, Future[str]]], epoch: int
    ) -> tuple[tuple[tuple[str, str, int], ...], tuple[str, ...]]:
        """Stage the transaction's messages (one chunk per topic and channel, in order);
        the stages and the digest of each (what the store checks before committing)."""
        chunks: dict[tuple[str, int], list[bytes]] = {}
        for pub, envelope, _, _ in held:
            encode = encoder_of(type(envelope))
            chunks.setdefault((pub.topic.name, pub.channel_of(envelope)), []).append(
                encode(envelope)
            )
        client = self.connection._store_client()
        futures = []
        counts: dict[str, int] = {}
        digests: dict[str, StageDigest] = {}
        for (topic, channel), payloads in chunks.items():
            seq = counts.get(topic, 0)
            counts[topic] = seq + 1
            sizes = np.asarray([len(p) for p in payloads], dtype="<i4").tobytes()
            digests.setdefault(topic, StageDigest()).add(seq, channel, sizes, b"".join(payloads))
            request = StageRequest(
                topic,
                self._tx_query,
                epoch,
                0,
                "s",
                seq,
                channel,
                [len(p) for p in payloads],
                b"".join(payloads),
            )
            futures.append((request, client.request_async(request, Staged.from_wire)))
        for request, fut in futures:
            client.wait_for(request.op, fut, None)
        return (
            tuple((topic, "s", n) for topic, n in counts.items()),
            tuple(digests[topic].hexdigest() for topic in counts),
        )

    def rollback(self) -> None:
        """Discard the messages published in this transaction and redeliver those consumed."""
        self._check_open()
        if not self.transacted:
            raise IllegalOperationError("rollback is for transacted sessions")
        with self._lock:
            held, self._held = self._held, []
        for *_, fut in held:
            fut.cancel()
        self._settle(lambda sub, elements: sub._durable.rollback(elements), unreceived=True)

    # -- closing -------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once closed."""
        return self._closed

    def close(self) -> None:
        """Close the session (idempotent): a transaction in progress is rolled back,
        unacknowledged messages are redelivered, subscribers and publishers close."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            held, self._held = self._held, []
            subs = list(self._subscribers)
            pubs = list(self._publishers)
        for *_, fut in held:
            fut.cancel()
        for sub in subs:
            sub._closing = False
            sub.close()
        with self._lock:
            pending, self._pending = self._pending, []
        closing = {id(s): s for s, _ in pending}
        for sub in closing.values():
            sub._durable.close()  # what it held unacknowledged is redelivered
        for pub in pubs:
            pub.close()
        self.connection._session_closed(self)

    def __enter__(self) -> TopicSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


show_as("dcps.jms", AcknowledgeMode, TopicSession)
