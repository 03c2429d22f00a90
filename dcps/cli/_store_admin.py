"""Store admin commands: ``dcps topics list|describe``, ``dcps groups list|describe|reset|delete``
and ``dcps store status`` (as ``kafka-topics``, ``kafka-consumer-groups``, ``nats stream``).

They talk to the running store(s) of a namespace over the store protocol
(:class:`~dcps.cli._admin_client.StoreAdmin`); looking changes nothing, and
``groups reset``/``groups delete`` need the admin key. See docs/cli.md.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import typer
from rich.table import Table

from ._dds import topics as dds_topics
from ._options import (
    DOMAIN,
    DOMAIN_TAG,
    INTERFACE,
    JSON,
    MULTICAST,
    NETWORK_CONFIG,
    PEER,
    Network,
    fail,
)
from ._output import emit_json, out_console

__all__ = ["groups_app", "store_status", "topics_app"]

NAMESPACE = typer.Option("dcps", "--namespace", help="The store's partition namespace.")
KEY_FILE = typer.Option(
    None,
    "--key-file",
    help="The namespace key file (default: $DCPS_STORE_KEY_FILE).",
    rich_help_panel="Authentication",
)
ADMIN_KEY_FILE = typer.Option(
    None,
    "--admin-key-file",
    help="The admin key file, for reset and delete (default: $DCPS_STORE_ADMIN_KEY_FILE).",
    rich_help_panel="Authentication",
)
TIMEOUT = typer.Option(
    10.0, "--timeout", min=0.1, help="Seconds to wait for the store(s) to answer."
)

CHANNEL = typer.Option(
    [], "--channel", "-c", help="Only this channel (repeatable; default: every channel)."
)

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


@attrs.frozen
class _Target:
    """Where one command's requests go."""

    domain: int
    namespace: str
    network: Network
    key_file: Path | None
    admin_key_file: Path | None
    timeout: float


@contextlib.contextmanager
def _admin(command: str, target: _Target) -> Iterator[Any]:
    """A connected StoreAdmin; a dcps error ends the command with exit 1, naming it."""
    # function-local: `dcps --help` does not load Cyclone and the store protocol
    from dcps.wire._sealing import FROM_ENVIRONMENT
    from idl._errors import DcpsError

    from ._admin_client import StoreAdmin

    try:
        with StoreAdmin(
            target.domain,
            target.namespace,
            network=target.network.config(),
            key=FROM_ENVIRONMENT if target.key_file is None else target.key_file,
            admin_key=FROM_ENVIRONMENT if target.admin_key_file is None else target.admin_key_file,
            timeout=target.timeout,
        ) as admin:
            yield admin
    except DcpsError as exc:
        raise fail(command, exc) from None


def _target(
    domain: int,
    namespace: str,
    network_config: Path | None,
    interface: list[str],
    peer: list[str],
    multicast: bool | None,
    domain_tag: str | None,
    key_file: Path | None,
    admin_key_file: Path | None,
    timeout: float,
) -> _Target:
    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    return _Target(domain, namespace, network, key_file, admin_key_file, timeout)


