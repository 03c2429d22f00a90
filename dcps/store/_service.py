"""The store service: sequencer, memory and group coordinator of channelled topics.

A store serves the channels of its share (``share=(index, count)``, default
``(0, 1)``: all of them); several store processes split a namespace's
channels between them, the one of index 0 coordinating the groups. The design
of the split is described in ``_shares.py`` and ``docs/deployment.md``.
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from dcps.channels._position import CommitStatus
from dcps.channels._topic import ChannelledTopic
from dcps.wire._batches import BULK_FETCH, PackedPayloads
from dcps.wire._protocol import (
    ANNOUNCE_QOS,
    ASSIGN_QOS,
    BATCH_WRITER_QOS,
    COMMIT_UNOWNED,
    CONTROL_QOS,
    REPLY_QOS,
    Assignment,
    Endpoint,
    LiveBatch,
    Op,
    Reply,
    Request,
    SeekMode,
    StoreAnnouncement,
    Waiter,
    batch_partition,
    drop_endpoint,
    error_code,
    live_announcements,
    reply_partition,
)
from idl._errors import (
    BadParameterError,
    IllegalOperationError,
    InconsistentPolicyError,
    PreconditionNotMetError,
)

from ._assignment import assign_channels
from ._log import DEFAULT_PARTITION_COUNT, ChannelLog, LogReader, SyncMode, default_channel_count
from ._replies import REPLY_WRITER_IDLE, ReplyOutbox
from ._shares import OWNERSHIP_GRACE, SETTLE, Share, request_partition, share_conflict

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["STORE_FILE", "Store", "run_store"]

_log = logging.getLogger("dcps.store")
#: Threads answering FETCH requests by default, each with its own read connection.
DEFAULT_FETCH_THREADS = 3
#: Seconds a fetch thread waits for a client to acknowledge replies before it
#: leaves the rest to the service thread (so a stuck client holds it briefly).
_SEND_PATIENCE = 1.0
STORE_FILE = "channels.db"
ANONYMOUS_PREFIX = "~anonymous/"
COMMIT_CODES = list(CommitStatus)


class _DeferredError(Exception):
    """A request held back until the coordinator's assignment may grant its ownership."""


@attrs.define
class _Member:
    name: str
    timeout: float
    last_seen: float
    anonymous: bool


@attrs.define
class _Group:
    topic: str
    name: str
    members: dict[str, _Member] = attrs.Factory(dict)
    owners: dict[int, str] = attrs.Factory(dict)
    generation: int = 0
    anonymous: bool = False


