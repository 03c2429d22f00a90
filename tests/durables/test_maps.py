"""Key-value maps in the store (FTL maps, with JetStream KV's revisions, CAS and watches).

Every test talks to a real store process (``python -m dcps.store``) over Cyclone
DDS; clients are real ``KeyValueMap`` objects, and raw protocol requests play
misbehaving clients.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps import BadParameterError, DcpsTimeoutError, PreconditionNotMetError
from dcps.channels._client import StoreClient
from dcps.durables._map import (
    KeyValueMap,
    MapChange,
    MapOperation,
    RevisionMismatchError,
)
from dcps.wire._codes import Op
from dcps.wire._maps import MapPutRequest, pack_entries
from dcps.wire._messages import LiveBatch, Request
from dcps.wire._names import BATCH_WRITER_QOS
from dcps.wire._requests import decode_request
from dcps.wire._transport import Endpoint, drop_endpoint
from tests.support.peers.maps_queues_peer import Counter, Task
from tests.support.store_process import StoreProcess

TIMEOUT = 20.0


@pytest.fixture(scope="module")
def where(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One store process for the module's tests (each test uses maps of its own)."""
    base = int(os.environ.get("DCPS_TEST_DOMAIN_BASE", "1"))
    domain = base + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))
    namespace = f"maps_{uuid.uuid4().hex[:8]}"
    store = StoreProcess(tmp_path_factory.mktemp("maps") / "store", domain, namespace)
    try:
        yield {"domain_id": domain, "namespace": namespace, "store": store}
    finally:
        store.kill()


