"""Several test hosts on one machine: network namespaces joined by a bridge.

A :class:`Lan` is a "switch" namespace holding a Linux bridge and N host
namespaces, each with one veth interface ``eth0`` (address ``10.213.0.<i+1>/24``,
multicast on, a multicast route) plugged into the bridge. The addresses exist
only inside those namespaces, so nothing reaches a real network. Names carry a
random token, so parallel tests never collide; :meth:`Lan.close` kills the
processes and deletes every namespace (deleting a namespace deletes its links).
Names also carry the test process id, so namespaces left by a test run that was
killed are deleted by the next run (:meth:`Lan.remove_stale`); peer processes
exit by themselves when their stdin (the test) goes away.

Processes run in a host with :meth:`Host.python`; they talk to the test over
JSON lines (stdin commands, stdout events) through :class:`PeerProcess`.
``CYCLONEDDS_URI`` is removed from their environment (the loopback pin of
``conftest.py`` means nothing inside a namespace).

Running this file as a script is the DDS peer program the multi-host tests and
the benchmark start in the namespaces, its network set up with
:class:`dcps._network.NetworkConfig`. Its roles run on dcps entities by default
(``"api": "dcps"``: ``dcps.DomainParticipant``, ``DataWriter``, ``DataReader``);
``"api": "raw"`` runs them on the raw ``cyclonedds`` binding instead, which the
benchmark uses as its reference::

    python tests/netns.py '{"role": "writer", "domain": 3, "topic": "t", "network": {...}}'
"""

import contextlib
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
SUBNET = "10.213.0"
IFNAME = "eth0"


