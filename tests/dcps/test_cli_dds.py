"""The DDS-side commands (ls, ps, typeof, sub, pub) against real participants on a real domain."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import dcps
import qos
from tests.support.cli import run_dcps, start_dcps
from tests.support.topic_types import Reading
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

READING_IDL = """
module sensors {
    struct Reading {
        @key long sensor;
        double value;
        string<16> label;
    };
};
"""


def _writer(
    participant: dcps.DomainParticipant, name: str, partitions: list[str]
) -> dcps.DataWriter[Reading]:
    topic = dcps.Topic(participant, name, Reading)
    publisher = dcps.Publisher(participant, partitions=partitions)
    return dcps.DataWriter(publisher, topic)


class TestLs:
    def test_json_lists_type_partitions_endpoints_and_qos(
        self, domain_id: int, topic_name: str
    ) -> None:
        """`ls --json -q` parses and shows the topic's type, partition, writer and its QoS."""
        with dcps.DomainParticipant(domain_id) as participant:
            _writer(participant, topic_name, ["p_ls"])
            result = run_dcps(
                "ls", "--json", "-q", "--domain", str(domain_id), "--timeout", "4",
                "--topic", f"{topic_name}.*",
            )  # fmt: skip
        assert result.returncode == 0, result.stderr
        listing = json.loads(result.stdout)
        assert [t["topic"] for t in listing] == [topic_name]
        (entry,) = listing
        assert entry["types"] == ["sensors::Reading"]
        assert entry["partitions"] == ["p_ls"]
        assert (entry["writers"], entry["readers"]) == (1, 0)
        (writer,) = entry["endpoints"]
        assert writer["kind"] == "writer"
        assert writer["qos"]["Reliability"]["kind"] == "Reliable"

    def test_table_shows_the_topic_and_filter_hides_others(
        self, domain_id: int, topic_name: str
    ) -> None:
        """`ls -t NAME` prints the topic with its type and leaves out topics that do not match."""
        with dcps.DomainParticipant(domain_id) as participant:
            _writer(participant, topic_name, [])
            _writer(participant, topic_name + "_other", [])
            result = run_dcps("ls", "--domain", str(domain_id), "--timeout", "4", "-t", topic_name)
        assert result.returncode == 0, result.stderr
        line = next(line for line in result.stdout.splitlines() if topic_name in line)
        assert "sensors::Reading" in line
        assert topic_name + "_other" not in result.stdout

    def test_bad_network_setting_is_a_clear_error(self, domain_id: int) -> None:
        """`ls --peer 'bad host'` fails with the network error naming the peer, no traceback."""
        result = run_dcps("ls", "--domain", str(domain_id), "--peer", "bad host!")
        assert result.returncode == 1
        assert "BadParameterError" in result.stderr
        assert "bad host!" in result.stderr
        assert "Traceback" not in result.stderr


class TestPs:
    def test_json_shows_this_process_and_its_topic(self, domain_id: int, topic_name: str) -> None:
        """`ps --json` lists this test process (its pid) with the topic its participant writes."""
        with dcps.DomainParticipant(domain_id) as participant:
            _writer(participant, topic_name, [])
            result = run_dcps("ps", "--json", "--domain", str(domain_id), "--timeout", "4")
        assert result.returncode == 0, result.stderr
        apps = json.loads(result.stdout)
        (me,) = [a for a in apps if a["pid"] == str(os.getpid())]
        assert me["host"]
        topics = {t for p in me["participants"] for t in p["topics"]}
        assert topic_name in topics


class TestTypeof:
    def test_prints_the_idl_of_a_dcps_writers_type(self, domain_id: int, topic_name: str) -> None:
        """`typeof TOPIC` fetches the writer's type by XTypes lookup and prints it as IDL."""
        with dcps.DomainParticipant(domain_id) as participant:
            _writer(participant, topic_name, [])
            text = run_dcps("typeof", topic_name, "--domain", str(domain_id), "--timeout", "10")
            as_json = run_dcps(
                "typeof", topic_name, "--json", "--domain", str(domain_id), "--timeout", "10"
            )
        assert text.returncode == 0, text.stderr
        assert "module sensors" in text.stdout
        assert "struct Reading" in text.stdout
        assert "@key long sensor;" in text.stdout
        assert "string<16>" in text.stdout
        assert as_json.returncode == 0, as_json.stderr
        document = json.loads(as_json.stdout)
        assert document["topic"] == topic_name
        (found,) = document["types"]
        assert found["type_name"] == "sensors::Reading"
        assert "double value;" in found["idl"]

    def test_unknown_topic_fails_naming_it(self, domain_id: int, topic_name: str) -> None:
        """`typeof` of a topic nobody uses exits 1 with a timeout naming the topic."""
        result = run_dcps("typeof", topic_name, "--domain", str(domain_id), "--timeout", "1")
        assert result.returncode == 1
        assert "DcpsTimeoutError" in result.stderr
        assert repr(topic_name) in result.stderr


