"""C peers on Debian's Cyclone DDS, built at test time with idlc + gcc (cached per source)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.support.peers import PEERS_DIR
from tests.support.waiting import eventually


def build_c_peer(
    exe: str, idl_files: tuple[str, ...], c_source: str, *, type_info: bool = False
) -> Path:
    """Compile ``PEERS_DIR/c_source`` with the C code idlc generates for ``idl_files``.

    Built without XTypes type information (``idlc -t``) unless ``type_info``:
    Debian's Cyclone DDS is older than the PyPI one, and endpoints then match on
    topic and type name. A peer whose type a dcps process must look up over
    XTypes (the durability service) needs ``type_info=True``.
    Skips the test when idlc, gcc or the Cyclone DDS C headers are missing.
    """
    idlc, gcc = shutil.which("idlc"), shutil.which("gcc")
    if idlc is None or gcc is None:
        pytest.skip("C peers need idlc and gcc (apt-get install cyclonedds-tools gcc)")
    sources = (*idl_files, c_source)
    digest = hashlib.sha256(b"".join((PEERS_DIR / s).read_bytes() for s in sources)).hexdigest()
    suffix = "-ti" if type_info else ""
    build = Path(tempfile.gettempdir()) / f"dcps-cpeer-{exe}-{digest[:16]}{suffix}"
    build.mkdir(exist_ok=True)
    binary = build / exe
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers build once
        if not binary.exists():
            for idl_file in idl_files:
                flags = [] if type_info else ["-t"]
                _run([idlc, *flags, "-o", str(build), str(PEERS_DIR / idl_file)])
            generated = [str(build / f.replace(".idl", ".c")) for f in idl_files]
            tmp = build / f"{exe}.tmp"
            source = str(PEERS_DIR / c_source)
            _run([gcc, "-O1", "-o", str(tmp), "-I", str(build), source, *generated, "-lddsc"])
            os.replace(tmp, binary)
    return binary


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        if "dds/dds.h" in proc.stderr or "lddsc" in proc.stderr:
            pytest.skip(f"Cyclone DDS C development files missing: {proc.stderr.strip()}")
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


LIFECYCLE_PEER = ("lifecycle_peer", ("reading.idl",), "lifecycle_peer.c")
#: The TRANSIENT/PERSISTENT C writer of the durability interop test (built with type_info).
DURABILITY_PEER = ("durability_peer", ("reading.idl",), "durability_peer.c")


class CReader:
    """``lifecycle_peer read``: a C reader whose samples (JSON lines) a thread collects."""

    def __init__(self, binary: Path, domain_id: int, topic_name: str) -> None:
        self.process = subprocess.Popen(
            [str(binary), "read", str(domain_id), topic_name],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.samples: list[dict[str, Any]] = []
        self.matched = 0  # the reader's current count of matched writers
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._pump, daemon=True)
        self._thread.start()
        if not self._ready.wait(20):
            self.close()
            raise AssertionError(f"the C reader did not start: {self._stderr()}")

    def _pump(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.strip() == "READY":
                self._ready.set()
            elif line.startswith("{"):
                event = json.loads(line)
                if "matched" in event:
                    self.matched = event["matched"]
                else:
                    self.samples.append(event)

    def _stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()

    def wait_matched(self, count: int = 1, timeout: float = 20.0) -> None:
        """Wait until the C reader matches ``count`` writers."""
        eventually(lambda: self.matched >= count, timeout, f"C reader matching {count} writer(s)")

    def states(self, sensor: int) -> list[str]:
        """Instance states of ``sensor``'s samples taken so far, in order."""
        return [s["state"] for s in list(self.samples) if s["sensor"] == sensor]

    def wait_for_state(self, sensor: int, state: str, timeout: float = 20.0) -> list[str]:
        """Wait until a sample of ``sensor`` in ``state`` arrived; return ``sensor``'s states."""
        try:
            eventually(lambda: state in self.states(sensor), timeout, f"sensor {sensor} {state}")
        except AssertionError as exc:
            raise AssertionError(f"C reader: {exc}; it saw {self.states(sensor)}") from None
        return self.states(sensor)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()


class CWriter:
    """``lifecycle_peer write``: a C writer run one command at a time."""

    def __init__(
        self, binary: Path, domain_id: int, topic_name: str, *, autodispose: bool, lease: float
    ) -> None:
        self.process = subprocess.Popen(
            [
                str(binary),
                "write",
                str(domain_id),
                topic_name,
                "1" if autodispose else "0",
                str(int(lease * 1000)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        if self._line() != "READY":
            raise AssertionError("the C writer did not start")

    def _line(self) -> str:
        assert self.process.stdout is not None
        return self.process.stdout.readline().strip()

    def call(self, command: str) -> None:
        """Run one command (``write 1 2.0``, ``dispose 1``, ``close``...); raise if it failed."""
        assert self.process.stdin is not None
        self.process.stdin.write(command + "\n")
        self.process.stdin.flush()
        answer = self._line()
        if answer != "OK":
            raise AssertionError(f"C writer: {command!r} answered {answer!r}")

    def kill(self) -> None:
        """SIGKILL: no goodbye on the wire."""
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
