"""Writer loss against dispose, DDS-conformant at every reader (issue 18, item 1).

A writer that dies (SIGKILL) or loses its liveliness must leave its instances
NOT_ALIVE_NO_WRITERS; only an explicit dispose, or an unregister / close with
autodispose on, disposes. Each case is watched by a dcps reader and by a C
reader on Debian's Cyclone DDS (tests/support/peers/lifecycle_peer.c), for a dcps
writer in its own process and for a foreign writer (the same C program).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cyclonedds.domain import DomainParticipant as RawParticipant
from cyclonedds.qos import Policy
from cyclonedds.sub import DataReader as RawReader
from cyclonedds.topic import Topic as RawTopic

import dcps
import idl
import qos
from tests.support.c_peers import LIFECYCLE_PEER, CReader, CWriter, build_c_peer
from tests.support.peer import Peer
from tests.support.qos_spec import reader_qos
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

ALIVE = "ALIVE"
DISPOSED = "NOT_ALIVE_DISPOSED"
NO_WRITERS = "NOT_ALIVE_NO_WRITERS"


@pytest.fixture(scope="module")
def c_peer() -> Path:
    """The C lifecycle peer, built once."""
    return build_c_peer(*LIFECYCLE_PEER)


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


class DcpsWatcher:
    """A dcps reader that remembers every sample's instance state, per sensor."""

    def __init__(self, participant: dcps.DomainParticipant, topic_name: str) -> None:
        topic = dcps.Topic(participant, topic_name, Reading)
        self.reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        self.seen: list[tuple[int, str]] = []

    def states(self, sensor: int) -> list[str]:
        """States of ``sensor``'s samples taken so far, in order."""
        for s in self.reader.take():
            self.seen.append((s.data.sensor, s.info.instance_state.name))
        return [state for key, state in self.seen if key == sensor]

    def wait_for_state(self, sensor: int, state: str, timeout: float = 20.0) -> list[str]:
        """Wait until a sample of ``sensor`` in ``state`` was taken; return ``sensor``'s states."""
        try:
            eventually(lambda: state in self.states(sensor), timeout, f"sensor {sensor} {state}")
        except AssertionError as exc:
            raise AssertionError(f"dcps reader: {exc}; it saw {self.states(sensor)}") from None
        return self.states(sensor)


@pytest.fixture
def watchers(
    participant: dcps.DomainParticipant, c_peer: Path, domain_id: int, topic_name: str
) -> Iterator[tuple[DcpsWatcher, CReader]]:
    """A dcps reader and a C reader on the test's topic."""
    c_reader = CReader(c_peer, domain_id, topic_name)
    try:
        yield DcpsWatcher(participant, topic_name), c_reader
    finally:
        c_reader.close()


def expect(watchers: tuple[DcpsWatcher, CReader], sensor: int, state: str) -> None:
    """Both readers end with ``sensor`` in ``state``; NO_WRITERS never passed through DISPOSED."""
    for watcher in watchers:
        states = watcher.wait_for_state(sensor, state)
        assert states[0] == ALIVE, f"{type(watcher).__name__} saw {states}"
        assert states[-1] == state, f"{type(watcher).__name__} saw {states}"
        if state == NO_WRITERS:
            assert DISPOSED not in states, f"{type(watcher).__name__} saw {states}"


class SiteId(idl.Struct, typename="loss::SiteId"):
    site: idl.int16
    num: idl.uint32


class Tagged(idl.Struct, typename="loss::Tagged"):
    """Keyed by a nested struct and an array: key values a writer must copy, not share."""

    id: idl.key[SiteId]
    tag: idl.key[idl.array[idl.int32, 2]]
    value: idl.float64


# -- a dcps writer in its own process --------------------------------------------------


def start_dcps_writer(
    peer: Peer, spec: dict[str, object], watchers: tuple[DcpsWatcher, CReader]
) -> None:
    """Start the peer's writer, matched both ways with both readers, and write sensors 1, 2."""
    dcps_watcher, c_reader = watchers
    peer.start_writer({"reliable": True, "keep_all": True, **spec}, dcps_watcher.reader)
    peer.call("wait_readers", count=2)
    c_reader.wait_matched(1)
    for sensor in (1, 2):
        peer.call("write", sensor=sensor, value=float(sensor))
    for sensor in (1, 2):
        for watcher in watchers:
            watcher.wait_for_state(sensor, ALIVE)


@dataclass(frozen=True)
class Ending:
    """How a writer stops updating sensor 1, and what both readers must then see."""

    name: str
    autodispose: bool
    state: str


