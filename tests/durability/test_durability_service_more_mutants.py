"""The durability service (dcps/store/_durability.py): its last mutation survivors.

Written for the survivors of the session-9 samples of ``./dev mutate
dcps/store/_durability.py`` (issue 20, docs/mutation.md, "Session 9 (helper J9)"), next
to ``test_durability_service_mutants.py`` and ``test_durability_service_mutants_align.py``:
the ``network`` option reaching the service's participant, the QoS other participants see
on the alignment's request writer and reply reader (DDS's built-in topics), a writer that
announces an explicitly empty partition list, writers that announce no XTypes type,
replies and requests taken together with a refused one, and a dispose taken after
another instance's new sample. Each test starts its own service (mutmut picks a mutant's tests by
the code each test ran) and deletes every participant it made (mutmut forks each mutant
from a process that ran these tests).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.builtin import (
    BuiltinDataReader,
    BuiltinTopicDcpsPublication,
    BuiltinTopicDcpsSubscription,
)
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader

from dcps import BadParameterError, NetworkConfig
from dcps._cyclone.calls import peek_infos
from dcps.store import DurabilityService
from dcps.store._durability import _reader_qos, _Served
from dcps.store._durability_history import Limits
from dcps.wire._auth import DropReason
from dcps.wire._auth_keys import write_key_file
from dcps.wire._durability import (
    HistoryFetchRequest,
    HistoryPage,
    durability_partition,
    matched_services,
)
from dcps.wire._messages import Reply
from dcps.wire._names import ANY_STATE, REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from dcps.wire._sealing import Sealer
from tests.support.raw_durability import (
    TIMEOUT,
    FakeService,
    HistoryAsker,
    RawPeer,
    reader_matched,
    records,
    start,
    writer_qos,
)
from tests.support.topic_types import Reading
from tests.support.waiting import eventually


def stepped(services: list[DurabilityService], svc: DurabilityService) -> DurabilityService:
    """``svc`` started with its loop doing nothing: the test runs its steps itself, so
    that what one step takes is known."""
    svc._step = lambda: None  # type: ignore[method-assign]
    return start(services, svc)


def announced(domain: int, kind: Any, participant: Any, topic: str, partition: str | None) -> Any:
    """The QoS that every participant of the domain sees for ``participant``'s endpoint of
    ``topic`` in ``partition`` (None: in any; ``kind``: DDS's built-in publication or
    subscription topic)."""
    observer = DomainParticipant(domain)
    try:
        builtin = BuiltinDataReader(observer, kind)
        found: list[Any] = []

        def seen() -> bool:
            for s in builtin.take(N=256):
                if s.topic_name != topic or s.participant_key != participant:
                    continue
                try:
                    partitions = tuple(s.qos[Policy.Partition].partitions)
                except (KeyError, AttributeError):
                    partitions = ()
                if partition is None or partition in partitions:
                    found.append(s)
            return bool(found)

        eventually(seen, TIMEOUT, f"the endpoint of {topic} in {partition} announced")
        return found[0].qos
    finally:
        observer.__del__()


class TestNetwork:
    def test_the_network_option_reaches_the_services_participant(
        self, domain: int, namespace: str
    ) -> None:
        """A service told to use an interface this host lacks does not start, and says
        which interface (without the option reaching its participant, it would start)."""
        svc = DurabilityService(
            domain_id=domain,
            namespace=namespace,
            network=NetworkConfig(interfaces=["nosuch0"]),
            align=False,
            key=None,
        )
        try:
            with pytest.raises(BadParameterError, match="nosuch0"):
                svc.start()
        finally:
            svc.close()


class TestAlignmentEndpoints:
    """What any participant of the domain sees of a service's alignment endpoints."""

    def test_the_alignment_requests_are_written_reliably_and_kept_until_acknowledged(
        self, domain: int, namespace: str, services: list[DurabilityService]
    ) -> None:
        """The request writer blocks up to 10 s rather than lose a request, and keeps as
        many requests as a client may have outstanding (the default: the last one only)."""
        svc = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=None))
        assert svc._endpoint is not None
        qos = announced(
            domain,
            BuiltinTopicDcpsPublication,
            svc._endpoint.participant.guid,
            "dcps_channels_request",
            durability_partition(namespace),
        )
        assert qos[Policy.Reliability] == REQUEST_WRITER_QOS[Policy.Reliability]
        assert qos[Policy.Durability] == Policy.Durability.Volatile
        assert qos[Policy.History] == REQUEST_WRITER_QOS[Policy.History]

    def test_the_alignment_replies_are_read_reliably_and_replayed_to_it(
        self, domain: int, namespace: str, services: list[DurabilityService]
    ) -> None:
        """The reader of the pages other services send is reliable (a page the network
        drops is sent again), TRANSIENT_LOCAL (a page written before it matched reaches
        it) and keeps every page."""
        svc = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=None))
        assert svc._endpoint is not None
        qos = announced(
            domain,
            BuiltinTopicDcpsSubscription,
            svc._endpoint.participant.guid,
            "dcps_channels_reply",
            reply_partition(namespace, svc._client_id),
        )
        assert isinstance(qos[Policy.Reliability], Policy.Reliability.Reliable)
        assert qos[Policy.Durability] == REPLY_QOS[Policy.Durability]
        assert qos[Policy.History] == REPLY_QOS[Policy.History]