def netns_unavailable_reason() -> str | None:
    """Why namespaces cannot be used here, or ``None`` if they can."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    if os.geteuid() != 0:
        return "creating network namespaces needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    probe = f"dcps-probe-{uuid.uuid4().hex[:8]}"
    result = subprocess.run(
        ["ip", "netns", "add", probe], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        return f"`ip netns add` is not permitted: {result.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return None


def _ip(*args: str, netns: str | None = None) -> None:
    argv = ["ip", *(["-n", netns] if netns else []), *args]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed: {result.stderr.strip()}")


class PeerProcess:
    """A process in a host namespace speaking JSON lines: commands in, events out."""

    def __init__(self, popen: subprocess.Popen[str], stderr_path: Path, label: str) -> None:
        self.popen = popen
        self.label = label
        self.events: list[dict[str, Any]] = []
        self._stderr_path = stderr_path
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            line = line.strip()
            if line:
                try:
                    self._queue.put(json.loads(line))
                except json.JSONDecodeError:
                    self._queue.put({"ev": "text", "text": line})
        self._queue.put(None)

    def send(self, **command: Any) -> None:
        """Send one command (a JSON object) to the process."""
        assert self.popen.stdin is not None
        self.popen.stdin.write(json.dumps(command) + "\n")
        self.popen.stdin.flush()

    def stderr(self) -> str:
        """What the process wrote to stderr so far."""
        try:
            return self._stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def mark(self) -> int:
        """The number of events received so far, for ``expect(..., since=mark)``."""
        return len(self.drain())

    def expect(
        self,
        predicate: Callable[[dict[str, Any]], bool],
        timeout: float = 10.0,
        what: str = "",
        since: int = 0,
    ) -> dict[str, Any]:
        """Wait for the first event from index ``since`` on (seen or arriving) matching."""
        for event in self.events[since:]:
            if predicate(event):
                return event
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                event = self._queue.get(timeout=remaining)
            except queue.Empty:
                break
            if event is None:
                raise AssertionError(
                    f"{self.label} exited (code {self.popen.wait()}) before {what or 'event'};"
                    f" events: {self.events[-10:]}\nstderr: {self.stderr()[-3000:]}"
                )
            self.events.append(event)
            if predicate(event):
                return event
        raise AssertionError(
            f"{self.label}: no {what or 'matching event'} within {timeout} s;"
            f" last events: {self.events[-10:]}\nstderr: {self.stderr()[-3000:]}"
        )

    def drain(self) -> list[dict[str, Any]]:
        """Collect the events that arrived so far without waiting."""
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return self.events
            if event is None:
                return self.events
            self.events.append(event)

    def close(self, timeout: float = 5.0) -> None:
        """Ask the process to exit, then kill it if it does not."""
        if self.popen.poll() is None:
            with contextlib.suppress(OSError, ValueError):
                self.send(op="exit")
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        for stream in (self.popen.stdin, self.popen.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


class Host:
    """One test host: a network namespace with ``eth0`` on the LAN."""

    def __init__(self, lan: "Lan", index: int) -> None:
        self.lan = lan
        self.index = index
        self.name = chr(ord("a") + index)
        self.netns = f"{lan.prefix}-{self.name}"
        self.address = f"{SUBNET}.{index + 1}"
        self.ifname = IFNAME
        self.switch_port = f"p{lan.token}{self.name}"

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        """Run a command in this host and wait for it."""
        return subprocess.run(
            ["ip", "netns", "exec", self.netns, *argv],
            capture_output=True,
            text=True,
            check=False,
            **kwargs,
        )

    def python(self, *args: str, env: dict[str, str] | None = None) -> PeerProcess:
        """Start ``python ARGS`` (this interpreter) in this host, as a :class:`PeerProcess`."""
        child_env = {k: v for k, v in os.environ.items() if k != "CYCLONEDDS_URI"}
        child_env["PYTHONUNBUFFERED"] = "1"
        child_env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])]
        )
        child_env.update(env or {})
        stderr_path = self.lan.workdir / f"{self.name}-{len(self.lan.processes)}.stderr"
        with stderr_path.open("w") as stderr:
            popen = subprocess.Popen(
                ["ip", "netns", "exec", self.netns, sys.executable, *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=child_env,
                cwd=str(REPO),
            )
        process = PeerProcess(popen, stderr_path, f"host {self.name} ({self.address})")
        self.lan.processes.append(process)
        return process

    def peer(self, **config: Any) -> PeerProcess:
        """Start the DDS peer program of this module with ``config`` (see :func:`main`)."""
        return self.python(str(Path(__file__).resolve()), json.dumps(config))

    def link_down(self) -> None:
        """Unplug this host's cable: take its switch port down (``eth0`` loses carrier)."""
        _ip("link", "set", self.switch_port, "down", netns=self.lan.switch)

    def link_up(self) -> None:
        """Plug this host's cable back in."""
        _ip("link", "set", self.switch_port, "up", netns=self.lan.switch)


class Lan:
    """N hosts on one bridged LAN, all in private namespaces; close() removes all."""

    def __init__(self, hosts: int = 2) -> None:
        self.token = uuid.uuid4().hex[:8]
        self.prefix = f"dcps{os.getpid()}-{self.token}"
        self.switch = f"{self.prefix}-sw"
        self.namespaces: list[str] = []
        self.processes: list[PeerProcess] = []
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.hosts: list[Host] = []
        try:
            self._create(hosts)
        except BaseException:
            self.close()
            raise

    def _add_netns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.namespaces.append(name)
        _ip("link", "set", "lo", "up", netns=name)

    @staticmethod
    def remove_stale() -> None:
        """Delete namespaces left by test processes that died (``dcps<pid>-...``, pid gone)."""
        listing = subprocess.run(
            ["ip", "netns", "list"], capture_output=True, text=True, check=False
        ).stdout
        for line in listing.splitlines():
            name = line.split()[0] if line.split() else ""
            head = name.split("-", 1)[0]
            if not head.startswith("dcps") or not head[4:].isdigit():
                continue
            pid = int(head[4:])
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
            except PermissionError:
                pass

    def _create(self, count: int) -> None:
        self.remove_stale()
        self._add_netns(self.switch)
        _ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0", netns=self.switch)
        _ip("link", "set", "br0", "up", netns=self.switch)
        for index in range(count):
            host = Host(self, index)
            self._add_netns(host.netns)
            _ip(
                "link",
                "add",
                IFNAME,
                "netns",
                host.netns,
                "type",
                "veth",
                "peer",
                "name",
                host.switch_port,
                "netns",
                self.switch,
            )
            _ip("link", "set", host.switch_port, "master", "br0", netns=self.switch)
            _ip("link", "set", host.switch_port, "up", netns=self.switch)
            _ip("addr", "add", f"{host.address}/24", "dev", IFNAME, netns=host.netns)
            _ip("link", "set", IFNAME, "multicast", "on", "up", netns=host.netns)
            _ip("route", "add", "224.0.0.0/4", "dev", IFNAME, netns=host.netns)
            self.hosts.append(host)

    def close(self) -> None:
        """Stop every process and delete every namespace (and so every link)."""
        for process in self.processes:
            with contextlib.suppress(Exception):
                process.close(timeout=3.0)
        for name in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, check=False)
        self.namespaces.clear()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "Lan":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@contextlib.contextmanager
