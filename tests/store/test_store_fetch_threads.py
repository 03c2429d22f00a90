"""The store answers FETCH requests on threads of their own, beside publishes and commits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from dcps import BadParameterError
from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode
from dcps.wire._batches import ElementRun
from dcps.wire._replies import Fetched
from dcps.wire._transport import Endpoint

TIMEOUT = 20.0
CHANNELS = 2
#: Bytes per element: a FETCH of a few hundred is a reply of several hundred KB,
#: more than the reply writer takes before the client acknowledges it.
SIZE = 1500


def payload(channel: int, offset: int) -> bytes:
    """The element stored at ``offset`` of ``channel`` (recognisable, SIZE bytes)."""
    head = f"{channel}:{offset}:".encode()
    return head + bytes([offset % 251]) * (SIZE - len(head))


class Client:
    """A StoreClient with its own DDS participant."""

    def __init__(self, domain_id: int, namespace: str) -> None:
        self.endpoint = Endpoint(domain_id, namespace)
        self.client = StoreClient(self.endpoint, request_timeout=TIMEOUT)
        self.client.connect(TIMEOUT)

    def fetch(self, topic: str, channel: int, offset: int, count: int) -> Future[Fetched]:
        return self.client.fetch_async(topic, channel, offset, count)

    def close(self) -> None:
        self.client.close()
        self.endpoint.close()


def ensure(client: Client, topic: str, channels: int) -> None:
    """Create ``topic`` with ``channels`` channels that retain everything."""
    client.client.ensure_topic(topic, channels, True, "")


@pytest.fixture
def clients(
    store: Store, domain_id: int, namespace: str, topic_name: str
) -> Iterator[list[Client]]:
    """Three clients of the store (a publisher and two readers) and a topic of CHANNELS channels."""
    made = [Client(domain_id, namespace) for _ in range(3)]
    ensure(made[0], topic_name, CHANNELS)
    yield made
    for c in made:
        c.close()


def publish(client: Client, topic: str, channel: int, first: int, count: int) -> None:
    """Append elements ``first .. first + count - 1`` of ``channel`` and check where they went."""
    data = [payload(channel, o) for o in range(first, first + count)]
    fut = client.client.publish_async(topic, channel, [len(d) for d in data], b"".join(data))
    published = fut.result(TIMEOUT)
    assert (published.count, published.first) == (count, first)


def read_all(client: Client, topic: str, channel: int, total: int, chunk: int) -> list[Fetched]:
    """Fetch elements 0 .. total - 1 of ``channel``, 3 requests in flight, as they get stored."""
    replies: list[Fetched] = []
    pos = 0
    while pos < total:
        futures = [client.fetch(topic, channel, pos + i * chunk, chunk) for i in range(3)]
        for fut in futures:
            reply = fut.result(TIMEOUT)
            run = reply.run
            if run.count and run.first == pos:
                replies.append(reply)
                pos = run.end
    return replies


class TestParallelFetches:
    def test_two_readers_while_publishing_get_exact_runs(
        self, store: Store, clients: list[Client], topic_name: str
    ) -> None:
        """Two clients fetching while a third publishes get dense runs of what was published."""
        writer, *readers = clients
        total = 2400
        errors: list[BaseException] = []

        def produce() -> None:
            try:
                done = [0] * CHANNELS
                size = 1
                while min(done) < total:
                    for c in range(CHANNELS):
                        count = min(size, total - done[c])
                        if count:
                            publish(writer, topic_name, c, done[c], count)
                            done[c] += count
                    size = size % 97 + 13
            except BaseException as exc:
                errors.append(exc)

        results: dict[tuple[int, int], list[Fetched]] = {}

        def consume(i: int, channel: int) -> None:
            try:
                results[(i, channel)] = read_all(readers[i], topic_name, channel, total, 300)
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=produce)] + [
            threading.Thread(target=consume, args=(i, c)) for i in range(2) for c in range(CHANNELS)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(4 * TIMEOUT)
        assert not errors
        assert sorted(results) == [(i, c) for i in range(2) for c in range(CHANNELS)]
        for (_, channel), replies in results.items():
            run = ElementRun.join([r.run for r in replies])
            assert (run.first, run.count) == (0, total)
            assert run.payloads() == [payload(channel, o) for o in range(total)]
            assert all(r.tail >= r.run.end - 1 for r in replies)

    def test_replies_arrive_in_request_order(
        self, store: Store, clients: list[Client], topic_name: str
    ) -> None:
        """A client's replies arrive in the order of its requests, FETCHes and others mixed."""
        writer, reader, _ = clients
        publish(writer, topic_name, 0, 0, 600)
        arrived: list[int] = []
        futures: list[Future[Any]] = []
        for i in range(40):
            if i % 3:
                fut: Future[Any] = reader.client.state_async(topic_name)
            else:
                fut = reader.fetch(topic_name, 0, (i * 37) % 300, 300)
            fut.add_done_callback(lambda f, i=i: arrived.append(i))  # type: ignore[misc]
            futures.append(fut)
        replies = [f.result(TIMEOUT) for f in futures]
        assert arrived == list(range(40))
        for i, reply in enumerate(replies):
            if i % 3 == 0:
                run = reply.run
                first = (i * 37) % 300
                assert run.payloads() == [payload(0, o) for o in range(first, first + 300)]

    def test_fetch_errors_come_back_as_error_replies(
        self, store: Store, clients: list[Client], topic_name: str
    ) -> None:
        """A FETCH of a channel the topic does not have fails with BadParameterError naming it."""
        with pytest.raises(BadParameterError, match=r"channels 0\.\.1"):
            clients[1].fetch(topic_name, 5, 0, 10).result(TIMEOUT)
        with pytest.raises(BadParameterError, match="no channelled topic"):
            clients[1].fetch("missing", 0, 0, 10).result(TIMEOUT)


