"""Several store processes splitting one namespace's channels (``--share I/N``)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from dcps import BadParameterError, DcpsTimeoutError
from dcps.channels import (
    ChannelledTopic,
    ChannelPublisher,
    ChannelSubscriber,
    CommitStatus,
    OrderBy,
    Position,
)
from dcps.store import Share, Store
from tests.support.line_peer import LinePeer as Peer
from tests.support.line_peer import killed_at_exit
from tests.support.peers import PEERS_DIR
from tests.support.peers.channels_types import Msg, receive_n, wait_until

pytestmark = pytest.mark.multiprocess

PEER = PEERS_DIR / "channels_split_peer.py"
TIMEOUT = 30.0


@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    """Child processes killed at the end of the test."""
    with killed_at_exit() as started:
        yield started


def store_args(data: Path, domain_id: int, namespace: str, share: str) -> list[str]:
    """The command line of a store process serving ``share``."""
    return ["-m", "dcps.store", "--data", str(data), "--domain", str(domain_id),
            "--namespace", namespace, "--share", share, "--sync", "NORMAL"]  # fmt: skip


def start_store(peers: list[Peer], data: Path, domain_id: int, namespace: str, share: str) -> Peer:
    """Run a store process for ``share`` and wait until it serves."""
    return start_stores(peers, [data], domain_id, namespace, [share])[0]


def start_stores(
    peers: list[Peer], dirs: list[Path], domain_id: int, namespace: str, shares: list[str]
) -> list[Peer]:
    """Run one store process per share (all at once) and wait until they all serve."""
    started = [
        Peer(store_args(d, domain_id, namespace, s)) for d, s in zip(dirs, shares, strict=True)
    ]
    peers.extend(started)
    for peer in started:
        peer.wait_line(lambda line: line.startswith("dcps store ready"))
    return started


def stored(data: Path) -> dict[int, list[tuple[int, int]]]:
    """``{channel: [(offset, seq), ...]}`` of a store's file, read with plain SQLite."""
    db = sqlite3.connect(f"file:{(data / 'channels.db').resolve()}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT channel, first_offset, sizes, data FROM batches ORDER BY 1, 2"
        ).fetchall()
    finally:
        db.close()
    out: dict[int, list[tuple[int, int]]] = {}
    for channel, first, sizes, data in rows:  # one row per batch (docs/store-format.md)
        pos = 0
        for i, (size,) in enumerate(struct.iter_unpack("<i", sizes)):
            out.setdefault(channel, []).append(
                (first + i, Msg.deserialize(data[pos : pos + size]).seq)
            )
            pos += size
    return out


def member_peer(
    peers: list[Peer], domain_id: int, namespace: str, topic: str, channels: int
) -> Peer:
    """A group member (group ``g``) in its own process."""
    peer = Peer([str(PEER), "member", str(domain_id), namespace, topic, str(channels), "g",
                 "30", "50"])  # fmt: skip
    peers.append(peer)
    return peer


def publisher_peer(
    peers: list[Peer], domain_id: int, namespace: str, topic: str, channels: int,
    per_channel: int, rate: float,
) -> Peer:  # fmt: skip
    """A publisher process with one fixed-channel publisher per channel."""
    which = ",".join(str(c) for c in range(channels))
    peer = Peer([str(PEER), "publish", str(domain_id), namespace, topic, str(channels), which,
                 str(per_channel), str(rate)])  # fmt: skip
    peers.append(peer)
    return peer


def received(members: list[Peer]) -> set[int]:
    """Every seq the member processes printed as received."""
    return {seq for m in members for _, _, seq in m.records("got")}


