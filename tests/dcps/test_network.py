"""NetworkConfig: settings, validation before any traffic, Cyclone XML, applying it."""

from __future__ import annotations

import datetime
import gc
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsParticipant
from cyclonedds.domain import DomainParticipant
from cyclonedds.qos import Policy

import dcps
import qos
from dcps._network import NetworkConfig, NetworkInterface, Peer
from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber
from dcps.store import Store
from tests.support.netns import PeerProcess, local_peer
from tests.support.peers.channels_types import Msg
from tests.support.store_process import StoreProcess
from tests.support.topic_types import Blob
from tests.support.waiting import eventually

NS = {"c": "https://cdds.io/config"}


def _find(xml: str, path: str) -> list[ET.Element]:
    root = ET.fromstring(xml)
    return root.findall("c:Domain/" + "/".join(f"c:{p}" for p in path.split("/")), NS)


def _text(xml: str, path: str) -> str | None:
    found = _find(xml, path)
    return found[0].text if found else None


@pytest.fixture
def own_domain(domain_id: int) -> Iterator[int]:
    """A domain id of this worker that other tests do not use (150..229), released after."""
    yield 150 + domain_id % 80
    gc.collect()


def _release(handle: Any) -> None:
    """Delete a Cyclone domain (and its participants) now rather than at garbage collection."""
    handle.__del__()


class TestPeers:
    def test_host_and_port_are_parsed(self) -> None:
        """'host:port' gives a peer with that port, a bare host none."""
        assert Peer.parse("10.0.0.2:7410") == Peer("10.0.0.2", 7410)
        assert Peer.parse("node-3.example") == Peer("node-3.example", None)
        assert Peer.parse("[fe80::1]:7400") == Peer("fe80::1", 7400)
        assert Peer.parse("fe80::1") == Peer("fe80::1", None)

    def test_peer_renders_back_to_its_text(self) -> None:
        """str(peer) is what Cyclone expects, brackets around IPv6 with a port."""
        assert str(Peer("fe80::1", 7400)) == "[fe80::1]:7400"
        assert str(Peer("10.0.0.2")) == "10.0.0.2"

    @pytest.mark.parametrize(
        "text",
        [
            "10.0.0.2:99999",
            "10.0.0.2:0",
            "10.0.0.2:http",
            "bad host!",
            "[fe80::1",
            "-a.b",
            "",
            "10.0.0.2:",
            "1.2.3.4.5",
        ],
    )
    def test_malformed_peer_is_rejected_naming_it(self, text: str) -> None:
        """A malformed peer raises BadParameterError that names the setting and the value."""
        with pytest.raises(dcps.BadParameterError, match=r"peers") as info:
            NetworkConfig(peers=[text])
        assert isinstance(info.value, ValueError)
        assert repr(text) in str(info.value)

    def test_peer_error_message_quotes_the_value(self) -> None:
        """The message shows the offending peer text so the user can find it."""
        with pytest.raises(dcps.BadParameterError, match=r"'10\.0\.0\.2:99999'"):
            NetworkConfig(peers=["10.0.0.2:99999"])


