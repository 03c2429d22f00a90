"""Options of the dcps data source: Kafka's names, refusal of unknown ones, the documented table.

Also the lag a streaming query shows in its progress reports.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.spark_support import PEERS, publish, spark_session, store_process, worker_domain

pytest.importorskip("pyspark")

from dcps import BadParameterError
from dcps.spark import offsets_behind_latest
from dcps.spark._options import KAFKA_ALIASES, OPTIONS, SourceOptions

ROOT = Path(__file__).resolve().parents[2]
TYPE = {"type": "spark_types:Reading"}
READING_IDL = """
module spark_test { struct Reading { @key long sensor; long long seq; double value; }; };
"""


def documented_options() -> dict[str, str]:
    """``{option: Kafka alias or ''}`` from the options table of docs/spark.md."""
    text = (ROOT / "docs" / "spark.md").read_text()
    section = text[text.index("## Options") :]
    section = section[: section.index("\n## ", 3)]
    rows = re.findall(r"^\| `([^`]+)` \| (?:`([^`]+)`)? *\|", section, re.M)
    return dict(rows)


class TestOptionNames:
    def test_the_documented_table_matches_the_code(self) -> None:
        """Every option and Kafka alias in the code is in the docs' table, and nothing else."""
        documented = documented_options()
        assert set(documented) == set(OPTIONS)
        assert {alias: name for name, alias in documented.items() if alias} == KAFKA_ALIASES

    def test_kafka_names_are_aliases(self) -> None:
        """Kafka's option names set the same fields as dcps's own."""
        kafka = SourceOptions.parse(
            {
                "subscribe": "readings",
                "maxOffsetsPerTrigger": "500",
                "startingOffsets": '{"readings": {"0": 12, "2": 3}}',
                "endingOffsets": "latest",
                "maxRecordsPerPartition": "1000",
                "startingTimestamp": "1700000000000000000",
                **TYPE,
            }
        )
        own = SourceOptions.parse(
            {
                "topic": "readings",
                "maxElementsPerTrigger": "500",
                "startingPositions": '{"0": 12, "2": 3}',
                "maxElementsPerPartition": "1000",
                "startTimestamp": "1700000000000000000",
                **TYPE,
            }
        )
        assert kafka == own
        assert kafka.max_per_trigger == 500
        assert kafka.starting == {0: 12, 2: 3}

    def test_names_are_case_insensitive_and_spark_options_pass(self) -> None:
        """Spark lower-cases option names; its own options (checkpointLocation, path) pass."""
        parsed = SourceOptions.parse(
            {"path": "t", "MAXOFFSETSPERTRIGGER": "7", "checkpointLocation": "/x", **TYPE}
        )
        assert (parsed.topic, parsed.max_per_trigger) == ("t", 7)

    @pytest.mark.parametrize(
        ("name", "closest"),
        [
            ("maxElementPerTrigger", "maxElementsPerTrigger"),
            ("startingOffset", "startingOffsets"),
            ("namespaces", "namespace"),
            ("domian", "domain"),
        ],
    )
    def test_an_unknown_option_is_refused_naming_the_closest(self, name: str, closest: str) -> None:
        """A misspelt option fails at once with a did-you-mean, instead of being ignored."""
        with pytest.raises(BadParameterError, match=rf"unknown option '{name}'.*'{closest}'"):
            SourceOptions.parse({"topic": "t", name: "1", **TYPE})

    def test_an_option_given_twice_with_different_values_is_refused(self) -> None:
        """An option and its Kafka alias must agree."""
        with pytest.raises(BadParameterError, match="given twice"):
            SourceOptions.parse(
                {"topic": "t", "maxOffsetsPerTrigger": "1", "maxElementsPerTrigger": "2", **TYPE}
            )

    def test_kafka_positions_for_another_topic_are_refused(self) -> None:
        """Kafka's per-topic JSON must name the topic read."""
        with pytest.raises(BadParameterError, match="names topics \\['other'\\]"):
            SourceOptions.parse({"topic": "t", "startingOffsets": '{"other": {"0": 1}}', **TYPE})


class TestTypeInTheOptions:
    def test_idl_text_names_the_type(self) -> None:
        """The IDL source in option idl gives the type, with no module to import."""
        parsed = SourceOptions.parse(
            {"topic": "t", "idl": READING_IDL, "type_name": "spark_test::Reading"}
        )
        assert [f for f in parsed.type().__annotations__] == ["sensor", "seq", "value"]

    def test_an_idl_file_is_read_on_the_driver_and_travels_as_text(self, tmp_path: Path) -> None:
        """The options carry the file's text, so executors need not see the file."""
        path = tmp_path / "reading.idl"
        path.write_text(READING_IDL)
        parsed = SourceOptions.parse(
            {"topic": "t", "idl_file": str(path), "type_name": "spark_test::Reading"}
        )
        path.unlink()
        assert parsed.idl_text == READING_IDL
        assert parsed.type().__name__ == "Reading"

    def test_a_missing_idl_file_is_named(self, tmp_path: Path) -> None:
        """An idl_file that cannot be read fails naming it."""
        with pytest.raises(BadParameterError, match=r"option idl_file .*nope\.idl"):
            SourceOptions.parse(
                {"topic": "t", "idl_file": str(tmp_path / "nope.idl"), "type_name": "x::Y"}
            )


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module."""
    domain = worker_domain(worker_id)
    namespace = f"opts_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("spark_opts"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}


class TestLagMetrics:
    def test_progress_shows_how_far_the_query_is_behind(
        self, env: dict[str, Any], unique: str, tmp_path: Path
    ) -> None:
        """With 40 per trigger over 100 elements, the first report is 60 behind, the last 0."""
        assert (PEERS / "spark_types.py").exists()
        spark = spark_session()
        src = f"lag_{unique}"
        publish(env["domain"], env["namespace"], src, 2, 0, 100)
        q = (
            spark.readStream.format("dcps")
            .options(topic=src, domain=str(env["domain"]), namespace=env["namespace"], **TYPE)
            .option("maxOffsetsPerTrigger", "40")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(tmp_path))
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(120)
        assert q.exception() is None, q.exception()
        reports = [p["sources"][0] for p in q.recentProgress if p["numInputRows"]]
        lags = [offsets_behind_latest(s)["totalOffsetsBehindLatest"] for s in reports]
        assert [s["numInputRows"] for s in reports] == [40, 40, 20]
        assert lags == [60, 20, 0]
        first = offsets_behind_latest(reports[0])
        assert sum(first["offsetsBehindLatest"].values()) == 60
        assert first["maxOffsetsBehindLatest"] >= 30