DCPS_ENDINGS = [
    Ending("killed", True, NO_WRITERS),
    Ending("liveliness lost", True, NO_WRITERS),
    Ending("unregistered", True, DISPOSED),
    Ending("closed", True, DISPOSED),
    Ending("disposed", True, DISPOSED),
    Ending("killed", False, NO_WRITERS),
    Ending("unregistered", False, NO_WRITERS),
    Ending("closed", False, NO_WRITERS),
    Ending("disposed", False, DISPOSED),
]


def _id(ending: Ending) -> str:
    return f"{ending.name.replace(' ', '_')}-autodispose_{'on' if ending.autodispose else 'off'}"


class TestDcpsWriter:
    @pytest.mark.parametrize("ending", DCPS_ENDINGS, ids=_id)
    def test_what_readers_see(
        self,
        ending: Ending,
        watchers: tuple[DcpsWatcher, CReader],
        domain_id: int,
        topic_name: str,
    ) -> None:
        """A dcps writer's end shows at dcps and C readers as DDS defines it."""
        spec: dict[str, object] = {"lease": 1.0, "keep_instances": not ending.autodispose}
        if ending.name == "liveliness lost":
            spec["manual"] = True  # MANUAL_BY_TOPIC: alive while it writes or asserts
        peer = Peer(domain_id, topic_name)
        try:
            start_dcps_writer(peer, spec, watchers)
            if ending.name == "killed":
                peer.kill()
            elif ending.name == "unregistered":
                peer.call("unregister", sensor=1)
            elif ending.name == "closed":
                peer.call("close")
            elif ending.name == "disposed":
                peer.call("dispose", sensor=1)
            # "liveliness lost": the writer stays, silent, past its 1 s lease
            expect(watchers, 1, ending.state)
            if ending.name == "liveliness lost":
                peer.call("write", sensor=1, value=3.0)  # alive again
                for watcher in watchers:
                    eventually(
                        lambda w=watcher: w.states(1)[-1] == ALIVE, 20, "sensor 1 alive again"
                    )
            if ending.name in ("killed", "closed"):
                expect(watchers, 2, ending.state)  # every instance, not just one
        finally:
            peer.close()

    def test_close_does_not_dispose_an_instance_twice(
        self, watchers: tuple[DcpsWatcher, CReader], domain_id: int, topic_name: str
    ) -> None:
        """An instance disposed before close() gets no second dispose from close()."""
        peer = Peer(domain_id, topic_name)
        try:
            start_dcps_writer(peer, {}, watchers)
            peer.call("dispose", sensor=1)
            expect(watchers, 1, DISPOSED)
            peer.call("close")
            expect(watchers, 2, DISPOSED)
            for watcher in watchers:
                assert watcher.states(1).count(DISPOSED) == 1, watcher.states(1)
        finally:
            peer.close()

    def test_leaving_a_with_block_disposes(
        self,
        watchers: tuple[DcpsWatcher, CReader],
        participant: dcps.DomainParticipant,
        topic_name: str,
    ) -> None:
        """A writer used as a context manager disposes its instances on exit (autodispose on)."""
        topic = dcps.Topic(participant, topic_name, Reading)
        with dcps.DataWriter(participant, topic) as writer:
            writer.wait_for_readers(2)
            watchers[1].wait_matched(1)
            writer.write(Reading(1, 1.0, "a"))
            writer.write(Reading(1, 1.5, "b"))  # the same instance again
            writer.write(Reading(2, 2.0, "c"))
            for watcher in watchers:
                watcher.wait_for_state(2, ALIVE)
        expect(watchers, 1, DISPOSED)
        expect(watchers, 2, DISPOSED)

    def test_close_disposes_instances_with_nested_and_array_keys(
        self, participant: dcps.DomainParticipant, topic_name: str
    ) -> None:
        """close() disposes every instance written, even from one sample object reused."""
        topic = dcps.Topic(participant, topic_name, Tagged)
        reader = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer = dcps.DataWriter(participant, topic)
        writer.wait_for_readers()
        sample = Tagged(SiteId(1, 10), [1, 2], 0.0)
        writer.write(sample)
        sample.id.site = 2  # the same object, another instance
        writer.write(sample)
        sample.tag[1] = 3  # and another
        writer.write(sample)
        writer.write(Tagged(SiteId(2, 10), [1, 3], 1.0))  # the third one again
        writer.close()
        states: dict[tuple[int, int, tuple[int, ...]], str] = {}

        def all_disposed() -> bool:
            for s in reader.take():
                key = (s.data.id.site, s.data.id.num, tuple(s.data.tag))
                states[key] = s.info.instance_state.name
            return len(states) == 3 and set(states.values()) == {DISPOSED}

        eventually(all_disposed, what="three instances disposed")
        assert set(states) == {(1, 10, (1, 2)), (2, 10, (1, 2)), (2, 10, (1, 3))}

    def test_autodispose_off_by_set_qos_then_close_leaves_no_writers(
        self,
        watchers: tuple[DcpsWatcher, CReader],
        participant: dcps.DomainParticipant,
        topic_name: str,
    ) -> None:
        """Turning autodispose off with set_qos makes close() leave NO_WRITERS."""
        topic = dcps.Topic(participant, topic_name, Reading)
        writer = dcps.DataWriter(participant, topic)
        writer.wait_for_readers(2)
        watchers[1].wait_matched(1)
        writer.write(Reading(1, 1.0, ""))
        for watcher in watchers:
            watcher.wait_for_state(1, ALIVE)
        writer.set_qos(
            writer.qos.with_(qos.WriterDataLifecycle(autodispose_unregistered_instances=False))
        )
        writer.close()
        expect(watchers, 1, NO_WRITERS)

    def test_cyclone_is_told_autodispose_off_whatever_the_qos(
        self, participant: dcps.DomainParticipant, domain_id: int, topic_name: str
    ) -> None:
        """Other DDS readers see autodispose announced off; the writer's own qos keeps it on."""
        raw = RawParticipant(domain_id)
        raw_reader = RawReader(raw, RawTopic(raw, topic_name, Reading))
        writer = dcps.DataWriter(participant, dcps.Topic(participant, topic_name, Reading))
        writer.wait_for_readers()

        def announced() -> bool | None:
            handles = raw_reader.get_matched_publications()
            if not handles:
                return None
            policy = raw_reader.get_matched_publication_data(handles[0]).qos[
                Policy.WriterDataLifecycle
            ]
            return None if policy is None else bool(policy.autodispose)

        eventually(lambda: announced() is False, what="autodispose announced off")
        assert writer.qos[qos.WriterDataLifecycle].autodispose_unregistered_instances
        # a QoS change is announced anew: autodispose stays off for the others
        writer.set_qos(
            writer.qos.with_(
                qos.OwnershipStrength(5),
                qos.WriterDataLifecycle(autodispose_unregistered_instances=True),
            )
        )

        def strength_seen() -> bool:
            handles = raw_reader.get_matched_publications()
            data = raw_reader.get_matched_publication_data(handles[0]).qos
            return bool(data[Policy.OwnershipStrength].strength == 5)

        eventually(strength_seen, what="the new ownership strength announced")
        assert announced() is False
        assert writer.qos[qos.WriterDataLifecycle].autodispose_unregistered_instances


