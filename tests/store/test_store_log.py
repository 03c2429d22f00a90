"""The store's SQLite log, tested directly on real disk."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dcps import BadParameterError, PreconditionNotMetError, UnsupportedError
from dcps.channels import CommitStatus, Position
from dcps.spark._access import StoreAccess
from dcps.store import Store
from dcps.store._log import FORMAT_VERSION, ChannelLog, SyncMode, default_channel_count
from dcps.wire._batches import ElementRun, PackedPayloads
from dcps.wire._messages import Reply
from tests.support.peers import PEERS_DIR

PEERS = PEERS_DIR


#: One microsecond in ns: the store's timestamps are whole microseconds, one per element.
US = 1000


class Clock:
    """A settable store clock (nanoseconds)."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def log(tmp_path: Path) -> ChannelLog:
    """A fresh log file in a temporary directory."""
    with ChannelLog(tmp_path / "store.db") as opened:
        yield opened


class TestPosition:
    def test_positions_order_within_a_channel(self) -> None:
        """Positions compare by channel then offset and are hashable."""
        assert Position(0, 1) < Position(0, 2) < Position(1, 0)
        assert len({Position(0, 1), Position(0, 1)}) == 1

    def test_position_json_round_trip(self) -> None:
        """A position survives JSON as {"channel": c, "offset": o}."""
        text = json.dumps(Position(3, 42).to_json())
        assert json.loads(text) == {"channel": 3, "offset": 42}
        assert Position.from_json(json.loads(text)) == Position(3, 42)

    def test_bad_positions_are_refused(self) -> None:
        """Negative channels, offsets below -1 and malformed JSON raise BadParameterError."""
        with pytest.raises(BadParameterError):
            Position(-1, 0)
        with pytest.raises(BadParameterError):
            Position(0, -2)
        with pytest.raises(BadParameterError):
            Position.from_json({"channel": 1})


class TestTopics:
    def test_default_channel_count_is_17(self) -> None:
        """The default is the next prime above sqrt(257), i.e. 17 as in Coherence."""
        assert default_channel_count() == 17
        assert default_channel_count(100) == 11

    def test_topic_configuration_persists(self, tmp_path: Path) -> None:
        """A topic's channel count and retention survive reopening the file."""
        path = tmp_path / "s.db"
        with ChannelLog(path) as log:
            log.ensure_topic("a", 3, retain_consumed=True)
            log.ensure_topic("b")
        with ChannelLog(path) as log:
            assert log.topic("a").channel_count == 3
            assert log.topic("a").retain_consumed
            assert log.topic("b").channel_count == 17

    def test_unknown_topic_and_channel_raise(self, log: ChannelLog) -> None:
        """Unknown topics and channels out of range are bad parameters."""
        log.ensure_topic("t", 2)
        with pytest.raises(BadParameterError, match="no channelled topic"):
            log.fetch("nope", 0, 0, 1)
        with pytest.raises(BadParameterError, match=r"channels 0\.\.1"):
            log.append("t", 2, [b"x"])


