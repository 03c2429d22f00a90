"""Content-filtered topics: readers see only matching samples; parameters change at run time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import dcps
import qos
from tests.support.qos_spec import reader_qos, writer_qos
from tests.support.topic_types import Reading
from tests.support.waiting import eventually


@pytest.fixture
def participant(domain_id: int) -> Iterator[dcps.DomainParticipant]:
    with dcps.DomainParticipant(domain_id) as p:
        yield p


@pytest.fixture
def topic(participant: dcps.DomainParticipant, topic_name: str) -> dcps.Topic[Reading]:
    return dcps.Topic(participant, topic_name, Reading)


def write_all(writer: dcps.DataWriter[Reading], rows: list[tuple[int, float, str]]) -> None:
    for sensor, value, label in rows:
        writer.write(Reading(sensor, value, label))
    writer.wait_for_acknowledgments(10)


class TestContentFilteredTopic:
    def test_reader_sees_only_matching_samples(self, participant, topic) -> None:
        """A reader on a filtered topic gets matching samples; a plain reader gets all."""
        hot = dcps.ContentFilteredTopic("hot", topic, "value > %0 AND label LIKE 'lab%'", ["30"])
        filtered = dcps.DataReader(
            participant, hot, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        plain = dcps.DataReader(
            participant, topic, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers(2)
        write_all(
            writer, [(1, 25.0, "lab1"), (2, 35.0, "lab2"), (3, 40.0, "yard"), (4, 31.0, "lab3")]
        )
        eventually(lambda: len(plain.read()) == 4)
        assert sorted(s.data.sensor for s in filtered.take()) == [2, 4]

    def test_parameters_change_at_run_time(self, participant, topic) -> None:
        """New parameters apply to samples that arrive afterwards."""
        cft = dcps.ContentFilteredTopic("band", topic, "value BETWEEN %0 AND %1", ["0", "10"])
        reader = dcps.DataReader(
            participant, cft, qos=reader_qos({"reliable": True, "keep_all": True})
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        write_all(writer, [(1, 5.0, ""), (2, 50.0, "")])
        assert [s.data.sensor for s in eventually(lambda: reader.take())] == [1]
        cft.set_expression_parameters(["40", "60"])
        assert cft.expression_parameters == ("40", "60")
        write_all(writer, [(3, 5.0, ""), (4, 50.0, "")])
        assert [s.data.sensor for s in eventually(lambda: reader.take())] == [4]

    def test_filter_works_with_subscription_keys(self, participant, topic) -> None:
        """A filtered reader can also key its instances by its own key list."""
        cft = dcps.ContentFilteredTopic("labelled", topic, "label <> ''")
        reader = dcps.DataReader(
            participant,
            cft,
            qos=reader_qos({"reliable": True, "keep_all": True}).with_(
                qos.SubscriptionKeys.of("label")
            ),
        )
        writer = dcps.DataWriter(participant, topic, qos=writer_qos({"reliable": True}))
        writer.wait_for_readers()
        write_all(writer, [(1, 1.0, "a"), (2, 2.0, ""), (3, 3.0, "a")])
        samples = eventually(lambda: len(reader.read()) == 2 and reader.read())
        assert {s.info.instance_handle for s in samples} == {samples[0].info.instance_handle}


class TestFilterErrors:
    def test_malformed_expression_names_the_position(self, topic) -> None:
        """A syntax error raises FilterSyntaxError pointing into the expression."""
        with pytest.raises(dcps.FilterSyntaxError) as caught:
            dcps.ContentFilteredTopic("bad", topic, "value > AND label = 'x'")
        assert caught.value.position == 8

    def test_unknown_field_is_refused(self, topic) -> None:
        """A field the type lacks is named in the error."""
        with pytest.raises(dcps.FilterSyntaxError, match="speed"):
            dcps.ContentFilteredTopic("bad", topic, "speed > 3")

    def test_missing_parameter_is_refused(self, topic) -> None:
        """%1 without a second parameter is an error before any reader exists."""
        with pytest.raises(dcps.FilterSyntaxError, match="%1"):
            dcps.ContentFilteredTopic("bad", topic, "value > %1", ["1"])

    def test_bad_new_parameters_keep_the_old_ones(self, topic) -> None:
        """A parameter that does not fit the field type is refused; the filter is unchanged."""
        cft = dcps.ContentFilteredTopic("ok", topic, "value > %0", ["1"])
        with pytest.raises(dcps.BadParameterError):
            cft.set_expression_parameters(["'text'"])
        assert cft.expression_parameters == ("1",)
