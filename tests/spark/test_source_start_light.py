"""A query's stream reader process starts without importing dcps (dcps/spark/_stream.py).

Spark unpickles the data source in a fresh interpreter per streaming query and makes
its stream reader there; what it unpickles imports neither Cyclone DDS nor ``idl`` nor
``dcps``, and the query's start still comes out exactly:

- in a fresh interpreter, as Spark's runner does it: the reader is made with no dcps
  module loaded; its first micro-batch ends at the shipped tails, the query's end at the
  store's tails when it started (rows stored after pickling included), and a second
  data source pickled without a store connection still fails by name at the first offset;
- the shipped copy still serves every other call (schema, batch reader) through the
  full data source.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark import cloudpickle  # as Spark pickles a data source

from dcps.spark import _access
from dcps.spark._schema import spark_schema
from dcps.spark._source import DcpsDataSource
from tests.support.spark_support import publish, store_process, worker_domain

pytestmark = [pytest.mark.multiprocess]

TYPE = "spark_types:Reading"
CHANNELS = 3
#: Top-level packages the stream reader's process must not load to make its reader.
HEAVY = ("cyclonedds", "dcps", "idl", "qos")

#: What Spark's python_streaming_source_runner does with the pickled data source (its
#: pickleSer is cloudpickle, whose loads is pickle.loads), then the calls of an
#: availableNow query's start; prints what was loaded and the offsets, as JSON.
READER = r"""
import json, pickle, sys
from pyspark.sql.streaming.datasource import ReadAllAvailable
from pyspark.sql.types import _parse_datatype_json_string
source = pickle.loads(open(sys.argv[1], "rb").read())
reader = source.streamReader(_parse_datatype_json_string(sys.argv[2]))
heavy = sorted(m for m in sys.modules if m.split(".")[0] in sys.argv[3].split(","))
out = {"heavy": heavy}
try:
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    out.update(start=start, end=end, reported=reader.reportLatestOffset())
    out["parts"] = [list(p.value) for p in reader.partitions(start, end)]
    out["final"] = reader.latestOffset(end, ReadAllAvailable())
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
finally:
    reader.stop()
print(json.dumps(out))
"""


def options(domain: int, namespace: str, topic: str) -> dict[str, str]:
    """Source options for ``topic`` of a store (short timeout: a missing store fails fast)."""
    return {
        "topic": topic,
        "type": TYPE,
        "domain": str(domain),
        "namespace": namespace,
        "timeout": "2",
    }


def reader_process(blob: bytes, tmp: Path) -> dict[str, Any]:
    """Run READER on ``blob`` in a fresh interpreter; its JSON output."""
    from spark_types import Reading  # tests/support/peers, on the test PYTHONPATH

    path = tmp / f"source_{uuid.uuid4().hex[:6]}.pickle"
    path.write_bytes(blob)
    schema = spark_schema(Reading).json()
    done = subprocess.run(
        [sys.executable, "-c", READER, str(path), schema, ",".join(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def env(worker_id: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A store process private to this module."""
    domain = worker_domain(worker_id)
    namespace = f"light_{uuid.uuid4().hex[:8]}"
    for store in store_process(tmp_path_factory.mktemp("spark_light"), domain, namespace):
        yield {"domain": domain, "namespace": namespace, "store": store}
    for key in [k for k in _access._cache if k[1] == namespace]:
        _access._cache.pop(key).close()


class TestReaderProcess:
    def test_the_reader_is_made_without_dcps_and_plans_the_start_exactly(
        self, env: dict[str, Any], tmp_path: Path
    ) -> None:
        """12 rows, pickled with a store connection, then 6 more: in a fresh interpreter
        the reader is made with no dcps, idl or cyclonedds module loaded; the first
        micro-batch is the 12 shipped rows, planned as their channel ranges, and the query
        ends at the store's 18."""
        domain, namespace = env["domain"], env["namespace"]
        topic = f"light_{uuid.uuid4().hex[:6]}"
        publish(domain, namespace, topic, CHANNELS, 0, 12)
        _access.connect_store(domain, namespace, None, 30.0)  # the planner's connection
        blob = cloudpickle.dumps(DcpsDataSource(options(domain, namespace, topic)))
        publish(domain, namespace, topic, CHANNELS, 12, 6)
        out = reader_process(blob, tmp_path)
        assert out["heavy"] == []
        assert "error" not in out, out["error"]
        assert out["start"] == {str(c): 0 for c in range(CHANNELS)}
        assert sum(out["end"].values()) == 12
        assert out["reported"] == out["end"]
        ranges = sorted([int(c), 0, n] for c, n in out["end"].items() if n > 0)
        assert sorted(out["parts"]) == ranges
        assert sum(out["final"].values()) == 18

    def test_without_shipped_states_the_first_offset_names_the_missing_store(
        self, worker_id: str, tmp_path: Path
    ) -> None:
        """No store connection where it was pickled (so no states shipped) and no store:
        the reader is still made without dcps, and its first offset call fails with the
        store's timeout naming the namespace."""
        namespace = f"none_{uuid.uuid4().hex[:8]}"
        opts = options(worker_domain(worker_id), namespace, "t")
        blob = cloudpickle.dumps(DcpsDataSource(opts))
        out = reader_process(blob, tmp_path)
        assert out["heavy"] == []
        assert out["error"].startswith("DcpsTimeoutError"), out
        assert namespace in out["error"]


class TestOtherCalls:
    def test_the_shipped_copy_still_gives_the_schema_and_a_batch_read(
        self, env: dict[str, Any]
    ) -> None:
        """A planner worker gets the shipped copy too: its schema is the type's and its
        batch reader plans all stored rows of the topic."""
        domain, namespace = env["domain"], env["namespace"]
        topic = f"other_{uuid.uuid4().hex[:6]}"
        publish(domain, namespace, topic, CHANNELS, 0, 9)
        original = DcpsDataSource(options(domain, namespace, topic))
        shipped = cloudpickle.loads(cloudpickle.dumps(original))
        schema = shipped.schema()
        assert schema == original.schema()
        parts = shipped.reader(schema).partitions()
        assert sum(p.end - p.start for p in parts) == 9
