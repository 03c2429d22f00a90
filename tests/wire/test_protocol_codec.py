"""The store protocol's compiled codec writes and reads exactly what the binding's machines do."""

import struct

import pytest

from dcps.wire._messages import LiveBatch, Reply, Request


def pack(payloads: list[bytes]) -> dict[str, object]:
    """The ``sizes``/``blob`` fields carrying ``payloads``."""
    return {"sizes": [len(p) for p in payloads], "blob": b"".join(payloads)}


MESSAGES = [
    Request(client="c-1", request_id=7, op=2),
    Request(
        client="client-\u00e9",
        request_id=2**40,
        op=3,
        topic="sensors",
        group="g",
        member="m",
        number=-5,
        flag=1,
        text="x" * 13,
        channels=[0, 16, 3],
        offsets=[1, 2**62, -1],
        sizes=[3, 0, 5],
        blob=b"abc" + bytes(5),
    ),
    Reply(client="c", request_id=1),
    Reply(
        client="c",
        request_id=1,
        status=3,
        error="bad",
        channels=[1],
        offsets=[9],
        stamps=[123456789012],
        codes=[0, 1],
        heads=[0],
        tails=[10],
        **pack([b"\x01" * 97] * 3),
    ),
    LiveBatch(topic="t", channel=3, first=100, timestamp=5, **pack([bytes(range(61))] * 4)),
    LiveBatch(topic="", channel=0, first=0, timestamp=0),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
@pytest.mark.parametrize("version_2", [False, True])
def test_compiled_codec_matches_the_binding(message, version_2):
    generic = type(message).__idl__.serialize(message, use_version_2=version_2)
    fast = message.serialize(use_version_2=version_2)
    assert fast == generic
    assert type(message).deserialize(fast) == message
    assert type(message).__idl__.deserialize(fast) == message


def test_compiled_codec_keeps_python_types():
    message = MESSAGES[3]
    back = Reply.deserialize(message.serialize())
    assert type(back.blob) is bytes
    assert type(back.offsets) is list
    assert all(type(v) is int for v in back.stamps)


def test_a_wrong_field_value_raises_instead_of_sending_garbage():
    with pytest.raises(struct.error):
        Request(client="c", request_id=1, op=2, channels=["x"]).serialize()
