"""Review of `dcps durables|queues|maps`: what a crash, a large store or a raw participant
does to the admin commands (real store processes, raw cyclonedds where it attacks)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dcps import AlreadyClosedError, BadParameterError, OutOfResourcesError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableSubscriber, KeyValueMap, QueuePublisher
from dcps.store import Store, SyncMode
from dcps.store._durables import DURABLE_GROUP_PREFIX
from dcps.wire import _admin
from dcps.wire._admin_objects import (
    DeleteDurableRequest,
    DeleteMapRequest,
    DeleteQueueRequest,
    DescribeDurablesRequest,
    DurableChannelReport,
    DurableReport,
    DurablesReport,
    ResetDurableRequest,
)
from dcps.wire._auth import Authenticator, DropReason
from dcps.wire._auth_keys import StoreKey, write_key_file
from dcps.wire._codes import Op, SeekMode
from dcps.wire._messages import Request
from dcps.wire._requests import decode_request
from dcps.wire._sealing import _body, request_kind
from tests.store.test_store_auth import Attacker
from tests.support.cli import cli_env, run_dcps
from tests.support.peers import PEERS_DIR
from tests.support.peers.channels_types import Msg
from tests.support.peers.maps_queues_peer import Counter, Task
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 20.0


def _domain(worker_id: str) -> int:
    base = int(os.environ.get("DCPS_TEST_DOMAIN_BASE", "1"))
    return base + (0 if worker_id == "master" else int(worker_id.removeprefix("gw")))


def _dcps(domain: int, namespace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return run_dcps(
        *args, "--domain", str(domain), "--namespace", namespace, env=cli_env(COLUMNS="200")
    )


class TestResetCrash:
    def test_a_reset_cut_by_a_crash_never_skips_what_it_was_to_redeliver(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        """A durable has acknowledged 0-2 and, out of order, 5. A reset to offset 0 is cut by
        the store dying (as kill -9) between its writes. After a restart the next subscriber
        gets either the reset (0-9) or no reset (3, 4, 6-9), never a mix that redelivers 0-2
        but skips 5, which the administrator asked to see again."""
        domain = _domain(worker_id)
        namespace = f"admc_{uuid.uuid4().hex[:8]}"
        data = tmp_path / "store"
        kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
        topic = ChannelledTopic("t_crash", Msg, channel_count=1, retain_consumed=True)
        crashing = subprocess.Popen(
            [sys.executable, str(PEERS_DIR / "crashing_store.py"),
             "forgetting the acknowledgements",
             "--data", str(data), "--domain", str(domain), "--namespace", namespace,
             "--sync", "NORMAL"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=os.environ.copy(),
        )  # fmt: skip
        try:
            assert crashing.stdout is not None
            assert crashing.stdout.readline().startswith("dcps store ready")
            with DurableSubscriber(topic, "d", window=10, **kw) as sub:
                with ChannelPublisher(topic, **kw) as pub:
                    futures = [pub.publish(Msg(0, i)) for i in range(10)]
                    pub.flush()
                    assert all(f.result(TIMEOUT) is not None for f in futures)
                got = [sub.receive(TIMEOUT) for _ in range(10)]
                sub.ack([e for e in got if e.value.seq in (0, 1, 2, 5)])
            done = _dcps(domain, namespace, "durables", "reset", "t_crash", "d",
                         "--to-offset", "0", "--timeout", "5")  # fmt: skip
            assert done.returncode == 1  # the store died before answering
            assert crashing.wait(TIMEOUT) == 9
        finally:
            if crashing.poll() is None:
                crashing.kill()
            crashing.wait()
            if crashing.stdout is not None:
                crashing.stdout.close()
        store = StoreProcess(data, domain, namespace)
        try:
            with DurableSubscriber(topic, "d", window=10, **kw) as again:
                seqs = []
                while not seqs or seqs[-1] != 9:
                    seqs.append(again.receive(TIMEOUT).value.seq)
            assert seqs in ([0, 1, 2, 3, 4, 5, 6, 7, 8, 9], [3, 4, 6, 7, 8, 9]), seqs
        finally:
            store.kill()


class TestReportSize:
    def test_a_report_above_the_limit_is_refused_by_the_sender_naming_it(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A durables report larger than MAX_REPORT_BYTES (lowered here: the real one is
        64 MiB, reached by ~190 durables of a 4096-channel topic, since `list` carries every
        channel of every durable) is refused where it is made, with OutOfResourcesError naming
        the limit, instead of sent whole for the client to call it a malformed reply."""
        channels = tuple(DurableChannelReport(c, -1, 0, 0, 0, -1) for c in range(4096))
        one = DurableReport("t", "d", "shared", True, "", -1, 0, 0, (), channels)
        assert len(DurablesReport((one,)).to_wire("c", 1).blob) > 256 * 1024
        monkeypatch.setattr(_admin, "MAX_REPORT_BYTES", 256 * 1024)
        with pytest.raises(OutOfResourcesError, match="MAX_REPORT_BYTES = 262144"):
            DurablesReport((one,)).to_wire("c", 1)


