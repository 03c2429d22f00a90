"""Write batching (``DataWriter(batching=...)``): what a remote reader gets, and when.

A batching writer packs what it writes in a burst into shared packets and
sends a packet when it is full or flushed (dcps/_write_batching.py decides the
flushes). The remote reader here is a plain reader in another process
(``tests/support/peers/plain_reader.py``): only remote readers see the
batching, readers in the writer's process get every sample at once. The helpers
are in tests/support/write_batching.py, the fixtures in tests/durability/conftest.py.

Where a test must tell a held sample from a sent one, writer and reader are
best effort: a reliable writer's heartbeats make the reader ask for what it
misses, and Cyclone then resends held samples on its own after about 100 ms.

Several tests stretch the flush delays to 60 s (``MAX_DELAY_NS``, ``QUIET_NS``,
read at each write) and hold every write of a run (``RUN_WRITES`` 0) so that
what the policy holds back and what it sends at once can be told apart without
timing: a held sample would wait a minute.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

import dcps
import qos as q
from tests.support.line_peer import LinePeer
from tests.support.peers import PEERS_DIR
from tests.support.topic_types import Reading
from tests.support.waiting import eventually
from tests.support.write_batching import (
    MINUTE_NS,
    batching_delays,
    batching_writer,
    hold_for_a_minute,
    received,
    still_missing,
    values,
)

pytestmark = [pytest.mark.multiprocess, pytest.mark.usefixtures("no_durability_service_wait")]


class TestWhereItIsOn:
    @pytest.mark.parametrize(
        ("durability", "batching", "expected"),
        [
            (q.Durability.VOLATILE, None, False),
            (q.Durability.TRANSIENT_LOCAL, None, False),
            (q.Durability.TRANSIENT, None, True),
            (q.Durability.PERSISTENT, None, True),
            (q.Durability.TRANSIENT, False, False),
            (q.Durability.PERSISTENT, False, False),
            (q.Durability.PERSISTENT, True, True),
            (q.Durability.VOLATILE, True, True),
        ],
    )
    def test_on_by_default_for_transient_and_persistent_writers_only(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        durability: q.Durability,
        batching: bool | None,
        expected: bool,
    ) -> None:
        topic = dcps.Topic(participant, topic_name, Reading)
        with dcps.DataWriter(
            participant, topic, qos=q.DataWriterQos(durability), batching=batching
        ) as writer:
            assert writer.batching is expected

    def test_a_batching_value_that_is_not_a_bool_is_refused(
        self, participant: dcps.DomainParticipant, topic_name: str
    ) -> None:
        topic = dcps.Topic(participant, topic_name, Reading)
        with pytest.raises(dcps.BadParameterError, match="batching"):
            dcps.DataWriter(participant, topic, batching="yes")  # type: ignore[arg-type]


class TestWhenSamplesLeave:
    def test_a_write_after_a_quiet_spell_is_sent_at_once(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """No added latency when idle: with the flush delay at a minute, each sample
        written after a quiet spell (here 0.1 s) still arrives: the write itself flushed
        it. Unflushed, Cyclone sends a writer's first sample with its first heartbeat,
        but later ones only with a flush."""
        batching_delays(monkeypatch, max_delay_ns=MINUTE_NS, quiet_ns=100_000_000)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        for value in (1.0, 2.0, 3.0, 4.0):
            time.sleep(0.15)  # the quiet spell: the input of this test, not a synchronisation
            writer.write(Reading(1, value, "lone"))
            eventually(lambda v=value: v in values(remote_best_effort), 20, f"lone sample {value}")
        assert values(remote_best_effort) == [1.0, 2.0, 3.0, 4.0]

    def test_a_write_in_a_burst_is_held_until_a_flush(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        hold_for_a_minute(monkeypatch)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        writer.write(Reading(1, 1.0, "first"))  # after the probe's flush: held
        writer.write(Reading(1, 2.0, "second"))
        assert still_missing(remote_best_effort, 1.0), "a held sample was sent unflushed"
        writer.flush()
        eventually(lambda: values(remote_best_effort) == [1.0, 2.0], 20, "the flushed sample")

    def test_waiting_for_acknowledgments_sends_what_is_held(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        hold_for_a_minute(monkeypatch)
        writer = batching_writer(participant, topic_name)
        for value in (1.0, 2.0, 3.0):
            writer.write(Reading(1, value, "x"))
        writer.wait_for_acknowledgments(20)  # a minute's delay would time this out
        eventually(lambda: values(remote) == [1.0, 2.0, 3.0], 20, "every sample")

    def test_the_flusher_sends_the_end_of_a_burst_without_another_write(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """The flusher thread sends a held sample once its delay is up (here 0.2 s)."""
        # a quiet time of a minute: the second write is held
        batching_delays(monkeypatch, max_delay_ns=200_000_000, quiet_ns=MINUTE_NS, run_writes=0)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        writer.write(Reading(1, 1.0, "held"))  # after the probe's flush: held
        writer.write(Reading(1, 2.0, "held"))
        eventually(lambda: values(remote_best_effort) == [1.0, 2.0], 20, "the held samples")

    def test_a_burst_arrives_whole_and_in_order(
        self, participant: dcps.DomainParticipant, topic_name: str, remote: LinePeer
    ) -> None:
        """With the real 1 ms delay: packets flushed by later writes, by full packets
        and, for the tail, by the flusher."""
        writer = batching_writer(participant, topic_name)
        for i in range(3000):
            writer.write(Reading(i % 10, float(i), "burst"))
        eventually(lambda: len(received(remote)) >= 3000, 60, "every sample of the burst")
        for sensor in range(10):  # a take returns an instance's samples together
            got = [value for s, value, _ in received(remote) if s == sensor]
            assert got == [float(i) for i in range(sensor, 3000, 10)]


class TestLifecycle:
    def test_a_program_that_ends_without_closing_its_writer_sends_what_it_held(
        self, participant: dcps.DomainParticipant, domain_id: int, topic_name: str
    ) -> None:
        """The peer writes 200 samples with flush delays of a minute and exits without
        closing: all but the first 16 (a run's first writes, sent at once) are sent only by
        the exit-time flush.

        The peer writes once this reader has matched it as well: a writer that matched the
        reader may exit before the reader has discovered it, and then the reader drops what
        it sent as coming from an unknown writer, batched or not (seen once under load)."""
        reader = dcps.DataReader(
            participant,
            dcps.Topic(participant, topic_name, Reading),
            qos=q.DataReaderQos(q.Reliability.RELIABLE, q.History.KEEP_ALL),
        )
        peer = subprocess.Popen(
            [sys.executable, str(PEERS_DIR / "burst_writer.py"), str(domain_id), topic_name, "200"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert peer.stdout is not None
            assert peer.stdin is not None
            assert peer.stdout.readline().strip() == "matched"
            eventually(lambda: reader.matched_publications, 20, "the reader matching the writer")
            _out, err = peer.communicate("go\n", timeout=120)
        finally:
            if peer.poll() is None:
                peer.kill()
                peer.wait()
        assert peer.returncode == 0, err
        got: list[float] = []
        eventually(
            lambda: got.extend(s.data.value for s in reader.take()) or len(got) >= 200,
            20,
            f"every sample of the ended program (got {len(got)})",
        )
        assert sorted(got) == [float(i) for i in range(200)]

    def test_dispose_and_close_reach_the_remote_reader(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        """A held dispose is sent by close(), and close's own disposes too."""
        hold_for_a_minute(monkeypatch)
        writer = batching_writer(participant, topic_name)
        writer.write(Reading(1, 1.0, "a"))
        writer.write(Reading(2, 2.0, "b"))
        writer.dispose(Reading(1, 0.0, ""))
        writer.close()  # disposes sensor 2 (autodispose on)
        eventually(
            lambda: (
                {(s, st) for s, _, st in received(remote)}
                >= {(1, "NOT_ALIVE_DISPOSED"), (2, "NOT_ALIVE_DISPOSED")}
            ),
            20,
            "both instances disposed at the remote reader",
        )

    def test_a_reader_in_the_writers_process_gets_held_samples_at_once(
        self,
        participant: dcps.DomainParticipant,
        topic_name: str,
        remote_best_effort: LinePeer,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        hold_for_a_minute(monkeypatch)
        writer = batching_writer(participant, topic_name, remote_best_effort)
        local = dcps.DataReader(
            participant,
            writer.topic,
            qos=q.DataReaderQos(q.Reliability.BEST_EFFORT, q.History.KEEP_ALL),
        )
        eventually(lambda: writer.publication_matched_status.current_count >= 2, 20, "match")
        local.take()  # the probes
        writer.write(Reading(1, 1.0, "a"))
        writer.write(Reading(1, 2.0, "b"))
        got = [s.data.value for s in local.take()]
        assert got == [1.0, 2.0]
        assert still_missing(remote_best_effort, 2.0)  # the remote reader waits for its packet
