"""Write batching holds samples only in a long run of writes.

A run is a series of writes each less than ``QUIET_NS`` after the one before;
a batching writer sends a run's first ``RUN_WRITES`` writes at once and holds
the rest, at most ``MAX_DELAY_NS`` (dcps/_write_batching.py). The delays are
stretched here (``QUIET_NS`` 0.1 to 0.5 s or a minute, ``MAX_DELAY_NS`` a
minute) so that what is held and what is sent can be told apart without
timing: a held sample would wait a minute.

The remote reader is best effort (``tests/support/peers/plain_reader.py`` in
another process): a reliable one would get held samples resent by Cyclone.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import dcps
from dcps import _write_batching
from dcps import _writer as dcps_writer
from tests.support.line_peer import LinePeer
from tests.support.topic_types import Reading
from tests.support.waiting import eventually
from tests.support.write_batching import (
    MINUTE_NS,
    batching_delays,
    batching_writer,
    still_missing,
    values,
)

pytestmark = [pytest.mark.multiprocess, pytest.mark.usefixtures("no_durability_service_wait")]

SECOND_NS = 1_000_000_000


class TestRuns:
    def test_a_short_burst_is_sent_at_once_and_a_long_run_held(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """20 writes back to back after a pause: the first ``RUN_WRITES`` (16) reach the
        remote reader at once, without a flush (a held one would wait a minute); the
        rest of the run is held until the flush."""
        batching_delays(monkeypatch, quiet_ns=SECOND_NS // 2, max_delay_ns=MINUTE_NS)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        time.sleep(0.6)  # the pause that starts a new run: the input of this test
        for i in range(20):
            writer.write(Reading(1, float(i), "burst"))
        first = [float(i) for i in range(_write_batching.RUN_WRITES)]
        eventually(lambda: values(remote_best_effort) == first, 20, "the start of the run")
        assert still_missing(remote_best_effort, 16.0, 0.3), "a long run's write was sent"
        writer.flush()
        eventually(
            lambda: values(remote_best_effort) == [float(i) for i in range(20)],
            20,
            "the whole run after the flush",
        )

    def test_a_write_after_a_pause_is_sent_at_once_with_what_was_held(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """Two writes in a run (held for a minute), then one after a pause longer than
        ``QUIET_NS``: that write starts a new run, is sent at once and takes the held
        two with it."""
        # only a run's first write is sent
        batching_delays(monkeypatch, max_delay_ns=MINUTE_NS, quiet_ns=MINUTE_NS, run_writes=1)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        writer.write(Reading(1, 1.0, "a"))
        writer.write(Reading(1, 2.0, "b"))
        assert still_missing(remote_best_effort, 2.0, 0.3), "a held sample was sent"
        # from now on a pause of 0.1 s ends a run (the held two stay held: their
        # delay is a minute)
        batching_delays(monkeypatch, quiet_ns=100_000_000)
        time.sleep(0.15)  # the pause: the input of this test
        writer.write(Reading(1, 3.0, "c"))
        eventually(lambda: values(remote_best_effort) == [1.0, 2.0, 3.0], 20, "all three")

    def test_a_write_long_after_the_previous_one_is_sent_at_once_even_right_after_a_flush(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """What counts is the gap to the writer's previous write, not the time since
        its last flush: each write here comes 0.15 s after the one before (more than
        ``QUIET_NS``) but just after a flush, and is sent at once (only a run's first
        write is: ``RUN_WRITES`` 1)."""
        batching_delays(monkeypatch, max_delay_ns=MINUTE_NS, quiet_ns=100_000_000, run_writes=1)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        for value in (1.0, 2.0, 3.0):
            time.sleep(0.15)  # the pause: the input of this test
            writer.flush()
            writer.write(Reading(1, value, "lone"))
            eventually(lambda v=value: v in values(remote_best_effort), 20, f"lone sample {value}")
        assert values(remote_best_effort) == [1.0, 2.0, 3.0]

    def test_a_slow_write_does_not_break_a_run(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A run is broken by a pause between writes, not by a write that takes long
        (as one blocked by flow control until the readers acknowledge): a write called
        right after the previous one returned, whose C write takes 0.5 s (more than
        ``QUIET_NS``), is still part of the run, and held (only a run's first write is
        sent at once here)."""
        batching_delays(monkeypatch, quiet_ns=300_000_000, max_delay_ns=MINUTE_NS, run_writes=1)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        time.sleep(0.4)  # the pause that starts a new run: the input of this test
        writer.write(Reading(1, 1.0, "first"))
        real_write = dcps_writer.c_write

        def slow_write(*args: Any) -> int:
            time.sleep(0.5)  # what flow control does to a write: the input of this test
            return real_write(*args)

        monkeypatch.setattr(dcps_writer, "c_write", slow_write)
        writer.write(Reading(1, 2.0, "slow"))
        eventually(lambda: 1.0 in values(remote_best_effort), 20, "the run's first write")
        assert still_missing(remote_best_effort, 2.0, 0.3), "the slow write broke the run"
        writer.flush()
        eventually(lambda: values(remote_best_effort) == [1.0, 2.0], 20, "both after the flush")
