"""Key-value maps in the store: the tables, the rules and the request handlers.

Each map is a row of ``maps`` (its value type's identity, its revision
counter, the revision at which it was last dropped) and one row of
``map_entries`` per key: the key's last revision and value (NULL: deleted,
kept as a tombstone so that watchers catching up see the deletion), and the
last :data:`MAP_HISTORY` changes in ``map_changes``, so that a watch that
missed pushes (DDS discovery, a restart) fetches every change it missed.
Every change is one transaction of the store file (``docs/store-format.md``),
then pushed to the map's partition (``dcps.wire._maps``). Only the service
thread uses this module.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from dcps.wire._admin_objects import MapReport
from dcps.wire._maps import (
    ANY_REVISION,
    PUSH_CHANGES,
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
    map_partition,
    pack_entries,
)
from dcps.wire._messages import LiveBatch
from dcps.wire._names import BATCH_WRITER_QOS
from idl._errors import PreconditionNotMetError

from ._log import ChannelLog
from ._log_format import sql_error

if TYPE_CHECKING:
    from ._service import Store, _Call

__all__ = ["MAP_HANDLERS", "MapTable", "drop_map"]


#: Changes kept per map in ``map_changes`` (older ones are compacted away): a watch that
#: fell further behind gets the latest value of each key instead of every change.
MAP_HISTORY: Final = 10_000
#: Revisions between two trims of a map's history.
_TRIM_EVERY: Final = 1000


class _Map:
    """What the store keeps in memory of one map (its row of ``maps``).

    ``floor``: every change from this revision on is in ``map_changes``.
    """

    __slots__ = ("dropped", "floor", "id", "identity", "name", "revision")

    def __init__(self, map_id: int, name: str, identity: str, revision: int, dropped: int) -> None:
        self.id = map_id
        self.name = name
        self.identity = identity
        self.revision = revision
        self.dropped = dropped
        self.floor = max(dropped + 1, revision - MAP_HISTORY + 1, 1)


class MapTable:
    """The maps of one store file: reads, changes (each one transaction) and checks."""

    def __init__(self, log: ChannelLog) -> None:
        self._log = log
        self._maps: dict[str, _Map] = {}
        #: The push writer of each map (made on its first change, deleted with the store's
        #: participant).
        self.writers: dict[str, Any] = {}
        try:
            for map_id, name, identity, revision, dropped in log._conn.execute(
                "SELECT id, name, type_identity, revision, dropped_revision FROM maps"
            ):
                m = self._maps[name] = _Map(map_id, name, identity, revision, dropped)
                oldest = log._conn.execute(
                    "SELECT min(revision) FROM map_changes WHERE map_id = ?", (map_id,)
                ).fetchone()[0]
                m.floor = max(m.floor, oldest or revision + 1)
        except sqlite3.Error as exc:
            raise sql_error(exc, log.path, "loading the maps") from exc

    def _read(self, doing: str, sql: str, args: tuple[Any, ...]) -> list[Any]:
        try:
            return self._log._conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise sql_error(exc, self._log.path, doing) from exc

    def _check_type(self, m: _Map, identity: str) -> None:
        if identity and m.identity and identity != m.identity:
            raise PreconditionNotMetError(
                f"map {m.name!r} holds values of type {m.identity!r} in the store "
                f"({self._log.path}), not {identity!r}: a map keeps the type it was created "
                "with (drop it to change the type)"
            )

    def _ensure(self, name: str, type_name: str, identity: str) -> _Map:
        """The map ``name``, created (in the current transaction) if new; its type checked."""
        m = self._maps.get(name)
        db = self._log._conn
        if m is None:
            cur = db.execute(
                "INSERT INTO maps (name, type_name, type_identity, revision, created_ns)"
                " VALUES (?, ?, ?, 0, ?)",
                (name, type_name, identity, self._log._clock()),
            )
            m = _Map(int(cur.lastrowid or 0), name, identity, 0, 0)
            self._maps[name] = m
            return m
        self._check_type(m, identity)
        if identity and not m.identity:
            db.execute(
                "UPDATE maps SET type_identity = ?, type_name = ? WHERE id = ?",
                (identity, type_name, m.id),
            )
            m.identity = identity
        return m

    def _forget_failed(
        self, name: str, known: bool, before: tuple[str, int, int, int] | None
    ) -> None:
        """Undo the in-memory side of a transaction that rolled back."""
        if not known:
            self._maps.pop(name, None)
        elif before is not None:
            m = self._maps[name]
            m.identity, m.revision, m.dropped, m.floor = before

    def _change(self, name: str, doing: str, body: Callable[[], Any]) -> Any:
        m = self._maps.get(name)
        before = None if m is None else (m.identity, m.revision, m.dropped, m.floor)

        def attempt() -> Any:
            # the log retries a transaction (e.g. after freeing its disk reserve): each try
            # starts from the state before the first, so no revision is counted twice
            if m is not None and before is not None:
                m.identity, m.revision, m.dropped, m.floor = before
            return body()

        try:
            return self._log._write(doing, attempt)
        except BaseException:
            self._forget_failed(name, m is not None, before)
            raise

    def _trim(self, m: _Map) -> None:
        """Keep the last MAP_HISTORY changes of the map (in the current transaction)."""
        if m.revision - m.floor + 1 >= MAP_HISTORY + _TRIM_EVERY:
            m.floor = m.revision - MAP_HISTORY + 1
            self._log._conn.execute(
                "DELETE FROM map_changes WHERE map_id = ? AND revision < ?", (m.id, m.floor)
            )

    # -- requests ------------------------------------------------------------------------

    def open(self, r: MapOpenRequest) -> MapOpened:
        """Create the map unless it exists; record or check its type."""
        m = self._maps.get(r.name)
        if m is not None:
            self._check_type(m, r.type_identity)
            if not r.type_identity or m.identity:
                return MapOpened(m.revision, m.identity)
        m = self._change(
            r.name,
            f"opening map {r.name!r}",
            lambda: self._ensure(r.name, r.type_name, r.type_identity),
        )
        return MapOpened(m.revision, m.identity)

    def put(self, r: MapPutRequest) -> tuple[MapPuts, LiveBatch | None]:
        """Put the entries whose expected revision matches, in one transaction."""
        db = self._log._conn

        def put() -> tuple[MapPuts, LiveBatch | None]:
            m = self._ensure(r.name, "", r.type_identity)
            current: dict[str, int] = {}
            if any(e != ANY_REVISION for e in r.expected):
                for key in set(r.keys):
                    row = db.execute(
                        "SELECT revision, value IS NULL FROM map_entries"
                        " WHERE map_id = ? AND key = ?",
                        (m.id, key),
                    ).fetchone()
                    current[key] = 0 if row is None or row[1] else int(row[0])
            prev = m.revision
            revisions: list[int] = []
            actual: list[int] = []
            rows: list[tuple[int, str, int, bytes]] = []
            changed_keys: list[str] = []
            changed_values: list[bytes | None] = []
            for key, value, expected in zip(r.keys, r.values, r.expected, strict=True):
                if expected != ANY_REVISION and current[key] != expected:
                    revisions.append(0)
                    actual.append(current[key])
                    continue
                m.revision += 1
                current[key] = m.revision
                revisions.append(m.revision)
                actual.append(0)
                rows.append((m.id, key, m.revision, value))
                changed_keys.append(key)
                changed_values.append(value)
            if rows:
                db.executemany(
                    "INSERT OR REPLACE INTO map_entries (map_id, key, revision, value)"
                    " VALUES (?, ?, ?, ?)",
                    rows,
                )
                db.executemany(
                    "INSERT INTO map_changes (map_id, key, revision, value) VALUES (?, ?, ?, ?)",
                    rows,
                )
                db.execute("UPDATE maps SET revision = ? WHERE id = ?", (m.revision, m.id))
                self._trim(m)
            push = None
            if changed_keys:
                push = _push(r.name, PUSH_CHANGES, prev + 1, prev, changed_keys, changed_values)
            return MapPuts(tuple(revisions), tuple(actual)), push

        result: tuple[MapPuts, LiveBatch | None] = self._change(
            r.name, f"putting {len(r.keys)} keys into map {r.name!r}", put
        )
        return result

    def get(self, r: MapGetRequest) -> MapValue:
        """The key's live value and revision (revision 0: absent)."""
        m = self._maps.get(r.name)
        if m is None:
            return MapValue(0, None)
        rows = self._read(
            f"reading key {r.key!r} of map {r.name!r}",
            "SELECT revision, value FROM map_entries WHERE map_id = ? AND key = ?",
            (m.id, r.key),
        )
        if not rows or rows[0][1] is None:
            return MapValue(0, None)
        return MapValue(int(rows[0][0]), bytes(rows[0][1]))

    def delete(self, r: MapDeleteRequest) -> tuple[MapDeleted, LiveBatch | None]:
        """Delete the key (a tombstone with a new revision) if it exists and matches."""
        m = self._maps.get(r.name)
        if m is None:
            return MapDeleted(False, 0), None
        db = self._log._conn

        def delete() -> tuple[MapDeleted, LiveBatch | None]:
            row = db.execute(
                "SELECT revision, value IS NULL FROM map_entries WHERE map_id = ? AND key = ?",
                (m.id, r.key),
            ).fetchone()
            current = 0 if row is None or row[1] else int(row[0])
            if r.expected != ANY_REVISION and current != r.expected:
                return MapDeleted(current != 0, 0, current), None
            if not current:
                return MapDeleted(False, 0), None
            prev = m.revision
            m.revision += 1
            db.execute(
                "UPDATE map_entries SET revision = ?, value = NULL WHERE map_id = ? AND key = ?",
                (m.revision, m.id, r.key),
            )
            db.execute(
                "INSERT INTO map_changes (map_id, key, revision, value) VALUES (?, ?, ?, NULL)",
                (m.id, r.key, m.revision),
            )
            db.execute("UPDATE maps SET revision = ? WHERE id = ?", (m.revision, m.id))
            self._trim(m)
            push = _push(r.name, PUSH_CHANGES, m.revision, prev, [r.key], [None])
            return MapDeleted(True, m.revision), push

        result: tuple[MapDeleted, LiveBatch | None] = self._change(
            r.name, f"deleting key {r.key!r} of map {r.name!r}", delete
        )
        return result

    def list(self, r: MapListRequest) -> MapEntries:
        """Live entries in key order after ``r.after``."""
        m = self._maps.get(r.name)
        if m is None:
            return MapEntries((), (), (), False, 0)
        column = "value" if r.values else "NULL"
        rows = self._read(
            f"listing map {r.name!r}",
            f"SELECT key, revision, {column} FROM map_entries"
            " WHERE map_id = ? AND key > ? AND value IS NOT NULL ORDER BY key LIMIT ?",
            (m.id, r.after, r.limit + 1),
        )
        more = len(rows) > r.limit
        rows = rows[: r.limit]
        return MapEntries(
            tuple(row[0] for row in rows),
            tuple(None if row[2] is None else bytes(row[2]) for row in rows),
            tuple(int(row[1]) for row in rows),
            more,
            m.revision,
        )

    def changes(self, r: MapChangesRequest) -> MapEntries:
        """Entries (tombstones included) changed after ``r.after``, in revision order."""
        m = self._maps.get(r.name)
        if m is None:
            return MapEntries((), (), (), False, 0)
        # every change while the history has them; else the latest state of each key
        history = not r.latest and r.after + 1 >= m.floor
        table = "map_changes" if history else "map_entries"
        rows = self._read(
            f"reading the changes of map {r.name!r}",
            f"SELECT key, revision, value FROM {table}"
            " WHERE map_id = ? AND revision > ? ORDER BY revision LIMIT ?",
            (m.id, r.after, r.limit + 1),
        )
        more = len(rows) > r.limit
        rows = rows[: r.limit]
        return MapEntries(
            tuple(row[0] for row in rows),
            tuple(None if row[2] is None else bytes(row[2]) for row in rows),
            tuple(int(row[1]) for row in rows),
            more,
            m.revision,
            m.dropped if m.dropped > r.after else 0,
        )

    def drop(self, r: MapDropRequest) -> tuple[MapDropped, LiveBatch | None]:
        """Delete every key of the map and forget its type; its revisions go on."""
        m = self._maps.get(r.name)
        if m is None:
            return MapDropped(False), None
        db = self._log._conn

        def drop() -> tuple[MapDropped, LiveBatch | None]:
            live = db.execute(
                "SELECT count(*) FROM map_entries WHERE map_id = ? AND value IS NOT NULL",
                (m.id,),
            ).fetchone()[0]
            existed = bool(live or m.identity)
            prev = m.revision
            m.revision += 1
            m.dropped = m.revision
            m.identity = ""
            db.execute("DELETE FROM map_entries WHERE map_id = ?", (m.id,))
            db.execute("DELETE FROM map_changes WHERE map_id = ?", (m.id,))
            m.floor = m.revision + 1
            db.execute(
                "UPDATE maps SET revision = ?, dropped_revision = ?, type_identity = '',"
                " type_name = '' WHERE id = ?",
                (m.revision, m.dropped, m.id),
            )
            return MapDropped(existed), _push(r.name, PUSH_DROPPED, m.revision, prev, [], [])

        result: tuple[MapDropped, LiveBatch | None] = self._change(
            r.name, f"dropping map {r.name!r}", drop
        )
        return result

    def reports(self, name: str = "") -> tuple[MapReport, ...]:
        """The maps (``name``: only that one) as ``dcps maps`` shows them: live keys and
        their values' bytes, revision, last drop, changes kept.

        Raises :class:`~dcps.PreconditionNotMetError` when there is no map ``name``.
        """
        if name and name not in self._maps:
            raise PreconditionNotMetError(f"no map {name!r} in the store ({self._log.path})")
        chosen = [self._maps[name]] if name else [self._maps[n] for n in sorted(self._maps)]
        out = []
        for m in chosen:
            ((type_name, keys, size, history),) = self._read(
                f"describing map {m.name!r}",
                "SELECT (SELECT type_name FROM maps WHERE id = ?),"
                " (SELECT count(*) FROM map_entries WHERE map_id = ? AND value IS NOT NULL),"
                " (SELECT coalesce(sum(length(key) + length(value)), 0) FROM map_entries"
                "  WHERE map_id = ? AND value IS NOT NULL),"
                " (SELECT count(*) FROM map_changes WHERE map_id = ?)",
                (m.id,) * 4,
            )
            out.append(
                MapReport(
                    m.name,
                    str(type_name or ""),
                    m.identity,
                    int(keys),
                    int(size),
                    m.revision,
                    m.dropped,
                    int(history),
                )
            )
        return tuple(out)


