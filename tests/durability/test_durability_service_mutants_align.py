"""The durability service (dcps/store/_durability.py): answering requests, and alignment.

Written to kill the survivors of ``./dev mutate dcps/store/_durability.py`` (issue 20,
docs/mutation.md), next to ``test_durability_service_mutants.py``. A late joiner asks
over the wire protocol (tests/support/raw_durability.py); services align with each
other in a namespace of the test's own. What a service keeps for alignment is put in
its history directly (``history.add_many``, as alignment itself does), so no writer
has to live while the services meet. Every participant is deleted at the end of its test.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from dcps.store import DurabilityService, _durability
from dcps.store._durability import ALIGN_WINDOW
from dcps.store._durability_history import Limits
from dcps.wire._auth_keys import write_key_file
from dcps.wire._codes import Op
from dcps.wire._durability import (
    FLAG_DISPOSED,
    MAX_HISTORY_PAGE,
    HistoryFetchRequest,
    HistoryPage,
    StoredSample,
    matched_services,
)
from dcps.wire._messages import Reply, Request
from tests.support.raw_durability import TIMEOUT, FakeService, HistoryAsker, RawPeer, records, start
from tests.support.topic_types import Reading
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def service(domain: int) -> Iterator[DurabilityService]:
    """The file's answering service: every topic, in memory, no alignment."""
    namespace = f"ns_{uuid.uuid4().hex[:10]}"
    with DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None) as svc:
        yield svc


@pytest.fixture
def asker(domain: int, service: DurabilityService) -> Iterator[HistoryAsker]:
    a = HistoryAsker(domain, service.namespace)
    yield a
    a.close()


