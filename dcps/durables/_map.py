"""Key-value maps in the store (TIBCO FTL maps, with JetStream KV's revisions and watches).

A :class:`KeyValueMap` names a map in the store of a namespace: string keys,
values of one ``idl`` type (the map records the type's identity; a client of
another type is refused). ``get``, ``put`` and ``delete`` are synchronous
(they return once the store has the change on disk); several clients share
one map; the map persists in the store file. Every change gets the map's next
*revision*; ``put(..., revision=r)`` is a compare-and-set (``revision=0``:
create only), and :meth:`KeyValueMap.watch` streams changes as they happen.
"""

from __future__ import annotations

import builtins
import contextlib
import enum
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import Future
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, Self, TypeVar, overload

import attrs
from cyclonedds.core import ReadCondition, WaitSet

from dcps._cyclone.binding import matched_writers
from dcps._timeout import Timeout, timeout_seconds
from dcps.wire._codes import Op
from dcps.wire._maps import (
    ANY_REVISION,
    MAX_MAP_ENTRIES,
    PUSH_DROPPED,
    MapChangesRequest,
    MapDeleted,
    MapDeleteRequest,
    MapDropped,
    MapDropRequest,
    MapEntries,
    MapGetRequest,
    MapListRequest,
    MapOpened,
    MapOpenRequest,
    MapPutRequest,
    MapPuts,
    MapValue,
    check_key,
    map_partition,
    unpack_entries,
)
from dcps.wire._messages import LiveBatch
from dcps.wire._names import ANY_STATE, BATCH_READER_QOS, check_name
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import delete_entity, drop_endpoint
from idl._batch_codec import decoder_of, encoder_of
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)
from idl._identity import type_identity
from idl._public import show_as

from ._store_link import StoreLink

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = [
    "KeyValueMap",
    "MapChange",
    "MapEntry",
    "MapOperation",
    "MapWatch",
    "RevisionMismatchError",
]

T = TypeVar("T")
#: Entries asked for per MAP_LIST / MAP_CHANGES request while iterating.
_PAGE = 1000
#: Put requests of one client awaiting the store before further puts are gathered.
_PUTS_IN_FLIGHT = 4
#: Seconds a watch waits for a missing push (history arriving late) before asking the store.
_GAP_GRACE = 0.25


class RevisionMismatchError(PreconditionNotMetError):
    """A compare-and-set found the key at another revision (``actual``; 0: absent)."""

    def __init__(self, map_name: str, key: str, expected: int, actual: int) -> None:
        self.map_name = map_name
        self.key = key
        self.expected = expected
        self.actual = actual
        wanted = "absent" if expected == 0 else f"at revision {expected}"
        found = "absent" if actual == 0 else f"at revision {actual}"
        super().__init__(
            f"key {key!r} of map {map_name!r} was expected {wanted} but is {found}; "
            "nothing was changed"
        )


@attrs.frozen
class MapEntry(Generic[T]):
    """A key, its value and the revision of its last change."""

    key: str
    value: T
    revision: int


class MapOperation(enum.Enum):
    """What a :class:`MapChange` did."""

    PUT = "put"
    """``key`` now holds ``value``."""
    DELETE = "delete"
    """``key`` was deleted."""
    DROP = "drop"
    """The whole map was dropped (every key deleted)."""


@attrs.frozen
class MapChange(Generic[T]):
    """One change of a map, as a watch delivers it, in revision order."""

    operation: MapOperation
    key: str
    value: T | None
    revision: int


def _type_name(cls: type) -> str:
    return str(getattr(cls, "__idl_typename__", cls.__name__))


