"""``python -m dcps.spark.record``: the ``dcps record`` command on its own.

The command lives in :mod:`dcps.cli._record` with the rest of the command line.
"""

from __future__ import annotations

import typer

from dcps.cli._record import record_command

__all__ = ["main", "record_command"]


def main() -> None:
    """Run ``dcps record`` as a program."""
    typer.run(record_command)