class TestShares:
    def test_share_text_and_rule(self) -> None:
        """A share parses from "I/N" and serves exactly the channels c with c % N == I."""
        share = Share.of("1/3")
        assert share == Share(1, 3) == Share.of((1, 3))
        assert str(share) == "1/3"
        assert [c for c in range(9) if share.serves(c)] == [1, 4, 7]
        assert Share().coordinates
        assert not share.coordinates

    @pytest.mark.parametrize("text", ["3/2", "2/2", "0/0", "-1/2", "1", "a/b", "1/2/3"])
    def test_bad_share_text_refused(self, text: str) -> None:
        """Shares outside 0 <= index < count, or not written I/N, raise BadParameterError."""
        with pytest.raises(BadParameterError, match="index/count"):
            Share.of(text)

    def test_store_with_bad_share_creates_nothing(self, tmp_path: Path, domain_id: int) -> None:
        """``Store(share=(3, 2))`` raises before creating its data directory."""
        with pytest.raises(BadParameterError, match="0 <= index < count"):
            Store(tmp_path / "data", domain_id=domain_id, share=(3, 2))
        assert not (tmp_path / "data").exists()

    def test_store_process_refuses_bad_share(self, tmp_path: Path, domain_id: int) -> None:
        """``python -m dcps.store --share 3/2`` exits with a usage error naming it."""
        result = subprocess.run(
            [sys.executable, *store_args(tmp_path / "d", domain_id, "x", "3/2")],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 2
        assert "3/2" in result.stderr
        assert not (tmp_path / "d").exists()

    def test_cli_documents_and_checks_share(self, tmp_path: Path) -> None:
        """``dcps store --help`` documents --share; ``dcps store --share 3/2`` is refused."""
        run = [sys.executable, "-m", "dcps", "store"]
        wide = dict(os.environ, COLUMNS="200")
        helped = subprocess.run(
            [*run, "--help"], capture_output=True, text=True, timeout=60, env=wide, check=True
        )
        assert "--share" in helped.stdout
        assert "c % N == I" in helped.stdout
        bad = subprocess.run([*run, "--data", str(tmp_path / "d"), "--share", "3/2"],
                             capture_output=True, text=True, timeout=60)  # fmt: skip
        assert bad.returncode != 0
        assert "3/2" in bad.stderr


class TestSplitStores:
    @pytest.mark.parametrize("count", [2, 3])
    def test_channels_land_in_their_store_and_flow_to_a_group(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str,
        peers: list[Peer], count: int,
    ) -> None:  # fmt: skip
        """With N store processes each channel is stored only by its store; confirmed = received."""
        channels = 2 * count
        dirs = [tmp_path / f"store{i}" for i in range(count)]
        # everything starts at once: clients wait until every share is announced
        shares = [f"{i}/{count}" for i in range(count)]
        stores = [
            Peer(store_args(d, domain_id, namespace, s)) for d, s in zip(dirs, shares, strict=True)
        ]
        peers.extend(stores)
        members = [member_peer(peers, domain_id, namespace, topic_name, channels) for _ in range(2)]
        publisher = publisher_peer(peers, domain_id, namespace, topic_name, channels, 30, 300)
        for peer in [*stores, *members]:
            peer.wait_line(lambda line: line in ("ready",) or line.startswith("dcps store ready"))
        publisher.wait_line(lambda line: line == "done")
        confirmed = {seq: (c, o) for c, o, seq in publisher.records("confirmed")}
        assert publisher.records("failed") == []
        assert len(confirmed) == 30 * channels
        wait_until(lambda: received(members) >= set(confirmed), TIMEOUT)
        assert received(members) == set(confirmed)  # lost 0, nothing unexpected
        # each element sits in the file of its channel's store, at its confirmed offset
        for i, data in enumerate(dirs):
            rows = stored(data)
            assert set(rows) == {c for c in range(channels) if c % count == i}
            for c, elements in rows.items():
                assert sorted(elements) == sorted(
                    (o, seq) for seq, (cc, o) in confirmed.items() if cc == c
                )

        # both members committed up to the tail of every channel, on every store
        def committed_tails() -> bool:
            last: dict[int, int] = {}
            for m in members:
                for c, o in m.records("committed"):
                    last[c] = max(last.get(c, -1), o)
            return last == dict.fromkeys(range(channels), 29)

        wait_until(committed_tails, TIMEOUT)

    def test_positions_commits_and_seeks_across_three_stores(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """Heads, tails, remaining, commits and seeks (position, time, head) work per channel."""
        start_stores(
            peers,
            [tmp_path / f"s{i}" for i in range(3)],
            domain_id,
            namespace,
            ["0/3", "1/3", "2/3"],
        )
        topic = ChannelledTopic(topic_name, Msg, channel_count=6, retain_consumed=True)
        kw = {"domain_id": domain_id, "namespace": namespace}
        publisher = publisher_peer(peers, domain_id, namespace, topic_name, 6, 10, 500)
        publisher.wait_line(lambda line: line == "done")
        assert len(publisher.records("confirmed")) == 60
        with ChannelSubscriber(topic, group="audit", **kw) as sub:  # type: ignore[arg-type]
            assert sub.channels == list(range(6))
            assert sub.heads() == {c: Position(c, 0) for c in range(6)}
            assert sub.tails() == {c: Position(c, 9) for c in range(6)}
            assert sub.remaining_messages() == 60
            got = receive_n(sub, 60)
            assert sub.remaining_messages() == 0
            for c in range(6):
                mine = [e for e in got if e.channel == c]
                assert [e.position.offset for e in mine] == list(range(10))
                assert [e.value.seq for e in mine] == [c * 1_000_000 + k for k in range(10)]
            results = sub.commit({c: Position(c, 4) for c in range(6)})
            assert {r.status for r in results.values()} == {CommitStatus.COMMITTED}
            assert sub.last_committed() == {c: Position(c, 4) for c in range(6)}
            assert sub.commit(5, Position(5, 3)).status is CommitStatus.ALREADY_COMMITTED
            # seek back on channels of different stores: they are delivered again
            assert sub.seek({1: Position(1, 6), 2: Position(2, 7)}) == {
                1: Position(1, 6),
                2: Position(2, 7),
            }
            assert sub.remaining_messages(1) == 3
            assert sub.remaining_messages() == 5
            again = receive_n(sub, 5)
            assert sorted((e.channel, e.position.offset) for e in again) == [
                (1, 7), (1, 8), (1, 9), (2, 8), (2, 9)
            ]  # fmt: skip
            # seek by accept timestamp on the third store, and to the head (clears the commit)
            stamp = next(e.timestamp for e in got if e.channel == 5 and e.position.offset == 6)
            # resumes strictly after the time: after element 6 (each element of a live
            # batch shows its own time, the batch's plus a microsecond per element)
            assert sub.seek(5, stamp).offset == 6
            assert sub.seek_to_head(4) == {4: Position(4, -1)}
            assert 4 not in sub.last_committed()
            assert sub.remaining_messages(4) == 10
        # the group's commits are kept by the store of each channel
        with ChannelSubscriber(topic, group="audit", **kw) as again_sub:  # type: ignore[arg-type]
            assert again_sub.last_committed(0) == Position(0, 4)
            assert again_sub.last_committed(4) is None

    def test_killed_store_restarts_without_losing_confirmed_elements(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """Store 0/2's channels flow while 1/2 is killed; restarted, no confirmed one is lost."""
        dirs = [tmp_path / "s0", tmp_path / "s1"]
        victim = start_stores(peers, dirs, domain_id, namespace, ["0/2", "1/2"])[1]
        members = [member_peer(peers, domain_id, namespace, topic_name, 4) for _ in range(2)]
        publisher = publisher_peer(peers, domain_id, namespace, topic_name, 4, 0, 100)
        for peer in [*members, publisher]:
            peer.wait_line(lambda line: line == "ready")

        def confirmed_on(channel: int) -> int:
            return sum(1 for c, _, _ in publisher.records("confirmed") if c == channel)

        wait_until(lambda: confirmed_on(1) >= 20, TIMEOUT)
        victim.kill()
        before = {c: confirmed_on(c) for c in range(4)}
        # the surviving store's channels keep being confirmed and delivered
        wait_until(lambda: all(confirmed_on(c) >= before[c] + 40 for c in (0, 2)), TIMEOUT)
        flowing = {seq for c, _, seq in publisher.records("confirmed") if c in (0, 2)}
        wait_until(lambda: received(members) >= flowing, TIMEOUT)
        start_store(peers, dirs[1], domain_id, namespace, "1/2")
        # the restarted store's channels are confirmed again, then the publisher stops
        wait_until(lambda: all(confirmed_on(c) >= before[c] + 20 for c in (1, 3)), TIMEOUT)
        publisher.send("stop")
        publisher.wait_line(lambda line: line == "done", 60)
        confirmed = {seq: (c, o) for c, o, seq in publisher.records("confirmed")}
        failed = publisher.records("failed")
        assert all(c in (1, 3) for c, _ in failed)  # only the killed store's channels failed
        assert {c for c, _ in confirmed.values()} == {0, 1, 2, 3}
        wait_until(lambda: received(members) >= set(confirmed), TIMEOUT)
        for c in (1, 3):  # every confirmed element of the killed store's channels is in its file
            rows = dict(stored(dirs[1])[c])
            assert all(rows.get(o) == seq for seq, (cc, o) in confirmed.items() if cc == c)
        assert set(stored(dirs[0])) == {0, 2}

    def test_one_publisher_keeps_flowing_to_the_running_store(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """A stopped store fills only its own in-flight window: the other store's channels flow."""
        dirs = [tmp_path / "s0", tmp_path / "s1"]
        victim = start_stores(peers, dirs, domain_id, namespace, ["0/2", "1/2"])[1]
        topic = ChannelledTopic(topic_name, Msg, channel_count=4)
        kw = {"domain_id": domain_id, "namespace": namespace, "max_in_flight": 1}
        timeout = timedelta(seconds=8)
        # a batch per publish, sent by publish itself, and default batching, sent by the
        # linger thread: both paths must skip the stopped store's full window
        eager = ChannelPublisher(topic, batch_count=1, timeout=timeout, **kw)
        lingering = ChannelPublisher(topic, timeout=timeout, **kw)
        try:
            by_store: dict[int, list[Msg]] = {0: [], 1: []}
            for k in range(64):
                by_store[eager.channel_of(Msg(k, 0)) % 2].append(Msg(k, 0))
            for pub in (eager, lingering):  # both stores answer
                assert pub.publish(by_store[0][0]).result(TIMEOUT) is not None
                assert pub.publish(by_store[1][0]).result(TIMEOUT) is not None
            victim.kill()
            stuck = [pub.publish(by_store[1][1]) for pub in (eager, lingering)]  # windows full
            stuck.append(lingering.publish(by_store[1][2]))  # due, but its window is full
            started = time.monotonic()
            flowing = [pub.publish(by_store[0][1]) for pub in (eager, lingering)]
            positions = [f.result(TIMEOUT) for f in flowing]
            # without a window per store these waited for the stuck requests to time out
            assert time.monotonic() - started < timeout.total_seconds() / 2
            assert all(p is not None and p.channel % 2 == 0 for p in positions)
            for future in stuck:
                with pytest.raises(DcpsTimeoutError):
                    future.result(TIMEOUT)
        finally:
            for pub in (eager, lingering):
                with contextlib.suppress(DcpsTimeoutError):
                    pub.close()


class TestOwnershipOnEveryStore:
    def test_commits_follow_the_coordinators_assignment_on_both_stores(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str, peers: list[Peer]
    ) -> None:
        """After a rebalance only the new owner's commits count, on both stores."""
        start_stores(peers, [tmp_path / "a", tmp_path / "b"], domain_id, namespace, ["0/2", "1/2"])
        topic = ChannelledTopic(topic_name, Msg, channel_count=4, retain_consumed=True)
        kw = {"domain_id": domain_id, "namespace": namespace}
        with ChannelPublisher(topic, order_by=OrderBy.round_robin(), **kw) as pub:  # type: ignore[arg-type]
            for i in range(8):
                pub.publish(Msg(i, i)).result(TIMEOUT)
        first: ChannelSubscriber[Msg] = ChannelSubscriber(topic, group="g", **kw)  # type: ignore[arg-type]
        try:
            assert first.channels == [0, 1, 2, 3]
            got = receive_n(first, 8)
            last = {e.channel: e.position for e in got}
            with ChannelSubscriber(topic, group="g", **kw) as second:  # type: ignore[arg-type]
                wait_until(lambda: first.channels == [0, 1] and second.channels == [2, 3], TIMEOUT)
                moved = {c: last[c] for c in (2, 3)}  # 2 on store 0/2, 3 on store 1/2
                refused = first.commit(moved)
                assert {r.status for r in refused.values()} == {CommitStatus.UNOWNED}
                accepted = second.commit(moved)
                assert {r.status for r in accepted.values()} == {CommitStatus.COMMITTED}
                kept = first.commit({c: last[c] for c in (0, 1)})
                assert {r.status for r in kept.values()} == {CommitStatus.COMMITTED}
                assert second.last_committed() == moved
        finally:
            first.close()


class TestMisconfiguredShares:
    def test_overlapping_store_refuses_to_start(
        self, tmp_path: Path, domain_id: int, namespace: str, peers: list[Peer]
    ) -> None:
        """A second store for a served share, or with another count, exits with a clear error."""
        start_store(peers, tmp_path / "a", domain_id, namespace, "0/2")
        cases = {"0/2": "already served", "1/3": "same count"}
        late = {
            share: subprocess.Popen(
                [sys.executable, *store_args(tmp_path / share.replace("/", "_"), domain_id,
                                             namespace, share)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )
            for share in cases
        }  # fmt: skip
        for share, proc in late.items():
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 1, err
            assert cases[share] in err
            assert "0/2" in err
            assert "dcps store ready" not in out

    def test_of_two_stores_started_together_for_one_share_one_serves(
        self, tmp_path: Path, domain_id: int, namespace: str, peers: list[Peer]
    ) -> None:
        """Two stores started at once for the same share: the younger exits, the older serves."""
        twins = [Peer(store_args(tmp_path / n, domain_id, namespace, "1/2")) for n in "ab"]
        peers.extend(twins)

        def settled() -> bool:
            return any(t.proc.poll() is not None for t in twins)

        wait_until(settled, TIMEOUT)
        loser = next(t for t in twins if t.proc.poll() is not None)
        winner = next(t for t in twins if t is not loser)
        assert loser.proc.returncode == 1
        assert loser.proc.stderr is not None
        assert "already served" in loser.proc.stderr.read()
        winner.wait_line(lambda line: line.startswith("dcps store ready"))
        assert winner.proc.poll() is None

    def test_client_waits_for_every_share(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """A client refuses to start while a share is missing, naming it."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=4)
        kw = {"domain_id": domain_id, "namespace": namespace}
        with Store(tmp_path / "b", share=(1, 2), **kw):  # type: ignore[arg-type]
            with pytest.raises(DcpsTimeoutError, match="share 0/2"):
                ChannelPublisher(topic, connect_timeout=timedelta(seconds=1.5), **kw)  # type: ignore[arg-type]
            with Store(tmp_path / "a", share=(0, 2), **kw):  # type: ignore[arg-type]
                one = OrderBy.fixed(1)
                with ChannelPublisher(topic, order_by=one, **kw) as pub:  # type: ignore[arg-type]
                    assert pub.publish(Msg(1, 1)).result(TIMEOUT) == Position(1, 0)