class TestInterfaces:
    def test_names_and_addresses_are_told_apart(self) -> None:
        """A string that is an IP address selects by address, anything else by name."""
        config = NetworkConfig(interfaces=["lo", "127.0.0.1"])
        assert config.interfaces == (
            NetworkInterface(name="lo"),
            NetworkInterface(address="127.0.0.1"),
        )

    def test_unknown_interface_is_rejected_before_any_domain_exists(self, own_domain: int) -> None:
        """apply() with an interface this host lacks raises BadParameterError, creating nothing."""
        config = NetworkConfig(interfaces=["nosuch0"])
        with pytest.raises(dcps.BadParameterError, match=r"interfaces.*'nosuch0'"):
            config.apply(own_domain)
        handle = NetworkConfig(interfaces=["lo"]).apply(own_domain)
        _release(handle)

    def test_invalid_interface_name_is_rejected_at_construction(self) -> None:
        """A name no kernel accepts (too long, spaces) fails when the config is built."""
        with pytest.raises(dcps.BadParameterError, match="interfaces"):
            NetworkConfig(interfaces=["a name with spaces"])
        with pytest.raises(dcps.BadParameterError, match="interfaces"):
            NetworkConfig(interfaces=["x" * 16])

    def test_duplicate_interface_is_rejected(self) -> None:
        """Listing an interface twice is an error, as Cyclone refuses it."""
        with pytest.raises(dcps.BadParameterError, match="listed twice"):
            NetworkConfig(interfaces=["lo", "lo"])

    def test_interface_needs_a_name_or_an_address(self) -> None:
        """An interface with neither (or both) a name and an address is rejected."""
        with pytest.raises(dcps.BadParameterError, match="exactly one"):
            NetworkInterface()


class TestOtherSettings:
    @pytest.mark.parametrize("index", [-1, 121, "3", True])
    def test_bad_max_participant_index(self, index: Any) -> None:
        """max_participant_index must be an integer in 0..120."""
        with pytest.raises(dcps.BadParameterError, match="max_participant_index"):
            NetworkConfig(max_participant_index=index)

    def test_participant_index_must_fit_the_ports_of_the_domain(self) -> None:
        """An index whose unicast port would pass 65535 in that domain is rejected."""
        config = NetworkConfig(max_participant_index=100)
        assert "<MaxAutoParticipantIndex>100<" in config.to_cyclone_xml(0)
        with pytest.raises(dcps.BadParameterError, match=r"max_participant_index.*domain 232"):
            config.to_cyclone_xml(232)

    def test_lease_must_be_positive(self) -> None:
        """A zero or negative lease duration is rejected."""
        with pytest.raises(dcps.BadParameterError, match="lease_duration"):
            NetworkConfig(lease_duration=datetime.timedelta(0))

    def test_seconds_are_accepted_for_durations(self) -> None:
        """Durations may be given as seconds and come back as timedelta."""
        assert NetworkConfig(spdp_interval=0.5).spdp_interval == datetime.timedelta(seconds=0.5)

    def test_bad_domain_id(self) -> None:
        """Rendering for a domain id outside the DDSI port range fails clearly."""
        with pytest.raises(dcps.BadParameterError, match="domain_id"):
            NetworkConfig().to_cyclone_xml(233)

    def test_config_is_an_immutable_value(self) -> None:
        """Equal settings give equal configs, and a config cannot be changed in place."""
        assert NetworkConfig(peers=["a:1"]) == NetworkConfig(peers=[Peer("a", 1)])
        with pytest.raises(AttributeError):
            NetworkConfig().multicast = False  # type: ignore[misc]