class TestAppendFetch:
    def test_offsets_are_dense_per_channel(self, log: ChannelLog) -> None:
        """Each channel numbers its elements 0, 1, 2, ... independently."""
        log.ensure_topic("t", 2)
        first = log.append("t", 0, [b"a", b"b"])
        second = log.append("t", 0, [b"c"])
        other = log.append("t", 1, [b"z"])
        assert [o for o, _ in first + second] == [0, 1, 2]
        assert [o for o, _ in other] == [0]
        assert [e.data for e in log.fetch("t", 0, 1, 10)] == [b"b", b"c"]
        assert [e.offset for e in log.fetch("t", 0, 0, 2)] == [0, 1]

    def test_timestamps_never_go_back(self, tmp_path: Path) -> None:
        """Accept timestamps come from the store clock and strictly increase in a channel.

        Each element has its own: the clock rounded up to a microsecond, and 1 µs
        after the channel's previous element when the clock is not ahead of it.
        """
        clock = Clock()
        with ChannelLog(tmp_path / "s.db", clock=clock) as log:
            log.ensure_topic("t", 1)
            clock.now = 100 * US
            a = log.append("t", 0, [b"a"])
            clock.now = 50 * US
            b = log.append("t", 0, [b"b", b"c"])
            clock.now = 200 * US + 1
            c = log.append("t", 0, [b"d"])
        assert a[0][1] == 100 * US
        assert [t for _, t in b] == [101 * US, 102 * US]
        assert c[0][1] == 201 * US

    def test_append_many_is_one_transaction(self, log: ChannelLog) -> None:
        """A failing batch in append_many leaves nothing of the others behind."""
        log.ensure_topic("t", 2)
        with pytest.raises(BadParameterError):
            log.append_many([("t", 0, [b"a"]), ("t", 9, [b"b"])])
        assert log.channel_state("t", 0).tail == -1
        log.append_many([("t", 0, [b"a"]), ("t", 1, [b"b", b"c"])])
        assert [s.tail for s in log.channel_states("t")] == [0, 1]

    def test_heads_and_tails(self, log: ChannelLog) -> None:
        """An empty channel has head 0 and tail -1; appending moves the tail."""
        log.ensure_topic("t", 1, retain_consumed=True)
        assert log.channel_state("t", 0).tail == -1
        log.append("t", 0, [b"a", b"b", b"c"])
        state = log.channel_state("t", 0)
        assert (state.head, state.tail, state.count) == (0, 2, 3)

    def test_find_timestamp(self, tmp_path: Path) -> None:
        """Seeking by time finds the first element accepted at or after it."""
        clock = Clock()
        with ChannelLog(tmp_path / "s.db", clock=clock) as log:
            log.ensure_topic("t", 1, retain_consumed=True)
            for now, data in ((10, b"a"), (20, b"b"), (30, b"c")):
                clock.now = now * US
                log.append("t", 0, [data])
            assert log.find_timestamp("t", 0, 20 * US) == 1
            assert log.find_timestamp("t", 0, 20 * US + 1) == 2
            assert log.find_timestamp("t", 0, 5 * US) == 0
            assert log.find_timestamp("t", 0, 99 * US) == 3


