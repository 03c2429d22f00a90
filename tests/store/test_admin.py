"""The store admin commands on a real store process: topics, groups (list, describe, reset,
delete) and store status, run as `python -m dcps ...` like a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber, OrderBy
from idl import type_identity
from tests.support.cli import ROOT, cli_env, run_dcps
from tests.support.peers.channels_types import Msg, receive_n
from tests.support.waiting import eventually

TIMEOUT = 30.0


class StoreProcess:
    """``python -m dcps -v store ...`` in a child process; its stderr goes to a file."""

    def __init__(self, data: Path, domain: int, namespace: str, *extra: str) -> None:
        self.data = data
        self.log_path = data.parent / f"{data.name}.stderr"
        self._stderr = self.log_path.open("w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "dcps", "-v", "store", "--data", str(data),
             "--domain", str(domain), "--namespace", namespace, "--sync", "normal", *extra],
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=cli_env(),
            cwd=ROOT,
        )  # fmt: skip
        assert self.proc.stdout is not None
        self.ready = self.proc.stdout.readline()
        if not self.ready.startswith("dcps store ready"):
            self.stop()
            raise AssertionError(f"the store did not start: {self.ready!r}\n{self.log()}")

    @property
    def metrics_url(self) -> str:
        return self.ready.split("metrics=")[1].strip()

    def log(self) -> str:
        return self.log_path.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        self._stderr.close()


@pytest.fixture
def store_proc(tmp_path: Path, domain_id: int, namespace: str) -> Iterator[StoreProcess]:
    store = StoreProcess(tmp_path / "store", domain_id, namespace, "--metrics-port", "0")
    try:
        yield store
    finally:
        store.stop()


class Admin:
    """Runs `python -m dcps ARGS --domain D --namespace NS --json` and parses the JSON."""

    def __init__(self, domain: int, namespace: str) -> None:
        self.where = ["--domain", str(domain), "--namespace", namespace]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_dcps(*args, *self.where)

    def json(self, *args: str) -> Any:
        done = self.run(*args, "--json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)


@pytest.fixture
def admin(domain_id: int, namespace: str) -> Admin:
    return Admin(domain_id, namespace)


class Clients:
    """Publishers and subscribers on the test's namespace, closed afterwards."""

    def __init__(self, domain: int, namespace: str) -> None:
        self.kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
        self.opened: list[Any] = []

    def pub(self, topic: ChannelledTopic, channel: int) -> ChannelPublisher[Msg]:
        p: ChannelPublisher[Msg] = ChannelPublisher(
            topic, order_by=OrderBy.fixed(channel), **self.kw
        )
        self.opened.append(p)
        return p

    def sub(self, topic: ChannelledTopic, group: str) -> ChannelSubscriber[Msg]:
        s: ChannelSubscriber[Msg] = ChannelSubscriber(topic, group=group, **self.kw)
        self.opened.append(s)
        return s

    def close(self, entity: Any) -> None:
        self.opened.remove(entity)
        entity.close()

    def close_all(self) -> None:
        for entity in reversed(self.opened):
            entity.close()


@pytest.fixture
def clients(domain_id: int, namespace: str) -> Iterator[Clients]:
    made = Clients(domain_id, namespace)
    try:
        yield made
    finally:
        made.close_all()


def publish(clients: Clients, topic: ChannelledTopic, channel: int, count: int) -> None:
    pub = clients.pub(topic, channel)
    futures = [pub.publish(Msg(channel, i, "x" * 10)) for i in range(count)]
    pub.flush()
    for f in futures:
        assert f.result(TIMEOUT) is not None
    clients.close(pub)


def consume(clients: Clients, topic: ChannelledTopic, group: str, count: int) -> list[Any]:
    """Join ``group``, receive ``count`` elements, commit them all, leave."""
    sub = clients.sub(topic, group)
    got = receive_n(sub, count, TIMEOUT)
    last: dict[int, Any] = {}
    for element in got:
        last[element.position.channel] = element.position
    sub.commit(last)
    clients.close(sub)
    return got


