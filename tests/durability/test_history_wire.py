"""The HISTORY_FETCH request and its pages: validated whole, records round-trip."""

from __future__ import annotations

import pytest

import dcps
from dcps.wire._durability import (
    MAX_HISTORY_PAGE,
    HistoryFetchRequest,
    HistoryPage,
    StoredSample,
    decode_samples,
    encode_samples,
)
from dcps.wire._requests import decode_request


class TestHistoryFetchRequest:
    def test_round_trip(self) -> None:
        """A request decodes to the same value, partitions and target service included."""
        request = HistoryFetchRequest("Readings", ("a", "b*"), 7, 100, "svc1")
        assert decode_request(request.to_wire("client1", 3)) == request

    @pytest.mark.parametrize(
        ("change", "message"),
        [
            ({"number": 0}, "HISTORY_FETCH asks for 0 samples"),
            ({"number": MAX_HISTORY_PAGE + 1}, "MAX_HISTORY_PAGE"),
            ({"offsets": [-1]}, "cursor is >= 0"),
            ({"offsets": []}, "exactly one cursor"),
            ({"blob": b"\xff"}, "not UTF-8"),
            ({"blob": "\n".join(["p"] * 65).encode()}, "names 65 partitions"),
        ],
    )
    def test_bad_requests_are_refused_naming_the_field(
        self, change: dict[str, object], message: str
    ) -> None:
        """Counts, cursors and partition lists out of bounds raise BadParameterError."""
        wire = HistoryFetchRequest("Readings", ("",), 0, 10).to_wire("client1", 1)
        for name, value in change.items():
            setattr(wire, name, value)
        with pytest.raises(dcps.BadParameterError, match=message):
            decode_request(wire)


class TestHistoryPage:
    def test_records_round_trip(self) -> None:
        """Every field of every record survives encoding, in order."""
        samples = [
            StoredSample("T", "p", b"k1", b"w" * 16, 10, 1, 0, b"\x00\x01\x00\x00abc"),
            StoredSample("T", "", b"", b"v" * 16, -5, 2, 3, b""),
        ]
        assert list(decode_samples(encode_samples(samples))) == samples
        page = HistoryPage(tuple(samples), 2, True, "svc")
        assert HistoryPage.from_wire(page.to_wire("c", 1)) == page

    def test_truncated_page_is_refused(self) -> None:
        """A blob cut inside a record raises BadParameterError, never a short record."""
        blob = encode_samples([StoredSample("T", "p", b"k", b"w" * 16, 1, 1, 0, b"abcdef")])
        with pytest.raises(dcps.BadParameterError, match="ends inside"):
            list(decode_samples(blob[:-2]))