def lan(hosts: int = 2) -> Iterator[Lan]:
    """A :class:`Lan` of ``hosts`` hosts, removed on exit even on failure."""
    network = Lan(hosts)
    try:
        yield network
    finally:
        network.close()


def lan_factory() -> Iterator[Callable[[int], Lan]]:
    """Body of a ``make_lan`` fixture: yields ``make(n)``, tears all LANs down; skips without netns.

    Use it as ``yield from lan_factory()`` in a fixture (conftest-free, so test modules
    can own the fixture).
    """
    reason = netns_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    lans: list[Lan] = []

    def make(hosts: int = 2) -> Lan:
        network = Lan(hosts)
        lans.append(network)
        return network

    yield make
    for network in lans:
        network.close()


def local_peer(config: dict[str, Any], workdir: Path) -> PeerProcess:
    """Start the DDS peer program in this (root) namespace, e.g. over loopback."""
    stderr_path = workdir / f"local-{uuid.uuid4().hex[:6]}.stderr"
    env = {k: v for k, v in os.environ.items() if k != "CYCLONEDDS_URI"}
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    with stderr_path.open("w") as stderr:
        popen = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), json.dumps(config)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            cwd=str(REPO),
        )
    return PeerProcess(popen, stderr_path, "local peer")


# --------------------------------------------------------------------------------------------
# The DDS peer program (runs inside a namespace; dcps entities by default, the raw
# cyclonedds binding with "api": "raw").


def _emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def _qos(config: dict[str, Any]) -> Any:
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.util import duration

    policies = [
        Policy.Reliability.Reliable(duration(seconds=1))
        if config.get("reliable", True)
        else Policy.Reliability.BestEffort,
        Policy.Durability.TransientLocal
        if config.get("transient_local", False)
        else Policy.Durability.Volatile,
        Policy.History.KeepLast(config.get("depth", 100)),
    ]
    if not config.get("autodispose", True):
        policies.append(Policy.WriterDataLifecycle(autodispose=False))
    if "lease" in config:
        policies.append(Policy.Liveliness.Automatic(duration(seconds=config["lease"])))
    return Qos(*policies)


_STATES = {16: "ALIVE", 32: "NOT_ALIVE_DISPOSED", 64: "NOT_ALIVE_NO_WRITERS"}