class TestDescribe:
    def test_groups_describe_reports_lag_as_tail_minus_commit_without_joining(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """`groups describe` gives per channel the committed position, the tail and a lag of
        exactly tail minus committed, and describing a live group does not rebalance it."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2)
        holder = clients.sub(topic, "g")  # the group exists before anything is published
        publish(clients, topic, 0, 10)
        publish(clients, topic, 1, 6)
        got = receive_n(holder, 7, TIMEOUT)
        commits = {}
        for element in got:
            commits[element.position.channel] = element.position
        holder.commit(commits)
        before = admin.json("groups", "describe", topic_name, "g")
        after = admin.json("groups", "describe", topic_name, "g")
        assert after["generation"] == before["generation"]  # no join, no rebalance
        assert [m["name"] for m in after["members"]] == [holder.member]
        assert sorted(after["members"][0]["channels"]) == [0, 1]
        assert after["active"] is True
        tails = {0: 9, 1: 5}
        for c in after["channels"]:
            committed = commits[c["channel"]].offset if c["channel"] in commits else -1
            assert c["committed"] == committed
            assert c["tail"] == tails[c["channel"]]
            assert c["lag"] == c["tail"] - c["committed"]
            assert c["owner"] == holder.member
        assert after["lag"] == 16 - 7
        listed = admin.json("groups", "list", "--topic", topic_name)
        assert [(g["name"], g["lag"], g["active"]) for g in listed] == [("g", 9, True)]

    def test_topics_list_and_describe_show_channels_type_and_time_range(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """`topics list` and `topics describe` give channel count, type identity, element
        counts, size on disk, groups, retention, and each channel's head, tail and times."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=3, retain_consumed=True)
        started = time.time_ns()
        publish(clients, topic, 2, 4)
        listed = {t["name"]: t for t in admin.json("topics", "list")}
        mine = listed[topic_name]
        assert mine["channel_count"] == 3
        assert mine["elements"] == 4
        assert mine["bytes"] > 4 * 10
        assert mine["retention"] == "keep consumed"
        assert mine["type_identity"] == type_identity(Msg)
        described = admin.json("topics", "describe", topic_name)
        channels = {c["channel"]: c for c in described["channels"]}
        assert (channels[2]["head"], channels[2]["tail"], channels[2]["elements"]) == (0, 3, 4)
        assert started <= channels[2]["first_ns"] <= channels[2]["last_ns"] <= time.time_ns()
        assert (channels[0]["tail"], channels[0]["first_ns"]) == (-1, None)
        text = admin.run("topics", "describe", topic_name)
        assert text.returncode == 0, text.stderr
        assert "keep consumed" in text.stdout

    def test_unknown_topic_is_an_error_naming_it(
        self, store_proc: StoreProcess, admin: Admin
    ) -> None:
        """Describing a topic the store lacks exits 1 with the store's error naming it."""
        done = admin.run("topics", "describe", "no_such_topic")
        assert done.returncode == 1
        assert "no_such_topic" in done.stderr
        assert "BadParameterError" in done.stderr

    def test_store_status_names_the_process_and_its_data(
        self, store_proc: StoreProcess, admin: Admin
    ) -> None:
        """`store status` reports the store's share, pid, data directory, uptime and file."""
        (status,) = admin.json("store", "status")
        assert status["pid"] == store_proc.proc.pid
        assert status["share"] == "0/1"
        assert status["coordinates"] is True
        assert Path(status["data_dir"]) == store_proc.data.resolve()
        assert status["uptime_s"] > 0
        assert status["file_bytes"] > 0
        assert status["clients"] >= 1
        assert status["metrics"] == store_proc.metrics_url


class TestReset:
    def test_reset_to_an_offset_takes_effect_for_a_rejoining_member(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """After `groups reset --to-offset 2`, a member joining the group gets offset 2 first."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1, retain_consumed=True)
        clients.close(clients.sub(topic, "g"))
        publish(clients, topic, 0, 6)
        consume(clients, topic, "g", 6)
        assert admin.json("groups", "describe", topic_name, "g")["lag"] == 0
        done = admin.json("groups", "reset", topic_name, "g", "--to-offset", "2")
        assert done["next_offsets"] == {"0": 2}
        described = admin.json("groups", "describe", topic_name, "g")
        assert described["channels"][0]["committed"] == 1
        assert described["lag"] == 4
        again = clients.sub(topic, "g")
        first = receive_n(again, 1, TIMEOUT)[0]
        assert (first.position.offset, first.value.seq) == (2, 2)

    def test_reset_to_tail_skips_the_backlog(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """After `groups reset --to-tail` the lag is 0 and a rejoining member gets only new
        elements."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        clients.close(clients.sub(topic, "g"))
        publish(clients, topic, 0, 5)
        assert admin.json("groups", "describe", topic_name, "g")["lag"] == 5
        done = admin.json("groups", "reset", topic_name, "g", "--to-tail")
        assert done["next_offsets"] == {"0": 5}
        assert admin.json("groups", "describe", topic_name, "g")["lag"] == 0
        again = clients.sub(topic, "g")
        publish(clients, topic, 0, 1)
        first = receive_n(again, 1, TIMEOUT)[0]
        assert first.position.offset == 5

    def test_reset_is_refused_while_the_group_is_active_unless_forced(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """A reset of a group with a member exits 1 naming the member; --force resets it."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        holder = clients.sub(topic, "g")
        publish(clients, topic, 0, 3)
        refused = admin.run("groups", "reset", topic_name, "g", "--to-tail")
        assert refused.returncode == 1
        assert "PreconditionNotMetError" in refused.stderr
        assert holder.member in refused.stderr
        assert "--force" in refused.stderr
        assert admin.json("groups", "describe", topic_name, "g")["lag"] == 3
        forced = admin.json("groups", "reset", topic_name, "g", "--to-tail", "--force")
        assert forced["next_offsets"] == {"0": 3}
        assert admin.json("groups", "describe", topic_name, "g")["lag"] == 0

    def test_reset_needs_exactly_one_target(self, admin: Admin) -> None:
        """`groups reset` without a --to-* option (or with two) is a usage error."""
        for extra in ([], ["--to-head", "--to-tail"]):
            done = admin.run("groups", "reset", "t", "g", *extra)
            assert done.returncode == 2
            assert "--to-head" in done.stderr


class TestDelete:
    def test_delete_removes_the_group_and_a_second_delete_fails(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """`groups delete` removes an idle group (gone from `groups list`); deleting it again
        exits 1 saying it does not exist."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        clients.close(clients.sub(topic, "g"))
        clients.close(clients.sub(topic, "h"))
        done = admin.json("groups", "delete", topic_name, "g")
        assert done["existed"] is True
        names = [g["name"] for g in admin.json("groups", "list", "--topic", topic_name)]
        assert names == ["h"]
        again = admin.run("groups", "delete", topic_name, "g")
        assert again.returncode == 1
        assert "no group 'g'" in again.stderr

    def test_delete_of_an_active_group_needs_force(
        self, store_proc: StoreProcess, admin: Admin, clients: Clients, topic_name: str
    ) -> None:
        """Deleting a group with a member is refused unless --force, which removes it."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        clients.sub(topic, "g")
        refused = admin.run("groups", "delete", topic_name, "g")
        assert refused.returncode == 1
        assert "active member" in refused.stderr
        forced = admin.json("groups", "delete", topic_name, "g", "--force")
        assert forced == {"topic": topic_name, "group": "g", "existed": True, "members": 1}
        assert admin.json("groups", "list", "--topic", topic_name) == []


class TestLogging:
    def test_lifecycle_events_are_logged_at_info(
        self, store_proc: StoreProcess, clients: Clients, topic_name: str
    ) -> None:
        """With -v the store logs its start, its share, topic creation, the client's
        connection, the member's join (with the channels moved to it) and its leave."""
        topic = ChannelledTopic(topic_name, Msg, channel_count=2)
        sub = clients.sub(topic, "g")
        member = sub.member
        clients.close(sub)

        def logged() -> str | None:
            text = store_proc.log()
            return text if f"member {member} left" in text else None

        text = eventually(logged, TIMEOUT, "the leave in the store's log")
        for line in (
            "INFO dcps.store: dcps store 0/1 serving",
            "share 0/1 of namespace",
            f"topic '{topic_name}' created (2 channels, type dcps_test.channels.Msg)",
            "connected",
            f"group 'g' of topic '{topic_name}': member {member} joined",
            f"moved {{0-1: - -> {member}}}",
        ):
            assert line in text, line


class TestAuthentication:
    def test_reset_and_delete_need_the_admin_key(
        self,
        tmp_path: Path,
        domain_id: int,
        namespace: str,
        monkeypatch: pytest.MonkeyPatch,
        topic_name: str,
    ) -> None:
        """On a keyed store, describing needs the namespace key only; reset and delete are
        refused without the admin key (naming it) and work with --admin-key-file."""
        from dcps.wire._auth_keys import write_key_file

        key = write_key_file(tmp_path / "ns.key").source
        admin_key = write_key_file(tmp_path / "admin.key").source
        store = StoreProcess(
            tmp_path / "store", domain_id, namespace,
            "--key-file", str(key), "--admin-key-file", str(admin_key),
        )  # fmt: skip
        monkeypatch.setenv("DCPS_STORE_KEY_FILE", str(key))  # clients and commands hold the key
        made = Clients(domain_id, namespace)
        try:
            topic = ChannelledTopic(topic_name, Msg, channel_count=1)
            made.close(made.sub(topic, "g"))
            admin = Admin(domain_id, namespace)
            assert admin.json("groups", "describe", topic_name, "g")["active"] is False
            for verb in (["reset", topic_name, "g", "--to-tail"], ["delete", topic_name, "g"]):
                refused = admin.run("groups", *verb)
                assert refused.returncode == 1
                assert "admin key" in refused.stderr
            admitted = ["--admin-key-file", str(admin_key)]
            assert admin.json("groups", "reset", topic_name, "g", "--to-tail", *admitted)
            assert admin.json("groups", "delete", topic_name, "g", *admitted)["existed"] is True
            assert "no key" not in store.log()  # the store runs keyed
        finally:
            made.close_all()
            store.stop()


class TestShares:
    def test_two_stores_answer_together(
        self, tmp_path: Path, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        """With the channels split over two stores, the commands merge both: `store status`
        lists both shares, `groups describe` every channel's lag, and `groups reset` moves
        the channels of both."""
        stores = [
            StoreProcess(tmp_path / f"s{i}", domain_id, namespace, "--share", f"{i}/2")
            for i in range(2)
        ]
        made = Clients(domain_id, namespace)
        try:
            admin = Admin(domain_id, namespace)
            status = admin.json("store", "status")
            assert [(s["share"], s["pid"]) for s in status] == [
                ("0/2", stores[0].proc.pid),
                ("1/2", stores[1].proc.pid),
            ]
            topic = ChannelledTopic(topic_name, Msg, channel_count=4)
            made.close(made.sub(topic, "g"))
            for channel in range(4):
                publish(made, topic, channel, channel + 1)
            described = admin.json("groups", "describe", topic_name, "g")
            assert [(c["channel"], c["lag"]) for c in described["channels"]] == [
                (0, 1), (1, 2), (2, 3), (3, 4),
            ]  # fmt: skip
            listed = admin.json("topics", "list")
            assert [(t["name"], t["elements"]) for t in listed] == [(topic_name, 10)]
            done = admin.json("groups", "reset", topic_name, "g", "--to-tail")
            assert done["next_offsets"] == {"0": 1, "1": 2, "2": 3, "3": 4}
            assert admin.json("groups", "describe", topic_name, "g")["lag"] == 0
        finally:
            made.close_all()
            for store in stores:
                store.stop()
