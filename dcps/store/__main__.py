"""Run a channel store: ``python -m dcps.store --data DIR --domain N [--share I/N]``.

The same command, with the same flags, as ``dcps store`` (``dcps/cli/_store.py``).
"""

from __future__ import annotations

from dcps.cli._store import store_main

__all__ = ["main"]


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run the store until SIGINT/SIGTERM."""
    store_main(argv)


if __name__ == "__main__":
    main()