class KeyValueMap(Generic[T]):
    """The map ``name`` in the store of ``namespace``, holding values of ``type``.

    Opening creates the map if the store does not have it, and records
    ``type``'s :func:`idl.type_identity`; a map recorded with another type
    raises :class:`~dcps.PreconditionNotMetError` naming both types (until it
    is :meth:`dropped <drop>`). Options as for ``dcps.channels``:
    ``timeout`` (per request) and ``connect_timeout`` are ``timedelta`` or
    seconds; ``store_key`` protects the namespace (``docs/security.md``).

    Mapping-style access works too: ``m[key]``, ``m[key] = value``,
    ``del m[key]``, ``key in m``, ``for key in m``.
    """

    def __init__(
        self,
        name: str,
        type: type[T],
        *,
        domain_id: int = 0,
        namespace: str = "dcps",
        network: NetworkConfig | None = None,
        timeout: Timeout = timedelta(seconds=10),
        connect_timeout: Timeout = timedelta(seconds=10),
        store_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        self.name = check_name("map name", name)
        if not isinstance(type, builtins.type) or not hasattr(type, "__idl__"):
            raise BadParameterError(f"a map's value type is an idl.Struct class, not {type!r}")
        self.type: builtins.type[T] = type
        self._identity = type_identity(type)
        self._encode = encoder_of(type)
        self._decode = decoder_of(type)
        self._link = StoreLink(
            domain_id=domain_id,
            namespace=namespace,
            network=network,
            timeout=timeout,
            connect_timeout=connect_timeout,
            store_key=store_key,
        )
        self._closed = False
        self._put_lock = threading.Lock()
        self._put_queue: list[tuple[str, bytes, int, Future[int]]] = []
        self._puts_in_flight = 0
        try:
            self._open()
        except BaseException:
            self._link.close()
            raise

    def _open(self) -> MapOpened:
        request = MapOpenRequest(self.name, _type_name(self.type), self._identity)
        return self._link.call(request, MapOpened.from_wire)

    # -- lifecycle -----------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Release this client's connection (the map stays in the store). Idempotent."""
        if not self._closed:
            with self._put_lock:
                self._closed = True
                queued, self._put_queue = self._put_queue, []
            for *_, fut in queued:
                fut.set_exception(AlreadyClosedError(f"map {self.name!r} was closed"))
            self._link.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def _check_open(self) -> None:
        if self._closed:
            raise AlreadyClosedError(f"map {self.name!r} is closed")

    # -- values --------------------------------------------------------------------------

    def _value_bytes(self, value: object) -> bytes:
        if not isinstance(value, self.type):
            raise BadParameterError(
                f"map {self.name!r} holds {_type_name(self.type)} values, "
                f"not {type(value).__name__}"
            )
        return bytes(self._encode(value))

    def _value(self, raw: bytes) -> T:
        return self._decode(raw, [len(raw)])[0]  # type: ignore[no-any-return]

    # -- reading -------------------------------------------------------------------------

    @property
    def revision(self) -> int:
        """The map's revision now: that of its latest change (0: never changed)."""
        self._check_open()
        return self._open().revision

    def entry(self, key: str) -> MapEntry[T] | None:
        """The key's value and revision, or None when the map has no such key."""
        self._check_open()
        got = self._link.call(MapGetRequest(self.name, check_key(key)), MapValue.from_wire)
        if got.value is None:
            return None
        return MapEntry(key, self._value(got.value), got.revision)

    @overload
    def get(self, key: str) -> T | None: ...
    @overload
    def get(self, key: str, default: T) -> T: ...
    def get(self, key: str, default: T | None = None) -> T | None:
        """The key's value, or ``default`` when the map has no such key."""
        found = self.entry(key)
        return default if found is None else found.value

    def __getitem__(self, key: str) -> T:
        found = self.entry(key)
        if found is None:
            raise KeyError(key)
        return found.value

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.entry(key) is not None

    def _pages(self, values: bool) -> Iterator[tuple[str, bytes | None, int]]:
        after = ""
        while True:
            self._check_open()
            page = self._link.call(
                MapListRequest(self.name, after, _PAGE, values), MapEntries.from_wire
            )
            yield from zip(page.keys, page.values, page.revisions, strict=True)
            if not page.more or not page.keys:
                return
            after = page.keys[-1]

    def keys(self) -> Iterator[str]:
        """Every key, in sorted order (read page by page: changes meanwhile may show)."""
        return (key for key, _, _ in self._pages(False))

    def __iter__(self) -> Iterator[str]:
        return self.keys()

    def entries(self) -> Iterator[MapEntry[T]]:
        """Every entry (key, value, revision), in key order."""
        for key, raw, revision in self._pages(True):
            if raw is not None:
                yield MapEntry(key, self._value(raw), revision)

    def items(self) -> Iterator[tuple[str, T]]:
        """Every ``(key, value)``, in key order."""
        return ((e.key, e.value) for e in self.entries())

    def values(self) -> Iterator[T]:
        """Every value, in key order."""
        return (e.value for e in self.entries())

    # -- changing ------------------------------------------------------------------------

    def _put_request(self, items: Iterable[tuple[str, T, int]]) -> MapPutRequest:
        keys: list[str] = []
        values: list[bytes] = []
        expected: list[int] = []
        for key, value, revision in items:
            keys.append(check_key(key))
            values.append(self._value_bytes(value))
            expected.append(revision)
        if not keys:
            raise BadParameterError(f"nothing to put into map {self.name!r}")
        return MapPutRequest(self.name, tuple(keys), tuple(values), tuple(expected), self._identity)

    def _revisions(self, request: MapPutRequest, puts: MapPuts) -> list[int]:
        if len(puts.revisions) != len(request.keys):
            raise BadParameterError("malformed MAP_PUT reply (a revision per entry)")
        for key, expected, revision, actual in zip(
            request.keys, request.expected, puts.revisions, puts.actual, strict=True
        ):
            if not revision:
                raise RevisionMismatchError(self.name, key, expected, actual)
        return list(puts.revisions)

    @staticmethod
    def _expected(revision: int | None) -> int:
        if revision is None:
            return ANY_REVISION
        if not isinstance(revision, int) or isinstance(revision, bool) or revision < 0:
            raise BadParameterError(f"a revision is an int >= 0 (0: absent), not {revision!r}")
        return revision

    def put_async(self, key: str, value: T, *, revision: int | None = None) -> Future[int]:
        """:meth:`put` without waiting: a future of the new revision.

        Puts pipeline: while :data:`_PUTS_IN_FLIGHT` put requests await the
        store, further ``put_async`` calls are gathered into the next request
        (one store transaction; each entry keeps its own outcome, so a failed
        compare-and-set fails only its own future). Puts of one client are
        applied in call order.
        """
        self._check_open()
        encoded = (check_key(key), self._value_bytes(value), self._expected(revision))
        fut: Future[int] = Future()
        with self._put_lock:
            self._put_queue.append((*encoded, fut))
            if self._puts_in_flight >= _PUTS_IN_FLIGHT:
                return fut
            batch = self._take_puts()
        self._send_puts(batch)
        return fut

    def _take_puts(self) -> list[tuple[str, bytes, int, Future[int]]]:
        """The queued puts for one request (called holding ``_put_lock``); counts it in flight."""
        batch = self._put_queue[:MAX_MAP_ENTRIES]
        del self._put_queue[:MAX_MAP_ENTRIES]
        if batch:
            self._puts_in_flight += 1
        return batch

    def _send_puts(self, batch: list[tuple[str, bytes, int, Future[int]]]) -> None:
        if not batch:
            return
        request = MapPutRequest(
            self.name,
            tuple(b[0] for b in batch),
            tuple(b[1] for b in batch),
            tuple(b[2] for b in batch),
            self._identity,
        )
        try:
            sent = self._link.call_async(request, MapPuts.from_wire)
        except BaseException as exc:
            self._puts_done(batch, None, exc)
            raise
        sent.add_done_callback(lambda f: self._puts_done(batch, f, None))

    def _puts_done(
        self,
        batch: list[tuple[str, bytes, int, Future[int]]],
        sent: Future[MapPuts] | None,
        failure: BaseException | None,
    ) -> None:
        """Complete each put's future; send the puts gathered meanwhile (any thread)."""
        with self._put_lock:
            self._puts_in_flight -= 1
            following = [] if self._closed else self._take_puts()
        if failure is None and sent is not None:
            failure = sent.exception()
        puts = None if failure is not None or sent is None else sent.result()
        if puts is not None and len(puts.revisions) != len(batch):
            failure = BadParameterError("malformed MAP_PUT reply (a revision per entry)")
        for i, (key, _, expected, fut) in enumerate(batch):
            if failure is not None or puts is None:
                fut.set_exception(failure or AlreadyClosedError("the map client was closed"))
            elif puts.revisions[i]:
                fut.set_result(puts.revisions[i])
            else:
                fut.set_exception(RevisionMismatchError(self.name, key, expected, puts.actual[i]))
        if following:
            with contextlib.suppress(Exception):  # the failed puts' futures carry the error
                self._send_puts(following)

    def put(self, key: str, value: T, *, revision: int | None = None) -> int:
        """Set ``key`` to ``value``; the new revision of the key.

        With ``revision`` the put is a compare-and-set: it happens only if the
        key is at that revision now (0: only if the key does not exist), else
        :class:`RevisionMismatchError` is raised and nothing changes.
        """
        return self._link.wait(Op.MAP_PUT, self.put_async(key, value, revision=revision))

    def create(self, key: str, value: T) -> int:
        """Put ``key`` only if it does not exist (else :class:`RevisionMismatchError`)."""
        return self.put(key, value, revision=0)

    def update(self, key: str, value: T, revision: int) -> int:
        """Put ``key`` only if it is at ``revision`` (else :class:`RevisionMismatchError`)."""
        return self.put(key, value, revision=revision)

    def __setitem__(self, key: str, value: T) -> None:
        self.put(key, value)

    def put_many_async(
        self, items: Mapping[str, T] | Iterable[tuple[str, T]]
    ) -> Future[dict[str, int]]:
        """Put many keys in one request and one store transaction; a future of their revisions."""
        self._check_open()
        pairs = items.items() if isinstance(items, Mapping) else items
        request = self._put_request((k, v, ANY_REVISION) for k, v in pairs)

        def decode(reply: Any) -> dict[str, int]:
            revisions = self._revisions(request, MapPuts.from_wire(reply))
            return dict(zip(request.keys, revisions, strict=True))

        return self._link.call_async(request, decode)

    def put_many(self, items: Mapping[str, T] | Iterable[tuple[str, T]]) -> dict[str, int]:
        """Put many keys at once (one request, one transaction); each key's new revision."""
        return self._link.wait(Op.MAP_PUT, self.put_many_async(items))

    def delete(self, key: str, *, revision: int | None = None) -> bool:
        """Delete ``key``; False when the map had no such key.

        With ``revision``, only if the key is at that revision (else
        :class:`RevisionMismatchError`).
        """
        self._check_open()
        expected = self._expected(revision)
        done = self._link.call(
            MapDeleteRequest(self.name, check_key(key), expected), MapDeleted.from_wire
        )
        if expected != ANY_REVISION and not done.revision and done.mismatch != expected:
            raise RevisionMismatchError(self.name, key, expected, done.mismatch)
        return done.existed

    def __delitem__(self, key: str) -> None:
        if not self.delete(key):
            raise KeyError(key)

    def drop(self) -> bool:
        """Delete the whole map (every key, and its recorded type); False if it was empty.

        Other clients' watches see a :attr:`MapOperation.DROP`. The map can be
        used again afterwards (by any type); revisions go on counting.
        """
        self._check_open()
        return self._link.call(MapDropRequest(self.name), MapDropped.from_wire).existed

    # -- watching ------------------------------------------------------------------------

    def watch(self, *, updates_only: bool = False) -> MapWatch[T]:
        """Stream the map's changes (:class:`MapWatch`, a context manager and iterator).

        First the current entries (the latest value of each key, in revision
        order) unless ``updates_only``, then every change as it happens.
        """
        self._check_open()
        return MapWatch(self, updates_only=updates_only)


class MapWatch(Generic[T]):
    """The changes of a map, in revision order: a context manager and an iterator.

    Changes are pushed by the store in the map's own DDS partition; a watch
    that misses some (DDS discovery is late, the store restarted) fetches the
    gap from the store's history of the map (its last 10,000 changes); one
    that fell further behind gets the latest value of every key changed
    meanwhile. :meth:`get` waits for the next change; iterating blocks for each.
    """

    def __init__(self, owner: KeyValueMap[T], *, updates_only: bool = False) -> None:
        self._map = owner
        link = owner._link
        self._link = link
        ep = link.endpoint
        self._reader = ep.reader(
            ep.batch_topic, map_partition(ep.namespace, owner.name), BATCH_READER_QOS
        )
        self._ws = ep.own(WaitSet(ep.participant))
        self._cond = ReadCondition(self._reader, ANY_STATE)
        self._ws.attach(self._cond)
        self._lock = threading.Lock()
        self._buffer: deque[MapChange[T]] = deque()
        self._closed = False
        self.revision = 0
        """The revision of the last change this watch has taken in."""
        try:
            opened = owner._open()  # the store makes the map's push writer: wait to match it
            deadline = time.monotonic() + link.timeout
            while not matched_writers(self._reader) and time.monotonic() < deadline:
                self._ws.wait(20_000_000)  # (the wait set has no condition for matching)
            if updates_only:
                self.revision = opened.revision
            else:
                self._catch_up(latest=True)
        except BaseException:
            self.close()
            raise

    def _catch_up(self, *, latest: bool = False) -> None:
        """Fetch the changes after :attr:`revision` from the store: every one (as far as the
        store's history of the map reaches), or with ``latest`` the latest state of each key."""
        m = self._map
        while True:
            page = self._link.call(
                MapChangesRequest(m.name, self.revision, _PAGE, latest), MapEntries.from_wire
            )
            if page.dropped:
                self._buffer.append(MapChange(MapOperation.DROP, "", None, page.dropped))
            for key, raw, revision in zip(page.keys, page.values, page.revisions, strict=True):
                if raw is None:
                    self._buffer.append(MapChange(MapOperation.DELETE, key, None, revision))
                else:
                    change = MapChange(MapOperation.PUT, key, m._value(raw), revision)
                    self._buffer.append(change)
                self.revision = revision
            if not page.more:
                self.revision = max(self.revision, page.map_revision)
                return

    def _pushes(self) -> list[LiveBatch]:
        return [
            p
            for p in self._reader.take(N=1024)
            if isinstance(p, LiveBatch)
            and p.topic == self._map.name
            and self._link.client.accept_map_change(p, self._map.name)
        ]

    def _take_pushes(self) -> None:
        pushes = self._pushes()
        # A late joiner gets the writer's history after newer live samples: wait a moment
        # for what is missing, and apply the pushes in revision order.
        deadline = time.monotonic() + _GAP_GRACE
        while pushes:
            pushes.sort(key=lambda p: int(p.first))
            if not self._gap(pushes) or time.monotonic() >= deadline:
                break
            self._ws.wait(int(_GAP_GRACE / 5 * 1e9))
            pushes += self._pushes()
        for push in pushes:
            self._apply(push)

    def _gap(self, pushes: list[LiveBatch]) -> bool:
        """Whether sorted ``pushes`` miss changes between :attr:`revision` and their last."""
        seen = self.revision
        for p in pushes:
            if int(p.timestamp) > seen:
                return True
            seen = max(seen, int(p.first) + max(1, len(p.sizes) // 2) - 1)
        return False

    def _apply(self, push: LiveBatch) -> None:
        """Take in one push: its new changes, or (after a gap) the store's account of them."""
        if push.channel == PUSH_DROPPED:
            if push.first <= self.revision:
                return
            if push.timestamp > self.revision:
                self._catch_up()
                return
            self._buffer.append(MapChange(MapOperation.DROP, "", None, int(push.first)))
            self.revision = int(push.first)
            return
        entries = unpack_entries(push.sizes, bytes(push.blob), what="a map push")
        last = int(push.first) + len(entries) - 1
        if last <= self.revision:
            return
        if push.timestamp > self.revision:  # missed changes: fetch them
            self._catch_up()
            return
        for i, (key, raw) in enumerate(entries):
            revision = int(push.first) + i
            if revision <= self.revision:
                continue
            if raw is None:
                self._buffer.append(MapChange(MapOperation.DELETE, key, None, revision))
            else:
                value = self._map._value(raw)
                self._buffer.append(MapChange(MapOperation.PUT, key, value, revision))
            self.revision = revision

    def get(self, timeout: Timeout | None = None) -> MapChange[T]:
        """The next change; waits up to ``timeout`` (None: forever), then raises
        :class:`~dcps.DcpsTimeoutError`."""
        limit = timeout_seconds(timeout, "timeout")
        deadline = None if limit is None else time.monotonic() + limit
        with self._lock:
            while True:
                if self._closed:
                    raise AlreadyClosedError(f"the watch of map {self._map.name!r} is closed")
                if self._buffer:
                    return self._buffer.popleft()
                self._take_pushes()
                if self._buffer:
                    continue
                left = 0.2 if deadline is None else min(0.2, deadline - time.monotonic())
                if left <= 0:
                    raise DcpsTimeoutError(
                        f"no change of map {self._map.name!r} within {limit:g} s"
                    )
                self._ws.wait(int(left * 1e9))

    def pending(self) -> list[MapChange[T]]:
        """Every change arrived so far, without waiting."""
        with self._lock:
            self._take_pushes()
            out = list(self._buffer)
            self._buffer.clear()
            return out

    def __iter__(self) -> Iterator[MapChange[T]]:
        return self

    def __next__(self) -> MapChange[T]:
        return self.get()

    def close(self) -> None:
        """Stop watching (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for entity in (self._cond, self._ws):
            delete_entity(entity)
        drop_endpoint(self._reader)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()


show_as(
    "dcps.durables",
    KeyValueMap,
    MapChange,
    MapEntry,
    MapOperation,
    MapWatch,
    RevisionMismatchError,
)
