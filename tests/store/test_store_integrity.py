"""Integrity through the store service: one type per topic, one store per share, the topics a
store lets clients create, and one clear line from ``dcps store`` for every file problem.

Real stores (embedded and ``python -m dcps.store`` processes), real files, real DDS.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import idl
from dcps import BadParameterError, IllegalOperationError, PreconditionNotMetError
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber
from dcps.store import Store, SyncMode
from dcps.store._log import STORE_FILE, ChannelLog
from tests.store.conftest import SmallDisk
from tests.support.line_peer import LinePeer, killed_at_exit

TIMEOUT = 10.0
PAGE = 4096


class JobA(idl.Struct, typename="jobs::Job"):
    """The type topic ``jobs`` is created with."""

    id: idl.key[idl.int32]
    name: idl.string


class JobB(idl.Struct, typename="jobs::Job"):
    """Same type name as :class:`JobA`, another structure: its bytes do not decode as JobA."""

    id: idl.key[idl.int32]
    weight: idl.float64
    name: idl.string


class Other(idl.Struct, typename="jobs::Other"):
    """Another type altogether."""

    id: idl.key[idl.int32]


def retained(name: str, cls: type) -> ChannelledTopic:
    """Topic ``name`` of type ``cls`` keeping its elements after they are read."""
    return ChannelledTopic(name, cls, retain_consumed=True)


def stored_payloads(store: Store, topic: str) -> list[bytes]:
    """Every element the store's log holds for ``topic``, channel by channel (the tests'
    topics retain consumed elements, so nothing is trimmed)."""
    out: list[bytes] = []
    for channel in range(store.log.topic(topic).channel_count):
        out += [e.data for e in store.log.fetch(topic, channel, 0, 1000)]
    return out


def store_cli(data: Path, domain_id: int, namespace: str, *flags: str) -> list[str]:
    """The arguments of ``python -m dcps.store`` on ``data``."""
    return ["-m", "dcps.store", "--data", str(data), "--domain", str(domain_id),
            "--namespace", namespace, "--sync", "NORMAL", *flags]  # fmt: skip


def run_cli(args: list[str]) -> subprocess.CompletedProcess[str]:
    """Run a store command that must fail on its own (it never gets to serve)."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, timeout=60, check=False
    )


def assert_one_line_naming(done: subprocess.CompletedProcess[str], path: Path, what: str) -> None:
    """The command failed with one stderr line naming ``path`` and saying ``what``; no trace."""
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert str(path) in lines[0]
    assert re.search(what, lines[0]), lines[0]
    assert "Traceback" not in done.stderr
    assert "ready" not in done.stdout


