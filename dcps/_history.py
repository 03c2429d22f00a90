"""TRANSIENT and PERSISTENT readers: the history a durability service kept, merged with live data.

A dcps DataReader with Durability TRANSIENT or PERSISTENT keeps its samples
in a :class:`DurableCache` (the SubscriptionKeys reader cache, keyed by the
topic's keys unless the reader has SubscriptionKeys, plus instance states
and duplicate suppression) and, when it is created, asks the durability
services of its namespace (``DCPS_DURABILITY_NAMESPACE``, default ``dcps``)
for what they keep of its topic in its partitions (:class:`HistoryFetch`).

- Until that history has been filed (or ``HISTORY_WAIT`` passed without any
  service answering) live samples stay in Cyclone, so history comes first
  and a KEEP_LAST reader does not let an old stored sample push out a newer
  live one.
- Samples are identified by writer GUID, source timestamp and a CRC of the
  serialised payload (:data:`~dcps.wire._durability.SampleIdentity`): a
  sample a live writer delivers (Cyclone replays a live TRANSIENT writer's
  own history) and a service delivers too is filed once, and so is a
  sample several redundant services keep.
- Instance states: a stored instance whose last writer is not matched with
  the reader arrives NOT_ALIVE_NO_WRITERS; one disposed (within the
  service's cleanup delay) NOT_ALIVE_DISPOSED; live unregistrations and
  disposes (invalid samples) change the state as for a plain reader, and a
  new sample revives the instance with the generation count DDS defines.
"""

from __future__ import annotations

import logging
import operator
import os
import threading
import time
import uuid
from collections.abc import Callable
from itertools import repeat
from typing import Any, TypeVar

from cyclonedds.core import GuardCondition, Listener, Policy, ReadCondition, WaitSet

import idl
import qos as q
from dcps._cyclone.binding import matched_readers
from dcps._gc import paused_gc
from dcps._sample import InstanceState
from dcps._subscription_keys import KeyedCache
from dcps.wire._durability import (
    FLAG_DISPOSED,
    FLAG_DISPOSES,
    MAX_HISTORY_PAGE,
    HistoryFetchRequest,
    PageColumns,
    decode_page,
    durability_partition,
    matched_services,
    payload_crc,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._names import ANY_STATE, REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from dcps.wire._sealing import Sealer
from dcps.wire._transport import Endpoint
from idl._batch_codec import BatchDecoder, PartialBatch, decoder_of

T = TypeVar("T")

__all__ = [
    "HISTORY_WAIT",
    "SERVICE_READER_NAME",
    "DurableCache",
    "HistoryFetch",
    "durability_namespace",
    "wait_for_durability_service",
]

_log = logging.getLogger("dcps.history")

#: How long a new TRANSIENT/PERSISTENT reader waits for a durability service before
#: it delivers live data without history (``wait_for_historical_data`` then times out).
HISTORY_WAIT = 3.0
#: After the first service has served its whole history, how long others may still answer.
_GRACE = 0.2
#: How long a service that started answering may take for its next page.
_PAGE_WAIT = 10.0
#: The environment variable naming the namespace whose durability services readers ask.
NAMESPACE_ENV = "DCPS_DURABILITY_NAMESPACE"


#: The entity name of a durability service's readers (how writers recognise them).
SERVICE_READER_NAME = "dcps-durability"
#: How long a new TRANSIENT/PERSISTENT dcps writer waits for a durability service to match
#: (``DCPS_DURABILITY_WRITER_WAIT`` seconds; 0 skips the wait).
WRITER_WAIT_ENV = "DCPS_DURABILITY_WRITER_WAIT"


def wait_for_durability_service(cyclone_writer: Any) -> bool:
    """Wait (bounded) until a durability service's reader matched a new writer.

    Cyclone DDS replays a TRANSIENT/PERSISTENT writer's history to remote late
    joiners never (only TRANSIENT_LOCAL's), so what the writer writes before a
    service matched it reaches no service. A dcps writer therefore waits up to
    ``DCPS_DURABILITY_WRITER_WAIT`` seconds (default 2) for one at creation;
    False if none matched in time (the writer works, unserved until one does).
    """
    try:
        seconds = float(os.environ.get(WRITER_WAIT_ENV, "2"))
    except ValueError:
        seconds = 2.0
    deadline = time.monotonic() + seconds
    delay = 0.005
    while True:
        for handle in matched_readers(cyclone_writer):
            data = cyclone_writer.get_matched_subscription_data(handle)
            if data is not None and _is_service(data.qos):
                return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)  # polling Cyclone's match list: no status condition per match kind
        delay = min(delay * 2, 0.05)


