"""The store's counters keep one child per family and label set (issue 19 caches them):
what is counted for one family, topic, request kind or result never lands in another."""

from __future__ import annotations

from pathlib import Path

from dcps.store._metrics import StoreMetrics
from dcps.wire._codes import ErrorCode, Op


def metrics(tmp_path: Path) -> StoreMetrics:
    return StoreMetrics(
        log_path=tmp_path / "channels.db", auth_drops=dict, clients=lambda: 0, labels={}
    )


def value(m: StoreMetrics, name: str, **labels: str) -> float:
    return m.registry.get_sample_value(name, labels) or 0.0


def test_each_family_and_topic_counts_on_its_own(tmp_path: Path) -> None:
    m = metrics(tmp_path)
    for _ in range(2):  # the second time through the kept children
        m.published("a", 3, 30)
        m.stored("a", 2, 20)
        m.pushed("a", 1, 10)
        m.fetched("b", 5, 50)
        m.published("b", 7, 70)
    assert [
        value(m, f"dcps_store_{family}_{unit}_total", topic=topic)
        for family, topic in [
            ("published", "a"),
            ("stored", "a"),
            ("pushed", "a"),
            ("fetched", "b"),
            ("published", "b"),
            ("stored", "b"),
        ]
        for unit in ("elements", "bytes")
    ] == [6, 60, 4, 40, 2, 20, 10, 100, 14, 140, 0, 0]


def test_each_request_kind_and_result_counts_on_its_own(tmp_path: Path) -> None:
    m = metrics(tmp_path)
    for _ in range(2):
        m.request(Op.PUBLISH)
        m.request(int(Op.PUBLISH), ErrorCode.BAD_PARAMETER)
        m.request(Op.FETCH)
        m.request(-1)
    counts = {
        (kind, result): value(m, "dcps_store_requests_total", kind=kind, result=result)
        for kind, result in [
            ("publish", "ok"),
            ("publish", "bad_parameter"),
            ("fetch", "ok"),
            ("unknown", "ok"),
            ("fetch", "bad_parameter"),
        ]
    }
    assert counts == {
        ("publish", "ok"): 2,
        ("publish", "bad_parameter"): 2,
        ("fetch", "ok"): 2,
        ("unknown", "ok"): 2,
        ("fetch", "bad_parameter"): 0,
    }
