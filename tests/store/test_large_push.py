"""The store's live push of large batches without joining them (issue 19).

``message_pieces`` lays out a LiveBatch (or a Request) in pieces (the payloads one piece of
their own) and ``write_gathered`` hands the pieces to Cyclone as an iovec
array: what a subscriber's reader takes must be the very sample the binding
would have written.
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from dcps import BadParameterError, DcpsError
from dcps._cyclone.binding import entity_ref
from dcps._cyclone.gather import GATHER_MIN, write_gathered
from dcps.channels._client import StoreClient
from dcps.store import Store
from dcps.store._log_segments import crc_of
from dcps.wire._batches import message_pieces
from dcps.wire._messages import LiveBatch
from dcps.wire._names import BATCH_READER_QOS, BATCH_WRITER_QOS
from dcps.wire._requests import PublishRequest
from dcps.wire._transport import Endpoint, Waiter, delete_entity
from tests.support.waiting import eventually

MIB = 1 << 20


def live(topic: str, sizes: list[int], blob: bytes, first: int = 1 << 40) -> LiveBatch:
    return LiveBatch(
        topic=topic,
        channel=7,
        first=first,
        timestamp=1_700_000_000_123_456_789,
        sizes=sizes,
        blob=blob,
    )


@pytest.mark.parametrize("topic", ["t", "ab", "abc", "abcd", "topic_é", "x" * 61])
@pytest.mark.parametrize(
    "sizes", [[], [3], [1, 2, 5], [4], [7, 0], [MIB]], ids=lambda s: f"{len(s)}elements"
)
def test_pieces_are_the_binding_serialisation(topic: str, sizes: list[int]) -> None:
    blob = os.urandom(sum(sizes))
    pieces = message_pieces(live(topic, sizes, blob))
    assert b"".join(pieces) == live(topic, sizes, blob).serialize()
    assert any(p is blob for p in pieces) or not blob  # the payloads are not copied


@pytest.mark.parametrize("topic", ["t", "abc", "topic_é"])
@pytest.mark.parametrize("sizes", [[], [3], [1, 2, 5], [MIB, 1]], ids=lambda s: f"{len(s)}elements")
def test_a_publish_request_in_pieces_is_its_serialisation(topic: str, sizes: list[int]) -> None:
    """What a client writes gathered is the very sample the binding would write."""
    blob = os.urandom(sum(sizes))
    wire = PublishRequest(topic, 5, sizes, blob, "key-1").to_wire("client-é", 0)
    wire.request_id = 1 << 40
    pieces = message_pieces(wire)
    assert b"".join(pieces) == wire.serialize()
    assert any(p is blob for p in pieces) or not blob  # the payloads are not copied
    batch = live(topic, sizes, blob)
    assert b"".join(message_pieces(batch)) == batch.serialize()


def test_a_sealed_message_is_not_cut_into_pieces() -> None:
    sealed = live("t", [1], b"x")
    sealed.auth = b"tag"
    with pytest.raises(BadParameterError, match="sealed"):
        message_pieces(sealed)


@pytest.fixture
def ends(domain_id: int, unique: str) -> Iterator[tuple[Any, Any, Waiter]]:
    """A live-batch writer and reader of one partition, with a waiter on the reader."""
    endpoint = Endpoint(domain_id, f"ns_{unique}")
    writer = endpoint.writer(endpoint.batch_topic, f"p_{unique}", BATCH_WRITER_QOS)
    reader = endpoint.reader(endpoint.batch_topic, f"p_{unique}", BATCH_READER_QOS)
    waiter = Waiter(endpoint)
    waiter.watch(reader)
    try:
        yield writer, reader, waiter
    finally:
        waiter.close()
        endpoint.close()


def test_a_gathered_1_mib_batch_arrives_whole(ends: tuple[Any, Any, Waiter]) -> None:
    writer, reader, _ = ends
    blob = os.urandom(MIB + 3)  # not a multiple of 4: the sample is padded as the binding pads
    view = memoryview(blob)
    write_gathered(entity_ref(writer), message_pieces(live("t", [MIB, 3], view, first=5)))
    write_gathered(entity_ref(writer), message_pieces(live("t", [2], b"ok", first=7)))
    got: list[LiveBatch] = []
    eventually(lambda: got.extend(reader.take(N=8)) or len(got) >= 2, timeout=10)
    assert [(b.first, b.sizes, bytes(b.blob)) for b in got] == [
        (5, [MIB, 3], blob),
        (7, [2], b"ok"),
    ]
    assert (got[0].topic, got[0].channel, got[0].timestamp) == (
        "t",
        7,
        live("t", [], b"").timestamp,
    )


def test_malformed_pieces_are_refused_and_nothing_is_written(ends: tuple[Any, Any, Waiter]) -> None:
    writer, reader, _ = ends
    pieces = message_pieces(live("t", [10], b"0123456789", first=5))
    with pytest.raises(BadParameterError, match="malformed"):
        # the blob's length says 10 bytes, 4 follow: Cyclone's check of the form refuses it
        write_gathered(entity_ref(writer), [pieces[0], b"0123"])
    write_gathered(entity_ref(writer), pieces)
    got: list[LiveBatch] = []
    eventually(lambda: got.extend(reader.take(N=8)) or got, timeout=10)
    assert [bytes(b.blob) for b in got] == [b"0123456789"]


def test_a_writer_that_is_gone_raises_a_dcps_error(domain_id: int, unique: str) -> None:
    endpoint = Endpoint(domain_id, f"ns_{unique}")
    writer = endpoint.writer(endpoint.batch_topic, f"p_{unique}", BATCH_WRITER_QOS)
    ref = entity_ref(writer)
    endpoint.close()
    with pytest.raises(DcpsError, match="failed: DDS_RETCODE"):
        write_gathered(ref, message_pieces(live("t", [1], b"x", first=5)))


@pytest.mark.parametrize("size", [0, 1, 3, 4096, MIB + 1])
def test_segment_crc_is_zlibs(size: int) -> None:
    data = os.urandom(size)
    assert crc_of(data) == zlib.crc32(data)
    assert crc_of(memoryview(data)[1:]) == zlib.crc32(data[1:])


def test_a_failed_write_raises_the_same_dcps_error_for_small_and_large_publishes(
    store: Store, domain_id: int, namespace: str
) -> None:
    """A PUBLISH of 128 KiB or more is written gathered, a smaller one through the binding:
    a writer that is gone fails both with the same dcps error, not a cyclonedds one."""
    endpoint = Endpoint(domain_id, namespace)
    client = StoreClient(endpoint, request_timeout=10.0, key=None, admin_key=None)
    try:
        client.connect(10.0)
        client.ensure_topic("big", 1, True, timeout=10.0)
        delete_entity(client._writers[0])
        errors = []
        for size in (10, GATHER_MIN):
            with pytest.raises(DcpsError) as failed:
                client.publish_async("big", 0, [size], bytes(size))
            errors.append(failed.value)
        assert type(errors[0]) is type(errors[1]), errors
    finally:
        client._writers = []  # deleted already: close() must not delete it again
        client.close()
        endpoint.close()
