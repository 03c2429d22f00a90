"""The store's answers to the admin requests (``dcps/wire/_admin.py``, kinds 70-89).

Describing topics, groups and the store reads the log and the coordinator's
memory and changes nothing (a described group is not joined). Resetting and
deleting a group need the admin key (checked by the authentication layer
before a handler runs) and are refused while the group has members unless
forced. Every handler answers for this store's share of the channels; the
admin client merges the answers of the stores of a namespace.

Handlers run on the store's service thread, like every other handler.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import sqlite3
import time
from typing import TYPE_CHECKING, Any

from dcps.wire._admin import (
    ChannelReport,
    DeleteGroupRequest,
    DescribeGroupsRequest,
    DescribeTopicsRequest,
    GroupChannelReport,
    GroupDeleted,
    GroupReport,
    GroupReset,
    GroupsReport,
    MemberReport,
    ResetGroupRequest,
    StoreStatus,
    StoreStatusRequest,
    TopicReport,
    TopicsReport,
    channel_lag,
)
from dcps.wire._codes import SeekMode
from idl._errors import PreconditionNotMetError

from ._groups import check_channels_exist
from ._log import ChannelLog

if TYPE_CHECKING:
    from ._service import Store, _Call

__all__ = [
    "ADMIN_HANDLERS",
    "SHARE_ADMIN_HANDLERS",
    "active_members",
    "reset_channel",
    "reset_targets",
    "store_file_bytes",
]

_log = logging.getLogger("dcps.store")


def store_file_bytes(log: ChannelLog) -> int:
    """Bytes of the store's SQLite file and its WAL on disk."""
    total = 0
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            total += os.stat(f"{log.path}{suffix}").st_size
    return total


def _topic_bytes(log: ChannelLog) -> dict[str, int]:
    """Stored bytes (payloads and their size columns) per topic, read through a read-only
    connection of its own."""
    uri = f"{log.path.resolve().as_uri()}?mode=ro"
    db = sqlite3.connect(uri, uri=True)
    try:
        rows = db.execute(
            "SELECT t.name, coalesce(sum(length(b.data) + length(b.sizes)), 0)"
            " FROM topics t LEFT JOIN batches b ON b.topic_id = t.id GROUP BY t.name"
        ).fetchall()
    finally:
        db.close()
    return {str(name): int(size) for name, size in rows}


def _served(store: Store, channel_count: int) -> list[int]:
    return [c for c in range(channel_count) if store.share.serves(c)]


def active_members(store: Store, topic: str, group: str) -> list[MemberReport]:
    """The members ``group`` of ``topic`` has now: the coordinator's, or (on another share's
    store) those of the coordinator's latest assignment."""
    now = time.monotonic()
    if store.share.coordinates:
        found = store._groups.group(topic, group)
        if found is None:
            return []
        return [
            MemberReport(
                m.name,
                tuple(sorted(c for c, owner in found.owners.items() if owner == m.name)),
                m.timeout,
                round(now - m.last_seen, 3),
                m.anonymous,
            )
            for m in sorted(found.members.values(), key=lambda m: m.name)
        ]
    a = store._mirror.get((topic, group))
    if a is None:
        return []
    return [
        MemberReport(name, tuple(c for c, o in enumerate(a.owners) if o == i), 0.0, 0.0)
        for i, name in enumerate(a.members)
    ]


def _generation(store: Store, topic: str, group: str) -> int:
    if store.share.coordinates:
        found = store._groups.group(topic, group)
        return 0 if found is None else found.generation
    a = store._mirror.get((topic, group))
    return 0 if a is None else int(a.generation)


# -- describing ------------------------------------------------------------------------------


def _on_describe_topics(store: Store, call: _Call[DescribeTopicsRequest]) -> None:
    r = call.request
    log = store.log
    infos = [log.topic(r.topic)] if r.topic else log.topics()
    sizes = _topic_bytes(log)
    reader = log.reader() if r.channels else None
    try:
        topics = []
        for info in infos:
            served = _served(store, info.channel_count)
            states = {c: log.channel_state(info.name, c) for c in served}
            channels: list[ChannelReport] = []
            if reader is not None:
                for c in served:
                    span = reader.time_range(info.name, c)
                    first, last = span if span is not None else (None, None)
                    channels.append(ChannelReport(c, states[c].head, states[c].tail, first, last))
            topics.append(
                TopicReport(
                    info.name,
                    info.channel_count,
                    info.retain_consumed,
                    info.type_name,
                    info.type_identity,
                    sum(max(0, s.count) for s in states.values()),
                    sizes.get(info.name, 0),
                    tuple(log.groups(info.name)),
                    tuple(channels),
                )
            )
    finally:
        if reader is not None:
            reader.close()
    store._reply(call, TopicsReport(tuple(topics)))


def describe_group(store: Store, topic: str, group: str) -> GroupReport:
    """One group as this store sees it: members, commits and lag of its channels."""
    log = store.log
    info = log.topic(topic)
    members = active_members(store, topic, group)
    owners = {c: m.name for m in members for c in m.channels}
    channels = []
    for c in _served(store, info.channel_count):
        state = log.channel_state(topic, c)
        committed, explicit = log.committed(topic, group, c)
        channels.append(
            GroupChannelReport(
                c,
                committed,
                explicit,
                state.head,
                state.tail,
                channel_lag(committed, state.head, state.tail),
                owners.get(c, ""),
            )
        )
    return GroupReport(
        topic, group, _generation(store, topic, group), tuple(members), tuple(channels)
    )


