"""The store service: sequencer, memory and group coordinator of channelled topics.

A store serves the channels of its share (``share=(index, count)``, default
``(0, 1)``: all of them); several store processes split a namespace's
channels between them, the one of index 0 coordinating the groups. The design
of the split is described in ``_shares.py`` and ``docs/deployment.md``.

The service thread takes request samples in rounds. Each one is decoded and
validated whole (``dcps.wire._requests``) before it has any effect; one that
does not pass is answered alone with the error naming its fault, and the
others of the round go on (publishes are appended together).
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

import attrs

from dcps._cyclone.binding import matched_readers
from dcps.wire._auth import AuthenticationError, DropReason
from dcps.wire._auth_member import MemberSecret
from dcps.wire._batches import PackedPayloads
from dcps.wire._codes import CommitStatus, ErrorCode, Op, SeekMode, error_code
from dcps.wire._durables import DurableRequest
from dcps.wire._limits import MAX_CLIENTS, check_client_id
from dcps.wire._messages import Assignment, LiveBatch, Reply, Request, StoreAnnouncement
from dcps.wire._messages import UndecodableRequest as _Undecodable
from dcps.wire._names import (
    ANNOUNCE_QOS,
    ASSIGN_QOS,
    BATCH_WRITER_QOS,
    CONTROL_QOS,
    REPLY_QOS,
    batch_partition,
    reply_partition,
    request_partition,
)
from dcps.wire._replies import (
    ChannelStates,
    Commits,
    GroupDestroyed,
    Pong,
    Published,
    Seeked,
    TopicConfig,
    error_reply,
    ok_reply,
)
from dcps.wire._requests import (
    AnyRequest,
    CommitRequest,
    DestroyGroupRequest,
    EnsureTopicRequest,
    FetchRequest,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    PingRequest,
    PublishRequest,
    SeekRequest,
    StateRequest,
    decode_request,
)
from dcps.wire._sealing import FROM_ENVIRONMENT, UNAUTHENTICATED_WARNING, KeyOption, Sealer
from dcps.wire._split import take_decoded
from dcps.wire._transport import (
    Endpoint,
    Waiter,
    drop_endpoint,
    live_announcements,
    write_message,
)
from idl._batch_codec import split_blob
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    IllegalOperationError,
    InconsistentPolicyError,
    OutOfResourcesError,
    PreconditionNotMetError,
)
from idl._identity import type_identity

from ._admin import ADMIN_HANDLERS, SHARE_ADMIN_HANDLERS
from ._admin_objects import ADMIN_OBJECT_HANDLERS
from ._durability import DurabilityService
from ._durables import DURABLE_HANDLERS, DURABLE_MEMBER_OPS, DurableService, secret_ident
from ._fetchers import DEFAULT_FETCH_THREADS, FetchPool
from ._groups import ANONYMOUS_PREFIX, GroupCoordinator, check_channels_exist
from ._liveness import LivenessProbe
from ._log import (
    DEFAULT_PARTITION_COUNT,
    STORE_FILE,
    ChannelLog,
    SyncMode,
    default_channel_count,
)
from ._maps import MAP_HANDLERS, MapTable
from ._metrics import LogSnapshot, StoreMetrics, take_snapshot
from ._queues import (
    QUEUE_HANDLERS,
    QUEUE_MEMBER_OPS,
    QueueTable,
    queue_secret_ident,
    serve_queues,
)
from ._replies import REPLY_WRITER_IDLE, ReplyOutbox
from ._shares import OWNERSHIP_GRACE, SETTLE, Share, share_conflict_with
from ._staging import on_abort_staged, on_commit_staged, on_stage

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["DEFAULT_FETCH_THREADS", "STORE_FILE", "Store", "StoreState", "TopicSpec", "run_store"]

_log = logging.getLogger("dcps.store")
#: Refusals sent to clients over MAX_CLIENTS whose writers are kept (the oldest is deleted).
_REFUSAL_WRITERS = 16
# live writers made when a client ensures a topic, for its first channels (a writer
# costs ~1 ms to make; the channels beyond get theirs at their first push)
_EAGER_LIVE_WRITERS = 64
#: Member secrets a store keeps (the least recently joined is forgotten first; that member's
#: commits are then refused as "not a member" until it joins again).
MAX_MEMBER_SECRETS = 65536


class TopicSpec(Protocol):
    """What ``Store(topics=...)`` needs of a topic (a ``dcps.channels.ChannelledTopic`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def channel_count(self) -> int | None: ...

    @property
    def retain_consumed(self) -> bool | None: ...


def _identity_of(topic: TopicSpec) -> tuple[str, str]:
    """``(type name, type identity)`` of a configured topic that names its type, else empty."""
    cls = getattr(topic, "type", None)
    if not isinstance(cls, type):
        return "", ""
    identity = type_identity(cls)
    return identity.rpartition("@")[0], identity


class StoreState(enum.Enum):
    """Where a :class:`Store` is in its life."""

    CREATED = "created"
    """The log is open; nothing is served yet (:meth:`Store.start`)."""
    SERVING = "serving"
    """The service threads run."""
    CLOSED = "closed"
    """Closed: the log and every DDS entity are released."""


class _DeferredError(Exception):
    """A request held back until the coordinator's assignment may grant its ownership."""


R = TypeVar("R", bound=AnyRequest | DurableRequest, covariant=True)


@attrs.frozen
class _Call(Generic[R]):
    """One validated request and who to answer."""

    client: str
    request_id: int
    request: R


class Store:
    """The store of one namespace: a SQLite log plus its DDS service threads.

    ``Store(data_dir, domain_id=...)`` opens (or creates) ``data_dir/channels.db``;
    :meth:`start` (or ``with Store(...) as store:``) starts serving, and
    :meth:`close` (or leaving the ``with``) stops. ``topics`` pre-configures
    channelled topics (anything with ``name``, ``channel_count`` and
    ``retain_consumed``, see :class:`TopicSpec`). ``sync`` picks the fsync
    policy. Topics created without a channel count get the next prime above
    the square root of ``partition_count`` (17 for the default 257). A topic
    of ``topics`` that has a ``type`` records its :func:`idl.type_identity`;
    clients of another type are refused (``PreconditionNotMetError`` naming
    the topic and both types). ``allow_client_topics=False`` refuses clients
    that ask for a topic the store does not have (``IllegalOperationError``
    naming topic and namespace): only ``topics`` and the topics already in
    the log exist then.

    The data directory is created if missing. Opening a corrupt, damaged,
    foreign or newer data file, a directory under a regular file, a read-only
    place or a full disk raises one :class:`~dcps.DcpsError` naming the path
    before anything is started. ``verify=False`` skips the start-up check of
    the whole file (``PRAGMA quick_check``), for huge files.

    ``share`` (a :class:`Share`, ``(index, count)`` or ``"index/count"``)
    makes this store serve only channel ``c`` of every topic with
    ``c % count == index``; run one store per share, each on its own data
    directory (see ``docs/deployment.md``). A share that is invalid raises
    :class:`~dcps.BadParameterError`; one that overlaps a running store of
    the namespace (the default ``0/1`` overlaps any other store of it) makes
    :meth:`start` raise :class:`~dcps.PreconditionNotMetError` after
    listening :data:`~dcps.store._shares.SETTLE` seconds for other stores (if
    the overlap shows up later, the younger store stops and sets
    :attr:`failure`).

    ``fetch_threads`` threads answer FETCH requests (subscribers catching up,
    Spark reads), each reading the log through its own read-only connection,
    beside the thread that handles publishes and commits.

    ``key`` protects the namespace (``docs/security.md``): a
    :class:`~dcps.wire._auth_keys.StoreKey`, a key file's path, None for no
    key, or (the default) the file named by ``DCPS_STORE_KEY_FILE`` if set.
    With a key every request, reply, announcement and assignment is
    authenticated and anything else is dropped, counted (:meth:`auth_drops`)
    and logged; without one the store logs a warning at start. ``admin_key``
    (default: ``DCPS_STORE_ADMIN_KEY_FILE``) authorises destroying groups;
    without it the store refuses them. A bad key file raises
    :class:`~dcps.BadParameterError` naming it.

    :attr:`metrics` counts what the store does (``docs/metrics.md``);
    ``metrics_port`` (0: any free port) serves them for Prometheus on
    ``metrics_host`` from :meth:`start` (:attr:`metrics_url`).

    ``durability`` (topic-name patterns, ``("*",)`` for every topic) runs a
    :class:`~dcps.store.DurabilityService` in the store: it keeps the data
    of TRANSIENT and PERSISTENT writers of matching topics in
    ``durability_partitions`` (patterns) for late-joining readers,
    PERSISTENT data in this store's file (see README, "Durability").

    .. versionadded:: 0.4 ``durability``, ``durability_partitions``
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        sync: SyncMode = SyncMode.FULL,
        topics: Iterable[TopicSpec] = (),
        partition_count: int = DEFAULT_PARTITION_COUNT,
        share: Share | tuple[int, int] | str = (0, 1),
        fetch_threads: int = DEFAULT_FETCH_THREADS,
        key: KeyOption = FROM_ENVIRONMENT,
        admin_key: KeyOption = FROM_ENVIRONMENT,
        verify: bool = True,
        allow_client_topics: bool = True,
        metrics_port: int | None = None,
        metrics_host: str = "127.0.0.1",
        durability: Iterable[str] | None = None,
        durability_partitions: Iterable[str] = ("*",),
    ) -> None:
        if metrics_port is not None and (
            not isinstance(metrics_port, int)
            or isinstance(metrics_port, bool)
            or not 0 <= metrics_port <= 65535
        ):
            raise BadParameterError(f"metrics_port must be 0..65535 or None, got {metrics_port!r}")
        if (
            not isinstance(fetch_threads, int)
            or isinstance(fetch_threads, bool)
            or fetch_threads < 1
        ):
            raise BadParameterError(f"fetch_threads must be an int >= 1, got {fetch_threads!r}")
        self.share = Share.of(share)
        self._sealer = Sealer.from_keys(key, admin_key)
        self._secrets: OrderedDict[tuple[str, str, str], MemberSecret] = OrderedDict()
        #: Why this store stopped serving (an overlapping store), or None.
        self.failure: str | None = None
        self.default_channel_count = default_channel_count(partition_count)
        self.namespace = namespace
        self.domain_id = domain_id
        self.incarnation = uuid.uuid4().hex
        self._network = network
        #: Whether clients may create topics (ENSURE_TOPIC of an unknown topic).
        self.allow_client_topics = allow_client_topics
        self.log = ChannelLog.in_dir(data_dir, sync=sync, verify=verify)
        self.data_dir = self.log.path.parent
        self._metrics_at = (metrics_host, metrics_port)
        #: The store's Prometheus metrics (``metrics.registry``; see docs/metrics.md).
        self.metrics = StoreMetrics(
            log_path=self.log.path,
            auth_drops=self.auth_drops,
            clients=lambda: len(self._reply_writers),
            labels={
                "namespace": namespace,
                "share": str(self.share),
                "incarnation": self.incarnation,
            },
        )
        self.log.commit_observer = self.metrics.observe_commit
        try:
            for info in self.log.topics():  # anonymous subscribers do not outlive a store
                for group in self.log.groups(info.name):
                    if group.startswith(ANONYMOUS_PREFIX):
                        self.log.destroy_group(info.name, group)
            for topic in topics:
                self._ensure(
                    topic.name,
                    topic.channel_count or 0,
                    topic.retain_consumed,
                    *_identity_of(topic),
                )
            self._maps = MapTable(self.log)
            self._queues = QueueTable(self.log)
            #: The durable subscriptions (``_durables.py``).
            self.durables = DurableService(
                self.log,
                self._reply,
                self._fail,
                split=self.share.count > 1,
                sealer=self._sealer,
                incarnation=self.incarnation,
                secrets=self._keep_member_secret,
            )
        except BaseException:
            self.log.close()
            raise
        self._state = StoreState.CREATED
        self._stopping = False
        self._fetchers = FetchPool(
            self.log, fetch_threads, lambda: self._stopping, self._fetch_answered
        )
        self._thread: threading.Thread | None = None
        self._endpoint: Endpoint | None = None
        self._requests: Any = None
        self._announcer: Any = None
        self._announced: Any = None
        self._mirror_reader: Any = None
        self._assignments: Any = None
        self._waiter: Waiter | None = None
        self._reply_writers: dict[str, ReplyOutbox] = {}
        self._refusals: deque[Any] = deque()
        self._next_reply_sweep = time.monotonic() + REPLY_WRITER_IDLE
        self._batch_writers: dict[tuple[str, int], Any] = {}
        self._deferred: dict[tuple[str, int], tuple[_Call[Any], float]] = {}
        self._mirror: dict[tuple[str, str], Assignment] = {}
        self._coordinator: str | None = None  # incarnation of the coordinating store
        self._liveness: LivenessProbe | None = None  # keyed: confirms a store before yielding
        self._next_share_check = 0.0
        self._handlers = self._HANDLERS if self.share.coordinates else self._SHARE_HANDLERS
        #: Request samples refused before decoding (no answer possible), for operators.
        self.dropped_requests = 0
        # The durability service (dcps/store/_durability.py): topic-name patterns, or None.
        self._durability_topics = None if durability is None else tuple(durability)
        self._durability_partitions = tuple(durability_partitions)
        #: The running durability service, if ``durability`` was given.
        self.durability: DurabilityService | None = None

    # -- lifecycle -------------------------------------------------------------

    @property
    def state(self) -> StoreState:
        """Where the store is in its life."""
        return self._state

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._state is StoreState.CLOSED

    def start(self) -> Store:
        """Announce this store's share and start serving; returns the store.

        Raises :class:`~dcps.PreconditionNotMetError` (and closes the store)
        when a running store already serves an overlapping share. Starting a
        serving store does nothing; a closed one raises
        :class:`~dcps.AlreadyClosedError`.
        """
        if self._state is StoreState.SERVING:
            return self
        if self._state is StoreState.CLOSED:
            raise AlreadyClosedError(f"the store of {self.data_dir} is closed")
        if not self._sealer.enabled:
            _log.warning(UNAUTHENTICATED_WARNING, self.namespace)
        try:
            self._open_endpoints()
            self._check_share()
            self._serve_metrics()
        except BaseException:
            self.close()
            raise
        if self._durability_topics is not None:
            self.durability = DurabilityService(
                domain_id=self.domain_id,
                namespace=self.namespace,
                topics=self._durability_topics,
                partitions=self._durability_partitions,
                data_dir=self.data_dir,
                network=self._network,
                key=None if self._sealer.auth is None else self._sealer.auth.key,
            ).start()
        self._state = StoreState.SERVING
        self._fetchers.start()
        self._thread = threading.Thread(target=self._run, name="dcps-store", daemon=True)
        self._thread.start()
        _log.info(
            "dcps store %s serving %s (domain %d, namespace %r)",
            self.share,
            self.data_dir,
            self.domain_id,
            self.namespace,
        )
        return self

    def _serve_metrics(self) -> None:
        host, port = self._metrics_at
        if port is None:
            return
        try:
            url = self.metrics.serve(host, port)
        except OSError as exc:
            raise BadParameterError(
                f"cannot serve the store's metrics on {host}:{port}: {exc.strerror or exc}"
            ) from exc
        _log.info("dcps store %s: metrics at %s", self.share, url)

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port/metrics`` while the metrics are served, else None."""
        return self.metrics.url

    def __enter__(self) -> Store:
        return self.start()

    @property
    def authenticated(self) -> bool:
        """True when the namespace has a key (every message is authenticated)."""
        return self._sealer.enabled

    def auth_drops(self) -> dict[DropReason, int]:
        """Messages refused by authentication so far, per reason (all 0 without a key)."""
        return self._sealer.drops()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and close the log (idempotent)."""
        if self._state is StoreState.CLOSED:
            return
        self._state = StoreState.CLOSED
        self._stopping = True
        if self._waiter is not None:
            self._waiter.wake()
        if self._thread is not None:
            self._thread.join()
        self._fetchers.stop()
        if self.durability is not None:
            self.durability.close()
        if self._waiter is not None:
            self._waiter.close()
        for writer in self._batch_writers.values():
            drop_endpoint(writer)
        for entity in (
            self._requests,
            self._announcer,
            self._announced,
            self._mirror_reader,
            self._assignments,
            *self._refusals,
        ):
            if entity is not None:
                drop_endpoint(entity)
        for out in self._reply_writers.values():
            out.close()
        if self._endpoint is not None:
            self._endpoint.close()
        self.metrics.close()
        self.log.close()
        _log.info("dcps store %s stopped (%s)", self.share, self.data_dir)

    def _open_endpoints(self) -> None:
        self._endpoint = ep = Endpoint(self.domain_id, self.namespace, self._network)
        self._waiter = Waiter(ep)
        self._requests = ep.reader(
            ep.request_topic,
            request_partition(self.namespace, self.share.index, self.share.count),
            CONTROL_QOS,
        )
        self._waiter.watch(self._requests)
        self._assignments = ep.writer(
            ep.assign_topic, self.namespace, ASSIGN_QOS, seal=self._sealer.seal_assignment
        )
        self._groups = GroupCoordinator(self.log, self._assignments, self.incarnation)
        self._announced = ep.reader(ep.store_topic, self.namespace, ANNOUNCE_QOS)
        self._announcer = ep.writer(
            ep.store_topic, self.namespace, ANNOUNCE_QOS, seal=self._sealer.seal_announcement
        )
        self.announcement = StoreAnnouncement(
            incarnation=self.incarnation,
            index=self.share.index,
            count=self.share.count,
            started_ns=time.time_ns(),
            pid=os.getpid(),
            host=socket.gethostname(),
            data_dir=str(self.data_dir.resolve()),
        )
        self._announcer.write(self.announcement)
        if self._sealer.enabled:
            self._liveness = LivenessProbe(ep, self.namespace, self._sealer, self.incarnation)
        if not self.share.coordinates:
            self._mirror_reader = ep.reader(ep.assign_topic, self.namespace, ASSIGN_QOS)
            self._waiter.watch(self._mirror_reader)

    def _check_share(self) -> None:
        """Refuse to serve next to an overlapping store of the namespace.

        Listens the whole :data:`SETTLE` window, then judges every store heard
        of at once: which conflict is reported must not depend on which
        announcement came first. A single store (share ``0/1``) checks too:
        two of them on one namespace would both answer every request.
        """
        deadline = time.monotonic() + SETTLE
        while time.monotonic() < deadline:
            time.sleep(0.02)
        conflict = self._share_conflict(self._live_stores(), wait=True)
        if conflict is not None:
            raise PreconditionNotMetError(f"store not started: {conflict}")
        _log.info("dcps store: share %s of namespace %r taken", self.share, self.namespace)

    # -- the service loop ------------------------------------------------------

    def _run(self) -> None:
        assert self._waiter is not None
        while not self._stopping:
            self._waiter.wait(0.05)
            if self._stopping:
                break
            try:
                self._serve()
            except Exception:  # keep serving; a failing request already got its error reply
                _log.exception("dcps store: unexpected error in the service loop")

    def _serve(self) -> None:
        self._watch_shares()
        if self._requests is None:  # refused: an overlapping store serves this share
            return
        # The publishes of the take go first, in one transaction, ahead of other clients'
        # requests (a client's own requests keep their order: once one of its requests
        # waits, its later publishes wait too). Clients' requests have no order among
        # themselves, and a subscriber's commit or a fetch no longer splits the
        # publishers' transaction nor delays their live push (the latency path).
        publishes: list[_Call[PublishRequest]] = []
        later: list[Any] = []
        waiting: set[Any] = set()  # clients with a request in ``later``
        # each PUBLISH's payloads copied once out of Cyclone (the binding's take: three times)
        for sample in take_decoded(self._requests, Request, 1024, sealed=self._sealer.enabled):
            client = getattr(sample, "client", None)
            if getattr(sample, "op", None) != Op.PUBLISH or client in waiting:
                later.append(sample)
                waiting.add(client)
                continue
            call = self._admit(sample)
            if call is not None:
                publishes.append(call)
        for sample in later:  # in order; requests are admitted one by one (a JOIN's secret)
            call = self._admit(sample)
            if call is None:
                continue
            if isinstance(call.request, PublishRequest):
                publishes.append(call)
                continue
            if publishes:
                self._publish(publishes)
                publishes = []
            self._handle(call)
        if publishes:
            self._publish(publishes)
        for call, _ in list(self._deferred.values()):  # waiting for an assignment
            self._handle(call)
        if self.share.coordinates:
            self._groups.expire()
            serve_queues(self)
        self.durables.tick()
        self._retry_replies()
        if self.metrics.wanted:  # a scrape waits for groups and lag
            self.metrics.refresh(self._log_snapshot)

    def _log_snapshot(self) -> LogSnapshot:
        def members(topic: str, group: str) -> int:
            found = self._groups.group(topic, group) if self.share.coordinates else None
            return 0 if found is None else len(found.members)

        return take_snapshot(self.log, self.share.serves, members)

    def _fetch_answered(self, request: FetchRequest, reply: Reply) -> None:
        """Count a FETCH reply (a fetch thread)."""
        self.metrics.request(Op.FETCH, ErrorCode(reply.status) if reply.status else ErrorCode.OK)
        if not reply.status:
            count = int(reply.number)
            self.metrics.fetched(request.topic, count, max(0, len(reply.blob) - 4 * count))

    def _admit(self, sample: Any) -> _Call[Any] | None:
        """Decode and validate one request sample whole; refuse it alone if it fails."""
        if isinstance(sample, Request | _Undecodable):
            client, request_id = sample.client, sample.request_id
        else:
            return None  # an invalid sample (dispose, unregister): nothing asked
        try:
            check_client_id(client)
        except BadParameterError as exc:  # nowhere safe to answer
            self._drop(f"{exc}")
            return None
        if self._liveness is not None and client == self._liveness.client:
            return None  # this store's own ping to another store of its share
        if self._sealer.enabled and not self._authentic(sample):
            return None
        try:
            if isinstance(sample, _Undecodable):
                raise BadParameterError(sample.problem)
            return _Call(client, request_id, decode_request(sample))
        except Exception as exc:
            self.metrics.request(getattr(sample, "op", -1), error_code(exc))
            self._answer(client, request_id, error_reply(client, request_id, exc))
            return None

    def _authentic(self, sample: Request | _Undecodable) -> bool:
        """Whether a request is authentic and fresh; refusals are dropped (counted, logged).

        A sender proven to hold the namespace key whose member proof fails
        (unknown member, not the member that joined) is told so in an error reply.
        """
        if isinstance(sample, _Undecodable):
            self._drop(f"undecodable request from {sample.client!r}: {sample.problem}")
            return False
        ident = (sample.topic, sample.group, sample.member)
        if sample.op in DURABLE_MEMBER_OPS:  # a durable subscriber's secret (``_durables.py``)
            ident = secret_ident(*ident)
        elif sample.op in QUEUE_MEMBER_OPS:  # a queue consumer's secret (``_queues.py``)
            ident = queue_secret_ident(sample.topic, sample.member)
        secret = self._secrets.get(ident)
        live = self._subscriber_live(sample)
        if secret is None and sample.op == Op.JOIN and not self.share.coordinates:
            # a share store learns liveness from the coordinator's assignment: after this
            # store restarted, live members join it again with no secret here to prove
            live = False
        # A live subscriber whose secret this store forgot (MAX_MEMBER_SECRETS, least
        # recent first: a key holder can push it out) is refused, not free to take over.
        try:
            self._sealer.open_request(sample, self.incarnation, secret, proof_required=live)
        except AuthenticationError as exc:
            self._sealer.refused(exc)
            if exc.reason in (DropReason.UNKNOWN_MEMBER, DropReason.BAD_MEMBER_PROOF):
                refusal = PreconditionNotMetError(
                    f"{sample.member!r} of group {sample.group!r} of topic {sample.topic!r}: "
                    f"{exc.reason.value} (not a member this store knows, or not the member "
                    "that joined: join first)"
                )
                self._answer(
                    sample.client,
                    sample.request_id,
                    error_reply(sample.client, sample.request_id, refusal),
                )
            return False
        return True

    def _subscriber_live(self, sample: Request) -> bool:
        """Whether the member, durable subscriber or queue consumer a JOIN or subscribe
        names is live (then only its own secret's proof lets it in again)."""
        if sample.op == Op.JOIN:
            return self._member_live(sample.topic, sample.group, sample.member)
        if sample.op == Op.DURABLE_SUBSCRIBE:
            return self.durables.live(sample.group, sample.member)
        if sample.op == Op.QUEUE_SUBSCRIBE:
            return self._queues.live(sample.topic, sample.member)
        return False

    def _member_live(self, topic: str, group: str, member: str) -> bool:
        """Whether ``member`` belongs to ``group`` now (per the coordinator's assignment)."""
        if self.share.coordinates:
            return self._groups.has_member(topic, group, member)
        a = self._mirror.get((topic, group))
        return a is not None and member in a.members

    def _exchange(self, r: JoinRequest) -> tuple[bytes, MemberSecret | None]:
        """The store's half of a JOIN's key exchange (validated before the JOIN takes effect)."""
        if not self._sealer.enabled:
            return b"", None
        if not r.offer:
            raise BadParameterError(
                f"a JOIN of {r.member!r} to group {r.group!r} of topic {r.topic!r} carries no "
                "key-exchange offer: the store's namespace has a key"
            )
        return self._sealer.answer_member_offer(
            r.offer, group=r.group, member=r.member, incarnation=self.incarnation
        )

    def _keep_secret(self, r: JoinRequest, secret: MemberSecret | None) -> None:
        if secret is not None:
            self._keep_member_secret((r.topic, r.group, r.member), secret)

    def _keep_member_secret(self, ident: tuple[str, str, str], secret: MemberSecret | None) -> None:
        """Keep the secret of a member (or durable subscriber); None forgets it."""
        self._secrets.pop(ident, None)
        if secret is None:
            return
        self._secrets[ident] = secret
        while len(self._secrets) > MAX_MEMBER_SECRETS:
            self._secrets.popitem(last=False)

    def _forget_secrets(self, topic: str, group: str, member: str | None = None) -> None:
        for ident in [k for k in self._secrets if k[:2] == (topic, group)]:
            if member is None or ident[2] == member:
                del self._secrets[ident]

    def _drop(self, why: str) -> None:
        self.dropped_requests += 1
        if self.dropped_requests & (self.dropped_requests - 1) == 0:  # 1, 2, 4, 8...: rate-limited
            _log.warning("dcps store: request dropped (%d so far): %s", self.dropped_requests, why)

    def _outbox(self, client: str, now: float) -> ReplyOutbox | None:
        """The client's reply outbox, created with its writer on first use (service thread).

        None when MAX_CLIENTS clients are being answered already: the client
        is then told so once, through a short-lived writer.
        """
        if now >= self._next_reply_sweep:  # before the lookup: never hand out a deleted one
            self._sweep_reply_writers(now)
        out = self._reply_writers.get(client)
        if out is None:
            if len(self._reply_writers) >= MAX_CLIENTS:
                self._sweep_reply_writers(now, idle_only=False)
            if len(self._reply_writers) >= MAX_CLIENTS:
                _log.warning(
                    "dcps store: client %s refused: %d clients already", client, MAX_CLIENTS
                )
                return None
            out = self._reply_writers[client] = ReplyOutbox(self._reply_writer(client), now)
            _log.info("dcps store: client %s connected", client)
        return out

    def _reply_writer(self, client: str) -> Any:
        assert self._endpoint is not None
        partition = reply_partition(self.namespace, client)
        return self._endpoint.writer(
            self._endpoint.reply_topic, partition, REPLY_QOS, seal=self._seal_reply
        )

    def _seal_reply(self, reply: Reply) -> bytes | None:
        return self._sealer.seal_reply(reply, self.incarnation)

    def _seal_live(self, batch: LiveBatch) -> bytes | None:
        return self._sealer.seal_live(batch, self.incarnation)

    def _refuse_client(self, client: str, request_id: int) -> None:
        """Tell a client over MAX_CLIENTS that it is refused (a bounded set of writers)."""
        self._drop(f"client {client!r} refused: {MAX_CLIENTS} clients (MAX_CLIENTS) are served")
        writer = self._reply_writer(client)
        exc = OutOfResourcesError(
            f"the store answers at most {MAX_CLIENTS} clients at once (MAX_CLIENTS); "
            "try again later"
        )
        with contextlib.suppress(Exception):  # best effort: the client times out otherwise
            writer.write(error_reply(client, request_id, exc))
        self._refusals.append(writer)
        while len(self._refusals) > _REFUSAL_WRITERS:
            drop_endpoint(self._refusals.popleft())

    def _answer(self, client: str, request_id: int, reply: Reply) -> None:
        now = time.monotonic()
        out = self._outbox(client, now)
        if out is None:
            self._refuse_client(client, request_id)
            return
        out.put(out.reserve(now), reply)

    def _reply(self, call: _Call[Any], answer: Any) -> None:
        self._answer(call.client, call.request_id, answer.to_wire(call.client, call.request_id))

    def _fail(self, call: _Call[Any], exc: BaseException) -> None:
        self._answer(call.client, call.request_id, error_reply(call.client, call.request_id, exc))

    def _retry_replies(self) -> None:
        """Write the replies that found their client's writer full; drop those nobody awaits."""
        for out in self._reply_writers.values():
            out.retry()

    def _sweep_reply_writers(self, now: float, *, idle_only: bool = True) -> None:
        """Delete the reply writers of clients that are gone (no reader, idle).

        ``idle_only=False`` (at MAX_CLIENTS) deletes every writer whose
        client's reader is gone, however recently it was used.
        """
        self._next_reply_sweep = now + REPLY_WRITER_IDLE
        for client, out in list(self._reply_writers.items()):
            if (out.idle(now) or not idle_only) and not matched_readers(out.writer):
                out.close()
                del self._reply_writers[client]
                _log.info("dcps store: client %s disconnected", client)

    def _handle(self, call: _Call[Any]) -> None:
        handler = self._handlers[call.request.op]
        try:
            handler(self, call)
        except _DeferredError:
            pass
        except Exception as exc:  # every failure becomes an error reply
            self.metrics.request(call.request.op, error_code(exc))
            self._fail(call, exc)
        else:
            if call.request.op != Op.FETCH:  # counted when a fetch thread answers it
                self.metrics.request(call.request.op)

    # -- topics and publishing -------------------------------------------------

    def _ensure(
        self, name: str, count: int, retain: bool | None, type_name: str, identity: str = ""
    ) -> Any:
        existed = name in {t.name for t in self.log.topics()}
        info = self.log.ensure_topic(
            name, count or self.default_channel_count, bool(retain), type_name, identity
        )
        if not existed:
            _log.info(
                "dcps store: topic %r created (%d channels, type %s)",
                name,
                info.channel_count,
                type_name or "not named",
            )
        if existed:
            if count and count != info.channel_count:
                raise InconsistentPolicyError(
                    f"topic {name!r} has {info.channel_count} channels in the store, not {count}"
                )
            if retain is not None and retain != info.retain_consumed:
                raise InconsistentPolicyError(
                    f"topic {name!r} has retain_consumed={info.retain_consumed} in the store"
                )
        return info

    def _on_ensure(self, call: _Call[EnsureTopicRequest]) -> None:
        r = call.request
        if not self.allow_client_topics and r.topic not in {t.name for t in self.log.topics()}:
            raise IllegalOperationError(
                f"the store of namespace {self.namespace!r} has no topic {r.topic!r} and does "
                "not let clients create topics (allow_client_topics=False): configure it on "
                "the store"
            )
        info = self._ensure(
            r.topic, r.channel_count, r.retain_consumed, r.type_name, r.type_identity
        )
        # Publishers and subscribers ensure their topic when they connect: the live
        # writers made now are discovered by the subscribers' readers before the first
        # publish. Made at the first push instead, a channel's first elements went out
        # before any reader matched and reached subscribers only by fetching, 30-60 ms
        # later (the p99.9 of 47 ms at 1,000 elements/s of 64 B).
        for channel in range(min(info.channel_count, _EAGER_LIVE_WRITERS)):
            if self.share.serves(channel):
                self._live_writer(r.topic, channel)
        self._reply(call, TopicConfig(info.channel_count, bool(info.retain_consumed)))

    def _publish(self, calls: list[_Call[PublishRequest]]) -> None:
        for call in calls:
            self.metrics.published(
                call.request.topic, len(call.request.sizes), len(call.request.blob)
            )
        for call in calls:  # idempotent (keyed) publishes
            if call.request.key:
                self._publish_keyed(call)
        good: list[_Call[PublishRequest]] = []
        for call in calls:
            r = call.request
            if r.key:
                continue
            try:
                self.log.channel_state(r.topic, r.channel)
                self._foreign(r.topic, (r.channel,))
                self.durables.check_publish(r.topic)  # a temporary topic must be live
                good.append(call)
            except Exception as exc:
                self.metrics.request(Op.PUBLISH, error_code(exc))
                self._fail(call, exc)
        if not good:
            return
        try:
            results = self.log.append_packed(
                (r.topic, r.channel, PackedPayloads(r.sizes, r.blob))
                for r in (c.request for c in good)
            )
        except Exception as exc:
            for call in good:
                self.metrics.request(Op.PUBLISH, error_code(exc))
                self._fail(call, exc)
            return
        # the live pushes first: the subscribers' latency is the one measured (the
        # publisher's confirmation only frees a slot of its in-flight window)
        for call, (first, count, stamp) in zip(good, results, strict=True):
            if count:
                try:
                    self._push(call.request, (first, stamp))
                except Exception:  # stored all the same: subscribers fetch it; still confirm
                    _log.exception("dcps store: live push to %r failed", call.request.topic)
        discards = {t: self.log.discards(t) for t in {c.request.topic for c in good}}
        for call, (first, count, stamp) in zip(good, results, strict=True):
            if not count:
                first, stamp = 0, 0
            self.metrics.request(Op.PUBLISH)
            self.metrics.stored(call.request.topic, count, len(call.request.blob))
            discarded = discards[call.request.topic]
            self._reply(call, Published(first, count, stamp, discarded=discarded))
        for call, (first, count, stamp) in zip(good, results, strict=True):
            if count:
                self._tell_durables(call.request, first, stamp)
        for topic in {c.request.topic for c in good}:
            self.log.trim_unconsumed(topic)

    def _publish_keyed(self, call: _Call[PublishRequest]) -> None:
        """A publish carrying an idempotence key: a repeated key is not appended again."""
        r = call.request
        try:
            self._foreign(r.topic, (r.channel,))
            self.durables.check_publish(r.topic)  # a temporary topic must be live
            placed, duplicate = self.log.append_keyed(
                r.topic, r.channel, PackedPayloads(r.sizes, r.blob), r.key
            )
        except Exception as exc:
            self.metrics.request(Op.PUBLISH, error_code(exc))
            self._fail(call, exc)
            return
        first, stamp = placed[0] if placed else (0, 0)
        self.metrics.request(Op.PUBLISH)
        if not duplicate:
            self.metrics.stored(r.topic, len(placed), len(r.blob))
        discarded = self.log.discards(r.topic)
        self._reply(call, Published(first, len(placed), stamp, duplicate, discarded))
        if placed and not duplicate:
            self._push(r, placed[0])
            self._tell_durables(r, *placed[0])
            self.log.trim_unconsumed(r.topic)

    def _tell_durables(self, r: PublishRequest, first: int, stamp: int) -> None:
        """Let the durables see a batch (last-value durables keep its last element)."""
        if self.durables.wants(r.topic):
            self.durables.published(r.topic, r.channel, first, stamp, split_blob(r.blob, r.sizes))

    def _live_writer(self, topic: str, channel: int) -> Any:
        """The writer of ``channel``'s live batches (made on first use)."""
        writer = self._batch_writers.get((topic, channel))
        if writer is None:
            ep = self._endpoint
            assert ep is not None
            writer = ep.writer(
                ep.batch_topic,
                batch_partition(self.namespace, topic, channel),
                BATCH_WRITER_QOS,
                seal=self._seal_live,
            )
            self._batch_writers[(topic, channel)] = writer
        return writer

    def _push(self, r: PublishRequest, first: tuple[int, int]) -> None:
        writer = self._live_writer(r.topic, r.channel)
        self.metrics.pushed(r.topic, len(r.sizes), len(r.blob))
        batch = LiveBatch(
            topic=r.topic,
            channel=r.channel,
            first=first[0],
            timestamp=first[1],
            sizes=r.sizes,
            blob=r.blob,
        )
        # a large batch goes out gathered: its payloads as they came in the request
        write_message(writer, batch, whole=self._sealer.enabled)

    def _on_fetch(self, call: _Call[FetchRequest]) -> None:
        """Queue a FETCH for the fetch pool (``_fetchers.py``).

        The reply's place among the client's replies is taken here, so it
        leaves in request order; a fetch thread reads the log in a snapshot
        taken after every earlier request was handled (a FETCH sees what a
        PUBLISH before it appended) and writes the reply.
        """
        r = call.request
        self._foreign(r.topic, (r.channel,))
        now = time.monotonic()
        out = self._outbox(call.client, now)
        if out is None:
            self._refuse_client(call.client, call.request_id)
            return
        self._fetchers.submit(call.client, call.request_id, r, out, out.reserve(now))

    def _on_state(self, call: _Call[StateRequest]) -> None:
        r = call.request
        info = self.log.topic(r.topic)
        self._foreign(r.topic, r.channels)
        channels = list(r.channels) or [
            c for c in range(info.channel_count) if self.share.serves(c)
        ]
        states = [self.log.channel_state(r.topic, c) for c in channels]
        committed: list[int] = []
        explicit: list[bool] = []
        if r.group and self.log.has_group(r.topic, r.group):
            for c in channels:
                off, exp = self.log.committed(r.topic, r.group, c)
                committed.append(off)
                explicit.append(bool(exp))
        self._reply(
            call,
            ChannelStates(
                info.channel_count,
                tuple(channels),
                tuple(s.head for s in states),
                tuple(s.tail for s in states),
                tuple(committed),
                tuple(explicit),
            ),
        )

    def _on_ping(self, call: _Call[PingRequest]) -> None:
        self._reply(call, Pong(self.incarnation, self.share.index, self.share.count))

    # -- groups (the coordinating store: _groups.py) ---------------------------------

    def _on_join(self, call: _Call[JoinRequest]) -> None:
        public, secret = self._exchange(call.request)
        membership = self._groups.join(call.request)
        self._keep_secret(call.request, secret)
        self._reply(call, attrs.evolve(membership, exchange=public))

    def _on_heartbeat(self, call: _Call[HeartbeatRequest]) -> None:
        r = call.request
        self._reply(call, self._groups.heartbeat(r.topic, r.group, r.member))

    def _on_leave(self, call: _Call[LeaveRequest]) -> None:
        r = call.request
        self._groups.leave(r.topic, r.group, r.member)
        self._forget_secrets(r.topic, r.group, r.member)
        self._answer(call.client, call.request_id, ok_reply(call.client, call.request_id))

    def _on_destroy_group(self, call: _Call[DestroyGroupRequest]) -> None:
        r = call.request
        self._forget_secrets(r.topic, r.group)
        self._reply(call, GroupDestroyed(self._groups.destroy(r.topic, r.group)))

    def _on_commit(self, call: _Call[CommitRequest]) -> None:
        r = call.request
        self._foreign(r.topic, r.channels)
        if r.incarnation and r.incarnation != self.incarnation:
            self._groups.readmit(r)
        if r.allow_unowned:
            unowned = self._commit_anyway(r)
        else:
            group = self._groups.member_of(r.topic, r.group, r.member)
            unowned = set(self._groups.unowned(group, r.member, r.channels))
        self._commit_and_reply(call, unowned)

    def _commit_and_reply(self, call: _Call[CommitRequest], unowned: set[int]) -> None:
        """Commit the request's positions except on ``unowned`` channels; answer the statuses."""
        r = call.request
        pairs = list(zip(r.channels, r.offsets, strict=True))
        # the owned channels' commits in one transaction
        done = self.log.commit_many(
            r.topic, r.group, [(c, o) for c, o in pairs if c not in unowned]
        )
        statuses: dict[int, CommitStatus] = {}
        for channel, _ in pairs:  # in the request's order
            statuses[channel] = CommitStatus.UNOWNED if channel in unowned else done[channel]
        self._reply(call, Commits(statuses))

    def _commit_anyway(self, r: CommitRequest) -> set[int]:
        """Check a commit that may name unowned channels; return those not to commit (none).

        The member may have been expelled (timed out) or may never have been
        known to this store incarnation: the group must exist, and the
        channels must too.
        """
        if not self.log.has_group(r.topic, r.group):
            raise PreconditionNotMetError(f"group {r.group!r} of topic {r.topic!r} does not exist")
        if self.share.coordinates:
            self._groups.touch(r.topic, r.group, r.member)
        check_channels_exist(self.log, r.topic, r.channels)
        return set()

    def _on_seek(self, call: _Call[SeekRequest]) -> None:
        r = call.request
        self._foreign(r.topic, r.channels)
        group = self._groups.member_of(r.topic, r.group, r.member)
        unowned = self._groups.unowned(group, r.member, r.channels)
        if unowned:
            raise PreconditionNotMetError(
                f"cannot seek channels {unowned} of topic {r.topic!r}: "
                f"member {r.member!r} of group {r.group!r} does not own them"
            )
        self._seek_channels(call)

    def _seek_channels(self, call: _Call[SeekRequest]) -> None:
        r = call.request
        targets: dict[int, int] = {}
        for channel, target in zip(r.channels, r.targets, strict=True):
            kwargs: dict[str, Any] = {}
            if r.mode is SeekMode.POSITION:
                kwargs["offset"] = target
            elif r.mode is SeekMode.TIMESTAMP:
                kwargs["timestamp_ns"] = target
            else:
                kwargs["to"] = "head" if r.mode is SeekMode.HEAD else "tail"
            targets[channel] = self.log.seek(r.topic, r.group, channel, **kwargs)
        self._reply(call, Seeked(targets))

    # -- sharing the channels with other stores (see _shares.py) -------------------

    def _watch_shares(self) -> None:
        """Stop serving if an older store overlaps; follow the coordinator's assignments."""
        now = time.monotonic()
        if now >= self._next_share_check and self._requests is not None:
            self._next_share_check = now + 0.25
            if self._liveness is not None:
                self._liveness.drain()  # its partition is public: never let replies pile up
            others = self._live_stores()
            conflict = self._share_conflict(others)
            if conflict is not None:
                self._refuse(conflict)
                return
            coordinators = [a for a in others if a.index == 0 and a.count == self.share.count]
            if coordinators:
                self._coordinator = max(
                    coordinators, key=lambda a: (a.started_ns, a.incarnation)
                ).incarnation
        if self._mirror_reader is not None:
            for sample in self._mirror_reader.take(N=1024):
                if isinstance(sample, Assignment) and self._sealer.accept_assignment(sample):
                    self._follow(sample)

    def _share_conflict(self, others: list[StoreAnnouncement], *, wait: bool = False) -> str | None:
        """Why this store must yield to one of ``others``, once that store is confirmed alive.

        A keyed store asks the store it would yield to for a fresh, sealed
        answer first (``_liveness.py``): a replayed announcement of a dead
        store is ignored (counted, logged). ``wait``: block until confirmed or
        refuted; otherwise keep serving while the question is open.
        """
        while True:
            found = share_conflict_with(self.announcement, others)
            if found is None or self._liveness is None:
                return None if found is None else found[1]
            other, why = found
            alive = self._liveness.wait(other) if wait else self._liveness.verdict(other)
            if alive is None:
                return None
            if alive:
                return why
            others = [a for a in others if a.incarnation != other.incarnation]

    def _live_stores(self) -> list[StoreAnnouncement]:
        """The live stores of the namespace whose announcements verify (all without a key)."""
        return self._sealer.verified_announcements(live_announcements(self._announced))

    def _refuse(self, why: str) -> None:
        assert self._waiter is not None
        self.failure = f"store stopped: {why}"
        _log.error("dcps store %s: %s", self.share, self.failure)
        self._waiter.unwatch(self._requests)
        drop_endpoint(self._requests)
        self._requests = None
        drop_endpoint(self._announcer)
        self._announcer = None
        self._stopping = True

    def _follow(self, assignment: Assignment) -> None:
        """Mirror one of the coordinator's assignments; keep the group's log rows in step."""
        topic, group = assignment.topic, assignment.group
        self._mirror[(topic, group)] = assignment
        if topic not in {t.name for t in self.log.topics()}:
            return
        if assignment.members:
            self.log.create_group(topic, group)
        elif group.startswith(ANONYMOUS_PREFIX):  # its last subscriber left or died
            self.log.destroy_group(topic, group)

    def _foreign(self, topic: str, channels: Iterable[int]) -> None:
        """Refuse channels another store's share serves."""
        if self.share.count == 1:
            return
        foreign = [c for c in channels if not self.share.serves(c)]
        if foreign:
            raise BadParameterError(
                f"channels {foreign} of topic {topic!r} are served by other stores: this "
                f"store's share {self.share} serves channel c iff "
                f"c % {self.share.count} == {self.share.index}"
            )

    def _not_coordinator(self, call: _Call[Any]) -> None:
        raise IllegalOperationError(
            f"store {self.share} does not coordinate groups: {call.request.op.name} goes to the "
            f"store of share 0/{self.share.count}"
        )

    def _on_share_join(self, call: _Call[JoinRequest]) -> None:
        r = call.request
        self.log.topic(r.topic)
        public, secret = self._exchange(r)
        self.log.create_group(r.topic, r.group)
        self._keep_secret(r, secret)
        reply = ok_reply(call.client, call.request_id)
        reply.blob = public
        self._answer(call.client, call.request_id, reply)

    def _on_share_destroy_group(self, call: _Call[DestroyGroupRequest]) -> None:
        r = call.request
        self._forget_secrets(r.topic, r.group)
        self._reply(call, GroupDestroyed(self.log.destroy_group(r.topic, r.group)))

    def _owned_by_mirror(self, r: CommitRequest | SeekRequest) -> list[int] | None:
        """The request's channels its member does not own (None: not a member) per the mirror."""
        check_channels_exist(self.log, r.topic, r.channels)
        self._foreign(r.topic, r.channels)
        a = self._mirror.get((r.topic, r.group))
        if a is None or r.member not in a.members:
            return None
        if self._coordinator is not None and a.incarnation != self._coordinator:
            return None  # an assignment of a coordinator that has restarted since
        me = a.members.index(r.member)
        return [c for c in r.channels if c >= len(a.owners) or a.owners[c] != me]

    def _wait_for_ownership(self, call: _Call[CommitRequest | SeekRequest]) -> list[int]:
        """``_owned_by_mirror``, holding the request back while its ownership may still come.

        Returns the unowned channels once final, or raises ``_DeferredError``.
        """
        r = call.request
        key = (call.client, call.request_id)
        _, deadline = self._deferred.pop(key, (call, time.monotonic() + OWNERSHIP_GRACE))
        unowned = self._owned_by_mirror(r)
        if unowned == []:
            return unowned
        if time.monotonic() < deadline:
            self._deferred[key] = (call, deadline)
            raise _DeferredError
        if unowned is None:
            raise PreconditionNotMetError(
                f"{r.member!r} is not a member of group {r.group!r} of topic "
                f"{r.topic!r} (left, timed out, or the store restarted)"
            )
        return unowned

    def _on_share_commit(self, call: _Call[CommitRequest]) -> None:
        r = call.request
        if r.allow_unowned:
            self._foreign(r.topic, r.channels)
            unowned = self._commit_anyway(r)
        else:
            unowned = set(self._wait_for_ownership(call))
        self._commit_and_reply(call, unowned)

    def _on_share_seek(self, call: _Call[SeekRequest]) -> None:
        r = call.request
        unowned = self._wait_for_ownership(call)
        if unowned:
            raise PreconditionNotMetError(
                f"cannot seek channels {unowned} of topic {r.topic!r}: "
                f"member {r.member!r} of group {r.group!r} does not own them"
            )
        self._seek_channels(call)

    _HANDLERS: ClassVar[dict[int, Callable[[Store, Any], None]]] = {
        PingRequest.op: _on_ping,
        EnsureTopicRequest.op: _on_ensure,
        FetchRequest.op: _on_fetch,
        StateRequest.op: _on_state,
        JoinRequest.op: _on_join,
        HeartbeatRequest.op: _on_heartbeat,
        LeaveRequest.op: _on_leave,
        DestroyGroupRequest.op: _on_destroy_group,
        CommitRequest.op: _on_commit,
        SeekRequest.op: _on_seek,
        **MAP_HANDLERS,
        **QUEUE_HANDLERS,
        **DURABLE_HANDLERS,
        **ADMIN_HANDLERS,
        **ADMIN_OBJECT_HANDLERS,
        Op.STAGE: on_stage,
        Op.COMMIT_STAGED: on_commit_staged,
        Op.ABORT_STAGED: on_abort_staged,
    }
    # A store that does not coordinate groups (share index > 0).
    _SHARE_HANDLERS: ClassVar[dict[int, Callable[[Store, Any], None]]] = {
        **_HANDLERS,
        JoinRequest.op: _on_share_join,
        HeartbeatRequest.op: _not_coordinator,
        LeaveRequest.op: _not_coordinator,
        DestroyGroupRequest.op: _on_share_destroy_group,
        CommitRequest.op: _on_share_commit,
        SeekRequest.op: _on_share_seek,
        **SHARE_ADMIN_HANDLERS,
    }


def run_store(
    data_dir: str | os.PathLike[str],
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    sync: SyncMode = SyncMode.FULL,
    partition_count: int = DEFAULT_PARTITION_COUNT,
    stop: threading.Event | None = None,
    on_ready: Callable[[Store], None] | None = None,
    share: Share | tuple[int, int] | str = (0, 1),
    fetch_threads: int = DEFAULT_FETCH_THREADS,
    key: KeyOption = FROM_ENVIRONMENT,
    admin_key: KeyOption = FROM_ENVIRONMENT,
    verify: bool = True,
    allow_client_topics: bool = True,
    metrics_port: int | None = None,
    metrics_host: str = "127.0.0.1",
    durability: Iterable[str] | None = None,
    durability_partitions: Iterable[str] = ("*",),
) -> None:
    """Run a store until ``stop`` is set, or SIGINT/SIGTERM when ``stop`` is None.

    Prints ``dcps store ready`` to stdout once serving (``on_ready`` is called
    too): after the share check, so a store that must not serve never says
    it is ready. ``verify`` and ``allow_client_topics`` are :class:`Store`'s.
    ``share`` is the store's share of the channels (see :class:`Store`); if an
    overlapping store turns up, this one stops with
    :class:`~dcps.PreconditionNotMetError`. ``key`` and ``admin_key`` are as
    for :class:`Store`, and so are ``metrics_port`` and ``metrics_host``. The
    signal handlers it installs are restored when it returns.
    """
    event = stop or threading.Event()
    replaced: dict[signal.Signals, Any] = {}
    if stop is None and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            replaced[sig] = signal.signal(sig, lambda *_: event.set())
    try:
        with Store(
            data_dir,
            domain_id=domain_id,
            namespace=namespace,
            sync=sync,
            partition_count=partition_count,
            share=share,
            fetch_threads=fetch_threads,
            key=key,
            admin_key=admin_key,
            verify=verify,
            allow_client_topics=allow_client_topics,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            durability=durability,
            durability_partitions=durability_partitions,
        ) as store:
            if on_ready is not None:
                on_ready(store)
            metrics = f" metrics={store.metrics_url}" if store.metrics_url else ""
            print(
                f"dcps store ready: {store.data_dir} domain={domain_id} namespace={namespace} "
                f"share={store.share}{metrics}",
                flush=True,
                file=sys.stdout,
            )
            while not event.wait(0.2):
                if store.failure is not None:
                    raise PreconditionNotMetError(store.failure)
    finally:
        for sig, previous in replaced.items():
            signal.signal(sig, previous)
