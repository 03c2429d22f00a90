"""``dcps record``: the command line of the Parquet recorder.

Wire it into the ``dcps`` typer app with ``app.command("record")(record_command)``;
until then ``python -m dcps.spark.record`` runs it.
"""

from __future__ import annotations

import signal
import threading
from datetime import timedelta
from pathlib import Path

import typer

from idl._errors import BadParameterError

from ._options import load_type
from ._record import record

__all__ = ["main", "record_command"]


def _topics(specs: list[str], idl_file: Path | None) -> dict[str, type]:
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
                text = idl_file.read_text() if idl_file else None
                topics[name] = load_type(None, text, type_ref, str(idl_file))
        except BadParameterError as exc:
            raise typer.BadParameter(str(exc)) from exc
        except OSError as exc:
            raise typer.BadParameter(f"--idl {idl_file}: {exc}") from exc
    return topics


def record_command(
    out: Path = typer.Option(..., "--out", help="Directory of the Parquet datasets."),  # noqa: B008
    topic: list[str] = typer.Option(  # noqa: B008
        ..., "--topic", help="NAME=package.module:Class, or NAME=Scoped::Type with --idl."
    ),
    idl: Path | None = typer.Option(None, "--idl", help="IDL file declaring the types."),  # noqa: B008
    domain: int = typer.Option(0, "--domain", help="DDS domain id."),
    partition: list[str] = typer.Option([], "--partition", help="DDS partition (repeatable)."),  # noqa: B008
    seconds: float | None = typer.Option(
        None, "--seconds", help="Stop after this long (default: until SIGINT/SIGTERM)."
    ),
) -> None:
    """Record plain DDS topics with their SampleInfo into Parquet (one dataset per topic)."""
    topics = _topics(topic, idl)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())

    def ready(_: object) -> None:
        typer.echo(f"dcps record ready: {', '.join(topics)} -> {out}")

    counts = record(
        out,
        topics,
        domain_id=domain,
        partitions=partition,
        duration=None if seconds is None else timedelta(seconds=seconds),
        stop=stop,
        on_ready=ready,
    )
    for name, n in counts.items():
        typer.echo(f"{name}: {n} samples")


def main() -> None:
    """Run ``record_command`` as a program."""
    typer.run(record_command)