class TestEmptyPartitionList:
    def test_a_writer_announcing_no_partition_names_is_served_in_the_default_one(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """A publisher whose Partition QoS is an explicitly empty list writes in the
        default partition: the service serves it there, and a late joiner asking for the
        default partition gets its sample."""
        svc = start(
            services,
            DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None),
        )
        peer = RawPeer(domain, svc)
        asker = HistoryAsker(domain, namespace)
        try:
            pub = Publisher(peer.dp, qos=Qos(Policy.Partition([])))
            writer = DataWriter(pub, peer.topic(topic_name, Reading), writer_qos())
            # as the service reads the announcement: cyclonedds gives no Partition policy
            # for a list without names (as for a writer without one), never an empty one
            qos = announced(domain, BuiltinTopicDcpsPublication, peer.dp.guid, topic_name, None)
            assert qos[Policy.Partition] is None

            def served() -> list[str]:
                return [p for t, p in list(svc._served) if t == topic_name]

            assert eventually(served, TIMEOUT, f"{topic_name} served") == [""]
            eventually(
                lambda: reader_matched(svc, topic_name, "", writer), TIMEOUT, "the reader matched"
            )
            writer.write(Reading(7, 7.0, "empty"))
            eventually(lambda: svc.history.count(topic_name) == 1, TIMEOUT, "the sample kept")
            (sample,) = asker.history(svc.incarnation, topic_name, ("",))
            assert (sample.topic, sample.partition) == (topic_name, "")
            assert Reading.deserialize(sample.payload) == Reading(7, 7.0, "empty")
        finally:
            asker.close()
            peer.close()


class _NoTypeIn:
    """The service's reader of DDS's built-in publication topic, as it would read the
    announcements of writers in ``partition`` if they announced no XTypes type (Cyclone
    gives ``type_id`` None then: a writer whose DDS was built without type discovery)."""

    def __init__(self, reader: Any, partition: str) -> None:
        self._reader = reader
        self._partition = partition

    def take(self, N: int) -> list[Any]:  # noqa: N803 (the reader's own parameter name)
        out = []
        for pub in self._reader.take(N=N):
            try:
                names = tuple(pub.qos[Policy.Partition].partitions)
            except (KeyError, AttributeError, TypeError):  # a gone writer's: no QoS
                names = ()
            if self._partition in names:
                bare = dataclasses.replace(pub, type_id=None)
                bare.sample_info = pub.sample_info
                pub = bare
            out.append(pub)
        return out


class TestWritersWithoutAType:
    def test_a_topic_whose_type_is_known_is_served_to_a_writer_announcing_none(
        self,
        domain: int,
        namespace: str,
        services: list[DurabilityService],
        topic_name: str,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        """Writers in partition pb announce no type. Of a topic the service learnt the
        type of from a writer in pa, pb is served too, and a late joiner of pb gets its
        sample; a topic only such a writer writes is not served, and the operator's log
        says why."""
        caplog.set_level(logging.WARNING, "dcps.store.durability")
        svc = start(
            services,
            DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None),
        )
        svc._publications = _NoTypeIn(svc._publications, "pb")
        peer = RawPeer(domain, svc)
        asker = HistoryAsker(domain, namespace)
        try:
            peer.writer(topic_name, Reading, partitions=("pa",)).write(Reading(1, 1.0, "a"))
            peer.writer(topic_name, Reading, partitions=("pb",)).write(Reading(2, 2.0, "b"))
            eventually(lambda: svc.history.count(topic_name) == 2, TIMEOUT, "both kept")
            (sample,) = asker.history(svc.incarnation, topic_name, ("pb",))
            assert Reading.deserialize(sample.payload) == Reading(2, 2.0, "b")
            alone = f"{topic_name}_alone"
            peer.writer(alone, Reading, partitions=("pb",), wait=False, seen=svc).write(
                Reading(3, 3.0, "c")
            )
            warning = f"durability: writer of {alone!r} announces no XTypes type: not served"
            eventually(lambda: warning in caplog.messages, TIMEOUT, "the warning")
            assert (alone, "pb") not in svc._served
            assert svc.history.count(alone) == 0
        finally:
            asker.close()
            peer.close()