class TestEmptyNames:
    @pytest.mark.parametrize(
        "args",
        [
            ("queues", "describe", ""),
            ("maps", "describe", ""),
            ("durables", "describe", "", ""),
            ("topics", "describe", ""),
        ],
    )
    def test_describe_of_an_empty_name_is_a_usage_error_not_a_traceback(
        self, tmp_path: Path, worker_id: str, args: tuple[str, ...]
    ) -> None:
        """`dcps queues describe ''` (a script's unset variable) asked the store for every
        queue and ended in a ValueError traceback; it is refused, naming the argument."""
        domain = _domain(worker_id)
        namespace = f"adme_{uuid.uuid4().hex[:8]}"
        store = StoreProcess(tmp_path / "store", domain, namespace)
        try:
            done = _dcps(domain, namespace, *args)
            assert done.returncode != 0, done.stdout
            assert "Traceback" not in done.stderr
            assert "ValueError" not in done.stderr
            assert "must not be empty" in done.stderr, done.stderr
        finally:
            store.kill()


def _clone_durables(db_path: Path, template: str, count: int) -> None:
    """Add durables ``{template}1`` .. ``{template}{count-1}`` (``d01``, ``d02``, ...),
    copies of ``template`` (same topic, kind, positions), to a stopped store's file: what
    ``count`` subscriptions made."""
    group = DURABLE_GROUP_PREFIX + template
    db = sqlite3.connect(db_path)
    try:
        row = db.execute("SELECT * FROM durables WHERE name = ?", (template,)).fetchone()
        grp = db.execute("SELECT * FROM groups WHERE name = ?", (group,)).fetchone()
        commits = db.execute("SELECT * FROM commits WHERE grp = ?", (group,)).fetchall()
        names = [f"{template}{i}" for i in range(1, count)]
        with db:
            db.executemany(
                "INSERT INTO durables VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(n, *row[1:]) for n in names],
            )
            db.executemany(
                "INSERT INTO groups VALUES (?, ?, ?)",
                [(grp[0], DURABLE_GROUP_PREFIX + n, grp[2]) for n in names],
            )
            db.executemany(
                "INSERT INTO commits VALUES (?, ?, ?, ?, ?)",
                [(c[0], DURABLE_GROUP_PREFIX + n, *c[2:]) for n in names for c in commits],
            )
    finally:
        db.close()


