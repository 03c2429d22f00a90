"""The root ``dcps`` app: global options (``--version``, ``-v``/``--log-level``) and commands.

Commands, by where they look:

- the DDS domain (``ls``, ``ps``, ``typeof``, ``sub``, ``pub``), in :mod:`dcps.cli._dds`;
- the store: ``store`` runs one (in :mod:`dcps.cli._store`); ``store status``, ``topics
  list|describe`` and ``groups list|describe|reset|delete`` ask running stores
  (in :mod:`dcps.cli._store_admin`; ``topics`` without a subcommand lists the DDS
  topics, as ``ls``); ``durables list|describe|reset|delete``, ``queues
  list|describe|delete`` and ``maps list|describe|delete`` likewise (in
  :mod:`dcps.cli._object_admin`);
- files: ``record`` writes DDS topics to Parquet (in :mod:`dcps.cli._record`).
"""

from __future__ import annotations

import typer

from dcps.cli._store import store

from . import _dds
from ._logging import LEVELS, configure_logging, level_of
from ._object_admin import durables_app, maps_app, queues_app
from ._record import record_command
from ._store_admin import groups_app, store_status, topics_app
from ._version import dist_version

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="dcps: data-centric publish/subscribe on Cyclone DDS.",
)


def _show_version(value: bool) -> None:
    if value:
        typer.echo(f"dcps {dist_version()}")
        raise typer.Exit


@app.callback()
def root(
    version: bool = typer.Option(
        False,
        "--version",
        is_eager=True,
        callback=_show_version,
        help="Print the version and exit.",
    ),
    verbose: int = typer.Option(
        0, "--verbose", "-v", count=True, help="Log more: -v INFO, -vv DEBUG (to stderr)."
    ),
    log_level: str | None = typer.Option(
        None,
        "--log-level",
        envvar="DCPS_LOG_LEVEL",
        help=f"Level of the dcps loggers: {', '.join(LEVELS)} (wins over -v).",
    ),
) -> None:
    """dcps: data-centric publish/subscribe on Cyclone DDS."""
    try:
        level = level_of(log_level, verbose)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--log-level") from None
    configure_logging(level)


@app.command()
def version() -> None:
    """Print the dcps version."""
    typer.echo(dist_version())


store_app = typer.Typer(
    invoke_without_command=True,
    no_args_is_help=False,
    help="Run a store (dcps store --data DIR), or ask running ones (dcps store status).",
)
store_app.callback()(store)
store_app.command("status")(store_status)
app.add_typer(store_app, name="store")
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
app.add_typer(durables_app, name="durables")
app.add_typer(queues_app, name="queues")
app.add_typer(maps_app, name="maps")
app.command("record")(record_command)
app.command()(_dds.ls)
app.command()(_dds.ps)
app.command()(_dds.typeof)
app.command()(_dds.sub)
app.command()(_dds.pub)


def main() -> None:
    """Entry point of the ``dcps`` console script and of ``python -m dcps``."""
    app(prog_name="dcps")
