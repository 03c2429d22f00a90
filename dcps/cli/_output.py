"""Output of the commands: one JSON document or JSON lines on stdout, or rich text.

Data goes to stdout, progress and warnings to stderr, so ``dcps ls --json | jq``
and ``dcps sub T > samples.jsonl`` see only data.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

__all__ = ["emit_json", "emit_line", "err_console", "out_console", "to_jsonable"]


def to_jsonable(value: Any) -> Any:
    """``value`` with numpy arrays/scalars, bytes, enums and sets as plain JSON values."""
    import enum

    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes | bytearray | memoryview):
        return list(bytes(value))
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    tolist = getattr(value, "tolist", None)  # numpy arrays and scalars
    if callable(tolist):
        return to_jsonable(tolist())
    return str(value)


def emit_json(document: Any) -> None:
    """Print one JSON document (indented) on stdout."""
    sys.stdout.write(json.dumps(to_jsonable(document), indent=2) + "\n")
    sys.stdout.flush()


def emit_line(document: Any) -> None:
    """Print one JSON line on stdout and flush it (for pipes read line by line)."""
    sys.stdout.write(json.dumps(to_jsonable(document), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def out_console() -> Console:
    """The rich console of human-readable results (stdout)."""
    return Console()


def err_console() -> Console:
    """The rich console of progress lines and warnings (stderr)."""
    return Console(stderr=True)
