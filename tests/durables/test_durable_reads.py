"""The store's read-ahead of durables' elements, on a real log on disk: what it returns is
what the log holds, it reads the log once for many small deliveries, and it keeps no
large run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps import PreconditionNotMetError
from dcps.store import _durable_reads
from dcps.store._durable_reads import MAX_KEPT_BYTES, ReadAhead
from dcps.store._log import ChannelLog


@pytest.fixture
def log(tmp_path: Path) -> Iterator[ChannelLog]:
    channel_log = ChannelLog.in_dir(tmp_path)
    channel_log.ensure_topic("t", channel_count=2, retain_consumed=True)
    try:
        yield channel_log
    finally:
        channel_log.close()


class CountingLog:
    """The log, counting the reads that reach it."""

    def __init__(self, log: ChannelLog) -> None:
        self.log = log
        self.reads: list[tuple[int, int, int]] = []

    def fetch_run(self, topic: str, channel: int, first: int, count: int) -> Any:
        self.reads.append((channel, first, count))
        return self.log.fetch_run(topic, channel, first, count)


def test_small_elements_are_read_once_for_many_deliveries(log: ChannelLog) -> None:
    placed = log.append("t", 0, [b"e%04d" % i for i in range(3000)])
    log.append("t", 1, [b"other"] * 10)
    counting = CountingLog(log)
    reads = ReadAhead(counting)  # type: ignore[arg-type]
    got = []
    for first in range(0, 640, 64):
        payloads, stamps = reads.read("d", "t", 0, first, 64)
        assert stamps == [ts for _, ts in placed[first : first + 64]]
        got.extend(payloads)
    assert got == [b"e%04d" % i for i in range(640)]
    assert len(counting.reads) == 2  # the first (to learn the sizes), then one ahead
    assert counting.reads[1][2] > 64
    # another channel and another durable are read on their own; an earlier offset again
    assert reads.read("d", "t", 1, 2, 3)[0] == [b"other"] * 3
    assert reads.read("e", "t", 0, 5, 2)[0] == [b"e0005", b"e0006"]
    assert reads.read("d", "t", 0, 10, 1)[0] == [b"e0010"]
    assert len(counting.reads) == 5


def test_elements_the_log_no_longer_has_are_refused_by_position(log: ChannelLog) -> None:
    log.append("t", 0, [b"x"] * 5)
    reads = ReadAhead(log)
    with pytest.raises(PreconditionNotMetError, match=r"elements 3\.\.7 of topic 't' channel 0"):
        reads.read("d", "t", 0, 3, 5)


def test_a_read_past_the_kept_run_reads_elements_appended_since(log: ChannelLog) -> None:
    log.append("t", 0, [b"a"] * 4)
    reads = ReadAhead(log)
    assert reads.read("d", "t", 0, 0, 2)[0] == [b"a", b"a"]
    assert reads.read("d", "t", 0, 2, 2)[0] == [b"a", b"a"]
    log.append("t", 0, [b"b"] * 4)
    assert reads.read("d", "t", 0, 3, 3)[0] == [b"a", b"b", b"b"]


def test_large_runs_are_not_kept_and_few_runs_are(
    log: ChannelLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    big = b"z" * (MAX_KEPT_BYTES // 2 + 1)
    log.append("t", 0, [big] * 3)
    counting = CountingLog(log)
    reads = ReadAhead(counting)  # type: ignore[arg-type]
    assert reads.read("d", "t", 0, 0, 2)[0] == [big, big]  # more than MAX_KEPT_BYTES
    assert reads.read("d", "t", 0, 0, 1)[0] == [big]
    assert len(counting.reads) == 2  # not kept: read again
    assert counting.reads[1][2] == 1  # no read ahead for elements this large
    monkeypatch.setattr(_durable_reads, "MAX_RUNS", 2)
    log.append("t", 1, [b"s"] * 10)
    for name in ("a", "b", "c"):
        reads.read(name, "t", 1, 0, 1)
    before = len(counting.reads)
    reads.read("a", "t", 1, 0, 1)  # the oldest run went out
    reads.read("c", "t", 1, 0, 1)  # the newest is kept
    assert len(counting.reads) == before + 1
    reads.forget("c")
    reads.read("c", "t", 1, 0, 1)
    assert len(counting.reads) == before + 2