def _time(ns: int | None) -> str:
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(timespec="milliseconds")


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


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
def topics_list(
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """List the store's channelled topics: channels, type, elements, size, groups, retention."""
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("topics list", target) as admin:
        report = admin.topics()
    if json_out:
        emit_json([_topic_json(t) for t in report.topics])
        return
    table = Table("topic", "channels", "type", "elements", "size", "groups", "retention")
    for t in report.topics:
        table.add_row(
            t.name,
            str(t.channel_count),
            t.type_name or "-",
            str(t.elements),
            _size(t.bytes),
            str(len(t.groups)),
            t.retention,
        )
    out_console().print(table)


@topics_app.command("describe")
def topics_describe(
    topic: str = typer.Argument(..., help="The channelled topic."),
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """Describe a topic: type identity, retention, size, groups, and per channel its state.

    Per channel: head, tail, element count and the accept times of its first and last element.
    """
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("topics describe", target) as admin:
        (t,) = admin.topics(topic, channels=True).topics
    if json_out:
        emit_json(_topic_json(t))
        return
    console = out_console()
    console.print(f"topic {t.name}: {t.channel_count} channels, type {t.type_name or '-'}")
    console.print(f"  type identity: {t.type_identity or '-'}")
    console.print(f"  retention: {t.retention}; {t.elements} elements, {_size(t.bytes)}")
    console.print(f"  groups: {', '.join(t.groups) or '-'}")
    table = Table("channel", "head", "tail", "elements", "first accepted", "last accepted")
    for c in t.channels:
        table.add_row(
            str(c.channel),
            str(c.head),
            str(c.tail),
            str(c.elements),
            _time(c.first_ns),
            _time(c.last_ns),
        )
    console.print(table)


# -- groups ----------------------------------------------------------------------------------


@groups_app.command("list")
def groups_list(
    topic: str = typer.Option("", "--topic", "-t", help="Only the groups of this topic."),
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """List the subscriber groups: members, assignment generation and total lag."""
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("groups list", target) as admin:
        report = admin.groups(topic)
    if json_out:
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
def groups_describe(
    topic: str = typer.Argument(..., help="The group's topic."),
    group: str = typer.Argument(..., help="The group."),
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """Describe a group without joining it: members, commits and lag per channel.

    Per channel: owner, committed position, head, tail and lag (tail minus committed).
    """
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("groups describe", target) as admin:
        (g,) = admin.groups(topic, group).groups
    if json_out:
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


def _parse_time(text: str) -> int:
    """Nanoseconds since the epoch of an ISO 8601 time (local time without a zone) or of a
    number of seconds since the epoch."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return int(float(text) * 1e9)
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is neither an ISO 8601 time (2024-05-01T12:00:00+00:00) "
            "nor seconds since the epoch",
            param_hint="--to-time",
        ) from None
    if when.tzinfo is None:
        when = when.astimezone()
    return int(when.timestamp() * 1e9)


@groups_app.command("reset")
def groups_reset(
    topic: str = typer.Argument(..., help="The group's topic."),
    group: str = typer.Argument(..., help="The group."),
    to_head: bool = typer.Option(False, "--to-head", help="Deliver from the oldest stored."),
    to_tail: bool = typer.Option(False, "--to-tail", help="Deliver only what comes next."),
    to_time: str | None = typer.Option(
        None,
        "--to-time",
        help="Deliver from the first element accepted at or after this time "
        "(ISO 8601, or seconds since the epoch).",
    ),
    to_offset: int | None = typer.Option(
        None, "--to-offset", min=0, help="Deliver from this offset (in every chosen channel)."
    ),
    channel: list[int] = CHANNEL,
    force: bool = typer.Option(False, "--force", help="Reset even while the group has members."),
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """Move a group's committed positions (needs the admin key).

    Refused while the group has members unless --force; members that join afterwards
    start from the new positions.
    """
    from dcps.wire._codes import SeekMode  # function-local: see _admin

    chosen = [to_head, to_tail, to_time is not None, to_offset is not None]
    if sum(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --to-head, --to-tail, --to-time, --to-offset",
            param_hint="--to-*",
        )
    target_value: int | None = None
    if to_head:
        mode = SeekMode.HEAD
    elif to_tail:
        mode = SeekMode.TAIL
    elif to_time is not None:
        mode, target_value = SeekMode.TIMESTAMP, _parse_time(to_time)
    else:
        mode, target_value = SeekMode.POSITION, to_offset
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("groups reset", target) as admin:
        done = admin.reset(topic, group, mode, target_value, channels=channel, force=force)
    if json_out:
        emit_json({"topic": topic, "group": group, "next_offsets": done})
        return
    table = Table("channel", "next offset")
    for c, offset in done.items():
        table.add_row(str(c), str(offset))
    console = out_console()
    console.print(f"group {group} of topic {topic} reset to {mode.name.lower()}")
    console.print(table)


@groups_app.command("delete")
def groups_delete(
    topic: str = typer.Argument(..., help="The group's topic."),
    group: str = typer.Argument(..., help="The group."),
    force: bool = typer.Option(
        False, "--force", help="Delete even while the group has members (they lose their channels)."
    ),
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """Delete a group and its commits (needs the admin key).

    Refused while the group has members unless --force. Exit 1 if the group does not exist.
    """
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("groups delete", target) as admin:
        deleted = admin.delete(topic, group, force=force)
    if json_out:
        emit_json({"topic": topic, "group": group, **attrs.asdict(deleted)})
    elif deleted.existed:
        out_console().print(f"group {group} of topic {topic} deleted")
    if not deleted.existed:
        typer.echo(f"dcps groups delete: topic {topic!r} has no group {group!r}", err=True)
        raise typer.Exit(1)


# -- store status ----------------------------------------------------------------------------


def store_status(
    domain: int = DOMAIN,
    namespace: str = NAMESPACE,
    json_out: bool = JSON,
    timeout: float = TIMEOUT,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
    key_file: Path | None = KEY_FILE,
    admin_key_file: Path | None = ADMIN_KEY_FILE,
) -> None:
    """Show the running store(s) of a namespace: share, process, data, uptime, clients, size."""
    target = _target(
        domain, namespace, network_config, interface, peer, multicast, domain_tag,
        key_file, admin_key_file, timeout,
    )  # fmt: skip
    with _admin("store status", target) as admin:
        stores = admin.status()
    if json_out:
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
            _size(s.file_bytes),
            _size(s.disk_free_bytes),
        )
    out_console().print(table)