def stored_batches(path: Path) -> list[tuple[int, int, int]]:
    """``(channel, first_offset, count)`` of every row of the file's ``batches`` table."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(
            "SELECT channel, first_offset, count FROM batches ORDER BY channel, first_offset"
        ).fetchall()
    finally:
        db.close()


class TestStoredBatches:
    def test_each_batch_is_one_stored_row(self, tmp_path: Path) -> None:
        """An appended batch is one row of the batches table, whatever its size."""
        path = tmp_path / "s.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 2, retain_consumed=True)
            log.append_many([("t", 0, [b"a", b"bb", b"ccc"]), ("t", 1, [b"z"])])
            log.append("t", 0, [b"d", b"e"])
        assert stored_batches(path) == [(0, 0, 3), (0, 3, 2), (1, 0, 1)]

    def test_fetch_starts_and_ends_inside_batches(self, log: ChannelLog) -> None:
        """Fetching from an offset inside a batch returns exactly the elements asked for."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.append("t", 0, [b"a", b"b", b"c", b"d"])
        log.append("t", 0, [b"e", b"f"])
        got = log.fetch("t", 0, 2, 3)
        assert [(e.offset, e.data) for e in got] == [(2, b"c"), (3, b"d"), (4, b"e")]
        run = log.fetch_run("t", 0, 1, 2)
        assert (run.first, run.count, run.payloads()) == (1, 2, [b"b", b"c"])

    def test_head_can_fall_inside_a_batch(self, tmp_path: Path) -> None:
        """Releasing part of a batch moves the head into it; the rest stays readable."""
        path = tmp_path / "s.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            log.create_group("t", "g")
            log.append("t", 0, [b"a", b"b", b"c", b"d"])
            log.commit("t", "g", 0, 1)
            assert log.channel_state("t", 0).head == 2
            assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"c", b"d"]
            assert log.find_timestamp("t", 0, 0) == 2
        assert stored_batches(path) == [(0, 0, 4)]
        with ChannelLog(path) as log:
            assert log.channel_state("t", 0).head == 2
            assert [e.offset for e in log.fetch("t", 0, 0, 10)] == [2, 3]

    def test_trim_deletes_a_batch_once_every_element_is_released(self, tmp_path: Path) -> None:
        """A partially consumed batch stays stored until its last element is released."""
        path = tmp_path / "s.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1)
            log.create_group("t", "g")
            log.append("t", 0, [b"a", b"b", b"c"])
            log.append("t", 0, [b"d", b"e"])
            log.commit("t", "g", 0, 3)
            assert stored_batches(path) == [(0, 3, 2)]
            assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"e"]
            log.commit("t", "g", 0, 4)
            assert stored_batches(path) == []
            assert log.channel_state("t", 0).head == 5

    def test_trim_counts_released_elements(self, log: ChannelLog) -> None:
        """trim reports the elements released, including those of a batch kept in part."""
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.trim("t") == 3
        assert log.trim("t") == 0

    def test_bulk_fetch_equals_per_element_fetch(self, log: ChannelLog) -> None:
        """fetch_run returns the same offsets, timestamps and payloads as fetch, for any range."""
        rng = random.Random(6)
        log.ensure_topic("t", 1)
        log.create_group("t", "g")
        offset = 0
        for _ in range(30):
            n = rng.randint(1, 12)
            log.append("t", 0, [b"x" * rng.randint(0, 9) + b"%d" % (offset + i) for i in range(n)])
            offset += n
        log.commit("t", "g", 0, 17)  # the head lands inside a batch
        for start in [0, 17, 18, 19, *rng.sample(range(offset), 15)]:
            for most in (1, 2, 7, 50, 1000):
                elements = log.fetch("t", 0, start, most)
                run = log.fetch_run("t", 0, start, most)
                assert run.offsets().tolist() == [e.offset for e in elements]
                assert run.timestamps().tolist() == [e.timestamp_ns for e in elements]
                assert run.payloads() == [e.data for e in elements]
                assert len(run.data) == sum(len(e.data) for e in elements)

    def test_bulk_reply_survives_the_wire(self, log: ChannelLog) -> None:
        """A run in a FETCH reply's bulk form, serialised by Cyclone's binding, comes back equal."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.append("t", 0, [b"one", b"two", b"three"])
        log.append("t", 0, [b"four"])
        run = log.fetch_run("t", 0, 1, 10)
        wire = Reply(client="c", request_id=1, **run.reply_fields()).serialize()
        back = ElementRun.from_reply(Reply.deserialize(wire))
        assert back == run
        assert back.payloads() == [b"two", b"three", b"four"]

    def test_packed_sizes_must_match_the_blob(self, log: ChannelLog) -> None:
        """A packed batch whose sizes do not add up to its blob is refused and nothing is stored."""
        log.ensure_topic("t", 1)
        with pytest.raises(BadParameterError, match="sizes add up to 5"):
            log.append_packed([("t", 0, PackedPayloads([2, 3], b"abcd"))])
        assert log.channel_state("t", 0).tail == -1
        placed = log.append_packed([("t", 0, PackedPayloads([2, 2], b"abcd"))])
        assert [(first, count) for first, count, _ in placed] == [(0, 2)]
        assert [e.data for e in log.fetch("t", 0, 0, 5)] == [b"ab", b"cd"]


class TestCommits:
    def test_commit_results(self, log: ChannelLog) -> None:
        """Commits report committed, already committed, nothing to commit and rejected."""
        log.ensure_topic("t", 2, retain_consumed=True)
        log.create_group("t", "g")
        assert log.commit("t", "g", 0, 0) is CommitStatus.NOTHING_TO_COMMIT
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.commit("t", "g", 0, 5) is CommitStatus.REJECTED
        assert log.commit("t", "g", 0, 1) is CommitStatus.COMMITTED
        assert log.commit("t", "g", 0, 0) is CommitStatus.ALREADY_COMMITTED
        assert log.commit("t", "g", 0, 1) is CommitStatus.ALREADY_COMMITTED
        assert log.committed("t", "g", 0) == (1, True)

    def test_commit_needs_a_group(self, log: ChannelLog) -> None:
        """Committing for a group that does not exist is a precondition error."""
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a"])
        with pytest.raises(PreconditionNotMetError, match="no subscriber group"):
            log.commit("t", "ghost", 0, 0)

    def test_commits_persist(self, tmp_path: Path) -> None:
        """A group's commits survive reopening the file."""
        path = tmp_path / "s.db"
        with ChannelLog(path) as log:
            log.ensure_topic("t", 1, retain_consumed=True)
            log.create_group("t", "g")
            log.append("t", 0, [b"a", b"b"])
            log.commit("t", "g", 0, 0)
        with ChannelLog(path) as log:
            assert log.committed("t", "g", 0) == (0, True)
            assert log.groups("t") == ["g"]


