"""Taking requests and live batches with their payloads copied once (issue 19).

``decode_split`` must decode exactly what the codec decodes from the whole
sample, for every layout of the fields ahead of the blob (their lengths move
the alignment of everything after them); ``take_views`` must hand over each
valid sample's bytes as they were written.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import take_views
from dcps.wire._messages import LiveBatch, Request, UndecodableRequest
from dcps.wire._names import ANY_STATE, BATCH_READER_QOS, BATCH_WRITER_QOS
from dcps.wire._split import (
    LIVE_BATCH_HEAD,
    REQUEST_HEAD,
    decode_split,
    splitter,
    take_decoded,
)
from dcps.wire._transport import Endpoint
from tests.support.waiting import eventually

MIB = 1 << 20
text = st.text(max_size=9)
i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
octets = st.binary(max_size=40)


def wire(sample: Any) -> bytes:
    """The sample as a writer sends it (padded to a multiple of 4 bytes)."""
    data: bytes = sample.serialize()
    return data.ljust((len(data) + 3) & ~3, b"\0")


def fields(sample: Any) -> dict[str, Any]:
    return {f.name: getattr(sample, f.name) for f in dataclasses.fields(sample)}


requests = st.builds(
    Request,
    client=text,
    request_id=i64,
    op=i32,
    topic=text,
    group=text,
    member=text,
    number=i64,
    flag=i32,
    text=text,
    channels=st.lists(i32, max_size=3),
    offsets=st.lists(i64, max_size=3),
    sizes=st.lists(i32, max_size=3),
    blob=octets,
    auth=octets,
)
batches = st.builds(
    LiveBatch,
    topic=text,
    channel=i32,
    first=i64,
    timestamp=i64,
    sizes=st.lists(i32, max_size=4),
    blob=octets,
    auth=octets,
)


@settings(max_examples=300, deadline=None)
@given(requests)
def test_a_split_request_is_the_whole_one(request: Request) -> None:
    data = wire(request)
    split = decode_split(Request, REQUEST_HEAD, memoryview(data))
    assert fields(split) == fields(Request.deserialize(data)) == fields(request)


@settings(max_examples=300, deadline=None)
@given(batches)
def test_a_split_live_batch_is_the_whole_one(batch: LiveBatch) -> None:
    data = wire(batch)
    split = decode_split(LiveBatch, LIVE_BATCH_HEAD, memoryview(data))
    assert fields(split) == fields(batch)
    assert type(split.blob) is bytes


@pytest.mark.parametrize("cut", [1, 4, 6, 9, 40])
def test_a_truncated_request_is_undecodable_as_before(cut: int) -> None:
    data = wire(Request(client="c", request_id=1, op=1, topic="t", sizes=[3], blob=b"abc"))
    split = decode_split(Request, REQUEST_HEAD, memoryview(data[:-cut]))
    assert isinstance(split, UndecodableRequest)
    assert split == Request.deserialize(data[:-cut])


def taken(reader: Any, count: int, sealed: bool) -> list[LiveBatch]:
    """``count`` live batches taken from ``reader`` by ``take_decoded``."""
    got: list[LiveBatch] = []
    eventually(
        lambda: got.extend(take_decoded(reader, LiveBatch, 4, sealed=sealed)) or len(got) >= count
    )
    return got


def test_small_and_sealed_samples_are_decoded_whole_and_keep_their_bytes(
    ends: tuple[Any, Any],
) -> None:
    writer, reader = ends
    small = LiveBatch(topic="t", channel=1, first=2, timestamp=3, sizes=[2], blob=b"ab")
    large = LiveBatch(topic="t", channel=1, first=3, timestamp=3, sizes=[MIB], blob=bytes(MIB))
    for sealed in (True, False, False):
        writer.write(small)
        writer.write(large)
        got = taken(reader, 2, sealed)
        assert [fields(b) for b in got] == [fields(small), fields(large)]
        assert got[0]._wire == wire(small)  # what an authentication tag is checked over
        # a large one keeps its bytes only when sealed (decoded whole)
        assert (got[1]._wire is not None) == sealed


def test_a_view_that_does_not_decode_is_left_out() -> None:
    assert splitter(LiveBatch)(memoryview(b"\x00\x01\x00\x00\xff")) is None


@pytest.fixture
def ends(domain_id: int, unique: str) -> Iterator[tuple[Any, Any]]:
    endpoint = Endpoint(domain_id, f"ns_{unique}")
    writer = endpoint.writer(endpoint.batch_topic, f"p_{unique}", BATCH_WRITER_QOS)
    reader = endpoint.reader(endpoint.batch_topic, f"p_{unique}", BATCH_READER_QOS)
    try:
        yield writer, reader
    finally:
        endpoint.close()


def test_taken_views_are_the_written_bytes_and_read_only(ends: tuple[Any, Any]) -> None:
    writer, reader = ends
    batches = [
        LiveBatch(topic="t", channel=3, first=i, timestamp=i, sizes=[n], blob=os.urandom(n))
        for i, n in enumerate([MIB, 5, 0])
    ]
    for b in batches:
        writer.write(b)
    seen: list[bytes] = []

    def use(view: memoryview) -> int:
        with pytest.raises(TypeError):
            view[0] = 1  # Cyclone's own buffer: never written through
        seen.append(bytes(view))
        return len(view)

    eventually(lambda: take_views(entity_ref(reader), ANY_STATE, 8, use) and len(seen) == 3)
    assert seen == [wire(b) for b in batches]


def test_take_decoded_gives_the_batches_in_order(ends: tuple[Any, Any]) -> None:
    writer, reader = ends
    blobs = [os.urandom(n) for n in (MIB + 1, 3, 64 << 10)]
    for i, blob in enumerate(blobs):
        writer.write(
            LiveBatch(topic="t", channel=3, first=i, timestamp=7, sizes=[len(blob)], blob=blob)
        )
    got: list[LiveBatch] = []
    eventually(
        lambda: got.extend(take_decoded(reader, LiveBatch, 2, sealed=False)) or len(got) == 3
    )
    assert [(b.first, b.blob, b.sizes) for b in got] == [
        (i, blob, [len(blob)]) for i, blob in enumerate(blobs)
    ]
