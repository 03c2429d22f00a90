"""What a Spark worker imports: the store-file reader stays clear of the DDS entity layer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")

# modules a worker reading the store file (data_dir) does not need
HEAVY = [
    "qos",
    "dcps._participant",
    "dcps.sql._filter",
    "dcps.wire._transport",
    "dcps.store._service",
]


def imported_after(statement: str) -> dict[str, bool]:
    """Which of HEAVY are loaded after running ``statement`` in a fresh interpreter."""
    code = (
        "import json, sys\n"
        f"{statement}\n"
        f"print(json.dumps({{m: m in sys.modules for m in {HEAVY!r}}}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return dict(json.loads(out.stdout.splitlines()[-1]))


class TestLightImport:
    def test_source_module_does_not_load_dds_entities(self) -> None:
        """Importing the Spark source loads no DDS entities, QoS, SQL grammar or store."""
        assert imported_after("import dcps.spark._source") == dict.fromkeys(HEAVY, False)

    def test_public_names_still_resolve(self) -> None:
        """``dcps.DomainParticipant`` and ``dcps.store.Store`` still work, loading on use."""
        loaded = imported_after(
            "import dcps, dcps.channels, dcps.store\n"
            "assert dcps.DomainParticipant.__name__ == 'DomainParticipant'\n"
            "assert dcps.store.Store.__name__ == 'Store'\n"
            "from dcps import DataReader, QueryExpression"
        )
        assert loaded["dcps._participant"]
        assert loaded["dcps.store._service"]

    def test_unknown_name_raises_attribute_error(self) -> None:
        """A misspelt name still raises AttributeError naming it."""
        import dcps

        with pytest.raises(AttributeError, match="DomainParticipnt"):
            dcps.DomainParticipnt  # noqa: B018
