"""Drive a DDS peer process (``tests/peers/dds_peer.py``) from a test."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.waiting import eventually

PEER = Path(__file__).parent / "peers" / "dds_peer.py"


class Peer:
    """A writer in another process; each call waits for the peer's answer."""

    def __init__(self, domain_id: int, topic_name: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(PEER), str(domain_id), topic_name],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )

    def call(self, op: str, **args: Any) -> Any:
        """Run one command in the peer and return its result."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"peer exited (code {self.process.wait()}) during {op}")
        answer = json.loads(line)
        if "error" in answer:
            raise RuntimeError(f"peer failed {op}: {answer['error']}")
        return answer["ok"]

    def start_writer(
        self, qos: dict[str, Any], *readers: Any, partitions: list[str] | None = None
    ) -> str:
        """Create the peer's writer and wait until it and each of ``readers`` match both ways.

        Waiting on both sides matters: a reader that has not yet discovered the
        writer drops what it sends (volatile data is not repaired later).
        """
        guid: str = self.call("writer", qos=qos, partitions=partitions)
        if readers:
            self.call("wait_readers", count=len(readers))
        for reader in readers:
            eventually(
                lambda r=reader: guid in r.matched_publication_guids,
                timeout=20,
                what="reader matching the peer's writer",
            )
        return guid

    def kill(self) -> None:
        """Kill the peer the hard way (SIGKILL): no goodbye on the wire."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def close(self) -> None:
        """Ask the peer to exit cleanly; kill it if it does not."""
        if self.process.poll() is None:
            try:
                self.call("exit")
                self.process.wait(timeout=10)
            except Exception:
                self.kill()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