# -- a foreign writer: the C peer ------------------------------------------------------


FOREIGN_ENDINGS = [
    # Cyclone applies a lost writer's own autodispose flag: a crash looks like a dispose.
    Ending("killed", True, DISPOSED),
    Ending("unregistered", True, DISPOSED),
    Ending("closed", True, DISPOSED),
    Ending("disposed", True, DISPOSED),
    Ending("killed", False, NO_WRITERS),
    Ending("unregistered", False, NO_WRITERS),
    Ending("closed", False, NO_WRITERS),
    Ending("disposed", False, DISPOSED),
]


class TestForeignWriter:
    @pytest.mark.parametrize("ending", FOREIGN_ENDINGS, ids=_id)
    def test_what_readers_see(
        self,
        ending: Ending,
        watchers: tuple[DcpsWatcher, CReader],
        c_peer: Path,
        domain_id: int,
        topic_name: str,
    ) -> None:
        """A C writer's end as dcps and C readers see it (killed + autodispose: DISPOSED)."""
        dcps_watcher, c_reader = watchers
        writer = CWriter(c_peer, domain_id, topic_name, autodispose=ending.autodispose, lease=1.0)
        try:
            writer.call("match 2")
            eventually(lambda: dcps_watcher.reader.matched_publications, 20, "dcps matched")
            c_reader.wait_matched(1)
            for sensor in (1, 2):
                writer.call(f"write {sensor} {sensor}.0")
            actions: dict[str, Callable[[], None]] = {
                "killed": writer.kill,
                "unregistered": lambda: writer.call("unregister 1"),
                "closed": lambda: writer.call("close"),
                "disposed": lambda: writer.call("dispose 1"),
            }
            for watcher in watchers:
                watcher.wait_for_state(2, ALIVE)
            actions[ending.name]()
            expect(watchers, 1, ending.state)
        finally:
            writer.close()
