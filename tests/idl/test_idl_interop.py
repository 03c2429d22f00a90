"""Interop with a real C peer built from the same IDL by Debian's idlc + gcc.

The peer (tests/idl/peer.c) is compiled once per source version into a
temporary directory. It inherits CYCLONEDDS_URI from the test process, so it
stays on the loopback interface like the tests.

Debian bookworm ships Cyclone DDS 0.10.2, whose XTypes code predates the
XTypes 1.3 ``int8``/``uint8`` type kinds: it rejects a type object containing
them ("invalid type object") and never matches. Every other construct here
matches with type information (checked by hand), but this type deliberately
has ``int8``/``uint8`` members, so the peer is compiled with ``idlc -t`` (no
type information) and endpoints match on topic and type name.
"""

import fcntl
import hashlib
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.sub import DataReader
from cyclonedds.topic import Topic
from cyclonedds.util import duration

import dcps
import idl
import qos as dcps_qos

pytestmark = pytest.mark.multiprocess

HERE = Path(__file__).parent
SOURCES = ("interop.idl", "interop_common.idl", "peer.c")
COUNT = 6
TIMEOUT = 30.0


# --- the same IDL declared as classes -------------------------------------------------


class Color(idl.Enum, typename="interop::Color"):
    RED = 0
    GREEN = 1
    BLUE = 2


class Point(idl.Struct, typename="interop::Point"):
    x: idl.float64
    y: idl.float64


class Id(idl.Struct, typename="interop::Id"):
    site: idl.int16
    num: idl.uint32


class Sample(idl.Struct, typename="interop::Sample"):
    id: idl.key[Id]
    kind: idl.key[idl.bounded_str[16]]
    label: idl.bounded_str[32]
    note: idl.string
    color: Color
    pos: Point
    values: idl.sequence[idl.float32, 8]
    blob: idl.sequence[idl.octet]
    path: idl.sequence[Point]
    matrix: idl.array[idl.array[idl.int32, 3], 2]
    c: idl.char
    flag: bool
    i8: idl.int8
    u8: idl.uint8
    u16: idl.uint16
    i64: idl.int64
    u64: idl.uint64


def _types(which: str) -> dict[str, Any]:
    if which == "dataclass":
        return {"Sample": Sample, "Point": Point, "Id": Id, "Color": Color}
    mod = idl.load(HERE / "interop.idl")
    m = mod.interop
    return {"Sample": m.Sample, "Point": m.Point, "Id": m.Id, "Color": m.Color}


def expected_sample(types: dict[str, Any], i: int) -> Any:
    """Sample i, exactly as peer.c's fill() builds it."""
    point = types["Point"]
    return types["Sample"](
        id=types["Id"](site=i % 3 - 1, num=4_000_000_000 + i),
        kind=f"k{i}",
        label=f"label-{i}",
        note=f'héllo "{i}"',
        color=types["Color"](i % 3),
        pos=point(i + 0.5, -i * 0.25),
        values=np.array([i * 0.5 + k for k in range(i % 9)], dtype=np.float32),
        blob=bytes((i + k) % 256 for k in range(i * 3)),
        path=[point(float(k), -float(k)) for k in range(i % 3)],
        matrix=np.array(
            [[i * 100 + r * 10 + c for c in range(3)] for r in range(2)], dtype=np.int32
        ),
        c=chr(ord("a") + i),
        flag=i % 2 == 0,
        i8=-100 + i,
        u8=200 + i,
        u16=60000 + i,
        i64=-(2**62) + i,
        u64=2**63 + i,
    )


def as_plain(value: Any) -> Any:
    """A sample as the JSON the C peer prints (enums as numbers, arrays as lists)."""
    if idl.is_topic_type(type(value)):
        return {f.name: as_plain(getattr(value, f.name)) for f in idl.describe(type(value)).fields}
    if isinstance(value, idl.Enum):
        return value.value
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, (bytes, bytearray)):
        return list(value)
    if isinstance(value, list):
        return [as_plain(v) for v in value]
    return value


# --- building and running the peer ----------------------------------------------------


