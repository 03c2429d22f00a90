"""A durable filter's ``preselect``: elements it rules out on the encoded delivery are never
decoded nor shown to ``matches``, and are acknowledged unseen like any dropped element."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from dcps.channels import ChannelledTopic
from idl._batch_codec import split_blob
from tests.durables.conftest import TIMEOUT, Durables
from tests.support.peers.channels_types import Msg
from tests.support.waiting import eventually


class EveryThird:
    """Keeps ``seq % 3 == 0``; ``preselect`` reads each element's bytes and lets through
    only even or multiple-of-3 seqs (a superset of what it keeps), or declines (None)."""

    def __init__(self, declines: bool) -> None:
        self.declines = declines
        self.shown: list[int] = []  # every seq matches was asked about

    def matches(self, value: Any) -> bool:
        self.shown.append(value.seq)
        return bool(value.seq % 3 == 0)

    def preselect(self, blob: bytes, sizes: Sequence[int]) -> list[bool] | None:
        if self.declines:
            return None
        seqs = [Msg.deserialize(p).seq for p in split_blob(blob, list(sizes))]
        return [s % 2 == 0 or s % 3 == 0 for s in seqs]


@pytest.mark.parametrize("declines", [False, True], ids=["rules-out", "declines"])
def test_ruled_out_elements_are_never_shown_and_are_acknowledged(
    durables: Durables, topic: ChannelledTopic, declines: bool
) -> None:
    """Exactly the kept elements arrive in order; what preselect ruled out never reaches
    ``matches``; every dropped element is acknowledged (nothing stays outstanding)."""
    keep = EveryThird(declines)
    sub = durables.sub(topic, "pre", window=None, filter="x", filter_compiler=lambda _: keep)
    durables.publish(topic, range(60))
    expected = [s for s in range(60) if s % 3 == 0]
    got = [sub.receive(TIMEOUT) for _ in expected]
    assert [e.value.seq for e in got] == expected
    shown = sorted(set(keep.shown))
    if declines:
        assert shown == list(range(60))
    else:
        assert shown == [s for s in range(60) if s % 2 == 0 or s % 3 == 0]
    sub.ack(got)
    assert eventually(lambda: sub.info().outstanding == 0)
    assert sub.filtered == 60 - len(expected)
