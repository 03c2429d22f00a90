"""Prometheus metrics of one store (prometheus-client), served over HTTP on request.

Each :class:`~dcps.store.Store` counts into a :class:`CollectorRegistry` of
its own (several stores may run in one process, as in the tests), whether or
not it serves them: ``Store(metrics_port=N)`` (``dcps store --metrics-port N``)
serves ``/metrics`` on ``metrics_host:N``. Every metric is described in
``docs/metrics.md``.

Counters are bumped where the work happens (the service thread, the fetch
threads, SQLite commits). Group membership and lag are read from the log, which
belongs to the service thread: a scrape asks the service thread for a fresh
snapshot and waits for it briefly (:data:`SNAPSHOT_WAIT`), then reports the
last one it has.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from dcps.wire._admin import channel_lag
from dcps.wire._codes import ErrorCode, Op

from ._log import ChannelLog

if TYPE_CHECKING:
    from dcps.wire._auth import DropReason

__all__ = ["COMMIT_BUCKETS", "SNAPSHOT_WAIT", "LogSnapshot", "StoreMetrics"]

#: Seconds a scrape waits for the service thread's fresh snapshot of groups and lag.
SNAPSHOT_WAIT = 2.0
#: Buckets (seconds) of the SQLite commit latency histogram: 50 us .. 5 s.
COMMIT_BUCKETS = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


@attrs.frozen
class LogSnapshot:
    """What the log says at one moment: stored elements per topic, members and lag per group."""

    elements: dict[str, int] = attrs.Factory(dict)
    members: dict[tuple[str, str], int] = attrs.Factory(dict)
    lag: dict[tuple[str, str, int], int] = attrs.Factory(dict)


def take_snapshot(
    log: ChannelLog, serves: Callable[[int], bool], members: Callable[[str, str], int]
) -> LogSnapshot:
    """Read a :class:`LogSnapshot` (service thread): ``serves(channel)`` picks this store's
    channels, ``members(topic, group)`` counts a group's members."""
    snap = LogSnapshot()
    for info in log.topics():
        channels = [c for c in range(info.channel_count) if serves(c)]
        states = {c: log.channel_state(info.name, c) for c in channels}
        snap.elements[info.name] = sum(max(0, s.count) for s in states.values())
        for group in log.groups(info.name):
            snap.members[(info.name, group)] = members(info.name, group)
            for c in channels:
                committed, _ = log.committed(info.name, group, c)
                snap.lag[(info.name, group, c)] = channel_lag(
                    committed, states[c].head, states[c].tail
                )
    return snap