def _build(exe: str, idl_files: tuple[str, ...], c_source: str, type_info: bool) -> Path:
    """Compile ``c_source`` with the C code idlc generates for ``idl_files`` (cached)."""
    idlc, gcc = shutil.which("idlc"), shutil.which("gcc")
    if idlc is None or gcc is None:
        pytest.skip(
            "C interop needs idlc and gcc (apt-get install cyclonedds-tools cyclonedds-dev gcc)"
        )
    sources = (*idl_files, c_source)
    digest = hashlib.sha256(b"".join((HERE / s).read_bytes() for s in sources)).hexdigest()
    build = Path(tempfile.gettempdir()) / f"dcps-idl-{exe}-{digest[:16]}"
    build.mkdir(exist_ok=True)
    binary = build / exe
    with open(build / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # xdist workers build once
        if not binary.exists():
            flags = [] if type_info else ["-t"]
            for idl_file in idl_files:
                _run([idlc, *flags, "-I", str(HERE), "-o", str(build), str(HERE / idl_file)])
            generated = [str(build / f.replace(".idl", ".c")) for f in idl_files]
            _run(
                [
                    gcc,
                    "-O1",
                    "-o",
                    str(build / f"{exe}.tmp"),
                    "-I",
                    str(build),
                    str(HERE / c_source),
                    *generated,
                    "-lddsc",
                ]
            )
            os.replace(build / f"{exe}.tmp", binary)
    return binary


@pytest.fixture(scope="session")
def c_peer() -> Path:
    """The C reader/writer peer for interop.idl, built without type information."""
    return _build("peer", ("interop_common.idl", "interop.idl"), "peer.c", type_info=False)


@pytest.fixture(scope="session")
def c_match() -> Path:
    """The C match probe for typed.idl, built with XTypes type information."""
    return _build("match", ("interop_common.idl", "typed.idl"), "match.c", type_info=True)


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    if proc.returncode != 0:
        if "dds/dds.h" in proc.stderr or "lddsc" in proc.stderr:
            pytest.skip(f"Cyclone DDS C development files missing: {proc.stderr.strip()}")
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr}")


def _readline(proc: subprocess.Popen[str], deadline: float) -> str:
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 0.1)
        if ready:
            return proc.stdout.readline()
        if proc.poll() is not None:
            break
    stderr = proc.stderr.read() if proc.stderr else ""
    raise AssertionError(f"C peer produced no output (rc={proc.poll()}): {stderr}")


@pytest.fixture
def participant(domain_id: int) -> DomainParticipant:
    """A participant on this worker's domain."""
    return DomainParticipant(domain_id)


def _qos() -> Qos:
    return Qos(Policy.Reliability.Reliable(duration(seconds=10)), Policy.History.KeepAll)


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _open_writer(
    api: str, stack: ExitStack, participant: DomainParticipant, domain_id: int, name: str, tp: Any
) -> tuple[Callable[[Any], None], Callable[[], bool]]:
    """A reliable keep-all writer on the raw binding or on dcps: (write, matched)."""
    if api == "raw":
        writer = DataWriter(participant, Topic(participant, name, tp), qos=_qos())
        return writer.write, lambda: len(writer.get_matched_subscriptions()) > 0
    dp = stack.enter_context(dcps.DomainParticipant(domain_id))
    dw = dcps.DataWriter(dp, dcps.Topic(dp, name, tp), qos=_dcps_qos(dcps_qos.DataWriterQos))
    return dw.write, lambda: bool(dw.matched_subscriptions)


def _open_reader(
    api: str, stack: ExitStack, participant: DomainParticipant, domain_id: int, name: str, tp: Any
) -> Callable[[], list[Any]]:
    """A reliable keep-all reader on the raw binding or on dcps: a take() of sample values."""
    if api == "raw":
        reader = DataReader(participant, Topic(participant, name, tp), qos=_qos())
        return lambda: list(reader.take(N=COUNT))
    dp = stack.enter_context(dcps.DomainParticipant(domain_id))
    dr = dcps.DataReader(dp, dcps.Topic(dp, name, tp), qos=_dcps_qos(dcps_qos.DataReaderQos))
    return lambda: [s.data for s in dr.take(COUNT) if s.info.valid_data]


def _dcps_qos(kind: Any) -> Any:
    return kind(dcps_qos.Reliability.reliable(timedelta(seconds=10)), dcps_qos.History.KEEP_ALL)