@pytest.fixture(autouse=True)
def _short_window(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A starting service listens 0.2 s for others (1 s in production): the services
    here meet within it, and each mutant runs these tests again. Not for the test of
    the window itself."""
    if "window" not in request.node.name:
        monkeypatch.setattr(_durability, "ALIGN_WINDOW", 0.2)


def identities(samples: list[StoredSample]) -> list[tuple[bytes, bytes, int, bytes]]:
    return sorted((s.key, s.writer, s.timestamp, s.payload) for s in samples)


class TestAnswering:
    def test_a_request_for_another_service_is_left_to_it(
        self, service: DurabilityService, asker: HistoryAsker, topic_name: str
    ) -> None:
        """A request addressed to another incarnation gets no answer from this service;
        the one after it, addressed to every service, does (requests are taken in order)."""
        asker.wait_for(service.incarnation)
        other = asker.send(HistoryFetchRequest(topic_name, (), 0, 10, "0" * 32).to_wire("", 0))
        everyone = asker.send(HistoryFetchRequest(topic_name, (), 0, 10, "").to_wire("", 0))
        reply = asker.reply(everyone)
        assert reply.status == 0
        assert reply.text == service.incarnation
        assert not asker.answered(other)

    def test_a_malformed_request_gets_an_error_naming_the_problem(
        self, service: DurabilityService, asker: HistoryAsker, topic_name: str
    ) -> None:
        asker.wait_for(service.incarnation)
        bad = HistoryFetchRequest(topic_name, (), 0, 0, service.incarnation).to_wire("", 0)
        reply = asker.reply(asker.send(bad))
        assert reply.status != 0
        assert "asks for 0 samples" in reply.error

    def test_another_request_kind_is_refused(
        self, service: DurabilityService, asker: HistoryAsker
    ) -> None:
        asker.wait_for(service.incarnation)
        ping = Request(client="", request_id=0, op=int(Op.PING), member=service.incarnation)
        reply = asker.reply(asker.send(ping))
        assert reply.status != 0
        assert "the durability service answers HISTORY_FETCH only, not op 0" in reply.error

    def test_pages_follow_the_cursor_and_the_topic(
        self, service: DurabilityService, asker: HistoryAsker, topic_name: str
    ) -> None:
        """Five samples, asked two at a time: 2, 2, 1, each after the last one's cursor;
        another topic's samples are not in them, but are in a page of every topic."""
        other = f"{topic_name}_other"
        five = records(topic_name, 5)
        assert service.history.add_many(five, time.time_ns()) == 5
        assert service.history.add_many(records(other, 1), time.time_ns()) == 1
        sizes, cursors, mores, got = [], [], [], []
        after = 0
        while True:
            page = asker.page(service.incarnation, topic_name, after=after, count=2)
            sizes.append(len(page.samples))
            cursors.append(page.cursor)
            mores.append(page.more)
            got.extend(page.samples)
            if not page.more:
                break
            after = page.cursor
        assert (sizes, mores) == ([2, 2, 1], [True, True, False])
        assert cursors == sorted(cursors)
        assert len(set(cursors)) == 3
        assert identities(got) == identities(five)
        everything = asker.history(service.incarnation, "")
        assert {s.topic for s in everything} >= {topic_name, other}

    def test_what_a_writer_left_before_the_request_is_served(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """The service takes what its readers hold before it answers: a sample acknowledged
        to the writer before a late joiner asked is in the answer, even when the service's
        loop had not kept it yet (here the test runs the loop's steps itself)."""
        svc = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None)
        svc._step = lambda: None  # type: ignore[method-assign]  # the test steps it
        start(services, svc)
        peer = RawPeer(domain)
        asker = HistoryAsker(domain, namespace)
        try:

            def discovered() -> bool:
                svc._discover()
                return (topic_name, "") in svc._served

            peer.topic(topic_name, Reading)
            writer = peer.writer(topic_name, Reading, wait=False)
            eventually(discovered, TIMEOUT, "the writer discovered")
            eventually(lambda: writer.get_matched_subscriptions(), TIMEOUT, "the service reader")
            writer.write(Reading(3, 3.0, "acked"))
            writer.write_dispose(Reading(4, 4.0, "gone"))
            assert writer.wait_for_acks(10**10)
            rid = asker.ask(HistoryFetchRequest(topic_name, (), 0, 10, svc.incarnation))
            eventually(lambda: svc._requests.read(N=4), TIMEOUT, "the request at the service")
            svc._answer()
            reply = asker.reply(rid)
            page = HistoryPage.from_wire(reply)
            got = sorted((Reading.deserialize(s.payload).label, s.disposed) for s in page.samples)
            assert got == [("acked", False), ("gone", True)]
        finally:
            asker.close()
            peer.close()


class TestAlignment:
    def test_a_starting_service_keeps_what_another_keeps_and_serves_it(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        kept = records(topic_name, 3)
        first = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None)
        first.history.add_many(kept, time.time_ns())
        start(services, first)
        gone = f"{topic_name}_gone"  # disposed; forgotten only after a long delay
        first.history.serve(gone, "", Limits(depth=None, cleanup_delay_ns=10**15), False)
        first.history.add_many(records(gone, 1, flags=FLAG_DISPOSED), time.time_ns())
        assert first.history.disposed(gone) == 1
        second = DurabilityService(domain_id=domain, namespace=namespace, key=None)
        second.history.serve(gone, "", Limits(depth=None, cleanup_delay_ns=10**15), False)
        start(services, second)
        assert second.wait_aligned(TIMEOUT)
        assert second.history.count(topic_name) == 3
        assert second.history.disposed(gone) == 1
        assert second.aligned == 4
        services.remove(first)
        first.close()
        asker = HistoryAsker(domain, namespace)
        try:
            assert identities(asker.history(second.incarnation, topic_name)) == identities(kept)
        finally:
            asker.close()

    def test_alignment_goes_on_over_several_pages(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """Three samples of 1.6 MB: a page holds two (4 MB at most), the third comes in
        the next one."""
        big = records(topic_name, 3, size=1_600_000)
        first = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None)
        first.history.add_many(big, time.time_ns())
        start(services, first)
        second = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=None))
        assert second.wait_aligned(TIMEOUT)
        assert second.aligned == 3
        got, _, more = second.history.page(topic_name, (), 0, 10, 10**9)
        assert not more
        assert identities(got) == identities(big)

    def test_a_service_that_appears_later_is_aligned_from(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        waiting = start(
            services, DurabilityService(domain_id=domain, namespace=namespace, key=None)
        )
        assert waiting.wait_aligned(TIMEOUT)
        late = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None)
        late.history.add_many(records(topic_name, 2), time.time_ns())
        start(services, late)
        eventually(lambda: waiting.history.count(topic_name) == 2, TIMEOUT, "aligned from it")
        assert waiting.aligned == 2

    def test_a_service_without_alignment_asks_no_one_and_has_no_window(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        keeper = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None)
        keeper.history.add_many(records(topic_name, 2), time.time_ns())
        start(services, keeper)
        began = time.monotonic()
        alone = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=None)
        start(services, alone)
        assert alone.wait_aligned(TIMEOUT)
        assert time.monotonic() - began < ALIGN_WINDOW  # no window to wait out
        eventually(lambda: keeper.incarnation in alone._peers, TIMEOUT, "the keeper matched")
        asker = HistoryAsker(domain, namespace)
        try:  # a request written after any the service would have sent, answered
            asker.page(keeper.incarnation, topic_name)
        finally:
            asker.close()
        assert alone._client_id not in keeper._reply_writers
        assert alone.history.count(topic_name) == 0
        assert alone.aligned == 0

    def test_a_service_alone_is_ready_after_the_alignment_window(
        self, domain: int, namespace: str, services: list[DurabilityService]
    ) -> None:
        svc = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=None))
        assert not svc.wait_aligned(ALIGN_WINDOW / 2)
        assert svc.wait_aligned(TIMEOUT)
        assert svc.aligned == 0

    def test_services_with_the_namespace_key_align(
        self,
        domain: int,
        namespace: str,
        services: list[DurabilityService],
        topic_name: str,
        tmp_path: Path,
    ) -> None:
        """With a key, the alignment request is sealed for the service it asks and the page
        by the service that answers: both are accepted, and nothing is dropped."""
        key = tmp_path / "ns.key"
        write_key_file(key)
        first = DurabilityService(domain_id=domain, namespace=namespace, align=False, key=key)
        first.history.add_many(records(topic_name, 2), time.time_ns())
        start(services, first)
        second = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=key))
        assert second.wait_aligned(TIMEOUT)
        assert second.history.count(topic_name) == 2
        assert sum(first.auth_drops().values()) == 0
        assert sum(second.auth_drops().values()) == 0
        asker = HistoryAsker(domain, namespace)  # without the key
        try:
            asker.ask(HistoryFetchRequest(topic_name, (), 0, 10, first.incarnation))
            eventually(lambda: sum(first.auth_drops().values()) >= 1, TIMEOUT, "dropped")
        finally:
            asker.close()


