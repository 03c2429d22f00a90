"""How far a streaming query is behind its dcps topic, from Spark's progress reports.

PySpark 4.x gives a Python stream reader no hook for custom source metrics:
Spark's ``PythonMicroBatchStream`` does not implement ``ReportsSourceMetrics``,
so ``SourceProgress.metrics`` stays empty for every Python data source. What
it does carry is the source's latest offset: the reader implements
``reportLatestOffset`` (Spark's ``SupportsAdmissionControl``), so every
progress report of a dcps source holds ``latestOffset`` (each channel's next
offset in the store when the micro-batch was planned) next to ``endOffset``
(where the micro-batch ended). :func:`offsets_behind_latest` turns those two
into the lag per channel, the figures of Kafka's ``offsetsBehindLatest``
metrics; a subscriber ``group`` (option) shows the same lag in the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["offsets_behind_latest"]


def _offsets(value: Any) -> dict[int, int]:
    if value is None:
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    return {int(k): int(v) for k, v in value.items()}


def offsets_behind_latest(source: Mapping[str, Any]) -> dict[str, Any]:
    """The lag of one source of a streaming progress report (``progress["sources"][i]``).

    Returns ``{"offsetsBehindLatest": {channel: elements}, "maxOffsetsBehindLatest":
    n, "avgOffsetsBehindLatest": x, "totalOffsetsBehindLatest": n}`` (Kafka's
    names), computed from the report's ``latestOffset`` and ``endOffset``;
    empty figures when Spark reported no latest offset.
    """
    latest = _offsets(source.get("latestOffset"))
    end = _offsets(source.get("endOffset"))
    behind = {c: max(0, n - end.get(c, 0)) for c, n in sorted(latest.items())}
    total = sum(behind.values())
    return {
        "offsetsBehindLatest": behind,
        "maxOffsetsBehindLatest": max(behind.values(), default=0),
        "avgOffsetsBehindLatest": total / len(behind) if behind else 0.0,
        "totalOffsetsBehindLatest": total,
    }
