"""Staged publishing: the requests and replies of a two-phase commit (Op 60-69).

A writer (the Spark sink's task attempt) *stages* chunks of elements under a
transaction ``(topic, query, epoch)`` and a stage id of its own (one per task
attempt, unique across driver restarts); staged elements are invisible. The
coordinator (Spark's driver) then *commits* the transaction naming exactly
the stages to keep and how many chunks each staged: the store appends those
chunks in one transaction (offsets are assigned then) and drops every other
staged chunk of the transaction. A commit repeated for a transaction the
store committed before changes nothing and says so. *Abort* drops the
transaction's staged chunks.

Wire layout (fields of :class:`~dcps.wire._messages.Request`):

==============  ===================================================================
STAGE           topic, group = query, number = epoch, flag = partition,
                member = stage id, offsets = [seq], channels = [channel],
                sizes + blob = the chunk's elements (checked as a PUBLISH's)
COMMIT_STAGED   topic, group = query, number = epoch, blob = stage ids joined by
                ``\\n`` (UTF-8), offsets = chunk count of each stage (parallel),
                member = each stage's digest (64 hex digits, joined by ``,``; with
                a key), text = the query key's proof (``_auth_stage.py``; with a key)
ABORT_STAGED    topic, group = query, number = epoch, text = the proof (with a key)
==============  ===================================================================
"""

from __future__ import annotations

from typing import ClassVar, Self

import attrs

from idl._errors import BadParameterError

from ._codes import Op
from ._limits import (
    MAX_BATCH_ELEMENTS,
    MAX_ELEMENT_SIZE,
    check_channels,
    check_wire_name,
)
from ._messages import Reply, Request

__all__ = [
    "MAX_STAGES",
    "AbortStagedRequest",
    "CommitStagedRequest",
    "StageRequest",
    "Staged",
    "StagedAborted",
    "StagedCommitted",
]

#: Most stages (task attempts) one COMMIT_STAGED may name.
MAX_STAGES = 65_536
#: Most chunks one stage may have staged.
MAX_STAGE_CHUNKS = 2**31 - 1
#: Longest proof text (``dcps/wire/_auth_stage.py``: public key, timestamp, signature).
_MAX_PROOF = 2048


def _proof(r: Request) -> str:
    if len(r.text) > _MAX_PROOF:
        raise BadParameterError(f"a staged-commit proof has at most {_MAX_PROOF} characters")
    return r.text


def _check_elements(r: Request) -> int:
    """A chunk's channel, element count, sizes and blob, bounded as a PUBLISH's are."""
    check_channels(r.channels)
    if len(r.channels) != 1:
        raise BadParameterError("request field 'channels' must hold exactly one value")
    channel = int(r.channels[0])
    sizes = r.sizes
    if len(sizes) > MAX_BATCH_ELEMENTS:
        raise BadParameterError(
            f"a STAGE carries {len(sizes)} elements; the limit is "
            f"MAX_BATCH_ELEMENTS = {MAX_BATCH_ELEMENTS}"
        )
    if sizes and not 1 <= min(sizes) <= max(sizes) <= MAX_ELEMENT_SIZE:
        raise BadParameterError(
            f"a STAGE to topic {r.topic!r} channel {channel} carries an element of "
            f"{min(sizes) if min(sizes) < 1 else max(sizes)} bytes: elements have "
            f"1..{MAX_ELEMENT_SIZE} bytes (MAX_ELEMENT_SIZE)"
        )
    if sum(sizes) != len(r.blob):
        raise BadParameterError(
            f"a STAGE's element sizes add up to {sum(sizes)} bytes, but its blob has {len(r.blob)}"
        )
    return channel


def _epoch(r: Request) -> int:
    if r.number < 0:
        raise BadParameterError(f"request field 'number' (epoch) is {r.number}: epochs are >= 0")
    return int(r.number)


@attrs.frozen
class StageRequest:
    """Stage chunk ``seq`` of stage ``stage`` (partition ``partition``) for one channel.

    The chunk's elements are ``blob`` cut by ``sizes`` (bounded and checked
    like a PUBLISH's). Staging the same ``(query, epoch, stage, seq)`` again
    replaces the chunk (a resent request).
    """

    op: ClassVar[Op] = Op.STAGE
    topic: str
    query: str
    epoch: int
    partition: int
    stage: str
    seq: int
    channel: int
    sizes: list[int]
    blob: bytes

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.STAGE,
            topic=self.topic,
            group=self.query,
            member=self.stage,
            number=self.epoch,
            flag=self.partition,
            offsets=[self.seq],
            channels=[self.channel],
            sizes=self.sizes,
            blob=self.blob,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        channel = _check_elements(r)
        if len(r.offsets) != 1 or r.offsets[0] < 0:
            raise BadParameterError(
                f"a STAGE carries chunk numbers {list(r.offsets)[:3]}: exactly one, >= 0"
            )
        if r.flag < 0:
            raise BadParameterError(f"request field 'flag' (partition) is {r.flag}")
        return cls(
            check_wire_name("topic", r.topic),
            check_wire_name("group (query)", r.group),
            _epoch(r),
            int(r.flag),
            check_wire_name("member (stage)", r.member),
            int(r.offsets[0]),
            channel,
            list(r.sizes),
            bytes(r.blob),
        )