def main(config: dict[str, Any]) -> None:
    """Run one DDS peer: ``role`` is ``writer``, ``reader``, ``sink`` or ``source``.

    Common keys: ``domain``, ``topic``, ``network`` (a NetworkConfig mapping),
    ``lease`` (writer liveliness lease, s), ``reliable``, ``transient_local``, ``depth``,
    ``autodispose``; ``api`` is ``dcps`` (dcps entities, the default for writer and
    reader) or ``raw`` (the cyclonedds binding, the default for the benchmark roles
    sink and source; the benchmark names the api it measures).
    """
    from dataclasses import dataclass

    from cyclonedds.domain import DomainParticipant
    from cyclonedds.idl import IdlStruct
    from cyclonedds.idl.annotations import key
    from cyclonedds.idl.types import int32, int64
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from dcps._network import NetworkConfig

    @dataclass
    class Reading(IdlStruct, typename="dcps_test::Reading"):
        id: int32
        key("id")
        value: int64
        stamp: int64 = 0
        payload: str = ""

    stop = threading.Event()
    commands: queue.Queue[dict[str, Any]] = queue.Queue()

    def read_stdin() -> None:
        for line in sys.stdin:
            if line.strip():
                command = json.loads(line)
                commands.put(command)
                if command.get("op") == "exit":
                    break
        stop.set()

    threading.Thread(target=read_stdin, daemon=True).start()
    role = config["role"]
    if config.get("api", "dcps") == "dcps" and role in ("writer", "reader"):
        _dcps_peer(config, commands, stop)
        return
    if config.get("api") == "dcps" and role in ("sink", "source"):
        _dcps_bench_roles(config, role, commands, stop)
        return

    network = NetworkConfig.from_mapping(config.get("network", {}))
    domain_id = config["domain"]
    domain = network.apply(domain_id)
    participant = DomainParticipant(domain_id, qos=network.participant_qos())
    qos = _qos(config)
    topic = Topic(participant, config["topic"], Reading)

    if role == "writer":
        writer = DataWriter(participant, topic, qos=qos)
        _emit(ev="ready", role=role)
        matched = -1
        while not stop.is_set():
            count = writer.get_publication_matched_status().current_count
            if count != matched:
                matched = count
                _emit(ev="pub_matched", count=count)
            try:
                command = commands.get(timeout=0.02)
            except queue.Empty:
                continue
            op = command["op"]
            if op == "write":
                writer.write(Reading(id=command["key"], value=command["value"]))
            elif op == "dispose":
                writer.dispose(Reading(id=command["key"], value=0))
            elif op == "unregister":
                writer.unregister_instance(Reading(id=command["key"], value=0))
            elif op == "exit":
                break
            _emit(ev="done", op=op, **{k: v for k, v in command.items() if k != "op"})
    elif role == "reader":
        reader = DataReader(participant, topic, qos=qos)
        watch = None
        if config.get("watch_participants"):
            from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsParticipant
            from cyclonedds.qos import Policy

            watch = BuiltinDataReader(participant, BuiltinTopicDcpsParticipant)
        _emit(ev="ready", role=role)
        matched, alive, names = -1, -1, set()
        while not stop.is_set():
            status = reader.get_subscription_matched_status()
            if status.current_count != matched:
                matched = status.current_count
                _emit(ev="sub_matched", count=matched)
            live = reader.get_liveliness_changed_status()
            if live.alive_count != alive:
                alive = live.alive_count
                _emit(ev="liveliness", alive=alive, not_alive=live.not_alive_count)
            for sample in reader.take(N=256):
                info = sample.sample_info
                data = sample.key_sample if not info.valid_data else sample
                _emit(
                    ev="sample",
                    key=data.id,
                    value=data.value if info.valid_data else None,
                    valid=bool(info.valid_data),
                    state=_STATES.get(info.instance_state, "?"),
                )
            if watch is not None:
                for participant_sample in watch.take(N=64):
                    qos_of = participant_sample.qos
                    name = qos_of[Policy.EntityName].name if Policy.EntityName in qos_of else None
                    if name is not None and name not in names:
                        names.add(name)
                        _emit(ev="participant", name=name)
            stop.wait(0.02)
    elif role in ("sink", "source"):
        _bench_roles(config, role, participant, Reading, commands, stop)
    else:
        raise SystemExit(f"unknown role {role!r}")
    del domain


