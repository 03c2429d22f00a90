"""Behaviour of the store log pinned by mutation testing (docs/mutation.md).

Each test kills mutants of ``dcps/store/_log.py`` that the other log tests let live:
the default channel count, topic configuration, retention counts across channels, a
repeated group creation, and the message of every SQLite failure (which names what
the store was doing, and loses nothing). Fast: a real log file on a tmp dir, no DDS.
Failures are made real with SQLite triggers and renamed tables, written by a second
connection to the same file, as a damaged or tampered file would be.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcps import AlreadyClosedError, BadParameterError, DcpsError, PreconditionNotMetError
from dcps.channels import CommitStatus
from dcps.store._log import ChannelLog, TopicInfo, default_channel_count


@pytest.fixture
def log(tmp_path: Path) -> Iterator[ChannelLog]:
    """A fresh log file in a temporary directory."""
    with ChannelLog(tmp_path / "store.db") as opened:
        yield opened


def tamper(log: ChannelLog, sql: str) -> None:
    """Run ``sql`` on the log's file through a second connection (as another program would)."""
    other = sqlite3.connect(log.path, isolation_level=None)
    try:
        other.execute(sql)
    finally:
        other.close()


def refuse(log: ChannelLog, event: str, table: str) -> str:
    """Make every ``event`` (INSERT, UPDATE, DELETE) on ``table`` fail; return the trigger."""
    name = f"refuse_{event.lower()}_{table}"
    fail = "SELECT RAISE(ABORT, 'refused')"
    tamper(log, f"CREATE TRIGGER {name} BEFORE {event} ON {table} BEGIN {fail}; END")
    return name


def is_prime(n: int) -> bool:
    return n > 1 and all(n % d for d in range(2, n))


class TestDefaultChannelCount:
    def test_smallest_prime_above_the_square_root(self) -> None:
        """For 1..3000 partitions the default is the smallest prime above sqrt(partitions)."""
        for partitions in range(1, 3001):
            expected = math.isqrt(partitions) + 1
            while not is_prime(expected):
                expected += 1
            assert default_channel_count(partitions) == expected, partitions

    def test_exact_small_cases(self) -> None:
        """1 partition gives 2 channels, 9 give 5, 64 give 11, 257 give 17."""
        assert [default_channel_count(p) for p in (1, 4, 9, 64, 257)] == [2, 3, 5, 11, 17]

    def test_zero_partitions_is_refused(self) -> None:
        """Below one partition: a BadParameterError naming the value."""
        with pytest.raises(BadParameterError, match="partition_count must be >= 1, got 0"):
            default_channel_count(0)


class TestTopicConfiguration:
    def test_in_dir_passes_its_options_on(self, tmp_path: Path) -> None:
        """Options given to in_dir reach the log: its clock stamps the elements (rounded up
        to a whole microsecond, as every element stamp is)."""
        with ChannelLog.in_dir(tmp_path / "data", clock=lambda: 1234) as log:
            log.ensure_topic("t", 1)
            assert log.append("t", 0, [b"a"]) == [(0, 2000)]

    def test_ensure_topic_returns_and_remembers_its_configuration(self, tmp_path: Path) -> None:
        """The configuration returned, looked up and read back after reopening is the one given."""
        expected = TopicInfo("t", 3, True, "T", "T#1")
        with ChannelLog(tmp_path / "store.db") as log:
            assert log.ensure_topic("t", 3, True, "T", "T#1") == expected
            assert log.topic("t") == expected
        with ChannelLog(tmp_path / "store.db") as log:
            assert log.topic("t") == expected

    def test_a_topic_created_without_a_type_records_the_first_one_named(
        self, log: ChannelLog
    ) -> None:
        """No type given: none recorded; the first identity named later is kept."""
        assert log.ensure_topic("t", 1) == TopicInfo("t", 1, False, "", "")
        assert log.ensure_topic("t", type_name="T", type_identity="T#1") == TopicInfo(
            "t", 1, False, "T", "T#1"
        )

    def test_topics_are_listed_by_name(self, log: ChannelLog) -> None:
        """topics() is sorted by name, not by creation order."""
        for name in ("b", "c", "a"):
            log.ensure_topic(name, 1)
        assert [t.name for t in log.topics()] == ["a", "b", "c"]