class TestCycloneXml:
    def test_interfaces_with_forced_multicast(self) -> None:
        """Each interface becomes a NetworkInterface element; forced multicast is kept."""
        xml = NetworkConfig(
            interfaces=[NetworkInterface(name="lo", multicast=True), "10.1.2.3"]
        ).to_cyclone_xml(5)
        rows = _find(xml, "General/Interfaces/NetworkInterface")
        assert [r.attrib for r in rows] == [
            {"name": "lo", "multicast": "true"},
            {"address": "10.1.2.3"},
        ]
        assert ET.fromstring(xml).find("c:Domain", NS).attrib == {"id": "5"}  # type: ignore[union-attr]

    def test_unicast_only(self) -> None:
        """Multicast off disables it globally and lists the peers with auto participant index."""
        xml = NetworkConfig(multicast=False, peers=["10.0.0.2", "10.0.0.3:7410"]).to_cyclone_xml(0)
        assert _text(xml, "General/AllowMulticast") == "false"
        assert [p.attrib["address"] for p in _find(xml, "Discovery/Peers/Peer")] == [
            "10.0.0.2",
            "10.0.0.3:7410",
        ]
        assert _text(xml, "Discovery/ParticipantIndex") == "auto"

    def test_tag_and_discovery_timing(self) -> None:
        """Domain tag, max participant index, lease and SPDP interval are rendered."""
        xml = NetworkConfig(
            domain_tag="plant <a>", max_participant_index=9, lease_duration=2, spdp_interval=0.5
        ).to_cyclone_xml(1)
        assert _text(xml, "Discovery/Tag") == "plant <a>"
        assert _text(xml, "Discovery/MaxAutoParticipantIndex") == "9"
        assert _text(xml, "Discovery/LeaseDuration") == "2 s"
        assert _text(xml, "Discovery/SPDPInterval") == "0.5 s"

    def test_fragment_size(self) -> None:
        """fragment_size sets Cyclone's FragmentSize and a MaxMessageSize that holds it."""
        xml = NetworkConfig(fragment_size=60000).to_cyclone_xml(0)
        assert _text(xml, "General/FragmentSize") == "60000B"
        assert _text(xml, "General/MaxMessageSize") == "61024B"
        assert _find(NetworkConfig().to_cyclone_xml(0), "General/FragmentSize") == []

    @pytest.mark.parametrize(
        "interfaces", [["lo"], ["127.0.0.1"], [NetworkInterface(name="lo", multicast=True)]]
    )
    def test_loopback_only_gets_large_fragments_and_a_large_receive_buffer(
        self, interfaces: list[Any]
    ) -> None:
        """Every interface loopback: 60000-byte fragments and a 4 MiB receive buffer asked for
        (not required: the kernel may give less, and the domain still starts)."""
        config = NetworkConfig(interfaces=interfaces)
        assert config.loopback_only
        xml = config.to_cyclone_xml(0)
        assert _text(xml, "General/FragmentSize") == "60000B"
        assert _text(xml, "General/MaxMessageSize") == "61024B"
        (receive,) = _find(xml, "Internal/SocketReceiveBufferSize")
        assert (receive.get("max"), receive.get("min")) == ("4194304B", None)

    @pytest.mark.parametrize("interfaces", [[], ["eth0"], ["lo", "eth0"], ["10.0.0.5"]])
    def test_real_interfaces_keep_cyclones_fragments(self, interfaces: list[str]) -> None:
        """An interface that may leave the host (or none named) keeps Cyclone's 1344-byte
        fragments and receive buffer: larger datagrams would be IP-fragmented on a real link."""
        config = NetworkConfig(interfaces=interfaces)
        assert not config.loopback_only
        xml = config.to_cyclone_xml(0)
        assert _find(xml, "General/FragmentSize") == []
        assert _find(xml, "Internal/SocketReceiveBufferSize") == []

    def test_explicit_settings_win_over_the_loopback_defaults(self) -> None:
        """fragment_size and socket_receive_buffer given on loopback are used as given."""
        xml = NetworkConfig(
            interfaces=["lo"], fragment_size=1344, socket_receive_buffer=1 << 20
        ).to_cyclone_xml(0)
        assert _text(xml, "General/FragmentSize") == "1344B"
        (receive,) = _find(xml, "Internal/SocketReceiveBufferSize")
        assert (receive.get("min"), receive.get("max")) == ("1048576B", None)

    @pytest.mark.parametrize("size", [0, 100, 70000, 1.5, True, "60000"])
    def test_bad_fragment_size_is_named(self, size: Any) -> None:
        """A fragment size that is not a byte count in range is refused, naming the setting."""
        with pytest.raises(dcps.BadParameterError, match="fragment_size"):
            NetworkConfig(fragment_size=size)

    def test_large_sample_settings(self) -> None:
        """whc_high and the socket buffer sizes set Cyclone's Internal elements; unset, none."""
        xml = NetworkConfig(
            whc_high=8 << 20, socket_receive_buffer=4 << 20, socket_send_buffer=2 << 20
        ).to_cyclone_xml(0)
        assert _text(xml, "Internal/Watermarks/WhcHigh") == "8388608B"
        (receive,) = _find(xml, "Internal/SocketReceiveBufferSize")
        (send,) = _find(xml, "Internal/SocketSendBufferSize")
        assert (receive.get("min"), send.get("min")) == ("4194304B", "2097152B")
        assert _find(NetworkConfig().to_cyclone_xml(0), "Internal") == []

    @pytest.mark.parametrize("setting", ["whc_high", "socket_receive_buffer", "socket_send_buffer"])
    @pytest.mark.parametrize("size", [0, 100, 1 << 31, 1.5, True, "4096"])
    def test_bad_buffer_size_is_named(self, setting: str, size: Any) -> None:
        """A buffer size that is not a byte count in range is refused, naming the setting."""
        with pytest.raises(dcps.BadParameterError, match=setting):
            NetworkConfig(**{setting: size})

    def test_buffer_sizes_from_env(self) -> None:
        """DCPS_WHC_HIGH and DCPS_SOCKET_*_BUFFER are byte counts; anything else is named."""
        env = {"DCPS_WHC_HIGH": "4194304", "DCPS_SOCKET_RECEIVE_BUFFER": "1048576"}
        config = NetworkConfig.from_env(env)
        assert (config.whc_high, config.socket_receive_buffer) == (4 << 20, 1 << 20)
        with pytest.raises(dcps.BadParameterError, match="DCPS_SOCKET_SEND_BUFFER"):
            NetworkConfig.from_env({"DCPS_SOCKET_SEND_BUFFER": "4 MiB"})


