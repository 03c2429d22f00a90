"""Run a channel store: ``python -m dcps.store --data DIR --domain N [--share I/N]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from idl._errors import DcpsError

from ._log import SyncMode
from ._service import DEFAULT_FETCH_THREADS, run_store
from ._shares import Share

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run the store until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="python -m dcps.store", description=__doc__)
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
    parser.add_argument(
        "--share",
        default="0/1",
        metavar="I/N",
        help="serve channel c of every topic iff c %% N == I; run one store per share "
        "I = 0..N-1, each with its own --data; 0/N coordinates the groups "
        "(default 0/1: every channel)",
    )
    parser.add_argument(
        "--fetch-threads",
        type=int,
        default=DEFAULT_FETCH_THREADS,
        help="threads answering subscribers' and Spark's reads of stored elements (default 3)",
    )
    args = parser.parse_args(argv)
    try:
        share = Share.of(args.share)
    except DcpsError as exc:
        parser.error(str(exc))
    try:
        run_store(
            args.data,
            domain_id=args.domain,
            namespace=args.namespace,
            sync=SyncMode(args.sync),
            partition_count=args.partitions,
            share=share,
            fetch_threads=args.fetch_threads,
        )
    except DcpsError as exc:
        print(f"dcps store: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
