"""Staged publishing with a key: a query's transactions are its own (issue 13).

The sink's own functions stage rows (as a task does) and commit (as the
driver does) against a real keyed store process; the attacker is a raw
``cyclonedds`` participant holding the namespace key, which reads the sink's
STAGE requests off the wire and then tries to commit, abort or change the
query's transaction. No Spark session is needed for this: the functions are
what Spark's Python workers run.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.spark_support import PEERS  # noqa: F401  (puts spark_types on sys.path)

pytest.importorskip("pyspark")

import pyarrow as pa
from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic
from pyspark.sql.types import DoubleType, IntegerType, LongType, StructField, StructType

from dcps import PreconditionNotMetError
from dcps.channels._client import StoreClient
from dcps.spark._options import SourceOptions
from dcps.spark._sink import _prepare, commit_stages, stage_rows
from dcps.wire._auth_keys import KEY_FILE_ENV, write_key_file
from dcps.wire._auth_stage import STAGE_KEY_FILE_ENV, QueryKey, StageDigest
from dcps.wire._codes import ErrorCode, Op
from dcps.wire._messages import Request
from dcps.wire._names import CONTROL_QOS
from dcps.wire._staging import AbortStagedRequest, CommitStagedRequest, StageRequest
from dcps.wire._transport import Endpoint
from tests.support.raw_attacker import RawKeyHolder
from tests.support.store_process import StoreProcess
from tests.support.waiting import eventually

TIMEOUT = 20.0
SCHEMA = StructType(
    [
        StructField("sensor", IntegerType()),
        StructField("seq", LongType()),
        StructField("value", DoubleType()),
    ]
)


@pytest.fixture
def keyed(
    tmp_path: Path, domain_id: int, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[StoreProcess, str]]:
    """A keyed store process; this process holds the namespace key and the stage secret."""
    key = str(write_key_file(tmp_path / "ns.key").source)
    monkeypatch.setenv(KEY_FILE_ENV, key)
    monkeypatch.setenv(STAGE_KEY_FILE_ENV, str(write_key_file(tmp_path / "stage.key").source))
    store = StoreProcess(tmp_path / "store", domain_id, namespace)
    yield store, key
    store.kill()


def _rows(n: int, start: int = 0) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "sensor": pa.array([i % 3 for i in range(start, start + n)], pa.int32()),
            "seq": pa.array(list(range(start, start + n)), pa.int64()),
            "value": pa.array([i / 2 for i in range(start, start + n)], pa.float64()),
        }
    )


def test_another_key_holder_cannot_commit_abort_or_change_a_querys_transaction(
    keyed: tuple[StoreProcess, str], domain_id: int, namespace: str
) -> None:
    """With the query's stage ids, chunk counts and transaction name read off the wire, a
    key holder's commit and abort of the query's transaction are refused (unsigned, or
    signed with a key of its own), and a chunk it replaces makes the query's commit fail
    whole instead of publishing the replacement; the query's own commit publishes its rows
    once."""
    _, key = keyed
    topic = f"t_{uuid.uuid4().hex[:8]}"
    opts = SourceOptions.parse(
        {
            "topic": topic,
            "type": "spark_types:Reading",
            "domain": str(domain_id),
            "namespace": namespace,
        }
    )
    _prepare(opts, SCHEMA)
    query = f"query-{uuid.uuid4().hex[:8]}"
    dp = DomainParticipant(domain_id)
    spy = DataReader(
        Subscriber(dp, qos=Qos(Policy.Partition([namespace]))),
        Topic(dp, "dcps_channels_request", Request),
        qos=CONTROL_QOS,
    )
    endpoint = Endpoint(domain_id, namespace)
    client = StoreClient(endpoint, request_timeout=5.0, key=key, admin_key=None)
    attacker = None
    try:
        client.connect(TIMEOUT)
        incarnation = client.ping(timeout=TIMEOUT).incarnation
        attacker = RawKeyHolder(domain_id, namespace, key, uuid.uuid4().hex)

        def stored() -> int:
            states = client.state(topic, "", (), timeout=TIMEOUT)
            return sum(t + 1 for t in states.tails)  # offsets from 0, nothing trimmed

        def captured_stage() -> Request:
            stages = eventually(
                lambda: [r for r in spy.take(N=256) if isinstance(r, Request) and r.op == Op.STAGE],
                TIMEOUT,
                "the task's STAGE requests on the wire",
            )
            return stages[0]

        message = stage_rows(opts, iter([_rows(5)]), (query, 7), 0)
        seen = captured_stage()
        wire_query, stage = seen.group, seen.member
        assert wire_query != query, "the transaction's name binds the query's key"
        stages = ((stage, message.chunks),)
        digests = (message.digest,)
        own_key = QueryKey(b"attacker's own secret, 32 bytes+", query)
        refusals = [
            CommitStagedRequest(topic, wire_query, 7, stages, digests),
            CommitStagedRequest(
                topic,
                wire_query,
                7,
                stages,
                digests,
                own_key.prove(
                    "commit", topic, wire_query, 7, [(stage, message.chunks, digests[0])]
                ),
            ),
            AbortStagedRequest(topic, wire_query, 7),
            AbortStagedRequest(topic, wire_query, 7, own_key.prove("abort", topic, wire_query, 7)),
        ]
        for request in refusals:
            reply = attacker.call(request, incarnation)
            assert reply.status == ErrorCode.ILLEGAL_OPERATION, (request, reply.error)
            assert wire_query in reply.error
        assert stored() == 0
        assert commit_stages(opts, [message], 7) == 5  # the query's own commit: all its rows
        assert stored() == 5

        # a chunk replaced by the attacker (same stage id and chunk number) is never published
        message = stage_rows(opts, iter([_rows(4, 100)]), (query, 8), 0)
        seen = captured_stage()
        forged = StageRequest(
            topic,
            seen.group,
            8,
            int(seen.flag),
            seen.member,
            int(seen.offsets[0]),
            int(seen.channels[0]),
            list(seen.sizes),
            bytes(len(seen.blob)),  # other bytes, same sizes
        )
        assert attacker.call(forged, incarnation).status == 0  # staging is open to key holders
        with pytest.raises(PreconditionNotMetError, match="not what its writer staged"):
            commit_stages(opts, [message], 8)
        assert stored() == 5
    finally:
        if attacker is not None:
            attacker.close()
        client.close()
        endpoint.close()
        dp.__del__()


def test_a_stage_digest_covers_every_chunk_in_order() -> None:
    """The digest of a stage changes with any chunk's number, channel, sizes or bytes."""

    def digest(*chunks: tuple[int, int, bytes, bytes]) -> str:
        d = StageDigest()
        for chunk in chunks:
            d.add(*chunk)
        return d.hexdigest()

    base = (0, 1, b"\x02\x00\x00\x00", b"ab")
    assert digest(base) == digest(base)
    for other in [(1, 1, base[2], base[3]), (0, 2, base[2], base[3]), (0, 1, base[2], b"ac")]:
        assert digest(other) != digest(base)
    assert digest(base, (1, 1, b"", b"")) != digest(base)