class TestRetention:
    def test_elements_committed_by_every_group_are_deleted(self, log: ChannelLog) -> None:
        """Without retention an element goes once every group committed it."""
        log.ensure_topic("t", 1)
        log.create_group("t", "g1")
        log.create_group("t", "g2")
        log.append("t", 0, [b"a", b"b", b"c"])
        log.commit("t", "g1", 0, 1)
        assert log.channel_state("t", 0).head == 0
        log.commit("t", "g2", 0, 0)
        assert log.channel_state("t", 0).head == 1
        assert [e.offset for e in log.fetch("t", 0, 0, 10)] == [1, 2]

    def test_retained_topics_keep_committed_elements(self, log: ChannelLog) -> None:
        """With retain-consumed the elements stay after every commit."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b"])
        log.commit("t", "g", 0, 1)
        assert len(log.fetch("t", 0, 0, 10)) == 2

    def test_topic_without_groups_keeps_nothing(self, log: ChannelLog) -> None:
        """With no groups and no retention, a trim after delivery empties the channel."""
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a", b"b"])
        assert log.trim("t") == 2
        state = log.channel_state("t", 0)
        assert (state.head, state.tail) == (2, 1)
        assert log.append("t", 0, [b"c"])[0][0] == 2

    def test_destroying_a_group_releases_its_elements(self, log: ChannelLog) -> None:
        """Destroying the slowest group lets the others' commits delete elements."""
        log.ensure_topic("t", 1)
        log.create_group("t", "fast")
        log.create_group("t", "slow")
        log.append("t", 0, [b"a", b"b"])
        log.commit("t", "fast", 0, 1)
        assert log.destroy_group("t", "slow")
        assert log.fetch("t", 0, 0, 10) == []
        assert not log.destroy_group("t", "slow")


