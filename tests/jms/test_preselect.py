"""Selectors run on the encoded batch (dcps.jms._preselect): what they rule out undecoded is
exactly what the selector drops, on real encoded envelopes and on a real store."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import idl
from dcps.jms import AcknowledgeMode
from dcps.jms._envelope import SELECTOR_HEADERS, envelope_of
from dcps.jms._preselect import Preselect, preselect_of
from dcps.jms._subscriber import _Keep, filter_text
from dcps.sql import MessageSelector
from idl._batch_codec import decoder_of, leading_scalars, read_leading, select_elements
from tests.jms.conftest import Connections

#: Fixed-size members of every kind ahead of a string, and one member behind it.
Px = idl.make_struct(
    "Px",
    {
        "flag": bool,
        "small": idl.int8,
        "price": idl.float32,
        "seq": idl.int64,
        "qty": idl.uint16,
        "hist": idl.array[idl.int16, 3],
        "ratio": idl.float64,
        "symbol": idl.string,
        "after": idl.int32,
    },
    typename="dcps_test::jms::Px",
)
ENVELOPE = envelope_of(Px)
LEADING = ["flag", "small", "price", "seq", "qty", "ratio"]


def px(i: int, **kw: Any) -> Any:
    fields: dict[str, Any] = {
        "flag": i % 2 == 1,
        "small": i % 10,
        "price": float(i) / 4,
        "seq": i,
        "qty": 3 * i,
        "hist": [i, -i, 7],
        "ratio": i / 3,
        "symbol": "S" * (i % 7),
        "after": -i,
    }
    fields.update(kw)
    return Px(**fields)


def envelope(body: Any, i: int = 0, expiration: int = 0, client_id: str = "c") -> Any:
    return ENVELOPE(
        body=body,
        message_id=f"ID:p-{i}",  # lengths vary: so do the elements' sizes
        timestamp=1_000 + i,
        priority=4,
        correlation_id="",
        jms_type="",
        client_id=client_id,
        connection_id="conn",
        expiration=expiration,
    )


def encode(envelopes: list[Any], version: int = 1) -> tuple[bytes, list[int]]:
    ENVELOPE.__idl__.populate()
    ser = ENVELOPE.__idl__._codec.ser[version]  # the codec the publisher uses
    parts = [ser(e) for e in envelopes]
    return b"".join(parts), [len(p) for p in parts]


class TestReadLeading:
    @pytest.mark.parametrize("version", [1, 2])
    def test_values_read_from_bytes_are_the_decoded_ones(self, version: int) -> None:
        """Every fixed-offset body member read from an encoded batch (XCDR1 and XCDR2, sizes
        varying) equals, value and type, what decoding the envelope gives."""
        bodies = [px(i) for i in range(40)]
        blob, sizes = encode([envelope(b, i) for i, b in enumerate(bodies)], version)
        assert len(set(sizes)) > 1
        assert list(leading_scalars(Px, version)) == LEADING
        columns = read_leading(blob, sizes, Px, LEADING)
        assert columns is not None
        decoded = decoder_of(ENVELOPE)(blob, sizes)
        for name, column in zip(LEADING, columns, strict=True):
            expected = [getattr(e.body, name) for e in decoded]
            assert column == expected, name
            assert [type(v) for v in column] == [type(v) for v in expected], name

    def test_batches_it_cannot_read_are_left_to_decoding(self) -> None:
        """Mixed encodings, a too-short element, a short batch or a member behind a string
        give None (decode everything), never wrong values."""
        ones = [envelope(px(i), i) for i in range(10)]
        blob1, sizes1 = encode(ones, 1)
        blob2, sizes2 = encode(ones, 2)
        mixed = blob1[: sizes1[0]] + blob2[sizes2[0] :]
        assert read_leading(mixed, [sizes1[0], *sizes2[1:]], Px, ["seq"]) is None
        truncated = blob1[:8] + blob1[sizes1[0] :]
        assert read_leading(truncated, [8, *sizes1[1:]], Px, ["seq"]) is None
        assert read_leading(blob1[: sum(sizes1[:7])], sizes1[:7], Px, ["seq"]) is None
        assert read_leading(blob1, sizes1, Px, ["after"]) is None
        assert read_leading(blob1, sizes1, Px, ["seq"]) == [list(range(10))]

    def test_select_elements_keeps_the_chosen_ones(self) -> None:
        """The sub-batch of some elements decodes to those elements."""
        envs = [envelope(px(i), i) for i in range(12)]
        blob, sizes = encode(envs)
        sub, subsizes = select_elements(blob, sizes, [0, 5, 11])
        assert [e.body.seq for e in decoder_of(ENVELOPE)(sub, subsizes)] == [0, 5, 11]


SELECTORS = [
    "small = 3",
    "small = 3 AND flag",
    "NOT flag OR qty > 30",
    "price * 4 BETWEEN 10 AND 20",
    "seq NOT BETWEEN 5 AND 50",
    "qty IN (0, 9, 27, 30)",
    "ratio / small > 0.3",  # division by zero is NULL: UNKNOWN, not selected
    "NOT (ratio / small > 2)",  # NOT UNKNOWN is UNKNOWN
    "small / 0 IS NULL AND seq > 3",
    "-seq + qty - seq > small",
    "flag = FALSE",
]


class TestPreselect:
    @pytest.mark.parametrize("selector", SELECTORS)
    def test_rules_out_exactly_what_the_selector_drops(self, selector: str) -> None:
        """On the bytes, the selector's verdict for every element is the one it gives on
        the decoded body (arithmetic, BETWEEN, IN, NOT and NULL's three-valued logic)."""
        bodies = [px(i) for i in range(64)]
        blob, sizes = encode([envelope(b, i) for i, b in enumerate(bodies)])
        pre = preselect_of(selector, Px, ENVELOPE, SELECTOR_HEADERS)
        assert isinstance(pre, Preselect)
        expected = [MessageSelector(selector, Px).matches(b) for b in bodies]
        assert pre(blob, sizes) == expected
        assert 0 < sum(expected) < len(expected) or selector == "flag = FALSE"

    @settings(max_examples=60, deadline=None)
    @given(
        st.lists(
            st.tuples(
                st.booleans(),
                st.integers(-128, 127),
                st.integers(-(2**63), 2**63 - 1),
                st.integers(0, 2**16 - 1),
                st.floats(allow_nan=True, width=64),
            ),
            min_size=8,
            max_size=40,
        ),
        st.sampled_from(SELECTORS),
    )
    def test_never_rules_out_a_kept_message(self, rows: list[Any], selector: str) -> None:
        """Whatever the values (NaN, extremes), a message the subscription keeps after
        decoding is never ruled out on the bytes."""
        bodies = [
            px(i, flag=f, small=s, seq=q, qty=n, ratio=r) for i, (f, s, q, n, r) in enumerate(rows)
        ]
        blob, sizes = encode([envelope(b, i) for i, b in enumerate(bodies)])
        keep = _Keep(filter_text(selector, None), Px, ENVELOPE)
        assert keep.preselect is not None
        maybe = keep.preselect(blob, sizes)
        assert maybe is not None
        decoded = decoder_of(ENVELOPE)(blob, sizes)
        kept = [keep.matches(e) for e in decoded]
        assert maybe == [MessageSelector(selector, Px).matches(b) for b in bodies]
        assert all(m for m, k in zip(maybe, kept, strict=True) if k)

    @pytest.mark.parametrize(
        "selector",
        ["JMSPriority > 3", "symbol = 'S'", "after > 0", "hist[0] = 1", "small = 3 OR symbol = ''"],
    )
    def test_selectors_reading_more_decode_everything(self, selector: str) -> None:
        """A selector reading a header, a string, a member behind one or an array element
        cannot run on the bytes: every message is decoded and the selector runs on it."""
        assert _Keep(filter_text(selector, None), Px, ENVELOPE).preselect is None

    def test_no_local_and_expiry_still_apply_to_what_it_lets_through(self) -> None:
        """The bytes only rule messages out: noLocal and expiry still drop matches."""
        envs = [envelope(px(i), i, client_id="me" if i == 3 else "other") for i in range(20)]
        envs[13] = envelope(px(13), 13, expiration=1)  # expired long ago
        blob, sizes = encode(envs)
        keep = _Keep(filter_text("small = 3", ("client", "me")), Px, ENVELOPE)
        assert keep.preselect is not None
        assert keep.preselect(blob, sizes) == [i % 10 == 3 for i in range(20)]
        assert [keep.matches(e) for e in decoder_of(ENVELOPE)(blob, sizes)] == [
            False
        ] * 20  # 3: published by "me"; 13: expired


class TestOnTheStore:
    def test_durable_with_selector_receives_exactly_the_matches(
        self, connect: Connections, topic_name: str, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A durable subscription with a fixed-offset selector gets exactly the matching
        messages, bodies and headers whole, the others ruled out undecoded; all of them
        are acknowledged (the subscription can be deleted at once)."""
        ruled_out = []
        call = Preselect.__call__

        def counting(self: Preselect, blob: bytes, sizes: Any) -> list[bool] | None:
            maybe = call(self, blob, sizes)
            ruled_out.append(0 if maybe is None else maybe.count(False))
            return maybe

        monkeypatch.setattr(Preselect, "__call__", counting)
        connection = connect("pre-client")
        session = connection.create_topic_session(AcknowledgeMode.AUTO)
        topic = session.create_topic(topic_name, Px)
        selector = "small = 3 AND price > 12.5"
        session.create_durable_subscriber(topic, "d", selector).close()
        pub = session.create_publisher(topic)
        ids = [pub.publish(px(i), correlation_id=f"c{i}") for i in range(300)]
        expected = [i for i in range(300) if i % 10 == 3 and i / 4 > 12.5]
        sub = session.create_durable_subscriber(topic, "d", selector)
        got = []
        while len(got) < len(expected) and (m := sub.receive(10)) is not None:
            got.append(m)
        assert [m.body.seq for m in got] == expected
        assert [m.body for m in got] == [px(i) for i in expected]
        assert [(m.message_id, m.correlation_id) for m in got] == [
            (ids[i], f"c{i}") for i in expected
        ]
        assert sum(ruled_out) > 0  # the bytes ruled messages out
        assert sub.receive(0.5) is None
        sub.close()
        session.unsubscribe("d")  # raises if any message were left unacknowledged