class TestFromFileAndEnv:
    def test_load_toml(self, tmp_path: Path) -> None:
        """A TOML file with a [network] table gives the same config as the arguments."""
        path = tmp_path / "net.toml"
        path.write_text(
            "[network]\n"
            'interfaces = ["lo", { address = "127.0.0.1", multicast = true }]\n'
            "multicast = false\n"
            'peers = ["10.0.0.2:7410"]\n'
            'domain_tag = "plant-a"\n'
            "lease_duration = 5\n"
        )
        assert NetworkConfig.load(path) == NetworkConfig(
            interfaces=["lo", NetworkInterface(address="127.0.0.1", multicast=True)],
            multicast=False,
            peers=["10.0.0.2:7410"],
            domain_tag="plant-a",
            lease_duration=datetime.timedelta(seconds=5),
        )

    def test_unknown_key_in_file_is_named(self, tmp_path: Path) -> None:
        """A misspelt setting in the file is reported with the file and the key."""
        path = tmp_path / "net.toml"
        path.write_text("multicat = false\n")
        with pytest.raises(dcps.BadParameterError, match=r"multicat") as info:
            NetworkConfig.load(path)
        assert str(path) in str(info.value)

    def test_malformed_toml_is_reported(self, tmp_path: Path) -> None:
        """A TOML syntax error becomes BadParameterError naming the file."""
        path = tmp_path / "net.toml"
        path.write_text("peers = [\n")
        with pytest.raises(dcps.BadParameterError, match=r"net\.toml"):
            NetworkConfig.load(path)

    def test_from_env(self) -> None:
        """DCPS_* variables set interfaces, forced multicast, peers, tag and multicast."""
        config = NetworkConfig.from_env(
            {
                "DCPS_INTERFACES": "lo, 127.0.0.1",
                "DCPS_MULTICAST_INTERFACES": "lo",
                "DCPS_MULTICAST": "0",
                "DCPS_PEERS": "10.0.0.2,10.0.0.3:7410",
                "DCPS_DOMAIN_TAG": "t1",
                "DCPS_PARTICIPANT_NAME": "node-1",
                "DCPS_MAX_PARTICIPANT_INDEX": "7",
                "DCPS_FRAGMENT_SIZE": "60000",
            }
        )
        assert config == NetworkConfig(
            interfaces=[NetworkInterface(name="lo", multicast=True), "127.0.0.1"],
            multicast=False,
            peers=["10.0.0.2", "10.0.0.3:7410"],
            domain_tag="t1",
            participant_name="node-1",
            max_participant_index=7,
            fragment_size=60000,
        )

    def test_env_overrides_the_file(self, tmp_path: Path) -> None:
        """DCPS_NETWORK_CONFIG is read first and the other variables override it."""
        path = tmp_path / "net.toml"
        path.write_text('domain_tag = "from-file"\npeers = ["10.0.0.9"]\n')
        config = NetworkConfig.from_env(
            {"DCPS_NETWORK_CONFIG": str(path), "DCPS_DOMAIN_TAG": "from-env"}
        )
        assert config.domain_tag == "from-env"
        assert config.peers == (Peer("10.0.0.9"),)

    @pytest.mark.parametrize(
        ("variable", "value"),
        [
            ("DCPS_MULTICAST", "maybe"),
            ("DCPS_PEERS", "x:y"),
            ("DCPS_INTERFACES", "a b"),
            ("DCPS_MAX_PARTICIPANT_INDEX", "many"),
            ("DCPS_LEASE_DURATION", "soon"),
            ("DCPS_FRAGMENT_SIZE", "big"),
        ],
    )
    def test_bad_variable_is_named(self, variable: str, value: str) -> None:
        """A bad variable value raises BadParameterError naming the setting."""
        setting = variable.removeprefix("DCPS_")  # e.g. "DCPS_PEERS" or "peers: ..."
        with pytest.raises(dcps.BadParameterError, match=f"(?i){setting}") as info:
            NetworkConfig.from_env({variable: value})
        assert repr(value) in str(info.value)


