"""Prometheus metrics of the store, scraped over HTTP from 127.0.0.1 after a known workload."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dcps import BadParameterError, DcpsTimeoutError
from dcps.channels import ChannelledTopic
from dcps.channels._client import StoreClient
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import write_key_file
from dcps.wire._transport import Endpoint
from tests.store.test_admin import (
    TIMEOUT,
    Admin,
    Clients,
    StoreProcess,
    publish,
)
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of ``url``'s metrics: (name, sorted labels) -> value."""
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


@pytest.fixture
def store_proc(tmp_path: Path, domain_id: int, namespace: str) -> Iterator[StoreProcess]:
    store = StoreProcess(tmp_path / "store", domain_id, namespace, "--metrics-port", "0")
    try:
        yield store
    finally:
        store.stop()


@pytest.fixture
def clients(domain_id: int, namespace: str) -> Iterator[Clients]:
    made = Clients(domain_id, namespace)
    try:
        yield made
    finally:
        made.close_all()


class TestWorkload:
    def test_counts_after_a_known_workload(
        self,
        store_proc: StoreProcess,
        clients: Clients,
        topic_name: str,
        domain_id: int,
        namespace: str,
    ) -> None:
        """10 elements published to a group's topic show as published, stored and pushed
        (same bytes), fetched by a late member, its commit as a lag of 6, requests by kind
        and result, SQLite commit latencies and the file's size."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        clients.close(clients.sub(topic, "g"))
        publish(clients, topic, 0, 10)
        late = clients.sub(topic, "g")
        got = receive_n(late, 4, TIMEOUT)
        late.commit({0: got[-1].position})
        assert got[-1].position.offset == 3
        admin = Admin(domain_id, namespace)
        assert admin.run("topics", "describe", "no_such_topic").returncode == 1

        m = scrape(store_proc.metrics_url)
        t = {"topic": topic_name}
        assert value(m, "dcps_store_published_elements_total", **t) == 10
        assert value(m, "dcps_store_stored_elements_total", **t) == 10
        assert value(m, "dcps_store_pushed_elements_total", **t) == 10
        published = value(m, "dcps_store_published_bytes_total", **t)
        assert published > 10 * 10
        assert value(m, "dcps_store_stored_bytes_total", **t) == published
        assert value(m, "dcps_store_pushed_bytes_total", **t) == published
        # the late member reads what the live tail's transient-local history no longer holds
        # from the store (how much depends on how the publisher batched): at least one
        assert 1 <= value(m, "dcps_store_fetched_elements_total", **t) <= 10
        assert value(m, "dcps_store_topic_elements", **t) == 6  # the 4 committed are released
        assert value(m, "dcps_store_group_members", topic=topic_name, group="g") == 1
        assert value(m, "dcps_store_group_lag", topic=topic_name, group="g", channel="0") == 6
        assert value(m, "dcps_store_requests_total", kind="publish", result="ok") >= 1
        assert value(m, "dcps_store_requests_total", kind="join", result="ok") == 2
        assert value(m, "dcps_store_requests_total", kind="commit", result="ok") >= 1
        failed = value(
            m, "dcps_store_requests_total", kind="describe_topics", result="bad_parameter"
        )
        assert failed == 1
        assert value(m, "dcps_store_sqlite_commit_seconds_count") >= 3
        assert value(m, "dcps_store_disk_bytes", file="db") > 0
        assert value(m, "dcps_store_disk_free_bytes") > 0
        assert ("dcps_store_auth_failures_total", (("reason", "bad_tag"),)) in m
        assert value(m, "dcps_store_auth_failures_total", reason="bad_tag") == 0
        assert value(m, "dcps_store_clients") >= 1

        clients.close(late)  # the member leaves: the gauge follows at the next scrape
        eventually(
            lambda: (
                value(
                    scrape(store_proc.metrics_url),
                    "dcps_store_group_members",
                    topic=topic_name,
                    group="g",
                )
                == 0
            ),
            TIMEOUT,
            "the member count to drop to 0",
        )


class TestEmbedded:
    def test_each_store_has_its_own_registry(
        self, tmp_path: Path, domain_id: int, unique: str
    ) -> None:
        """Two stores in one process count separately, each served on its own port."""
        with (
            Store(
                tmp_path / "a",
                domain_id=domain_id,
                namespace=f"a_{unique}",
                sync=SyncMode.NORMAL,
                metrics_port=0,
                key=None,
            ) as a,
            Store(
                tmp_path / "b",
                domain_id=domain_id,
                namespace=f"b_{unique}",
                sync=SyncMode.NORMAL,
                metrics_port=0,
                key=None,
            ) as b,
        ):
            url_a, url_b = a.metrics_url, b.metrics_url
            assert url_a is not None
            assert url_b is not None
            assert url_a != url_b
            endpoint = Endpoint(domain_id, f"a_{unique}")
            client = StoreClient(endpoint, key=None)
            try:
                client.connect(TIMEOUT)
                client.ensure_topic("only_in_a", 1)
            finally:
                client.close()
                endpoint.close()
            in_a = scrape(url_a)
            in_b = scrape(url_b)
            assert value(in_a, "dcps_store_requests_total", kind="ensure_topic", result="ok") == 1
            assert value(in_a, "dcps_store_topic_elements", topic="only_in_a") == 0
            assert ("dcps_store_topic_elements", (("topic", "only_in_a"),)) in in_a
            assert value(in_b, "dcps_store_requests_total", kind="ensure_topic", result="ok") == 0
            assert ("dcps_store_topic_elements", (("topic", "only_in_a"),)) not in in_b
        assert a.metrics_url is None
        with pytest.raises(urllib.error.URLError, match="refused"):
            urllib.request.urlopen(url_a, timeout=2)  # stopped with the store

    def test_authentication_failures_are_counted(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """Requests sealed with another key show in dcps_store_auth_failures_total, as
        Store.auth_drops() counts them."""
        key = write_key_file(tmp_path / "ns.key")
        with Store(
            tmp_path / "s",
            domain_id=domain_id,
            namespace=namespace,
            sync=SyncMode.NORMAL,
            metrics_port=0,
            key=key,
        ) as store:
            assert store.metrics_url is not None
            endpoint = Endpoint(domain_id, namespace)
            stranger = StoreClient(
                endpoint, key=write_key_file(tmp_path / "other.key"), request_timeout=0.5
            )
            try:
                stranger._incarnations = {0: (store.incarnation, 0)}  # as if it knew the store
                for _ in range(3):
                    with pytest.raises(DcpsTimeoutError):  # dropped: never answered
                        stranger.ping(timeout=1.0)
            finally:
                stranger.close()
                endpoint.close()
            drops = eventually(
                lambda: sum(store.auth_drops().values()) >= 3 and store.auth_drops(),
                TIMEOUT,
                "three dropped requests",
            )
            m = scrape(store.metrics_url)
            for reason, count in drops.items():
                label = reason.name.lower()
                assert ("dcps_store_auth_failures_total", (("reason", label),)) in m
                assert value(m, "dcps_store_auth_failures_total", reason=label) == count

    def test_a_bad_metrics_port_is_refused(self, tmp_path: Path, domain_id: int) -> None:
        """A port outside 0..65535 is a BadParameterError naming it, before anything starts."""
        with pytest.raises(BadParameterError, match="metrics_port"):
            Store(tmp_path / "s", domain_id=domain_id, metrics_port=70000)
