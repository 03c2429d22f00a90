"""A replayed genuine announcement of a dead store does not stop a live store (issue 13).

Store announcements are exempt from the freshness window (late joiners get
old ones), so a captured announcement of a store that has died still verifies.
A keyed store confirms with a fresh, sealed ping that a store it would yield
to is alive; the replay is ignored, counted and logged. Real store processes;
the attacker is a raw ``cyclonedds`` participant.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from dcps.channels._client import StoreClient
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._messages import StoreAnnouncement
from dcps.wire._names import ANNOUNCE_QOS
from dcps.wire._transport import Endpoint, live_announcements
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

TIMEOUT = 20.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _unconfirmed_drops(port: int) -> float:
    """The store's ``dcps_store_auth_failures_total{reason="unconfirmed_store"}`` metric."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as page:
        for line in page.read().decode().splitlines():
            if line.startswith('dcps_store_auth_failures_total{reason="unconfirmed_store"}'):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
def key_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A namespace key, named in the environment the store processes inherit."""
    path = str(write_key_file(tmp_path / "ns.key").source)
    monkeypatch.setenv(KEY_FILE_ENV, path)
    return path


@pytest.fixture
def raw(domain_id: int, namespace: str) -> Iterator[tuple[DataReader[Any], DataWriter[Any]]]:
    """A raw participant's reader and writer of the namespace's store announcements."""
    dp = DomainParticipant(domain_id)
    topic = Topic(dp, "dcps_channels_store", StoreAnnouncement)
    partition = Qos(Policy.Partition([namespace]))
    reader = DataReader(Subscriber(dp, qos=partition), topic, qos=ANNOUNCE_QOS)
    writer = DataWriter(Publisher(dp, qos=partition), topic, qos=ANNOUNCE_QOS)
    yield reader, writer
    dp.__del__()


def test_a_replayed_announcement_of_a_dead_store_does_not_stop_a_live_one(
    tmp_path: Path,
    domain_id: int,
    namespace: str,
    key_file: str,
    raw: tuple[DataReader[Any], DataWriter[Any]],
) -> None:
    """Store A's genuine (sealed) announcement, captured and replayed after A died, next to
    store B of the same share (started later, so A looks older): B asks A, gets no answer,
    keeps serving (publishes confirmed before and after), and counts the drop."""
    reader, writer = raw
    a = StoreProcess(tmp_path / "a", domain_id, namespace)
    captured: StoreAnnouncement = eventually(
        lambda: next(iter(live_announcements(reader)), None), TIMEOUT, "store A's announcement"
    )
    assert captured.auth, "a keyed store seals its announcement"
    a.kill()  # kill -9: A's announcement stays "alive" until its lease runs out
    eventually(
        lambda: not live_announcements(reader),
        TIMEOUT,
        "store A's announcement gone with its lease",
    )
    port = _free_port()
    b = StoreProcess(tmp_path / "b", domain_id, namespace, "--metrics-port", str(port))
    endpoint = Endpoint(domain_id, namespace)
    client = StoreClient(endpoint, request_timeout=5.0, key=key_file, admin_key=None)
    try:
        client.connect(TIMEOUT)
        b_incarnation = client.ping(timeout=TIMEOUT).incarnation
        assert b_incarnation != captured.incarnation
        client.ensure_topic("jobs", 1, True, timeout=TIMEOUT)
        assert client.publish_async("jobs", 0, [1], b"x").result(TIMEOUT) is not None
        writer.write(captured)  # the replay: a verified, older announcement of the share

        def counted() -> bool:
            assert b.proc.poll() is None, "store B stopped on the replayed announcement"
            return _unconfirmed_drops(port) >= 1

        eventually(counted, TIMEOUT, "the replay counted")
        assert b.proc.poll() is None, "store B must keep running"
        for i in range(5):  # well past B's share checks (every 0.25 s)
            assert client.publish_async("jobs", 0, [1], bytes([i + 1])).result(TIMEOUT)
        assert client.ping(timeout=TIMEOUT).incarnation == b_incarnation
        assert b.proc.poll() is None
    finally:
        client.close()
        endpoint.close()
        b.kill()


def test_a_live_older_store_of_the_same_share_still_wins(
    tmp_path: Path, domain_id: int, namespace: str, key_file: str
) -> None:
    """The confirmation does not weaken the share check: a live store of the share answers
    the newcomer's ping, so the newcomer exits 1 without printing "ready"."""
    a = StoreProcess(tmp_path / "a", domain_id, namespace)
    try:
        second = subprocess.run(
            [sys.executable, "-m", "dcps.store", "--data", str(tmp_path / "b"),
             "--domain", str(domain_id), "--namespace", namespace, "--sync", "NORMAL"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )  # fmt: skip
        assert second.returncode == 1
        assert "ready" not in second.stdout
        assert "already served" in second.stdout + second.stderr
        assert a.proc.poll() is None
    finally:
        a.kill()