class TestApply:
    def test_participant_uses_the_applied_domain(self, own_domain: int) -> None:
        """After apply(), a participant of that domain carries the configured name."""
        config = NetworkConfig(interfaces=["lo"], participant_name="net-test-node")
        handle = config.apply(own_domain)
        try:
            participant = DomainParticipant(own_domain, qos=config.participant_qos())
            reader = BuiltinDataReader(participant, BuiltinTopicDcpsParticipant)
            names = set()
            for sample in reader.take_iter(timeout=datetime.timedelta(seconds=5)):
                if Policy.EntityName in sample.qos:
                    names.add(sample.qos[Policy.EntityName].name)
                if "net-test-node" in names:
                    break
            assert "net-test-node" in names
        finally:
            _release(handle)

    def test_large_sample_settings_are_taken_by_cyclone(self, own_domain: int) -> None:
        """Cyclone starts with the large-sample settings; a socket buffer above what the
        kernel allows is refused with BadParameterError naming the configuration."""
        handle = NetworkConfig(
            interfaces=["lo"], fragment_size=60000, whc_high=8 << 20, socket_receive_buffer=1 << 20
        ).apply(own_domain)
        try:
            DomainParticipant(own_domain)
        finally:
            _release(handle)
        too_big = NetworkConfig(interfaces=["lo"], socket_receive_buffer=(1 << 31) - 1)
        with pytest.raises(dcps.BadParameterError, match="SocketReceiveBufferSize"):
            too_big.apply(own_domain)

    def test_second_apply_for_the_same_domain_is_refused(self, own_domain: int) -> None:
        """A process cannot reconfigure a domain it already has: PreconditionNotMetError."""
        handle = NetworkConfig(interfaces=["lo"]).apply(own_domain)
        try:
            with pytest.raises(dcps.PreconditionNotMetError, match=f"domain {own_domain}"):
                NetworkConfig(interfaces=["lo"], domain_tag="other").apply(own_domain)
        finally:
            _release(handle)

    def test_apply_after_an_implicit_participant_is_refused(self, own_domain: int) -> None:
        """A participant created without a config owns the domain; apply() then fails clearly."""
        participant = DomainParticipant(own_domain)
        try:
            with pytest.raises(dcps.PreconditionNotMetError, match="already exists"):
                NetworkConfig(interfaces=["lo"]).apply(own_domain)
        finally:
            _release(participant)

    def test_dcps_participant_with_network_config(self, own_domain: int) -> None:
        """dcps.DomainParticipant(network=...) applies the config; a different one is refused."""
        network = NetworkConfig(interfaces=["lo"], domain_tag="dcps-net")
        participant = dcps.DomainParticipant(own_domain, network=network)
        try:
            with pytest.raises(dcps.PreconditionNotMetError, match=f"domain {own_domain}"):
                dcps.DomainParticipant(own_domain, network=NetworkConfig(interfaces=["lo"]))
        finally:
            participant.close()
        again = dcps.DomainParticipant(own_domain, network=NetworkConfig(interfaces=["lo"]))
        again.close()

    def test_large_samples_flow_with_large_fragments(
        self, own_domain: int, topic_name: str
    ) -> None:
        """With fragment_size=60000 Cyclone accepts the domain and a 300 kB sample arrives whole."""
        network = NetworkConfig(interfaces=["lo"], fragment_size=60000)
        with dcps.DomainParticipant(own_domain, network=network) as participant:
            topic = dcps.Topic(participant, topic_name, Blob)
            reliable = [qos.Reliability.RELIABLE, qos.History.KEEP_ALL]
            reader = dcps.DataReader(participant, topic, qos=qos.DataReaderQos(*reliable))
            writer = dcps.DataWriter(participant, topic, qos=qos.DataWriterQos(*reliable))
            writer.wait_for_readers()
            payload = np.arange(300_000, dtype=np.uint8)
            writer.write(Blob(1, payload))
            (sample,) = eventually(lambda: reader.take())
            assert np.array_equal(sample.data.payload, payload)

    def test_loopback_fragments_reach_a_reader_with_cyclones_defaults(
        self, own_domain: int, topic_name: str
    ) -> None:
        """A loopback-only process sends 60000-byte fragments; a reader process configured by
        Cyclone's defaults (1344-byte fragments) reassembles its 1 MiB samples whole."""
        code = (
            "import sys, time\n"
            "import numpy as np\n"
            "import dcps, idl, qos\n"
            "class Blob(idl.Struct, typename='bench::Blob'):\n"
            "    id: idl.key[idl.int32]\n"
            "    payload: idl.sequence[idl.uint8]\n"
            f"with dcps.DomainParticipant({own_domain}) as dp:\n"
            "    assert dp.network is None, dp.network\n"
            f"    topic = dcps.Topic(dp, {topic_name!r}, Blob)\n"
            "    rqos = qos.DataReaderQos(qos.Reliability.RELIABLE, qos.History.KEEP_ALL)\n"
            "    reader = dcps.DataReader(dp, topic, qos=rqos)\n"
            "    print('ready', flush=True)\n"
            "    got, deadline = [], time.monotonic() + 60\n"
            "    while len(got) < 3 and time.monotonic() < deadline:\n"
            "        got += [s.data for s in reader.take()]\n"
            "        time.sleep(0.01)\n"
            "    for s in got:\n"
            "        total = int(np.asarray(s.payload, dtype=np.uint64).sum())\n"
            "        print(s.id, len(s.payload), total)\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("DCPS_")}
        child = subprocess.Popen(
            [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            network = NetworkConfig(interfaces=[NetworkInterface(name="lo", multicast=True)])
            assert network.effective_fragment_size == 60000
            payload = np.arange(1 << 20, dtype=np.uint32).astype(np.uint8)
            with dcps.DomainParticipant(own_domain, network=network) as participant:
                topic = dcps.Topic(participant, topic_name, Blob)
                reliable = [qos.Reliability.RELIABLE, qos.History.KEEP_ALL]
                writer = dcps.DataWriter(participant, topic, qos=qos.DataWriterQos(*reliable))
                writer.wait_for_readers()
                for i in range(3):
                    writer.write(Blob(i, payload))
                writer.wait_for_acknowledgments(60)
            out, _ = child.communicate(timeout=90)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        total = int(payload.astype(np.uint64).sum())
        assert out.split("\n")[:3] == [f"{i} {1 << 20} {total}" for i in range(3)]

    def test_unresolvable_peer_is_refused_before_any_domain(self, own_domain: int) -> None:
        """A peer host name that does not resolve raises BadParameterError naming it.

        (Cyclone DDS itself aborts the process on such a peer, so this runs in a
        child process: a regression shows as a crash there, not of the test run.)
        """
        code = (
            "import dcps\n"
            "from dcps._network import NetworkConfig\n"
            "try:\n"
            f"    NetworkConfig(peers=['nosuchhost.invalid']).apply({own_domain})\n"
            "except dcps.BadParameterError as exc:\n"
            "    print('refused:', exc)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert "refused: peers: cannot resolve host name 'nosuchhost.invalid'" in done.stdout

    def test_fragment_size_alone_in_the_environment_applies(self, own_domain: int) -> None:
        """DCPS_FRAGMENT_SIZE on its own configures the domain of a dcps participant."""
        code = (
            "import dcps\n"
            f"with dcps.DomainParticipant({own_domain}) as dp:\n"
            "    print('fragment', dp.network.fragment_size if dp.network else None)\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("DCPS_")}
        env["DCPS_FRAGMENT_SIZE"] = "60000"
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env
        )
        assert done.returncode == 0, done.stderr
        assert "fragment 60000" in done.stdout

    def test_channel_layer_takes_a_network_config(
        self, own_domain: int, topic_name: str, tmp_path: Path
    ) -> None:
        """Store, publisher and subscriber accept ``network=``: elements flow, names show."""
        network = NetworkConfig(interfaces=["lo"], participant_name="channel-node")
        topic = ChannelledTopic(topic_name, Msg, channel_count=2)
        kw: dict[str, Any] = {"domain_id": own_domain, "namespace": "netcfg", "network": network}
        with (
            Store(tmp_path / "store", **kw),
            ChannelSubscriber(topic, **kw) as sub,
            ChannelPublisher(topic, **kw) as pub,
        ):
            position = pub.publish(Msg(1, 5)).result(20)
            (element,) = sub.receive(1).result(20)
            assert (element.value, element.position) == (Msg(1, 5), position)
            participant = DomainParticipant(own_domain)
            reader = BuiltinDataReader(participant, BuiltinTopicDcpsParticipant)
            names = [
                s.qos[Policy.EntityName].name
                for s in reader.take(N=64)
                if Policy.EntityName in s.qos
            ]
            # the store, the subscriber and the publisher of one process share one participant
            assert names.count("channel-node") == 1
            _release(participant)

    def test_store_on_loopback_defaults_serves_clients_on_cyclones_defaults(
        self, own_domain: int, topic_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A store process on the loopback defaults (60000-byte fragments) and clients on
        Cyclone's (1344) exchange 1 MiB elements: published, pushed live, fetched again."""
        monkeypatch.setenv("DCPS_INTERFACES", "lo")
        monkeypatch.setenv("DCPS_MULTICAST_INTERFACES", "lo")
        store = StoreProcess(tmp_path / "store", own_domain, "bignet")
        monkeypatch.delenv("DCPS_INTERFACES")  # this process: CYCLONEDDS_URI only
        monkeypatch.delenv("DCPS_MULTICAST_INTERFACES")
        # retained: the first (anonymous) subscriber's delivery does not release them
        topic = ChannelledTopic(topic_name, Blob, channel_count=1, retain_consumed=True)
        kw: dict[str, Any] = {"domain_id": own_domain, "namespace": "bignet"}
        payloads = [
            (np.arange(1 << 20, dtype=np.uint32) * 7 + i).astype(np.uint8) for i in range(3)
        ]
        try:
            with ChannelSubscriber(topic, **kw) as live, ChannelPublisher(topic, **kw) as pub:
                positions = [pub.publish(Blob(i, p)).result(60) for i, p in enumerate(payloads)]
                got = [e for _ in range(3) for e in live.receive(1).result(60)]
                assert [e.position for e in got] == positions
                assert all(
                    np.array_equal(e.value.payload, p) for e, p in zip(got, payloads, strict=True)
                )
            with ChannelSubscriber(topic, **kw) as late:  # from the log, by FETCH replies
                late.seek_to_head()
                again = [e for _ in range(3) for e in late.receive(1).result(60)]
                assert [e.position for e in again] == positions
                assert all(
                    np.array_equal(e.value.payload, p) for e, p in zip(again, payloads, strict=True)
                )
        finally:
            store.kill()

    def test_domain_can_be_applied_again_once_released(self, own_domain: int) -> None:
        """Releasing the handle frees the domain id for a new configuration."""
        first = NetworkConfig(interfaces=["lo"]).apply(own_domain)
        with pytest.raises(dcps.PreconditionNotMetError, match=f"domain {own_domain}"):
            NetworkConfig(interfaces=["lo"], domain_tag="second").apply(own_domain)
        _release(first)
        second = NetworkConfig(interfaces=["lo"], domain_tag="second").apply(own_domain)
        try:
            assert second.get_domain_id() == own_domain
            with pytest.raises(dcps.PreconditionNotMetError, match=f"domain {own_domain}"):
                NetworkConfig(interfaces=["lo"]).apply(own_domain)  # the second one holds it
        finally:
            _release(second)
        _release(NetworkConfig(interfaces=["lo"], domain_tag="third").apply(own_domain))


def _local(role: str, domain: int, topic: str, network: dict[str, Any], tmp: Path) -> PeerProcess:
    return local_peer({"role": role, "domain": domain, "topic": topic, "network": network}, tmp)


def _ready(*processes: PeerProcess) -> None:
    for process in processes:
        process.expect(lambda e: e.get("ev") == "ready", 20, "ready")


@pytest.mark.multiprocess
class TestLoopbackProcesses:
    def test_unicast_peer_discovery_between_processes(
        self, own_domain: int, topic_name: str, tmp_path: Path
    ) -> None:
        """Two processes with multicast off find each other through a 127.0.0.1 peer."""
        network = {"interfaces": ["lo"], "multicast": False, "peers": ["127.0.0.1"]}
        reader = _local("reader", own_domain, topic_name, network, tmp_path)
        writer = _local("writer", own_domain, topic_name, network, tmp_path)
        try:
            _ready(reader, writer)
            writer.expect(lambda e: e == {"ev": "pub_matched", "count": 1}, 15, "match")
            writer.send(op="write", key=1, value=42)
            reader.expect(lambda e: e.get("ev") == "sample" and e["value"] == 42, 10, "sample")
        finally:
            writer.close()
            reader.close()

    def test_different_domain_tags_do_not_meet(
        self, own_domain: int, topic_name: str, tmp_path: Path
    ) -> None:
        """A reader with another domain tag gets nothing while a same-tag reader gets the data."""

        def net(tag: str) -> dict[str, Any]:
            return {"interfaces": [{"name": "lo", "multicast": True}], "domain_tag": tag}

        same = _local("reader", own_domain, topic_name, net("t-1"), tmp_path)
        other = _local("reader", own_domain, topic_name, net("t-2"), tmp_path)
        writer = _local("writer", own_domain, topic_name, net("t-1"), tmp_path)
        try:
            _ready(same, other, writer)
            writer.expect(lambda e: e == {"ev": "pub_matched", "count": 1}, 15, "match")
            writer.send(op="write", key=1, value=7)
            same.expect(lambda e: e.get("ev") == "sample" and e["value"] == 7, 10, "sample")
            assert not [e for e in other.drain() if e.get("ev") == "sample"]
            assert {"ev": "pub_matched", "count": 2} not in writer.drain()
        finally:
            for process in (writer, same, other):
                process.close()
