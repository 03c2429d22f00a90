"""Store admin commands: ``dcps topics list|describe``, ``dcps groups list|describe|reset|delete``
and ``dcps store status`` (as ``kafka-topics``, ``kafka-consumer-groups``, ``nats stream``).

They talk to the running store(s) of a namespace over the store protocol
(:class:`~dcps.cli._admin_client.StoreAdmin`); looking changes nothing, and
``groups reset``/``groups delete`` need the admin key. See docs/cli.md.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import attrs
import typer
from rich.table import Table

from ._admin_target import (
    CHANNEL,
    TO_HEAD,
    TO_OFFSET,
    TO_TAIL,
    TO_TIME,
    Target,
    connected,
    seek_target,
    show_size,
    show_time,
    store_command,
)
from ._dds import topics as dds_topics
from ._options import DOMAIN, JSON
from ._output import emit_json, out_console

__all__ = ["groups_app", "store_status", "topics_app"]

topics_app = typer.Typer(
    invoke_without_command=True,
    no_args_is_help=False,
    help="Channelled topics of the store: list, describe (as kafka-topics).",
)
groups_app = typer.Typer(
    no_args_is_help=True,
    help="Subscriber groups of the store: list, describe, reset, delete "
    "(as kafka-consumer-groups).",
)


def _topic_json(t: Any) -> dict[str, Any]:
    doc = attrs.asdict(t)
    doc["retention"] = t.retention
    for c, channel in zip(doc["channels"], t.channels, strict=True):
        c["elements"] = channel.elements
    return doc


def _group_json(g: Any) -> dict[str, Any]:
    return {**attrs.asdict(g), "active": g.active, "lag": g.lag}


# -- topics ----------------------------------------------------------------------------------


@topics_app.callback()
def topics_root(
    ctx: typer.Context,
    domain: int = DOMAIN,
    seconds: float = typer.Option(
        2.0, "--seconds", help="Without a subcommand: how long to listen for discovery."
    ),
    json_out: bool = JSON,
) -> None:
    """Channelled topics of the store: `dcps topics list`, `dcps topics describe TOPIC`.

    Without a subcommand, lists the DDS topics of the domain (as `dcps ls`).
    """
    if ctx.invoked_subcommand is None:
        dds_topics(domain=domain, seconds=seconds, json_out=json_out)


@topics_app.command("list")
@store_command
def topics_list(
    *,
    target: Target,
) -> None:
    """List the store's channelled topics: channels, type, elements, size, groups, retention."""
    with connected("topics list", target) as admin:
        report = admin.topics()
    if target.json:
        emit_json([_topic_json(t) for t in report.topics])
        return
    table = Table("topic", "channels", "type", "elements", "size", "groups", "retention")
    for t in report.topics:
        table.add_row(
            t.name,
            str(t.channel_count),
            t.type_name or "-",
            str(t.elements),
            show_size(t.bytes),
            str(len(t.groups)),
            t.retention,
        )
    out_console().print(table)


@topics_app.command("describe")
@store_command
def topics_describe(
    topic: str = typer.Argument(..., help="The channelled topic."),
    *,
    target: Target,
) -> None:
    """Describe a topic: type identity, retention, size, groups, and per channel its state.

    Per channel: head, tail, element count and the accept times of its first and last element.
    """
    with connected("topics describe", target) as admin:
        (t,) = admin.topics(topic, channels=True).topics
    if target.json:
        emit_json(_topic_json(t))
        return
    console = out_console()
    console.print(f"topic {t.name}: {t.channel_count} channels, type {t.type_name or '-'}")
    console.print(f"  type identity: {t.type_identity or '-'}")
    console.print(f"  retention: {t.retention}; {t.elements} elements, {show_size(t.bytes)}")
    console.print(f"  groups: {', '.join(t.groups) or '-'}")
    table = Table("channel", "head", "tail", "elements", "first accepted", "last accepted")
    for c in t.channels:
        table.add_row(
            str(c.channel),
            str(c.head),
            str(c.tail),
            str(c.elements),
            show_time(c.first_ns),
            show_time(c.last_ns),
        )
    console.print(table)


# -- groups ----------------------------------------------------------------------------------


@groups_app.command("list")
@store_command
def groups_list(
    topic: str = typer.Option("", "--topic", "-t", help="Only the groups of this topic."),
    *,
    target: Target,
) -> None:
    """List the subscriber groups: members, assignment generation and total lag."""
    with connected("groups list", target) as admin:
        report = admin.groups(topic)
    if target.json:
        emit_json([_group_json(g) for g in report.groups])
        return
    table = Table("topic", "group", "state", "members", "generation", "lag")
    for g in report.groups:
        table.add_row(
            g.topic,
            g.name,
            "active" if g.active else "empty",
            str(len(g.members)),
            str(g.generation),
            str(g.lag),
        )
    out_console().print(table)


