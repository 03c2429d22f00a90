"""``dcps record``: record plain DDS topics, with their SampleInfo, into Parquet.

The recorder itself is :class:`dcps.spark.Recorder`; this is its command line:
it fails fast when pyarrow is missing, shows a progress line on stderr, rolls
files every ``--roll`` seconds, reads with a ``--qos`` profile, and warns when a
topic has no writer within ``--match-timeout`` seconds (a misspelt name
records nothing). Stdout carries ``dcps record ready: ...`` once the readers
exist, then ``TOPIC: N samples`` per topic at the end (or a JSON document with
``--json``). When writing fails (a full disk, an unwritable directory) it stops
at once and exits 1 with one line naming the topic, the path and the cause.
"""

from __future__ import annotations

import difflib
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import typer

from idl._errors import BadParameterError, DcpsError

from ._discovery import Scan, scan
from ._options import (
    DOMAIN,
    DOMAIN_TAG,
    INTERFACE,
    JSON,
    MULTICAST,
    NETWORK_CONFIG,
    PEER,
    Network,
    check_seconds,
    fail,
)
from ._output import emit_json, err_console
from ._version import dist_name

__all__ = ["missing_extra", "record_command", "unmatched_warnings"]


def missing_extra() -> str | None:
    """The install hint if pyarrow (the ``arrow`` extra) cannot be imported, else None."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401
    except ImportError as exc:
        return (
            f"dcps record writes Parquet and needs pyarrow, which cannot be imported ({exc}); "
            f"install it with: pip install '{dist_name()}[arrow]'"
        )
    return None


def _topics(specs: list[str], idl_file: Path | None) -> dict[str, type]:
    # function-local: dcps.spark._options is light, but keep `dcps --help` from the spark package
    from dcps.spark._options import load_type

    topics: dict[str, type] = {}
    for spec in specs:
        name, sep, type_ref = spec.partition("=")
        if not sep or not name or not type_ref:
            raise typer.BadParameter(
                f"--topic {spec!r}: expected NAME=package.module:Class (or NAME=Scoped::Type "
                "with --idl)"
            )
        try:
            if ":" in type_ref.replace("::", ""):
                topics[name] = load_type(type_ref, None, None)
            else:
                topics[name] = load_type(None, str(idl_file) if idl_file else None, type_ref)
        except BadParameterError as exc:
            raise typer.BadParameter(str(exc), param_hint="--topic") from exc
    return topics


def _partitions(names: set[str]) -> str:
    return "the default partition" if names == {""} else ", ".join(map(repr, sorted(names)))


def unmatched_warnings(found: Scan, topics: list[str], partitions: list[str]) -> list[str]:
    """A warning per topic that no writer in ``partitions`` publishes, with a hint."""
    wanted = set(partitions) or {""}
    seen = sorted({e.topic for e in found.endpoints.values() if e.kind == "writer"})
    warnings = []
    for name in topics:
        writers = found.writers_of(name)
        if not writers:
            close = difflib.get_close_matches(name, seen, n=3)
            hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
            warnings.append(f"no writer of topic {name!r} on the domain{hint}")
        elif not any(wanted & (set(w.partitions) or {""}) for w in writers):
            theirs = sorted({p for w in writers for p in (w.partitions or ("",))})
            warnings.append(
                f"the writers of topic {name!r} publish in partition(s) "
                f"{', '.join(map(repr, theirs))}, not in {_partitions(wanted)}"
            )
    return warnings


def record_command(
    out: Path = typer.Option(..., "--out", help="Directory of the Parquet datasets."),
    topic: list[str] = typer.Option(
        ..., "--topic", help="NAME=package.module:Class, or NAME=Scoped::Type with --idl."
    ),
    idl: Path | None = typer.Option(None, "--idl", help="IDL file declaring the types."),
    domain: int = DOMAIN,
    partition: list[str] = typer.Option([], "--partition", help="DDS partition (repeatable)."),
    seconds: float | None = typer.Option(
        None,
        "--seconds",
        "--timeout",
        help="Stop after this long (default: until SIGINT/SIGTERM).",
    ),
    roll: float = typer.Option(
        1.0, "--roll", help="Seconds between Parquet files (buffered samples are written then)."
    ),
    qos_profile: str | None = typer.Option(
        None,
        "--qos",
        help="QoS profile of the readers (default: reliable, keep all).",
    ),
    match_timeout: float = typer.Option(
        5.0,
        "--match-timeout",
        help="Warn when a topic has no writer after this many seconds (0: do not check).",
    ),
    progress: bool = typer.Option(
        True, "--progress/--no-progress", help="Show a progress line on stderr."
    ),
    json_out: bool = JSON,
    network_config: Path | None = NETWORK_CONFIG,
    interface: list[str] = INTERFACE,
    peer: list[str] = PEER,
    multicast: bool | None = MULTICAST,
    domain_tag: str | None = DOMAIN_TAG,
) -> None:
    """Record plain DDS topics with their SampleInfo into Parquet (one dataset per topic)."""
    hint = missing_extra()
    if hint is not None:
        typer.echo(f"dcps record: {hint}", err=True)
        raise typer.Exit(1)
    check_seconds("--seconds", seconds)
    check_seconds("--match-timeout", match_timeout)
    if roll <= 0:
        raise typer.BadParameter(f"{roll} is not a number of seconds > 0", param_hint="--roll")
    topics = _topics(topic, idl)
    network = Network(network_config, tuple(interface), tuple(peer), multicast, domain_tag)
    try:
        counts = _record(
            out,
            topics,
            domain,
            partition,
            seconds,
            roll,
            qos_profile,
            match_timeout,
            progress,
            network,
        )
    except DcpsError as exc:
        raise fail("record", exc) from None
    if json_out:
        emit_json({"out": str(out), "samples": counts})
    else:
        for name, n in counts.items():
            typer.echo(f"{name}: {n} samples")


def _record(
    out: Path,
    topics: dict[str, type],
    domain: int,
    partitions: list[str],
    seconds: float | None,
    roll: float,
    qos_profile: str | None,
    match_timeout: float,
    progress: bool,
    network: Network,
) -> dict[str, int]:
    import dcps

    # function-local: the recorder needs pyarrow, checked by the caller first
    from dcps.spark._record import Recorder

    reader_qos = None
    if qos_profile is not None:
        import qos

        reader_qos = qos.profile(qos_profile).reader
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    config = network.config()
    console = err_console()
    started = time.monotonic()
    deadline = None if seconds is None else started + seconds
    with Recorder(
        out,
        topics,
        domain_id=domain,
        partitions=partitions,
        flush_interval=timedelta(seconds=roll),
        reader_qos=reader_qos,
        network=config,
        on_error=lambda _: stop.set(),
    ) as rec:
        typer.echo(f"dcps record ready: {', '.join(topics)} -> {out}")
        if match_timeout > 0:
            names = list(topics)
            with dcps.DomainParticipant(domain, network=config) as participant:
                found = scan(
                    participant,
                    min(match_timeout, seconds if seconds is not None else match_timeout),
                    until=lambda s: stop.is_set() or not unmatched_warnings(s, names, partitions),
                )
            for warning in unmatched_warnings(found, names, partitions):
                console.print(f"dcps record: warning: {warning}", style="yellow", soft_wrap=True)
        _wait(rec, stop, deadline, started, console if progress else None)
    if rec.error is not None:  # the writer thread failed: the recording is not complete
        raise rec.error
    return dict(rec.counts)


def _line(rec: Any, started: float) -> str:
    counts = ", ".join(f"{name} {n}" for name, n in rec.counts.items())
    return f"recording {time.monotonic() - started:6.1f} s: {counts} samples"


def _wait(
    rec: Any, stop: threading.Event, deadline: float | None, started: float, console: Any
) -> None:
    """Wait until ``stop`` or the deadline, with a live progress line when ``console``."""
    if console is None or not console.is_terminal:
        while not stop.is_set():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            stop.wait(left)
        return
    from rich.live import Live
    from rich.text import Text

    with Live(Text(_line(rec, started)), console=console, refresh_per_second=4) as live:
        while not stop.is_set():
            left = 0.25 if deadline is None else min(0.25, deadline - time.monotonic())
            if left <= 0:
                break
            stop.wait(left)
            live.update(Text(_line(rec, started)))
