"""Staged publishing on the log and through the store's handlers, without DDS (issue 20's
mutation run of ``dcps/store/_staging.py``: the store's half of the Spark sink's
two-phase commit, which decides exactly-once).

The log tests drive :class:`StagingLog` on a real ``ChannelLog`` with a test clock
(timestamps, the age clean-up, the committed transactions kept); the handler tests use
a ``Store`` that is not started (``Answered`` of ``test_service_mutants.py``: replies and
live batches kept in lists). Each reads back what a reader of the topic would get: the
elements, their offsets and timestamps, what was pushed live, the store's file.
Over DDS: ``test_staging.py``; with segment files and a killed store:
``test_staging_segments.py``; under Spark: ``tests/spark/test_sink_2pc.py``.
"""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import dcps.store._log as log_module
import dcps.store._staging as staging_module
from dcps import BadParameterError, DcpsError, OutOfResourcesError, PreconditionNotMetError
from dcps.store._log import STORE_FILE, ChannelLog, SyncMode
from dcps.store._log_segments import segment_dir
from dcps.store._staging import (
    _MAX_ABORTS,
    _WINDOW_S,
    KEPT_EPOCHS,
    STAGED_TTL_NS,
    CommittedChunk,
    StagingLog,
    staging_of,
)
from dcps.wire._auth_keys import write_key_file
from dcps.wire._auth_stage import QueryKey, StageDigest, owned_query
from dcps.wire._batches import ELEMENT_STEP_NS
from dcps.wire._codes import ErrorCode
from dcps.wire._messages import Reply
from dcps.wire._requests import EnsureTopicRequest
from dcps.wire._staging import (
    AbortStagedRequest,
    CommitStagedRequest,
    Staged,
    StagedAborted,
    StagedCommitted,
    StageRequest,
)
from tests.store.test_service_mutants import Answered

NOW = 10**18  # the test clock's start (a whole number of steps)


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def log(tmp_path: Path, clock: Clock) -> Iterator[ChannelLog]:
    with ChannelLog(tmp_path / STORE_FILE, sync=SyncMode.NORMAL, clock=clock) as opened:
        opened.ensure_topic("t", 2, retain_consumed=True)
        opened.ensure_topic("u", 1, retain_consumed=True)
        yield opened


def chunk(
    topic: str,
    query: str,
    epoch: int,
    stage: str,
    seq: int,
    channel: int,
    *payloads: bytes,
    partition: int = 0,
) -> StageRequest:
    return StageRequest(
        topic,
        query,
        epoch,
        partition,
        stage,
        seq,
        channel,
        [len(p) for p in payloads],
        b"".join(payloads),
    )


def data(log: ChannelLog, topic: str = "t", channel: int = 0) -> list[bytes]:
    return [e.data for e in log.fetch(topic, channel, 0, 1000)]


def stamps(log: ChannelLog, topic: str = "t", channel: int = 0) -> list[int]:
    return [e.timestamp_ns for e in log.fetch(topic, channel, 0, 1000)]


