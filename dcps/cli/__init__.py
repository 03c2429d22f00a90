"""The ``dcps`` command line (typer + rich); see docs/cli.md.

Imported only by the console script and ``python -m dcps``: ``import dcps``
does not load it.
"""

from ._app import app, main

__all__ = ["app", "main"]
