"""The store's service loop takes the publishes of a take first (issue 19, latency).

A ``Store`` on a real log in a temporary directory, not started (no DDS entity): one
take of request samples is served as the service thread serves it (``_serve``), its
replies and live batches kept in lists (``Answered`` of ``test_service_mutants.py``).
End to end over DDS: tests/channels.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dcps.store import _service as service
from dcps.store._groups import GroupCoordinator
from dcps.store._log import SyncMode
from dcps.wire._messages import Reply
from dcps.wire._replies import ChannelStates, Published
from dcps.wire._requests import EnsureTopicRequest, PublishRequest, StateRequest
from tests.store.test_service_mutants import Answered


class Take:
    """Stands for the store's request reader: one take of the samples given."""

    def __init__(self, samples: list[Any]) -> None:
        self.samples = samples

    def take(self, n: int) -> list[Any]:
        taken, self.samples = self.samples[:n], self.samples[n:]
        return taken


def take_decoded(reader: Take, cls: Any, max_samples: int, *, sealed: bool) -> list[Any]:
    """``dcps.wire._split.take_decoded`` of the stand-in reader (the samples as given)."""
    return reader.take(max_samples)


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Answered]:
    monkeypatch.setattr(service, "take_decoded", take_decoded)
    s = Answered(tmp_path / "store", sync=SyncMode.NORMAL, key=None, admin_key=None)
    s._next_share_check = float("inf")  # no DDS: no other store to look for
    s._groups = GroupCoordinator(s.log, None, s.incarnation)  # made by start(); no groups
    try:
        # retained: no trim transaction after a publish (the counts below are the appends)
        s._handle(s._admit(EnsureTopicRequest("t", 2, True).to_wire("setup", 1)))  # type: ignore[arg-type]
        s.replies.clear()
        yield s
    finally:
        s.log.close()


def publish(client: str, rid: int, channel: int, *blobs: bytes) -> Any:
    return PublishRequest("t", channel, [len(b) for b in blobs], b"".join(blobs)).to_wire(
        client, rid
    )


def state(client: str, rid: int) -> Any:
    return StateRequest("t", "", (0, 1)).to_wire(client, rid)


def serve(store: Answered, samples: list[Any]) -> list[Reply]:
    store._requests = Take(samples)
    store._serve()
    return store.replies


def commits(store: Answered) -> float:
    """Write transactions the log committed so far (the store's commit-time histogram)."""
    value = store.metrics.registry.get_sample_value("dcps_store_sqlite_commit_seconds_count")
    return value or 0.0


def tails(reply: Reply) -> list[int]:
    return list(ChannelStates.from_wire(reply).tails)


class TestPublishesFirst:
    def test_other_clients_publishes_go_ahead_of_a_request_in_one_transaction(
        self, store: Answered
    ) -> None:
        """A state request between two publishers' publishes waits for both, and the two
        publishes share one transaction: the state answer sees both elements."""
        before = commits(store)
        replies = serve(store, [publish("a", 1, 0, b"x"), state("b", 1), publish("c", 1, 1, b"y")])
        assert [(r.client, int(r.request_id)) for r in replies] == [("a", 1), ("c", 1), ("b", 1)]
        assert tails(replies[2]) == [0, 0]  # channel 0 and 1 each hold offset 0
        assert [Published.from_wire(r).first for r in replies[:2]] == [0, 0]
        assert commits(store) - before == 1
        assert [(t, c) for (t, c), w in store.live.items() if w.batches] == [("t", 0), ("t", 1)]

    def test_a_clients_own_requests_keep_their_order(self, store: Answered) -> None:
        """A client's publish after its own state request is not moved ahead of it: the
        state answer does not see it; another client's publish still goes first."""
        replies = serve(store, [state("b", 1), publish("b", 2, 0, b"x"), publish("a", 1, 1, b"y")])
        assert [(r.client, int(r.request_id)) for r in replies] == [
            ("a", 1),
            ("b", 1),
            ("b", 2),
        ]
        assert tails(replies[1]) == [-1, 0]  # b's own publish came after its question
        assert Published.from_wire(replies[2]).first == 0

    def test_a_refused_publish_does_not_stop_the_others(self, store: Answered) -> None:
        """A publish to a channel the topic lacks is refused alone; the others are stored."""
        replies = serve(store, [publish("a", 1, 5, b"x"), publish("c", 1, 1, b"y", b"z")])
        assert [r.client for r in replies] == ["a", "c"]
        assert replies[0].status != 0
        assert Published.from_wire(replies[1]).count == 2
