"""The durability service (dcps/store/_durability.py): what it serves, keeps and answers.

Written to kill the survivors of ``./dev mutate dcps/store/_durability.py`` (issue 20,
docs/mutation.md). Real Cyclone participants on both sides (tests/support/raw_durability.py):
TRANSIENT/PERSISTENT writers the service discovers, and a late joiner asking it for
history over the wire protocol. One started service for the file (``service``); tests
that need another configuration start their own, and every participant is deleted at
the end of its test (mutmut forks each mutant from a process that ran these tests).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy
from cyclonedds.sub import DataReader

from dcps._cyclone.calls import peek_infos
from dcps.store import DurabilityService
from dcps.store._durability import _reader_qos, _Served
from dcps.store._durability_history import Limits
from dcps.wire._durability import StoredSample
from dcps.wire._names import ANY_STATE
from idl._errors import BadParameterError
from tests.support.embedded_store import worker_domain
from tests.support.raw_durability import (
    TIMEOUT,
    HistoryAsker,
    RawPeer,
    reader_matched,
    service_readers,
    writer_qos,
)
from tests.support.topic_types import Blob, Reading
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def domain(worker_id: str) -> int:
    return worker_domain(worker_id)


@pytest.fixture
def service(tmp_path_factory: pytest.TempPathFactory, domain: int) -> Iterator[DurabilityService]:
    """A service of every topic and partition, with a store file, not aligning. One per
    test, not per file: mutmut runs a mutant's tests chosen by the code each test ran, and
    a module fixture's construction and start count for its first test only."""
    path = tmp_path_factory.mktemp("durability")
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    with DurabilityService(
        domain_id=domain, namespace=namespace, data_dir=path, align=False, key=None
    ) as svc:
        yield svc


@pytest.fixture
def peer(domain: int, service: DurabilityService) -> Iterator[RawPeer]:
    p = RawPeer(domain, service)
    yield p
    p.close()


@pytest.fixture
def asker(domain: int, service: DurabilityService) -> Iterator[HistoryAsker]:
    a = HistoryAsker(domain, service.namespace)
    yield a
    a.close()


def kept(svc: DurabilityService, topic: str, count: int) -> None:
    eventually(lambda: svc.history.count(topic) == count, TIMEOUT, f"{count} kept of {topic}")


def svc_guid(svc: DurabilityService) -> Any:
    """The GUID of the service's participant (other services of the domain serve every
    test's writers too)."""
    assert svc._endpoint is not None
    return svc._endpoint.participant.guid


def readings(samples: list[StoredSample]) -> list[tuple[int, float, str]]:
    out = []
    for s in samples:
        r = Reading.deserialize(s.payload)
        out.append((r.sensor, r.value, r.label))
    return out


class TestConfiguration:
    def test_a_service_without_a_topic_pattern_is_refused(self) -> None:
        with pytest.raises(BadParameterError) as err:
            DurabilityService(topics=(), key=None)
        assert str(err.value) == "a durability service needs at least one topic pattern"

    @pytest.mark.parametrize(
        ("topics", "partitions", "named"),
        [(("a", 3), ("*",), "3"), (("*",), ("p", None), "None")],
    )
    def test_a_pattern_that_is_not_a_string_is_refused(
        self, topics: tuple[Any, ...], partitions: tuple[Any, ...], named: str
    ) -> None:
        with pytest.raises(BadParameterError) as err:
            DurabilityService(topics=topics, partitions=partitions, key=None)
        assert str(err.value) == f"durability patterns are strings, got {named}"

    def test_the_defaults_serve_every_topic_and_partition_of_domain_0(self) -> None:
        svc = DurabilityService(key=None)
        try:
            assert (svc.domain_id, svc.namespace) == (0, "dcps")
            assert (svc.topics, svc.partitions) == (("*",), ("*",))
        finally:
            svc.close()

    def test_settings_are_kept_as_given(self, tmp_path: Path) -> None:
        svc = DurabilityService(
            domain_id=7, namespace="nsx", topics=["a*", "b"], partitions=["p"], key=None
        )
        try:
            assert (svc.domain_id, svc.namespace) == (7, "nsx")
            assert (svc.topics, svc.partitions) == (("a*", "b"), ("p",))
            assert len(svc.incarnation) == 32
            assert svc.incarnation.isalnum()
            assert svc.aligned == 0
            assert svc.history.count() == 0
        finally:
            svc.close()
            svc.close()  # idempotent, also before start