@attrs.frozen
class CommitStagedRequest:
    """Make the chunks of ``stages`` (stage id -> chunk count) visible, in one transaction.

    With a namespace key, ``digests`` (one per stage: what it staged,
    ``_auth_stage.StageDigest``) and ``proof`` (the query key's signature)
    show that the query that owns the transaction asks for it.
    """

    op: ClassVar[Op] = Op.COMMIT_STAGED
    topic: str
    query: str
    epoch: int
    stages: tuple[tuple[str, int], ...]
    digests: tuple[str, ...] = ()
    proof: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.COMMIT_STAGED,
            topic=self.topic,
            group=self.query,
            number=self.epoch,
            blob="\n".join(s for s, _ in self.stages).encode(),
            offsets=[n for _, n in self.stages],
            member=",".join(self.digests),
            text=self.proof,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        topic = check_wire_name("topic", r.topic)
        query = check_wire_name("group (query)", r.group)
        epoch = _epoch(r)
        if len(r.offsets) > MAX_STAGES:
            raise BadParameterError(
                f"a COMMIT_STAGED names {len(r.offsets)} stages; the limit is "
                f"MAX_STAGES = {MAX_STAGES}"
            )
        try:
            names = r.blob.decode().split("\n") if r.blob else []
        except UnicodeDecodeError:
            raise BadParameterError("a COMMIT_STAGED's stage ids are not UTF-8") from None
        if len(names) != len(r.offsets):
            raise BadParameterError(
                f"a COMMIT_STAGED names {len(names)} stages but {len(r.offsets)} chunk counts"
            )
        if len(set(names)) != len(names):
            raise BadParameterError("a COMMIT_STAGED names a stage twice")
        for name in names:
            check_wire_name("blob (stage id)", name)
        counts = [int(n) for n in r.offsets]
        if counts and not 0 <= min(counts) <= max(counts) <= MAX_STAGE_CHUNKS:
            raise BadParameterError(
                f"a COMMIT_STAGED's chunk counts must be 0..{MAX_STAGE_CHUNKS}, got {min(counts)}"
            )
        digests = tuple(r.member.split(",")) if r.member else ()
        if digests and (
            len(digests) != len(names)
            or any(len(d) != 64 or d.strip("0123456789abcdef") for d in digests)
        ):
            raise BadParameterError(
                "a COMMIT_STAGED's stage digests must be one per stage, 64 hex digits each"
            )
        stages = tuple(zip(names, counts, strict=True))
        return cls(topic, query, epoch, stages, digests, _proof(r))


@attrs.frozen
class AbortStagedRequest:
    """Drop every staged chunk of the transaction ``(topic, query, epoch)`` (``proof``: the
    query key's signature, with a namespace key)."""

    op: ClassVar[Op] = Op.ABORT_STAGED
    topic: str
    query: str
    epoch: int
    proof: str = ""

    def to_wire(self, client: str, request_id: int) -> Request:
        return Request(
            client=client,
            request_id=request_id,
            op=Op.ABORT_STAGED,
            topic=self.topic,
            group=self.query,
            number=self.epoch,
            text=self.proof,
        )

    @classmethod
    def from_wire(cls, r: Request) -> Self:
        return cls(
            check_wire_name("topic", r.topic),
            check_wire_name("group (query)", r.group),
            _epoch(r),
            _proof(r),
        )


@attrs.frozen
class Staged:
    """The answer to STAGE: the chunk of ``count`` elements is staged."""

    count: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, number=self.count)

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number))


@attrs.frozen
class StagedCommitted:
    """The answer to COMMIT_STAGED: ``elements`` made visible in ``chunks`` batches.

    ``already``: the store had committed this transaction before (the counts
    are those of that commit; nothing was appended now).
    """

    elements: int
    chunks: int
    already: bool = False

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(
            client=client,
            request_id=request_id,
            number=self.elements,
            offsets=[self.chunks],
            flag=int(self.already),
        )

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        if len(r.offsets) != 1:
            raise BadParameterError("malformed COMMIT_STAGED reply (no chunk count)")
        return cls(int(r.number), int(r.offsets[0]), bool(r.flag))


@attrs.frozen
class StagedAborted:
    """The answer to ABORT_STAGED: ``chunks`` staged chunks were dropped."""

    chunks: int

    def to_wire(self, client: str, request_id: int) -> Reply:
        return Reply(client=client, request_id=request_id, number=self.chunks)

    @classmethod
    def from_wire(cls, r: Reply) -> Self:
        return cls(int(r.number))