class TestGroups:
    def test_creating_a_group_twice_keeps_its_commits(self, log: ChannelLog) -> None:
        """The first creation answers True; a second answers False and changes nothing."""
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.create_group("t", "g") is True
        assert log.commit("t", "g", 0, 1) is CommitStatus.COMMITTED
        assert log.create_group("t", "g") is False
        assert log.committed("t", "g", 0) == (1, True)
        assert log.groups("t") == ["g"]

    def test_the_only_element_of_a_channel_can_be_committed(self, log: ChannelLog) -> None:
        """A channel holding one element (tail 0): committing offset 0 commits it."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"only"])
        assert log.commit("t", "g", 0, 0) is CommitStatus.COMMITTED
        assert log.committed("t", "g", 0) == (0, True)

    def test_seeking_to_the_commit_point_changes_nothing(self, log: ChannelLog) -> None:
        """A seek to exactly the committed offset keeps the commit explicit."""
        log.ensure_topic("t", 1)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.commit("t", "g", 0, 1) is CommitStatus.COMMITTED
        assert log.seek("t", "g", 0, offset=1) == 1
        assert log.seek("t", "g", 0, to="head") == 1
        assert log.committed("t", "g", 0) == (1, True)
        assert log.commit("t", "g", 0, 1) is CommitStatus.ALREADY_COMMITTED


class TestRetentionCounts:
    def test_trim_releases_every_channel_and_counts_them_all(self, log: ChannelLog) -> None:
        """An empty first channel does not stop the others; the count is the sum."""
        log.ensure_topic("t", 3)
        log.append("t", 1, [b"a", b"b"])
        log.append("t", 2, [b"c", b"d", b"e"])
        assert log.trim("t") == 5
        assert [(s.head, s.tail) for s in log.channel_states("t")] == [(0, -1), (2, 1), (3, 2)]

    def test_trim_counts_only_what_it_releases_now(self, log: ChannelLog) -> None:
        """After a first release, a second counts only the newer elements."""
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.trim("t") == 3
        log.append("t", 0, [b"d"])
        assert log.trim("t") == 1
        assert log.trim("t") == 0

    def test_a_retained_topic_releases_nothing(self, log: ChannelLog) -> None:
        """trim() of a topic that retains consumed elements releases and counts none."""
        log.ensure_topic("t", 1, retain_consumed=True)
        log.append("t", 0, [b"a"])
        assert log.trim("t") == 0
        assert log.channel_state("t", 0).head == 0


class TestCommitObserver:
    def test_the_observer_gets_each_commits_duration(self, log: ChannelLog) -> None:
        """The metrics hook receives one short, non-negative duration per transaction."""
        seen: list[float] = []
        log.commit_observer = seen.append
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a"])
        assert len(seen) == 2
        assert all(0 <= s < 60 for s in seen)


class TestFailedWritesSayWhatFailed:
    """A write SQLite refuses raises a DcpsError naming path and operation; nothing changes."""

    def message(self, log: ChannelLog, doing: str) -> str:
        return re.escape(f"{log.path}: {doing} failed")

    def test_creating_a_topic(self, log: ChannelLog) -> None:
        refuse(log, "INSERT", "topics")
        with pytest.raises(DcpsError, match=self.message(log, "creating topic 't'")):
            log.ensure_topic("t", 1)
        assert log.topics() == []

    def test_appending_names_every_topic_of_the_transaction(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1)
        log.ensure_topic("a", 1)
        trigger = refuse(log, "INSERT", "batches")
        with pytest.raises(DcpsError, match=self.message(log, "appending to topic 'a', 't'")):
            log.append_many([("t", 0, [b"x"]), ("a", 0, [b"y"])])
        tamper(log, f"DROP TRIGGER {trigger}")
        assert log.append("t", 0, [b"z"])[0][0] == 0  # the refused batch took no offset

    def test_creating_and_destroying_a_group(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1)
        refuse(log, "INSERT", "groups")
        with pytest.raises(DcpsError, match=self.message(log, "creating group 'g' of topic 't'")):
            log.create_group("t", "g")
        assert log.groups("t") == []
        log.ensure_topic("u", 1)
        tamper(log, "DROP TRIGGER refuse_insert_groups")
        log.create_group("t", "g")
        refuse(log, "DELETE", "groups")
        doing = "destroying group 'g' of topic 't'"
        with pytest.raises(DcpsError, match=self.message(log, doing)):
            log.destroy_group("t", "g")
        assert log.groups("t") == ["g"]

    def test_committing_and_seeking(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1, retain_consumed=True)
        log.create_group("t", "g")
        log.append("t", 0, [b"a", b"b", b"c"])
        assert log.commit("t", "g", 0, 1) is CommitStatus.COMMITTED
        refuse(log, "UPDATE", "commits")
        doing = "committing offset 2 of topic 't' channel 0"
        with pytest.raises(DcpsError, match=self.message(log, doing)):
            log.commit("t", "g", 0, 2)
        seeking = self.message(log, "seeking group 'g' of topic 't' channel 0")
        with pytest.raises(DcpsError, match=seeking):
            log.seek("t", "g", 0, offset=0)
        with pytest.raises(DcpsError, match=seeking):
            log.seek("t", "g", 0, to="head")
        assert log.committed("t", "g", 0) == (1, True)

    def test_releasing_consumed_elements(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1)
        log.append("t", 0, [b"a"])
        refuse(log, "DELETE", "batches")
        doing = "releasing consumed elements of topic 't'"
        with pytest.raises(DcpsError, match=self.message(log, doing)):
            log.trim("t")
        assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"a"]


class TestFailedReadsSayWhatFailed:
    """A read of a file whose tables are gone raises a DcpsError naming path and operation."""

    def message(self, log: ChannelLog, doing: str) -> str:
        return re.escape(f"{log.path}: {doing} failed")

    def test_group_lookups(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1)
        tamper(log, "ALTER TABLE groups RENAME TO gone")
        with pytest.raises(DcpsError, match=self.message(log, "listing the groups of topic 't'")):
            log.groups("t")
        doing = "looking up group 'g' of topic 't'"
        with pytest.raises(DcpsError, match=self.message(log, doing)):
            log.has_group("t", "g")

    def test_reading_a_commit(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1)
        tamper(log, "ALTER TABLE commits RENAME TO gone")
        doing = "reading the commit of group 'g' of topic 't'"
        with pytest.raises(DcpsError, match=self.message(log, doing)):
            log.committed("t", "g", 0)

    def test_searching_by_time(self, log: ChannelLog) -> None:
        log.ensure_topic("t", 1)
        tamper(log, "ALTER TABLE batches RENAME TO gone")
        doing = "searching topic 't' channel 0 by time"
        with pytest.raises(DcpsError, match=self.message(log, doing)):
            log.find_timestamp("t", 0, 0)

    def test_reads_of_the_stores_own_tables(self, log: ChannelLog) -> None:
        """read() (used by the durables) names the caller's operation too."""
        with (
            pytest.raises(DcpsError, match=self.message(log, "reading the durables")),
            log.read("reading the durables") as db,
        ):
            db.execute("SELECT * FROM no_such_table")


