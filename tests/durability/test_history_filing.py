"""A reader files a page of stored history once per sample, in source-timestamp order.

The late joiner's fast path (a page decoded by column, filed without a Python
loop per sample) must give what filing one sample at a time gives: these pin
the cases it has to leave, out-of-order pages, repeated and already seen
samples, disposed instances, and a payload that does not decode.
"""

from __future__ import annotations

import pytest

import dcps
import idl
import qos as q
from dcps._history import DurableCache
from dcps.wire._durability import (
    FLAG_DISPOSED,
    StoredSample,
    decode_columns,
    encode_samples,
)
from idl._struct import decoder

WRITER = b"w" * 16


class Reading(idl.Struct, typename="test_filing::Reading"):
    sensor: idl.key[idl.int32]
    value: idl.float64


def _sample(sensor: int, ts: int, value: float, flags: int = 0) -> StoredSample:
    payload = Reading(sensor, value).serialize()
    return StoredSample("T", "", sensor.to_bytes(4, "little"), WRITER, ts, ts, flags, payload)


def _cache(history: q.History = q.History.KEEP_ALL) -> DurableCache[Reading]:
    return DurableCache(Reading, q.DataReaderQos(q.Durability.TRANSIENT, history))


def _file(cache: DurableCache[Reading], samples: list[StoredSample], late: bool = False) -> bool:
    page = decode_columns(encode_samples(samples))
    return cache.file_history(page, decoder(Reading), set(), late=late)


def _taken(cache: DurableCache[Reading]) -> list[tuple[int, float, int]]:
    out = cache.access(True, 1 << 30, 0xFFFF)
    return sorted((s.data.sensor, s.data.value, s.info.source_timestamp_ns) for s in out)


def test_a_page_out_of_timestamp_order_is_filed_in_order() -> None:
    """A KEEP_LAST(1) reader keeps the newest value of each sensor, whatever the page order."""
    cache = _cache(q.History.keep_last(1))
    samples = [_sample(i % 10, 1000 - i, float(i)) for i in range(100)]  # newest first
    assert _file(cache, samples)
    assert _taken(cache) == [(s, float(s), 1000 - s) for s in range(10)]


def test_samples_repeated_in_a_page_or_seen_before_are_filed_once() -> None:
    cache = _cache()
    first = [_sample(i % 7, 10 + i, float(i)) for i in range(200)]
    assert _file(cache, first + first[:50])
    assert not _file(cache, first[100:])  # a second service serving the same history
    assert _file(cache, [*first[150:], _sample(3, 5000, -1.0)])
    taken = _taken(cache)
    assert len(taken) == 201
    assert (3, -1.0, 5000) in taken


def test_every_sample_of_a_large_page_arrives_with_its_instance_state() -> None:
    """100 sensors x 100 samples, one disposed: all arrive, states as the service says."""
    cache = _cache()
    samples = [_sample(i % 100, 1 + i, float(i)) for i in range(10_000)]
    last_of_7 = samples[-93]  # sensor 7's newest sample
    samples[-93] = last_of_7._replace(flags=FLAG_DISPOSED)
    assert _file(cache, samples)
    out = cache.access(True, 1 << 30, 0xFFFF)
    assert len(out) == 10_000
    states = {s.data.sensor: s.info.instance_state for s in out}
    assert states[7] is dcps.InstanceState.NOT_ALIVE_DISPOSED
    assert {states[s] for s in range(100) if s != 7} == {dcps.InstanceState.NOT_ALIVE_NO_WRITERS}
    ranks = [s.info.sample_rank for s in out if s.data.sensor == 0]
    assert ranks == list(range(99, -1, -1))


def test_late_history_older_than_what_was_filed_is_dropped() -> None:
    cache = _cache()
    assert _file(cache, [_sample(1, 100, 1.0)])
    assert not _file(cache, [_sample(1, 50, 0.5)], late=True)
    assert _file(cache, [_sample(1, 150, 1.5), _sample(2, 10, 2.0)], late=True)
    assert _taken(cache) == [(1, 1.0, 100), (1, 1.5, 150), (2, 2.0, 10)]


def test_a_payload_that_does_not_decode_fails_the_page_loudly() -> None:
    """As before the column format: the filing raises (the history client logs it)."""
    cache = _cache()
    bad = _sample(1, 10, 1.0)._replace(payload=b"\x00\x01\x00\x00\x01")
    with pytest.raises(Exception):  # noqa: B017, PT011 - the codec's own error
        _file(cache, [_sample(i, 1 + i, 1.0) for i in range(20)] + [bad])


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda b: b"XXXX" + b[4:], "starts with"),
        (lambda b: b[:10], "ends inside its header"),
        (lambda b: b[:-1], "ends inside a record's payload"),
        (lambda b: b + b"\x00", "ends inside a record's payload"),
        # a page claiming 2**32 - 1 writers must not build a table that large
        (lambda b: b[:12] + b"\xff\xff\xff\xff" + b[16:], "ends inside its writer table"),
    ],
)
def test_a_damaged_page_is_refused(damage: object, message: str) -> None:
    blob = encode_samples([_sample(1, 10, 1.0), _sample(2, 11, 2.0)])
    with pytest.raises(dcps.BadParameterError, match=message):
        decode_columns(damage(blob))  # type: ignore[operator]


def test_a_record_naming_a_writer_beyond_the_table_is_refused() -> None:
    sample = _sample(1, 10, 1.0)
    blob = bytearray(encode_samples([sample]))
    # one record: 44 bytes of columns, then its payload
    column_start = len(blob) - len(sample.payload) - 44
    writer_index = column_start + 16 + 8  # after ts, seq, topic and partition indexes
    assert blob[writer_index : writer_index + 4] == bytes(4)  # the only writer: index 0
    blob[writer_index : writer_index + 4] = (5).to_bytes(4, "little")
    with pytest.raises(dcps.BadParameterError, match="writer beyond its table"):
        decode_columns(bytes(blob))


def test_samples_of_several_writers_are_told_apart_by_writer() -> None:
    """Same timestamp and bytes from two writers: two samples; each repeated: still two."""
    cache = _cache()
    one = _sample(1, 10, 1.0)
    other = one._replace(writer=b"v" * 16)
    assert _file(cache, [one, other, one])
    assert not _file(cache, [other, one])
    assert _file(cache, [other, _sample(2, 11, 2.0)._replace(writer=b"v" * 16)])
    assert _taken(cache) == [(1, 1.0, 10), (1, 1.0, 10), (2, 2.0, 11)]
