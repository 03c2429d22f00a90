"""Exact boundaries of the Spark source, driven without a JVM: the data source's own reader
objects (as Spark's Python workers call them) against a real store in this process.

- ``endTimestamp`` excludes an element accepted exactly at it and keeps every older one
  (in ns, and in ISO 8601 where a wrong unit would drop every row);
- a streaming commit of Spark's end offset ``n`` commits exactly ``n - 1`` for the group.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.spark import _access
from dcps.spark._source import DcpsDataSource
from idl._errors import BadParameterError, DcpsTimeoutError
from tests.support import spark_support  # noqa: F401 (puts tests/support/peers on sys.path)

from spark_types import Reading  # isort: skip  (importable once spark_support ran)

GROUP_SIZE = 5
TIMEOUT = 30.0


@pytest.fixture
def stamped(store: Any, domain_id: int, namespace: str, topic_name: str) -> Iterator[list[int]]:
    """Three groups of 5 readings (seq 0..14) on one channel, each group confirmed before
    the next is published; yields the store timestamp (ns) of each seq."""
    topic = ChannelledTopic(topic_name, Reading, channel_count=1, retain_consumed=True)
    with ChannelPublisher(topic, domain_id=domain_id, namespace=namespace) as pub:
        for first in range(0, 3 * GROUP_SIZE, GROUP_SIZE):
            futures = [
                pub.publish(Reading(sensor=i % 7, seq=i, value=i / 4))
                for i in range(first, first + GROUP_SIZE)
            ]
            pub.flush()
            for f in futures:
                f.result(TIMEOUT)
    reader = store.log.reader()
    try:
        run, _ = reader.fetch(topic_name, 0, 0, 100)
    finally:
        reader.close()
    assert run.offsets().tolist() == list(range(3 * GROUP_SIZE))
    try:
        yield run.timestamps().tolist()
    finally:
        for key in [k for k in _access._cache if k[1] == namespace]:
            _access._cache.pop(key).close()


def options(domain_id: int, namespace: str, topic: str, **extra: str) -> dict[str, str]:
    """Source options for ``topic`` of the test's store."""
    return {
        "topic": topic,
        "type": "spark_types:Reading",
        "domain": str(domain_id),
        "namespace": namespace,
        "timeout": str(int(TIMEOUT)),
        **extra,
    }


def batch_seqs(opts: dict[str, str]) -> list[int]:
    """The ``seq`` of every row a batch read with ``opts`` returns, sorted."""
    source = DcpsDataSource(opts)
    reader = source.reader(source.schema())
    seqs: list[int] = []
    for part in reader.partitions():
        for batch in reader.read(part):
            seqs.extend(batch.column("seq").to_pylist())
    return sorted(seqs)


def iso(ns: int) -> str:
    """ISO 8601 (UTC, microseconds) of ``ns`` rounded down to the microsecond."""
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=ns // 1000)).isoformat()