class TestTopicTypes:
    def test_the_recorded_identity_is_accepted_again(self, log: ChannelLog) -> None:
        """Naming the identity a topic was created with returns its configuration."""
        created = log.ensure_topic("t", 1, type_name="T", type_identity="T#1")
        assert log.ensure_topic("t", type_name="T", type_identity="T#1") == created

    def test_another_type_name_is_refused_naming_the_known_one(self, log: ChannelLog) -> None:
        """A topic created with a type name only refuses another type, naming the first."""
        log.ensure_topic("t", 1, type_name="T")
        with pytest.raises(PreconditionNotMetError, match=r"holds elements of type 'T'.*not 'U#1'"):
            log.ensure_topic("t", type_name="U", type_identity="U#1")
        assert log.topic("t") == TopicInfo("t", 1, False, "T", "")

    def test_the_same_type_name_records_its_identity(self, log: ChannelLog) -> None:
        """A topic created with a type name records the identity named with that name."""
        log.ensure_topic("t", 1, type_name="T")
        assert log.ensure_topic("t", type_name="T", type_identity="T#1").type_identity == "T#1"
        assert log.topic("t").type_identity == "T#1"

    def test_recording_a_type_that_fails_says_so(self, log: ChannelLog) -> None:
        """A refused recording names the topic and records nothing."""
        log.ensure_topic("t", 1)
        refuse(log, "UPDATE", "topics")
        with pytest.raises(DcpsError, match=re.escape("recording the type of topic 't' failed")):
            log.ensure_topic("t", type_name="T", type_identity="T#1")


class TestPublishKeys:
    def test_a_key_is_remembered_across_a_reopen(self, tmp_path: Path) -> None:
        """A fresh log appends a keyed batch; reopened, the same key is a duplicate answered
        with the original positions and stamps (one whole microsecond per element)."""
        path = tmp_path / "store.db"
        with ChannelLog(path, clock=lambda: 7) as log:
            log.ensure_topic("t", 1)
            first = [(0, 1000), (1, 2000)]
            assert log.append_keyed("t", 0, [b"a", b"b"], "k1") == (first, False)
        with ChannelLog(path, clock=lambda: 9) as log:
            assert log.append_keyed("t", 0, [b"a", b"b"], "k1") == (first, True)
            assert log.append_keyed("t", 0, [b"c"], "k2") == ([(2, 3000)], False)
            assert [e.data for e in log.fetch("t", 0, 0, 10)] == [b"a", b"b", b"c"]


class TestClose:
    def test_a_closed_log_refuses_use_and_closes_again(self, tmp_path: Path) -> None:
        """A closed log raises AlreadyClosedError naming the path; close() is idempotent."""
        log = ChannelLog(tmp_path / "store.db")
        log.close()
        with pytest.raises(AlreadyClosedError, match=re.escape(str(log.path))):
            log.ensure_topic("t", 1)
        log.close()
