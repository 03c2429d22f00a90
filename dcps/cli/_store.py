"""The ``dcps store`` command (registered by :mod:`dcps.cli._app`) and ``python -m dcps.store``.

Only the command line imports this module (never ``import dcps``), so typer is
imported at the top. The command imports the store (SQLite, its threads,
Cyclone) in its body, so ``dcps --help`` and the other commands do not load it.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer


class Sync(StrEnum):
    """How hard the store pushes each commit to disk (``--sync``, any case)."""

    full = "full"
    normal = "normal"


def store(
    ctx: typer.Context,
    data: Path | None = typer.Option(
        None, "--data", help="Directory of the store's data (created if missing). Required."
    ),
    domain: int = typer.Option(0, "--domain", help="DDS domain id."),
    namespace: str = typer.Option("dcps", "--namespace", help="Partition namespace of channels."),
    sync: Sync = typer.Option(
        Sync.full,
        "--sync",
        case_sensitive=False,
        help="full: fsync every commit; normal: at checkpoints.",
    ),
    partitions: int = typer.Option(
        257,
        "--partitions",
        min=1,
        help="Partition count: new topics default to the next prime above its square root.",
    ),
    share: str = typer.Option(
        "0/1",
        "--share",
        metavar="I/N",
        help="Serve channel c of every topic iff c % N == I. Run one store per share "
        "I = 0..N-1, each with its own --data; 0/N coordinates the groups. "
        "Default 0/1: this store serves every channel.",
    ),
    fetch_threads: int = typer.Option(
        3, "--fetch-threads", help="Threads answering reads of stored elements.", min=1
    ),
    key_file: Path | None = typer.Option(
        None,
        "--key-file",
        help="The namespace key file (default: $DCPS_STORE_KEY_FILE; without a key nothing "
        "is authenticated). See docs/security.md.",
    ),
    admin_key_file: Path | None = typer.Option(
        None,
        "--admin-key-file",
        help="The admin key file, needed to destroy groups (default: $DCPS_STORE_ADMIN_KEY_FILE).",
    ),
    verify: bool = typer.Option(
        True,
        "--verify/--no-verify",
        help="Check the whole store file at start (PRAGMA quick_check); "
        "--no-verify skips it for huge files.",
    ),
    client_topics: bool = typer.Option(
        True,
        "--client-topics/--no-client-topics",
        help="Let clients create topics; --no-client-topics serves only the topics "
        "already in the store.",
    ),
    metrics_port: int | None = typer.Option(
        None,
        "--metrics-port",
        min=0,
        max=65535,
        help="Serve Prometheus metrics on this port (0: any free port); see docs/metrics.md.",
    ),
    metrics_host: str = typer.Option(
        "127.0.0.1",
        "--metrics-host",
        help="Address the metrics are served on (0.0.0.0: every interface).",
    ),
    durability: list[str] | None = typer.Option(
        None,
        "--durability",
        metavar="PATTERN",
        help="Run the durability service for TRANSIENT/PERSISTENT topics whose name matches "
        "PATTERN ('*': every such topic); repeatable.",
    ),
    durability_partitions: list[str] | None = typer.Option(
        None,
        "--durability-partition",
        metavar="PATTERN",
        help="Partitions the durability service serves (default '*'); repeatable.",
    ),
) -> None:
    """Run the persistence service for channelled topics until interrupted.

    The same command as ``python -m dcps.store``. ``dcps store status`` asks
    running stores what they are (see ``dcps store status --help``).
    """
    if ctx.invoked_subcommand is not None:  # `dcps store status ...`: the subcommand runs
        return
    if data is None:
        raise typer.BadParameter("is required to run a store", param_hint="'--data'")
    # late: the store service (SQLite, threads, Cyclone) loads only for this command
    from dcps import DcpsError
    from dcps.store import Share, SyncMode, run_store
    from dcps.wire._sealing import FROM_ENVIRONMENT

    try:
        parsed = Share.of(share)
    except DcpsError as exc:
        raise typer.BadParameter(str(exc), param_hint="--share") from None
    try:
        run_store(
            data,
            domain_id=domain,
            namespace=namespace,
            sync=SyncMode(sync.value.upper()),
            partition_count=partitions,
            share=parsed,
            fetch_threads=fetch_threads,
            key=FROM_ENVIRONMENT if key_file is None else key_file,
            admin_key=FROM_ENVIRONMENT if admin_key_file is None else admin_key_file,
            verify=verify,
            allow_client_topics=client_topics,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            durability=durability or None,
            durability_partitions=durability_partitions or ("*",),
        )
    except DcpsError as exc:
        typer.echo(f"dcps store: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None


def store_main(argv: list[str] | None = None) -> None:
    """``python -m dcps.store``: the ``dcps store`` command on its own."""
    single = typer.Typer(add_completion=False, help="Run a dcps store.")
    single.command()(store)
    single(args=argv, prog_name="python -m dcps.store")
