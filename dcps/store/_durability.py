"""The durability service: keeps TRANSIENT and PERSISTENT data for late-joining readers.

Cyclone DDS keeps history only in live TRANSIENT_LOCAL (and stronger)
writers. This service, run by the store (``Store(..., durability=...)``,
``dcps store --durability PATTERN``), does what OpenSplice's durability
service does:

- **Discovery.** It reads Cyclone's builtin ``DCPSPublication`` topic; every
  writer announcing TRANSIENT or PERSISTENT durability on a topic whose name
  matches one of ``topics`` (``fnmatch`` patterns, ``"*"`` for all) in a
  partition matching ``partitions`` is served.
- **Reading.** The writer's type comes from XTypes type lookup (the writer's
  announced type identifier), so writers the store knows nothing about,
  such as C programs, are served. One TRANSIENT reader per topic and
  partition takes the serialised samples (their bytes are kept as written),
  with the writer's GUID, the source timestamp and the instance's key.
- **Keeping.** :class:`~dcps.store._durability_history.HistoryStore` applies
  the topic's DurabilityService QoS; PERSISTENT samples also go to the
  store's SQLite file.
- **Serving.** Requests (``Op.HISTORY_FETCH``) come on the request topic in
  :func:`~dcps.wire._durability.durability_partition`; every service of the
  namespace answers, each with its own pages.
- **Aligning.** On start a service asks the others for everything they keep
  and keeps it too, so one that started late or restarted catches up.
"""

from __future__ import annotations

import fnmatch
import logging
import sqlite3
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication
from cyclonedds.core import InstanceState, Policy, Qos, SampleState, ViewState
from cyclonedds.dynamic import get_types_for_typeid
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

