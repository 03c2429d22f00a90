"""What every store admin command shares: where its requests go, how it connects, how it shows.

``topics``, ``groups``, ``store status``, ``durables``, ``queues`` and ``maps``
take the same options: the domain, the store's namespace, ``--json``,
``--timeout``, the network options of :mod:`dcps.cli._options` and the
namespace and admin key files. :func:`store_command` adds them to a command
and hands the command one :class:`Target`; :func:`connected` opens the
:class:`~dcps.cli._admin_client.StoreAdmin` and turns a dcps error into a
one-line error and exit status 1.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import typer

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

if TYPE_CHECKING:
    from dcps.wire._codes import SeekMode

    from ._admin_client import StoreAdmin

__all__ = [
    "CHANNEL",
    "TO_HEAD",
    "TO_OFFSET",
    "TO_TAIL",
    "TO_TIME",
    "Target",
    "connected",
    "parse_time",
    "seek_target",
    "show_size",
    "show_time",
    "store_command",
]

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
TO_HEAD = typer.Option(False, "--to-head", help="Deliver from the oldest stored.")
TO_TAIL = typer.Option(False, "--to-tail", help="Deliver only what comes next.")
TO_TIME = typer.Option(
    None,
    "--to-time",
    help="Deliver from the first element accepted at or after this time "
    "(ISO 8601, or seconds since the epoch).",
)
TO_OFFSET = typer.Option(
    None, "--to-offset", min=0, help="Deliver from this offset (in every chosen channel)."
)


@attrs.frozen
class Target:
    """Where one command's requests go, with which keys, and how it prints."""

    domain: int
    namespace: str
    json: bool
    timeout: float
    network: Network
    key_file: Path | None
    admin_key_file: Path | None


#: The shared options: (parameter, annotation, typer option), in --help order.
_SHARED: tuple[tuple[str, Any, Any], ...] = (
    ("domain", int, DOMAIN),
    ("namespace", str, NAMESPACE),
    ("json_out", bool, JSON),
    ("timeout", float, TIMEOUT),
    ("network_config", Path | None, NETWORK_CONFIG),
    ("interface", list[str], INTERFACE),
    ("peer", list[str], PEER),
    ("multicast", bool | None, MULTICAST),
    ("domain_tag", str | None, DOMAIN_TAG),
    ("key_file", Path | None, KEY_FILE),
    ("admin_key_file", Path | None, ADMIN_KEY_FILE),
)


def _target(values: dict[str, Any]) -> Target:
    network = Network(
        values["network_config"],
        tuple(values["interface"]),
        tuple(values["peer"]),
        values["multicast"],
        values["domain_tag"],
    )
    return Target(
        values["domain"],
        values["namespace"],
        values["json_out"],
        values["timeout"],
        network,
        values["key_file"],
        values["admin_key_file"],
    )


def store_command(command: Callable[..., None]) -> Callable[..., None]:
    """``command`` (whose last parameter is the keyword-only ``target: Target``) with the
    shared options in its place, as typer reads a command's signature."""
    own = [
        p
        for p in inspect.signature(command, eval_str=True).parameters.values()
        if p.name != "target"
    ]
    shared = [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=hint)
        for name, hint, option in _SHARED
    ]

    @functools.wraps(command)
    def run(**values: Any) -> None:
        target = _target({name: values.pop(name) for name, _, _ in _SHARED})
        command(**values, target=target)

    parameters = [*own, *shared]
    run.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
    run.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": None}
    return run


@contextlib.contextmanager
def connected(command: str, target: Target) -> Iterator[StoreAdmin]:
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


def show_time(ns: int | None) -> str:
    """An accept time (ns since the epoch) as ISO 8601 UTC, or ``-``."""
    if ns is None:
        return "-"
    return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(timespec="milliseconds")


def show_size(n: int) -> str:
    """A byte count for people (``512 B``, ``1.5 KiB``)."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"  # pragma: no cover


def parse_time(text: str) -> int:
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


def seek_target(
    to_head: bool, to_tail: bool, to_time: str | None, to_offset: int | None
) -> tuple[SeekMode, int | None]:
    """The reset mode and target of the ``--to-*`` options (exactly one must be given)."""
    from dcps.wire._codes import SeekMode  # function-local: see connected

    chosen = [to_head, to_tail, to_time is not None, to_offset is not None]
    if sum(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --to-head, --to-tail, --to-time, --to-offset",
            param_hint="--to-*",
        )
    if to_head:
        return SeekMode.HEAD, None
    if to_tail:
        return SeekMode.TAIL, None
    if to_time is not None:
        return SeekMode.TIMESTAMP, parse_time(to_time)
    return SeekMode.POSITION, to_offset
