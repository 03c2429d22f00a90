"""Options of the ``dcps`` Spark data source: parsing, validation, type loading."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

import idl
from idl._errors import BadParameterError, IdlError

__all__ = ["SourceOptions", "load_type", "parse_positions"]

_types: dict[tuple[str, str, str], type] = {}


def load_type(type_path: str | None, idl_file: str | None, type_name: str | None) -> type:
    """The topic type named by ``type`` (``pkg.mod:Class``) or ``idl_file`` + ``type_name``."""
    key = (type_path or "", idl_file or "", type_name or "")
    cached = _types.get(key)
    if cached is not None:
        return cached
    if type_path:
        mod_name, sep, attr = type_path.partition(":")
        if not sep or not mod_name or not attr:
            raise BadParameterError(
                f"option type must look like 'package.module:Class', got {type_path!r}"
            )
        try:
            module = importlib.import_module(mod_name)
        except ImportError as exc:
            raise BadParameterError(
                f"option type {type_path!r}: cannot import {mod_name!r} ({exc}); on a cluster "
                "the module must be installed on every worker"
            ) from exc
        t: Any = module
        for part in attr.split("."):
            t = getattr(t, part, None)
            if t is None:
                raise BadParameterError(f"option type {type_path!r}: {mod_name} has no {attr!r}")
    elif idl_file:
        if not type_name:
            raise BadParameterError("option idl_file needs option type_name too")
        try:
            t = idl.load(idl_file)[type_name]
        except KeyError as exc:
            raise BadParameterError(f"option type_name: {exc.args[0]}") from exc
        except OSError as exc:
            raise BadParameterError(f"option idl_file {idl_file!r}: {exc}") from exc
    else:
        raise BadParameterError(
            "the dcps data source needs option type ('package.module:Class') "
            "or options idl_file and type_name"
        )
    if not idl.is_topic_type(t):
        raise BadParameterError(f"{type_path or type_name!r} is not a topic type (idl.Struct)")
    try:
        idl.describe(t)
    except IdlError as exc:
        raise BadParameterError(f"topic type {type_path or type_name!r}: {exc}") from exc
    topic_type: type = t
    _types[key] = topic_type
    return topic_type


def parse_positions(text: str, option: str) -> str | dict[int, int]:
    """``"earliest"``, ``"latest"`` or ``{channel: offset}`` from an option's JSON.

    JSON form: ``{"0": 12, "3": 0}`` (next offset to read per channel; -2
    earliest, -1 latest). Channels left out start at the earliest.
    """
    text = text.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise BadParameterError(
            f"option {option}: expected 'earliest', 'latest' or JSON like "
            f'{{"0": 10, "1": 0}}, got {text!r} ({exc.msg})'
        ) from exc
    if not isinstance(value, dict):
        raise BadParameterError(f"option {option}: expected a JSON object, got {text!r}")
    out: dict[int, int] = {}
    for k, v in value.items():
        try:
            channel = int(k)
        except ValueError:
            raise BadParameterError(f"option {option}: channel {k!r} is not an integer") from None
        if channel < 0 or isinstance(v, bool) or not isinstance(v, int) or v < -2:
            raise BadParameterError(
                f"option {option}: channel {k!r} needs an offset >= -2 (an integer), got {v!r}"
            )
        out[channel] = v
    return out


def _timestamp_ns(text: str | None, option: str) -> int | None:
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadParameterError(
            f"option {option}: expected ISO 8601 or ns since the epoch, got {text!r}"
        ) from exc
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1_000_000) * 1000


def _int(options: Mapping[str, str], name: str, default: int, minimum: int = 0) -> int:
    raw = options.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except (TypeError, ValueError):
        raise BadParameterError(f"option {name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise BadParameterError(f"option {name} must be >= {minimum}, got {value}")
    return value


def _bool(raw: str | None, name: str) -> bool | None:
    if raw is None or raw == "":
        return None
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise BadParameterError(f"option {name} must be true or false, got {raw!r}")


@attrs.frozen
class SourceOptions:
    """The parsed options (picklable: travels to Spark's Python workers)."""

    topic: str
    type_path: str | None
    idl_file: str | None
    type_name: str | None
    domain_id: int
    namespace: str
    data_dir: str | None
    starting: str | dict[int, int]
    ending: str | dict[int, int]
    start_ns: int | None
    end_ns: int | None
    max_per_trigger: int
    max_per_partition: int
    group: str | None
    timeout: float
    batch_rows: int
    channels: int = 0
    retain_consumed: bool | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SourceOptions:
        """Validate the options Spark passes (case-insensitive keys)."""
        opts = {k.lower(): v for k, v in options.items()}
        topic = opts.get("topic") or opts.get("path")
        if not topic:
            raise BadParameterError("the dcps data source needs option topic")
        parsed = cls(
            topic=topic,
            type_path=opts.get("type"),
            idl_file=opts.get("idl_file"),
            type_name=opts.get("type_name"),
            domain_id=_int(opts, "domain", 0),
            namespace=opts.get("namespace") or "dcps",
            data_dir=opts.get("data_dir") or None,
            starting=parse_positions(
                opts.get("startingpositions", "earliest"), "startingPositions"
            ),
            ending=parse_positions(opts.get("endingpositions", "latest"), "endingPositions"),
            start_ns=_timestamp_ns(opts.get("starttimestamp"), "startTimestamp"),
            end_ns=_timestamp_ns(opts.get("endtimestamp"), "endTimestamp"),
            max_per_trigger=_int(opts, "maxelementspertrigger", 0),
            max_per_partition=_int(opts, "maxelementsperpartition", 1_000_000, 1),
            group=opts.get("group") or None,
            timeout=float(_int(opts, "timeout", 10, 1)),
            batch_rows=_int(opts, "batchrows", 1024, 1),
            channels=_int(opts, "channels", 0),
            retain_consumed=_bool(opts.get("retainconsumed"), "retainConsumed"),
        )
        parsed.type()  # fail early (on the driver) for an unknown type
        return parsed

    def type(self) -> type:
        """The topic type (loaded once per process)."""
        return load_type(self.type_path, self.idl_file, self.type_name)