class TestTypeIdentity:
    def test_a_publisher_of_another_type_is_refused_and_nothing_is_stored(
        self, store: Store, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A publisher of ``jobs`` with type A, then one with type B of the same name: B is
        refused naming the topic and both types, and the store holds only A's elements."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with ChannelPublisher(retained(topic_name, JobA), **kw) as pub:
            for i in range(3):
                pub.publish(JobA(i, f"a{i}")).result(TIMEOUT)
        with pytest.raises(PreconditionNotMetError) as caught:
            ChannelPublisher(ChannelledTopic(topic_name, JobB), **kw)
        message = str(caught.value)
        assert topic_name in message
        assert idl.type_identity(JobA) in message
        assert idl.type_identity(JobB) in message
        stored = stored_payloads(store, topic_name)
        assert sorted(JobA.deserialize(b).name for b in stored) == ["a0", "a1", "a2"]
        assert store.log.topic(topic_name).type_identity == idl.type_identity(JobA)

    def test_a_subscriber_of_another_type_is_refused(
        self, store: Store, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A subscriber whose type differs from the topic's gets the same typed error."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with ChannelPublisher(retained(topic_name, JobA), **kw) as pub:
            pub.publish(JobA(1, "a")).result(TIMEOUT)
        with pytest.raises(PreconditionNotMetError, match=re.escape(topic_name)) as caught:
            ChannelSubscriber(ChannelledTopic(topic_name, Other), group="g", **kw)
        assert idl.type_identity(Other) in str(caught.value)
        assert store.log.groups(topic_name) == []

    def test_the_type_is_kept_across_a_restart(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """The topic's type is in the store file: a restarted store still refuses type B."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with (
            Store(tmp_path, sync=SyncMode.NORMAL, **kw),
            ChannelPublisher(retained(topic_name, JobA), **kw) as pub,
        ):
            pub.publish(JobA(1, "a")).result(TIMEOUT)
        with Store(tmp_path, sync=SyncMode.NORMAL, **kw) as store:
            with pytest.raises(PreconditionNotMetError, match=re.escape(topic_name)):
                ChannelPublisher(ChannelledTopic(topic_name, JobB), **kw)
            with ChannelPublisher(retained(topic_name, JobA), **kw) as pub:
                pub.publish(JobA(2, "b")).result(TIMEOUT)
            assert len(stored_payloads(store, topic_name)) == 2

    def test_topics_configured_on_the_store_pin_their_type(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """``Store(topics=[ChannelledTopic(name, A)])`` refuses type B before anyone publishes."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        topic = ChannelledTopic(topic_name, JobA, channel_count=2)
        with Store(tmp_path, topics=[topic], sync=SyncMode.NORMAL, **kw) as store:
            assert store.log.topic(topic_name).type_identity == idl.type_identity(JobA)
            with pytest.raises(PreconditionNotMetError, match=re.escape(topic_name)):
                ChannelPublisher(ChannelledTopic(topic_name, JobB), **kw)
            assert stored_payloads(store, topic_name) == []


class TestOneStorePerShare:
    def test_an_embedded_store_on_a_served_namespace_raises(
        self, store: Store, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A second embedded Store of a namespace raises at start instead of serving beside
        the first; the process's publishes then go to the store that serves."""
        second = Store(tmp_path / "second", domain_id=domain_id, namespace=namespace)
        with pytest.raises(PreconditionNotMetError, match="already served") as caught:
            second.start()
        assert str(store.data_dir.resolve()) in str(caught.value)
        assert second.closed
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with ChannelPublisher(retained(topic_name, JobA), **kw) as pub:
            pub.publish(JobA(1, "x")).result(TIMEOUT)
        assert len(stored_payloads(store, topic_name)) == 1
        with ChannelLog.in_dir(tmp_path / "second") as log:
            assert [t.name for t in log.topics()] == []

    def test_a_second_cli_store_fails_without_saying_ready(
        self, store: Store, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """``dcps store`` on a namespace already served exits 1 with one line, never "ready"."""
        done = run_cli(store_cli(tmp_path / "second", domain_id, namespace))
        assert done.returncode == 1
        assert "already served" in done.stderr
        assert "Traceback" not in done.stderr
        assert "dcps store ready" not in done.stdout
        assert not store.closed


class TestClientTopics:
    def test_a_store_can_refuse_topic_creation_by_clients(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """With ``allow_client_topics=False`` a client's unknown topic is refused naming topic
        and namespace; the store's configured topics work and nothing else is created."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        known = ChannelledTopic(topic_name, JobA, channel_count=2)
        misspelt = ChannelledTopic(topic_name + "_typo", JobA)
        with Store(
            tmp_path,
            topics=[known],
            allow_client_topics=False,
            sync=SyncMode.NORMAL,
            **kw,
        ) as store:
            with pytest.raises(IllegalOperationError) as caught:
                ChannelPublisher(misspelt, **kw)
            assert misspelt.name in str(caught.value)
            assert namespace in str(caught.value)
            with pytest.raises(IllegalOperationError, match=re.escape(misspelt.name)):
                ChannelSubscriber(misspelt, create=True, **kw)
            # without create=True a subscriber does not even ask to create it
            with pytest.raises(BadParameterError, match=re.escape(misspelt.name)):
                ChannelSubscriber(misspelt, **kw)
            with ChannelPublisher(known, **kw) as pub:
                pub.publish(JobA(1, "a")).result(TIMEOUT)
            assert [t.name for t in store.log.topics()] == [topic_name]

    def test_topics_already_in_the_log_are_served(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """Topics clients created earlier stay usable when creation is turned off."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        topic = retained(topic_name, JobA)
        with Store(tmp_path, sync=SyncMode.NORMAL, **kw), ChannelPublisher(topic, **kw) as pub:
            pub.publish(JobA(1, "a")).result(TIMEOUT)
        with Store(tmp_path, allow_client_topics=False, sync=SyncMode.NORMAL, **kw) as store:
            with ChannelPublisher(topic, **kw) as pub:
                pub.publish(JobA(2, "b")).result(TIMEOUT)
            assert len(stored_payloads(store, topic_name)) == 2

    def test_the_cli_flag_refuses_client_topics(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """``dcps store --no-client-topics`` refuses a client's new topic, naming it."""
        kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
        with killed_at_exit() as peers:
            peer = LinePeer(store_cli(tmp_path, domain_id, namespace, "--no-client-topics"))
            peers.append(peer)
            peer.wait_line(lambda line: line.startswith("dcps store ready"))
            with pytest.raises(IllegalOperationError, match=re.escape(topic_name)):
                ChannelPublisher(retained(topic_name, JobA), **kw)
        with ChannelLog.in_dir(tmp_path) as log:
            assert log.topics() == []


def damage_a_data_page(path: Path) -> None:
    """A store file of a few hundred KiB with 4 KiB of garbage over stored elements."""
    with ChannelLog(path) as log:
        log.ensure_topic("t", 2, retain_consumed=True)
        for i in range(60):
            log.append("t", i % 2, [os.urandom(100) for _ in range(50)])
    raw = path.read_bytes()
    with ChannelLog(path) as log:
        sample = log.fetch("t", 1, 0, 1)[0].data
    page = raw.index(sample[:64]) // PAGE
    with open(path, "r+b") as f:
        f.seek(page * PAGE)
        f.write(os.urandom(PAGE))


class TestCliFileErrors:
    def test_a_damaged_file_gives_one_line_and_no_verify_skips_the_check(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """Garbage over a data page: one line naming the file; ``--no-verify`` starts anyway."""
        path = tmp_path / STORE_FILE
        damage_a_data_page(path)
        before = path.read_bytes()
        done = run_cli(store_cli(tmp_path, domain_id, namespace))
        assert_one_line_naming(done, path, "damaged|corrupt")
        assert path.read_bytes() == before
        with killed_at_exit() as peers:
            peer = LinePeer(store_cli(tmp_path, domain_id, namespace, "--no-verify"))
            peers.append(peer)
            peer.wait_line(lambda line: line.startswith("dcps store ready"))

    @pytest.mark.parametrize("page", [0, 1])
    def test_random_bytes_over_early_pages(
        self, tmp_path: Path, domain_id: int, namespace: str, page: int
    ) -> None:
        """Random bytes over the header or the schema page: one line naming the file."""
        path = tmp_path / STORE_FILE
        damage_a_data_page(path)
        with open(path, "r+b") as f:
            f.seek(page * PAGE)
            f.write(os.urandom(PAGE))
        assert_one_line_naming(run_cli(store_cli(tmp_path, domain_id, namespace)), path, ".")

    def test_data_under_a_regular_file(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """``--data`` below a regular file: one line naming it, the file untouched."""
        afile = tmp_path / "plain"
        afile.write_text("x")
        done = run_cli(store_cli(afile / "data", domain_id, namespace))
        assert_one_line_naming(done, afile, "regular file")
        assert afile.read_text() == "x"
        done = run_cli(store_cli(afile, domain_id, namespace))
        assert_one_line_naming(done, afile, "not a directory")

    def test_a_read_only_data_dir(
        self, small_disk: SmallDisk, domain_id: int, namespace: str
    ) -> None:
        """A healthy store on a read-only filesystem: one line saying read-only, not corrupt."""
        with ChannelLog.in_dir(small_disk.path) as log:
            log.ensure_topic("t", 1)
        small_disk.remount("ro")
        try:
            done = run_cli(store_cli(small_disk.path, domain_id, namespace))
            assert_one_line_naming(done, small_disk.path, "read-only")
            assert "corrupt" not in done.stderr
        finally:
            small_disk.remount("rw")

    def test_a_full_disk_at_creation(
        self, small_disk: SmallDisk, domain_id: int, namespace: str
    ) -> None:
        """Creating a store on a full disk: one line saying so, naming the path."""
        small_disk.fill()
        data = small_disk.path / "new"
        done = run_cli(store_cli(data, domain_id, namespace))
        assert_one_line_naming(done, data, "disk is full")
        assert "OutOfResourcesError" in done.stderr