class TestTimeRange:
    def test_end_timestamp_equal_to_an_element_excludes_it_and_keeps_the_older(
        self, stamped: list[int], domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """endTimestamp = the accept time of seq 5: exactly seq 0..4; one ns more adds seq 5."""
        at = stamped[GROUP_SIZE]
        assert max(stamped[:GROUP_SIZE]) < at  # the groups were accepted apart
        opts = options(domain_id, namespace, topic_name, endTimestamp=str(at))
        assert batch_seqs(opts) == list(range(GROUP_SIZE))
        later = options(domain_id, namespace, topic_name, endTimestamp=str(at + 1))
        assert batch_seqs(later) == [s for s, ts in enumerate(stamped) if ts <= at]
        assert GROUP_SIZE in batch_seqs(later)

    def test_start_timestamp_equal_to_an_element_keeps_it(
        self, stamped: list[int], domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """startTimestamp = the accept time of seq 10: exactly seq 10..14."""
        at = stamped[2 * GROUP_SIZE]
        assert max(stamped[: 2 * GROUP_SIZE]) < at
        opts = options(domain_id, namespace, topic_name, startTimestamp=str(at))
        assert batch_seqs(opts) == list(range(2 * GROUP_SIZE, 3 * GROUP_SIZE))

    def test_iso_end_timestamp_selects_by_the_same_instant(
        self, stamped: list[int], domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """An ISO 8601 endTimestamp (microseconds) selects the elements accepted before it."""
        cut = stamped[GROUP_SIZE] // 1000 * 1000
        assert max(stamped[:GROUP_SIZE]) < cut
        opts = options(domain_id, namespace, topic_name, endTimestamp=iso(stamped[GROUP_SIZE]))
        assert batch_seqs(opts) == list(range(GROUP_SIZE))
        window = options(
            domain_id,
            namespace,
            topic_name,
            startTimestamp=iso(stamped[GROUP_SIZE] + 1000),
            endTimestamp=iso(stamped[2 * GROUP_SIZE] + 1000),
        )
        first_in = stamped[GROUP_SIZE] // 1000 * 1000 + 1000
        last_out = stamped[2 * GROUP_SIZE] // 1000 * 1000 + 1000
        expected = [s for s, ts in enumerate(stamped) if first_in <= ts < last_out]
        assert 2 * GROUP_SIZE in expected
        assert batch_seqs(window) == expected


def committed(store: Any, topic: str, group: str) -> tuple[int, int]:
    """``(committed, explicit)`` of ``group`` in channel 0, read from the store's file."""
    db = sqlite3.connect(f"file:{Path(store.log.path)}?mode=ro", uri=True)
    try:
        row = db.execute(
            "SELECT committed, explicit FROM commits JOIN topics ON topics.id = topic_id"
            " WHERE name = ? AND grp = ? AND channel = 0",
            (topic, group),
        ).fetchone()
    finally:
        db.close()
    assert row is not None
    return int(row[0]), int(row[1])


class TestGroupCommits:
    def test_end_offset_n_commits_n_minus_one(
        self, store: Any, stamped: list[int], domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """Spark's end offset is the next offset to read: committing it commits the one
        before, exactly (the element at the end offset stays unread)."""
        source = DcpsDataSource(options(domain_id, namespace, topic_name, group="spark-job"))
        reader = source.streamReader(source.schema())
        try:
            reader.commit({"0": 7})
            assert committed(store, topic_name, "spark-job") == (6, 1)
            reader.commit({"0": 15})
            assert committed(store, topic_name, "spark-job") == (14, 1)
        finally:
            reader.stop()


class TestStreamReaderStart:
    def test_making_a_stream_reader_asks_the_store_nothing(
        self, domain_id: int, topic_name: str
    ) -> None:
        """Spark builds a stream reader in a planner process only to pickle it: building one
        costs no store connection (none runs in this namespace, and it returns at once), and
        the query's first call, initialOffset, is where a missing store fails, naming it."""
        namespace = f"nostore{topic_name[-6:]}"
        opts = {**options(domain_id, namespace, topic_name), "timeout": "1"}
        source = DcpsDataSource(opts)
        reader = source.streamReader(source.schema())
        try:
            assert not [k for k in _access._cache if k[1] == namespace]
            with pytest.raises(DcpsTimeoutError, match=namespace):
                reader.initialOffset()
        finally:
            reader.stop()

    def test_an_unknown_topic_fails_at_the_first_offset(
        self, store: Any, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """An unknown topic still fails at the start of the query, naming the topic."""
        source = DcpsDataSource(options(domain_id, namespace, f"{topic_name}_missing"))
        reader = source.streamReader(source.schema())
        try:
            with pytest.raises(BadParameterError, match=f"{topic_name}_missing"):
                reader.initialOffset()
        finally:
            reader.stop()
            for key in [k for k in _access._cache if k[1] == namespace]:
                _access._cache.pop(key).close()