def rows(path: Path, sql: str) -> list[tuple[Any, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def segment_files(path: Path) -> list[str]:
    return sorted(p.name for p in segment_dir(path).rglob("*.seg"))


class TestStaging:
    def test_one_staging_per_log(self, log: ChannelLog, tmp_path: Path) -> None:
        assert staging_of(log) is staging_of(log)
        assert isinstance(staging_of(log), StagingLog)
        with ChannelLog(tmp_path / "other.db") as other:
            assert staging_of(other) is not staging_of(log)

    def test_stage_keeps_the_chunk_invisible_and_counts_it(
        self, log: ChannelLog, clock: Clock
    ) -> None:
        staging = staging_of(log)
        assert staging.stage(chunk("t", "q", 0, "s", 0, 1, b"a", b"bc")) == 2
        assert staging.stage(chunk("u", "q", 0, "s", 0, 0, b"d"), now=NOW - 5) == 1
        assert (staging.staged_chunks(), staging.staged_chunks("t")) == (2, 1)
        assert staging.staged_chunks("u") == 1
        assert log.channel_state("t", 1).tail == -1
        assert rows(
            log.path,
            "SELECT query, epoch, stage, seq, partition, channel, count, staged_ns"
            " FROM staged ORDER BY staged_ns",
        ) == [("q", 0, "s", 0, 0, 0, 1, NOW - 5), ("q", 0, "s", 0, 0, 1, 2, NOW)]

    def test_staging_again_under_the_same_numbers_replaces_the_chunk(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"old"))
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"new", b"er"))
        assert staging.staged_chunks() == 1
        assert staging.commit("t", "q", 0, [("s", 1)])[0] == StagedCommitted(2, 1)
        assert data(log) == [b"new", b"er"]

    def test_a_chunk_for_a_missing_topic_or_channel_is_refused(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        with pytest.raises(BadParameterError, match=r"channels 0\.\.1"):
            staging.stage(chunk("t", "q", 0, "s", 0, 2, b"a"))
        with pytest.raises(BadParameterError, match="nope"):
            staging.stage(chunk("nope", "q", 0, "s", 0, 0, b"a"))
        assert staging.staged_chunks() == 0

    def test_staging_writes_with_synchronous_normal_and_restores_the_mode(
        self, tmp_path: Path
    ) -> None:
        """A FULL log stages at NORMAL (the module doc) and is FULL again afterwards."""
        with ChannelLog(tmp_path / STORE_FILE, sync=SyncMode.FULL) as full:
            full.ensure_topic("t", 1, retain_consumed=True)
            db = full._conn
            modes: list[int] = []
            write = full._write

            def watched(doing: str, fn: Any, **kw: Any) -> Any:
                modes.append(int(db.execute("PRAGMA synchronous").fetchone()[0]))
                return write(doing, fn, **kw)

            before = int(db.execute("PRAGMA synchronous").fetchone()[0])
            full._write = watched  # type: ignore[method-assign]
            staging_of(full).stage(chunk("t", "q", 0, "s", 0, 0, b"a"))
            staging_of(full).stage(chunk("t", "q", 0, "s", 1, 0, b"b"))
            after = int(db.execute("PRAGMA synchronous").fetchone()[0])
            assert (before, modes, after) == (2, [1, 1], 2)  # FULL, NORMAL twice, FULL

    def test_a_failing_sync_mode_switch_is_a_typed_error(self, tmp_path: Path) -> None:
        log = ChannelLog(tmp_path / STORE_FILE)
        staging = staging_of(log)
        log._conn.close()
        try:
            with pytest.raises(DcpsError) as failed:
                staging._relaxed(True)
            assert str(failed.value) == (
                f"{tmp_path / STORE_FILE}: setting the staging sync mode failed: "
                "Cannot operate on a closed database."
            )
        finally:
            with contextlib.suppress(Exception):
                log.close()


class TestCommit:
    def test_the_order_is_partition_stage_chunk(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "b", 1, 0, b"b1", partition=0))
        staging.stage(chunk("t", "q", 0, "a", 0, 0, b"a0", partition=1))
        staging.stage(chunk("t", "q", 0, "b", 0, 0, b"b0", partition=0))
        staging.stage(chunk("t", "q", 0, "c", 0, 0, b"c0", partition=0))
        done, placed = staging.commit("t", "q", 0, [("a", 1), ("b", 2), ("c", 1)])
        assert done == StagedCommitted(4, 4)
        assert data(log) == [b"b0", b"b1", b"c0", b"a0"]
        assert [(c.channel, c.first, c.count) for c in placed] == [
            (0, 0, 1),
            (0, 1, 1),
            (0, 2, 1),
            (0, 3, 1),
        ]

    def test_offsets_and_timestamps_continue_the_channels(
        self, log: ChannelLog, clock: Clock, tmp_path: Path
    ) -> None:
        """One timestamp per element, a step apart, after the channel's last; the next
        append (also after a reopen) continues after the committed elements."""
        log.append("t", 0, [b"p"])  # offset 0 at NOW
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"a", b"b", b"c"))
        staging.stage(chunk("t", "q", 0, "s", 1, 1, b"x"))
        staging.stage(chunk("t", "q", 0, "s", 2, 0, b"d"))
        done, placed = staging.commit("t", "q", 0, [("s", 3)])
        step = ELEMENT_STEP_NS
        assert done == StagedCommitted(5, 3)
        assert placed == [
            CommittedChunk(0, 1, 3, NOW + step),
            CommittedChunk(1, 0, 1, NOW),
            CommittedChunk(0, 4, 1, NOW + 4 * step),
        ]
        assert stamps(log) == [NOW + i * step for i in range(5)]
        assert stamps(log, "t", 1) == [NOW]
        assert log.append("t", 0, [b"e"])[0] == (5, NOW + 5 * step)
        assert log.append("t", 1, [b"y"])[0] == (1, NOW + step)
        log.close()
        with ChannelLog(log.path, clock=clock) as again:
            assert again.append("t", 0, [b"f"])[0] == (6, NOW + 6 * step)
            assert data(again) == [b"p", b"a", b"b", b"c", b"d", b"e", b"f"]

    def test_an_empty_chunk_is_not_a_batch(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "s", 0, 0))
        staging.stage(chunk("t", "q", 0, "s", 1, 0, b"a"))
        done, placed = staging.commit("t", "q", 0, [("s", 2)])
        assert (done, [c.count for c in placed]) == (StagedCommitted(1, 1), [1])
        assert rows(log.path, "SELECT first_offset, count FROM batches") == [(0, 1)]
        assert staging.staged_chunks() == 0

    def test_a_stage_with_a_chunk_missing_or_extra_is_refused_whole(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "ok", 0, 0, b"fine"))
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"a"))
        staging.stage(chunk("t", "q", 0, "s", 2, 0, b"c"))
        with pytest.raises(PreconditionNotMetError) as refused:
            staging.commit("t", "q", 0, [("ok", 1), ("s", 2)])
        assert str(refused.value) == (
            "cannot commit topic 't' query 'q' epoch 0: stage 's' reported 2 staged chunks, "
            "the store holds 2 of them (chunks lost: run the batch again)"
        )
        with pytest.raises(PreconditionNotMetError, match=r"stage 's' reported 3 .* holds 2"):
            staging.commit("t", "q", 0, [("s", 3)])
        with pytest.raises(PreconditionNotMetError, match=r"stage 'gone' reported 1 .* holds 0"):
            staging.commit("t", "q", 0, [("ok", 1), ("gone", 1)])
        assert staging.staged_chunks() == 3
        assert data(log) == []
        assert rows(log.path, "SELECT count(*) FROM staged_commits") == [(0,)]

    def test_a_stage_of_no_chunks_commits_nothing(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"a"))
        assert staging.commit("t", "q", 0, [("empty", 0)]) == (StagedCommitted(0, 0), [])
        assert data(log) == []
        assert staging.staged_chunks() == 0  # the unnamed stage's chunk is dropped

    def test_the_committed_transaction_is_recorded_and_a_repeat_adds_nothing(
        self, log: ChannelLog, clock: Clock
    ) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 4, "s", 0, 0, b"a", b"b"))
        staging.stage(chunk("t", "q", 4, "s", 1, 1, b"c"))
        staging.commit("t", "q", 4, [("s", 2)])
        assert rows(log.path, "SELECT * FROM staged_commits") == [(1, "q", 4, 3, 2, NOW)]
        clock.now += 1
        staging.stage(chunk("t", "q", 4, "late", 0, 0, b"z"))  # a late attempt
        staging.stage(chunk("t", "q", 5, "next", 0, 0, b"n"))  # the next epoch's
        again = staging.commit("t", "q", 4, [("late", 1)])
        assert again == (StagedCommitted(3, 2, already=True), [])
        assert data(log) == [b"a", b"b"]
        assert rows(log.path, "SELECT query, epoch FROM staged") == [("q", 5)]

    def test_the_same_epoch_of_another_topic_or_query_is_its_own_transaction(
        self, log: ChannelLog
    ) -> None:
        staging = staging_of(log)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"t"))
        staging.stage(chunk("u", "q", 0, "s", 0, 0, b"u"))
        staging.stage(chunk("t", "p", 0, "s", 0, 0, b"p"))
        assert staging.commit("t", "q", 0, [("s", 1)])[0].already is False
        assert staging.commit("u", "q", 0, [("s", 1)])[0] == StagedCommitted(1, 1)
        assert staging.commit("t", "p", 0, [("s", 1)])[0] == StagedCommitted(1, 1)
        assert (data(log), data(log, "u")) == ([b"t", b"p"], [b"u"])

    def test_a_failing_read_names_the_transaction(self, log: ChannelLog) -> None:
        """The record table gone (renamed by another program): a typed error naming the
        topic, query and epoch; nothing committed."""
        staging_of(log).stage(chunk("t", "q", 7, "s", 0, 0, b"a"))
        other = sqlite3.connect(log.path)
        other.execute("ALTER TABLE staged_commits RENAME TO hidden")
        other.commit()
        other.close()
        with pytest.raises(DcpsError) as failed:
            staging_of(log).commit("t", "q", 7, [("s", 1)])
        assert str(failed.value) == (
            f"{log.path}: reading the staged chunks of topic 't' query 'q' epoch 7 failed: "
            "no such table: staged_commits [SQLITE_ERROR]"
        )
        assert data(log) == []


