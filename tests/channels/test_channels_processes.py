"""Channels with the store and group members in separate processes, killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import BadParameterError
from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    Element,
    OrderBy,
    Position,
)
from dcps.store import Store
from tests.support.line_peer import LinePeer as Peer
from tests.support.line_peer import killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.channels_types import Msg, receive_n, wait_until

pytestmark = pytest.mark.multiprocess

PEERS = PEERS_DIR
TIMEOUT = 20.0


@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


def start_store(peers: list[Peer], data: Path, domain_id: int, namespace: str) -> Peer:
    """Run ``python -m dcps.store`` and wait until it serves."""
    peer = Peer(
        [
            "-m",
            "dcps.store",
            "--data",
            str(data),
            "--domain",
            str(domain_id),
            "--namespace",
            namespace,
            "--sync",
            "FULL",
        ]
    )
    peers.append(peer)
    peer.wait_line(lambda line: line.startswith("dcps store ready"))
    return peer


class TestStoreRestart:
    def test_kill_9_store_keeps_confirmed_elements_and_commits(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """After kill -9 and a restart on the same dir, confirmed elements and commits remain."""
        data = tmp_path / "data"
        topic = ChannelledTopic(topic_name, Msg, channel_count=2, retain_consumed=True)
        kw = {"domain_id": domain_id, "namespace": namespace}
        store = start_store(peers, data, domain_id, namespace)
        with ChannelPublisher(topic, order_by=OrderBy.fixed(0), **kw) as pub:  # type: ignore[arg-type]
            confirmed = [pub.publish(Msg(0, i)).result(TIMEOUT) for i in range(20)]
        assert confirmed[-1] == Position(0, 19)
        member: ChannelSubscriber[Msg] = ChannelSubscriber(
            topic,
            group="g",
            timeout=timedelta(seconds=2),
            **kw,  # type: ignore[arg-type]
        )
        try:
            got = receive_n(member, 8)
            assert member.commit(0, got[-1].position).status is CommitStatus.COMMITTED
            store.kill()
            start_store(peers, data, domain_id, namespace)
            # the member rejoins the restarted store and resumes after its commit
            after = receive_n(member, 12)
            assert [e.value.seq for e in after] == list(range(8, 20))
            assert member.last_committed(0) == Position(0, 7)
        finally:
            member.close()
        with ChannelSubscriber(topic, group="other", **kw) as fresh:  # type: ignore[arg-type]
            assert [e.value.seq for e in receive_n(fresh, 20)] == list(range(20))

    def test_seek_by_timestamp_across_restart(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """Accept timestamps survive a store restart and still drive seeks (seeking to an
        element's own timestamp resumes after it)."""
        data = tmp_path / "data"
        topic = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        kw = {"domain_id": domain_id, "namespace": namespace}
        store = start_store(peers, data, domain_id, namespace)
        with ChannelPublisher(topic, **kw) as pub:  # type: ignore[arg-type]
            for i in range(3):
                pub.publish(Msg(0, i)).result(TIMEOUT)
        with ChannelSubscriber(topic, group="g", **kw) as sub:  # type: ignore[arg-type]
            stamps = [e.timestamp for e in receive_n(sub, 3)]
        store.kill()
        start_store(peers, data, domain_id, namespace)
        with ChannelSubscriber(topic, group="g", **kw) as sub:  # type: ignore[arg-type]
            assert sub.seek(0, stamps[1]) == Position(0, 1)
            again = receive_n(sub, 1)
            assert [e.value.seq for e in again] == [2]
            assert [e.timestamp for e in again] == stamps[2:]
            assert sub.seek(0, stamps[0]) == Position(0, 0)
            again = receive_n(sub, 2)
            assert [e.value.seq for e in again] == [1, 2]
            assert [e.timestamp for e in again] == stamps[1:]


class TestMemberDeath:
    def test_killed_member_channels_resume_from_last_commit(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """A member killed mid-batch loses its channels; the survivor resumes at its commits."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=4)
        kw = {"domain_id": domain_id, "namespace": namespace}
        with Store(tmp_path / "s", **kw) as _store:  # type: ignore[arg-type]
            victim = Peer(
                [
                    str(PEERS / "channels_member.py"),
                    str(domain_id),
                    namespace,
                    topic_name,
                    "4",
                    "g",
                    "1.0",
                    "3",
                ]
            )
            peers.append(victim)
            victim.wait_line(lambda line: line == "ready")
            survivor: ChannelSubscriber[Msg] = ChannelSubscriber(
                topic,
                group="g",
                timeout=timedelta(seconds=30),
                **kw,  # type: ignore[arg-type]
            )
            try:
                wait_until(lambda: len(survivor.channels) == 2, TIMEOUT)
                mine = set(survivor.channels)
                with ChannelPublisher(topic, order_by=OrderBy.round_robin(), **kw) as pub:  # type: ignore[arg-type]
                    for i in range(80):
                        pub.publish(Msg(0, i))
                victim.wait_line(lambda line: line.startswith("committed"))
                victim.kill()
                victim_got: list[tuple[int, int, int]] = []
                for line in victim.lines:
                    kind, *fields = line.split()
                    if kind == "got":
                        victim_got.append((int(fields[0]), int(fields[1]), int(fields[2])))
                victim_channels = {0, 1, 2, 3} - mine
                wait_until(lambda: survivor.channels == [0, 1, 2, 3], TIMEOUT)
                # the victim's commits, as the store recorded them before the kill
                commits = {c: p.offset for c, p in survivor.last_committed().items()}
                assert any(c in victim_channels for c in commits)
                # what the victim committed is done; everything else must reach the survivor
                received = {seq for c, o, seq in victim_got if o <= commits.get(c, -1)}
                got: list[Element[Msg]] = []

                def covered() -> bool:
                    got.extend(survivor.receive(100).result(TIMEOUT))
                    return {e.value.seq for e in got} | received >= set(range(80))

                wait_until(covered, TIMEOUT)
                per_channel: dict[int, list[int]] = defaultdict(list)
                for e in got:
                    per_channel[e.channel].append(e.position.offset)
                for c, offsets in per_channel.items():
                    assert offsets == sorted(offsets)
                    if c in victim_channels:
                        assert offsets[0] == commits.get(c, -1) + 1
                seen = {e.value.seq for e in got}
                assert seen | received == set(range(80))
            finally:
                survivor.close()


class TestGroupsAcrossProcesses:
    def test_two_groups_in_other_processes_each_see_every_element(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """Members of two groups, each in its own process, each receive every element."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=3)
        kw = {"domain_id": domain_id, "namespace": namespace}
        start_store(peers, tmp_path / "data", domain_id, namespace)
        members = []
        for group in ("left", "right"):
            peer = Peer(
                [str(PEERS / "channels_member.py"), str(domain_id), namespace, topic_name,
                 "3", group, "30", "50"]
            )  # fmt: skip
            peers.append(peer)
            members.append(peer)
        for peer in members:
            peer.wait_line(lambda line: line == "ready")
        with ChannelPublisher(topic, **kw) as pub:  # type: ignore[arg-type]
            for i in range(60):
                pub.publish(Msg(i, i))

        def seqs(peer: Peer) -> set[int]:
            return {int(x.split()[3]) for x in list(peer.lines) if x.startswith("got")}

        for peer in members:
            wait_until(lambda peer=peer: seqs(peer) == set(range(60)), TIMEOUT)


class TestStoreProcess:
    def test_sigterm_stops_the_store_cleanly(
        self, tmp_path: Path, domain_id: int, namespace: str, peers: list[Peer]
    ) -> None:
        """``python -m dcps.store`` exits with status 0 on SIGTERM."""
        store = start_store(peers, tmp_path / "data", domain_id, namespace)
        store.proc.send_signal(signal.SIGTERM)
        assert store.proc.wait(TIMEOUT) == 0
        assert (tmp_path / "data" / "channels.db").exists()


class TestBadDataDir:
    def test_corrupt_store_file_refused_by_process(
        self, tmp_path: Path, domain_id: int, namespace: str
    ) -> None:
        """The store process exits with a clear error on a corrupt file and leaves it untouched."""
        data = tmp_path / "data"
        data.mkdir()
        garbage = os.urandom(4096)
        (data / "channels.db").write_bytes(garbage)
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "dcps.store",
                "--data",
                str(data),
                "--domain",
                str(domain_id),
                "--namespace",
                namespace,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode != 0
        assert "corrupt or not a SQLite file" in result.stderr
        assert (data / "channels.db").read_bytes() == garbage

    def test_foreign_and_non_directory_refused(self, tmp_path: Path, domain_id: int) -> None:
        """A foreign SQLite file or a data path that is a file raises BadParameterError."""
        import sqlite3

        data = tmp_path / "data"
        data.mkdir()
        db = sqlite3.connect(data / "channels.db")
        db.execute("CREATE TABLE t (x)")
        db.commit()
        db.close()
        with pytest.raises(BadParameterError, match="something else"):
            Store(data, domain_id=domain_id)
        (tmp_path / "file").write_text("x")
        with pytest.raises(BadParameterError, match="not a directory"):
            Store(tmp_path / "file", domain_id=domain_id)