class TestFetchThreadCount:
    @pytest.mark.parametrize("count", [1, 6])
    def test_any_number_of_fetch_threads_serves_exact_runs(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, count: int
    ) -> None:
        """A store with one fetch thread, or six, runs that many and answers fetches exactly."""
        before = {t.ident for t in threading.enumerate()}
        with Store(
            tmp_path / "store",
            domain_id=domain_id,
            namespace=namespace,
            sync=SyncMode.NORMAL,
            fetch_threads=count,
        ):
            fetchers = [
                t
                for t in threading.enumerate()
                if t.ident not in before and t.name.startswith("dcps-store-fetch")
            ]
            assert len(fetchers) == count
            client = Client(domain_id, namespace)
            try:
                ensure(client, topic_name, 1)
                publish(client, topic_name, 0, 0, 900)
                replies = read_all(client, topic_name, 0, 900, 200)
            finally:
                client.close()
        run = ElementRun.join([r.run for r in replies])
        assert run.payloads() == [payload(0, o) for o in range(900)]

    @pytest.mark.parametrize("count", [0, -1, 2.5, True])
    def test_a_bad_fetch_thread_count_is_refused(
        self, tmp_path: Path, domain_id: int, count: object
    ) -> None:
        """fetch_threads must be a positive int; the error names it and nothing is created."""
        with pytest.raises(BadParameterError, match="fetch_threads"):
            Store(tmp_path / "store", domain_id=domain_id, fetch_threads=count)  # type: ignore[arg-type]
        assert not (tmp_path / "store").exists()


class TestCloseWithFetchesInFlight:
    def test_close_while_fetching_stops_every_fetch_thread(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """Closing a store with FETCHes queued stops its threads; its file reopens whole."""
        before = {t.ident for t in threading.enumerate()}
        store = Store(
            tmp_path / "store", domain_id=domain_id, namespace=namespace, sync=SyncMode.NORMAL
        ).start()
        client = Client(domain_id, namespace)
        try:
            ensure(client, topic_name, 1)
            publish(client, topic_name, 0, 0, 2000)
            futures = [client.fetch(topic_name, 0, (i * 50) % 1500, 500) for i in range(60)]
            futures[0].result(TIMEOUT)  # the fetch threads are at work
            store.close()
            fetchers = [
                t
                for t in threading.enumerate()
                if t.ident not in before
                and (t.name == "dcps-store" or t.name.startswith("dcps-store-fetch"))
            ]
            assert fetchers == []
        finally:
            store.close()
            client.close()
        for i, fut in enumerate(futures):  # answered exactly, or not at all
            if fut.done() and fut.exception() is None:
                run = fut.result().run
                first = (i * 50) % 1500
                assert run.payloads() == [payload(0, o) for o in range(first, first + 500)]
        with Store(tmp_path / "store", domain_id=domain_id, namespace=namespace) as reopened:
            assert reopened.log.channel_state(topic_name, 0).count == 2000
