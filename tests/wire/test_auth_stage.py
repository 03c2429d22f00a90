"""The query key of staged transactions: signatures bind operation, transaction and stages."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from dcps import BadParameterError, IllegalOperationError
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._auth_stage import (
    PROOF_WINDOW_NS,
    STAGE_KEY_FILE_ENV,
    QueryKey,
    check_proof,
    owned_query,
    query_key_from_environment,
)

KEY = QueryKey(b"s" * 32, "q")
TXN = owned_query("q", KEY)
STAGES = [("a", 2, "0" * 64), ("b", 1, "1" * 64)]


def test_a_proof_verifies_for_exactly_what_it_signed() -> None:
    """The commit proof passes; any other operation, topic, epoch or stage list is refused."""
    proof = KEY.prove("commit", "t", TXN, 4, STAGES)
    check_proof(proof, "commit", "t", TXN, 4, STAGES)
    others = [
        ("abort", "t", TXN, 4, STAGES),
        ("commit", "u", TXN, 4, STAGES),
        ("commit", "t", TXN, 5, STAGES),
        ("commit", "t", TXN, 4, STAGES[:1]),
        ("commit", "t", TXN, 4, [("a", 3, "0" * 64), STAGES[1]]),
        ("commit", "t", TXN, 4, [("a", 2, "2" * 64), STAGES[1]]),
    ]
    for op, topic, txn, epoch, stages in others:
        with pytest.raises(IllegalOperationError, match="does not verify"):
            check_proof(proof, op, topic, txn, epoch, stages)


def test_another_key_or_transaction_is_refused() -> None:
    """A key other than the transaction's (its fingerprint ends the name) is refused."""
    other = QueryKey(b"o" * 32, "q")
    assert owned_query("q", other) != TXN
    with pytest.raises(IllegalOperationError, match="not the transaction's"):
        check_proof(other.prove("abort", "t", TXN, 1), "abort", "t", TXN, 1)
    with pytest.raises(IllegalOperationError, match="no proof"):
        check_proof("", "abort", "t", TXN, 1)


def test_an_old_proof_is_refused() -> None:
    """A proof older than the window (a replay) is refused."""
    proof = KEY.prove("abort", "t", TXN, 1)
    later = time.time_ns() + PROOF_WINDOW_NS + 10**9
    with pytest.raises(IllegalOperationError, match="old"):
        check_proof(proof, "abort", "t", TXN, 1, now_ns=later)


def test_the_key_is_stable_per_query_and_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stage secret (else the namespace key) and the query id give the same key in every
    process (a restarted driver recognises its transactions); other queries differ."""
    monkeypatch.delenv(STAGE_KEY_FILE_ENV, raising=False)
    monkeypatch.delenv(KEY_FILE_ENV, raising=False)
    assert query_key_from_environment("q") is None
    monkeypatch.setenv(KEY_FILE_ENV, str(write_key_file(tmp_path / "ns.key").source))
    from_namespace = query_key_from_environment("q")
    assert from_namespace is not None
    monkeypatch.setenv(STAGE_KEY_FILE_ENV, str(write_key_file(tmp_path / "stage.key").source))
    first, again = query_key_from_environment("q"), query_key_from_environment("q")
    assert first is not None
    assert again is not None
    assert first.public == again.public != from_namespace.public
    other = query_key_from_environment("r")
    assert other is not None
    assert other.public != first.public
    (tmp_path / "short.key").write_bytes(b"short")
    monkeypatch.setenv(STAGE_KEY_FILE_ENV, str(tmp_path / "short.key"))
    with pytest.raises(BadParameterError, match="at least 32"):
        query_key_from_environment("q")
