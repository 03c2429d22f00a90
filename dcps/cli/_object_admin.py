"""``dcps durables|queues|maps list|describe|delete`` and ``dcps durables reset``.

The durables, queues and key-value maps of the store (``dcps.durables``), as
``dcps groups`` shows groups and as ``nats consumer``/``kafka-consumer-groups``
show theirs. Looking subscribes to nothing and changes nothing; ``delete`` and
``reset`` need the admin key and are refused while a durable or queue has
subscribers unless ``--force``. See docs/cli.md.
"""

from __future__ import annotations

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
    store_command,
)
from ._output import emit_json, out_console

__all__ = ["durables_app", "maps_app", "queues_app"]

durables_app = typer.Typer(
    no_args_is_help=True,
    help="Durable subscriptions of the store: list, describe, reset, delete "
    "(as nats consumer, kafka-consumer-groups).",
)
queues_app = typer.Typer(
    no_args_is_help=True, help="Queues of the store: list, describe, delete (as nats stream)."
)
maps_app = typer.Typer(
    no_args_is_help=True, help="Key-value maps of the store: list, describe, delete (as nats kv)."
)


def _count(n: int) -> str:
    return "-" if n < 0 else str(n)


def _ttl(ms: int) -> str:
    return "forever" if ms < 0 else f"{ms / 1000:g} s"


def _not_found(command: str, what: str) -> typer.Exit:
    typer.echo(f"dcps {command}: {what}", err=True)
    return typer.Exit(1)


# -- durables --------------------------------------------------------------------------------


def _durable_json(d: Any) -> dict[str, Any]:
    doc = {**attrs.asdict(d), "active": d.active, "pending": d.pending}
    for c, channel in zip(doc["channels"], d.channels, strict=True):
        c["position"] = channel.position
    return doc


@durables_app.command("list")
@store_command
def durables_list(
    topic: str = typer.Option("", "--topic", "-t", help="Only the durables of this topic."),
    *,
    target: Target,
) -> None:
    """List the durables: kind, topic, persistence, subscribers, pending and unacknowledged
    elements, TTL."""
    with connected("durables list", target) as admin:
        report = admin.durables(topic)
    if target.json:
        emit_json([_durable_json(d) for d in report.durables])
        return
    table = Table(
        "topic", "durable", "kind", "persistent", "subscribers", "pending", "unacked", "ttl"
    )
    for d in report.durables:
        table.add_row(
            d.topic,
            d.name,
            d.kind,
            "yes" if d.persistent else "no",
            str(len(d.subscribers)),
            _count(d.pending),
            str(d.unacked),
            _ttl(d.ttl_ms),
        )
    out_console().print(table)


@durables_app.command("describe")
@store_command
def durables_describe(
    topic: str = typer.Argument(..., help="The durable's topic."),
    name: str = typer.Argument(..., help="The durable."),
    *,
    target: Target,
) -> None:
    """Describe a durable without subscribing: its subscribers and what each holds, its
    filter, and per channel the position acknowledged through."""
    with connected("durables describe", target) as admin:
        (d,) = admin.durables(topic, name).durables
    if target.json:
        emit_json(_durable_json(d))
        return
    console = out_console()
    state = f"active, {len(d.subscribers)} subscriber(s)" if d.active else "inactive"
    persistence = "persistent" if d.persistent else "not persistent"
    console.print(f"durable {d.name} of topic {d.topic}: {d.kind}, {persistence}, {state}")
    console.print(
        f"  pending: {_count(d.pending)}, unacknowledged: {d.unacked}, "
        f"outstanding: {_count(d.outstanding)}; ttl: {_ttl(d.ttl_ms)}"
    )
    console.print(f"  filter: {d.filter or '-'}")
    if d.subscribers:
        subs = Table("subscriber", "held", "window", "timeout s", "idle s", "filter")
        for s in d.subscribers:
            subs.add_row(
                s.name,
                str(s.held),
                str(s.window or "-"),
                f"{s.timeout_s:g}",
                f"{s.idle_s:g}",
                s.filter or "-",
            )
        console.print(subs)
    if d.channels:
        table = Table("channel", "position", "acked above", "next new", "head", "tail")
        for c in d.channels:
            table.add_row(
                str(c.channel),
                str(c.position),
                str(c.acked_above),
                str(c.next_new),
                str(c.head),
                str(c.tail),
            )
        console.print(table)


@durables_app.command("reset")
@store_command
def durables_reset(
    topic: str = typer.Argument(..., help="The durable's topic."),
    name: str = typer.Argument(..., help="The durable."),
    to_head: bool = TO_HEAD,
    to_tail: bool = TO_TAIL,
    to_time: str | None = TO_TIME,
    to_offset: int | None = TO_OFFSET,
    channel: list[int] = CHANNEL,
    force: bool = typer.Option(
        False, "--force", help="Reset even while it has subscribers (they are closed)."
    ),
    *,
    target: Target,
) -> None:
    """Move what a durable has acknowledged (needs the admin key).

    Every element before the new position counts as acknowledged, every one from it on is
    delivered again. Refused while the durable has subscribers unless --force, and for
    last-value durables.
    """
    mode, value = seek_target(to_head, to_tail, to_time, to_offset)
    with connected("durables reset", target) as admin:
        done = admin.reset_durable(topic, name, mode, value, channels=channel, force=force)
    if target.json:
        emit_json({"topic": topic, "durable": name, "next_offsets": done})
        return
    table = Table("channel", "next offset")
    for c, offset in done.items():
        table.add_row(str(c), str(offset))
    console = out_console()
    console.print(f"durable {name} of topic {topic} reset to {mode.name.lower()}")
    console.print(table)


