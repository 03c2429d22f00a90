"""Plain DDS topics between hosts: namespaces on a bridge, one DDS process per host.

Each host runs the peer program of ``netns.py`` in its ``writer`` or ``reader`` role,
on dcps entities (``dcps.DataWriter``/``dcps.DataReader`` with the participant's
network set by ``NetworkConfig``; ``_ready`` checks it), and reports what its writer
matches and its reader sees as JSON events.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.netns import Host, Lan, PeerProcess, lan_factory

pytestmark = pytest.mark.multiprocess

Event = dict[str, Any]


@pytest.fixture
def make_lan() -> Iterator[Callable[[int], Lan]]:
    """``make_lan(n)``: n hosts on a bridge, removed after the test (skips without netns)."""
    yield from lan_factory()


def _network(host: Host, **settings: Any) -> dict[str, Any]:
    return {"interfaces": ["eth0"], "participant_name": f"host-{host.name}", **settings}


def _is(ev: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e.get("ev") == ev and all(e.get(k) == v for k, v in fields.items())


def _start(host: Host, role: str, domain_id: int, topic: str, **options: Any) -> PeerProcess:
    network = options.pop("network", _network(host))
    return host.peer(role=role, domain=domain_id, topic=topic, network=network, **options)


def _ready(*processes: PeerProcess) -> None:
    """Wait until every process (started in parallel) runs its dcps writer or reader."""
    for process in processes:
        assert process.expect(_is("ready"), 20, "ready")["api"] == "dcps"


def _lifecycle(writer: PeerProcess, reader: PeerProcess) -> None:
    """Write three instances, dispose one, unregister one; check the reader's view of each."""
    _ready(writer, reader)
    writer.expect(_is("pub_matched", count=1), 15, "writer matched")
    for key in (1, 2, 3):
        writer.send(op="write", key=key, value=key * 10)
    writer.send(op="dispose", key=2)
    writer.send(op="unregister", key=3)
    for key in (1, 2, 3):
        reader.expect(_is("sample", key=key, value=key * 10, valid=True), 10, f"key {key}")
    reader.expect(_is("sample", key=2, state="NOT_ALIVE_DISPOSED"), 10, "key 2 disposed")
    reader.expect(_is("sample", key=3, state="NOT_ALIVE_NO_WRITERS"), 10, "key 3 unregistered")
    states_of_1 = {e["state"] for e in reader.drain() if e.get("ev") == "sample" and e["key"] == 1}
    assert states_of_1 == {"ALIVE"}