class TestCleanup:
    def test_a_commit_drops_the_earlier_epochs_of_its_query_and_topic_only(
        self, log: ChannelLog
    ) -> None:
        staging = staging_of(log)
        for query, epoch, topic in [
            ("q", 0, "t"),
            ("q", 1, "t"),
            ("q", 2, "t"),  # the one committed, with one stage not named
            ("q", 3, "t"),
            ("q", 1, "u"),
            ("p", 1, "t"),
        ]:
            staging.stage(chunk(topic, query, epoch, "s", 0, 0, f"{query}{epoch}{topic}".encode()))
        staging.stage(chunk("t", "q", 2, "other", 0, 0, b"failed attempt"))
        staging.commit("t", "q", 2, [("s", 1)])
        assert data(log) == [b"q2t"]
        assert sorted(rows(log.path, "SELECT query, epoch, topic_id FROM staged")) == [
            ("p", 1, 1),
            ("q", 1, 2),
            ("q", 3, 1),
        ]

    def test_chunks_older_than_the_ttl_go_at_any_commit(
        self, log: ChannelLog, clock: Clock
    ) -> None:
        staging = staging_of(log)
        staging.stage(chunk("u", "old", 0, "s", 0, 0, b"x"), now=NOW - STAGED_TTL_NS - 1)
        staging.stage(chunk("u", "edge", 0, "s", 0, 0, b"y"), now=NOW - STAGED_TTL_NS)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"a"))
        staging.commit("t", "q", 0, [("s", 1)])
        assert rows(log.path, "SELECT query FROM staged") == [("edge",)]
        staging.stage(chunk("t", "q", 1, "s", 0, 0, b"b"))
        clock.now += 1
        staging.commit("t", "q", 1, [("s", 1)])  # now "edge" is older than the TTL
        assert rows(log.path, "SELECT query FROM staged") == []

    def test_the_last_kept_epochs_are_remembered(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        for epoch in (0, 1, KEPT_EPOCHS):
            staging.stage(chunk("t", "q", epoch, "s", 0, 0, b"e"))
            staging.commit("t", "q", epoch, [("s", 1)])
        staging.stage(chunk("t", "p", 0, "s", 0, 0, b"p"))
        staging.commit("t", "p", 0, [("s", 1)])
        assert rows(log.path, "SELECT query, epoch FROM staged_commits ORDER BY 1, 2") == [
            ("p", 0),
            ("q", 0),
            ("q", 1),
            ("q", KEPT_EPOCHS),
        ]
        staging.stage(chunk("t", "q", KEPT_EPOCHS + 1, "s", 0, 0, b"e"))
        staging.commit("t", "q", KEPT_EPOCHS + 1, [("s", 1)])
        assert rows(log.path, "SELECT query, epoch FROM staged_commits ORDER BY 1, 2") == [
            ("p", 0),
            ("q", 1),
            ("q", KEPT_EPOCHS),
            ("q", KEPT_EPOCHS + 1),
        ]
        # the forgotten epoch is committed again as new (its repeat is no longer caught)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"again"))
        assert staging.commit("t", "q", 0, [("s", 1)])[0].already is False


@pytest.fixture
def segmented(
    tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ChannelLog]:
    """A log whose bodies of 8 bytes or more go to segment files, released at once."""
    monkeypatch.setattr(log_module, "_SEGMENT_GRACE", 0.0)
    with ChannelLog(tmp_path / STORE_FILE, clock=clock, inline_max=8) as opened:
        opened.ensure_topic("t", 1, retain_consumed=True)
        opened.ensure_topic("u", 1, retain_consumed=True)
        yield opened


class TestSegments:
    def test_an_abort_deletes_a_segment_only_it_used(self, segmented: ChannelLog) -> None:
        staging = staging_of(segmented)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"0123456789"))
        staging.stage(chunk("t", "q", 0, "s", 1, 0, b"abcdefghij"))
        assert segment_files(segmented.path) != []
        assert staging.abort("t", "q", 0) == 2
        segmented.append("t", 0, [b"x"])  # the next write deletes the released files
        assert segment_files(segmented.path) == []

    def test_a_segment_still_used_is_kept(self, segmented: ChannelLog) -> None:
        """Shared with a committed batch and with another transaction's staged chunk."""
        staging = staging_of(segmented)
        staging.stage(chunk("t", "a", 0, "s", 0, 0, b"committed!"))
        staging.commit("t", "a", 0, [("s", 1)])
        staging.stage(chunk("t", "b", 0, "s", 0, 0, b"staged!!!!"))
        staging.stage(chunk("t", "c", 0, "s", 0, 0, b"aborted!!!"))
        files = segment_files(segmented.path)
        assert staging.abort("t", "c", 0) == 1
        segmented.append("t", 0, [b"x"])
        assert segment_files(segmented.path) == files
        staging.commit("t", "b", 0, [("s", 1)])
        assert data(segmented) == [b"committed!", b"x", b"staged!!!!"]

    def test_chunks_dropped_at_a_commit_release_their_segments(
        self, segmented: ChannelLog, clock: Clock
    ) -> None:
        """An earlier epoch's chunk and one past the TTL of another topic: their files go."""
        staging = staging_of(segmented)
        staging.stage(chunk("u", "old", 0, "s", 0, 0, b"old old old"), now=NOW - STAGED_TTL_NS - 1)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"lost lost!"))
        staging.stage(chunk("t", "q", 1, "s", 0, 0, b"small"))
        staging.commit("t", "q", 1, [("s", 1)])
        segmented.append("t", 0, [b"x"])
        assert segment_files(segmented.path) == []
        assert data(segmented) == [b"small", b"x"]

    def test_a_committed_chunk_is_read_back_from_its_segment(self, segmented: ChannelLog) -> None:
        staging = staging_of(segmented)
        segmented.append("t", 0, [b"p"])
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"first part", b"second part"))
        staging.stage(chunk("t", "q", 0, "s", 1, 0, b"tiny"))
        _, placed = staging.commit("t", "q", 0, [("s", 2)])
        packed = [staging.chunk_payloads("t", c) for c in placed]
        assert [(list(p.sizes), bytes(p.blob)) for p in packed] == [
            ([10, 11], b"first partsecond part"),
            ([4], b"tiny"),
        ]

    def test_a_lost_segment_is_a_typed_error_naming_what_was_read(
        self, segmented: ChannelLog
    ) -> None:
        staging = staging_of(segmented)
        staging.stage(chunk("t", "q", 0, "s", 0, 0, b"0123456789"))
        _, placed = staging.commit("t", "q", 0, [("s", 1)])
        for f in segment_dir(segmented.path).rglob("*.seg"):
            f.unlink()
        with pytest.raises(PreconditionNotMetError) as lost:
            staging.chunk_payloads("t", placed[0])
        assert "reading back a committed chunk of 't'" in str(lost.value)
        assert str(segment_dir(segmented.path)) in str(lost.value)

    def test_a_full_sync_log_syncs_the_committed_segments(
        self, tmp_path: Path, clock: Clock
    ) -> None:
        """With SyncMode.FULL the commit opens each committed chunk's segment file: one
        gone is refused by name and nothing is committed; with NORMAL it is not opened."""
        for mode in (SyncMode.FULL, SyncMode.NORMAL):
            path = tmp_path / mode.name / STORE_FILE
            path.parent.mkdir()
            with ChannelLog(path, sync=mode, clock=clock, inline_max=8) as log:
                log.ensure_topic("t", 1, retain_consumed=True)
                staging = staging_of(log)
                staging.stage(chunk("t", "q", 0, "s", 0, 0, b"0123456789"))
                for f in segment_dir(path).rglob("*.seg"):
                    f.unlink()
                if mode is SyncMode.FULL:
                    with pytest.raises(PreconditionNotMetError) as failed:
                        staging.commit("t", "q", 0, [("s", 1)])
                    assert str(failed.value) == (
                        f"{segment_dir(path)}: syncing staged chunks' segments failed "
                        "(No such file or directory)"
                    )
                    assert log.channel_state("t", 0).tail == -1
                    assert staging.staged_chunks() == 1
                else:
                    assert staging.commit("t", "q", 0, [("s", 1)])[0].elements == 1