class TestDiscovery:
    def test_a_transient_writers_samples_reach_a_late_joiner_as_written(
        self, service: DurabilityService, peer: RawPeer, asker: HistoryAsker, topic_name: str
    ) -> None:
        """Each sensor's sample is served with its bytes, its writer's GUID, its source
        timestamp and its own instance key, named as coming from the service."""
        writer = peer.writer(topic_name, Reading)
        base = time.time_ns() // 1000 * 1000
        for sensor in range(3):
            writer.write(Reading(sensor, 1.5 + sensor, f"s{sensor}"), timestamp=base + sensor)
        kept(service, topic_name, 3)
        page = asker.page(service.incarnation, topic_name)
        assert page.service == service.incarnation
        assert not page.more
        assert sorted(readings(list(page.samples))) == [(i, 1.5 + i, f"s{i}") for i in range(3)]
        by_sensor = {Reading.deserialize(s.payload).sensor: s for s in page.samples}
        assert {s.writer for s in page.samples} == {writer.guid.bytes}
        assert [by_sensor[i].timestamp for i in range(3)] == [base, base + 1, base + 2]
        assert len({s.key for s in page.samples}) == 3
        assert {(s.topic, s.partition, s.flags) for s in page.samples} == {(topic_name, "", 0)}
        assert not any(s.key.startswith(b"handle:") for s in page.samples)  # Cyclone's keys
        # dcps TRANSIENT writers wait for a reader named as the service's
        assert service_readers(writer, svc_guid(service)) == 1

    def test_a_persistent_writers_samples_are_flagged_persistent(
        self, service: DurabilityService, peer: RawPeer, asker: HistoryAsker, topic_name: str
    ) -> None:
        writer = peer.writer(topic_name, Reading, writer_qos(Policy.Durability.Persistent))
        writer.write(Reading(1, 2.0, "p"))
        kept(service, topic_name, 1)
        (sample,) = asker.history(service.incarnation, topic_name)
        assert sample.persistent
        assert not sample.disposed

    def test_volatile_and_transient_local_writers_are_not_served(
        self, service: DurabilityService, peer: RawPeer, topic_name: str
    ) -> None:
        """Only TRANSIENT and PERSISTENT writers are the service's: Cyclone keeps the
        history of TRANSIENT_LOCAL ones itself."""
        for kind, name in (
            (Policy.Durability.Volatile, f"{topic_name}_v"),
            (Policy.Durability.TransientLocal, f"{topic_name}_tl"),
        ):
            peer.writer(name, Reading, writer_qos(kind), wait=False, seen=service).write(
                Reading(0, 1.0, "")
            )
        peer.writer(topic_name, Reading).write(Reading(0, 1.0, ""))
        kept(service, topic_name, 1)
        served = {t for t, _ in service.history.topics()}
        assert f"{topic_name}_v" not in served
        assert f"{topic_name}_tl" not in served

    def test_a_second_writer_of_a_served_topic_gets_no_second_reader(
        self, service: DurabilityService, peer: RawPeer, topic_name: str
    ) -> None:
        """A topic is served by one reader however many writers it has: a reader per writer
        would keep growing (its samples never taken) and the service would take from the
        last one only."""
        first = peer.writer(topic_name, Reading)
        second = peer.writer(topic_name, Reading)
        first.write(Reading(0, 1.0, "a"))
        second.write(Reading(1, 1.0, "b"))
        kept(service, topic_name, 2)
        guid = svc_guid(service)
        assert (service_readers(first, guid), service_readers(second, guid)) == (1, 1)

    def test_the_stores_own_topics_are_not_served(
        self, service: DurabilityService, peer: RawPeer, topic_name: str
    ) -> None:
        own = f"dcps_channels_{topic_name}"
        peer.writer(own, Reading, wait=False, seen=service).write(Reading(0, 1.0, ""))
        peer.writer(topic_name, Reading).write(Reading(0, 1.0, ""))
        kept(service, topic_name, 1)
        assert own not in {t for t, _ in service.history.topics()}

    def test_a_topic_in_two_partitions_is_served_in_each_and_asked_by_partition(
        self,
        service: DurabilityService,
        peer: RawPeer,
        asker: HistoryAsker,
        topic_name: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """One writer in partitions pa and pb, one in pb: both partitions are served (and
        the operator's log says so), and a late joiner asking for pb gets pb's samples only."""
        caplog.set_level(logging.INFO, "dcps.store.durability")
        peer.writer(topic_name, Reading, partitions=("pa", "pb")).write(Reading(4, 4.0, "two"))
        eventually(lambda: service.history.count(topic_name) >= 1, TIMEOUT, "the first sample")
        peer.writer(topic_name, Reading, partitions=("pb",)).write(Reading(5, 5.0, "b"))
        eventually(
            lambda: (
                (5, 5.0, "b") in readings(asker.history(service.incarnation, topic_name, ("pb",)))
            ),
            TIMEOUT,
            "pb's own sample",
        )
        assert {(t, p) for t, p in service.history.topics() if t == topic_name} == {
            (topic_name, "pa"),
            (topic_name, "pb"),
        }
        logged = {r.getMessage() for r in caplog.records}
        assert f"durability: serving {topic_name!r} in partition 'pb'" in logged
        in_a = asker.history(service.incarnation, topic_name, ("pa",))
        assert readings(in_a) == [(4, 4.0, "two")]
        assert {s.partition for s in in_a} == {"pa"}
        in_b = asker.history(service.incarnation, topic_name, ("pb",))
        assert (5, 5.0, "b") in readings(in_b)
        assert {s.partition for s in in_b} == {"pb"}

    def test_the_durability_service_qos_sets_the_depth_kept(
        self, service: DurabilityService, peer: RawPeer, asker: HistoryAsker, topic_name: str
    ) -> None:
        """DurabilityService history KEEP_LAST(2): of four values of one sensor, the
        service serves the last two."""
        limits = Policy.DurabilityService(0, Policy.History.KeepLast(2), -1, -1, -1)
        writer = peer.writer(topic_name, Reading, writer_qos(Policy.Durability.Transient, limits))
        for value in range(4):
            writer.write(Reading(0, float(value), ""))
        writer.write(Reading(1, 9.0, "last"))  # kept after the others: they were taken
        eventually(
            lambda: (
                9.0 in [v for _, v, _ in readings(asker.history(service.incarnation, topic_name))]
            ),
            TIMEOUT,
            "the last sample",
        )
        assert sorted(readings(asker.history(service.incarnation, topic_name))) == [
            (0, 2.0, ""),
            (0, 3.0, ""),
            (1, 9.0, "last"),
        ]

    def test_a_disposed_instance_is_served_disposed_then_forgotten_after_the_delay(
        self, service: DurabilityService, peer: RawPeer, asker: HistoryAsker, topic_name: str
    ) -> None:
        delay = 300_000_000  # ns
        limits = Policy.DurabilityService(delay, Policy.History.KeepLast(1), -1, -1, -1)
        writer = peer.writer(topic_name, Reading, writer_qos(Policy.Durability.Transient, limits))
        writer.write(Reading(0, 1.0, "a"))
        writer.write(Reading(1, 1.0, "b"))
        kept(service, topic_name, 2)
        disposed_at = time.monotonic()
        writer.dispose(Reading(1, 0.0, ""))
        eventually(lambda: service.history.disposed(topic_name) == 1, TIMEOUT, "the dispose")
        if time.monotonic() - disposed_at < 0.25:  # still within the delay: served disposed
            flags = {
                Reading.deserialize(s.payload).sensor: s.disposed
                for s in asker.history(service.incarnation, topic_name)
            }
            assert flags in ({0: False, 1: True}, {0: False})
        kept(service, topic_name, 1)  # cleaned up after the delay
        (left,) = asker.history(service.incarnation, topic_name)
        assert readings([left]) == [(0, 1.0, "a")]
        assert not left.disposed

    def test_an_unregistered_instance_stays_served_and_alive(
        self, service: DurabilityService, peer: RawPeer, asker: HistoryAsker, topic_name: str
    ) -> None:
        writer = peer.writer(topic_name, Reading)
        writer.write(Reading(0, 1.0, "a"))
        writer.unregister_instance(Reading(0, 1.0, "a"))
        writer.write(Reading(1, 1.0, "b"))  # taken after the unregister
        kept(service, topic_name, 2)
        assert service.history.disposed(topic_name) == 0
        samples = asker.history(service.incarnation, topic_name)
        assert sorted(readings(samples)) == [(0, 1.0, "a"), (1, 1.0, "b")]
        assert not any(s.disposed or s.disposes for s in samples)

    def test_a_write_dispose_is_served_as_one(
        self, service: DurabilityService, peer: RawPeer, asker: HistoryAsker, topic_name: str
    ) -> None:
        limits = Policy.DurabilityService(10**12, Policy.History.KeepLast(1), -1, -1, -1)
        writer = peer.writer(topic_name, Reading, writer_qos(Policy.Durability.Transient, limits))
        writer.write(Reading(0, 1.0, "a"))
        writer.write_dispose(Reading(0, 2.0, "gone"))
        eventually(lambda: service.history.disposed(topic_name) == 1, TIMEOUT, "the dispose")
        (sample,) = asker.history(service.incarnation, topic_name)
        assert readings([sample]) == [(0, 2.0, "gone")]
        assert sample.disposes
        assert sample.disposed


class TestManyTopics:
    def test_a_service_serves_forty_topics_of_one_type(
        self, domain: int, peer: RawPeer, topic_name: str
    ) -> None:
        """Each topic of a type gets its reader, up to the last: with a Python type of its
        own per topic (one XTypes lookup each), creating the 33rd topic never returned and
        the service stopped keeping and answering altogether."""
        names = [f"{topic_name}_{i}" for i in range(40)]
        with DurabilityService(
            domain_id=domain,
            namespace=f"ns_{uuid.uuid4().hex[:10]}",
            topics=(f"{topic_name}_*",),
            align=False,
            key=None,
        ) as svc:
            writers = [peer.writer(name, Reading, wait=False) for name in names]
            for name, writer in zip(names, writers, strict=True):
                eventually(
                    lambda n=name, w=writer: reader_matched(svc, n, "", w),  # type: ignore[misc]
                    TIMEOUT,
                    f"{name} served",
                )
                writer.write(Reading(1, 1.0, name[-8:]))
            kept(svc, names[-1], 1)
            assert sorted(svc.history.topics()) == sorted((name, "") for name in names)
            assert svc.history.count() == 40

    def test_topics_of_two_types_each_get_their_own(
        self, service: DurabilityService, peer: RawPeer, topic_name: str, asker: HistoryAsker
    ) -> None:
        """The type learnt for one topic is not given to a topic of another type."""
        blobs = f"{topic_name}_blob"
        peer.writer(topic_name, Reading).write(Reading(1, 1.0, "r"))
        peer.writer(blobs, Blob).write(Blob(7, b"\x01\x02"))
        kept(service, topic_name, 1)
        kept(service, blobs, 1)
        (blob,) = asker.history(service.incarnation, blobs)
        assert Blob.deserialize(blob.payload) == Blob(7, b"\x01\x02")


class TestPatterns:
    def test_only_topics_and_partitions_matching_a_pattern_are_served(
        self, domain: int, peer: RawPeer, topic_name: str
    ) -> None:
        """Topics: ``fnmatch`` patterns, any of them, case-sensitive; partitions the same,
        the default partition named ""."""
        a, b = f"{topic_name}_a1", f"{topic_name}_b"
        with DurabilityService(
            domain_id=domain,
            namespace=f"ns_{uuid.uuid4().hex[:10]}",
            topics=(f"{topic_name}_a*", b),
            partitions=("p1", "q*", ""),
            align=False,
            key=None,
        ) as svc:
            peer.writer(a, Reading, partitions=("p1", "p2"), service=svc, serving=("p1",)).write(
                Reading(0, 1.0, "")
            )
            peer.writer(b, Reading, partitions=("q9",), service=svc).write(Reading(0, 1.0, ""))
            for name, partitions in (
                (f"{topic_name}_A1", ()),
                (f"{topic_name}_c", ()),
                (b, ("r",)),
            ):
                peer.writer(name, Reading, partitions=partitions, wait=False, seen=svc).write(
                    Reading(0, 1.0, "")
                )
            peer.writer(a, Reading, service=svc).write(Reading(0, 2.0, ""))
            kept(svc, a, 2)
            kept(svc, b, 1)
            assert sorted(svc.history.topics()) == [(a, ""), (a, "p1"), (b, "q9")]

    def test_a_service_of_the_default_partition_only(
        self, domain: int, peer: RawPeer, topic_name: str
    ) -> None:
        with DurabilityService(
            domain_id=domain,
            namespace=f"ns_{uuid.uuid4().hex[:10]}",
            partitions=("",),
            align=False,
            key=None,
        ) as svc:
            peer.writer(topic_name, Reading, partitions=("x",), wait=False, seen=svc).write(
                Reading(0, 1.0, "")
            )
            peer.writer(topic_name, Reading, service=svc).write(Reading(1, 1.0, ""))
            kept(svc, topic_name, 1)
            assert [(t, p) for t, p in svc.history.topics() if t == topic_name] == [
                (topic_name, "")
            ]


class TestTake:
    """The take step on a service that is not started: the test runs it itself, so what
    the reader holds when it runs is known."""

    @pytest.fixture
    def unstarted(self, domain: int) -> Iterator[DurabilityService]:
        svc = DurabilityService(domain_id=domain, namespace=f"ns_{uuid.uuid4().hex[:10]}", key=None)
        yield svc
        svc.close()

    def served(
        self, svc: DurabilityService, peer: RawPeer, topic_name: str, limits: Limits
    ) -> _Served:
        _, reader_qos = _reader_qos("")
        reader = DataReader(peer.dp, peer.topic(topic_name, Reading), reader_qos)
        svc.history.serve(topic_name, "", limits, persistent=False)
        return _Served(reader, topic_name, "")

    def test_writes_and_disposes_taken_together_keep_their_order(
        self, unstarted: DurabilityService, peer: RawPeer, topic_name: str
    ) -> None:
        """Sensor 0 is written, disposed and written again, sensor 1 written then disposed,
        all before one take: sensor 0 is alive with its new value, sensor 1 disposed."""
        served = self.served(unstarted, peer, topic_name, Limits(depth=1, cleanup_delay_ns=10**15))
        writer = peer.writer(topic_name, Reading, wait=False)
        eventually(lambda: writer.get_matched_subscriptions(), TIMEOUT, "the reader")
        writer.write(Reading(0, 1.0, "old"))
        writer.dispose(Reading(0, 0.0, ""))
        writer.write(Reading(0, 2.0, "new"))
        writer.write(Reading(1, 1.0, "b"))
        writer.dispose(Reading(1, 0.0, ""))
        writer.unregister_instance(Reading(1, 0.0, ""))
        assert writer.wait_for_acks(10**10)
        unstarted._take(served, time.time_ns())
        samples, _, _ = unstarted.history.page(topic_name, (), 0, 100, 10**6)
        assert sorted((readings([s])[0], s.disposed) for s in samples) == [
            ((0, 2.0, "new"), False),
            ((1, 1.0, "b"), True),
        ]
        assert unstarted.history.disposed(topic_name) == 1

    def test_instances_of_a_writer_that_left_keep_cyclones_keys(
        self, unstarted: DurabilityService, peer: RawPeer, domain: int, topic_name: str
    ) -> None:
        """The writer writes sensors 0-2 and leaves before the take: each instance is kept
        under the key Cyclone gave it while it lived (learnt before the take), the same as
        a live writer's instances get, not a stand-in."""
        served = self.served(unstarted, peer, topic_name, Limits(depth=1))
        gone = RawPeer(domain)
        try:
            writer = gone.writer(topic_name, Reading, wait=False)
            eventually(lambda: writer.get_matched_subscriptions(), TIMEOUT, "the reader")
            for sensor in range(3):
                writer.write(Reading(sensor, 1.0, "x"))
            assert writer.wait_for_acks(10**10)
        finally:
            gone.close()

        def without_writers() -> bool:
            rows = peek_infos(served.ref, ANY_STATE, 16)
            return len(rows) == 3 and all(row[2] == 64 for row in rows)  # NO_WRITERS

        eventually(without_writers, TIMEOUT, "the instances without writers")
        unstarted._take(served, time.time_ns())
        samples, _, _ = unstarted.history.page(topic_name, (), 0, 100, 10**6)
        assert len(samples) == 3
        assert not any(s.key.startswith(b"handle:") for s in samples)

    def test_more_than_one_take_is_kept_in_one_step(
        self, unstarted: DurabilityService, peer: RawPeer, topic_name: str
    ) -> None:
        served = self.served(unstarted, peer, topic_name, Limits(depth=None))
        writer = peer.writer(topic_name, Reading, wait=False)
        eventually(lambda: writer.get_matched_subscriptions(), TIMEOUT, "the reader")
        for sensor in range(1500):
            writer.write(Reading(sensor, 1.0, ""))
        assert writer.wait_for_acks(10**10)
        unstarted._take(served, time.time_ns())
        assert unstarted.history.count(topic_name) == 1500