def _lines(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


class TestPubSub:
    def test_pub_then_sub_round_trip(self, domain_id: int, topic_name: str, tmp_path: Path) -> None:
        """JSON lines given to `pub` (type from an IDL file) come out of `sub` (type: a module)."""
        idl_file = tmp_path / "reading.idl"
        idl_file.write_text(READING_IDL)
        sent = [
            {"sensor": 1, "value": 2.5, "label": "first"},
            {"sensor": 2, "value": -1.0, "label": "second"},
            {"sensor": 1, "value": 3.25, "label": "third"},
        ]
        sub = start_dcps(
            "sub", topic_name, "--json", "--count", "3", "--timeout", "60",
            "--domain", str(domain_id), "--type", "tests.support.topic_types:Reading",
        )  # fmt: skip
        try:
            published = run_dcps(
                "pub", topic_name, "--idl", str(idl_file), "--domain", str(domain_id),
                "--wait-readers", "1", "--timeout", "30", "--json",
                stdin="".join(json.dumps(s) + "\n" for s in sent),
            )  # fmt: skip
            out, err = sub.communicate(timeout=60)
        finally:
            sub.kill()
        assert published.returncode == 0, published.stderr
        assert json.loads(published.stdout) == {"topic": topic_name, "written": 3}
        assert sub.returncode == 0, err
        assert _lines(out) == sent

    def test_sub_discovers_the_type_and_prints_sample_info(
        self, domain_id: int, topic_name: str
    ) -> None:
        """Without --type `sub` takes the writer's type (XTypes); `--info` adds the states."""
        with dcps.DomainParticipant(domain_id) as participant:
            writer = _writer(participant, topic_name, [])
            sub = start_dcps(
                "sub", topic_name, "--json", "--info", "--count", "2", "--timeout", "60",
                "--domain", str(domain_id),
            )  # fmt: skip
            try:
                writer.wait_for_readers(1, timeout=30)
                writer.write(Reading(sensor=7, value=1.5, label="x"))
                assert sub.stdout is not None
                # dispose only once the sample is taken: Cyclone folds a dispose into an
                # unread sample of the instance instead of making an invalid sample
                first_line = sub.stdout.readline()
                writer.dispose(Reading(sensor=7, value=0.0, label=""))
                out, err = sub.communicate(timeout=60)
            finally:
                sub.kill()
        assert sub.returncode == 0, err
        first, second = _lines(first_line + out)
        assert first["data"] == {"sensor": 7, "value": 1.5, "label": "x"}
        assert first["info"]["instance_state"] == "ALIVE"  # type: ignore[index]
        assert second["info"]["valid_data"] is False  # type: ignore[index]
        assert second["info"]["instance_state"] == "NOT_ALIVE_DISPOSED"  # type: ignore[index]

    def test_bad_line_stops_pub_naming_line_and_member(
        self, domain_id: int, topic_name: str
    ) -> None:
        """A bad JSON line stops `pub` with exit 1 naming line and member; earlier lines arrive."""
        with dcps.DomainParticipant(domain_id) as participant:
            topic = dcps.Topic(participant, topic_name, Reading)
            # Reliable, as a user who needs every line would ask: a best-effort reader drops
            # a sample that arrives before it has matched the writer on its own side.
            reliable = qos.DataReaderQos(reliability=qos.Reliability.RELIABLE)
            reader = dcps.DataReader(participant, topic, qos=reliable)
            result = run_dcps(
                "pub", topic_name, "--domain", str(domain_id), "--wait-readers", "1",
                stdin='{"sensor": 1, "value": 1.0, "label": "ok"}\n'
                '{"sensor": 2, "value": "high", "label": "bad"}\n'
                '{"sensor": 3, "value": 3.0, "label": "never"}\n',
            )  # fmt: skip
            received = eventually(reader.take, 10, "the first line's sample")
        assert result.returncode == 1
        assert "stdin line 2" in result.stderr
        assert "'value'" in result.stderr
        assert "1 sample(s) written before it" in result.stderr
        data = [s.data for s in received if s.info.valid_data]
        assert data == [Reading(sensor=1, value=1.0, label="ok")]

    def test_pub_without_a_type_source_times_out_clearly(
        self, domain_id: int, topic_name: str
    ) -> None:
        """`pub` of an unknown topic without --type/--idl says how to give the type."""
        result = run_dcps(
            "pub", topic_name, "--domain", str(domain_id), "--discovery-timeout", "1", stdin=""
        )
        assert result.returncode == 1
        assert "--type or --idl" in result.stderr