import qos as q
from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import STATUSINFO_DISPOSE, instance_key, peek_infos, take_cdr
from dcps._gc import paused_gc
from dcps._history import SERVICE_READER_NAME
from dcps.store._durability_history import Arrival, HistoryStore, Limits
from dcps.store._log import ChannelLog, SyncMode
from dcps.wire._auth import AuthenticationError, DropReason
from dcps.wire._durability import (
    MAX_HISTORY_PAGE,
    MAX_HISTORY_PAGE_BYTES,
    HistoryFetchRequest,
    HistoryPage,
    durability_partition,
    matched_services,
    service_request_qos,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._names import ANY_STATE, REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from dcps.wire._replies import error_reply
from dcps.wire._requests import decode_request
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption, Sealer
from dcps.wire._transport import Endpoint, Waiter, drop_endpoint
from idl._errors import BadParameterError, DcpsError

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["DurabilityService"]

_log = logging.getLogger("dcps.store.durability")

_KINDS = (Policy.Durability.Transient, Policy.Durability.Persistent)
#: How long the service waits for a writer's type over XTypes type lookup.
TYPE_LOOKUP_TIMEOUT_NS = 5_000_000_000
#: How long a starting service listens for other services' history.
ALIGN_WINDOW = 1.0
_TAKE = 1024
#: Samples of instances the service's reader has not taken from yet (or that came back).
_NEW_INSTANCES = int(SampleState.Any | ViewState.New | InstanceState.Any)
_DISPOSED = int(InstanceState.NotAliveDisposed)


def _reader_qos(partition: str) -> tuple[Qos, Qos]:
    sub = Qos(Policy.Partition([partition]))
    reader = Qos(
        Policy.Durability.Transient,
        Policy.Reliability.Reliable(1_000_000_000),
        Policy.History.KeepAll,
        Policy.EntityName(SERVICE_READER_NAME),  # how dcps writers recognise the service
    )
    return sub, reader


class _Served:
    """One served topic in one partition: its reader and what it knows of the writers."""

    def __init__(self, reader: DataReader[Any], topic: str, partition: str) -> None:
        self.reader = reader
        self.ref = entity_ref(reader)
        self.topic = topic
        self.partition = partition
        self.guids: dict[int, bytes] = {}
        self.keys: dict[int, bytes] = {}  # Cyclone instance handle -> serialised key

    def key(self, handle: int) -> bytes:
        found = self.keys.get(handle)
        if found is None:
            found = instance_key(self.ref, handle)
            if found is None:
                # the instance is gone from Cyclone (its writer left and everything of it
                # was taken): one of its own all the same, never merged with others
                _log.warning("durability: key of an instance of %r not found", self.topic)
                found = b"handle:" + handle.to_bytes(8, "big")
            if len(self.keys) > 100_000:
                self.keys.clear()
            self.keys[handle] = found
        return found

    def learn_keys(self) -> None:
        """Look up the keys of new instances before their samples are taken: Cyclone
        forgets an instance whose writers left once everything of it was taken, and
        its key with it. Instances seen before are not NEW: usually nothing to peek."""
        for row in peek_infos(self.ref, _NEW_INSTANCES, _TAKE):
            self.key(row[5])

    def guid(self, handle: int) -> bytes:
        found = self.guids.get(handle)
        if found is None:
            data = self.reader.get_matched_publication_data(handle)
            found = data.key.bytes if data is not None else handle.to_bytes(16, "big")
            self.guids[handle] = found
        return found


class DurabilityService:
    """Keeps the history of TRANSIENT/PERSISTENT topics and serves it to late joiners.

    ``topics``: topic-name patterns (``fnmatch``; ``("*",)`` takes every topic
    a writer announces with TRANSIENT or PERSISTENT durability);
    ``partitions``: partition patterns (``("*",)`` every partition, ``""``
    the default one). ``data_dir`` holds the store file where PERSISTENT
    data is kept (``channels.db``; the file must be a dcps store file of
    format 4 or later, which :class:`~dcps.store.Store` creates); None keeps
    everything in memory (PERSISTENT then behaves as TRANSIENT). ``key`` is
    the namespace key (a :class:`~dcps.wire._auth_keys.StoreKey`, a key file,
    None, or by default ``DCPS_STORE_KEY_FILE``): with one, a request is
    answered only when sealed for this service by a key holder, and every
    page is sealed, so no participant without the key reads or forges history.
    """

    def __init__(
        self,
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        topics: Iterable[str] = ("*",),
        partitions: Iterable[str] = ("*",),
        data_dir: str | Path | None = None,
        network: NetworkConfig | None = None,
        align: bool = True,
        key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        self.topics = tuple(topics)
        self.partitions = tuple(partitions)
        if not self.topics:
            raise BadParameterError("a durability service needs at least one topic pattern")
        for pattern in (*self.topics, *self.partitions):
            if not isinstance(pattern, str):
                raise BadParameterError(f"durability patterns are strings, got {pattern!r}")
        self.namespace = namespace
        self.domain_id = domain_id
        self.incarnation = uuid.uuid4().hex
        self._network = network
        self._align = align
        self._sealer = Sealer.from_keys(key, None)
        self._db: sqlite3.Connection | None = None
        if data_dir is not None:
            # ChannelLog creates (or migrates) the store file: the service's tables
            # are part of the store format (dcps/store/_log_format.py)
            ChannelLog.in_dir(data_dir, sync=SyncMode.NORMAL, verify=False).close()
            path = Path(data_dir) / "channels.db"
            self._db = sqlite3.connect(path, check_same_thread=False)
            self._db.execute("PRAGMA busy_timeout = 10000")
        self.history = HistoryStore(self._db)
        self._served: dict[tuple[str, str], _Served] = {}
        self._types: dict[tuple[str, str], Any] = {}
        self._by_type_id: dict[bytes, Any] = {}  # serialised XTypes identifier -> type
        self._topic_entities: dict[str, Any] = {}
        self._refused: set[tuple[str, str]] = set()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._endpoint: Endpoint | None = None
        self._reply_writers: dict[str, Any] = {}
        self._client_id = f"durability{self.incarnation[:16]}"
        self._aligning: dict[str, int] = {}  # other service -> cursor still to fetch
        # other service -> request id of the alignment request awaiting its answer: replies
        # are TRANSIENT_LOCAL, so a service matched again replays its earlier pages to us
        self._asked: dict[str, int] = {}
        self._next_rid = 0
        self._align_until = 0.0
        self._peers: set[str] = set()  # other services matched now
        self._peer_cursors: dict[str, int] = {}  # other service -> cursor of its last page
        self._matches = -1  # the align writer's total match count when last checked
        self._ready = threading.Event()
        self._next_cleanup = 0
        #: samples received from other services while aligning
        self.aligned = 0

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> DurabilityService:
        """Start discovering, keeping and serving (a daemon thread); returns the service."""
        ep = self._endpoint = Endpoint(self.domain_id, self.namespace, self._network)
        dp = ep.participant
        self._waiter = Waiter(ep)
        self._publications = ep.own(BuiltinDataReader(dp, BuiltinTopicDcpsPublication))
        self._waiter.watch(self._publications)
        self._requests = ep.reader(
            ep.request_topic,
            durability_partition(self.namespace),
            service_request_qos(self.incarnation),
        )
        self._waiter.watch(self._requests)
        self._align_writer = ep.writer(
            ep.request_topic,
            durability_partition(self.namespace),
            REQUEST_WRITER_QOS,
            seal=self._seal_request if self._sealer.enabled else None,
        )
        self._align_replies = ep.reader(
            ep.reply_topic, reply_partition(self.namespace, self._client_id), REPLY_QOS
        )
        self._waiter.watch(self._align_replies)
        self._align_until = time.monotonic() + (ALIGN_WINDOW if self._align else 0.0)
        self._thread = threading.Thread(target=self._run, name="dcps-durability", daemon=True)
        self._thread.start()
        return self

    def wait_aligned(self, timeout: float = 10.0) -> bool:
        """Wait until the start-up alignment with the other services is over."""
        return self._ready.wait(timeout)

    def close(self) -> None:
        """Stop the service (idempotent); kept PERSISTENT data stays in the file."""
        if self._stopping:
            return
        self._stopping = True
        if self._thread is not None:
            self._waiter.wake()
            self._thread.join()
            self._waiter.close()
        for w in self._reply_writers.values():
            drop_endpoint(w)
        if self._endpoint is not None:
            self._endpoint.close()
        if self._db is not None:
            self._db.close()

    def __enter__(self) -> DurabilityService:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the loop --------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stopping:
            self._waiter.wait(0.05)
            if self._stopping:
                break
            try:
                self._step()
            except Exception:
                _log.exception("dcps durability service: unexpected error")

    def _step(self) -> None:
        now = time.time_ns()
        self._discover()
        for served in list(self._served.values()):
            self._take(served, now)
        self._align_step()
        self._answer()
        if now >= self._next_cleanup:  # a walk over every instance: not per sample
            self._next_cleanup = now + 100_000_000
            self.history.cleanup(now)

    # -- discovery -------------------------------------------------------------------
    def _discover(self) -> None:
        for pub in self._publications.take(N=256):
            info = pub.sample_info
            if info.instance_state != InstanceState.Alive or not info.valid_data:
                continue
            wq = pub.qos
            try:
                durability = wq[Policy.Durability]
            except (KeyError, AttributeError):
                continue
            if durability not in _KINDS or pub.topic_name.startswith("dcps_channels_"):
                continue
            if not any(fnmatch.fnmatchcase(pub.topic_name, p) for p in self.topics):
                continue
            try:
                names = tuple(wq[Policy.Partition].partitions) or ("",)
            except (KeyError, AttributeError):
                names = ("",)
            names = tuple(
                n for n in names if any(fnmatch.fnmatchcase(n, p) for p in self.partitions)
            )
            if not names:
                continue
            writer_qos = q.from_cyclone(wq, "writer")
            limits = Limits.of(writer_qos[q.DurabilityService])
            persistent = durability == Policy.Durability.Persistent
            for partition in names:
                self._serve(pub, partition, limits, persistent)

    def _serve(self, pub: Any, partition: str, limits: Limits, persistent: bool) -> None:
        key = (pub.topic_name, partition)
        self.history.serve(pub.topic_name, partition, limits, persistent)
        if key in self._served or key in self._refused:
            return
        data_type: Any = self._types.get((pub.topic_name, pub.type_name))
        if data_type is None:
            if pub.type_id is None:
                _log.warning(
                    "durability: writer of %r announces no XTypes type: not served", pub.topic_name
                )
                self._refused.add(key)
                return
            # one Python type per type identifier, shared by every topic of that type: with
            # a type of its own per topic, creating the 33rd topic never returned
            type_key = bytes(pub.type_id.serialize())
            data_type = self._by_type_id.get(type_key)
            if data_type is None:
                try:
                    assert self._endpoint is not None
                    data_type, _ = get_types_for_typeid(
                        self._endpoint.participant, pub.type_id, TYPE_LOOKUP_TIMEOUT_NS
                    )
                except Exception as exc:
                    _log.warning("durability: type of %r not found: %s", pub.topic_name, exc)
                    return  # retried when the writer is announced again
                self._by_type_id[type_key] = data_type
            self._types[(pub.topic_name, pub.type_name)] = data_type
        assert self._endpoint is not None
        dp = self._endpoint.participant
        topic = self._topic_entities.get(pub.topic_name)
        if topic is None:
            topic = Topic(dp, pub.topic_name, data_type)
            self._topic_entities[pub.topic_name] = self._endpoint.own(topic)
        sub_qos, reader_qos = _reader_qos(partition)
        reader = DataReader(self._endpoint.own(Subscriber(dp, qos=sub_qos)), topic, qos=reader_qos)
        self._served[key] = _Served(reader, pub.topic_name, partition)
        self._waiter.watch(reader)
        _log.info("durability: serving %r in partition %r", pub.topic_name, partition)

    def _take(self, served: _Served, now: int) -> None:
        """Keep everything the topic's reader holds, taken in bulk and kept a batch at a time
        (one lock, one transaction), so the service keeps up with a fast writer."""
        topic, partition, history = served.topic, served.partition, self.history
        while True:
            with paused_gc():  # a take builds several objects per sample (dcps/_gc.py)
                more = self._take_some(served, topic, partition, history, now)
            if not more:
                return

    def _take_some(
        self, served: _Served, topic: str, partition: str, history: HistoryStore, now: int
    ) -> bool:
        """Take and keep up to ``_TAKE`` samples; True if the reader may hold more."""
        served.learn_keys()
        rows = take_cdr(served.ref, ANY_STATE, _TAKE)
        if isinstance(rows, int):
            raise DcpsError(f"durability: take on {topic!r} failed ({rows})")
        batch: list[Arrival] = []
        # instances disposed after a sample of theirs that was not taken yet: Cyclone has no
        # sample for such a dispose, only the instance state of the samples it follows
        disposed: list[bytes] = []
        for data, row, status in rows:
            key = served.key(row[5])
            if data is None:  # dispose or unregister without data: in order
                if row[2] == _DISPOSED:
                    history.add_batch(topic, partition, batch, now)
                    batch = []
                    history.dispose(topic, partition, key, now)
                continue
            batch.append(
                (key, served.guid(row[6]), row[4], data, bool(status & STATUSINFO_DISPOSE))
            )
            if row[2] == _DISPOSED:
                disposed.append(key)
        if batch:
            history.add_batch(topic, partition, batch, now)
        for key in disposed:  # the instance state is the newest: after all its samples
            history.dispose(topic, partition, key, now)
        return len(rows) == _TAKE

    # -- serving ---------------------------------------------------------------------
    def _answer(self) -> None:
        requests = self._requests.take(N=256)
        if requests:
            # keep what arrived since this step's take first: a writer's sample acked
            # before a reader asked (it exited, then the reader was created) is served
            now = time.time_ns()
            for served in list(self._served.values()):
                self._take(served, now)
        for sample in requests:
            if not isinstance(sample, Request) or sample.client == self._client_id:
                continue
            if sample.member not in ("", self.incarnation):
                continue  # addressed to another service (HistoryFetchRequest.service)
            try:
                self._sealer.open_request(sample, self.incarnation)
            except AuthenticationError as exc:
                self._sealer.refused(exc)  # counted; nothing is answered
                continue
            try:
                request = decode_request(sample)
                if not isinstance(request, HistoryFetchRequest):
                    raise BadParameterError(
                        f"the durability service answers HISTORY_FETCH only, not op {sample.op}"
                    )
                with paused_gc():  # a page is a record per sample, gone once sent
                    samples, cursor, more = self.history.page(
                        request.topic,
                        request.partitions,
                        request.after,
                        request.count,
                        MAX_HISTORY_PAGE_BYTES,
                    )
                    reply = HistoryPage(tuple(samples), cursor, more, self.incarnation).to_wire(
                        sample.client, sample.request_id
                    )
            except DcpsError as exc:
                reply = error_reply(sample.client, sample.request_id, exc)
            self._reply_writer(sample.client).write(reply)

    def _reply_writer(self, client: str) -> Any:
        writer = self._reply_writers.get(client)
        if writer is None:
            assert self._endpoint is not None
            if len(self._reply_writers) >= 256:
                drop_endpoint(self._reply_writers.pop(next(iter(self._reply_writers))))
            writer = self._reply_writers[client] = self._endpoint.writer(
                self._endpoint.reply_topic,
                reply_partition(self.namespace, client),
                REPLY_QOS,
                seal=self._seal_reply if self._sealer.enabled else None,
            )
        return writer

    # -- authentication ----------------------------------------------------------------
    def _seal_reply(self, reply: Reply) -> bytes | None:
        return self._sealer.seal_reply(reply, self.incarnation)

    def _seal_request(self, request: Request) -> bytes | None:
        # an alignment request names the service it asks (HistoryFetchRequest.service)
        return self._sealer.seal_request(request, request.member)

    def auth_drops(self) -> dict[DropReason, int]:
        """Requests and replies refused by authentication so far, per reason."""
        return self._sealer.drops()

    # -- alignment -------------------------------------------------------------------
    def _align_step(self) -> None:
        """Ask every other service that matched (at start, later, or again after a cut
        link healed) for what it keeps beyond what it served us before; keep it too."""
        status = self._align_writer.get_publication_matched_status()  # type: ignore[no-untyped-call]
        matches = status.total_count + status.current_count
        if matches != self._matches:  # a match came or went: cheap to check every step
            self._matches = matches
            now = matched_services(self._align_writer) - {self.incarnation}
            new, self._peers = now - self._peers, now
            if self._align:
                for service in sorted(new):
                    self._aligning[service] = self._peer_cursors.get(service, 0)
                    self._ask(service, self._aligning[service])
            for gone in set(self._aligning) - now:
                del self._aligning[gone]  # it died or became unreachable mid-alignment
                self._asked.pop(gone, None)
        for reply in self._align_replies.take(N=64):
            if not isinstance(reply, Reply) or reply.status:
                continue
            service = reply.text
            if service not in self._aligning or not self._sealer.accept_reply(reply, service):
                continue
            if int(reply.request_id) != self._asked.get(service):
                continue  # a page replayed from an earlier alignment, not this one's answer
            page = HistoryPage.from_wire(reply)
            self.aligned += self.history.add_many(page.samples, time.time_ns())
            self._peer_cursors[service] = max(page.cursor, self._peer_cursors.get(service, 0))
            if page.more:
                self._aligning[service] = page.cursor
                self._ask(service, page.cursor)
            else:
                self._aligning.pop(service, None)
                self._asked.pop(service, None)
        if not self._aligning and time.monotonic() >= self._align_until:
            self._ready.set()

    def _ask(self, service: str, after: int) -> None:
        request = HistoryFetchRequest("", (), after, MAX_HISTORY_PAGE, service)
        self._next_rid += 1
        self._asked[service] = self._next_rid
        self._align_writer.write(request.to_wire(self._client_id, self._next_rid))