class TestReleasedSegments:
    def test_a_chunk_staged_after_an_abort_is_not_in_the_released_segment(
        self, tmp_path: Path, clock: Clock, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The aborted chunk's segment is deleted after the grace: a chunk staged meanwhile
        goes to a new segment and is read back after that deletion."""
        now = [100.0]

        class Monotonic:
            def __getattr__(self, name: str) -> Any:
                return getattr(time, name)

            @staticmethod
            def monotonic() -> float:
                return now[0]

        monkeypatch.setattr(log_module, "time", Monotonic())
        with ChannelLog(tmp_path / STORE_FILE, clock=clock, inline_max=8) as log:
            log.ensure_topic("t", 1, retain_consumed=True)
            staging = staging_of(log)
            staging.stage(chunk("t", "q", 0, "s", 0, 0, b"aborted..."))
            assert staging.abort("t", "q", 0) == 1
            staging.stage(chunk("t", "q", 1, "s", 0, 0, b"kept......"))
            now[0] += log_module._SEGMENT_GRACE + 1
            log.append("t", 0, [b"x"])  # deletes the released segment
            staging.commit("t", "q", 1, [("s", 1)])
            assert data(log) == [b"x", b"kept......"]
            assert len(segment_files(log.path)) == 1


class TestDigests:
    def test_a_commit_checks_each_stage_against_its_digest(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        a = [chunk("t", "q", 0, "a", i, i % 2, b"a%d" % i) for i in range(3)]
        b = [chunk("t", "q", 0, "b", 0, 0, b"b0", b"b00")]
        for c in (*a, *b):
            staging.stage(c)
        good = (digest(*a), digest(*b))
        with pytest.raises(PreconditionNotMetError) as refused:
            staging.commit("t", "q", 0, [("a", 3), ("b", 1)], (good[0], digest(*a)))
        assert str(refused.value) == (
            "cannot commit topic 't' query 'q' epoch 0: the chunks of stage 'b' are not what "
            "its writer staged (replaced by another client?): nothing committed, run the "
            "batch again"
        )
        with pytest.raises(PreconditionNotMetError, match="stage 'a' are not"):
            staging.commit("t", "q", 0, [("a", 3), ("b", 1)], (digest(a[1], a[0], a[2]), good[1]))
        assert staging.staged_chunks() == 4
        assert staging.commit("t", "q", 0, [("a", 3), ("b", 1)], good)[0] == StagedCommitted(5, 4)

    def test_a_digest_covers_bodies_in_segment_files(self, segmented: ChannelLog) -> None:
        staging = staging_of(segmented)
        c = chunk("t", "q", 0, "s", 0, 0, b"0123456789", b"x")
        staging.stage(c)
        assert staging.commit("t", "q", 0, [("s", 1)], (digest(c),))[0].elements == 2

    def test_a_lost_staged_body_refuses_a_signed_commit(self, segmented: ChannelLog) -> None:
        staging = staging_of(segmented)
        c = chunk("t", "q", 0, "s", 0, 0, b"0123456789")
        staging.stage(c)
        for f in segment_dir(segmented.path).rglob("*.seg"):
            f.unlink()
        with pytest.raises(PreconditionNotMetError) as failed:
            staging.commit("t", "q", 0, [("s", 1)], (digest(c),))
        assert "reading the staged chunks of topic 't' query 'q' epoch 0" in str(failed.value)
        assert str(segment_dir(segmented.path)) in str(failed.value)


def digest(*chunks: StageRequest) -> str:
    d = StageDigest()
    for c in chunks:
        d.add(c.seq, c.channel, b"".join(n.to_bytes(4, "little") for n in c.sizes), c.blob)
    return d.hexdigest()


class TestSignedAborts:
    def test_an_abort_takes_effect_once_per_proof(
        self, log: ChannelLog, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        now = [1000.0]

        class FakeTime:
            @staticmethod
            def monotonic() -> float:
                return now[0]

        monkeypatch.setattr(staging_module, "time", FakeTime)
        staging = staging_of(log)
        assert staging.aborted_by("p1") is None
        staging.abort_took_effect("p1", StagedAborted(3))
        staging.abort_took_effect("p2", StagedAborted(4))
        assert staging.aborted_by("p1") == StagedAborted(3)
        now[0] += _WINDOW_S
        staging.abort_took_effect("p3", StagedAborted(5))  # a later abort
        now[0] += _WINDOW_S  # as old as a proof can be replayed: still remembered
        assert staging.aborted_by("p1") == StagedAborted(3)
        now[0] += 0.001
        assert staging.aborted_by("p1") is None
        assert staging.aborted_by("p2") is None
        assert staging.aborted_by("p3") == StagedAborted(5)  # not forgotten with them

    def test_at_most_max_aborts_are_remembered(self, log: ChannelLog) -> None:
        staging = staging_of(log)
        for i in range(_MAX_ABORTS + 1):
            staging.abort_took_effect(f"p{i}", StagedAborted(i))
        assert staging.aborted_by("p0") is None
        assert staging.aborted_by("p1") == StagedAborted(1)
        assert staging.aborted_by(f"p{_MAX_ABORTS}") == StagedAborted(_MAX_ABORTS)


# -- the store's handlers (a store not started) ---------------------------------------


def ok(reply: Reply) -> Reply:
    assert reply.status == ErrorCode.OK, (reply.status, reply.error)
    return reply


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Answered]:
    s = Answered(tmp_path / "store", sync=SyncMode.NORMAL, key=None, admin_key=None)
    try:
        yield s
    finally:
        s.log.close()


class TestHandlers:
    def test_stage_commit_push_live(self, store: Answered) -> None:
        ok(store.ask(EnsureTopicRequest("t", 2, True)))
        staged = Staged.from_wire(ok(store.ask(chunk("t", "q", 0, "s", 0, 1, b"a", b"bb"))))
        assert staged == Staged(2)
        ok(store.ask(chunk("t", "q", 0, "s", 1, 0, b"c")))
        done = ok(store.ask(CommitStagedRequest("t", "q", 0, (("s", 2),))))
        assert StagedCommitted.from_wire(done) == StagedCommitted(3, 2)
        (b1,) = store.live[("t", 1)].batches
        (b0,) = store.live[("t", 0)].batches
        assert (b1.first, list(b1.sizes), bytes(b1.blob)) == (0, [1, 2], b"abb")
        assert (b0.first, list(b0.sizes), bytes(b0.blob)) == (0, [1], b"c")
        assert b1.timestamp == store.log.fetch("t", 1, 0, 1)[0].timestamp_ns
        again = StagedCommitted.from_wire(
            ok(store.ask(CommitStagedRequest("t", "q", 0, (("s", 2),))))
        )
        assert again == StagedCommitted(3, 2, already=True)
        assert len(store.live[("t", 1)].batches) == 1  # nothing pushed again

    def test_abort_answers_the_count(self, store: Answered) -> None:
        ok(store.ask(EnsureTopicRequest("t", 1, True)))
        ok(store.ask(chunk("t", "q", 0, "s", 0, 0, b"a")))
        ok(store.ask(chunk("t", "q", 0, "s", 1, 0, b"b")))
        aborted = StagedAborted.from_wire(ok(store.ask(AbortStagedRequest("t", "q", 0))))
        assert aborted == StagedAborted(2)
        again = StagedAborted.from_wire(ok(store.ask(AbortStagedRequest("t", "q", 0))))
        assert again == StagedAborted(0)

    def test_a_topic_that_keeps_nothing_releases_what_was_committed(self, store: Answered) -> None:
        for topic, retain in (("gone", False), ("kept", True), ("grouped", False)):
            ok(store.ask(EnsureTopicRequest(topic, 1, retain)))
        store.log.create_group("grouped", "g")
        for topic in ("gone", "kept", "grouped"):
            ok(store.ask(chunk(topic, "q", 0, "s", 0, 0, b"a", b"b")))
            ok(store.ask(CommitStagedRequest(topic, "q", 0, (("s", 1),))))
            assert len(store.live[(topic, 0)].batches) == 1
        states = {t: store.log.channel_state(t, 0) for t in ("gone", "kept", "grouped")}
        assert {t: (s.head, s.tail) for t, s in states.items()} == {
            "gone": (2, 1),
            "kept": (0, 1),
            "grouped": (0, 1),
        }

    @pytest.mark.parametrize(
        "request_",
        [
            chunk("t", "q", 0, "s", 0, 0, b"a"),
            CommitStagedRequest("t", "q", 0, (("s", 1),)),
        ],
    )
    def test_a_split_store_refuses_staged_publishing(self, tmp_path: Path, request_: Any) -> None:
        s = Answered(tmp_path / "s", share=(0, 2), namespace="ns2", key=None, admin_key=None)
        try:
            s.log.ensure_topic("t", 2, retain_consumed=True)
            refused = s.ask(request_)
            assert refused.status == ErrorCode.UNSUPPORTED
            assert refused.error == (
                "staged publishing (the Spark sink's two-phase commit) needs one store for "
                "namespace 'ns2': this store serves share 0/2"
            )
            assert staging_of(s.log).staged_chunks() == 0
        finally:
            s.log.close()


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[Answered, QueryKey, str]]:
    key = write_key_file(tmp_path / "ns.key")
    s = Answered(
        tmp_path / "keyed", sync=SyncMode.NORMAL, key=str(tmp_path / "ns.key"), admin_key=None
    )
    own = QueryKey(key.secret, "q")
    try:
        s.log.ensure_topic("t", 1, retain_consumed=True)
        yield s, own, owned_query("q", own)
    finally:
        s.log.close()


class TestKeyedHandlers:
    def test_the_owner_commits_with_digests(self, keyed: tuple[Answered, QueryKey, str]) -> None:
        store, key, query = keyed
        c = chunk("t", query, 0, "s", 0, 0, b"a")
        ok(store.ask(c))
        stages, digests = (("s", 1),), (digest(c),)
        unsigned = store.ask(CommitStagedRequest("t", query, 0, stages))
        assert unsigned.status == ErrorCode.BAD_PARAMETER
        assert unsigned.error == (
            f"a COMMIT_STAGED of {query!r} carries no stage digests: the store's namespace "
            "has a key"
        )
        signed = [(s, n, d) for (s, n), d in zip(stages, digests, strict=True)]
        other = QueryKey(secrets.token_bytes(32), "q")
        forged = CommitStagedRequest(
            "t", query, 0, stages, digests, other.prove("commit", "t", query, 0, signed)
        )
        assert store.ask(forged).status == ErrorCode.ILLEGAL_OPERATION
        wrong_op = CommitStagedRequest(
            "t", query, 0, stages, digests, key.prove("abort", "t", query, 0, signed)
        )
        assert store.ask(wrong_op).status == ErrorCode.ILLEGAL_OPERATION
        assert store.log.channel_state("t", 0).tail == -1
        proof = key.prove("commit", "t", query, 0, signed)
        done = ok(store.ask(CommitStagedRequest("t", query, 0, stages, digests, proof)))
        assert StagedCommitted.from_wire(done) == StagedCommitted(1, 1)

    def test_a_chunk_replaced_after_staging_refuses_the_owners_commit(
        self, keyed: tuple[Answered, QueryKey, str]
    ) -> None:
        """Another key holder stages over the owner's chunk: the owner's signed commit
        (digest of what it staged) is refused and nothing is visible."""
        store, key, query = keyed
        c = chunk("t", query, 0, "s", 0, 0, b"mine")
        ok(store.ask(c))
        ok(store.ask(chunk("t", query, 0, "s", 0, 0, b"theirs")))
        stages, digests = (("s", 1),), (digest(c),)
        signed = [(s, n, d) for (s, n), d in zip(stages, digests, strict=True)]
        proof = key.prove("commit", "t", query, 0, signed)
        refused = store.ask(CommitStagedRequest("t", query, 0, stages, digests, proof))
        assert refused.status == ErrorCode.PRECONDITION_NOT_MET
        assert "are not what its writer staged" in refused.error
        assert store.log.channel_state("t", 0).tail == -1

    def test_a_signed_abort_takes_effect_once(self, keyed: tuple[Answered, QueryKey, str]) -> None:
        """The same proof sent again gets the first answer and drops what was staged since
        (Spark runs the micro-batch again under the same epoch); a new proof drops it."""
        store, key, query = keyed
        ok(store.ask(chunk("t", query, 0, "s", 0, 0, b"a")))
        assert store.ask(AbortStagedRequest("t", query, 0)).status == ErrorCode.ILLEGAL_OPERATION
        other = QueryKey(secrets.token_bytes(32), "q")
        forged = AbortStagedRequest("t", query, 0, other.prove("abort", "t", query, 0))
        assert store.ask(forged).status == ErrorCode.ILLEGAL_OPERATION
        assert staging_of(store.log).staged_chunks() == 1
        proof = key.prove("abort", "t", query, 0)
        first = StagedAborted.from_wire(ok(store.ask(AbortStagedRequest("t", query, 0, proof))))
        assert first == StagedAborted(1)
        ok(store.ask(chunk("t", query, 0, "retry", 0, 0, b"b")))
        ok(store.ask(chunk("t", query, 0, "retry", 1, 0, b"c")))
        replayed = StagedAborted.from_wire(ok(store.ask(AbortStagedRequest("t", query, 0, proof))))
        assert replayed == StagedAborted(1)
        assert staging_of(store.log).staged_chunks() == 2
        fresh = key.prove("abort", "t", query, 0)
        assert StagedAborted.from_wire(
            ok(store.ask(AbortStagedRequest("t", query, 0, fresh)))
        ) == StagedAborted(2)

    def test_without_a_key_aborts_are_not_remembered(self, store: Answered) -> None:
        ok(store.ask(EnsureTopicRequest("t", 1, True)))
        ok(store.ask(AbortStagedRequest("t", "q", 0, "")))
        ok(store.ask(chunk("t", "q", 0, "s", 0, 0, b"a")))
        assert StagedAborted.from_wire(ok(store.ask(AbortStagedRequest("t", "q", 0, "")))) == (
            StagedAborted(1)
        )
        assert staging_of(store.log)._aborts == {}


def sabotage(log: ChannelLog, sql: str) -> None:
    """Change the store's file as another program would (a second connection)."""
    db = sqlite3.connect(log.path)
    try:
        db.execute(sql)
        db.commit()
    finally:
        db.close()


def refuse(log: ChannelLog, when: str) -> None:
    sabotage(
        log,
        f"CREATE TRIGGER refuse_{when.replace(' ', '_')} {when}"
        " BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END",
    )


class TestFailuresNameTheStep:
    """A failed write is a typed error naming what was done, the topic and transaction."""

    def test_staging(self, log: ChannelLog) -> None:
        refuse(log, "BEFORE INSERT ON staged")
        with pytest.raises(DcpsError) as failed:
            staging_of(log).stage(chunk("t", "q", 0, "s", 0, 1, b"a"))
        assert str(failed.value) == (
            f"{log.path}: staging to topic 't' channel 1 failed: refused by a trigger "
            "[SQLITE_CONSTRAINT_TRIGGER]"
        )

    def test_committing(self, log: ChannelLog) -> None:
        staging_of(log).stage(chunk("t", "q", 2, "s", 0, 0, b"a"))
        refuse(log, "BEFORE INSERT ON batches")
        with pytest.raises(DcpsError) as failed:
            staging_of(log).commit("t", "q", 2, [("s", 1)])
        assert str(failed.value).startswith(
            f"{log.path}: committing topic 't' query 'q' epoch 2 failed: refused by a trigger"
        )
        assert (data(log), staging_of(log).staged_chunks()) == ([], 1)

    def test_committing_again(self, log: ChannelLog) -> None:
        staging_of(log).stage(chunk("t", "q", 2, "s", 0, 0, b"a"))
        staging_of(log).commit("t", "q", 2, [("s", 1)])
        staging_of(log).stage(chunk("t", "q", 2, "late", 0, 0, b"b"))
        refuse(log, "BEFORE DELETE ON staged")
        with pytest.raises(DcpsError) as failed:
            staging_of(log).commit("t", "q", 2, [("late", 1)])
        assert str(failed.value).startswith(
            f"{log.path}: committing topic 't' query 'q' epoch 2 again failed: refused"
        )

    def test_aborting(self, log: ChannelLog) -> None:
        staging_of(log).stage(chunk("t", "q", 2, "s", 0, 0, b"a"))
        refuse(log, "BEFORE DELETE ON staged")
        with pytest.raises(DcpsError) as failed:
            staging_of(log).abort("t", "q", 2)
        assert str(failed.value).startswith(
            f"{log.path}: aborting topic 't' query 'q' epoch 2 failed: refused by a trigger"
        )
        assert staging_of(log).staged_chunks() == 1

    def test_writing_a_body_to_its_segment_file(self, segmented: ChannelLog) -> None:
        root = segment_dir(segmented.path)
        root.mkdir(parents=True, exist_ok=True)
        (root / "1").write_bytes(b"not a directory")  # where topic 1's segments go
        with pytest.raises(BadParameterError) as failed:
            staging_of(segmented).stage(chunk("t", "q", 0, "s", 0, 0, b"0123456789"))
        assert str(failed.value) == (
            f"{root}: a path component is not a directory (writing a staged chunk to a "
            "segment file)"
        )
        assert staging_of(segmented).staged_chunks() == 0


def first_failure(steps: Any) -> BaseException | None:
    """Run ``steps`` (callables) until one raises; what it raised (None: none did)."""
    for step in steps:
        try:
            step()
        except DcpsError as exc:
            return exc
    return None


class TestFullDisk:
    def test_staging_and_committing_never_take_the_space_kept_for_commits(
        self, small_disk: Any
    ) -> None:
        """On a full disk a chunk is refused (not written with the reserve the store keeps
        for group commits and joins), and so is a staged commit."""
        path = small_disk.path / STORE_FILE
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1, retain_consumed=True)
            staging = staging_of(log)
            body = [bytes([i]) * 1000 for i in range(30)]  # 30 kB: inline
            for epoch in range(40):
                staging.stage(chunk("t", "q", epoch, "s", 0, 0, *body))
            small_disk.fill()
            refused = first_failure(
                lambda seq=seq: staging.stage(chunk("t", "p", 0, "s", seq, 0, *body))
                for seq in range(40)
            )
            assert isinstance(refused, OutOfResourcesError)
            assert "disk is full" in str(refused)
            assert log._reserve.held
            refused = first_failure(
                lambda epoch=epoch: staging.commit("t", "q", epoch, [("s", 1)])
                for epoch in range(40)
            )
            assert isinstance(refused, OutOfResourcesError)
            assert "disk is full" in str(refused)
            assert log._reserve.held
            small_disk.free()
