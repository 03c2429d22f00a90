"""Options of the ``dcps`` Spark data source: parsing, validation, type loading."""

from __future__ import annotations

import difflib
import importlib
import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import attrs

import idl
from idl._errors import BadParameterError, IdlError

__all__ = ["KAFKA_ALIASES", "OPTIONS", "SourceOptions", "load_type", "parse_positions"]

#: Every option of the ``dcps`` data source: its name and what it means (docs/spark.md
#: holds the same table; tests/spark/test_options.py checks that they agree).
OPTIONS: dict[str, str] = {
    "topic": "the channelled topic (required)",
    "type": "the topic type as `package.module:Class` (or `idl`/`idl_file` + `type_name`)",
    "idl": "the topic type's IDL source text (travels to the executors in the options)",
    "idl_file": "an IDL file on the driver; its text travels to the executors",
    "type_name": "the type in `idl`/`idl_file` (e.g. `demo::Reading`)",
    "domain": "the store's DDS domain (0)",
    "namespace": "the store's namespace (`dcps`)",
    "data_dir": "read the store's file in this directory directly (store's host only)",
    "startingPositions": "`earliest` (default), `latest` or JSON next offset per channel",
    "endingPositions": "batch reads: `latest` (default) or JSON",
    "startTimestamp": "batch reads: store accept time from (ISO 8601 or ns), inclusive",
    "endTimestamp": "batch reads: store accept time to (ISO 8601 or ns), exclusive",
    "maxElementsPerTrigger": "at most this many elements per micro-batch (no limit)",
    "maxElementsPerPartition": "split a channel's range into input partitions of this size "
    "(1 000 000)",
    "group": "commit the query's positions as this subscriber group",
    "channels": "sink: channel count of a topic the sink creates (the store's default)",
    "retainConsumed": "sink: retention of a topic the sink creates",
    "batchRows": "sink: most rows per staged chunk (16384)",
    "timeout": "seconds for store requests (10)",
}
#: The Kafka source's names for the same options (accepted as aliases).
KAFKA_ALIASES: dict[str, str] = {
    "subscribe": "topic",
    "startingOffsets": "startingPositions",
    "endingOffsets": "endingPositions",
    "startingTimestamp": "startTimestamp",
    "endingTimestamp": "endTimestamp",
    "maxOffsetsPerTrigger": "maxElementsPerTrigger",
    "maxRecordsPerPartition": "maxElementsPerPartition",
}
#: Options Spark itself passes to a data source (not ours to refuse).
_SPARK_OPTIONS = frozenset({"path", "checkpointlocation", "queryname", "paths"})
_CANONICAL = {name.lower(): name for name in OPTIONS}
_ALIASES = {alias.lower(): target for alias, target in KAFKA_ALIASES.items()}
#: Names a user may write, for the did-you-mean of an unknown option.
_KNOWN = {**_CANONICAL, **{a.lower(): a for a in KAFKA_ALIASES}}


def canonical_options(options: Mapping[str, str]) -> dict[str, str]:
    """The options keyed by their lower-cased canonical names (aliases resolved).

    An unknown option raises ``BadParameterError`` naming the closest valid
    one; an option given twice (under its name and an alias) too.
    """
    out: dict[str, str] = {}
    given: dict[str, str] = {}
    for key, value in options.items():
        low = key.lower()
        if low in _SPARK_OPTIONS:
            if low == "path" and value:
                low = "topic"  # .load("topic") / .save("topic")
            else:
                continue
        name = _ALIASES.get(low, _CANONICAL.get(low))
        if name is None:
            close = difflib.get_close_matches(low, list(_KNOWN), n=1, cutoff=0.5)
            hint = f"; did you mean {_KNOWN[close[0]]!r}?" if close else ""
            raise BadParameterError(
                f"unknown option {key!r} of the dcps data source{hint} "
                f"(valid: {', '.join(sorted(OPTIONS))}; Kafka's names: "
                f"{', '.join(sorted(KAFKA_ALIASES))})"
            )
        target = name.lower()
        if target in out and out[target] != value:
            raise BadParameterError(
                f"option {name!r} is given twice (as {given[target]!r} and {key!r}) "
                "with different values"
            )
        out[target] = value
        given[target] = key
    return out