def _dcps_peer(
    config: dict[str, Any], commands: "queue.Queue[dict[str, Any]]", stop: threading.Event
) -> None:
    """The writer and reader roles on dcps entities."""
    import datetime

    import dcps
    import idl
    import qos as q
    from dcps._network import NetworkConfig

    class Reading(idl.Struct, typename="dcps_test::Reading"):
        id: idl.key[idl.int32]
        value: idl.int64
        stamp: idl.int64
        payload: idl.string

    def reading(key: int, value: int = 0) -> Any:
        return Reading(id=key, value=value, stamp=0, payload="")

    network = NetworkConfig.from_mapping(config.get("network", {}))
    participant_qos = (
        q.DomainParticipantQos(q.EntityName(network.participant_name))
        if network.participant_name is not None
        else None
    )
    participant = dcps.DomainParticipant(config["domain"], qos=participant_qos, network=network)
    topic = dcps.Topic(participant, config["topic"], Reading)
    policies: list[Any] = [
        q.Reliability.reliable(datetime.timedelta(seconds=1))
        if config.get("reliable", True)
        else q.Reliability.BEST_EFFORT,
        q.Durability.TRANSIENT_LOCAL
        if config.get("transient_local", False)
        else q.Durability.VOLATILE,
        q.History.keep_last(config.get("depth", 100)),
    ]
    if "lease" in config:
        policies.append(q.Liveliness.automatic(datetime.timedelta(seconds=config["lease"])))
    role = config["role"]
    if role == "writer":
        if not config.get("autodispose", True):
            policies.append(q.WriterDataLifecycle(autodispose_unregistered_instances=False))
        writer = dcps.DataWriter(participant, topic, qos=q.DataWriterQos(*policies))
        _emit(ev="ready", role=role, api="dcps")
        matched = -1
        while not stop.is_set():
            count = writer.publication_matched_status.current_count
            if count != matched:
                matched = count
                _emit(ev="pub_matched", count=count)
            try:
                command = commands.get(timeout=0.02)
            except queue.Empty:
                continue
            op = command["op"]
            if op == "write":
                writer.write(reading(command["key"], command["value"]))
            elif op == "dispose":
                writer.dispose(reading(command["key"]))
            elif op == "unregister":
                writer.unregister_instance(reading(command["key"]))
            elif op == "exit":
                break
            _emit(ev="done", op=op, **{k: v for k, v in command.items() if k != "op"})
        participant.close()
        return

    reader = dcps.DataReader(participant, topic, qos=q.DataReaderQos(*policies))
    watch = None
    if config.get("watch_participants"):
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsParticipant
        from cyclonedds.qos import Policy

        watch = BuiltinDataReader(participant._cyclone, BuiltinTopicDcpsParticipant)
    _emit(ev="ready", role=role, api="dcps")
    matched, alive, names = -1, -1, set()
    while not stop.is_set():
        status = reader.subscription_matched_status
        if status.current_count != matched:
            matched = status.current_count
            _emit(ev="sub_matched", count=matched)
        live = reader.liveliness_changed_status
        if live.alive_count != alive:
            alive = live.alive_count
            _emit(ev="liveliness", alive=alive, not_alive=live.not_alive_count)
        for sample in reader.take(256):
            info = sample.info
            _emit(
                ev="sample",
                key=sample.data.id,
                value=sample.data.value if info.valid_data else None,
                valid=bool(info.valid_data),
                state=InstanceStateName(info.instance_state),
            )
        if watch is not None:
            for participant_sample in watch.take(N=64):
                found = participant_sample.qos
                name = found[Policy.EntityName].name if Policy.EntityName in found else None
                if name is not None and name not in names:
                    names.add(name)
                    _emit(ev="participant", name=name)
        stop.wait(0.02)
    if watch is not None:
        watch.__del__()
    participant.close()