class TestSeek:
    def test_seek_clamps_to_head_and_tail(self, log: ChannelLog) -> None:
        """Seeking before the head lands at head - 1, beyond the tail at the tail."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.seek("t", "g", 0, offset=-1) == -1
        assert log.seek("t", "g", 0, offset=99) == 2
        assert log.seek("t", "g", 0, to="tail") == 2
        assert log.seek("t", "g", 0, to="head") == -1

    def test_seeking_back_rolls_back_commits(self, log: ChannelLog) -> None:
        """With retention, seeking before the commit moves the commit back."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        log.commit("t", "g", 0, 2)
        assert log.seek("t", "g", 0, offset=0) == 0
        assert log.committed("t", "g", 0) == (0, True)
        log.seek("t", "g", 0, offset=2)
        assert log.committed("t", "g", 0) == (0, True)

    def test_seek_to_head_clears_commits(self, log: ChannelLog) -> None:
        """Seeking to the head of a retained topic resets the group's commit."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b"])
        log.commit("t", "g", 0, 1)
        log.seek("t", "g", 0, to="head")
        assert log.committed("t", "g", 0) == (-1, False)

    def test_no_seeking_before_commit_without_retention(self, log: ChannelLog) -> None:
        """Without retention a seek cannot go back past the group's last commit."""
        log.ensure_topic("t", 1)
        log.create_group("t", "g")
        log.create_group("t", "other")
        log.append("t", 0, [b"a", b"b", b"c"])
        log.commit("t", "g", 0, 1)
        assert log.seek("t", "g", 0, offset=-1) == 1

    def test_seek_by_timestamp(self, tmp_path: Path) -> None:
        """Seeking by time resumes at the first element accepted strictly after it (seed 000)."""
        clock = Clock()
        with ChannelLog(tmp_path / "s.db", clock=clock) as log:
            log.ensure_topic("t", 1, retain_consumed=True)
            log.create_group("t", "g")
            for now, data in ((10, b"a"), (20, b"b"), (30, b"c")):
                clock.now = now * US
                log.append("t", 0, [data])
            assert log.seek("t", "g", 0, timestamp_ns=15 * US) == 0
            assert log.seek("t", "g", 0, timestamp_ns=20 * US) == 1  # b's own time: after b
            assert log.seek("t", "g", 0, timestamp_ns=99 * US) == 2


