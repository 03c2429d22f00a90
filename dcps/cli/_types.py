"""Where ``sub`` and ``pub`` get the topic's type: a module, an IDL file, or discovery."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from typing import Any

import typer

import idl
from idl._errors import BadParameterError, DcpsTimeoutError

from ._discovery import lookup_type, scan, topic_pattern

__all__ = ["IDL", "TYPE", "resolve_type"]

TYPE = typer.Option(
    None,
    "--type",
    help="The topic type: package.module:Class, or with --idl a scoped IDL name "
    "(default: the IDL file's only struct, or the type discovered on the domain).",
)
IDL = typer.Option(None, "--idl", help="IDL file declaring the topic type.")


def _from_module(spec: str) -> Any:
    mod_name, _, attr = spec.partition(":")
    if not mod_name or not attr:
        raise BadParameterError(f"--type {spec!r}: expected package.module:Class")
    try:
        module = importlib.import_module(mod_name)
    except ImportError as exc:
        raise BadParameterError(f"--type {spec!r}: cannot import {mod_name!r} ({exc})") from exc
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            raise BadParameterError(f"--type {spec!r}: {mod_name} has no {attr!r}")
    return found


def _from_idl(path: Path, name: str | None, discovered_name: str | None) -> Any:
    module = idl.load(path)
    structs = [n for n in module if idl.is_topic_type(module[n])]
    if name is None and discovered_name is not None and discovered_name in module:
        name = discovered_name
    if name is None:
        if len(structs) != 1:
            raise BadParameterError(
                f"--idl {str(path)!r} declares {len(structs)} structs "
                f"({', '.join(structs) or 'none'}): choose one with --type"
            )
        name = structs[0]
    if name not in module:
        raise BadParameterError(
            f"--type {name!r} is not declared in {str(path)!r} (structs: {', '.join(structs)})"
        )
    return module[name]


def resolve_type(
    participant: Any, topic: str, type_spec: str | None, idl_file: Path | None, seconds: float
) -> type:
    """The type of ``topic``: from ``--type``/``--idl``, else looked up on the domain.

    Raises :class:`dcps.BadParameterError` for a bad ``--type``/``--idl`` and
    :class:`dcps.DcpsTimeoutError` when discovery finds no typed endpoint of
    ``topic`` within ``seconds``.
    """
    if idl_file is not None:
        t: Any = _from_idl(idl_file, type_spec, None)
    elif type_spec is not None:
        t = _from_module(type_spec)
    else:
        found = scan(
            participant,
            seconds,
            topics=topic_pattern(re.escape(topic)),
            until=lambda s: any(e.type_id is not None for e in s.endpoints.values()),
        )
        typed = [e for e in found.endpoints.values() if e.type_id is not None]
        if not typed:
            seen = "endpoints without type information" if found.endpoints else "no endpoint"
            raise DcpsTimeoutError(
                f"topic {topic!r}: {seen} within {seconds:g} s, so its type is unknown; "
                "give it with --type or --idl"
            )
        t, _ = lookup_type(participant, typed[0].type_id, seconds)
    if not idl.is_topic_type(t):
        raise BadParameterError(f"{t!r} is not a topic type (an idl.Struct)")
    return t  # type: ignore[no-any-return]