@durables_app.command("delete")
@store_command
def durables_delete(
    topic: str = typer.Argument(..., help="The durable's topic."),
    name: str = typer.Argument(..., help="The durable."),
    force: bool = typer.Option(
        False, "--force", help="Delete even while it has subscribers (they are closed)."
    ),
    *,
    target: Target,
) -> None:
    """Delete a durable, discarding what it has not acknowledged (needs the admin key).

    Refused while it has subscribers unless --force. Exit 1 if there is no such durable.
    """
    with connected("durables delete", target) as admin:
        deleted = admin.delete_durable(topic, name, force=force)
    if target.json:
        emit_json({"topic": topic, "durable": name, **attrs.asdict(deleted)})
    elif deleted.existed:
        out_console().print(
            f"durable {name} of topic {topic} deleted "
            f"({_count(deleted.discarded)} unacknowledged element(s) discarded)"
        )
    if not deleted.existed:
        raise _not_found("durables delete", f"topic {topic!r} has no durable {name!r}")


# -- queues ----------------------------------------------------------------------------------


def _queue_json(q: Any) -> dict[str, Any]:
    return {**attrs.asdict(q), "pending": q.pending, "active": q.active}


@queues_app.command("list")
@store_command
def queues_list(*, target: Target) -> None:
    """List the queues: stored, pending and unacknowledged elements, consumers."""
    with connected("queues list", target) as admin:
        report = admin.queues()
    if target.json:
        emit_json([_queue_json(q) for q in report.queues])
        return
    table = Table("queue", "stored", "pending", "unacked", "consumers", "next seq")
    for q in report.queues:
        table.add_row(
            q.name, str(q.stored), str(q.pending), str(q.unacked), str(len(q.consumers)),
            str(q.next_seq),
        )  # fmt: skip
    out_console().print(table)


@queues_app.command("describe")
@store_command
def queues_describe(
    queue: str = typer.Argument(..., help="The queue."),
    *,
    target: Target,
) -> None:
    """Describe a queue without subscribing: its type, elements, and what each consumer holds."""
    with connected("queues describe", target) as admin:
        (q,) = admin.queues(queue).queues
    if target.json:
        emit_json(_queue_json(q))
        return
    console = out_console()
    state = f"active, {len(q.consumers)} consumer(s)" if q.active else "no consumers"
    console.print(f"queue {q.name}: {state}; type identity {q.type_identity or '-'}")
    console.print(
        f"  stored: {q.stored} (pending {q.pending}, unacknowledged {q.unacked}); "
        f"next sequence number {q.next_seq}"
    )
    if q.consumers:
        table = Table("consumer", "held", "timeout s", "idle s")
        for c in q.consumers:
            table.add_row(c.name, str(c.held), f"{c.timeout_s:g}", f"{c.idle_s:g}")
        console.print(table)


@queues_app.command("delete")
@store_command
def queues_delete(
    queue: str = typer.Argument(..., help="The queue."),
    force: bool = typer.Option(
        False, "--force", help="Delete even while it has consumers (they are told it is gone)."
    ),
    *,
    target: Target,
) -> None:
    """Delete a queue and discard its elements (needs the admin key).

    Refused while it has consumers unless --force. Exit 1 if there is no such queue.
    """
    with connected("queues delete", target) as admin:
        deleted = admin.delete_queue(queue, force=force)
    if target.json:
        emit_json({"queue": queue, **attrs.asdict(deleted)})
    elif deleted.existed:
        out_console().print(f"queue {queue} deleted ({deleted.discarded} element(s) discarded)")
    if not deleted.existed:
        raise _not_found("queues delete", f"there is no queue {queue!r}")


# -- maps ------------------------------------------------------------------------------------


@maps_app.command("list")
@store_command
def maps_list(*, target: Target) -> None:
    """List the key-value maps: keys, size of their values, last revision."""
    with connected("maps list", target) as admin:
        report = admin.maps()
    if target.json:
        emit_json([attrs.asdict(m) for m in report.maps])
        return
    table = Table("map", "type", "keys", "size", "revision")
    for m in report.maps:
        table.add_row(m.name, m.type_name or "-", str(m.keys), show_size(m.bytes), str(m.revision))
    out_console().print(table)


@maps_app.command("describe")
@store_command
def maps_describe(
    name: str = typer.Argument(..., help="The map."),
    *,
    target: Target,
) -> None:
    """Describe a map: type, keys, size, revision, last drop, changes kept for watchers."""
    with connected("maps describe", target) as admin:
        (m,) = admin.maps(name).maps
    if target.json:
        emit_json(attrs.asdict(m))
        return
    console = out_console()
    console.print(f"map {m.name}: type {m.type_name or '-'} ({m.type_identity or '-'})")
    console.print(f"  keys: {m.keys}, size {show_size(m.bytes)}; revision {m.revision}")
    dropped = str(m.dropped_revision) if m.dropped_revision else "never"
    console.print(f"  dropped at revision: {dropped}; changes kept for watchers: {m.history}")


@maps_app.command("delete")
@store_command
def maps_delete(
    name: str = typer.Argument(..., help="The map."),
    *,
    target: Target,
) -> None:
    """Drop a map with every key; its watchers see it dropped (needs the admin key).

    Exit 1 if there is no such map (or it is empty and untyped).
    """
    with connected("maps delete", target) as admin:
        dropped = admin.delete_map(name)
    if target.json:
        emit_json({"map": name, **attrs.asdict(dropped)})
    elif dropped.existed:
        out_console().print(f"map {name} deleted")
    if not dropped.existed:
        raise _not_found("maps delete", f"there is no map {name!r} (or it holds nothing)")
