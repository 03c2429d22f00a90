"""The subscriber's survivors the first two mutation test files left (issue 20, session 9).

What a user sees: where a subscriber (and ``destroy_subscriber_group``) looks for its
store by default, that the network configuration and the keys reach the connection,
and that an idle subscriber costs the store nothing (no tail polls without a receive).
One embedded store serves the module; its namespace has a key and an admin key.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from dcps import BadParameterError, DcpsTimeoutError, NetworkConfig, PreconditionNotMetError
from dcps.channels import ChannelSubscriber, destroy_subscriber_group
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import ADMIN_KEY_FILE_ENV, KEY_FILE_ENV, StoreKey, write_key_file
from dcps.wire._sealing import FROM_ENVIRONMENT
from tests.support.channel_entities import publish
from tests.support.channel_entities import retained_topic as topic
from tests.support.embedded_store import worker_domain
from tests.support.waiting import eventually

TIMEOUT = 5.0


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, worker_id: str) -> Iterator[dict[str, Any]]:
    """One embedded store for the module, its namespace keyed, with an admin key."""
    directory = tmp_path_factory.mktemp("subkeyed")
    key = write_key_file(directory / "ns.key")
    admin = write_key_file(directory / "admin.key")
    domain, namespace = worker_domain(worker_id), f"ns_{uuid.uuid4().hex[:10]}"
    with Store(
        directory / "store",
        domain_id=domain,
        namespace=namespace,
        sync=SyncMode.NORMAL,
        key=key,
        admin_key=admin,
    ) as store:
        yield {
            "store": store,
            "admin": admin,
            "kw": {"domain_id": domain, "namespace": namespace, "store_key": key},
        }


@pytest.fixture
def kw(served: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The keywords that reach the store, its key included (none from the environment)."""
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(ADMIN_KEY_FILE_ENV, raising=False)
    return dict(served["kw"])


@pytest.fixture
def admin(served: dict[str, Any]) -> StoreKey:
    return served["admin"]  # type: ignore[no-any-return]


def requests(store: Store, kind: str) -> float:
    """The requests of ``kind`` the store answered so far (its own metrics)."""
    total = 0.0
    for metric in store.metrics.registry.collect():
        for sample in metric.samples:
            if sample.name == "dcps_store_requests_total" and sample.labels.get("kind") == kind:
                total += sample.value
    return total


def refusal(call: Any) -> str:
    """The message of the DcpsTimeoutError ``call()`` raises ("" if it connects)."""
    try:
        opened = call()
    except DcpsTimeoutError as exc:
        return str(exc)
    if hasattr(opened, "close"):
        opened.close()
    return ""


class TestDefaults:
    def test_a_subscriber_looks_in_namespace_dcps_of_domain_0(
        self, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Without ``domain_id`` and ``namespace``; the refusal names both (no test store
        is there; if a store of the machine's own answers, nothing is asserted)."""
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        message = refusal(
            lambda: ChannelSubscriber(
                topic(topic_name), connect_timeout=timedelta(milliseconds=300)
            )
        )
        if message:
            assert "no dcps store answered in namespace 'dcps' (domain 0)" in message

    def test_destroy_subscriber_group_looks_in_namespace_dcps_of_domain_0(
        self, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.delenv(KEY_FILE_ENV, raising=False)
        message = refusal(
            lambda: destroy_subscriber_group(
                topic(topic_name), "g", connect_timeout=timedelta(milliseconds=300)
            )
        )
        if message:
            assert "no dcps store answered in namespace 'dcps' (domain 0)" in message


class TestConnection:
    def test_the_network_configuration_is_applied(
        self, kw: dict[str, Any], topic_name: str
    ) -> None:
        """An interface this host lacks fails both, naming it (without the configuration
        they would connect)."""
        network = NetworkConfig(interfaces=["nosuch0"])
        publish([], kw, topic(topic_name), range(1))
        with pytest.raises(BadParameterError, match="nosuch0"):
            ChannelSubscriber(topic(topic_name), network=network, **kw)
        with pytest.raises(BadParameterError, match="nosuch0"):
            destroy_subscriber_group(topic(topic_name), "g", network=network, **kw)

    def test_the_store_key_connects_a_subscriber_to_a_keyed_namespace(
        self, kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        (first,) = publish(opened, kw, topic(topic_name), range(1))
        sub = ChannelSubscriber(topic(topic_name), group="g", **kw)
        opened.append(sub)
        element = sub.receive().result(TIMEOUT)
        assert element is not None
        assert element.position == first
        keyless = {**kw, "store_key": FROM_ENVIRONMENT}
        with pytest.raises(DcpsTimeoutError, match=r"no dcps store answered .* within 1 s"):
            ChannelSubscriber(topic(topic_name), connect_timeout=timedelta(seconds=1), **keyless)

    def test_destroying_a_group_takes_the_namespace_key_and_the_admin_key(
        self, kw: dict[str, Any], opened: list, topic_name: str, admin: StoreKey
    ) -> None:
        """Both keys are passed on: with them the group goes; without the admin key the
        store refuses; without the namespace key no store verifies."""
        publish(opened, kw, topic(topic_name), range(1))
        sub = ChannelSubscriber(topic(topic_name), group="g", **kw)
        sub.close()
        with pytest.raises(PreconditionNotMetError):
            destroy_subscriber_group(topic(topic_name), "g", **kw)
        keyless = {**kw, "store_key": FROM_ENVIRONMENT}
        with pytest.raises(DcpsTimeoutError, match=r"no dcps store answered .* within 1 s"):
            destroy_subscriber_group(
                topic(topic_name), "g", admin_key=admin, connect_timeout=1, **keyless
            )
        assert destroy_subscriber_group(topic(topic_name), "g", admin_key=admin, **kw)
        assert not destroy_subscriber_group(topic(topic_name), "g", admin_key=admin, **kw)


class TestIdle:
    def test_a_member_without_a_receive_sends_no_tail_polls(
        self, served: dict[str, Any], kw: dict[str, Any], opened: list, topic_name: str
    ) -> None:
        """The tail poll (a STATE request a second) is for a receive that waits: a member
        that asks for nothing costs the store no request for it."""
        store = served["store"]
        sub = ChannelSubscriber(topic(topic_name), group="g", timeout=timedelta(seconds=30), **kw)
        opened.append(sub)
        eventually(lambda: sub.channels == [0], timeout=TIMEOUT)
        before = requests(store, "state")
        waited = eventually_not(lambda: requests(store, "state") > before, seconds=2.5)
        assert waited, "an idle member polled the store's tails"
        # the other side: a receive that waits polls them (about once a second)
        waiting = sub.receive()
        eventually(lambda: requests(store, "state") > before, timeout=TIMEOUT)
        waiting.cancel()


def eventually_not(condition: Any, seconds: float) -> bool:
    """True when ``condition()`` stayed false for ``seconds`` (checked every 50 ms)."""
    end = time.monotonic() + seconds
    pause = threading.Event()
    while time.monotonic() < end:
        if condition():
            return False
        pause.wait(0.05)
    return True
