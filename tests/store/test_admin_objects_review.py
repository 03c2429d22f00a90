"""Review of `dcps durables|queues|maps`: what a crash, a large store or a raw participant
does to the admin commands (real store processes, raw cyclonedds where it attacks)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from dcps import OutOfResourcesError
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.durables import DurableSubscriber
from dcps.wire import _admin
from dcps.wire._admin_objects import DurableChannelReport, DurableReport, DurablesReport
from tests.support.cli import cli_env, run_dcps
from tests.support.peers import PEERS_DIR
from tests.support.peers.channels_types import Msg
from tests.support.store_process import StoreProcess

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