def _push(
    name: str, event: int, first: int, prev: int, keys: list[str], values: list[bytes | None]
) -> LiveBatch:
    sizes, blob = pack_entries(keys, values)
    return LiveBatch(topic=name, channel=event, first=first, timestamp=prev, sizes=sizes, blob=blob)


# -- the store's handlers (registered in dcps/store/_service.py) --------------------------------


def _writer(store: Store, name: str) -> Any:
    """The map's push writer, made on first use (a MAP_OPEN makes it, so that a watch can
    match it before the changes it must not miss)."""
    writers = store._maps.writers
    writer = writers.get(name)
    if writer is None:
        ep = store._endpoint
        assert ep is not None
        writer = ep.writer(
            ep.batch_topic,
            map_partition(store.namespace, name),
            BATCH_WRITER_QOS,
            seal=lambda push: store._sealer.seal_map_change(push, store.incarnation),
        )
        writers[name] = writer
    return writer


def _send_push(store: Store, name: str, push: LiveBatch | None) -> None:
    """Write a change to the map's partition."""
    if push is not None:
        _writer(store, name).write(push)


def _on_open(store: Store, call: _Call[MapOpenRequest]) -> None:
    opened = store._maps.open(call.request)
    _writer(store, call.request.name)
    store._reply(call, opened)


