"""The group coordinator: members, heartbeats, sticky assignments (the store of share 0/n).

It keeps who is in each subscriber group of each topic, expels members that
stop heartbeating, computes the sticky assignment of channels
(``_assignment.py``) and publishes it on the Assignment topic. The store's
handlers ask it who owns what before they commit or seek.

Assignments live in memory only, so they are sticky across a store restart
through the members: a member rejoining a restarted store names the channels
it owned (``JoinRequest.previous_channels``; a commit stamped with an earlier
incarnation names them too). The first such claim on a group that has no
members opens a *claim window*: each claimed channel goes to its first
claimant, and channels nobody claimed stay unowned, kept for their previous
owners as a silent member's channels are kept, until every channel is
claimed or the window (the first claimant's member timeout) ends. Then the
group is balanced as usual, keeping the claimed channels where the quotas
allow. So members that come back keep their channels and resume at the
group's commits: nothing committed is delivered again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

import attrs

from dcps.wire._messages import Assignment
from dcps.wire._replies import Membership
from dcps.wire._requests import CommitRequest, JoinRequest
from idl._errors import BadParameterError, PreconditionNotMetError

from ._assignment import assign_channels
from ._log import ChannelLog

__all__ = ["ANONYMOUS_PREFIX", "Group", "GroupCoordinator", "Member"]

_log = logging.getLogger("dcps.store")

#: Group names of anonymous subscribers start so (they do not outlive a store).
ANONYMOUS_PREFIX = "~anonymous/"


@attrs.define
class Member:
    """One member of a group: its timeout and when it was last heard of."""

    name: str
    timeout: float
    last_seen: float
    anonymous: bool


@attrs.define
class Group:
    """One subscriber group of a topic and its channel owners."""

    topic: str
    name: str
    members: dict[str, Member] = attrs.Factory(dict)
    owners: dict[int, str] = attrs.Factory(dict)
    generation: int = 0
    anonymous: bool = False
    #: While not None (monotonic time): the claim window after a store restart is open.
    claiming_until: float | None = None


class GroupCoordinator:
    """The groups of one store: membership, expiry and assignments (service thread only)."""

    def __init__(self, log: ChannelLog, assignments: Any, incarnation: str) -> None:
        self._log = log
        self._assignments = assignments  # the Assignment topic's writer
        self._incarnation = incarnation
        self._groups: dict[tuple[str, str], Group] = {}

    def member_of(self, topic: str, group: str, member: str) -> Group:
        """The group ``member`` belongs to (marked alive); refused if it is not a member."""
        found = self._groups.get((topic, group))
        if found is None or member not in found.members:
            raise PreconditionNotMetError(
                f"{member!r} is not a member of group {group!r} of topic "
                f"{topic!r} (left, timed out, or the store restarted)"
            )
        found.members[member].last_seen = time.monotonic()
        return found

    def has_member(self, topic: str, group: str, member: str) -> bool:
        """Whether ``member`` belongs to ``group`` of ``topic`` now (not expelled, not left)."""
        found = self._groups.get((topic, group))
        return found is not None and member in found.members

    def membership(self, group: Group, member: str) -> Membership:
        """What JOIN and HEARTBEAT answer."""
        owned = tuple(sorted(c for c, m in group.owners.items() if m == member))
        return Membership(group.generation, self._incarnation, owned)

    def unowned(self, group: Group, member: str, channels: Iterable[int]) -> list[int]:
        """The ``channels`` ``member`` does not own; channels the topic lacks raise."""
        channels = list(channels)
        check_channels_exist(self._log, group.topic, channels)
        return [c for c in channels if group.owners.get(c) != member]

    def join(self, request: JoinRequest) -> Membership:
        """Add (or refresh) a member and rebalance.

        ``request.previous_channels`` are the member's claims after a store
        restart (see the module docstring); a channel the topic lacks raises
        :class:`~dcps.BadParameterError` before anything changes.
        """
        topic, name = request.topic, request.group
        self._log.topic(topic)
        check_channels_exist(self._log, topic, request.previous_channels)
        self._log.create_group(topic, name)
        group = self._groups.setdefault((topic, name), Group(topic, name))
        group.anonymous = request.anonymous
        timeout = max(0.05, request.timeout_ms / 1000.0)
        if request.member not in group.members:
            _log.info("group %r of topic %r: member %s joined", name, topic, request.member)
        self._admit(group, request.member, timeout, request.anonymous, request.previous_channels)
        return self.membership(group, request.member)

    def _admit(
        self, group: Group, member: str, timeout: float, anonymous: bool, claims: Iterable[int]
    ) -> None:
        """Add ``member`` to ``group`` with its ``claims`` (see the module docstring); rebalance."""
        now = time.monotonic()
        claims = list(claims)
        if claims and not group.members and not anonymous:
            group.claiming_until = now + timeout  # the first claim after a restart
        group.members[member] = Member(member, timeout, now, anonymous)
        if group.claiming_until is not None:
            for channel in claims:
                if group.owners.get(channel) not in group.members:  # unclaimed yet
                    group.owners[channel] = member
        self._rebalance(group)

    def heartbeat(self, topic: str, group: str, member: str) -> Membership:
        """A member is alive: its current channels."""
        found = self.member_of(topic, group, member)
        return self.membership(found, member)

    def leave(self, topic: str, group: str, member: str) -> None:
        """A member leaves (unknown members are ignored)."""
        found = self._groups.get((topic, group))
        if found is not None and member in found.members:
            del found.members[member]
            _log.info("group %r of topic %r: member %s left", group, topic, member)
            self._after_departure(found, [])

    def destroy(self, topic: str, group: str) -> bool:
        """Delete a group and its commits; its members lose their channels."""
        existed = self._log.destroy_group(topic, group)
        if existed:
            _log.info("group %r of topic %r deleted", group, topic)
        found = self._groups.pop((topic, group), None)
        if found is not None:
            expelled = list(found.members)
            found.members.clear()
            self._rebalance(found, expelled)
        return existed

    def expire(self) -> None:
        """Expel the members that missed their timeout; close claim windows that ended."""
        now = time.monotonic()
        for group in list(self._groups.values()):
            dead = [m.name for m in group.members.values() if now - m.last_seen > m.timeout]
            if dead:
                for name in dead:
                    _log.info(
                        "group %r of topic %r: member %s expelled (no heartbeat for %.1f s)",
                        group.name,
                        group.topic,
                        name,
                        group.members[name].timeout,
                    )
                    del group.members[name]
                self._after_departure(group, dead)
            elif group.claiming_until is not None and now >= group.claiming_until:
                self._rebalance(group)  # channels nobody claimed go to the members

    def readmit(self, request: CommitRequest) -> None:
        """Re-admit a member that joined an earlier incarnation of this store.

        A restarted store has forgotten its members, while they go on
        receiving the live tail of their channels until a heartbeat tells
        them; without this their first commits would be refused as unowned.
        The committed channels count as the member's claims (as a rejoining
        member's ``previous_channels`` do); channels another member claimed
        first stay theirs, so those commits are still UNOWNED.
        """
        key = (request.topic, request.group)
        group = self._groups.get(key)
        if group is not None and request.member in group.members:
            return
        if request.group.startswith(ANONYMOUS_PREFIX) or not self._log.has_group(*key):
            return  # anonymous groups do not outlive a store; destroyed groups stay so
        check_channels_exist(self._log, request.topic, request.channels)
        group = self._groups.setdefault(key, Group(request.topic, request.group))
        ms = request.member_timeout_ms
        timeout = max(0.05, ms / 1000.0) if ms > 0 else 30.0
        self._admit(group, request.member, timeout, False, request.channels)
        _log.info(
            "group %r of topic %r: member %s re-admitted after a store restart",
            request.group,
            request.topic,
            request.member,
        )

    def touch(self, topic: str, group: str, member: str) -> None:
        """Mark ``member`` alive if it is one (a commit of possibly unowned channels)."""
        found = self._groups.get((topic, group))
        if found is not None and member in found.members:
            found.members[member].last_seen = time.monotonic()

    def group(self, topic: str, name: str) -> Group | None:
        """The live state of group ``name`` of ``topic`` (None: no member since the start)."""
        return self._groups.get((topic, name))

    def groups(self) -> list[Group]:
        """Every group with live state (read on the service thread)."""
        return list(self._groups.values())

    def _after_departure(self, group: Group, expelled: list[str]) -> None:
        if group.anonymous and not group.members:
            self._log.destroy_group(group.topic, group.name)
            del self._groups[(group.topic, group.name)]
        self._rebalance(group, expelled)

    def _rebalance(self, group: Group, expelled: Iterable[str] = ()) -> None:
        count = self._log.topic(group.topic).channel_count
        if group.claiming_until is not None:
            claimed = {c: m for c, m in group.owners.items() if m in group.members}
            if len(claimed) < count and time.monotonic() < group.claiming_until:
                owners = claimed  # the window is open: unclaimed channels wait
            else:
                group.claiming_until = None
        if group.claiming_until is None:
            owners = assign_channels(count, group.members, group.owners)
        moved = {
            c: (group.owners.get(c, ""), owners.get(c, ""))
            for c in sorted(set(owners) | set(group.owners))
            if group.owners.get(c) != owners.get(c)
        }
        group.owners = owners
        group.generation += 1
        if moved:
            _log.info(
                "group %r of topic %r: rebalance %d: %d member(s), moved %s",
                group.name,
                group.topic,
                group.generation,
                len(group.members),
                _moves(moved),
            )
        members = sorted(group.members)
        index = {m: i for i, m in enumerate(members)}
        self._assignments.write(
            Assignment(
                topic=group.topic,
                group=group.name,
                incarnation=self._incarnation,
                generation=group.generation,
                members=members,
                owners=[index[owners[c]] if c in owners else -1 for c in range(count)],
                expelled=list(expelled),
            )
        )


def check_channels_exist(log: ChannelLog, topic: str, channels: Iterable[int]) -> None:
    """Refuse channels ``topic`` does not have, naming them."""
    count = log.topic(topic).channel_count
    bad = [c for c in channels if not 0 <= c < count]
    if bad:
        raise BadParameterError(f"topic {topic!r} has channels 0..{count - 1}; {bad} do not exist")


def _moves(moved: dict[int, tuple[str, str]], limit: int = 16) -> str:
    """``{channel: (old, new)}`` for a log line: consecutive channels moving alike as ranges."""
    runs: list[tuple[int, int, tuple[str, str]]] = []
    for c, move in moved.items():
        if runs and runs[-1][1] == c - 1 and runs[-1][2] == move:
            runs[-1] = (runs[-1][0], c, move)
        else:
            runs.append((c, c, move))
    parts = [
        f"{a if a == b else f'{a}-{b}'}: {old or '-'} -> {new or '-'}" for a, b, (old, new) in runs
    ]
    more = f", ... ({len(parts) - limit} more)" if len(parts) > limit else ""
    return "{" + ", ".join(parts[:limit]) + more + "}"
