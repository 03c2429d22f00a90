"""Large batches through the store's live path, both ways of carrying them (issue 19).

The store takes a PUBLISH of 128 KiB or more in place and copies its payloads
once (``dcps.wire._split``), pushes such a batch live from pieces
(``dcps._cyclone.gather``), and a subscriber takes such a live batch in place
too; smaller ones, and every sealed one (a namespace key: the tag covers the
whole sample), go the binding's way. A stream whose batches fall on both
sides of that size must arrive whole and in order, with and without a key.
"""

from __future__ import annotations

import logging
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

from dcps.channels import ChannelledTopic, ChannelPublisher, ChannelSubscriber
from dcps.store import Store, SyncMode
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._split import SPLIT_MIN
from tests.support.topic_types import Blob
from tests.support.waiting import eventually

KIB = 1024
TIMEOUT = 30.0
#: element sizes around the split/gather size, and far from it on both sides
SIZES = [64, 100 * KIB, SPLIT_MIN - 64, SPLIT_MIN + 1, 10, 1024 * KIB, 3, 200 * KIB, 64 * KIB]


def body(seq: int, size: int) -> np.ndarray[Any, Any]:
    """A payload whose every byte depends on ``seq``: a mix-up of bodies shows."""
    return ((np.arange(size, dtype=np.uint32) * 7 + seq) % 251).astype(np.uint8)


@pytest.fixture(params=[False, True], ids=["unsealed", "sealed"])
def sealed(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Whether the namespace has a key (the store and the clients made here use it)."""
    if request.param:
        monkeypatch.setenv(KEY_FILE_ENV, str(write_key_file(tmp_path / "ns.key").source))
    return bool(request.param)


@pytest.fixture
def kw(domain_id: int, namespace: str) -> dict[str, Any]:
    return {"domain_id": domain_id, "namespace": namespace}


@pytest.fixture
def store(
    sealed: bool, tmp_path: Path, kw: dict[str, Any], topic_name: str
) -> Iterator[tuple[Store, ChannelledTopic[Blob]]]:
    topic = ChannelledTopic(topic_name, Blob, channel_count=1, retain_consumed=True)
    with Store(tmp_path / "data", topics=[topic], sync=SyncMode.NORMAL, metrics_port=0, **kw) as s:
        assert s.authenticated == sealed
        yield s, topic


def test_small_and_large_batches_arrive_live_whole_and_in_order(
    store: tuple[Store, ChannelledTopic[Blob]], kw: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    s, topic = store
    caplog.set_level(logging.WARNING, logger="dcps")
    rounds = 3
    expected = [(r * len(SIZES) + i, n) for r in range(rounds) for i, n in enumerate(SIZES)]
    with ChannelSubscriber(topic, **kw) as sub:
        # one batch per element (linger 0, one in flight): every size is its own batch
        with ChannelPublisher(topic, linger=0, max_in_flight=1, **kw) as pub:
            futures = [pub.publish(Blob(seq, body(seq, n))) for seq, n in expected]
            offsets = [f.result(TIMEOUT).offset for f in futures]
        got: list[Any] = []
        eventually(
            lambda: got.extend(sub.receive(64).result(TIMEOUT)) or len(got) >= len(expected),
            timeout=TIMEOUT,
        )
    assert offsets == list(range(len(expected)))
    assert [e.position.offset for e in got] == offsets
    assert [e.value.id for e in got] == [seq for seq, _ in expected]
    for e, (seq, n) in zip(got, expected, strict=True):
        assert np.array_equal(e.value.payload, body(seq, n)), f"element {seq} of {n} bytes"
    # every batch came live: a push that failed (only logged) or that the subscriber could
    # not decode (dropped) would have been fetched instead, and the elements still arrive
    assert [r.getMessage() for r in caplog.records if "push" in r.getMessage()] == []
    assert fetched_elements(s, topic.name) == 0


def fetched_elements(store: Store, topic: str) -> float:
    """The store's count of elements it served by FETCH for ``topic`` (its metrics)."""
    assert store.metrics_url is not None
    with urllib.request.urlopen(store.metrics_url, timeout=10) as response:
        text = response.read().decode()
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "dcps_store_fetched_elements_total" and s.labels.get("topic") == topic
    )