def _on_put(store: Store, call: _Call[MapPutRequest]) -> None:
    answer, push = store._maps.put(call.request)
    store._reply(call, answer)
    _send_push(store, call.request.name, push)


def _on_get(store: Store, call: _Call[MapGetRequest]) -> None:
    store._reply(call, store._maps.get(call.request))


def _on_delete(store: Store, call: _Call[MapDeleteRequest]) -> None:
    answer, push = store._maps.delete(call.request)
    store._reply(call, answer)
    _send_push(store, call.request.name, push)


def _on_list(store: Store, call: _Call[MapListRequest]) -> None:
    store._reply(call, store._maps.list(call.request))


def _on_changes(store: Store, call: _Call[MapChangesRequest]) -> None:
    store._reply(call, store._maps.changes(call.request))


def drop_map(store: Store, name: str) -> MapDropped:
    """Drop map ``name`` and tell its watchers (MAP_DROP, and ``dcps maps delete``)."""
    answer, push = store._maps.drop(MapDropRequest(name))
    _send_push(store, name, push)
    return answer


def _on_drop(store: Store, call: _Call[MapDropRequest]) -> None:
    store._reply(call, drop_map(store, call.request.name))


#: Map request kind -> handler, merged into ``Store._HANDLERS``.
MAP_HANDLERS: Final[dict[int, Callable[[Any, Any], None]]] = {
    MapOpenRequest.op: _on_open,
    MapPutRequest.op: _on_put,
    MapGetRequest.op: _on_get,
    MapDeleteRequest.op: _on_delete,
    MapListRequest.op: _on_list,
    MapChangesRequest.op: _on_changes,
    MapDropRequest.op: _on_drop,
}
