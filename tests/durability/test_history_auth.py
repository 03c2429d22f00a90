"""HISTORY_FETCH under a namespace key: requests and pages are sealed like every request.

The attackers are raw ``cyclonedds`` participants with the wire types: one
answers every history request it sees with a forged page, one asks the
service for history without the key.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

import dcps
import qos as q
from dcps._history import _client
from dcps.store import DurabilityService
from dcps.wire._auth import DropReason
from dcps.wire._auth_keys import write_key_file
from dcps.wire._codes import Op
from dcps.wire._durability import (
    HistoryFetchRequest,
    HistoryPage,
    StoredSample,
    durability_partition,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._names import CONTROL_QOS, REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

TIMEOUT = 30.0
WRITER_QOS = q.DataWriterQos(
    q.Durability.TRANSIENT,
    q.WriterDataLifecycle(autodispose_unregistered_instances=False),
)


@pytest.fixture
def key_file(tmp_path: Path, namespace: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The namespace key, in the environment of this process's readers (the keyholders)."""
    path = tmp_path / "ns.key"
    write_key_file(path)
    monkeypatch.setenv("DCPS_STORE_KEY_FILE", str(path))
    monkeypatch.setenv("DCPS_DURABILITY_NAMESPACE", namespace)
    return path


@pytest.fixture
def keyed_service(key_file: Path, domain_id: int, namespace: str) -> Iterator[DurabilityService]:
    with DurabilityService(domain_id=domain_id, namespace=namespace, key=key_file) as svc:
        yield svc


def _write_and_leave(domain_id: int, topic_name: str, svc: DurabilityService) -> None:
    """A TRANSIENT writer keeps sensors 0..2 with the service, then its participant goes."""
    with dcps.DomainParticipant(domain_id) as wp:
        writer = dcps.DataWriter(wp, dcps.Topic(wp, topic_name, Reading), qos=WRITER_QOS)
        for sensor in range(3):
            writer.write(Reading(sensor, 1.0, "real"))
        eventually(lambda: svc.history.count(topic_name) == 3, TIMEOUT, "3 samples kept")


class _Raw:
    """A plain cyclonedds participant on the protocol's request and reply topics."""

    def __init__(self, domain_id: int) -> None:
        self.dp = DomainParticipant(domain_id)
        self.requests = Topic(self.dp, "dcps_channels_request", Request)
        self.replies = Topic(self.dp, "dcps_channels_reply", Reply)

    def writer(self, topic: Topic[Any], partition: str, qos: Qos) -> DataWriter[Any]:
        pub = Publisher(self.dp, qos=Qos(Policy.Partition([partition])))
        return DataWriter(pub, topic, qos=qos)

    def reader(self, topic: Topic[Any], partition: str, qos: Qos) -> DataReader[Any]:
        sub = Subscriber(self.dp, qos=Qos(Policy.Partition([partition])))
        return DataReader(sub, topic, qos=qos)

    def close(self) -> None:
        self.dp.__del__()


class _Forger(_Raw):
    """Answers every HISTORY_FETCH it overhears with a page of sensor 99 (value 666), named
    as coming from the service asked: accepted by any client that does not check seals."""

    def __init__(self, domain_id: int, namespace: str, topic_name: str) -> None:
        super().__init__(domain_id)
        self.namespace = namespace
        self.topic_name = topic_name
        self.forged = 0
        self._requests = self.reader(self.requests, durability_partition(namespace), CONTROL_QOS)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        writers: dict[str, DataWriter[Any]] = {}
        payload = Reading(99, 666.0, "forged").serialize()
        while not self._stop.wait(0.005):  # a raw polling attacker: no wait set needed
            for r in self._requests.take(N=64):
                if not isinstance(r, Request) or r.op != int(Op.HISTORY_FETCH):
                    continue
                sample = StoredSample(self.topic_name, "", b"", b"f" * 16, 1, 1_000_000, 0, payload)
                page = HistoryPage((sample,), 1_000_000, False, r.member)
                writer = writers.get(r.client)
                if writer is None:
                    writer = writers[r.client] = self.writer(
                        self.replies, reply_partition(self.namespace, r.client), REPLY_QOS
                    )
                writer.write(page.to_wire(r.client, r.request_id))
                self.forged += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        super().close()


class TestSealedHistory:
    def test_a_forged_history_page_never_reaches_a_reader(
        self, keyed_service: DurabilityService, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """With the namespace key, a raw participant answering the reader's history request
        first, as the service it asked, gets nothing filed: the reader gets the service's
        three real samples, no sensor 99, and its client counted the forgeries."""
        _write_and_leave(domain_id, topic_name, keyed_service)
        client = _client(domain_id, namespace, None)  # the readers' history client
        forger = _Forger(domain_id, namespace, topic_name)
        try:
            eventually(
                lambda: _hears(forger, client.endpoint.participant.guid),
                TIMEOUT,
                "the forger hearing the history client",
            )
            with dcps.DomainParticipant(domain_id) as dp:
                topic = dcps.Topic(dp, topic_name, Reading)
                qos = q.DataReaderQos(q.Durability.TRANSIENT, q.History.KEEP_ALL)
                reader = dcps.DataReader(dp, topic, qos=qos)
                reader.wait_for_historical_data(TIMEOUT)
                eventually(
                    lambda: client.sealer.drops()[DropReason.MALFORMED] >= 1,
                    TIMEOUT,
                    "the forged page refused",
                )
                assert forger.forged >= 1
                samples = reader.take()
                assert sorted((s.data.sensor, s.data.label) for s in samples) == [
                    (0, "real"),
                    (1, "real"),
                    (2, "real"),
                ]
        finally:
            forger.close()

    def test_a_request_without_the_key_gets_no_history(
        self, keyed_service: DurabilityService, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A raw participant asking the keyed service for history without sealing the
        request (addressed to the service's incarnation) is dropped, not answered."""
        _write_and_leave(domain_id, topic_name, keyed_service)
        raw = _Raw(domain_id)
        try:
            client_id = uuid.uuid4().hex
            replies = raw.reader(raw.replies, reply_partition(namespace, client_id), REPLY_QOS)
            writer = raw.writer(raw.requests, durability_partition(namespace), REQUEST_WRITER_QOS)
            eventually(writer.get_matched_subscriptions, TIMEOUT, "the service's reader")
            request = HistoryFetchRequest(topic_name, (), 0, 100, keyed_service.incarnation)
            writer.write(request.to_wire(client_id, 1))
            eventually(
                lambda: keyed_service.auth_drops()[DropReason.MALFORMED] >= 1,
                TIMEOUT,
                "the unsealed request dropped",
            )
            # it was taken and dropped: had it been answered, the page would be here by now
            assert [r for r in replies.take(N=16) if isinstance(r, Reply)] == []
        finally:
            raw.close()


def _hears(forger: _Forger, participant: Any) -> bool:
    """True once the forger's request reader matched a writer of ``participant`` (a GUID)."""
    reader = forger._requests
    for handle in reader.get_matched_publications():
        data = reader.get_matched_publication_data(handle)
        if data is not None and data.participant_key == participant:
            return True
    return False
