"""Run a channel store: ``python -m dcps.channels.store --data DIR --domain N``."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from ._log import SyncMode
from ._store import run_store

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the store until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m dcps.channels.store", description=__doc__)
    parser.add_argument("--data", required=True, help="data directory (created if missing)")
    parser.add_argument("--domain", type=int, default=0, help="DDS domain id")
    parser.add_argument("--namespace", default="dcps", help="namespace (partition prefix)")
    parser.add_argument(
        "--sync",
        choices=[m.value for m in SyncMode],
        default=SyncMode.FULL.value,
        help="SQLite synchronous mode: FULL fsyncs every batch, NORMAL at checkpoints",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=257,
        help="partition count; new topics default to the next prime above its square root",
    )
    args = parser.parse_args(argv)
    run_store(
        args.data,
        domain_id=args.domain,
        namespace=args.namespace,
        sync=SyncMode(args.sync),
        partition_count=args.partitions,
    )


if __name__ == "__main__":
    main()