@pytest.fixture
def kw(where: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments reaching the module's store."""
    return {"domain_id": where["domain_id"], "namespace": where["namespace"]}


@pytest.fixture
def name() -> str:
    """A map name no other test uses."""
    return f"m_{uuid.uuid4().hex[:10]}"


@pytest.fixture
def counters(name: str, kw: dict[str, Any]) -> Iterator[KeyValueMap[Counter]]:
    """A map of counters."""
    with KeyValueMap(name, Counter, **kw) as m:
        yield m


class TestGetPutDelete:
    def test_put_then_get_returns_the_value(self, counters: KeyValueMap[Counter]) -> None:
        """A put value is what get returns, with the revision put returned."""
        rev = counters.put("a", Counter(1, "w"))
        assert counters.get("a") == Counter(1, "w")
        entry = counters.entry("a")
        assert entry is not None
        assert (entry.key, entry.value, entry.revision) == ("a", Counter(1, "w"), rev)

    def test_missing_key(self, counters: KeyValueMap[Counter]) -> None:
        """A missing key reads as None, the default, KeyError for [] and not ``in``."""
        assert counters.get("nope") is None
        assert counters.get("nope", Counter(7, "d")) == Counter(7, "d")
        assert "nope" not in counters
        with pytest.raises(KeyError):
            counters["nope"]

    def test_mapping_style(self, counters: KeyValueMap[Counter]) -> None:
        """m[k] = v, m[k], k in m and del m[k] behave like a dict."""
        counters["x"] = Counter(3, "m")
        assert counters["x"] == Counter(3, "m")
        assert "x" in counters
        del counters["x"]
        assert "x" not in counters
        with pytest.raises(KeyError):
            del counters["x"]

    def test_delete_reports_whether_the_key_existed(self, counters: KeyValueMap[Counter]) -> None:
        """delete is True for a key that was there, False after, and the key reads absent."""
        counters.put("d", Counter(1, "w"))
        assert counters.delete("d") is True
        assert counters.delete("d") is False
        assert counters.get("d") is None

    def test_overwrite_keeps_the_latest(self, counters: KeyValueMap[Counter]) -> None:
        """A second put replaces the value."""
        counters.put("k", Counter(1, "a"))
        counters.put("k", Counter(2, "b"))
        assert counters.get("k") == Counter(2, "b")

    def test_several_clients_share_one_map(
        self, counters: KeyValueMap[Counter], name: str, kw: dict[str, Any]
    ) -> None:
        """What one client puts, another reads, deletes and overwrites, and the first sees it."""
        with KeyValueMap(name, Counter, **kw) as other:
            counters.put("shared", Counter(1, "first"))
            assert other.get("shared") == Counter(1, "first")
            other.put("shared", Counter(2, "second"))
            assert counters.get("shared") == Counter(2, "second")
            other.delete("shared")
            assert counters.get("shared") is None

    def test_put_async_pipelines(self, counters: KeyValueMap[Counter]) -> None:
        """Many puts in flight at once all land, with increasing revisions."""
        futures = [counters.put_async(f"p{i}", Counter(i, "a")) for i in range(200)]
        revisions = [f.result(TIMEOUT) for f in futures]
        assert revisions == sorted(revisions)
        assert len(set(revisions)) == 200
        assert counters.get("p199") == Counter(199, "a")


class TestIteration:
    def test_keys_items_values_entries(self, counters: KeyValueMap[Counter]) -> None:
        """Iteration lists every live key in key order, with values and revisions."""
        revs = counters.put_many({"b": Counter(2, "x"), "a": Counter(1, "x"), "c": Counter(3, "x")})
        counters.delete("b")
        assert list(counters.keys()) == ["a", "c"]
        assert list(counters) == ["a", "c"]
        assert list(counters.items()) == [("a", Counter(1, "x")), ("c", Counter(3, "x"))]
        assert list(counters.values()) == [Counter(1, "x"), Counter(3, "x")]
        assert [(e.key, e.revision) for e in counters.entries()] == [
            ("a", revs["a"]),
            ("c", revs["c"]),
        ]

    def test_iteration_pages_through_large_maps(self, counters: KeyValueMap[Counter]) -> None:
        """A map larger than one reply page is listed whole, once per key."""
        keys = [f"k{i:05d}" for i in range(2500)]
        for start in range(0, len(keys), 1000):
            counters.put_many(
                {k: Counter(i, "x") for i, k in enumerate(keys[start : start + 1000])}
            )
        assert list(counters.keys()) == keys
        assert sum(1 for _ in counters.values()) == 2500

    def test_drop_deletes_the_whole_map(
        self, counters: KeyValueMap[Counter], name: str, kw: dict[str, Any]
    ) -> None:
        """drop removes every key for every client; the name can then hold another type."""
        counters.put_many({"a": Counter(1, "x"), "b": Counter(2, "x")})
        assert counters.drop() is True
        assert list(counters.keys()) == []
        assert counters.get("a") is None
        with KeyValueMap(name, Task, **kw) as retyped:
            retyped.put("t", Task(1, "now tasks"))
            assert retyped.get("t") == Task(1, "now tasks")


class TestRevisions:
    def test_each_change_gets_the_next_revision(self, counters: KeyValueMap[Counter]) -> None:
        """Revisions count every change of the map: puts and deletes."""
        r1 = counters.put("a", Counter(1, "x"))
        r2 = counters.put("b", Counter(1, "x"))
        counters.delete("a")
        r4 = counters.put("a", Counter(2, "x"))
        assert (r2, r4) == (r1 + 1, r1 + 3)
        assert counters.revision == r4

    def test_create_only(self, counters: KeyValueMap[Counter]) -> None:
        """create succeeds once; a second fails naming the key's revision, changing nothing."""
        rev = counters.create("c", Counter(1, "first"))
        with pytest.raises(RevisionMismatchError) as caught:
            counters.create("c", Counter(2, "second"))
        assert (caught.value.key, caught.value.expected, caught.value.actual) == ("c", 0, rev)
        assert isinstance(caught.value, PreconditionNotMetError)
        assert counters.get("c") == Counter(1, "first")

    def test_compare_and_set(self, counters: KeyValueMap[Counter]) -> None:
        """update with the current revision wins; with a stale one it fails and nothing changes."""
        r1 = counters.put("k", Counter(1, "x"))
        r2 = counters.update("k", Counter(2, "x"), r1)
        with pytest.raises(RevisionMismatchError) as caught:
            counters.update("k", Counter(3, "stale"), r1)
        assert caught.value.actual == r2
        assert counters.get("k") == Counter(2, "x")

    def test_update_of_a_missing_key_fails(self, counters: KeyValueMap[Counter]) -> None:
        """update of an absent key reports it absent (actual 0)."""
        with pytest.raises(RevisionMismatchError) as caught:
            counters.update("ghost", Counter(1, "x"), 5)
        assert caught.value.actual == 0
        assert counters.get("ghost") is None

    def test_delete_with_revision(self, counters: KeyValueMap[Counter]) -> None:
        """A conditional delete with a stale revision fails; with the current one it deletes."""
        r1 = counters.put("k", Counter(1, "x"))
        r2 = counters.put("k", Counter(2, "x"))
        with pytest.raises(RevisionMismatchError):
            counters.delete("k", revision=r1)
        assert counters.get("k") == Counter(2, "x")
        assert counters.delete("k", revision=r2) is True
        assert counters.get("k") is None

    def test_cas_race_between_two_clients_has_one_winner(
        self, name: str, kw: dict[str, Any]
    ) -> None:
        """Two clients updating from the same revision at once: exactly one wins, every round."""
        with KeyValueMap(name, Counter, **kw) as a, KeyValueMap(name, Counter, **kw) as b:
            rev = a.put("race", Counter(0, "start"))
            for round_ in range(20):
                barrier = threading.Barrier(2)
                outcome: dict[str, Any] = {}
                threads = [
                    threading.Thread(target=_attempt, args=(m, who, rev, round_, barrier, outcome))
                    for m, who in ((a, "a"), (b, "b"))
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(TIMEOUT)
                winners = [w for w, o in outcome.items() if isinstance(o, int)]
                assert len(winners) == 1, outcome
                rev = outcome[winners[0]]
                assert a.get("race") == Counter(round_, winners[0])

    def test_cas_counter_across_processes(
        self, name: str, kw: dict[str, Any], where: dict[str, Any]
    ) -> None:
        """Two processes incrementing one counter by CAS lose no increment."""
        rounds = 25
        with KeyValueMap(name, Counter, **kw) as m:
            m.put("n", Counter(0, "start"))
            peers = [_cas_peer(where, name, rounds, f"p{i}") for i in range(2)]
            try:
                for p in peers:
                    assert p.stdout is not None
                    assert p.stdout.readline().strip() == "ready"
                for p in peers:
                    assert p.stdin is not None
                    p.stdin.write("go\n")
                    p.stdin.flush()
                outputs = [p.communicate(timeout=120)[0].split() for p in peers]
            finally:
                for p in peers:
                    p.kill()
            won = [int(o[i + 1]) for o in outputs for i, w in enumerate(o) if w == "won"]
            assert len(won) == 2 * rounds
            assert len(set(won)) == len(won)
            final = m.entry("n")
            assert final is not None
            assert final.value.value == 2 * rounds
            assert final.revision == max(won)


def _attempt(
    m: KeyValueMap[Counter],
    who: str,
    base: int,
    round_: int,
    barrier: threading.Barrier,
    outcome: dict[str, Any],
) -> None:
    """One racer's compare-and-set from revision ``base``: its revision, or the error."""
    barrier.wait()
    try:
        outcome[who] = m.update("race", Counter(round_, who), base)
    except RevisionMismatchError as exc:
        outcome[who] = exc


def _cas_peer(where: dict[str, Any], name: str, rounds: int, who: str) -> subprocess.Popen[str]:
    """A process incrementing key ``n`` of map ``name`` by CAS ``rounds`` times."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.peers.maps_queues_peer", "cas",
         "--domain", str(where["domain_id"]), "--namespace", where["namespace"],
         "--map", name, "--key", "n", "--rounds", str(rounds), "--name", who],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip


class TestWatch:
    def test_watch_sees_every_change_in_order(self, counters: KeyValueMap[Counter]) -> None:
        """A live watch delivers each put and delete once, in revision order, with values."""
        with counters.watch(updates_only=True) as watch:
            expected: list[tuple[MapOperation, str, int]] = []
            for i in range(150):
                key = f"k{i % 7}"
                if i % 5 == 4:
                    counters.delete(key)
                    expected.append((MapOperation.DELETE, key, -1))
                else:
                    counters.put(key, Counter(i, "w"))
                    expected.append((MapOperation.PUT, key, i))
            # a delete of a key already deleted changes nothing and is not a change
            effective = list(_effective(expected))
            seen = [watch.get(TIMEOUT) for _ in effective]
            with pytest.raises(DcpsTimeoutError):
                watch.get(0.3)
        got = [(c.operation, c.key, c.value.value if c.value else -1) for c in seen]
        assert got == effective
        revisions = [c.revision for c in seen]
        assert revisions == list(range(revisions[0], revisions[0] + len(revisions)))

    def test_watch_starts_with_current_values(self, counters: KeyValueMap[Counter]) -> None:
        """Without updates_only a watch first delivers the latest value of every key."""
        counters.put("a", Counter(1, "old"))
        counters.put("b", Counter(1, "x"))
        counters.put("a", Counter(2, "new"))
        with counters.watch() as watch:
            first = [watch.get(TIMEOUT) for _ in range(2)]
            counters.put("c", Counter(3, "live"))
            live = watch.get(TIMEOUT)
        assert [(c.key, c.value) for c in first] == [
            ("b", Counter(1, "x")),
            ("a", Counter(2, "new")),
        ]
        assert (live.key, live.value) == ("c", Counter(3, "live"))

    def test_updates_only_skips_the_past(self, counters: KeyValueMap[Counter]) -> None:
        """updates_only delivers nothing of what happened before the watch."""
        counters.put("old", Counter(1, "x"))
        with counters.watch(updates_only=True) as watch:
            with pytest.raises(DcpsTimeoutError):
                watch.get(0.3)
            counters.put("new", Counter(2, "x"))
            assert watch.get(TIMEOUT).key == "new"

    def test_watch_sees_changes_of_other_clients_and_drop(
        self, counters: KeyValueMap[Counter], name: str, kw: dict[str, Any]
    ) -> None:
        """Another client's puts and its drop of the whole map reach the watch."""
        with counters.watch(updates_only=True) as watch, KeyValueMap(name, Counter, **kw) as other:
            other.put("x", Counter(1, "other"))
            other.drop()
            changes = [watch.get(TIMEOUT) for _ in range(2)]
        assert [(c.operation, c.key) for c in changes] == [
            (MapOperation.PUT, "x"),
            (MapOperation.DROP, ""),
        ]

    def test_a_forged_gap_makes_the_watch_fetch_the_truth(
        self, counters: KeyValueMap[Counter], kw: dict[str, Any], name: str
    ) -> None:
        """A push claiming changes the watch never saw makes it ask the store, which has only
        the real changes: the forged value is not delivered."""
        counters.put("a", Counter(1, "real"))
        with counters.watch() as watch:
            assert watch.get(TIMEOUT).value == Counter(1, "real")
            ep = Endpoint(kw["domain_id"], kw["namespace"])
            try:
                from dcps.wire._maps import map_partition

                writer = ep.writer(
                    ep.batch_topic, map_partition(kw["namespace"], name), BATCH_WRITER_QOS
                )
                sizes, blob = pack_entries(["a"], [Counter(666, "forged").serialize()])
                writer.write(
                    LiveBatch(topic=name, channel=0, first=watch.revision + 50,
                              timestamp=watch.revision + 49, sizes=sizes, blob=blob)
                )  # fmt: skip
                counters.put("b", Counter(2, "real"))
                change = watch.get(TIMEOUT)
                drop_endpoint(writer)
            finally:
                ep.close()
        assert (change.key, change.value) == ("b", Counter(2, "real"))


def _effective(
    ops: list[tuple[MapOperation, str, int]],
) -> Iterator[tuple[MapOperation, str, int]]:
    live: set[str] = set()
    for op, key, value in ops:
        if op is MapOperation.DELETE:
            if key not in live:
                continue
            live.discard(key)
        else:
            live.add(key)
        yield op, key, value


class TestTypes:
    def test_wrong_value_type_is_refused(self, counters: KeyValueMap[Counter]) -> None:
        """Putting a value of another type raises BadParameterError and stores nothing."""
        with pytest.raises(BadParameterError, match="Counter"):
            counters.put("k", Task(1, "x"))  # type: ignore[arg-type]
        assert counters.get("k") is None

    def test_another_type_cannot_open_the_map(
        self, counters: KeyValueMap[Counter], name: str, kw: dict[str, Any]
    ) -> None:
        """A client of another value type is refused, naming the map and both types."""
        counters.put("k", Counter(1, "x"))
        with pytest.raises(PreconditionNotMetError, match=name) as caught:
            KeyValueMap(name, Task, **kw)
        assert "kvtest::Counter" in str(caught.value)
        assert "kvtest::Task" in str(caught.value)

    def test_a_raw_put_of_another_type_is_refused(
        self, counters: KeyValueMap[Counter], name: str, kw: dict[str, Any]
    ) -> None:
        """A raw MAP_PUT naming another type identity is refused by the store; nothing stored."""
        from idl._identity import type_identity

        ep = Endpoint(kw["domain_id"], kw["namespace"])
        client = StoreClient(ep)
        try:
            client.connect(TIMEOUT)
            request = MapPutRequest(
                name, ("k",), (Task(1, "x").serialize(),), (-1,), type_identity(Task)
            )
            fut = client.request_async(request, lambda r: r)
            with pytest.raises(PreconditionNotMetError, match="kvtest::Task"):
                client.wait_for(Op.MAP_PUT, fut, TIMEOUT)
        finally:
            client.close()
            ep.close()
        assert counters.get("k") is None


class TestBadInput:
    @pytest.mark.parametrize("key", ["", "a\x00b", "x" * 1025, 7, None])
    def test_bad_keys(self, counters: KeyValueMap[Counter], key: Any) -> None:
        """Empty, NUL-holding, over-long and non-str keys raise BadParameterError."""
        with pytest.raises(BadParameterError, match="key"):
            counters.put(key, Counter(1, "x"))
        with pytest.raises(BadParameterError, match="key"):
            counters.get(key)

    def test_bad_revision(self, counters: KeyValueMap[Counter]) -> None:
        """A negative revision is refused before anything is sent."""
        with pytest.raises(BadParameterError, match="revision"):
            counters.put("k", Counter(1, "x"), revision=-3)

    @pytest.mark.parametrize("bad", ["a*b", "", "q?"])
    def test_bad_map_names(self, bad: str, kw: dict[str, Any]) -> None:
        """Map names that are empty or hold partition wildcards are refused."""
        with pytest.raises(BadParameterError):
            KeyValueMap(bad, Counter, **kw)

    def test_not_an_idl_type(self, kw: dict[str, Any]) -> None:
        """The value type must be an idl.Struct class."""
        with pytest.raises(BadParameterError, match=r"idl\.Struct"):
            KeyValueMap("m", dict, **kw)

    @pytest.mark.parametrize(
        ("fields", "problem"),
        [
            ({"sizes": [1, 3], "blob": b"ab"}, "blob"),
            ({"sizes": [1], "blob": b"a"}, "a key size and a value size"),
            ({"sizes": [0, 1], "blob": b"a"}, "key of 0 bytes"),
            ({"sizes": [1, 1], "blob": b"ab", "offsets": []}, "expected revisions"),
            ({"sizes": [1, 1], "blob": b"ab", "offsets": [-2]}, "revision -2"),
            ({"sizes": [], "blob": b""}, "no entry"),
            ({"sizes": [1, -1], "blob": b"a", "offsets": [-1]}, "without value"),
        ],
    )
    def test_malformed_puts_are_refused_whole(self, fields: dict[str, Any], problem: str) -> None:
        """A malformed MAP_PUT is refused by validation, naming the field at fault."""
        fields.setdefault("offsets", [-1])
        r = Request(client="c1", request_id=1, op=int(Op.MAP_PUT), topic="m", **fields)
        with pytest.raises(BadParameterError, match=problem):
            decode_request(r)

    def test_a_malformed_put_is_answered_by_the_store(
        self, counters: KeyValueMap[Counter], name: str, kw: dict[str, Any]
    ) -> None:
        """The store answers a malformed raw MAP_PUT with the error, and stores nothing."""
        ep = Endpoint(kw["domain_id"], kw["namespace"])
        client = StoreClient(ep)
        try:
            client.connect(TIMEOUT)
            wire = Request(
                client=client.client_id, request_id=0, op=int(Op.MAP_PUT), topic=name,
                sizes=[1, 400], blob=b"k" + b"\x00" * 10, offsets=[-1],
            )  # fmt: skip
            fut = client._send(0, wire, lambda r: r)
            with pytest.raises(BadParameterError, match="blob"):
                client.wait_for(Op.MAP_PUT, fut, TIMEOUT)
        finally:
            client.close()
            ep.close()
        assert list(counters.keys()) == []


class TestPersistence:
    def test_maps_survive_kill_minus_9(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """After kill -9 of the store, every confirmed put, delete and revision is there."""
        store = StoreProcess(tmp_path / "store", domain_id, namespace)
        kw = {"domain_id": domain_id, "namespace": namespace}
        try:
            with KeyValueMap("persist", Counter, **kw) as m:
                revs = m.put_many({f"k{i}": Counter(i, "x") for i in range(50)})
                m.delete("k7")
                last = m.put("k8", Counter(800, "y"))
            store.restart()
            with KeyValueMap("persist", Counter, **kw) as m:
                assert len(list(m.keys())) == 49
                assert m.get("k7") is None
                assert m.get("k8") == Counter(800, "y")
                entry = m.entry("k9")
                assert entry is not None
                assert entry.revision == revs["k9"]
                assert m.revision == last
                assert m.put("new", Counter(1, "z")) == last + 1
                with pytest.raises(PreconditionNotMetError):
                    KeyValueMap("persist", Task, **kw)
        finally:
            store.kill()

    def test_a_watch_goes_on_after_a_store_restart(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """A watch open across kill -9 and restart of the store sees the later changes."""
        store = StoreProcess(tmp_path / "store", domain_id, namespace)
        kw = {"domain_id": domain_id, "namespace": namespace, "timeout": 5.0}
        try:
            with KeyValueMap("w", Counter, **kw) as m, m.watch(updates_only=True) as watch:
                m.put("a", Counter(1, "before"))
                assert watch.get(TIMEOUT).key == "a"
                store.restart()
                _put_when_served(m, "b", Counter(2, "after"))
                change: MapChange[Counter] = watch.get(TIMEOUT)
                assert (change.key, change.value) == ("b", Counter(2, "after"))
        finally:
            store.kill()


def _put_when_served(m: KeyValueMap[Counter], key: str, value: Counter) -> None:
    """Put once the restarted store answers (a request sent before it is up times out)."""
    for _ in range(10):
        try:
            m.put(key, value)
            return
        except DcpsTimeoutError:
            continue
    raise AssertionError("the restarted store never answered")


class TestFormat:
    def test_a_version_5_store_file_gains_the_map_tables(self, tmp_path: Path) -> None:
        """A store file of format 5 (before maps) migrates to 6; maps then work on it and
        its topics are untouched."""
        import sqlite3

        from dcps.store._log import FORMAT_VERSION, STORE_FILE, ChannelLog
        from dcps.store._maps import MapTable
        from dcps.wire._maps import MapGetRequest, MapOpenRequest

        path = tmp_path / STORE_FILE
        with ChannelLog(path) as log:
            log.ensure_topic("jobs", 2)
            log.append("jobs", 0, [b"a"])
        db = sqlite3.connect(path)
        for table in ("maps", "map_entries", "map_changes", "queues", "queue_elements"):
            db.execute(f"DROP TABLE {table}")
        db.execute("DROP INDEX batches_segment")  # segment bodies came in format 8
        for column in ("segment", "pos", "crc"):
            db.execute(f"ALTER TABLE batches DROP COLUMN {column}")
        db.execute("UPDATE dcps_format SET value = '5' WHERE key = 'version'")
        db.commit()
        db.close()
        with ChannelLog(path) as log:
            assert [e.data for e in log.fetch("jobs", 0, 0, 5)] == [b"a"]
            maps = MapTable(log)
            assert maps.open(MapOpenRequest("m")).revision == 0
            puts, _ = maps.put(MapPutRequest("m", ("k",), (b"v",), (-1,)))
            assert puts.revisions == (1,)
            assert maps.get(MapGetRequest("m", "k")).value == b"v"
        db = sqlite3.connect(path)
        version = db.execute("SELECT value FROM dcps_format WHERE key = 'version'").fetchone()
        db.close()
        assert version == (str(FORMAT_VERSION),)
        assert FORMAT_VERSION >= 6


class TestPipelinedPuts:
    def test_gathered_puts_keep_call_order_and_their_own_outcomes(
        self, counters: KeyValueMap[Counter]
    ) -> None:
        """Puts gathered into shared requests apply in call order; a failed compare-and-set
        fails only its own future."""
        futures = [counters.put_async("same", Counter(i, "seq")) for i in range(300)]
        bad = counters.put_async("same", Counter(-1, "cas"), revision=1)
        last = counters.put_async("other", Counter(7, "after"))
        revisions = [f.result(TIMEOUT) for f in futures]
        assert revisions == sorted(revisions)
        with pytest.raises(RevisionMismatchError):
            bad.result(TIMEOUT)
        assert last.result(TIMEOUT) > revisions[-1]
        assert counters.get("same") == Counter(299, "seq")
        assert counters.get("other") == Counter(7, "after")

    def test_close_fails_queued_puts(self, name: str, kw: dict[str, Any]) -> None:
        """Puts still queued when the map closes fail with AlreadyClosedError; none hang."""
        from dcps import AlreadyClosedError

        m = KeyValueMap(name, Counter, **kw)
        futures = [m.put_async(f"k{i}", Counter(i, "x")) for i in range(2000)]
        m.close()
        outcomes = [f.exception(TIMEOUT) or f.result() for f in futures]
        assert all(isinstance(o, int | AlreadyClosedError) for o in outcomes), {
            type(o).__name__ for o in outcomes
        }


class TestAuthentication:
    def test_a_keyed_namespace_serves_key_holders_and_drops_others(
        self, tmp_path: Path, domain_id: int
    ) -> None:
        """With a namespace key, a client holding it uses the map; a put without the key is
        dropped by the store (times out) and changes nothing."""
        from dcps.wire._auth_keys import write_key_file

        key = write_key_file(tmp_path / "ns.key").source
        namespace = f"mk_{uuid.uuid4().hex[:8]}"
        old = os.environ.get("DCPS_STORE_KEY_FILE")
        os.environ["DCPS_STORE_KEY_FILE"] = str(key)
        try:
            store = StoreProcess(tmp_path / "store", domain_id, namespace)
        finally:
            if old is None:
                os.environ.pop("DCPS_STORE_KEY_FILE")
            else:
                os.environ["DCPS_STORE_KEY_FILE"] = old
        kw = {"domain_id": domain_id, "namespace": namespace}
        try:
            with KeyValueMap("secure", Counter, store_key=key, **kw) as m:
                m.put("k", Counter(1, "keyed"))
                ep = Endpoint(domain_id, namespace)
                client = StoreClient(ep, key=None, request_timeout=2.0)
                try:
                    wire = MapPutRequest(
                        "secure", ("k",), (Counter(666, "intruder").serialize(),), (-1,)
                    ).to_wire(client.client_id, 0)
                    fut = client._send(0, wire, lambda r: r)
                    with pytest.raises(DcpsTimeoutError):
                        client.wait_for(Op.MAP_PUT, fut, 3.0)
                finally:
                    client.close()
                    ep.close()
                assert m.get("k") == Counter(1, "keyed")
        finally:
            store.kill()