def _is_service(qos: Any) -> bool:
    try:
        return bool(qos[Policy.EntityName].name == SERVICE_READER_NAME)
    except (KeyError, AttributeError):
        return False


def durability_namespace() -> str:
    """The namespace whose durability services TRANSIENT/PERSISTENT readers ask."""
    return os.environ.get(NAMESPACE_ENV, "dcps")


class _Client:
    """One process's requests to the durability services of a domain and namespace.

    It knows the services its request writer is matched with (their
    incarnations, :func:`~dcps.wire._durability.matched_services`) and tells
    every registered :class:`HistoryFetch` when one appears, so that each
    service is asked once its reader matched (a request written earlier
    would reach nobody). With a namespace key (``DCPS_STORE_KEY_FILE``)
    requests are sealed for the service they address and a reply is filed
    only when sealed by the service it was asked of.
    """

    def __init__(self, domain_id: int, namespace: str, network: Any) -> None:
        self.endpoint = ep = Endpoint(domain_id, namespace, network)
        self.client_id = uuid.uuid4().hex
        self.sealer = Sealer.from_keys()
        self._writer = ep.writer(
            ep.request_topic,
            durability_partition(namespace),
            REQUEST_WRITER_QOS,
            seal=self._seal if self.sealer.enabled else None,
        )
        self._reader = ep.reader(
            ep.reply_topic, reply_partition(namespace, self.client_id), REPLY_QOS
        )
        self._ws = ep.own(WaitSet(ep.participant))
        self._cond = ReadCondition(self._reader, ANY_STATE)
        self._guard = ep.own(GuardCondition(ep.participant))
        self._ws.attach(self._cond)
        self._ws.attach(self._guard)
        self._lock = threading.Lock()
        self._next = 1
        self._handlers: dict[int, tuple[str, Callable[[Reply], None]]] = {}
        self._fetches: set[HistoryFetch] = set()
        self.services: set[str] = set()
        # Cyclone's thread only wakes ours: matches are handled on the client's thread
        listener = Listener(on_publication_matched=self._matched)  # type: ignore[no-untyped-call]
        self._writer.set_listener(listener)
        self._thread = threading.Thread(target=self._run, name="dcps-history", daemon=True)
        self._thread.start()
        self._guard.set(True)  # services matched before the listener was set

    def _matched(self, *_: object) -> None:
        self._guard.set(True)

    def _seal(self, request: Request) -> bytes | None:
        # requests name the service they address (HistoryFetchRequest.service, in ``member``)
        return self.sealer.seal_request(request, request.member)

    def watch(self, fetch: HistoryFetch) -> set[str]:
        """Tell ``fetch`` of services matched from now on; the services matched now."""
        with self._lock:
            self._fetches.add(fetch)
            return set(self.services)

    def unwatch(self, fetch: HistoryFetch) -> None:
        with self._lock:
            self._fetches.discard(fetch)

    def send(self, request: HistoryFetchRequest, on_reply: Callable[[Reply], None]) -> int:
        with self._lock:
            rid = self._next
            self._next += 1
            self._handlers[rid] = (request.service, on_reply)
        self._writer.write(request.to_wire(self.client_id, rid))
        return rid

    def forget(self, rid: int) -> None:
        with self._lock:
            self._handlers.pop(rid, None)

    def _run(self) -> None:
        while True:
            self._ws.wait(1_000_000_000)
            self._guard.set(False)
            self._check_services()
            for reply in self._reader.take(N=64):
                if not isinstance(reply, Reply):
                    continue
                with self._lock:
                    found = self._handlers.get(int(reply.request_id))
                # checked even when no longer awaited, so that forgeries are counted
                service = reply.text if found is None else found[0]
                if not self.sealer.accept_reply(reply, service) or found is None:
                    continue  # not sealed by the service asked (counted and logged)
                handler = found[1]
                try:
                    handler(reply)
                except Exception:
                    _log.exception("dcps: filing stored history failed")

    def _check_services(self) -> None:
        now = matched_services(self._writer)
        with self._lock:
            new = now - self.services
            self.services = now
            fetches = list(self._fetches) if new else []
        for fetch in fetches:
            fetch.services_matched(new)