_types: dict[tuple[str, str, str], type] = {}


def load_type(
    type_path: str | None,
    idl_text: str | None,
    type_name: str | None,
    filename: str = "<option idl>",
) -> type:
    """The topic type named by ``type`` (``pkg.mod:Class``) or IDL text + ``type_name``.

    ``filename`` names the IDL text in errors and anchors its ``#include`` s.
    """
    key = (type_path or "", idl_text or "", type_name or "")
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
    elif idl_text:
        if not type_name:
            raise BadParameterError("option idl (or idl_file) needs option type_name too")
        try:
            t = idl.loads(idl_text, filename)[type_name]
        except KeyError as exc:
            raise BadParameterError(f"option type_name: {exc.args[0]}") from exc
    else:
        raise BadParameterError(
            "the dcps data source needs option type ('package.module:Class') "
            "or options idl (or idl_file) and type_name"
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


def parse_positions(text: str, option: str, topic: str = "") -> str | dict[int, int]:
    """``"earliest"``, ``"latest"`` or ``{channel: offset}`` from an option's JSON.

    JSON form: ``{"0": 12, "3": 0}`` (next offset to read per channel; -2
    earliest, -1 latest). Channels left out start at the earliest. Kafka's
    form ``{"<topic>": {"0": 12}}`` is accepted too (the entry of ``topic``).
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
    if value and all(isinstance(v, dict) for v in value.values()):  # Kafka: per topic
        if topic not in value:
            raise BadParameterError(
                f"option {option}: the JSON names topics {sorted(value)}, not {topic!r}"
            )
        value = value[topic]
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
    idl_text: str | None
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
        """Validate the options Spark passes (case-insensitive keys; Kafka's names too).

        An ``idl_file`` is read here, on the driver: its text travels to the
        executors with the options, so they need neither the file nor the
        type's Python module.
        """
        opts = canonical_options(options)
        topic = opts.get("topic")
        if not topic:
            raise BadParameterError("the dcps data source needs option topic")
        idl_text = opts.get("idl")
        if not idl_text and opts.get("idl_file"):
            try:
                idl_text = Path(opts["idl_file"]).read_text()
            except OSError as exc:
                raise BadParameterError(f"option idl_file {opts['idl_file']!r}: {exc}") from exc
        parsed = cls(
            topic=topic,
            type_path=opts.get("type"),
            idl_text=idl_text or None,
            type_name=opts.get("type_name"),
            domain_id=_int(opts, "domain", 0),
            namespace=opts.get("namespace") or "dcps",
            data_dir=opts.get("data_dir") or None,
            starting=parse_positions(
                opts.get("startingpositions", "earliest"), "startingPositions", topic
            ),
            ending=parse_positions(opts.get("endingpositions", "latest"), "endingPositions", topic),
            start_ns=_timestamp_ns(opts.get("starttimestamp"), "startTimestamp"),
            end_ns=_timestamp_ns(opts.get("endtimestamp"), "endTimestamp"),
            max_per_trigger=_int(opts, "maxelementspertrigger", 0),
            max_per_partition=_int(opts, "maxelementsperpartition", 1_000_000, 1),
            group=opts.get("group") or None,
            timeout=float(_int(opts, "timeout", 10, 1)),
            batch_rows=_int(opts, "batchrows", 16384, 1),
            channels=_int(opts, "channels", 0),
            retain_consumed=_bool(opts.get("retainconsumed"), "retainConsumed"),
        )
        parsed.type()  # fail early (on the driver) for an unknown type
        return parsed

    def type(self) -> type:
        """The topic type (loaded once per process)."""
        return load_type(self.type_path, self.idl_text, self.type_name)