class Store:
    """The store of one namespace: a SQLite log plus its DDS service threads.

    ``Store(data_dir, domain_id=...)`` opens (or creates) ``data_dir/channels.db``
    and starts serving at once; use it as a context manager or call
    :meth:`close`. ``topics`` pre-configures channelled topics. ``sync`` picks
    the fsync policy. Topics created without a channel count get the next
    prime above the square root of ``partition_count`` (17 for the default
    257). Opening a corrupt, foreign or newer data file raises a
    :class:`~dcps.DcpsError` before anything is started.

    ``share`` (a :class:`Share`, ``(index, count)`` or ``"index/count"``)
    makes this store serve only channel ``c`` of every topic with
    ``c % count == index``; run one store per share, each on its own data
    directory (see ``docs/deployment.md``). A share that is invalid raises
    :class:`~dcps.BadParameterError`; one that overlaps a running store of
    the namespace raises :class:`~dcps.PreconditionNotMetError` (if the
    overlap shows up later, the younger store stops and sets :attr:`failure`).

    ``fetch_threads`` threads answer FETCH requests (subscribers catching up,
    Spark reads), each reading the log through its own read-only connection,
    beside the thread that handles publishes and commits; more of them help
    when many readers fetch at once on a machine with cores to spare.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        sync: SyncMode = SyncMode.FULL,
        topics: Iterable[ChannelledTopic] = (),
        partition_count: int = DEFAULT_PARTITION_COUNT,
        share: Share | tuple[int, int] | str = (0, 1),
        fetch_threads: int = DEFAULT_FETCH_THREADS,
    ) -> None:
        if (
            not isinstance(fetch_threads, int)
            or isinstance(fetch_threads, bool)
            or fetch_threads < 1
        ):
            raise BadParameterError(f"fetch_threads must be an int >= 1, got {fetch_threads!r}")
        self._fetch_thread_count = fetch_threads
        self.share = Share.of(share)
        #: Why this store stopped serving (an overlapping store), or None.
        self.failure: str | None = None
        self.data_dir = Path(data_dir)
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise BadParameterError(f"the store data directory {self.data_dir} is not a directory")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.default_channel_count = default_channel_count(partition_count)
        self.log = ChannelLog(self.data_dir / STORE_FILE, sync=sync)
        try:
            for info in self.log.topics():  # anonymous subscribers do not outlive a store
                for group in self.log.groups(info.name):
                    if group.startswith(ANONYMOUS_PREFIX):
                        self.log.destroy_group(info.name, group)
            for topic in topics:
                self._ensure(topic.name, topic.channel_count or 0, topic.retain_consumed, "")
            self.namespace = namespace
            self.incarnation = uuid.uuid4().hex
            self._endpoint = Endpoint(domain_id, namespace, network)
        except BaseException:
            self.log.close()
            raise
        ep = self._endpoint
        self._requests: Any = ep.reader(
            ep.request_topic,
            request_partition(namespace, self.share.index, self.share.count),
            CONTROL_QOS,
        )
        self._reply_writers: dict[str, ReplyOutbox] = {}
        self._next_reply_sweep = time.monotonic() + REPLY_WRITER_IDLE
        # FETCHes are answered off the service thread (see _on_fetch); None stops a thread
        self._fetch_jobs: queue.SimpleQueue[tuple[Request, ReplyOutbox, Any] | None] = (
            queue.SimpleQueue()
        )
        self._fetchers: list[threading.Thread] = []
        self._assignments = ep.writer(ep.assign_topic, namespace, ASSIGN_QOS)
        self._batch_writers: dict[tuple[str, int], Any] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._waiter = Waiter(ep)
        self._waiter.watch(self._requests)
        self._stopping = False
        self._closed = False
        self._thread: threading.Thread | None = None
        self._init_share()

    # -- lifecycle -------------------------------------------------------------

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and close the log (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._stopping = True
        self._waiter.wake()
        if self._thread is not None:
            self._thread.join()
        for _ in self._fetchers:
            self._fetch_jobs.put(None)
        for fetcher in self._fetchers:
            fetcher.join()
        self._waiter.close()
        for writer in self._batch_writers.values():
            drop_endpoint(writer)
        if self._requests is not None:
            drop_endpoint(self._requests)
        for entity in (self._announcer, self._announced, self._mirror_reader):
            if entity is not None:
                drop_endpoint(entity)
        for out in self._reply_writers.values():
            out.close()
        drop_endpoint(self._assignments)
        self._endpoint.close()
        self.log.close()

    # -- the service loop ------------------------------------------------------

    def _run(self) -> None:
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
        requests = [r for r in self._requests.take(N=1024) if isinstance(r, Request)]
        publishes: list[Request] = []
        for request in requests:
            if request.op == Op.PUBLISH:
                publishes.append(request)
                continue
            if publishes:
                self._publish(publishes)
                publishes = []
            self._handle(request)
        if publishes:
            self._publish(publishes)
        for request, _ in list(self._deferred.values()):  # waiting for an assignment
            self._handle(request)
        self._expire_members()
        self._retry_replies()

    def _outbox(self, client: str, now: float) -> ReplyOutbox:
        """The client's reply outbox, created with its writer on first use (service thread)."""
        if now >= self._next_reply_sweep:  # before the lookup: never hand out a deleted one
            self._sweep_reply_writers(now)
        out = self._reply_writers.get(client)
        if out is None:
            partition = reply_partition(self.namespace, client)
            writer = self._endpoint.writer(self._endpoint.reply_topic, partition, REPLY_QOS)
            out = self._reply_writers[client] = ReplyOutbox(writer, now)
        return out

    def _reply(self, request: Request, **fields: Any) -> None:
        out = self._outbox(request.client, time.monotonic())
        out.put(out.reserve(time.monotonic()), _make_reply(request, **fields))

    def _retry_replies(self) -> None:
        """Write the replies that found their client's writer full; drop those nobody awaits."""
        for out in self._reply_writers.values():
            out.retry()

    def _sweep_reply_writers(self, now: float) -> None:
        """Delete the reply writers of clients that are gone (no reader, idle)."""
        self._next_reply_sweep = now + REPLY_WRITER_IDLE
        for client, out in list(self._reply_writers.items()):
            if out.idle(now) and not out.writer.get_matched_subscriptions():
                out.close()
                del self._reply_writers[client]

    def _fail(self, request: Request, exc: BaseException) -> None:
        self._reply(request, status=error_code(exc), error=str(exc) or type(exc).__name__)

    def _handle(self, request: Request) -> None:
        handler = self._handlers.get(request.op)
        try:
            if handler is None:
                raise BadParameterError(f"unknown store request {request.op}")
            handler(self, request)
        except Exception as exc:  # every failure becomes an error reply
            self._fail(request, exc)

    # -- topics and publishing -------------------------------------------------

    def _ensure(self, name: str, count: int, retain: bool | None, type_name: str) -> Any:
        existed = name in {t.name for t in self.log.topics()}
        info = self.log.ensure_topic(
            name, count or self.default_channel_count, bool(retain), type_name
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

    def _on_ensure(self, request: Request) -> None:
        retain = None if request.flag < 0 else bool(request.flag)
        info = self._ensure(request.topic, int(request.number), retain, request.text)
        self._reply(request, number=info.channel_count, flag=int(info.retain_consumed))

    def _publish(self, requests: list[Request]) -> None:
        for request in [r for r in requests if r.text]:  # idempotent (keyed) publishes
            self._publish_keyed(request)
        requests = [r for r in requests if not r.text]
        good: list[Request] = []
        for request in requests:
            try:
                if len(request.channels) != 1:
                    raise BadParameterError("a publish request names exactly one channel")
                self.log.channel_state(request.topic, request.channels[0])
                self._foreign(request.topic, request.channels)
                good.append(request)
            except Exception as exc:
                self._fail(request, exc)
        if not good:
            return
        try:
            results = self.log.append_packed(
                (r.topic, r.channels[0], PackedPayloads(r.sizes, r.blob)) for r in good
            )
        except Exception as exc:
            for request in good:
                self._fail(request, exc)
            return
        for request, (first, count, stamp) in zip(good, results, strict=True):
            if not count:
                first, stamp = 0, 0
            self._reply(request, number=count, offsets=[first], stamps=[stamp])
        for request, (first, count, stamp) in zip(good, results, strict=True):
            if count:
                self._push(request, (first, stamp))
        for topic in {r.topic for r in good}:
            info = self.log.topic(topic)
            if not info.retain_consumed and not self.log.groups(topic):
                self.log.trim(topic)

    def _publish_keyed(self, request: Request) -> None:
        """A publish carrying an idempotence key in ``text``: a repeated key is not appended.

        The reply's ``flag`` is 1 for a duplicate (with the original placement).
        """
        try:
            if len(request.channels) != 1:
                raise BadParameterError("a publish request names exactly one channel")
            self._foreign(request.topic, request.channels)
            placed, duplicate = self.log.append_keyed(
                request.topic,
                request.channels[0],
                PackedPayloads(request.sizes, request.blob),
                request.text,
            )
        except Exception as exc:
            self._fail(request, exc)
            return
        first, stamp = placed[0] if placed else (0, 0)
        self._reply(
            request, number=len(placed), offsets=[first], stamps=[stamp], flag=int(duplicate)
        )
        if placed and not duplicate:
            self._push(request, placed[0])
            info = self.log.topic(request.topic)
            if not info.retain_consumed and not self.log.groups(request.topic):
                self.log.trim(request.topic)

    def _push(self, request: Request, first: tuple[int, int]) -> None:
        topic, channel = request.topic, request.channels[0]
        writer = self._batch_writers.get((topic, channel))
        if writer is None:
            ep = self._endpoint
            writer = ep.writer(
                ep.batch_topic, batch_partition(self.namespace, topic, channel), BATCH_WRITER_QOS
            )
            self._batch_writers[(topic, channel)] = writer
        writer.write(
            LiveBatch(
                topic=topic,
                channel=channel,
                first=first[0],
                timestamp=first[1],
                sizes=request.sizes,
                blob=request.blob,
            )
        )

    def _on_fetch(self, request: Request) -> None:
        """Up to ``number`` elements of one channel from an offset (answered by a fetch thread).

        Per-element form (``flag`` 0): ``offsets``, ``stamps`` and ``sizes``
        per element, payloads in ``blob``. Bulk form (``flag`` BULK_FETCH): the
        stored batches as they are, see ``ElementRun.reply_fields``.

        The reply's place among the client's replies is taken here, so it
        leaves in request order; a fetch thread reads the log in a snapshot
        taken after every earlier request was handled (a FETCH sees what a
        PUBLISH before it appended) and writes the reply, while this thread
        goes on with other requests.
        """
        self._foreign(request.topic, request.channels)
        now = time.monotonic()
        out = self._outbox(request.client, now)
        self._fetch_jobs.put((request, out, out.reserve(now)))

    def _start_fetchers(self) -> None:
        for i in range(self._fetch_thread_count):
            thread = threading.Thread(
                target=self._fetch_loop, name=f"dcps-store-fetch-{i}", daemon=True
            )
            thread.start()
            self._fetchers.append(thread)

    def _fetch_loop(self) -> None:
        """A fetch thread: answer queued FETCHes until told to stop."""
        reader = self.log.reader()
        try:
            while True:
                job = self._fetch_jobs.get()
                if job is None or self._stopping:
                    return
                request, out, slot = job
                try:
                    reply = self._answer_fetch(reader, request)
                    out.send(slot, reply, _SEND_PATIENCE, lambda: self._stopping)
                except Exception:  # keep serving; the reply, if filled in, is retried
                    _log.exception("dcps store: unexpected error in a fetch thread")
        finally:
            reader.close()

    @staticmethod
    def _answer_fetch(reader: LogReader, request: Request) -> Reply:
        try:
            channel, offset = request.channels[0], request.offsets[0]
            run, state = reader.fetch(request.topic, channel, offset, max(1, int(request.number)))
            fields = run.reply_fields() if request.flag == BULK_FETCH else run.element_fields()
            return _make_reply(
                request, channels=[channel], **fields, heads=[state.head], tails=[state.tail]
            )
        except Exception as exc:  # every failure becomes an error reply
            error = str(exc) or type(exc).__name__
            return _make_reply(request, status=error_code(exc), error=error)

    def _on_state(self, request: Request) -> None:
        topic = request.topic
        info = self.log.topic(topic)
        self._foreign(topic, request.channels)
        channels = list(request.channels) or [
            c for c in range(info.channel_count) if self.share.serves(c)
        ]
        states = [self.log.channel_state(topic, c) for c in channels]
        committed: list[int] = []
        explicit: list[int] = []
        if request.group and self.log.has_group(topic, request.group):
            for c in channels:
                off, exp = self.log.committed(topic, request.group, c)
                committed.append(off)
                explicit.append(int(exp))
        self._reply(
            request,
            number=info.channel_count,
            channels=channels,
            heads=[s.head for s in states],
            tails=[s.tail for s in states],
            offsets=committed,
            codes=explicit,
        )

    # -- groups ----------------------------------------------------------------

    def _group(self, request: Request) -> _Group:
        group = self._groups.get((request.topic, request.group))
        if group is None or request.member not in group.members:
            raise PreconditionNotMetError(
                f"{request.member!r} is not a member of group {request.group!r} of topic "
                f"{request.topic!r} (left, timed out, or the store restarted)"
            )
        group.members[request.member].last_seen = time.monotonic()
        return group

    def _owned(self, group: _Group, member: str) -> list[int]:
        return sorted(c for c, m in group.owners.items() if m == member)

    def _rebalance(self, group: _Group, expelled: Iterable[str] = ()) -> None:
        count = self.log.topic(group.topic).channel_count
        owners = assign_channels(count, group.members, group.owners)
        group.owners = owners
        group.generation += 1
        members = sorted(group.members)
        index = {m: i for i, m in enumerate(members)}
        self._assignments.write(
            Assignment(
                topic=group.topic,
                group=group.name,
                incarnation=self.incarnation,
                generation=group.generation,
                members=members,
                owners=[index[owners[c]] if c in owners else -1 for c in range(count)],
                expelled=list(expelled),
            )
        )

    def _on_join(self, request: Request) -> None:
        topic, name = request.topic, request.group
        self.log.topic(topic)
        if not name:
            raise BadParameterError("joining needs a group name")
        self.log.create_group(topic, name)
        group = self._groups.setdefault((topic, name), _Group(topic, name))
        group.anonymous = bool(request.flag)
        timeout = max(0.05, request.number / 1000.0)
        group.members[request.member] = _Member(
            request.member, timeout, time.monotonic(), bool(request.flag)
        )
        self._rebalance(group)
        self._reply(
            request,
            number=group.generation,
            text=self.incarnation,
            channels=self._owned(group, request.member),
        )

    def _on_heartbeat(self, request: Request) -> None:
        group = self._group(request)
        self._reply(
            request,
            number=group.generation,
            text=self.incarnation,
            channels=self._owned(group, request.member),
        )

    def _on_leave(self, request: Request) -> None:
        group = self._groups.get((request.topic, request.group))
        if group is not None and request.member in group.members:
            del group.members[request.member]
            self._after_departure(group, [])
        self._reply(request)

    def _after_departure(self, group: _Group, expelled: list[str]) -> None:
        if group.anonymous and not group.members:
            self.log.destroy_group(group.topic, group.name)
            del self._groups[(group.topic, group.name)]
            self._rebalance(group, expelled)
            return
        self._rebalance(group, expelled)

    def _expire_members(self) -> None:
        now = time.monotonic()
        for group in list(self._groups.values()):
            dead = [m.name for m in group.members.values() if now - m.last_seen > m.timeout]
            if dead:
                for name in dead:
                    del group.members[name]
                self._after_departure(group, dead)

    def _on_destroy_group(self, request: Request) -> None:
        existed = self.log.destroy_group(request.topic, request.group)
        group = self._groups.pop((request.topic, request.group), None)
        if group is not None:
            expelled = list(group.members)
            group.members.clear()
            self._rebalance(group, expelled)
        self._reply(request, flag=int(existed))

    def _check_owned(self, group: _Group, member: str, channels: Iterable[int]) -> list[int]:
        count = self.log.topic(group.topic).channel_count
        bad = [c for c in channels if not 0 <= c < count]
        if bad:
            raise BadParameterError(
                f"topic {group.topic!r} has channels 0..{count - 1}; {bad} do not exist"
            )
        return [c for c in channels if group.owners.get(c) != member]

    def _on_commit(self, request: Request) -> None:
        self._foreign(request.topic, request.channels)
        if request.text and request.text != self.incarnation:
            self._readmit(request)
        if request.flag & COMMIT_UNOWNED:
            unowned = self._commit_anyway(request)
        else:
            group = self._group(request)
            unowned = set(self._check_owned(group, request.member, request.channels))
        self._commit_and_reply(request, unowned)

    def _commit_and_reply(self, request: Request, unowned: set[int]) -> None:
        """Commit the request's positions except on ``unowned`` channels; answer the codes."""
        codes = []
        for channel, offset in zip(request.channels, request.offsets, strict=True):
            if channel in unowned:
                status = CommitStatus.UNOWNED
            else:
                status = self.log.commit(request.topic, request.group, channel, offset)
            codes.append(COMMIT_CODES.index(status))
        self._reply(request, channels=list(request.channels), codes=codes)

    def _readmit(self, request: Request) -> None:
        """Re-admit a member that joined an earlier incarnation of this store.

        A restarted store has forgotten its members, while they go on
        receiving the live tail of their channels until a heartbeat tells
        them; without this their first commits would be refused as unowned.
        ``text`` carries the incarnation the member joined, ``number`` its
        timeout in ms. Channels another member rejoined with stay theirs
        (the rebalance is sticky), so those commits are still UNOWNED.
        """
        key = (request.topic, request.group)
        group = self._groups.get(key)
        if group is not None and request.member in group.members:
            return
        if request.group.startswith(ANONYMOUS_PREFIX) or not self.log.has_group(*key):
            return  # anonymous groups do not outlive a store; destroyed groups stay so
        group = self._groups.setdefault(key, _Group(request.topic, request.group))
        timeout = max(0.05, request.number / 1000.0) if request.number > 0 else 30.0
        group.members[request.member] = _Member(request.member, timeout, time.monotonic(), False)
        self._rebalance(group)

    def _commit_anyway(self, request: Request) -> set[int]:
        """Check a commit that may name unowned channels; return those not to commit (none).

        The member may have been expelled (timed out) or may never have been
        known to this store incarnation: the group must exist, and the
        channels must too.
        """
        if not self.log.has_group(request.topic, request.group):
            raise PreconditionNotMetError(
                f"group {request.group!r} of topic {request.topic!r} does not exist"
            )
        group = self._groups.get((request.topic, request.group))
        if group is not None and request.member in group.members:
            group.members[request.member].last_seen = time.monotonic()
        count = self.log.topic(request.topic).channel_count
        bad = [c for c in request.channels if not 0 <= c < count]
        if bad:
            raise BadParameterError(
                f"topic {request.topic!r} has channels 0..{count - 1}; {bad} do not exist"
            )
        return set()

    def _on_seek(self, request: Request) -> None:
        self._foreign(request.topic, request.channels)
        group = self._group(request)
        unowned = self._check_owned(group, request.member, request.channels)
        if unowned:
            raise PreconditionNotMetError(
                f"cannot seek channels {unowned} of topic {request.topic!r}: "
                f"member {request.member!r} of group {request.group!r} does not own them"
            )
        self._seek_channels(request)

    def _seek_channels(self, request: Request) -> None:
        mode = SeekMode(request.number)
        targets = []
        for i, channel in enumerate(request.channels):
            kwargs: dict[str, Any] = {}
            if mode is SeekMode.POSITION:
                kwargs["offset"] = request.offsets[i]
            elif mode is SeekMode.TIMESTAMP:
                kwargs["timestamp_ns"] = request.offsets[i]
            else:
                kwargs["to"] = "head" if mode is SeekMode.HEAD else "tail"
            targets.append(self.log.seek(request.topic, request.group, channel, **kwargs))
        self._reply(request, channels=list(request.channels), offsets=targets)

    def _on_ping(self, request: Request) -> None:
        self._reply(request, text=self.incarnation, number=self.share.count, flag=self.share.index)

    # -- sharing the channels with other stores (see _shares.py) -------------------

    def _init_share(self) -> None:
        """Announce this store's share; check no running store overlaps it."""
        ep = self._endpoint
        self._handlers = self._HANDLERS if self.share.coordinates else self._SHARE_HANDLERS
        self._deferred: dict[tuple[str, int], tuple[Request, float]] = {}
        self._mirror: dict[tuple[str, str], Assignment] = {}
        self._coordinator: str | None = None  # incarnation of the coordinating store
        self._next_share_check = 0.0
        self._mirror_reader: Any = None
        self._announced: Any = ep.reader(ep.store_topic, self.namespace, ANNOUNCE_QOS)
        self._announcer: Any = ep.writer(ep.store_topic, self.namespace, ANNOUNCE_QOS)
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
        if not self.share.coordinates:
            self._mirror_reader = ep.reader(ep.assign_topic, self.namespace, ASSIGN_QOS)
            self._waiter.watch(self._mirror_reader)
        if self.share.count > 1:  # overlapping stores: refuse before serving
            deadline = time.monotonic() + SETTLE
            while time.monotonic() < deadline:
                conflict = share_conflict(self.announcement, live_announcements(self._announced))
                if conflict is not None:
                    self.close()
                    raise PreconditionNotMetError(f"store not started: {conflict}")
                time.sleep(0.02)
        self._start_fetchers()
        self._thread = threading.Thread(target=self._run, name="dcps-store", daemon=True)
        self._thread.start()

    def _watch_shares(self) -> None:
        """Stop serving if an older store overlaps; follow the coordinator's assignments."""
        now = time.monotonic()
        if now >= self._next_share_check and self._requests is not None:
            self._next_share_check = now + 0.25
            others = live_announcements(self._announced)
            conflict = share_conflict(self.announcement, others)
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
                if isinstance(sample, Assignment):
                    self._follow(sample)

    def _refuse(self, why: str) -> None:
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

    def _not_coordinator(self, request: Request) -> None:
        raise IllegalOperationError(
            f"store {self.share} does not coordinate groups: {Op(request.op).name} goes to the "
            f"store of share 0/{self.share.count}"
        )

    def _on_share_join(self, request: Request) -> None:
        self.log.topic(request.topic)
        if not request.group:
            raise BadParameterError("joining needs a group name")
        self.log.create_group(request.topic, request.group)
        self._reply(request)

    def _on_share_destroy_group(self, request: Request) -> None:
        self._reply(request, flag=int(self.log.destroy_group(request.topic, request.group)))

    def _owned_by_mirror(self, request: Request) -> list[int] | None:
        """The request's channels its member does not own (None: not a member) per the mirror."""
        count = self.log.topic(request.topic).channel_count
        bad = [c for c in request.channels if not 0 <= c < count]
        if bad:
            raise BadParameterError(
                f"topic {request.topic!r} has channels 0..{count - 1}; {bad} do not exist"
            )
        self._foreign(request.topic, request.channels)
        a = self._mirror.get((request.topic, request.group))
        if a is None or request.member not in a.members:
            return None
        if self._coordinator is not None and a.incarnation != self._coordinator:
            return None  # an assignment of a coordinator that has restarted since
        me = a.members.index(request.member)
        return [c for c in request.channels if c >= len(a.owners) or a.owners[c] != me]

    def _wait_for_ownership(self, request: Request) -> list[int] | None:
        """``_owned_by_mirror``, holding the request back while its ownership may still come.

        Returns ``[]`` or the verdict once final, or raises ``_DeferredError``.
        """
        key = (request.client, request.request_id)
        _, deadline = self._deferred.pop(key, (request, time.monotonic() + OWNERSHIP_GRACE))
        unowned = self._owned_by_mirror(request)
        if unowned == []:
            return unowned
        if time.monotonic() < deadline:
            self._deferred[key] = (request, deadline)
            raise _DeferredError
        if unowned is None:
            raise PreconditionNotMetError(
                f"{request.member!r} is not a member of group {request.group!r} of topic "
                f"{request.topic!r} (left, timed out, or the store restarted)"
            )
        return unowned

    def _on_share_commit(self, request: Request) -> None:
        if request.flag & COMMIT_UNOWNED:
            self._foreign(request.topic, request.channels)
            unowned = self._commit_anyway(request)
        else:
            try:
                unowned = set(self._wait_for_ownership(request) or ())
            except _DeferredError:
                return
        self._commit_and_reply(request, unowned)

    def _on_share_seek(self, request: Request) -> None:
        try:
            unowned = self._wait_for_ownership(request)
        except _DeferredError:
            return
        if unowned:
            raise PreconditionNotMetError(
                f"cannot seek channels {unowned} of topic {request.topic!r}: "
                f"member {request.member!r} of group {request.group!r} does not own them"
            )
        self._seek_channels(request)

    _HANDLERS: ClassVar[dict[int, Callable[[Store, Request], None]]] = {
        Op.PING: _on_ping,
        Op.ENSURE_TOPIC: _on_ensure,
        Op.FETCH: _on_fetch,
        Op.STATE: _on_state,
        Op.JOIN: _on_join,
        Op.HEARTBEAT: _on_heartbeat,
        Op.LEAVE: _on_leave,
        Op.DESTROY_GROUP: _on_destroy_group,
        Op.COMMIT: _on_commit,
        Op.SEEK: _on_seek,
    }
    # A store that does not coordinate groups (share index > 0).
    _SHARE_HANDLERS: ClassVar[dict[int, Callable[[Store, Request], None]]] = {
        **_HANDLERS,
        Op.JOIN: _on_share_join,
        Op.HEARTBEAT: _not_coordinator,
        Op.LEAVE: _not_coordinator,
        Op.DESTROY_GROUP: _on_share_destroy_group,
        Op.COMMIT: _on_share_commit,
        Op.SEEK: _on_share_seek,
    }


def _make_reply(request: Request, **fields: Any) -> Reply:
    return Reply(client=request.client, request_id=request.request_id, **fields)


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
) -> None:
    """Run a store until ``stop`` is set, or SIGINT/SIGTERM when ``stop`` is None.

    Prints ``dcps store ready`` to stdout once serving (``on_ready`` is called too).
    ``share`` is the store's share of the channels (see :class:`Store`); if an
    overlapping store turns up, this one stops with
    :class:`~dcps.PreconditionNotMetError`.
    """
    event = stop or threading.Event()
    if stop is None and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: event.set())
    with Store(
        data_dir,
        domain_id=domain_id,
        namespace=namespace,
        sync=sync,
        partition_count=partition_count,
        share=share,
        fetch_threads=fetch_threads,
    ) as store:
        if on_ready is not None:
            on_ready(store)
        print(
            f"dcps store ready: {store.data_dir} domain={domain_id} namespace={namespace} "
            f"share={store.share}",
            flush=True,
            file=sys.stdout,
        )
        while not event.wait(0.2):
            if store.failure is not None:
                raise PreconditionNotMetError(store.failure)
