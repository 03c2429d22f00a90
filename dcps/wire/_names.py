"""Where the protocol's messages travel: DDS QoS, partition names, names that fit them.

Topics, in the store's namespace ``<ns>``:

``dcps_channels_request`` / ``dcps_channels_reply``
    Request/reply with the store, correlated by ``(client, request_id)``.
    Requests in partition ``<ns>`` (one store) or ``<ns>/store/<index>`` (a
    split namespace): reliable, volatile, keep-last 128 (a client keeps at
    most 127 unanswered). Replies in the client's own partition
    ``<ns>/reply/<client>``, one store writer per client: reliable,
    transient-local, keep-all; a reply the writer cannot take at once waits
    in the store's outbox for that client.
``dcps_channels_batch``
    The live tail of each channel, in partition ``<ns>/<topic>/<channel>``:
    one sample per accepted batch; reliable, transient-local (last 32).
``dcps_channels_assignment``
    Channel ownership of each (topic, group), keyed by both, in partition
    ``<ns>``; reliable, transient-local, last value.
``dcps_channels_store``
    Each store's share of the channels (``index/count``), keyed by the
    store's incarnation, in partition ``<ns>``; reliable, transient-local.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from cyclonedds.core import InstanceState, Policy, Qos, SampleState, ViewState
from cyclonedds.util import duration

from idl._errors import BadParameterError

__all__ = [
    "ANNOUNCE_QOS",
    "ANY_STATE",
    "ASSIGN_QOS",
    "BATCH_READER_QOS",
    "BATCH_WRITER_QOS",
    "CONTROL_QOS",
    "MAX_OUTSTANDING",
    "REPLY_QOS",
    "REQUEST_WRITER_QOS",
    "batch_partition",
    "check_name",
    "reply_partition",
    "request_partition",
    "share_count",
]

_BLOCK = duration(seconds=10)
CONTROL_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepAll,
    Policy.Durability.Volatile,
)
# A client's requests: KEEP_LAST, not KEEP_ALL. A store killed with SIGKILL
# leaves its request reader matched to every client until its lease expires
# (Cyclone's default: 10 s); a KEEP_ALL writer keeps every request that reader
# never acknowledges and, past its history watermark, blocks each write until
# the lease ends, so requests to the restarted store stall that long and time
# out although the store served them. KEEP_LAST drops only requests every live
# reader already has, as long as fewer than its depth await an answer:
# StoreClient keeps at most MAX_OUTSTANDING unanswered.
MAX_OUTSTANDING = 127
REQUEST_WRITER_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepLast(MAX_OUTSTANDING + 1),
    Policy.Durability.Volatile,
)
BATCH_WRITER_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepLast(32),
    Policy.Durability.TransientLocal,
)
BATCH_READER_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepAll,
    Policy.Durability.TransientLocal,
)
ASSIGN_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=_BLOCK),
    Policy.History.KeepLast(1),
    Policy.Durability.TransientLocal,
)
# Replies go through a writer per client, in the client's own partition, and
# a write gives up at once when the client has not acknowledged enough earlier
# replies: the store then keeps the reply and retries on its next rounds, so
# an unreachable client never stalls the store for the others, and a live
# client never loses a reply (KEEP_ALL: a KEEP_LAST writer drops replies a
# client has not acknowledged yet, e.g. in a burst of commits, or right after
# a store restart, before the client has discovered the new writer).
# Transient-local, so a client whose reader the new writer has not matched yet
# still gets the first replies.
REPLY_QOS = Qos(
    Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=1)),
    Policy.History.KeepAll,
    Policy.Durability.TransientLocal,
)
ANNOUNCE_QOS = ASSIGN_QOS
ANY_STATE = SampleState.Any | ViewState.Any | InstanceState.Any

#: Characters a DDS partition expression reads as wildcards or escapes.
_WILDCARDS = "*?\\"


def check_name(what: str, name: str) -> str:
    """Refuse names that would break DDS partition expressions."""
    if not isinstance(name, str) or not name or any(ch in name for ch in _WILDCARDS):
        raise BadParameterError(f"{what} must be a non-empty string without '*', '?' or '\\'")
    return name


def batch_partition(namespace: str, topic: str, channel: int) -> str:
    """The DDS partition carrying a channel's live batches."""
    return f"{namespace}/{topic}/{channel}"


def reply_partition(namespace: str, client: str) -> str:
    """The partition in which the store answers one client."""
    return f"{namespace}/reply/{client}"


def request_partition(namespace: str, index: int, count: int) -> str:
    """The partition in which the store of share ``index/count`` reads its requests."""
    return namespace if count == 1 else f"{namespace}/store/{index}"


def share_count(announcements: Iterable[Any]) -> tuple[int | None, str]:
    """``(count, "")`` when the announcements cover every share of one count.

    Otherwise ``(None, why)``, naming what is missing or inconsistent.
    """
    seen = {(a.index, a.count) for a in announcements}
    if not seen:
        return None, "no dcps store announced itself"
    counts = sorted({n for _, n in seen})
    listed = ", ".join(f"{i}/{n}" for i, n in sorted(seen, key=lambda s: (s[1], s[0])))
    if len(counts) > 1:
        return None, f"the stores disagree on the share count (shares {listed})"
    count = counts[0]
    missing = [f"{i}/{count}" for i in range(count) if (i, count) not in seen]
    if missing:
        return None, f"no store serves share {', '.join(missing)} (present: {listed})"
    return count, ""