class TestManyDurables:
    def test_list_does_not_grow_with_channels_times_durables(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        """1,000 durables of a 64-channel topic: `durables list --json` carried every channel
        of every durable (5 MB here; 8,000 durables of 128 channels passed MAX_REPORT_BYTES
        while the store answered nobody else for ~100 s). The list stays under 1 KB per
        durable; `describe` of one durable still shows its 64 channels."""
        domain = _domain(worker_id)
        namespace = f"admm_{uuid.uuid4().hex[:8]}"
        data = tmp_path / "store"
        store = StoreProcess(data, domain, namespace)
        try:
            topic = ChannelledTopic("t_many", Msg, channel_count=64)
            DurableSubscriber(topic, "d0", domain_id=domain, namespace=namespace).close()
            store.kill()
            _clone_durables(data / "channels.db", "d0", 1000)
            store = StoreProcess(data, domain, namespace)
            listed = _dcps(domain, namespace, "durables", "list", "--json", "--timeout", "120")
            assert listed.returncode == 0, listed.stderr[-500:]
            durables = json.loads(listed.stdout)
            assert len(durables) == 1000
            assert len(listed.stdout) < 1000 * 1000, len(listed.stdout)
            one = _dcps(domain, namespace, "durables", "describe", "t_many", "d07", "--json",
                        "--timeout", "60")  # fmt: skip
            assert one.returncode == 0, one.stderr[-500:]
            assert len(json.loads(one.stdout)["channels"]) == 64
        finally:
            store.kill()

    def test_a_store_with_many_durables_answers_within_the_default_timeout(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        """1,000 idle durables of a 256-channel topic: `dcps durables describe` of one of them
        answers within the CLI's default 10 s. The durables trim their topic every 50 ms, and
        that trim read every group's commits per channel: the store answered after 30-40 s
        (the file of an older store gets the index when opened, as this one does)."""
        domain = _domain(worker_id)
        namespace = f"admt_{uuid.uuid4().hex[:8]}"
        data = tmp_path / "store"
        store = StoreProcess(data, domain, namespace)
        try:
            topic = ChannelledTopic("t_trim", Msg, channel_count=256)
            DurableSubscriber(topic, "d0", domain_id=domain, namespace=namespace).close()
            store.kill()
            _clone_durables(data / "channels.db", "d0", 1000)
            store = StoreProcess(data, domain, namespace)
            one = _dcps(domain, namespace, "durables", "describe", "t_trim", "d07", "--json")
            assert one.returncode == 0, one.stderr[-500:]
        finally:
            store.kill()


class TestDescribeDurablesRequest:
    def test_channels_flag_is_checked_and_survives_the_wire(self) -> None:
        """DESCRIBE_DURABLES carries whether per-channel positions are wanted in ``flag``
        (0 or 1); any other value is refused naming the field."""
        sent = DescribeDurablesRequest("t", "d", channels=True)
        assert decode_request(sent.to_wire("c", 1)) == sent
        bad = Request(client="c", request_id=1, op=Op.DESCRIBE_DURABLES, topic="t", flag=2)
        with pytest.raises(BadParameterError, match=r"'flag' \(channels\) is 2"):
            decode_request(bad)


class TestForgedAdminRequests:
    def test_deletes_and_resets_sealed_with_the_namespace_key_are_dropped(
        self, tmp_path: Path, domain_id: int, namespace: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A raw participant holding the namespace key (not the admin key) seals
        DELETE_DURABLE, RESET_DURABLE, DELETE_QUEUE and DELETE_MAP with it, as its own kinds
        (the CLI refuses before sending; a forger does not): the store drops all four,
        counted, and the durable, the queue and the map are untouched."""
        keys = (
            str(write_key_file(tmp_path / "ns.key").source),
            str(write_key_file(tmp_path / "admin.key").source),
        )
        with Store(
            tmp_path / "store", domain_id=domain_id, namespace=namespace,
            sync=SyncMode.NORMAL, key=keys[0], admin_key=keys[1],
        ) as store:  # fmt: skip
            monkeypatch.setenv("DCPS_STORE_KEY_FILE", keys[0])  # the clients hold it
            kw: dict[str, Any] = {"domain_id": domain_id, "namespace": namespace}
            topic = ChannelledTopic("t_forge", Msg, channel_count=1, retain_consumed=True)
            with DurableSubscriber(topic, "d", window=5, **kw) as sub:
                with ChannelPublisher(topic, **kw) as pub:
                    assert pub.publish(Msg(0, 0)).result(TIMEOUT) is not None
                sub.ack([sub.receive(TIMEOUT)])
            with QueuePublisher("q_forge", Task, **kw) as qpub:
                qpub.publish(Task(1, "x"))
            with KeyValueMap("m_forge", Counter, **kw) as m:
                m.put("k", Counter(1, "x"))
            # the namespace key, sealing every kind with it (no admin kinds)
            forger = Authenticator(
                StoreKey(Path(keys[0]).read_bytes().strip()), admin_kinds=frozenset()
            )
            attacker = Attacker(domain_id, namespace)
            try:
                before = store.auth_drops()[DropReason.ADMIN_KEY_REQUIRED]
                forged = [
                    DeleteDurableRequest("t_forge", "d", force=True),
                    ResetDurableRequest("t_forge", "d", SeekMode.HEAD, force=True),
                    DeleteQueueRequest("q_forge", force=True),
                    DeleteMapRequest("m_forge"),
                ]
                for i, admin_request in enumerate(forged, start=100):
                    r = admin_request.to_wire(attacker.client_id, i)
                    r.auth = forger.seal(
                        request_kind(admin_request.op), r.client, _body(r),
                        incarnation=store.incarnation,
                    )  # fmt: skip
                    eventually(attacker.request_writer.get_matched_subscriptions, TIMEOUT)
                    attacker.request_writer.write(r)
                eventually(
                    lambda: store.auth_drops()[DropReason.ADMIN_KEY_REQUIRED] == before + 4,
                    TIMEOUT,
                    "4 drops for want of the admin key",
                )
            finally:
                attacker.close()
            (durable,) = store.durables.reports("t_forge", "d")
            assert durable.outstanding == 0  # still there, its acknowledgement kept
            (queue,) = store._queues.reports("q_forge")
            assert queue.stored == 1
            (kv,) = store._maps.reports("m_forge")
            assert kv.keys == 1


class TestForcedDeleteWhileSubscribed:
    def test_an_ack_after_a_forced_delete_says_an_administrator_closed_it(
        self, tmp_path: Path, worker_id: str
    ) -> None:
        """A subscriber holds 5 elements when `dcps durables delete --force` runs. Once it is
        closed, acknowledging them raises AlreadyClosedError naming the administrator's
        delete, not "redelivered after a timeout or restart" (a PreconditionNotMetError that
        sent users looking for a timeout); nothing comes back."""
        domain = _domain(worker_id)
        namespace = f"admf_{uuid.uuid4().hex[:8]}"
        store = StoreProcess(tmp_path / "store", domain, namespace)
        try:
            kw: dict[str, Any] = {"domain_id": domain, "namespace": namespace}
            topic = ChannelledTopic("t_force", Msg, channel_count=1)
            sub: DurableSubscriber[Msg] = DurableSubscriber(topic, "d", window=10, **kw)
            try:
                with ChannelPublisher(topic, **kw) as pub:
                    futures = [pub.publish(Msg(0, i)) for i in range(10)]
                    pub.flush()
                    assert all(f.result(TIMEOUT) is not None for f in futures)
                got = [sub.receive(TIMEOUT) for _ in range(5)]
                done = _dcps(domain, namespace, "durables", "delete", "t_force", "d", "--force")
                assert done.returncode == 0, done.stderr
                eventually(lambda: sub.closed, TIMEOUT, "the subscriber told it was closed")
                with pytest.raises(AlreadyClosedError, match="administrator ran delete"):
                    sub.ack(got)
            finally:
                sub.close()
            listed = _dcps(domain, namespace, "durables", "list", "--json")
            assert json.loads(listed.stdout) == []
        finally:
            store.kill()
