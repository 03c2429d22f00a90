"""Staged publishing (the store's half of the Spark sink's two-phase commit).

Over DDS against a real embedded store (requests, replies, one transaction per
commit), and on the log directly where the clock matters (age clean-up).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps import BadParameterError, PreconditionNotMetError
from dcps.spark._access import StoreAccess
from dcps.store._log import STORE_FILE, ChannelLog
from dcps.store._staging import STAGED_TTL_NS, staging_of
from dcps.wire._codes import Op
from dcps.wire._messages import Request
from dcps.wire._requests import decode_request
from dcps.wire._staging import (
    MAX_STAGES,
    AbortStagedRequest,
    CommitStagedRequest,
    StageRequest,
)


@pytest.fixture
def access(store: Any) -> Iterator[StoreAccess]:
    """A client of the test's embedded store, over DDS."""
    client = StoreAccess(domain_id=store.domain_id, namespace=store.namespace)
    try:
        yield client
    finally:
        client.close()


def stage(
    access: StoreAccess,
    topic: str,
    txn: tuple[str, int],
    stage_id: str,
    seq: int,
    channel: int,
    payloads: list[bytes],
    partition: int = 0,
) -> int:
    """Stage one chunk and wait for the answer; the staged count."""
    fut = access.stage_async(
        topic,
        txn,
        partition,
        stage_id,
        seq,
        channel,
        [len(p) for p in payloads],
        b"".join(payloads),
    )
    return int(fut.result(10).count)


def stored(access: StoreAccess, topic: str, channel: int) -> list[bytes]:
    """Every visible element of a channel, in offset order."""
    head, end = access.bounds(topic)[channel]
    return list(access.fetch(topic, channel, head, end).payloads())


class TestTwoPhaseCommit:
    def test_staged_elements_appear_only_at_commit_all_at_once(
        self, access: StoreAccess, unique: str
    ) -> None:
        """Staged chunks are invisible; the commit appends them in partition/stage/chunk order."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 2, True, "")
        txn = ("q1", 0)
        assert stage(access, topic, txn, "s-b", 0, 0, [b"b0", b"b1"], partition=1) == 2
        assert stage(access, topic, txn, "s-a", 0, 0, [b"a0"], partition=0) == 1
        assert stage(access, topic, txn, "s-a", 1, 1, [b"a1"], partition=0) == 1
        assert stage(access, topic, txn, "s-a", 2, 0, [b"a2"], partition=0) == 1
        assert access.bounds(topic) == {0: (0, 0), 1: (0, 0)}  # nothing visible yet
        done = access.commit_staged(topic, txn, [("s-a", 3), ("s-b", 1)])
        assert (done.elements, done.chunks, done.already) == (5, 4, False)
        assert stored(access, topic, 0) == [b"a0", b"a2", b"b0", b"b1"]
        assert stored(access, topic, 1) == [b"a1"]

    def test_only_the_committed_attempts_count(
        self, access: StoreAccess, store: Any, unique: str
    ) -> None:
        """A failed attempt's chunks (not named in the commit) are dropped, not appended."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 1, True, "")
        txn = ("q2", 7)
        stage(access, topic, txn, "attempt-0", 0, 0, [b"x", b"y"])  # then the task failed
        stage(access, topic, txn, "attempt-1", 0, 0, [b"x", b"y"])
        done = access.commit_staged(topic, txn, [("attempt-1", 1)])
        assert done.elements == 2
        assert stored(access, topic, 0) == [b"x", b"y"]
        assert staging_of(store.log).staged_chunks(topic) == 0

    def test_a_repeated_commit_appends_nothing(
        self, access: StoreAccess, store: Any, unique: str
    ) -> None:
        """Committing a transaction again (driver restart) adds nothing and says so."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 1, True, "")
        txn = ("q3", 4)
        stage(access, topic, txn, "first-run", 0, 0, [b"1", b"2", b"3"])
        assert access.commit_staged(topic, txn, [("first-run", 1)]).elements == 3
        # the restarted driver runs the batch again: new attempts stage the rows again
        stage(access, topic, txn, "second-run", 0, 0, [b"3", b"1", b"2"])
        again = access.commit_staged(topic, txn, [("second-run", 1)])
        assert (again.elements, again.chunks, again.already) == (3, 1, True)
        assert stored(access, topic, 0) == [b"1", b"2", b"3"]
        assert staging_of(store.log).staged_chunks(topic) == 0  # the re-run's chunks dropped

    def test_missing_chunks_refuse_the_commit_and_change_nothing(
        self, access: StoreAccess, store: Any, unique: str
    ) -> None:
        """A stage reporting more chunks than the store holds fails the commit by name."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 1, True, "")
        txn = ("q4", 1)
        stage(access, topic, txn, "s", 0, 0, [b"a"])
        stage(access, topic, txn, "s", 2, 0, [b"c"])
        with pytest.raises(PreconditionNotMetError, match=r"stage 's' reported 3.*holds 2"):
            access.commit_staged(topic, txn, [("s", 3)])
        assert access.bounds(topic) == {0: (0, 0)}
        assert staging_of(store.log).staged_chunks(topic) == 2
        stage(access, topic, txn, "s", 1, 0, [b"b"])  # the batch runs again
        assert access.commit_staged(topic, txn, [("s", 3)]).elements == 3
        assert stored(access, topic, 0) == [b"a", b"b", b"c"]

    def test_abort_drops_the_staged_chunks(
        self, access: StoreAccess, store: Any, unique: str
    ) -> None:
        """Abort removes every chunk of the transaction; a later commit finds none."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 1, True, "")
        txn = ("q5", 0)
        stage(access, topic, txn, "s", 0, 0, [b"a"])
        stage(access, topic, txn, "t", 0, 0, [b"b"])
        assert access.abort_staged(topic, txn).chunks == 2
        assert staging_of(store.log).staged_chunks(topic) == 0
        with pytest.raises(PreconditionNotMetError, match="holds 0"):
            access.commit_staged(topic, txn, [("s", 1)])
        assert access.bounds(topic) == {0: (0, 0)}

    def test_a_commit_cleans_up_earlier_epochs_of_its_query(
        self, access: StoreAccess, store: Any, unique: str
    ) -> None:
        """Chunks of an epoch never committed are dropped when a later epoch commits."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 1, True, "")
        stage(access, topic, ("q6", 0), "lost", 0, 0, [b"never"])
        stage(access, topic, ("other", 0), "kept", 0, 0, [b"other query"])
        stage(access, topic, ("q6", 1), "s", 0, 0, [b"ok"])
        access.commit_staged(topic, ("q6", 1), [("s", 1)])
        assert stored(access, topic, 0) == [b"ok"]
        assert staging_of(store.log).staged_chunks(topic) == 1  # only the other query's

    def test_staging_an_unknown_channel_is_refused(self, access: StoreAccess, unique: str) -> None:
        """A chunk for a channel the topic lacks is refused naming topic and channel."""
        topic = f"tp_{unique}"
        access.ensure_topic(topic, 2, True, "")
        with pytest.raises(BadParameterError, match=rf"{topic}.*channels 0\.\.1"):
            stage(access, topic, ("q", 0), "s", 0, 5, [b"a"])


