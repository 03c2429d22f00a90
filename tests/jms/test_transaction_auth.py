"""A transaction's commit and abort belong to the session that made it (issue 15).

With a namespace key, every key holder may stage, enlist and commit; the
store accepts TX_COMMIT and TX_ABORT of a transaction only with the proof
of the key of the session whose fingerprint ends the transaction's name
(``dcps/store/_transactions.py``). The attacker is a raw ``cyclonedds``
participant holding the namespace key, writing sealed requests by hand at
the worst moment: inside the victim's ``commit``, with everything staged and
enlisted. A real store process; the victim is a JMS connection.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

import dcps.jms._session as session_module
from dcps.jms import AcknowledgeMode, Connection, TopicSubscriber
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._auth_stage import QueryKey
from dcps.wire._codes import ErrorCode
from dcps.wire._durables import TxAbortRequest, TxCommitRequest, tx_signed
from dcps.wire._messages import Reply
from tests.support.peers.jms_types import Quote
from tests.support.raw_attacker import RawKeyHolder
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

pytestmark = pytest.mark.multiprocess

TIMEOUT = 60.0


def _seqs(sub: TopicSubscriber[Quote], quiet: float = 1.0) -> list[tuple[int, bool]]:
    out = []
    while (m := sub.receive(quiet)) is not None:
        out.append((m.body.seq, m.redelivered))
    return out


def _forged(request: TxCommitRequest) -> TxCommitRequest:
    """``request`` signed with a key of the attacker's own (not the transaction's)."""
    own = QueryKey(secrets.token_bytes(32), request.query.partition("~")[0])
    op, topics, signed = tx_signed(request.op, request.stages, request.digests)
    return type(request)(
        request.query,
        request.epoch,
        request.stages,
        request.digests,
        own.prove(op, topics, request.query, request.epoch, signed),
    )


def test_another_key_holder_cannot_commit_or_abort_a_sessions_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, topic_name: str, domain_id: int
) -> None:
    """Inside the victim's commit (2 consumed, 2 published: staged and enlisted), a raw
    key holder sends TX_ABORT and TX_COMMIT of its transaction without a proof and with a
    proof of its own key: every one is refused and changes nothing. The victim's commit
    then goes through: both outputs appear once and the inputs never come again."""
    key = str(write_key_file(tmp_path / "ns.key").source)
    monkeypatch.setenv(KEY_FILE_ENV, key)
    namespace = f"txauth_{secrets.token_hex(4)}"
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    kw = {
        "domain_id": domain_id,
        "namespace": namespace,
        "channel_count": 1,
        "consumer_timeout": timedelta(seconds=30),
    }
    in_topic, out_topic = f"{topic_name}_in", f"{topic_name}_out"
    replies: list[tuple[str, Reply]] = []
    attacker: RawKeyHolder | None = None
    try:
        with Connection("watcher", **kw) as watcher, Connection("victim", **kw) as victim:
            watcher.start()
            victim.start()
            ws = watcher.create_topic_session()
            ws.create_durable_subscriber(ws.create_topic(out_topic, Quote), "watch").close()
            tx = victim.create_topic_session(AcknowledgeMode.TRANSACTED)
            sub = tx.create_durable_subscriber(tx.create_topic(in_topic, Quote), "in")
            pub = tx.create_publisher(tx.create_topic(out_topic, Quote))
            feed = ws.create_publisher(ws.create_topic(in_topic, Quote))
            for s in (1, 2):
                feed.publish(Quote("in", float(s), s))
            for _ in range(2):
                m = sub.receive(TIMEOUT)
                assert m is not None
                pub.publish(Quote("out", 0.0, m.body.seq + 100))
            incarnation = victim._store_client().ping(timeout=TIMEOUT).incarnation
            attacker = RawKeyHolder(domain_id, namespace, key, secrets.token_hex(16))
            real_crash_point = session_module.crash_point

            def attack(point: str) -> None:
                if point == "jms-before-commit":
                    assert attacker is not None
                    query, epoch = tx._tx_query, 1  # (read off any of its STAGE requests)
                    stages = ((out_topic, "s", 1),)
                    digests = ("0" * 64,)
                    for what, request in [
                        ("abort", TxAbortRequest(query, epoch, stages)),
                        ("forged abort", _forged(TxAbortRequest(query, epoch, stages))),
                        ("commit", TxCommitRequest(query, epoch, stages, digests)),
                        ("forged commit", _forged(TxCommitRequest(query, epoch, stages, digests))),
                    ]:
                        replies.append((what, attacker.call(request, incarnation)))
                real_crash_point(point)

            hook: Callable[[str], None] = attack
            monkeypatch.setattr(session_module, "crash_point", hook)
            tx.commit()
            for what, reply in replies:
                assert reply.status != ErrorCode.OK, f"the attacker's {what} was accepted"
                if what.startswith("forged"):
                    assert reply.status == ErrorCode.ILLEGAL_OPERATION, (what, reply.error)
                    assert "not the transaction's" in reply.error
                else:
                    assert reply.status in (
                        ErrorCode.ILLEGAL_OPERATION,
                        ErrorCode.BAD_PARAMETER,
                    ), (what, reply.error)
            assert len(replies) == 4
            sub.close()
            watch = ws.create_durable_subscriber(ws.create_topic(out_topic, Quote), "watch")
            assert _seqs(watch) == [(101, False), (102, False)]
            again = eventually(
                lambda: tx.create_durable_subscriber(tx.create_topic(in_topic, Quote), "in"),
                TIMEOUT,
            )
            assert _seqs(again) == []
    finally:
        if attacker is not None:
            attacker.close()
        store.kill()


def test_a_commit_request_carries_its_digests_and_proof_and_refuses_malformed_ones() -> None:
    """TX_COMMIT round-trips its stage digests and proof; the store's decoder refuses a
    digest that is not SHA-256 hex, digests for some stages only, and an oversized proof."""
    from dcps import BadParameterError

    request = TxCommitRequest("jms/q~f", 3, (("a", "s", 1), ("b", "s", 2)), ("a" * 64, "b" * 64))
    signed = TxCommitRequest(request.query, 3, request.stages, request.digests, "p:1:2")
    assert TxCommitRequest.from_wire(signed.to_wire("c", 1)) == signed
    some = signed.to_wire("c", 1)
    some.blob = json.dumps([["a", "s", 1, "a" * 64], ["b", "s", 2]]).encode()
    for bad in [
        TxCommitRequest("q", 1, (("a", "s", 1),), ("xyz",)).to_wire("c", 1),
        some,
        TxCommitRequest("q", 1, (("a", "s", 1),), ("a" * 64,), "p" * 5000).to_wire("c", 1),
    ]:
        with pytest.raises(BadParameterError):
            TxCommitRequest.from_wire(bad)