class TestTakenTogether:
    """Replies and requests the service takes in one step, one of them refused: the
    ones after it are still handled (the test steps the service itself)."""

    def test_alignment_replies_after_refused_ones_in_one_take_are_kept(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """An error reply, a page answering an earlier request and a page named as
        another service come before the real page, all taken in one step: the real
        page is kept."""
        svc = stepped(services, DurabilityService(domain_id=domain, namespace=namespace, key=None))
        fake = FakeService(domain, namespace, "f" * 32)
        try:
            eventually(
                lambda: fake.incarnation in matched_services(svc._align_writer),
                TIMEOUT,
                "the other service matched",
            )
            svc._align_step()  # asks it
            request = fake.asked()
            rid = int(request.request_id)
            bad, stale, other, real = (records(f"{topic_name}_{n}", 1) for n in "abcd")
            error = HistoryPage(tuple(bad), 1, False, fake.incarnation).to_wire(request.client, rid)
            error.status, error.error = 1, "no"
            for reply in (
                error,
                HistoryPage(tuple(stale), 1, False, fake.incarnation).to_wire(
                    request.client, rid + 7
                ),
                HistoryPage(tuple(other), 1, False, "e" * 32).to_wire(request.client, rid),
                HistoryPage(tuple(real), 5, False, fake.incarnation).to_wire(request.client, rid),
            ):
                fake.answer(request, reply)
            eventually(lambda: len(svc._align_replies.read(N=8)) == 4, TIMEOUT, "the four replies")
            svc._align_step()
            assert svc.aligned == 1
            mine = [t for t, _ in svc.history.topics() if t.startswith(topic_name)]
            assert mine == [f"{topic_name}_d"]
            assert svc._aligning == {}  # the alignment with it is over
        finally:
            fake.close()

    def test_a_request_taken_after_a_refused_unsealed_one_is_answered(
        self,
        domain: int,
        namespace: str,
        services: list[DurabilityService],
        tmp_path: Path,
        topic_name: str,
    ) -> None:
        """A keyed service drops (and counts) a request that is not sealed; a sealed
        request taken in the same step after it is answered."""
        key = tmp_path / "ns.key"
        write_key_file(key)
        svc = stepped(
            services,
            DurabilityService(domain_id=domain, namespace=namespace, align=False, key=key),
        )
        svc.history.add_many(records(topic_name, 1), time.time_ns())
        asker = HistoryAsker(domain, namespace)
        try:
            asker.wait_for(svc.incarnation)
            fetch = HistoryFetchRequest(topic_name, (), 0, 10, svc.incarnation)
            unsealed = asker.send(fetch.to_wire("", 0))
            sealed = unsealed + 1
            wire = fetch.to_wire(asker.client, sealed)
            Sealer.from_keys(key, None).seal_request(wire, svc.incarnation)
            asker.requests.write(wire)
            eventually(lambda: len(svc._requests.read(N=8)) == 2, TIMEOUT, "both requests")
            svc._answer()
            reply: Reply = asker.reply(sealed, timeout=5.0)
            assert reply.status == 0, reply.error
            page = HistoryPage.from_wire(reply)
            assert [s.topic for s in page.samples] == [topic_name]
            assert not asker.answered(unsealed)
            assert svc.auth_drops()[DropReason.MALFORMED] == 1
            assert sum(svc.auth_drops().values()) == 1
        finally:
            asker.close()


class TestTake:
    def test_a_dispose_after_another_instances_new_sample_in_one_take_loses_nothing(
        self, domain: int, namespace: str, topic_name: str
    ) -> None:
        """Sensor 1 was written and kept; then sensor 0 is written and sensor 1 disposed
        (a dispose without data), both before one take: sensor 0 is kept, in its
        partition, and sensor 1 served disposed. (The test runs the take itself, on a
        service that is not started, so that both rows come in that take.)"""
        svc = DurabilityService(domain_id=domain, namespace=namespace, key=None)
        peer = RawPeer(domain)
        try:
            _, reader_qos = _reader_qos("")
            reader = DataReader(peer.dp, peer.topic(topic_name, Reading), reader_qos)
            svc.history.serve(topic_name, "", Limits(depth=1, cleanup_delay_ns=10**15), False)
            served = _Served(reader, topic_name, "")
            writer = peer.writer(topic_name, Reading, wait=False)
            eventually(lambda: writer.get_matched_subscriptions(), TIMEOUT, "the reader")
            writer.write(Reading(1, 1.0, "b"))
            assert writer.wait_for_acks(10**10)
            svc._take(served, time.time_ns())
            writer.write(Reading(0, 2.0, "a"))
            writer.dispose(Reading(1, 0.0, ""))
            assert writer.wait_for_acks(10**10)
            rows = peek_infos(served.ref, ANY_STATE, 16)
            # the case under test: the new sample's row first, then the dispose's (no data)
            assert [bool(row[3]) for row in rows] == [True, False], rows
            svc._take(served, time.time_ns())
            samples, _, _ = svc.history.page(topic_name, ("",), 0, 100, 10**6)
            got = sorted(
                (Reading.deserialize(s.payload).label, s.partition, s.disposed) for s in samples
            )
            assert got == [("a", "", False), ("b", "", True)]
            assert svc.history.disposed(topic_name) == 1
        finally:
            svc.close()
            peer.close()
