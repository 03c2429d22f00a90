"""The store service: sequencer, memory and group coordinator of channelled topics."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

import attrs
from cyclonedds.core import DDSException

from idl._errors import (
    BadParameterError,
    InconsistentPolicyError,
    PreconditionNotMetError,
)

from ._assignment import assign_channels
from ._batches import BULK_FETCH, PackedPayloads
from ._log import DEFAULT_PARTITION_COUNT, ChannelLog, SyncMode, default_channel_count
from ._position import CommitStatus
from ._protocol import (
    ASSIGN_QOS,
    BATCH_WRITER_QOS,
    CONTROL_QOS,
    REPLY_QOS,
    Assignment,
    Endpoint,
    LiveBatch,
    Op,
    Reply,
    Request,
    SeekMode,
    Waiter,
    batch_partition,
    drop_endpoint,
    error_code,
    reply_partition,
)
from ._topic import ChannelledTopic

__all__ = ["STORE_FILE", "Store", "run_store"]

_log = logging.getLogger("dcps.channels.store")
#: Seconds after which the reply writer of a client that has gone is deleted.
_REPLY_WRITER_IDLE = 60.0
STORE_FILE = "channels.db"
ANONYMOUS_PREFIX = "~anonymous/"
COMMIT_CODES = list(CommitStatus)


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
    """The store of one namespace: a SQLite log plus its DDS service thread.

    ``Store(data_dir, domain_id=...)`` opens (or creates) ``data_dir/channels.db``
    and starts serving at once; use it as a context manager or call
    :meth:`close`. ``topics`` pre-configures channelled topics. ``sync`` picks
    the fsync policy. Topics created without a channel count get the next
    prime above the square root of ``partition_count`` (17 for the default
    257). Opening a corrupt, foreign or newer data file raises a
    :class:`~dcps.DcpsError` before anything is started.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        sync: SyncMode = SyncMode.FULL,
        topics: Iterable[ChannelledTopic] = (),
        partition_count: int = DEFAULT_PARTITION_COUNT,
    ) -> None:
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
            self._endpoint = Endpoint(domain_id, namespace)
        except BaseException:
            self.log.close()
            raise
        ep = self._endpoint
        self._requests = ep.reader(ep.request_topic, namespace, CONTROL_QOS)
        self._reply_writers: dict[str, tuple[Any, float]] = {}  # client -> (writer, last use)
        self._next_reply_sweep = time.monotonic() + _REPLY_WRITER_IDLE
        self._assignments = ep.writer(ep.assign_topic, namespace, ASSIGN_QOS)
        self._batch_writers: dict[tuple[str, int], Any] = {}
        self._groups: dict[tuple[str, str], _Group] = {}
        self._waiter = Waiter(ep)
        self._waiter.watch(self._requests)
        self._stopping = False
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="dcps-store", daemon=True)
        self._thread.start()

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
        self._thread.join()
        self._waiter.close()
        for writer in self._batch_writers.values():
            drop_endpoint(writer)
        drop_endpoint(self._requests)
        for writer, _ in self._reply_writers.values():
            drop_endpoint(writer)
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
        self._expire_members()

    def _reply(self, request: Request, **fields: Any) -> None:
        now = time.monotonic()
        entry = self._reply_writers.get(request.client)
        if entry is None:
            partition = reply_partition(self.namespace, request.client)
            entry = (self._endpoint.writer(self._endpoint.reply_topic, partition, REPLY_QOS), now)
        self._reply_writers[request.client] = (entry[0], now)
        try:
            entry[0].write(Reply(client=request.client, request_id=request.request_id, **fields))
        except DDSException:  # an unreachable client: it times out and may ask again
            _log.warning("dcps store: reply to client %s dropped", request.client)
        if now >= self._next_reply_sweep:
            self._sweep_reply_writers(now)

    def _sweep_reply_writers(self, now: float) -> None:
        """Delete the reply writers of clients that are gone (no reader, idle)."""
        self._next_reply_sweep = now + _REPLY_WRITER_IDLE
        for client, (writer, used) in list(self._reply_writers.items()):
            if now - used > _REPLY_WRITER_IDLE and not writer.get_matched_subscriptions():
                drop_endpoint(writer)
                del self._reply_writers[client]

    def _fail(self, request: Request, exc: BaseException) -> None:
        self._reply(request, status=error_code(exc), error=str(exc) or type(exc).__name__)

    def _handle(self, request: Request) -> None:
        handler = self._HANDLERS.get(request.op)
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
        """Up to ``number`` elements of one channel from an offset.

        Per-element form (``flag`` 0): ``offsets``, ``stamps`` and ``sizes``
        per element, payloads in ``blob``. Bulk form (``flag`` BULK_FETCH): the
        stored batches as they are, see ``ElementRun.reply_fields``.
        """
        channel, offset = request.channels[0], request.offsets[0]
        run = self.log.fetch_run(request.topic, channel, offset, max(1, int(request.number)))
        state = self.log.channel_state(request.topic, channel)
        fields = run.reply_fields() if request.flag == BULK_FETCH else run.element_fields()
        self._reply(request, channels=[channel], **fields, heads=[state.head], tails=[state.tail])

    def _on_state(self, request: Request) -> None:
        topic = request.topic
        info = self.log.topic(topic)
        channels = list(request.channels) or list(range(info.channel_count))
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
        group = self._group(request)
        unowned = set(self._check_owned(group, request.member, request.channels))
        codes = []
        for channel, offset in zip(request.channels, request.offsets, strict=True):
            if channel in unowned:
                status = CommitStatus.UNOWNED
            else:
                status = self.log.commit(request.topic, request.group, channel, offset)
            codes.append(COMMIT_CODES.index(status))
        self._reply(request, channels=list(request.channels), codes=codes)

    def _on_seek(self, request: Request) -> None:
        group = self._group(request)
        unowned = self._check_owned(group, request.member, request.channels)
        if unowned:
            raise PreconditionNotMetError(
                f"cannot seek channels {unowned} of topic {request.topic!r}: "
                f"member {request.member!r} of group {request.group!r} does not own them"
            )
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
        self._reply(request, text=self.incarnation)

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


def run_store(
    data_dir: str | os.PathLike[str],
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    sync: SyncMode = SyncMode.FULL,
    partition_count: int = DEFAULT_PARTITION_COUNT,
    stop: threading.Event | None = None,
    on_ready: Callable[[Store], None] | None = None,
) -> None:
    """Run a store until ``stop`` is set, or SIGINT/SIGTERM when ``stop`` is None.

    Prints ``dcps store ready`` to stdout once serving (``on_ready`` is called too).
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
    ) as store:
        if on_ready is not None:
            on_ready(store)
        print(
            f"dcps store ready: {store.data_dir} domain={domain_id} namespace={namespace}",
            flush=True,
            file=sys.stdout,
        )
        while not event.wait(0.2):
            pass
