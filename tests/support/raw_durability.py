"""Raw ``cyclonedds`` peers of a durability service: writers, and a history client.

The durability service's mutation tests (``tests/durability/test_durability_service_mutants*.py``)
play both sides of it with plain Cyclone participants: TRANSIENT/PERSISTENT writers
that the service discovers, and a late joiner that asks it for history with the
wire protocol's own request (``HistoryFetchRequest``) and reads its pages. Every
participant is deleted by ``close()``: mutmut forks each mutant's run from a process
that ran the tests, and a participant left open there hangs the fork
(docs/mutation.md, "Command"). ``FakeService`` plays a service that other services
align with; ``records`` makes what a service keeps.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps._history import SERVICE_READER_NAME
from dcps.wire._durability import (
    MAX_HISTORY_PAGE,
    HistoryFetchRequest,
    HistoryPage,
    StoredSample,
    durability_partition,
    matched_services,
    service_request_qos,
)
from dcps.wire._messages import Reply, Request
from dcps.wire._names import REPLY_QOS, REQUEST_WRITER_QOS, reply_partition
from tests.support.topic_types import Blob, Reading
from tests.support.waiting import eventually

__all__ = [
    "TIMEOUT",
    "FakeService",
    "HistoryAsker",
    "RawPeer",
    "reader_matched",
    "records",
    "service_readers",
    "start",
    "writer_qos",
]

#: Long enough for discovery on a loaded machine, short enough that a mutant that
#: loses a sample costs seconds
TIMEOUT = 10.0


def writer_qos(kind: Any = Policy.Durability.Transient, *extra: Any) -> Qos:
    """A reliable KEEP_ALL writer of durability ``kind`` that does not dispose its
    instances when it goes (so what it wrote stays ALIVE with the service)."""
    return Qos(
        Policy.Reliability.Reliable(10**10),
        Policy.History.KeepAll,
        kind,
        Policy.WriterDataLifecycle(autodispose=False),
        *extra,
    )


def records(topic: str, count: int, *, size: int = 0, flags: int = 0) -> list[StoredSample]:
    """``count`` samples of ``topic`` as a service serves them (sensor ``i``, value ``i``;
    ``size``: ``Blob`` samples of ``size`` bytes instead of readings)."""
    now = time.time_ns()
    out = []
    for i in range(count):
        payload = (
            Reading(i, float(i), f"r{i}").serialize()
            if not size
            else Blob(i, bytes([i]) * size).serialize()
        )
        key = i.to_bytes(4, "big")
        out.append(StoredSample(topic, "", key, b"w" * 16, now + i, i + 1, flags, payload))
    return out


def start(services: list[Any], svc: Any) -> Any:
    """Start ``svc`` (a ``DurabilityService``) and add it to ``services`` (the
    ``services`` fixture of tests/durability/conftest.py, which closes them); ``svc``."""
    services.append(svc)
    return svc.start()


def service_readers(writer: DataWriter[Any], by: Any = None) -> int:
    """How many durability service readers (named ``SERVICE_READER_NAME``) of participant
    ``by`` (a GUID; None: of any) matched ``writer``: Cyclone gives a TRANSIENT writer's
    earlier samples to no late reader."""
    found = 0
    for handle in writer.get_matched_subscriptions():
        data = writer.get_matched_subscription_data(handle)
        if data is None or (by is not None and data.participant_key != by):
            continue
        try:
            if data.qos[Policy.EntityName].name == SERVICE_READER_NAME:
                found += 1
        except (KeyError, AttributeError):
            continue
    return found


def reader_matched(service: Any, topic: str, partition: str, writer: DataWriter[Any]) -> bool:
    """True once ``service`` (a started ``DurabilityService``) serves ``topic`` in
    ``partition`` and its reader there matched ``writer``: a writer that sees the reader
    (``service_readers``) may write before the reader sees it, and the sample is lost."""
    served = service._served.get((topic, partition))
    if served is None:
        return False
    for handle in served.reader.get_matched_publications():
        data = served.reader.get_matched_publication_data(handle)
        if data is not None and data.key == writer.guid:
            return True
    return False


def seen_by(
    service: Any, name: str, data_type: Any, writer: DataWriter[Any], partitions: tuple[str, ...]
) -> None:
    """Wait until ``service``'s participant has discovered ``writer`` (a probe reader of its
    own matched it): what the service does not serve, it has seen by then, so a test can
    tell "not served" from "not discovered yet"."""
    dp = service._endpoint.participant
    sub = Subscriber(dp, qos=Qos(Policy.Partition(list(partitions)))) if partitions else dp
    probe = DataReader(sub, Topic(dp, name, data_type), qos=Qos(Policy.Durability.Volatile))
    try:
        eventually(lambda: writer.guid in _publications(probe), TIMEOUT, f"{name} discovered")
    finally:
        probe.__del__()


def _publications(reader: DataReader[Any]) -> set[Any]:
    out = set()
    for handle in reader.get_matched_publications():
        data = reader.get_matched_publication_data(handle)
        if data is not None:
            out.add(data.key)
    return out


class RawPeer:
    """A plain Cyclone participant with writers on any topic; ``service`` (a started
    ``DurabilityService``): the one whose readers its writers wait for by default."""

    def __init__(self, domain_id: int, service: Any = None) -> None:
        self.dp = DomainParticipant(domain_id)
        self.service = service
        self._topics: dict[str, Topic[Any]] = {}

    def topic(self, name: str, data_type: Any) -> Topic[Any]:
        found = self._topics.get(name)
        if found is None:
            found = self._topics[name] = Topic(self.dp, name, data_type)
        return found

    def writer(
        self,
        name: str,
        data_type: Any,
        qos: Qos | None = None,
        *,
        partitions: tuple[str, ...] = (),
        wait: bool = True,
        service: Any = None,
        serving: tuple[str, ...] = (),
        seen: Any = None,
    ) -> DataWriter[Any]:
        """A writer (TRANSIENT by default) in ``partitions`` (none: the default one).
        ``wait``: until the reader of ``service`` (or the peer's) in each partition of
        ``serving`` (default: all the writer's) matched it; with no service, until some
        durability service's reader did. ``seen``: a service that must have discovered
        the writer (one that is not to serve it) before this returns."""
        pub = (
            Publisher(self.dp, qos=Qos(Policy.Partition(list(partitions))))
            if partitions
            else self.dp
        )
        writer = DataWriter(pub, self.topic(name, data_type), qos or writer_qos())
        if seen is not None:
            seen_by(seen, name, data_type, writer, partitions)
        svc = service or self.service
        if wait and svc is not None:
            eventually(
                lambda: all(
                    reader_matched(svc, name, p, writer) for p in serving or partitions or ("",)
                ),
                TIMEOUT,
                f"the service's reader of {name} matching",
            )
        elif wait:
            eventually(lambda: service_readers(writer) >= 1, TIMEOUT, f"a service serving {name}")
        return writer

    def close(self) -> None:
        self.dp.__del__()


class HistoryAsker(RawPeer):
    """A late joiner of the durability protocol: it asks services of ``namespace`` for
    history (``HISTORY_FETCH``) and reads their pages, as a dcps TRANSIENT reader does."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        super().__init__(domain_id)
        self.client = uuid.uuid4().hex
        self._requests = self.topic("dcps_channels_request", Request)
        replies = self.topic("dcps_channels_reply", Reply)
        sub = Subscriber(
            self.dp, qos=Qos(Policy.Partition([reply_partition(namespace, self.client)]))
        )
        self.replies = DataReader(sub, replies, qos=REPLY_QOS)
        pub = Publisher(self.dp, qos=Qos(Policy.Partition([durability_partition(namespace)])))
        self.requests = DataWriter(pub, self._requests, qos=REQUEST_WRITER_QOS)
        self._next = 0
        self._kept: dict[int, Reply] = {}

    def services(self) -> set[str]:
        """The incarnations of the services whose request readers matched ours."""
        return matched_services(self.requests)

    def wait_for(self, service: str) -> None:
        eventually(lambda: service in self.services(), TIMEOUT, f"service {service} matching")

    def send(self, request: Request) -> int:
        """Write ``request`` (its ``request_id`` is replaced by a fresh one); the id."""
        self._next += 1
        request.request_id = self._next
        request.client = self.client
        self.requests.write(request)
        return self._next

    def ask(self, request: HistoryFetchRequest) -> int:
        """Send a HISTORY_FETCH once its service matched; the request id."""
        if request.service:
            self.wait_for(request.service)
        else:
            eventually(self.services, TIMEOUT, "a service matching")
        return self.send(request.to_wire(self.client, 0))

    def _collect(self) -> None:
        for reply in self.replies.take(N=64):
            if isinstance(reply, Reply):
                self._kept[int(reply.request_id)] = reply

    def reply(self, rid: int, timeout: float = TIMEOUT) -> Reply:
        """The answer to request ``rid`` (waited for)."""

        def arrived() -> Reply | None:
            self._collect()
            return self._kept.get(rid)

        return eventually(arrived, timeout, f"the answer to request {rid}")

    def answered(self, rid: int) -> bool:
        """Whether request ``rid`` has an answer by now."""
        self._collect()
        return rid in self._kept

    def page(
        self,
        service: str,
        topic: str = "",
        partitions: tuple[str, ...] = (),
        after: int = 0,
        count: int = MAX_HISTORY_PAGE,
    ) -> HistoryPage:
        """One page of ``service``'s history (an error reply fails the test)."""
        reply = self.reply(self.ask(HistoryFetchRequest(topic, partitions, after, count, service)))
        assert reply.status == 0, reply.error
        return HistoryPage.from_wire(reply)

    def history(
        self, service: str, topic: str = "", partitions: tuple[str, ...] = ()
    ) -> list[StoredSample]:
        """Everything ``service`` keeps of ``topic`` in ``partitions``, page after page."""
        out: list[StoredSample] = []
        after = 0
        while True:
            page = self.page(service, topic, partitions, after)
            out.extend(page.samples)
            if not page.more:
                return out
            after = page.cursor


class FakeService(RawPeer):
    """A raw participant that announces itself as durability service ``incarnation`` (its
    request reader's UserData) and answers as the test says: forged, stale or real pages."""

    def __init__(self, domain_id: int, namespace: str, incarnation: str) -> None:
        super().__init__(domain_id)
        self.namespace = namespace
        self.incarnation = incarnation
        sub = Subscriber(self.dp, qos=Qos(Policy.Partition([durability_partition(namespace)])))
        self.requests = DataReader(
            sub, self.topic("dcps_channels_request", Request), service_request_qos(incarnation)
        )
        self._writers: dict[str, DataWriter[Any]] = {}

    def asked(self) -> Request:
        """The next request for this service (waited for)."""

        def one() -> Request | None:
            for r in self.requests.take(N=1):
                if isinstance(r, Request) and r.member == self.incarnation:
                    return r
            return None

        return eventually(one, TIMEOUT, f"a request for {self.incarnation}")

    def answer(self, request: Request, reply: Reply) -> None:
        """Write ``reply`` to the client of ``request`` (once its reader matched)."""
        writer = self._writers.get(request.client)
        if writer is None:
            pub = Publisher(
                self.dp,
                qos=Qos(Policy.Partition([reply_partition(self.namespace, request.client)])),
            )
            writer = self._writers[request.client] = DataWriter(
                pub, self.topic("dcps_channels_reply", Reply), REPLY_QOS
            )
            eventually(writer.get_matched_subscriptions, TIMEOUT, "the asking service's reader")
        writer.write(reply)