def _on_describe_groups(store: Store, call: _Call[DescribeGroupsRequest]) -> None:
    r = call.request
    log = store.log
    names = [r.topic] if r.topic else [t.name for t in log.topics()]
    groups: list[GroupReport] = []
    for topic in names:
        found = log.groups(topic)
        if r.group:
            if r.group not in found:
                raise PreconditionNotMetError(
                    f"topic {topic!r} has no subscriber group {r.group!r}"
                )
            found = [r.group]
        groups.extend(describe_group(store, topic, g) for g in found)
    store._reply(call, GroupsReport(tuple(groups)))


def _on_store_status(store: Store, call: _Call[StoreStatusRequest]) -> None:
    log = store.log
    topics = log.topics()
    group_count = sum(len(log.groups(t.name)) for t in topics)
    members = sum(len(g.members) for g in store._groups.groups()) if store.share.coordinates else 0
    started = store.announcement.started_ns
    store._reply(
        call,
        StoreStatus(
            namespace=store.namespace,
            domain_id=store.domain_id,
            share=str(store.share),
            coordinates=store.share.coordinates,
            incarnation=store.incarnation,
            pid=os.getpid(),
            host=socket.gethostname(),
            data_dir=str(store.data_dir.resolve()),
            started_ns=started,
            uptime_s=round((time.time_ns() - started) / 1e9, 3),
            clients=len(store._reply_writers),
            topics=len(topics),
            groups=group_count,
            members=members,
            file_bytes=store_file_bytes(log),
            disk_free_bytes=shutil.disk_usage(store.data_dir).free,
            authenticated=store.authenticated,
            metrics=store.metrics_url or "",
        ),
    )


# -- changing (admin key) --------------------------------------------------------------------


def _refuse_if_active(store: Store, topic: str, group: str, doing: str, force: bool) -> int:
    """The group's member count; refused when it has members and ``force`` is not set."""
    members = active_members(store, topic, group)
    if members and not force:
        names = ", ".join(m.name for m in members[:5]) + (" ..." if len(members) > 5 else "")
        raise PreconditionNotMetError(
            f"cannot {doing} group {group!r} of topic {topic!r}: it has {len(members)} active "
            f"member(s) ({names}); stop them first, or force it (dcps groups ... --force)"
        )
    return len(members)


def reset_channel(
    log: ChannelLog, topic: str, group: str, mode: SeekMode, channel: int, target: int
) -> int:
    """Move ``group``'s commit in one channel of ``topic`` (``target``: the offset or time of
    POSITION and TIMESTAMP); the offset it delivers next."""
    state = log.channel_state(topic, channel)
    current, _ = log.committed(topic, group, channel)
    if mode is SeekMode.HEAD:
        log.seek(topic, group, channel, to="head")
    else:
        if mode is SeekMode.TAIL:
            last = state.tail
        elif mode is SeekMode.TIMESTAMP:
            last = log.find_timestamp(topic, channel, target) - 1
        else:
            last = target - 1
        last = min(max(last, state.head - 1), state.tail)
        if last > current:
            log.commit(topic, group, channel, last)
        elif last < current:
            log.seek(topic, group, channel, offset=last)
    return log.committed(topic, group, channel)[0] + 1


def reset_targets(store: Store, r: ResetGroupRequest, channel_count: int) -> dict[int, int]:
    """channel -> target of a reset request (every channel this store serves when it names
    none)."""
    channels = list(r.channels) or _served(store, channel_count)
    if r.channels:
        targets = list(r.targets) or [0] * len(channels)
    else:
        targets = [r.targets[0] if r.targets else 0] * len(channels)
    return dict(zip(channels, targets, strict=True))


def _on_reset_group(store: Store, call: _Call[ResetGroupRequest]) -> None:
    r = call.request
    log = store.log
    info = log.topic(r.topic)
    check_channels_exist(log, r.topic, r.channels)
    store._foreign(r.topic, r.channels)
    if not log.has_group(r.topic, r.group):
        raise PreconditionNotMetError(f"topic {r.topic!r} has no subscriber group {r.group!r}")
    _refuse_if_active(store, r.topic, r.group, "reset", r.force)
    done = {
        c: reset_channel(log, r.topic, r.group, r.mode, c, t)
        for c, t in reset_targets(store, r, info.channel_count).items()
    }
    _log.info(
        "group %r of topic %r reset to %s%s: next offsets %s",
        r.group,
        r.topic,
        r.mode.name.lower(),
        " (forced)" if r.force else "",
        done,
    )
    store._reply(call, GroupReset(done))


def _on_delete_group(store: Store, call: _Call[DeleteGroupRequest]) -> None:
    r = call.request
    store.log.topic(r.topic)
    members = _refuse_if_active(store, r.topic, r.group, "delete", r.force)
    store._forget_secrets(r.topic, r.group)
    if store.share.coordinates:
        existed = store._groups.destroy(r.topic, r.group)
    else:
        existed = store.log.destroy_group(r.topic, r.group)
    store._reply(call, GroupDeleted(existed, members))


#: Handlers of every store (registered in ``Store._HANDLERS`` and ``_SHARE_HANDLERS``).
ADMIN_HANDLERS: dict[int, Any] = {
    DescribeTopicsRequest.op: _on_describe_topics,
    DescribeGroupsRequest.op: _on_describe_groups,
    ResetGroupRequest.op: _on_reset_group,
    DeleteGroupRequest.op: _on_delete_group,
    StoreStatusRequest.op: _on_store_status,
}
SHARE_ADMIN_HANDLERS = ADMIN_HANDLERS