@groups_app.command("describe")
@store_command
def groups_describe(
    topic: str = typer.Argument(..., help="The group's topic."),
    group: str = typer.Argument(..., help="The group."),
    *,
    target: Target,
) -> None:
    """Describe a group without joining it: members, commits and lag per channel.

    Per channel: owner, committed position, head, tail and lag (tail minus committed).
    """
    with connected("groups describe", target) as admin:
        (g,) = admin.groups(topic, group).groups
    if target.json:
        emit_json(_group_json(g))
        return
    console = out_console()
    state = f"active, {len(g.members)} member(s)" if g.active else "empty"
    console.print(f"group {g.name} of topic {g.topic}: {state}, generation {g.generation}")
    console.print(f"  lag: {g.lag}")
    if g.members:
        members = Table("member", "channels", "timeout s", "idle s")
        for m in g.members:
            members.add_row(
                m.name, ",".join(map(str, m.channels)) or "-", f"{m.timeout_s:g}", f"{m.idle_s:g}"
            )
        console.print(members)
    table = Table("channel", "owner", "committed", "head", "tail", "lag")
    for c in g.channels:
        table.add_row(
            str(c.channel), c.owner or "-", str(c.committed), str(c.head), str(c.tail), str(c.lag)
        )
    console.print(table)


@groups_app.command("reset")
@store_command
def groups_reset(
    topic: str = typer.Argument(..., help="The group's topic."),
    group: str = typer.Argument(..., help="The group."),
    to_head: bool = TO_HEAD,
    to_tail: bool = TO_TAIL,
    to_time: str | None = TO_TIME,
    to_offset: int | None = TO_OFFSET,
    channel: list[int] = CHANNEL,
    force: bool = typer.Option(False, "--force", help="Reset even while the group has members."),
    *,
    target: Target,
) -> None:
    """Move a group's committed positions (needs the admin key).

    Refused while the group has members unless --force; members that join afterwards
    start from the new positions.
    """
    mode, target_value = seek_target(to_head, to_tail, to_time, to_offset)
    with connected("groups reset", target) as admin:
        done = admin.reset(topic, group, mode, target_value, channels=channel, force=force)
    if target.json:
        emit_json({"topic": topic, "group": group, "next_offsets": done})
        return
    table = Table("channel", "next offset")
    for c, offset in done.items():
        table.add_row(str(c), str(offset))
    console = out_console()
    console.print(f"group {group} of topic {topic} reset to {mode.name.lower()}")
    console.print(table)


@groups_app.command("delete")
@store_command
def groups_delete(
    topic: str = typer.Argument(..., help="The group's topic."),
    group: str = typer.Argument(..., help="The group."),
    force: bool = typer.Option(
        False, "--force", help="Delete even while the group has members (they lose their channels)."
    ),
    *,
    target: Target,
) -> None:
    """Delete a group and its commits (needs the admin key).

    Refused while the group has members unless --force. Exit 1 if the group does not exist.
    """
    with connected("groups delete", target) as admin:
        deleted = admin.delete(topic, group, force=force)
    if target.json:
        emit_json({"topic": topic, "group": group, **attrs.asdict(deleted)})
    elif deleted.existed:
        out_console().print(f"group {group} of topic {topic} deleted")
    if not deleted.existed:
        typer.echo(f"dcps groups delete: topic {topic!r} has no group {group!r}", err=True)
        raise typer.Exit(1)


# -- store status ----------------------------------------------------------------------------


@store_command
def store_status(
    *,
    target: Target,
) -> None:
    """Show the running store(s) of a namespace: share, process, data, uptime, clients, size."""
    with connected("store status", target) as admin:
        stores = admin.status()
    if target.json:
        emit_json([attrs.asdict(s) for s in stores])
        return
    table = Table(
        "share", "host", "pid", "data", "uptime", "clients", "topics", "groups", "file", "free"
    )
    for s in stores:
        table.add_row(
            s.share + (" (coordinator)" if s.coordinates else ""),
            s.host,
            str(s.pid),
            s.data_dir,
            str(dt.timedelta(seconds=round(s.uptime_s))),
            str(s.clients),
            str(s.topics),
            str(s.groups),
            show_size(s.file_bytes),
            show_size(s.disk_free_bytes),
        )
    out_console().print(table)