class TestMulticastDiscovery:
    def test_keyed_lifecycle_between_two_hosts(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """With multicast discovery alone, lifecycle and participant names cross hosts."""
        a, b = make_lan(2).hosts
        reader = _start(
            b, "reader", domain_id, topic_name, autodispose=False, watch_participants=True
        )
        writer = _start(a, "writer", domain_id, topic_name, autodispose=False)
        _lifecycle(writer, reader)
        reader.expect(_is("participant", name="host-a"), 10, "host-a's participant name")

    def test_three_hosts_and_a_foreign_domain_tag(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """Hosts with the writer's domain tag get its data; one with another tag never matches."""
        a, b, c = make_lan(3).hosts
        near = _start(b, "reader", domain_id, topic_name, network=_network(b, domain_tag="line-1"))
        far = _start(
            c,
            "reader",
            domain_id,
            topic_name,
            network=_network(c, domain_tag="line-2"),
            watch_participants=True,
        )
        writer = _start(
            a, "writer", domain_id, topic_name, network=_network(a, domain_tag="line-1")
        )
        _ready(near, far, writer)
        # any match count: a writer that matched far as well is caught below, not here
        writer.expect(lambda e: e.get("ev") == "pub_matched" and e["count"] >= 1, 15, "matched")
        writer.send(op="write", key=7, value=70)
        near.expect(_is("sample", key=7, value=70), 10, "sample on the same tag")
        events = far.drain()
        assert not [e for e in events if e.get("ev") == "sample"]
        assert not [e for e in events if e == {"ev": "participant", "name": "host-a"}]
        assert {"ev": "pub_matched", "count": 2} not in writer.drain()


class TestUnicastPeers:
    def test_keyed_lifecycle_with_multicast_off(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """With multicast off, hosts that list each other as peers discover and exchange data."""
        a, b, c = make_lan(3).hosts
        reader = _start(
            b,
            "reader",
            domain_id,
            topic_name,
            autodispose=False,
            network=_network(b, multicast=False, peers=[a.address]),
        )
        lonely = _start(c, "reader", domain_id, topic_name, network=_network(c, multicast=False))
        writer = _start(
            a,
            "writer",
            domain_id,
            topic_name,
            autodispose=False,
            network=_network(a, multicast=False, peers=[b.address]),
        )
        _ready(lonely)
        _lifecycle(writer, reader)
        assert not [e for e in lonely.drain() if e.get("ev") == "sample"]
        assert {"ev": "pub_matched", "count": 2} not in writer.drain()


class TestLinkFailure:
    def test_liveliness_lost_and_regained_across_an_outage(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """Unplugging the writer's host ends its liveliness (NO_WRITERS); replugging restores it."""
        a, b = make_lan(2).hosts
        timing = {"lease_duration": 2.0, "spdp_interval": 0.5}
        reader = _start(
            b,
            "reader",
            domain_id,
            topic_name,
            lease=1.0,
            autodispose=False,
            network=_network(b, **timing),
        )
        writer = _start(
            a,
            "writer",
            domain_id,
            topic_name,
            lease=1.0,
            autodispose=False,
            network=_network(a, **timing),
        )
        _ready(reader, writer)
        writer.expect(_is("pub_matched", count=1), 15, "writer matched")
        writer.send(op="write", key=1, value=1)
        reader.expect(_is("sample", key=1, value=1, state="ALIVE"), 10, "first sample")
        reader.expect(_is("liveliness", alive=1), 5, "writer alive")

        mark = reader.mark()
        a.link_down()
        reader.expect(_is("liveliness", alive=0), 10, "liveliness lost", since=mark)
        reader.expect(
            _is("sample", key=1, valid=False, state="NOT_ALIVE_NO_WRITERS"),
            10,
            "instance without writers",
            since=mark,
        )
        reader.expect(_is("sub_matched", count=0), 10, "writer's participant expired", since=mark)

        writer_mark, reader_mark = writer.mark(), reader.mark()
        a.link_up()
        writer.expect(_is("pub_matched", count=1), 20, "writer matched again", since=writer_mark)
        reader.expect(_is("liveliness", alive=1), 10, "writer alive again", since=reader_mark)
        writer.send(op="write", key=1, value=2)
        reader.expect(
            _is("sample", key=1, value=2, state="ALIVE"),
            10,
            "instance alive again",
            since=reader_mark,
        )

    def test_lost_writer_with_default_autodispose_shows_no_writers(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """Even with autodispose on (the default), a dcps writer lost to an outage is no dispose."""
        a, b = make_lan(2).hosts
        reader = _start(b, "reader", domain_id, topic_name, lease=1.0)
        writer = _start(a, "writer", domain_id, topic_name, lease=1.0)
        _ready(reader, writer)
        writer.expect(_is("pub_matched", count=1), 15, "writer matched")
        writer.send(op="write", key=4, value=4)
        reader.expect(_is("sample", key=4, value=4, state="ALIVE"), 10, "first sample")
        mark = reader.mark()
        a.link_down()
        reader.expect(_is("liveliness", alive=0), 10, "liveliness lost", since=mark)
        reader.expect(
            _is("sample", key=4, valid=False, state="NOT_ALIVE_NO_WRITERS"),
            10,
            "instance without writers",
            since=mark,
        )

    def test_reliable_samples_sent_while_unplugged_arrive_after(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """Reliable samples written during a short outage are retransmitted, in order, after it."""
        a, b = make_lan(2).hosts
        reader = _start(b, "reader", domain_id, topic_name)
        writer = _start(a, "writer", domain_id, topic_name)
        _ready(reader, writer)
        writer.expect(_is("pub_matched", count=1), 15, "writer matched")
        writer.send(op="write", key=1, value=0)
        reader.expect(_is("sample", key=1, value=0), 10, "first sample")

        a.link_down()
        mark = writer.mark()
        for value in range(1, 6):
            writer.send(op="write", key=1, value=value)
        writer.expect(_is("done", op="write", key=1, value=5), 10, "writes done", since=mark)
        reader_mark = reader.mark()
        a.link_up()
        reader.expect(_is("sample", key=1, value=5), 15, "last sample", since=reader_mark)
        values = [e["value"] for e in reader.drain()[reader_mark:] if e.get("ev") == "sample"]
        assert values == [1, 2, 3, 4, 5]

    def test_transient_local_late_joiner_gets_the_history(
        self, make_lan: Callable[[int], Lan], domain_id: int, topic_name: str
    ) -> None:
        """A reader that joins later on another host gets the writer's kept samples (TL)."""
        a, b = make_lan(2).hosts
        writer = _start(a, "writer", domain_id, topic_name, transient_local=True, depth=1)
        _ready(writer)
        for key in (1, 2, 3):
            writer.send(op="write", key=key, value=key)
            writer.send(op="write", key=key, value=key + 100)
        writer.expect(_is("done", op="write", key=3, value=103), 10, "writes done")
        reader = _start(b, "reader", domain_id, topic_name, transient_local=True, depth=1)
        _ready(reader)
        for key in (1, 2, 3):
            reader.expect(_is("sample", key=key, value=key + 100), 15, f"history of {key}")
        assert not [e for e in reader.drain() if e.get("ev") == "sample" and e["value"] < 100]
