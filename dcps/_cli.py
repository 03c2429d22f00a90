"""The ``dcps`` command line: run a store, look at a domain.

Only the console script imports this module (never ``import dcps``), so typer is
imported at the top. Each command imports what it needs in its body: the store
(SQLite, its threads, Cyclone), Cyclone's builtin topics and rich, Spark's
recorder (pyarrow). So ``dcps --help`` and every command load only their own
part, and ``import dcps`` stays light as DESIGN.md requires.
"""

from __future__ import annotations

import time
from enum import StrEnum
from pathlib import Path

import typer

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="dcps: data-centric publish/subscribe on Cyclone DDS.",
)


class Sync(StrEnum):
    """How hard the store pushes each commit to disk (``--sync``, any case)."""

    full = "full"
    normal = "normal"


@app.command()
def store(
    data: Path = typer.Option(
        ..., "--data", help="Directory of the store's data (created if missing)."
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
) -> None:
    """Run the persistence service for channelled topics until interrupted.

    The same command as ``python -m dcps.store``.
    """
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
        )
    except DcpsError as exc:
        typer.echo(f"dcps store: {type(exc).__name__}: {exc}", err=True)
        raise typer.Exit(1) from None


def store_main(argv: list[str] | None = None) -> None:
    """``python -m dcps.store``: the ``dcps store`` command on its own."""
    single = typer.Typer(add_completion=False, help="Run a dcps store.")
    single.command()(store)
    single(args=argv, prog_name="python -m dcps.store")


@app.command()
def topics(
    domain: int = typer.Option(0, "--domain", help="DDS domain id."),
    seconds: float = typer.Option(2.0, "--seconds", help="How long to listen for discovery."),
) -> None:
    """List the topics, types and endpoints discovered on a domain."""
    # late: Cyclone's builtin topics, rich and the DCPS entities load only for this command
    from cyclonedds.builtin import (
        BuiltinDataReader,
        BuiltinTopicDcpsPublication,
        BuiltinTopicDcpsSubscription,
    )
    from rich.console import Console
    from rich.table import Table

    import dcps

    with dcps.DomainParticipant(domain) as participant:
        cyclone = participant.handle
        publications = BuiltinDataReader(cyclone, BuiltinTopicDcpsPublication)
        subscriptions = BuiltinDataReader(cyclone, BuiltinTopicDcpsSubscription)
        deadline = time.monotonic() + seconds
        found: dict[tuple[str, str], list[int]] = {}
        while time.monotonic() < deadline:
            for index, reader in enumerate((publications, subscriptions)):
                for endpoint in reader.take(N=1000):
                    if hasattr(endpoint, "topic_name"):
                        key = (endpoint.topic_name or "", endpoint.type_name or "")
                        counts = found.setdefault(key, [0, 0])
                        counts[index] += 1
            time.sleep(0.1)
    table = Table("topic", "type", "writers", "readers")
    for (name, type_name), (writers, readers) in sorted(found.items()):
        if not name.startswith("DCPS"):
            table.add_row(name, type_name, str(writers), str(readers))
    Console().print(table)


@app.command()
def version() -> None:
    """Print the dcps version."""
    # late: package metadata is read only when asked for
    from importlib.metadata import version as dist_version

    typer.echo(dist_version("dcps"))


def _register_record() -> None:
    # late, and kept in a function: `dcps record` lives with the Spark/Parquet code
    # (dcps.spark._record_cli), which imports pyarrow only when the command runs
    from dcps.spark._record_cli import record_command

    app.command("record")(record_command)


_register_record()


def main() -> None:
    """Entry point of the ``dcps`` console script."""
    app()


if __name__ == "__main__":
    main()