@pytest.mark.parametrize("api", ["raw", "dcps"])
@pytest.mark.parametrize("which", ["dataclass", "loaded"])
class TestCPeer:
    def test_python_writes_c_reads(
        self,
        which: str,
        api: str,
        c_peer: Path,
        participant: DomainParticipant,
        domain_id: int,
        topic_name: str,
    ) -> None:
        """Samples written from Python (raw binding or dcps DataWriter) arrive in the C peer
        with the same values."""
        types = _types(which)
        proc = subprocess.Popen(
            [str(c_peer), "read", str(domain_id), topic_name, str(COUNT)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            with ExitStack() as stack:
                assert _readline(proc, time.monotonic() + TIMEOUT).strip() == "READY"
                write, matched = _open_writer(
                    api, stack, participant, domain_id, topic_name, types["Sample"]
                )
                _wait_for(matched, "the C reader")
                sent = [expected_sample(types, i) for i in range(COUNT)]
                for s in sent:
                    idl.validate(s, types["Sample"])
                    write(s)
                out, err = proc.communicate(timeout=TIMEOUT)
            assert proc.returncode == 0, err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        received = [json.loads(line) for line in out.splitlines()]
        assert received == [as_plain(s) for s in sent]

    def test_c_writes_python_reads(
        self,
        which: str,
        api: str,
        c_peer: Path,
        participant: DomainParticipant,
        domain_id: int,
        topic_name: str,
    ) -> None:
        """Samples written by the C peer are read in Python (raw binding or dcps DataReader)
        with the same values."""
        types = _types(which)
        received: list[Any] = []
        with ExitStack() as stack:
            take = _open_reader(api, stack, participant, domain_id, topic_name, types["Sample"])
            proc = subprocess.Popen(
                [str(c_peer), "write", str(domain_id), topic_name, str(COUNT)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            try:

                def take_all() -> bool:
                    received.extend(take())
                    return len(received) >= COUNT

                _wait_for(take_all, "samples from the C writer")
                out, err = proc.communicate(timeout=TIMEOUT)
                assert proc.returncode == 0, err
                assert out.strip() == f"WROTE {COUNT}"
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.communicate()
        received.sort(key=lambda s: s.id.num)
        assert received == [expected_sample(types, i) for i in range(COUNT)]
        assert received[2].values.dtype == np.float32
        assert isinstance(received[1].color, types["Color"])


class TestPeerEnvironment:
    def test_peer_reads_cyclonedds_uri(self, c_peer: Path, domain_id: int) -> None:
        """The C peer takes its network config from CYCLONEDDS_URI (so tests pin it to lo)."""
        bogus = os.environ["CYCLONEDDS_URI"].replace('name="lo"', 'name="nosuchif0"')
        assert bogus != os.environ["CYCLONEDDS_URI"]
        proc = subprocess.run(
            [str(c_peer), "read", str(domain_id), "unused", "1"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
            env={**os.environ, "CYCLONEDDS_URI": bogus},
        )
        assert proc.returncode != 0
        assert "nosuchif0" in proc.stderr


class TestTypeInformation:
    @pytest.mark.parametrize("type_name", ["Sample", "Evolving", "Changing"])
    @pytest.mark.parametrize("which", ["loaded", "dataclass"])
    def test_c_writer_with_type_info_matches(
        self,
        type_name: str,
        which: str,
        c_match: Path,
        participant: DomainParticipant,
        domain_id: int,
        topic_name: str,
    ) -> None:
        """A C writer built with type information matches our reader (types assignable)."""
        types = _typed_types(which)
        reader = DataReader(participant, Topic(participant, topic_name, types[type_name]))
        proc = subprocess.run(
            [str(c_match), str(domain_id), topic_name, type_name],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "matched=1", proc.stderr
        assert "invalid" not in proc.stderr
        del reader

    def test_incompatible_type_does_not_match(
        self, c_match: Path, participant: DomainParticipant, domain_id: int, topic_name: str
    ) -> None:
        """Control: same type name, different member type: the C writer does not match."""

        class Evolving(idl.Struct, typename="typed::Evolving", extensibility="appendable"):
            id: idl.key[idl.int32]
            name: idl.bounded_str[8]
            values: idl.sequence[idl.int32]  # double in typed.idl

        reader = DataReader(participant, Topic(participant, topic_name, Evolving))
        proc = subprocess.run(
            [str(c_match), str(domain_id), topic_name, "Evolving", "1500"],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "matched=0"
        del reader


class TypedId(idl.Struct, typename="typed::Id"):
    site: idl.int16
    num: idl.uint32


class TypedSample(idl.Struct, typename="typed::Sample"):
    id: idl.key[TypedId]
    kind: idl.key[idl.bounded_str[16]]
    note: idl.string
    color: Color
    pos: Point
    values: idl.sequence[idl.float32, 8]
    blob: idl.sequence[idl.octet]
    path: idl.sequence[Point]
    matrix: idl.array[idl.array[idl.int32, 3], 2]
    c: idl.char
    flag: bool
    u16: idl.uint16
    i64: idl.int64
    u64: idl.uint64


class Evolving(idl.Struct, typename="typed::Evolving", extensibility="appendable"):
    id: idl.key[idl.int32]
    name: idl.bounded_str[8]
    values: idl.sequence[idl.float64]


class Changing(idl.Struct, typename="typed::Changing", extensibility="mutable"):
    id: idl.key[idl.int32]
    name: idl.string


def _typed_types(which: str) -> dict[str, Any]:
    if which == "dataclass":
        return {"Sample": TypedSample, "Evolving": Evolving, "Changing": Changing}
    m = idl.load(HERE / "typed.idl").typed
    return {"Sample": m.Sample, "Evolving": m.Evolving, "Changing": m.Changing}


class TestSameTypeBothWays:
    def test_loaded_and_declared_types_serialise_identically(self) -> None:
        """The interop IDL loaded from file and declared as classes give identical bytes."""
        loaded, declared = _types("loaded"), _types("dataclass")
        for types in (loaded, declared):  # so the C interop above exercised the codec
            types["Sample"].__idl__.populate()
            assert types["Sample"].__idl__._codec is not None
        for i in range(COUNT):
            a = expected_sample(loaded, i).serialize()
            assert a == expected_sample(declared, i).serialize()