class StoreMetrics:
    """The metrics of one store: counters to bump, a registry to scrape, an HTTP server."""

    def __init__(
        self,
        *,
        log_path: Path,
        auth_drops: Callable[[], dict[DropReason, int]],
        clients: Callable[[], int],
        labels: dict[str, str],
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reg = self.registry
        io = ("elements", "bytes")
        self._published = {
            u: Counter(
                f"dcps_store_published_{u}",
                f"{u.capitalize()} received in PUBLISH requests, by topic",
                ["topic"],
                registry=reg,
            )
            for u in io
        }
        self._stored = {
            u: Counter(
                f"dcps_store_stored_{u}",
                f"{u.capitalize()} appended to the log (keyed duplicates are not), by topic",
                ["topic"],
                registry=reg,
            )
            for u in io
        }
        self._fetched = {
            u: Counter(
                f"dcps_store_fetched_{u}",
                f"{u.capitalize()} sent in FETCH replies (catch-up, replay, Spark), by topic",
                ["topic"],
                registry=reg,
            )
            for u in io
        }
        self._pushed = {
            u: Counter(
                f"dcps_store_pushed_{u}",
                f"{u.capitalize()} pushed live into the channel partitions, by topic",
                ["topic"],
                registry=reg,
            )
            for u in io
        }
        self._requests = Counter(
            "dcps_store_requests",
            "Requests answered, by kind and result (ok, or the error code's name)",
            ["kind", "result"],
            registry=reg,
        )
        self._commits = Histogram(
            "dcps_store_sqlite_commit_seconds",
            "Latency of the log's SQLite COMMITs (with --sync full, each includes an fsync)",
            buckets=COMMIT_BUCKETS,
            registry=reg,
        )
        self._children: dict[tuple[int, str], tuple[Any, Any]] = {}
        self._request_children: dict[tuple[int, ErrorCode], Any] = {}
        self._snapshot = LogSnapshot()
        self._waiting: list[threading.Event] = []
        self._lock = threading.Lock()
        reg.register(_Gauges(self, log_path, auth_drops, clients, labels))
        self._server: Any = None
        self._server_thread: threading.Thread | None = None
        #: ``http://host:port/metrics`` while serving, else None.
        self.url: str | None = None

    # -- counting (any thread) -----------------------------------------------------------

    def _count(self, family: dict[str, Counter], topic: str, elements: int, nbytes: int) -> None:
        # the children of each (family, topic), kept: ``labels()`` costs 1-2 us a call, and a
        # PUBLISH counted 7 of them (issue 19: the store's CPU per request)
        key = (id(family), topic)
        pair = self._children.get(key)
        if pair is None:
            pair = self._children[key] = (
                family["elements"].labels(topic),
                family["bytes"].labels(topic),
            )
        pair[0].inc(elements)
        pair[1].inc(nbytes)

    def published(self, topic: str, elements: int, nbytes: int) -> None:
        """A PUBLISH of ``elements`` (``nbytes``) to ``topic`` was received."""
        self._count(self._published, topic, elements, nbytes)

    def stored(self, topic: str, elements: int, nbytes: int) -> None:
        """``elements`` (``nbytes``) of ``topic`` were appended to the log."""
        self._count(self._stored, topic, elements, nbytes)

    def fetched(self, topic: str, elements: int, nbytes: int) -> None:
        """A FETCH reply carried ``elements`` (``nbytes``) of ``topic``."""
        self._count(self._fetched, topic, elements, nbytes)

    def pushed(self, topic: str, elements: int, nbytes: int) -> None:
        """A live batch of ``elements`` (``nbytes``) of ``topic`` was pushed."""
        self._count(self._pushed, topic, elements, nbytes)

    def request(self, op: int, error: ErrorCode = ErrorCode.OK) -> None:
        """One request of kind ``op`` was answered (``error``: its failure's code)."""
        child = self._request_children.get((op, error))
        if child is None:
            try:
                kind = Op(op).name.lower()
            except ValueError:
                kind = "unknown"
            result = "ok" if error is ErrorCode.OK else error.name.lower()
            child = self._request_children[(op, error)] = self._requests.labels(kind, result)
        child.inc()

    def observe_commit(self, seconds: float) -> None:
        """A SQLite COMMIT took ``seconds`` (the log's commit observer)."""
        self._commits.observe(seconds)

    # -- the snapshot of groups and lag --------------------------------------------------------

    @property
    def wanted(self) -> bool:
        """True when a scrape waits for a fresh snapshot."""
        return bool(self._waiting)

    def refresh(self, take: Callable[[], LogSnapshot]) -> None:
        """Take a snapshot for the scrapes waiting (service thread)."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        if not waiting:
            return
        try:
            self._snapshot = take()
        finally:
            for event in waiting:
                event.set()

    def snapshot(self) -> LogSnapshot:
        """A fresh snapshot if the service thread answers in time, else the last one."""
        event = threading.Event()
        with self._lock:
            self._waiting.append(event)
        event.wait(SNAPSHOT_WAIT)
        with self._lock:
            if event in self._waiting:
                self._waiting.remove(event)
        return self._snapshot

    # -- serving ---------------------------------------------------------------------------

    def serve(self, host: str, port: int) -> str:
        """Serve ``/metrics`` on ``host:port`` (0: any free port); the URL."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)
        self._server, self._server_thread = server, thread
        bound_host, bound_port = str(server.server_address[0]), int(server.server_address[1])
        shown = f"[{bound_host}]" if ":" in bound_host else bound_host
        self.url = f"http://{shown}:{bound_port}/metrics"
        return self.url

    def close(self) -> None:
        """Stop serving (idempotent); release scrapes still waiting."""
        with self._lock:
            waiting, self._waiting = self._waiting, []
        for event in waiting:
            event.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._server_thread is not None:
            self._server_thread.join(5)
            self._server_thread = None
        self.url = None


class _Gauges(Collector):
    """The values read at scrape time: groups, lag, disk, clients, authentication failures."""

    def __init__(
        self,
        metrics: StoreMetrics,
        log_path: Path,
        auth_drops: Callable[[], dict[DropReason, int]],
        clients: Callable[[], int],
        labels: dict[str, str],
    ) -> None:
        self._metrics = metrics
        self._path = log_path
        self._auth_drops = auth_drops
        self._clients = clients
        self._labels = labels

    def describe(self) -> list[Any]:
        return []  # values come at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        info = GaugeMetricFamily(
            "dcps_store_info", "The store: namespace, share, incarnation", labels=list(self._labels)
        )
        info.add_metric(list(self._labels.values()), 1)
        yield info
        auth = CounterMetricFamily(
            "dcps_store_auth_failures",
            "Messages refused by authentication, by reason (Store.auth_drops())",
            labels=["reason"],
        )
        for reason, count in sorted(self._auth_drops().items(), key=lambda rc: rc[0].name):
            auth.add_metric([reason.name.lower()], count)
        yield auth
        clients = GaugeMetricFamily("dcps_store_clients", "Clients with a reply writer")
        clients.add_metric([], self._clients())
        yield clients
        disk = GaugeMetricFamily(
            "dcps_store_disk_bytes", "Bytes of the store's files on disk", labels=["file"]
        )
        for name, suffix in (("db", ""), ("wal", "-wal")):
            try:
                disk.add_metric([name], os.stat(f"{self._path}{suffix}").st_size)
            except OSError:
                disk.add_metric([name], 0)
        yield disk
        free = GaugeMetricFamily(
            "dcps_store_disk_free_bytes", "Free bytes on the data directory's file system"
        )
        with contextlib.suppress(OSError):
            free.add_metric([], shutil.disk_usage(self._path.parent).free)
        yield free
        snap = self._metrics.snapshot()
        elements = GaugeMetricFamily(
            "dcps_store_topic_elements",
            "Elements stored now (this store's channels), by topic",
            labels=["topic"],
        )
        for topic, count in sorted(snap.elements.items()):
            elements.add_metric([topic], count)
        yield elements
        members = GaugeMetricFamily(
            "dcps_store_group_members",
            "Members of each subscriber group (0 on stores that do not coordinate)",
            labels=["topic", "group"],
        )
        for (topic, group), count in sorted(snap.members.items()):
            members.add_metric([topic, group], count)
        yield members
        lag = GaugeMetricFamily(
            "dcps_store_group_lag",
            "Elements stored after the group's commit, by topic, group and channel",
            labels=["topic", "group", "channel"],
        )
        for (topic, group, channel), count in sorted(snap.lag.items()):
            lag.add_metric([topic, group, str(channel)], count)
        yield lag