class TestStagingOnTheLog:
    def test_old_staged_chunks_are_dropped_by_age(self, tmp_path: Path) -> None:
        """Chunks staged longer ago than STAGED_TTL_NS go at the next commit of any query."""
        now = [10**18]
        with ChannelLog(tmp_path / STORE_FILE, clock=lambda: now[0]) as log:
            log.ensure_topic("t", 1)
            staging = staging_of(log)
            chunk = StageRequest("t", "gone", 0, 0, "s", 0, 0, [1], b"a")
            staging.stage(chunk)
            now[0] += STAGED_TTL_NS + 1
            staging.stage(StageRequest("t", "live", 0, 0, "s", 0, 0, [1], b"b"))
            staging.commit("t", "live", 0, [("s", 1)])
            assert staging.staged_chunks() == 0
            assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"b"]

    def test_the_committed_transaction_is_recorded_in_the_file(self, tmp_path: Path) -> None:
        """staged_commits keeps (query, epoch, elements) for idempotent repeats after a restart."""
        path = tmp_path / STORE_FILE
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            staging_of(log).stage(StageRequest("t", "q", 3, 0, "s", 0, 0, [1, 1], b"ab"))
            staging_of(log).commit("t", "q", 3, [("s", 1)])
        with ChannelLog(path) as log:  # a restarted store remembers the commit
            again, placed = staging_of(log).commit("t", "q", 3, [("s", 1)])
            assert (again.already, again.elements, placed) == (True, 2, [])
            assert log.channel_state("t", 0).tail == 1
        db = sqlite3.connect(path)
        try:
            rows = db.execute("SELECT query, epoch, elements FROM staged_commits").fetchall()
        finally:
            db.close()
        assert rows == [("q", 3, 2)]


class TestStagingRequests:
    def test_requests_round_trip(self) -> None:
        """Each staging request decodes to what was sent."""
        for request in (
            StageRequest("t", "q", 3, 2, "s", 1, 0, [1, 2], b"abc"),
            CommitStagedRequest("t", "q", 3, (("s", 1), ("u", 0))),
            AbortStagedRequest("t", "q", 3),
        ):
            assert decode_request(request.to_wire("client", 1)) == request

    @pytest.mark.parametrize(
        ("change", "problem"),
        [
            ({"sizes": [2, 2]}, "add up to 4 bytes"),
            ({"sizes": [0, 3]}, "element of 0 bytes"),
            ({"offsets": [-1]}, "chunk numbers"),
            ({"number": -1}, "epoch"),
            ({"flag": -2}, "partition"),
            ({"member": ""}, "member"),
            ({"group": "q*"}, "group"),
            ({"channels": [0, 1]}, "exactly one"),
        ],
    )
    def test_a_bad_stage_is_refused_naming_the_field(
        self, change: dict[str, Any], problem: str
    ) -> None:
        """A STAGE is validated whole; each fault is named."""
        wire = StageRequest("t", "q", 0, 0, "s", 0, 0, [1, 2], b"abc").to_wire("client", 1)
        for name, value in change.items():
            setattr(wire, name, value)
        with pytest.raises(BadParameterError, match=problem):
            decode_request(wire)

    def test_a_bad_commit_is_refused_naming_the_field(self) -> None:
        """Stage ids and chunk counts must pair up, be unique and bounded."""
        base = {"client": "c", "request_id": 1, "op": Op.COMMIT_STAGED, "topic": "t", "group": "q"}
        cases = [
            (Request(**base, blob=b"a\nb", offsets=[1]), "2 stages but 1 chunk counts"),
            (Request(**base, blob=b"a\na", offsets=[1, 1]), "a stage twice"),
            (Request(**base, blob=b"a", offsets=[-1]), "chunk counts"),
            (Request(**base, blob=b"\xff", offsets=[1]), "UTF-8"),
            (Request(**base, blob=b"a*", offsets=[1]), "stage id"),
            (
                Request(
                    **base,
                    blob=b"\n".join([b"s"] * (MAX_STAGES + 1)),
                    offsets=[0] * (MAX_STAGES + 1),
                ),
                "MAX_STAGES",
            ),
        ]
        for wire, problem in cases:
            with pytest.raises(BadParameterError, match=problem):
                decode_request(wire)