def _dcps_bench_roles(
    config: dict[str, Any],
    role: str,
    commands: "queue.Queue[dict[str, Any]]",
    stop: threading.Event,
) -> None:
    """The benchmark roles (see :func:`_bench_roles`) on dcps entities."""
    import datetime

    import dcps
    import idl
    import qos as q
    from dcps._network import NetworkConfig

    class Reading(idl.Struct, typename="dcps_test::Reading"):
        id: idl.key[idl.int32]
        value: idl.int64
        stamp: idl.int64
        payload: idl.string

    network = NetworkConfig.from_mapping(config.get("network", {}))
    participant = dcps.DomainParticipant(config["domain"], network=network)
    policies = (q.Reliability.reliable(datetime.timedelta(seconds=10)), q.History.KEEP_ALL)
    writer_qos, reader_qos = q.DataWriterQos(*policies), q.DataReaderQos(*policies)
    name = config["topic"]
    data_topic = dcps.Topic(participant, f"{name}_data", Reading)
    ping_topic = dcps.Topic(participant, f"{name}_ping", Reading)
    pong_topic = dcps.Topic(participant, f"{name}_pong", Reading)
    tick = datetime.timedelta(milliseconds=50)

    if role == "sink":
        data_reader = dcps.DataReader(participant, data_topic, qos=reader_qos)
        ping_reader = dcps.DataReader(participant, ping_topic, qos=reader_qos)
        pong_writer = dcps.DataWriter(participant, pong_topic, qos=writer_qos)
        waitset = dcps.WaitSet(participant)
        waitset.attach(dcps.ReadCondition(data_reader))
        waitset.attach(dcps.ReadCondition(ping_reader))
        _emit(ev="ready", role=role, api="dcps")
        count, first = 0, 0.0
        while not stop.is_set():
            with contextlib.suppress(dcps.DcpsTimeoutError):
                waitset.wait(tick)
            for sample in ping_reader.take(64):
                if sample.valid_data:
                    pong_writer.write(sample.data)
            for sample in data_reader.take(1024):
                if not sample.valid_data:
                    continue
                if sample.data.value < 0:
                    _emit(ev="throughput", count=count, seconds=time.perf_counter() - first)
                    count = 0
                    continue
                if count == 0:
                    first = time.perf_counter()
                count += 1
        participant.close()
        return

    data_writer = dcps.DataWriter(participant, data_topic, qos=writer_qos)
    ping_writer = dcps.DataWriter(participant, ping_topic, qos=writer_qos)
    pong_reader = dcps.DataReader(participant, pong_topic, qos=reader_qos)
    pong_wait = dcps.WaitSet(participant)
    pong_wait.attach(dcps.ReadCondition(pong_reader))
    _emit(ev="ready", role=role, api="dcps")
    matched = (-1, -1)
    while not stop.is_set():
        now = (
            data_writer.publication_matched_status.current_count,
            pong_reader.subscription_matched_status.current_count,
        )
        if now != matched:
            matched = now
            _emit(ev="matched", data=now[0], pong=now[1])
        try:
            command = commands.get(timeout=0.02)
        except queue.Empty:
            continue
        if command["op"] == "burst":
            payload = "x" * command.get("size", 0)
            start = time.perf_counter()
            for index in range(command["count"]):
                data_writer.write(Reading(id=index % 64, value=index, stamp=0, payload=payload))
            data_writer.write(Reading(id=0, value=-1, stamp=0, payload=""))
            _emit(ev="burst_done", seconds=time.perf_counter() - start)
        elif command["op"] == "ping":
            warmup = command.get("warmup", 50)
            rtts = []
            for index in range(command["count"] + warmup):
                start_ns = time.perf_counter_ns()
                ping_writer.write(Reading(id=0, value=index, stamp=start_ns, payload=""))
                got = False
                deadline = time.monotonic() + 5
                while not got and time.monotonic() < deadline:
                    with contextlib.suppress(dcps.DcpsTimeoutError):
                        pong_wait.wait(tick)
                    got = any(s.valid_data and s.data.value == index for s in pong_reader.take(16))
                if not got:
                    _emit(ev="error", text=f"no pong for ping {index}")
                    break
                if index >= warmup:
                    rtts.append(time.perf_counter_ns() - start_ns)
            rtts.sort()
            if rtts:
                _emit(
                    ev="latency",
                    count=len(rtts),
                    p50_us=rtts[len(rtts) // 2] / 1000,
                    p90_us=rtts[int(len(rtts) * 0.9)] / 1000,
                )
        elif command["op"] == "exit":
            break
    participant.close()


def InstanceStateName(state: Any) -> str:  # noqa: N802 - reads like the enum it names
    """The DDS name of an instance state (``ALIVE``, ``NOT_ALIVE_DISPOSED``, ...)."""
    return _STATES.get(int(state), str(state))


def _bench_roles(
    config: dict[str, Any],
    role: str,
    participant: Any,
    reading: Any,
    commands: "queue.Queue[dict[str, Any]]",
    stop: threading.Event,
) -> None:
    """Benchmark roles: ``sink`` counts a burst and echoes pings; ``source`` drives both."""
    from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet
    from cyclonedds.pub import DataWriter
    from cyclonedds.qos import Policy, Qos
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic
    from cyclonedds.util import duration

    keep_all = Qos(
        Policy.Reliability.Reliable(duration(seconds=10)),
        Policy.History.KeepAll,
        Policy.Durability.Volatile,
    )
    name = config["topic"]
    data_topic = Topic(participant, f"{name}_data", reading)
    ping_topic = Topic(participant, f"{name}_ping", reading)
    pong_topic = Topic(participant, f"{name}_pong", reading)
    any_state = SampleState.Any | ViewState.Any | InstanceState.Any

    def waiter(reader: Any) -> Any:
        waitset = WaitSet(participant)
        waitset.attach(ReadCondition(reader, any_state))
        return waitset

    if role == "sink":
        data_reader = DataReader(participant, data_topic, qos=keep_all)
        ping_reader = DataReader(participant, ping_topic, qos=keep_all)
        pong_writer = DataWriter(participant, pong_topic, qos=keep_all)
        waitset = WaitSet(participant)
        waitset.attach(ReadCondition(data_reader, any_state))
        waitset.attach(ReadCondition(ping_reader, any_state))
        _emit(ev="ready", role=role)
        count, first = 0, 0.0
        while not stop.is_set():
            waitset.wait(duration(milliseconds=50))
            for sample in ping_reader.take(N=64):
                if sample.sample_info.valid_data:
                    pong_writer.write(sample)
            for sample in data_reader.take(N=1024):
                if not sample.sample_info.valid_data:
                    continue
                if sample.value < 0:
                    elapsed = time.perf_counter() - first
                    _emit(ev="throughput", count=count, seconds=elapsed)
                    count = 0
                    continue
                if count == 0:
                    first = time.perf_counter()
                count += 1
        return

    data_writer = DataWriter(participant, data_topic, qos=keep_all)
    ping_writer = DataWriter(participant, ping_topic, qos=keep_all)
    pong_reader = DataReader(participant, pong_topic, qos=keep_all)
    pong_wait = waiter(pong_reader)
    _emit(ev="ready", role=role)
    matched = (-1, -1)
    while not stop.is_set():
        now = (
            data_writer.get_publication_matched_status().current_count,
            pong_reader.get_subscription_matched_status().current_count,
        )
        if now != matched:
            matched = now
            _emit(ev="matched", data=now[0], pong=now[1])
        try:
            command = commands.get(timeout=0.02)
        except queue.Empty:
            continue
        if command["op"] == "burst":
            payload = "x" * command.get("size", 0)
            start = time.perf_counter()
            for index in range(command["count"]):
                data_writer.write(reading(id=index % 64, value=index, payload=payload))
            data_writer.write(reading(id=0, value=-1))
            _emit(ev="burst_done", seconds=time.perf_counter() - start)
        elif command["op"] == "ping":
            rtts = []
            for index in range(command["count"] + command.get("warmup", 50)):
                start_ns = time.perf_counter_ns()
                ping_writer.write(reading(id=0, value=index, stamp=start_ns))
                got = False
                deadline = time.monotonic() + 5
                while not got and time.monotonic() < deadline:
                    pong_wait.wait(duration(milliseconds=100))
                    for sample in pong_reader.take(N=16):
                        if sample.sample_info.valid_data and sample.value == index:
                            got = True
                if not got:
                    _emit(ev="error", text=f"no pong for ping {index}")
                    break
                if index >= command.get("warmup", 50):
                    rtts.append(time.perf_counter_ns() - start_ns)
            rtts.sort()
            if rtts:
                _emit(
                    ev="latency",
                    count=len(rtts),
                    p50_us=rtts[len(rtts) // 2] / 1000,
                    p90_us=rtts[int(len(rtts) * 0.9)] / 1000,
                )
        elif command["op"] == "exit":
            break


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main(json.loads(sys.argv[1]))
