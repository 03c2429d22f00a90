"""Spark's batch reader over a store file whose 1 MiB elements live in segment files."""

from __future__ import annotations

import itertools
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from dcps.store._log import ChannelLog, SyncMode
from dcps.store._log_segments import segment_dir
from tests.support.spark_support import spark_session
from tests.support.topic_types import Blob

pytest.importorskip("pyspark")

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

MIB = 1 << 20
US = 1000


def body(seq: int, size: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """A payload whose every byte depends on ``seq``."""
    return (np.arange(size, dtype=np.uint32) * 7 + seq).astype(np.uint8)


class TestSparkReadsLargeElements:
    def test_batch_reader_reads_1_mib_elements_and_their_own_timestamps(
        self, tmp_path: Path
    ) -> None:
        """The data_dir reader returns every 1 MiB element byte for byte from the segments,
        with its position and its own (per element, strictly increasing) timestamp."""
        data = tmp_path / "data"
        stamps: dict[tuple[int, int], int] = {}
        with ChannelLog.in_dir(data, sync=SyncMode.NORMAL) as log:
            log.ensure_topic("frames", 2, retain_consumed=True, type_name="bench::Blob")
            for batch in range(3):
                for channel in (0, 1):
                    ids = [batch * 10 + channel * 100 + i for i in range(2)]
                    placed = log.append(
                        "frames",
                        channel,
                        [Blob(i, body(i, MIB if i % 2 == 0 else 64)).serialize() for i in ids],
                    )
                    stamps.update({(channel, o): t for o, t in placed})
        assert any(segment_dir(data / "channels.db").rglob("*.seg"))
        spark = spark_session()
        rows = (
            spark.read.format("dcps")
            .option("topic", "frames")
            .option("type", "tests.support.topic_types:Blob")
            .option("data_dir", str(data))
            .load()
            .collect()
        )
        assert len(rows) == 12
        for row in rows:
            size = MIB if row["id"] % 2 == 0 else 64
            assert bytes(row["payload"]) == body(row["id"], size).tobytes()
        for channel in (0, 1):
            mine = sorted((r for r in rows if r["_channel"] == channel), key=lambda r: r["_offset"])
            assert [r["_offset"] for r in mine] == list(range(6))
            times = [r["_store_timestamp"] for r in mine]
            # the store's own per-element times (whole µs), as Spark shows them
            assert [(b - a) // timedelta(microseconds=1) for a, b in itertools.pairwise(times)] == [
                (stamps[(channel, o + 1)] - stamps[(channel, o)]) // US for o in range(5)
            ]
            assert all(b > a for a, b in itertools.pairwise(times))
