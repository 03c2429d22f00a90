"""Sticky channel assignment for subscriber groups (a pure function)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from idl._errors import BadParameterError

__all__ = ["assign_channels"]


def assign_channels(
    channel_count: int,
    members: Iterable[str],
    previous: Mapping[int, str] | None = None,
) -> dict[int, str]:
    """Assign ``channel_count`` channels to ``members``, moving as few as possible.

    ``previous`` maps channels to their current owners (owners that are no
    longer members are ignored). The result maps every channel to one member
    when there is at least one member (an empty dict otherwise); members own
    ``n // m`` or ``n // m + 1`` channels, so extra members beyond the channel
    count own nothing. Among balanced assignments it keeps the most channels
    with their current owner: the members keeping most channels receive the
    larger quotas. Ties break by member name, so the result is deterministic.
    """
    if channel_count < 0:
        raise BadParameterError(f"channel_count must be >= 0, got {channel_count}")
    alive = sorted(set(members))
    if not alive or channel_count == 0:
        return {}
    previous = previous or {}
    kept: dict[str, list[int]] = {m: [] for m in alive}
    for channel in range(channel_count):
        owner = previous.get(channel)
        if owner in kept:
            kept[owner].append(channel)
    base, extra = divmod(channel_count, len(alive))
    by_keep = sorted(alive, key=lambda m: (-len(kept[m]), m))
    quota = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_keep)}
    result: dict[int, str] = {}
    free: list[int] = [c for c in range(channel_count) if previous.get(c) not in kept]
    for member in alive:
        mine = kept[member]
        for channel in mine[: quota[member]]:
            result[channel] = member
        free.extend(mine[quota[member] :])
    free.sort()
    free.reverse()
    for member in alive:
        for _ in range(quota[member] - min(len(kept[member]), quota[member])):
            result[free.pop()] = member
    return dict(sorted(result.items()))
