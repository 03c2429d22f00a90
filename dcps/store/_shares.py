"""Several store processes splitting one namespace's channels between them.

Design
------
Each store is started with a *share* ``index/count`` (default ``0/1``: every
channel, the single-store deployment). The store of share ``i/n`` serves
channel ``c`` of every channelled topic iff ``c % n == i``: it sequences,
persists (in its own data directory), pushes, fetches, trims and seeks those
channels and refuses requests naming any other channel. So a topic's channels
are spread evenly over the stores whatever its channel count, and a client
knows the store of a channel from ``n`` alone.

Coordination. The store of share ``0/n`` is the *coordinator*: it alone keeps
group membership (JOIN, HEARTBEAT, LEAVE, member timeouts), computes the
sticky assignment and publishes it on the Assignment topic, as a single store
does. The other stores read those Assignment samples (transient-local, so a
restarted store gets the current ones at once) and validate COMMIT and SEEK
requests against them: a member may commit or seek a channel only while the
coordinator's latest assignment (of the coordinator incarnation now
announced) gives it that channel. A commit that arrives before the assignment
granting the channel is held back up to :data:`OWNERSHIP_GRACE` seconds
waiting for it, then refused as unowned. Every store keeps the group and its
commits of its own channels; JOIN and DESTROY_GROUP go to every store so the
group exists (and is removed) everywhere before its members run.

Announcements. Every store announces ``(incarnation, index, count, started,
pid, host, data dir)`` on the ``dcps_channels_store`` topic (partition
``<ns>``, reliable, transient-local). A store refuses to run when a live
store of the namespace, started earlier, has the same index or another count
(it listens for :data:`SETTLE` seconds before serving, whatever its count, and
judges every store heard of at once; afterwards it keeps checking: the younger
of two overlapping stores stops). Two single stores (``0/1``) of a namespace
overlap too: both would answer every request.

Routing. A client (``StoreClient``) waits until the live announcements
cover every share of one count, then sends each request to the partition of
the store that must answer it: ``<ns>`` when ``count`` is 1 (the wire of a
single store, unchanged), ``<ns>/store/<index>`` otherwise. Requests naming
channels (PUBLISH, FETCH, COMMIT, SEEK, STATE) are split by store and the
replies merged back in the request's channel order (STATE without channels
asks every store for its own); JOIN, ENSURE_TOPIC and DESTROY_GROUP go to all
stores; HEARTBEAT and LEAVE to the coordinator.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from idl._errors import BadParameterError

__all__ = [
    "OWNERSHIP_GRACE",
    "SETTLE",
    "Share",
    "share_conflict",
    "share_conflict_with",
]

#: Seconds a non-coordinating store waits for the assignment that makes a
#: commit's or seek's member the owner of the channel, before refusing it.
OWNERSHIP_GRACE = 2.0
#: Seconds a store listens for overlapping stores of its namespace before it
#: starts serving (and before ``dcps store`` prints that it is ready).
SETTLE = 0.5


def _check(index: object, count: object) -> tuple[int, int]:
    if (
        not isinstance(index, int)
        or not isinstance(count, int)
        or isinstance(index, bool)
        or isinstance(count, bool)
        or count < 1
        or not 0 <= index < count
    ):
        raise BadParameterError(
            f"a store share is index/count with 0 <= index < count, got {index!r}/{count!r}"
        )
    return index, count


@attrs.frozen
class Share:
    """The channels one store serves: channel ``c`` iff ``c % count == index``.

    .. versionadded:: 0.1
    """

    index: int = 0
    count: int = 1

    def __attrs_post_init__(self) -> None:
        _check(self.index, self.count)

    @classmethod
    def of(cls, value: Share | tuple[int, int] | str) -> Share:
        """A share from a :class:`Share`, an ``(index, count)`` pair or text ``"index/count"``."""
        if isinstance(value, Share):
            return value
        if isinstance(value, str):
            head, sep, tail = value.strip().partition("/")
            try:
                if not sep:
                    raise ValueError(value)
                index, count = int(head), int(tail)
            except ValueError:
                raise BadParameterError(
                    f"a store share is written index/count (e.g. 1/3), got {value!r}"
                ) from None
            return cls(index, count)
        if isinstance(value, tuple) and len(value) == 2:
            return cls(*value)
        raise BadParameterError(f"a store share is index/count or (index, count), got {value!r}")

    @property
    def coordinates(self) -> bool:
        """True for the store that coordinates subscriber groups (index 0)."""
        return self.index == 0

    def serves(self, channel: int) -> bool:
        """True when this share's store serves ``channel``."""
        return channel % self.count == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"


def _describe(a: Any) -> str:
    return f"store {a.index}/{a.count} (pid {a.pid} on {a.host}, data {a.data_dir})"


def _overlap(mine: Any, other: Any) -> str | None:
    """Why ``mine`` must not serve next to the older ``other`` (None: they fit)."""
    if other.count != mine.count:
        return (
            f"this store's share {mine.index}/{mine.count} does not fit "
            f"{_describe(other)}: every store of a namespace must use the same count"
        )
    if other.index == mine.index:
        return f"share {mine.index}/{mine.count} is already served by {_describe(other)}"
    return None


def share_conflict(mine: Any, others: Iterable[Any]) -> str | None:
    """Why the store announcing ``mine`` must not serve next to ``others`` (None: it may).

    Both are announcements (``incarnation``, ``index``, ``count``,
    ``started_ns``, ...). Of two overlapping stores only the younger is told,
    so exactly one of them stops. The stores are taken oldest first, and a
    store that an older standing store refuses does not count: the conflict
    reported is with the oldest store that stands, whatever order the
    announcements arrived in.
    """
    found = share_conflict_with(mine, others)
    return None if found is None else found[1]


def share_conflict_with(mine: Any, others: Iterable[Any]) -> tuple[Any, str] | None:
    """:func:`share_conflict`, with the announcement of the store it conflicts with.

    A keyed store confirms that store alive before it yields to it
    (``dcps/store/_liveness.py``): a verified announcement may be a replay.
    """

    def age(a: Any) -> tuple[int, str]:
        return (a.started_ns, a.incarnation)

    standing: list[Any] = []
    for other in sorted(others, key=age):
        if other.incarnation == mine.incarnation or age(other) > age(mine):
            continue  # the other is younger: it yields
        if any(_overlap(other, older) for older in standing):
            continue  # refused itself by an older store: it will stop
        why = _overlap(mine, other)
        if why is not None:
            return other, why
        standing.append(other)
    return None