_clients: dict[tuple[int, str], _Client] = {}
_clients_lock = threading.Lock()


def _client(domain_id: int, namespace: str, network: Any) -> _Client:
    with _clients_lock:
        found = _clients.get((domain_id, namespace))
        if found is None:
            found = _clients[(domain_id, namespace)] = _Client(domain_id, namespace, network)
        return found


class HistoryFetch:
    """One reader's fetch of its topic's stored history from every service that answers.

    Each durability service is asked once its request reader matched (the
    services matched when the reader is created at once); ``file(samples,
    late)`` is called (on the client's thread) with each page, ``late`` once
    ``done``. ``done`` is set once one service has served all it keeps (plus
    a short grace for the others), or when ``HISTORY_WAIT`` passed without
    one. A service that matches afterwards (it started later, restarted, or
    a cut link healed) is asked too, for what it keeps beyond what it served
    before, so history written while it was out of reach still arrives.
    """

    def __init__(
        self,
        domain_id: int,
        network: Any,
        topic: str,
        partitions: tuple[str, ...],
        file: Callable[[PageColumns, bool], None],
        on_done: Callable[[], None],
    ) -> None:
        self.topic = topic
        self.partitions = partitions or ("",)
        self._file = file
        self._on_done = on_done
        self.done = threading.Event()
        #: whether some service served its history (False: nobody answered in time)
        self.served = False
        self._served = threading.Event()
        self._closed = False
        self._lock = threading.Lock()
        self._rids: set[int] = set()
        self._cursors: dict[str, int] = {}  # service -> the cursor of its last page
        self._pending: set[str] = set()  # services asked that have not served all yet
        self._client = _client(domain_id, durability_namespace(), network)
        self._timer = threading.Timer(HISTORY_WAIT, self._finish)
        self._timer.daemon = True
        self._timer.start()
        self.services_matched(self._client.watch(self))

    def services_matched(self, services: set[str]) -> None:
        """Ask ``services`` (newly matched) for what they keep beyond what they served."""
        for service in sorted(services):
            with self._lock:
                if self._closed:
                    return
                after = self._cursors.get(service, 0)
                self._pending.add(service)
            self._ask(service, after)

    def _ask(self, service: str, after: int) -> None:
        request = HistoryFetchRequest(self.topic, self.partitions, after, MAX_HISTORY_PAGE, service)
        rid = self._client.send(request, self._on_reply)
        with self._lock:
            self._rids.add(rid)

    def _on_reply(self, reply: Reply) -> None:
        if self._closed:
            return
        if reply.status:
            _log.warning("dcps: a durability service refused a history fetch: %s", reply.error)
            return
        rid = int(reply.request_id)
        self._client.forget(rid)  # each request addresses one service: one answer
        with paused_gc():  # a page builds a few lists of one item per stored sample
            columns, cursor, more, service = decode_page(reply)
        with self._lock:
            self._rids.discard(rid)
            self._cursors[service] = max(cursor, self._cursors.get(service, 0))
        late = self.done.is_set()
        if not late and not self.served:  # a service answers: wait for its pages
            self._restart_timer(_PAGE_WAIT)
        if more:  # asked before filing: the service pages while this one is filed
            self._ask(service, cursor)
        if len(columns):
            with paused_gc():  # filing builds a value and an entry per sample
                self._file(columns, late)
        if more:
            return
        with self._lock:
            self._pending.discard(service)
            everyone = not self._pending
        if not self.served:
            self.served = True
            self._served.set()
        if late:
            return
        if everyone:  # every service asked has served all it keeps: no grace needed
            self._finish()
        else:
            self._restart_timer(_GRACE)

    def wait(self, timeout: float | None) -> bool:
        """Wait until some service served its whole history and it is filed (the others'
        grace included); False if that did not happen within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._served.wait(timeout):
            return False
        left = None if deadline is None else max(deadline - time.monotonic(), _GRACE * 2)
        return self.done.wait(left)

    def _restart_timer(self, seconds: float) -> None:
        with self._lock:
            if self.done.is_set():
                return
            self._timer.cancel()
            self._timer = threading.Timer(seconds, self._finish)
            self._timer.daemon = True
            self._timer.start()

    def _finish(self) -> None:
        with self._lock:
            if self.done.is_set():
                return
            self._timer.cancel()
            self.done.set()
        self._on_done()

    def close(self) -> None:
        """Stop listening for answers and for services."""
        self._client.unwatch(self)
        with self._lock:
            self._closed = True
            self._timer.cancel()
            rids, self._rids = self._rids, set()
        for rid in rids:
            self._client.forget(rid)
        self.done.set()


def _key_getter(data_type: type, reader_qos: q.DataReaderQos) -> Callable[[Any], Any]:
    keys = reader_qos[q.SubscriptionKeys]
    paths = tuple(keys.key_list) if keys.use_key_list else tuple(idl.key_fields(data_type))
    if not paths:
        return lambda _: ()
    return operator.attrgetter(*paths)


class DurableCache(KeyedCache[T]):
    """The cache of a TRANSIENT/PERSISTENT reader: instances by key, stored history merged
    with live samples once each, instance states kept as DDS defines them."""

    def __init__(self, data_type: type[T], reader_qos: q.DataReaderQos) -> None:
        super().__init__(data_type, reader_qos, key_of=_key_getter(data_type, reader_qos))
        try:
            self._batch_decode: BatchDecoder | None = decoder_of(data_type)
        except Exception:  # a type the batch codec does not know: one by one
            self._batch_decode = None
        # what was filed, by identity (SampleIdentity): per writer GUID, the source
        # timestamp and payload CRC as one int, ``timestamp << 32 | crc`` (exact: the
        # CRC takes 32 bits). Ints, not (writer, timestamp, crc) tuples: the collector
        # never tracks an int, and a late joiner files 100 k of them
        self._seen: dict[bytes, set[int]] = {}
        self._handle_keys: dict[int, Any] = {}  # Cyclone instance handle -> reader key
        self._newest: dict[Any, int] = {}  # reader key -> newest source timestamp filed
        # instances whose latest sample came from the service, with its writer: ALIVE only
        # while that writer is matched (Cyclone knows nothing of these instances)
        self.history_writers: dict[Any, bytes] = {}

    def file_live(
        self,
        rows: list[tuple[Any, tuple[Any, ...], int]],
        decode: Callable[[bytes], T],
        guid_of: Callable[[int], bytes],
        disposes_bit: int,
    ) -> bool:
        """File samples taken from Cyclone (valid or not); True if anything changed."""
        batch = []
        states: list[tuple[int, int]] = []
        for data, row, status in rows:
            if data is None:
                states.append((row[5], row[2]))
                continue
            writer = guid_of(row[6])
            mark = row[4] << 32 | payload_crc(data)
            known = self._seen.get(writer)
            if known is None:
                known = self._seen[writer] = set()
            elif mark in known:
                continue
            known.add(mark)
            sample = decode(data)
            key = self._key_of(sample)
            self._handle_keys[row[5]] = key
            if row[4] > self._newest.get(key, -(2**63)):
                self._newest[key] = row[4]
            self.history_writers.pop(key, None)
            batch.append((sample, row[4], row[6], bool(status & disposes_bit)))
        changed = self.add_batch(batch) if batch else False
        with self.lock:
            for handle, state in states:
                key = self._handle_keys.get(handle)
                instance = None if key is None else self._instances.get(key)
                if instance is None or instance.state is not InstanceState.ALIVE:
                    continue
                if state == int(InstanceState.NOT_ALIVE_DISPOSED):
                    instance.state = InstanceState.NOT_ALIVE_DISPOSED
                    changed = True
                elif state == int(InstanceState.NOT_ALIVE_NO_WRITERS):
                    instance.state = InstanceState.NOT_ALIVE_NO_WRITERS
                    changed = True
        return changed

    def file_history(
        self,
        page: PageColumns,
        decode: Callable[[bytes], T],
        live_writers: set[bytes],
        *,
        late: bool = False,
    ) -> bool:
        """File a page of stored samples (each once); set their instances' states. True if
        any was new.

        ``late``: the history arrives after live samples were filed (a service
        matched late, or again after a cut link healed): a stored sample older
        than the newest one filed for its instance is dropped, as a reader
        ordered by source timestamp drops it, so it cannot replace newer data.
        A late joiner files 100 k's: the usual page (every sample new, in
        timestamp order) goes through without a Python loop per sample.
        """
        seen = self._seen
        marks = list(
            map(operator.or_, map(operator.lshift, page.timestamps, repeat(32)), page.crcs)
        )
        one_writer = set(page.writers)  # the usual page: every sample from one writer
        known = seen.setdefault(one_writer.pop(), set()) if len(one_writer) == 1 else None
        if known is not None and known.isdisjoint(marks):  # the usual case, checked in C
            before = len(known)
            known.update(marks)
            if len(known) - before != len(marks):
                # a page repeating a sample (same identity, same sample): filed once
                once = dict(zip(marks, range(len(page)), strict=True))
                page = page.select(list(once.values()))
        else:
            fresh = []
            for i, (writer, mark) in enumerate(zip(page.writers, marks, strict=True)):
                known = seen.get(writer)
                if known is None:
                    known = seen[writer] = set()
                elif mark in known:
                    continue
                known.add(mark)
                fresh.append(i)
            if not fresh:
                return False
            page = page.select(fresh)
        stamps = page.timestamps
        if not all(map(operator.le, stamps, stamps[1:])):  # checked in C
            # pages come in the service's arrival order
            page = page.select(sorted(range(len(stamps)), key=stamps.__getitem__))
            stamps = page.timestamps
        values = self._decode_page(page, decode)
        if values is None:
            values = list(map(decode, page.payloads))
        keys = list(map(self._key_of, values))
        flags, writers = page.flags, page.writers
        newest, floor = self._newest, -(2**63)
        if late:
            batch = []
            batch_keys = []
            last: dict[Any, int] = {}
            for i, (data, key, ts) in enumerate(zip(values, keys, stamps, strict=True)):
                if ts >= newest.get(key, floor):
                    newest[key] = ts
                else:
                    continue
                batch.append((data, ts, 0, bool(flags[i] & FLAG_DISPOSES)))
                batch_keys.append(key)
                last[key] = i
            if not batch:
                return False
        else:  # a late joiner's 100 k samples: no Python loop per sample
            last = dict(zip(keys, range(len(keys)), strict=True))  # sorted: the last is the newest
            for key, i in last.items():
                if stamps[i] > newest.get(key, floor):
                    newest[key] = stamps[i]
            disposes = map(bool, map(operator.and_, flags, repeat(FLAG_DISPOSES)))
            batch = list(zip(values, stamps, repeat(0), disposes))
            batch_keys = keys
        self.add_batch(batch, batch_keys)
        with self.lock:
            for key, i in last.items():
                instance = self._instances.get(key)
                if instance is None:
                    continue
                if flags[i] & FLAG_DISPOSED:
                    instance.state = InstanceState.NOT_ALIVE_DISPOSED
                elif writers[i] not in live_writers and instance.state is InstanceState.ALIVE:
                    instance.state = InstanceState.NOT_ALIVE_NO_WRITERS
                elif instance.state is InstanceState.ALIVE:
                    self.history_writers[key] = writers[i]
        return True

    def _decode_page(self, page: PageColumns, decode: Callable[[bytes], T]) -> list[T] | None:
        """The page's samples decoded in one call (a numpy view over the payloads for
        fixed-size types, idl/_batch_codec.py), or None to decode one by one (a
        payload that does not decode then raises, as before)."""
        batch = self._batch_decode
        if batch is None:
            return None
        start, end = page.payload_region
        values = batch(page.blob[start:end], page.sizes)
        if isinstance(values, PartialBatch):
            return None
        return values

    def writers_gone(self, live_writers: set[bytes]) -> bool:
        """Instances known only from history whose writer is no longer matched lose their
        writers (NOT_ALIVE_NO_WRITERS); True if any did."""
        changed = False
        with self.lock:
            for key, writer in list(self.history_writers.items()):
                if writer in live_writers:
                    continue
                del self.history_writers[key]
                instance = self._instances.get(key)
                if instance is not None and instance.state is InstanceState.ALIVE:
                    instance.state = InstanceState.NOT_ALIVE_NO_WRITERS
                    changed = True
        return changed