class TestFileSafety:
    def test_corrupt_file_is_refused_untouched(self, tmp_path: Path) -> None:
        """A file of garbage raises a clear error and keeps its bytes."""
        path = tmp_path / "s.db"
        garbage = os.urandom(8192)
        path.write_bytes(garbage)
        with pytest.raises(BadParameterError, match="corrupt or not a SQLite file"):
            ChannelLog(path)
        assert path.read_bytes() == garbage

    def test_foreign_sqlite_file_is_refused_untouched(self, tmp_path: Path) -> None:
        """Another application's SQLite file is not taken over."""
        path = tmp_path / "s.db"
        db = sqlite3.connect(path)
        db.execute("CREATE TABLE customers (id INTEGER)")
        db.commit()
        db.close()
        before = path.read_bytes()
        with pytest.raises(BadParameterError, match="something else"):
            ChannelLog(path)
        assert path.read_bytes() == before

    def test_newer_format_is_refused(self, tmp_path: Path) -> None:
        """A store written by a newer dcps format raises UnsupportedError."""
        path = tmp_path / "s.db"
        ChannelLog(path).close()
        db = sqlite3.connect(path)
        db.execute("UPDATE dcps_format SET value = '99' WHERE key = 'version'")
        db.commit()
        db.close()
        with pytest.raises(UnsupportedError, match="version 99"):
            ChannelLog(path)

    @pytest.mark.parametrize("sync", list(SyncMode))
    def test_kill_9_mid_stream_keeps_confirmed_batches(
        self, tmp_path: Path, sync: SyncMode
    ) -> None:
        """After kill -9 of a writing process, every batch it confirmed is there."""
        path = tmp_path / "s.db"
        proc = subprocess.Popen(
            [sys.executable, str(PEERS / "log_writer.py"), str(path), sync.value],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            confirmed = 0
            deadline = time.monotonic() + 30
            assert proc.stdout is not None
            while confirmed < 40 and time.monotonic() < deadline:
                line = proc.stdout.readline()
                if not line:
                    break
                confirmed = int(line)
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
        assert confirmed >= 40
        with ChannelLog(path) as log:
            elements = log.fetch("t", 0, 0, 1_000_000)
        offsets = [e.offset for e in elements]
        assert offsets == list(range(len(offsets)))
        assert len(elements) >= confirmed * 10
        assert all(e.data == b"%d" % e.offset for e in elements)


V1_SCHEMA = """
CREATE TABLE dcps_format (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE topics (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE,
    channel_count INTEGER NOT NULL, retain_consumed INTEGER NOT NULL,
    type_name TEXT NOT NULL DEFAULT '', created_ns INTEGER NOT NULL);
CREATE TABLE channels (topic_id INTEGER NOT NULL REFERENCES topics(id), channel INTEGER NOT NULL,
    head INTEGER NOT NULL, next_offset INTEGER NOT NULL, last_ts INTEGER NOT NULL,
    PRIMARY KEY (topic_id, channel)) WITHOUT ROWID;
CREATE TABLE elements (topic_id INTEGER NOT NULL, channel INTEGER NOT NULL,
    "offset" INTEGER NOT NULL, ts INTEGER NOT NULL, data BLOB NOT NULL,
    PRIMARY KEY (topic_id, channel, "offset")) WITHOUT ROWID;
CREATE INDEX elements_ts ON elements (topic_id, channel, ts);
CREATE TABLE groups (topic_id INTEGER NOT NULL, name TEXT NOT NULL, created_ns INTEGER NOT NULL,
    PRIMARY KEY (topic_id, name)) WITHOUT ROWID;
CREATE TABLE commits (topic_id INTEGER NOT NULL, grp TEXT NOT NULL, channel INTEGER NOT NULL,
    committed INTEGER NOT NULL, explicit INTEGER NOT NULL,
    PRIMARY KEY (topic_id, grp, channel)) WITHOUT ROWID;
INSERT INTO dcps_format VALUES ('magic', 'dcps-channel-store'), ('version', '1');
INSERT INTO topics VALUES (1, 'old', 2, 0, 'T', 5);
INSERT INTO channels VALUES (1, 0, 2, 7, 30), (1, 1, 0, 1, 40);
INSERT INTO groups VALUES (1, 'g', 5);
INSERT INTO commits VALUES (1, 'g', 0, 1, 1), (1, 'g', 1, -1, 0);
"""
# channel 0: offsets 0, 1 released (head 2); 2..3 at ts 10, 4 at ts 20, 5..6 at ts 30
V1_ELEMENTS = [(0, 2, 10), (0, 3, 10), (0, 4, 20), (0, 5, 30), (0, 6, 30), (1, 0, 40)]


def make_v1_store(path: Path) -> None:
    """A version-1 store file as dcps 0.1 wrote it (one row per element)."""
    db = sqlite3.connect(path)
    db.executescript(V1_SCHEMA)
    db.executemany(
        "INSERT INTO elements VALUES (1, ?, ?, ?, ?)",
        [(c, o, ts, b"e%d/%d" % (c, o)) for c, o, ts in V1_ELEMENTS],
    )
    db.commit()
    db.close()


class TestFormatVersions:
    def test_version_1_file_is_migrated_in_place(self, tmp_path: Path) -> None:
        """Opening a version-1 file regroups its elements into batches by timestamp runs."""
        path = tmp_path / "s.db"
        make_v1_store(path)
        with ChannelLog(path, clock=Clock()) as log:
            assert [(s.head, s.tail) for s in log.channel_states("old")] == [(2, 6), (0, 0)]
            got = log.fetch("old", 0, 0, 10)
            # version 4 gives each element its own timestamp, in whole µs, in offset order
            assert [(e.offset, e.timestamp_ns, e.data) for e in got] == [
                (o, (i + 1) * US, b"e0/%d" % o)
                for i, (o, _) in enumerate((o, ts) for c, o, ts in V1_ELEMENTS if c == 0)
            ]
            assert log.find_timestamp("old", 0, 2 * US + 1) == 4
            assert log.committed("old", "g", 0) == (1, True)
            assert log.append("old", 0, [b"new"]) == [(7, 6 * US)]
        assert stored_batches(path)[:3] == [(0, 2, 2), (0, 4, 1), (0, 5, 2)]
        db = sqlite3.connect(path)
        try:
            assert db.execute("SELECT value FROM dcps_format WHERE key = 'version'").fetchone() == (
                # migrated through every version since 1 (batches, type identities, ...)
                str(FORMAT_VERSION),
            )
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
            assert "elements" not in tables
            assert {"staged", "staged_commits"} <= tables
        finally:
            db.close()

    def test_direct_reader_refuses_a_version_1_file(self, tmp_path: Path) -> None:
        """Reading a not yet migrated file directly (data_dir) fails naming its version."""
        make_v1_store(tmp_path / "channels.db")
        with pytest.raises(UnsupportedError, match="version 1"):
            StoreAccess(data_dir=str(tmp_path))


class TestDirectAccess:
    def test_file_ranges_are_exact_or_fail(self, tmp_path: Path) -> None:
        """A range partly released by retention fails; ranges inside what is stored are exact."""
        with ChannelLog(tmp_path / "channels.db") as log:
            log.ensure_topic("t", 1)
            log.create_group("t", "g")
            log.append("t", 0, [b"%d" % i for i in range(5)])
            log.append("t", 0, [b"%d" % i for i in range(5, 8)])
            log.commit("t", "g", 0, 2)
        access = StoreAccess(data_dir=str(tmp_path))
        try:
            assert access.bounds("t") == {0: (3, 8)}
            with pytest.raises(PreconditionNotMetError, match="no longer"):
                access.fetch("t", 0, 2, 6)
            run = access.fetch("t", 0, 3, 7)
            assert run.payloads() == [b"3", b"4", b"5", b"6"]
            assert access.fetch("t", 0, 0, 8, strict=False).offsets().tolist() == list(range(3, 8))
        finally:
            access.close()

    def test_dds_fetch_equals_file_fetch(self, tmp_path: Path, domain_id: int, unique: str) -> None:
        """Over DDS (bulk FETCH replies, several in flight) and from the file, ranges agree."""
        with Store(tmp_path, domain_id=domain_id, namespace=unique, sync=SyncMode.NORMAL) as store:
            store.log.ensure_topic("t", 1, retain_consumed=True)
            for i in range(20):
                store.log.append("t", 0, [b"%d-%d" % (i, j) for j in range(i % 5 + 1)])
            tail = store.log.channel_state("t", 0).tail
            dds = StoreAccess(domain_id=domain_id, namespace=unique)
            dds.fetch_chunk = 4  # many requests per range
            local = StoreAccess(data_dir=str(tmp_path))
            try:
                for start, end in ((0, tail + 1), (3, 17), (4, 5), (10, tail + 1)):
                    a = dds.fetch("t", 0, start, end)
                    b = local.fetch("t", 0, start, end)
                    assert a.offsets().tolist() == b.offsets().tolist()
                    assert a.timestamps().tolist() == b.timestamps().tolist()
                    assert (a.sizes, a.data) == (b.sizes, b.data)
                    expected = store.log.fetch("t", 0, start, end - start)
                    assert a.payloads() == [e.data for e in expected]
                with pytest.raises(PreconditionNotMetError):
                    dds.fetch("t", 0, 0, tail + 2)
                assert dds.fetch("t", 0, 0, tail + 9, strict=False).end == tail + 1
            finally:
                dds.close()
                local.close()

    def test_dds_ranges_released_in_part_fail(
        self, tmp_path: Path, domain_id: int, unique: str
    ) -> None:
        """Over DDS a range retention released in part fails; a lenient read starts at the head."""
        with Store(tmp_path, domain_id=domain_id, namespace=unique, sync=SyncMode.NORMAL) as store:
            store.log.ensure_topic("t", 1)
            store.log.create_group("t", "g")
            store.log.append("t", 0, [b"%d" % i for i in range(10)])
            store.log.commit("t", "g", 0, 3)
            dds = StoreAccess(domain_id=domain_id, namespace=unique)
            dds.fetch_chunk = 3
            try:
                with pytest.raises(PreconditionNotMetError, match="no longer"):
                    dds.fetch("t", 0, 2, 8)
                assert dds.fetch("t", 0, 4, 10).payloads() == [b"%d" % i for i in range(4, 10)]
                lenient = dds.fetch("t", 0, 0, 10, strict=False)
                assert lenient.offsets().tolist() == list(range(4, 10))
            finally:
                dds.close()