class TestAlignmentReplies:
    def test_only_the_answer_to_its_own_request_is_kept(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """Before its real answer, the asking service gets an error reply, a page answering
        another request (one replayed from an earlier alignment) and a page named as another
        service's: it keeps only the real page's sample, and is ready after it."""
        fake = FakeService(domain, namespace, "f" * 32)
        try:
            svc = start(
                services, DurabilityService(domain_id=domain, namespace=namespace, key=None)
            )
            request = fake.asked()
            fetch = HistoryFetchRequest.from_wire(request)
            assert (fetch.topic, fetch.partitions, fetch.after) == ("", (), 0)
            assert fetch.count == MAX_HISTORY_PAGE
            rid = int(request.request_id)
            bad, stale, other, real = (records(f"{topic_name}_{n}", 1) for n in "abcd")
            fake.answer(
                request,
                Reply(
                    client=request.client,
                    request_id=rid,
                    status=1,
                    error="no",
                    text=fake.incarnation,
                    blob=HistoryPage(tuple(bad), 1, False, fake.incarnation).to_wire("", 0).blob,
                ),
            )
            fake.answer(
                request,
                HistoryPage(tuple(stale), 1, False, fake.incarnation).to_wire(
                    request.client, rid + 7
                ),
            )
            fake.answer(
                request, HistoryPage(tuple(other), 1, False, "e" * 32).to_wire(request.client, rid)
            )
            assert not svc.wait_aligned(0.0)
            fake.answer(
                request,
                HistoryPage(tuple(real), 5, False, fake.incarnation).to_wire(request.client, rid),
            )
            assert svc.wait_aligned(TIMEOUT)
            assert svc.aligned == 1
            mine = [t for t, _ in svc.history.topics() if t.startswith(topic_name)]
            assert mine == [f"{topic_name}_d"]
        finally:
            fake.close()

    def test_a_page_with_more_is_followed_from_its_cursor(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        fake = FakeService(domain, namespace, "f" * 32)
        try:
            svc = start(
                services, DurabilityService(domain_id=domain, namespace=namespace, key=None)
            )
            first = fake.asked()
            one, two = records(topic_name, 2)
            page = HistoryPage((one,), 41, True, fake.incarnation)
            fake.answer(first, page.to_wire(first.client, first.request_id))
            second = fake.asked()
            assert HistoryFetchRequest.from_wire(second).after == 41
            assert int(second.request_id) != int(first.request_id)
            assert not svc.wait_aligned(0.0)
            page = HistoryPage((two,), 42, False, fake.incarnation)
            fake.answer(second, page.to_wire(second.client, second.request_id))
            assert svc.wait_aligned(TIMEOUT)
            assert svc.aligned == 2
        finally:
            fake.close()

    def test_a_service_that_leaves_mid_alignment_is_not_waited_for(
        self, domain: int, namespace: str, services: list[DurabilityService]
    ) -> None:
        fake = FakeService(domain, namespace, "f" * 32)
        svc = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=None))
        fake.asked()  # and never answered
        assert not svc.wait_aligned(ALIGN_WINDOW)
        fake.close()
        assert svc.wait_aligned(TIMEOUT)

    def test_a_keyed_service_refuses_an_unsealed_page(
        self,
        domain: int,
        namespace: str,
        services: list[DurabilityService],
        topic_name: str,
        tmp_path: Path,
    ) -> None:
        """With the namespace key, a page that answers the alignment request, named as the
        service asked but not sealed by it, is dropped and counted: nothing is kept."""
        key = tmp_path / "ns.key"
        write_key_file(key)
        fake = FakeService(domain, namespace, "f" * 32)
        try:
            svc = start(services, DurabilityService(domain_id=domain, namespace=namespace, key=key))
            request = fake.asked()
            page = HistoryPage(tuple(records(topic_name, 1)), 1, False, fake.incarnation)
            fake.answer(request, page.to_wire(request.client, request.request_id))
            eventually(lambda: sum(svc.auth_drops().values()) >= 1, TIMEOUT, "the page dropped")
            assert svc.aligned == 0
            assert svc.history.count(topic_name) == 0
            assert not svc.wait_aligned(0.0)
        finally:
            fake.close()

    def test_a_service_matched_again_is_asked_after_what_it_served(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """A service that went away (a cut link) and came back is asked only for what it
        keeps beyond the last page it served."""
        fake = FakeService(domain, namespace, "f" * 32)
        try:
            svc = start(
                services, DurabilityService(domain_id=domain, namespace=namespace, key=None)
            )
            first = fake.asked()
            page = HistoryPage(tuple(records(topic_name, 1)), 77, False, fake.incarnation)
            fake.answer(first, page.to_wire(first.client, first.request_id))
            assert svc.wait_aligned(TIMEOUT)
        finally:
            fake.close()
        eventually(lambda: fake.incarnation not in svc._peers, TIMEOUT, "the service gone")
        again = FakeService(domain, namespace, "f" * 32)
        try:
            assert HistoryFetchRequest.from_wire(again.asked()).after == 77
        finally:
            again.close()


class TestOwnRequests:
    def test_a_request_taken_with_the_services_own_is_answered(
        self, domain: int, namespace: str, services: list[DurabilityService], topic_name: str
    ) -> None:
        """A service's reader also takes the alignment requests the service writes; a
        late joiner's request taken after one of them is answered all the same (the test
        steps the service itself, so that both are taken together)."""
        svc = DurabilityService(domain_id=domain, namespace=namespace, key=None)
        svc._step = lambda: None  # type: ignore[method-assign]  # the test steps it
        start(services, svc)
        fake = FakeService(domain, namespace, "f" * 32)
        asker = HistoryAsker(domain, namespace)
        try:
            eventually(
                lambda: fake.incarnation in matched_services(svc._align_writer),
                TIMEOUT,
                "the other service matched",
            )
            svc._align_step()  # asks it
            fake.asked()
            rid = asker.ask(HistoryFetchRequest(topic_name, (), 0, 10, svc.incarnation))
            eventually(lambda: len(svc._requests.read(N=8)) >= 2, TIMEOUT, "both requests")
            svc._answer()
            assert asker.reply(rid).status == 0
        finally:
            asker.close()
            fake.close()
