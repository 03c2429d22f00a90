"""The store's lifecycle and command line: no threads before start, handlers restored, one CLI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dcps import AlreadyClosedError
from dcps.store import Store, SyncMode, run_store
from dcps.store._service import StoreState


class TestLifecycle:
    def test_constructing_starts_no_thread(self, tmp_path: Path, domain_id: int) -> None:
        """``Store(...)`` opens the log only; ``start()`` starts the threads, ``close()`` ends."""
        before = set(threading.enumerate())
        store = Store(tmp_path / "s", domain_id=domain_id, sync=SyncMode.NORMAL)
        try:
            assert set(threading.enumerate()) == before
            assert store.state is StoreState.CREATED
            assert not store.closed
            assert store.start() is store
            assert store.state is StoreState.SERVING
            assert any(t.name == "dcps-store" for t in threading.enumerate())
        finally:
            store.close()
        assert store.closed
        assert not any(t.name.startswith("dcps-store") for t in set(threading.enumerate()) - before)
        with pytest.raises(AlreadyClosedError):
            store.start()

    def test_run_store_restores_signal_handlers(self, tmp_path: Path, domain_id: int) -> None:
        """run_store's SIGINT/SIGTERM handlers are replaced by the previous ones when it returns."""

        def mine(*_: object) -> None:
            pass

        old = {s: signal.signal(s, mine) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            # on_ready raises SIGTERM at ourselves: run_store's handler stops it
            run_store(
                tmp_path / "s",
                domain_id=domain_id,
                sync=SyncMode.NORMAL,
                on_ready=lambda _: os.kill(os.getpid(), signal.SIGTERM),
            )
            assert signal.getsignal(signal.SIGINT) is mine
            assert signal.getsignal(signal.SIGTERM) is mine
        finally:
            for s, handler in old.items():
                signal.signal(s, handler)


class TestOneCommandLine:
    @pytest.mark.parametrize(
        "command", [["-m", "dcps.store"], ["-m", "dcps", "store"]], ids=["module", "dcps"]
    )
    def test_both_entry_points_offer_the_same_flags(self, command: list[str]) -> None:
        """``python -m dcps.store`` and ``dcps store`` are one command with one set of flags."""
        env = dict(os.environ, COLUMNS="200")
        out = subprocess.run(
            [sys.executable, *command, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            check=True,
        ).stdout
        for flag in ("--data", "--domain", "--namespace", "--sync", "--partitions", "--share",
                     "--fetch-threads"):  # fmt: skip
            assert flag in out
