"""Named QoS profiles, from TOML files (the built-ins ship as ``qos/profiles.toml``).

A profile file is a table of profiles::

    [telemetry]
    description = "what it is for"      # optional
    base = "sensor_data"                # optional: start from another profile
    [telemetry.common]                  # topic, writer and reader (where applicable)
    reliability = "best_effort"
    history = { kind = "keep_last", depth = 5 }
    [telemetry.writer]                  # also topic, reader, publisher, subscriber
    deadline = { period = "100ms" }
    [telemetry.publisher]
    partition = ["telemetry"]

Policies are written by their snake_case names (``time_based_filter``). A
value is a table of the policy's fields, a kind name (``"reliable"``,
``"keep_all"``), a single value for one-field policies (``history = 5`` is
keep-last 5, ``partition = ["a", "b"]``), and durations are seconds,
``"infinite"`` or strings such as ``"100ms"``. A ``base`` is looked up in the
same file, then among the built-ins.
"""

from __future__ import annotations

import enum
import functools
import importlib.resources
import tomllib
import typing
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs

from idl._errors import BadParameterError, InconsistentPolicyError
from qos import _policies as _policies_module
from qos._duration import parse_duration
from qos._policies import History, HistoryKind, Partition, Properties, QosPolicy
from qos._sets import (
    DataReaderQos,
    DataWriterQos,
    PublisherQos,
    QosSet,
    SubscriberQos,
    TopicQos,
    keyword_name,
)

__all__ = ["Profile", "ProfileLibrary", "builtin_profiles", "load_profiles", "profile"]

_SECTIONS: dict[str, type[QosSet]] = {
    "topic": TopicQos,
    "writer": DataWriterQos,
    "reader": DataReaderQos,
    "publisher": PublisherQos,
    "subscriber": SubscriberQos,
}
_COMMON_TARGETS = ("topic", "writer", "reader")


@attrs.frozen
class Profile:
    """A named set of QoS for the entities of one use: topic, writer, reader,
    publisher and subscriber (each defaulted when the profile does not say)."""

    name: str
    description: str = ""
    topic: TopicQos = attrs.field(factory=TopicQos)
    writer: DataWriterQos = attrs.field(factory=DataWriterQos)
    reader: DataReaderQos = attrs.field(factory=DataReaderQos)
    publisher: PublisherQos = attrs.field(factory=PublisherQos)
    subscriber: SubscriberQos = attrs.field(factory=SubscriberQos)


class ProfileLibrary(Mapping[str, Profile]):
    """The profiles of one TOML file, by name (a read-only mapping)."""

    def __init__(self, source: str, profiles: Mapping[str, Profile]) -> None:
        self._source = source
        self._profiles = dict(profiles)

    @property
    def source(self) -> str:
        """The file the profiles were read from."""
        return self._source

    def __getitem__(self, name: str) -> Profile:
        try:
            return self._profiles[name]
        except KeyError:
            raise KeyError(name) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._profiles)

    def __len__(self) -> int:
        return len(self._profiles)

    def __repr__(self) -> str:
        return f"ProfileLibrary({self._source!r}, {sorted(self._profiles)})"


_POLICY_BY_KEY: dict[str, type[QosPolicy]] = {}


def _policy_classes() -> dict[str, type[QosPolicy]]:
    if not _POLICY_BY_KEY:
        for set_class in _SECTIONS.values():
            for cls in set_class.applicable():
                _POLICY_BY_KEY[keyword_name(cls)] = cls
    return _POLICY_BY_KEY


_FIELD_TYPES: dict[type[QosPolicy], dict[str, Any]] = {}


def _field_types(cls: type[QosPolicy]) -> dict[str, Any]:
    found = _FIELD_TYPES.get(cls)
    if found is None:
        # the policies' annotations name what qos._policies imports (their __module__
        # says ``qos``, the public package: see idl._public)
        hints = typing.get_type_hints(cls, globalns=vars(_policies_module))
        found = _FIELD_TYPES[cls] = {f.name: hints[f.name] for f in attrs.fields(cls)}  # type: ignore[arg-type]
    return found


def _parse_enum(enum_type: type[enum.Enum], value: object, where: str) -> enum.Enum:
    if isinstance(value, str):
        member = enum_type.__members__.get(value.strip().upper())
        if member is not None:
            return member
    names = ", ".join(name.lower() for name in enum_type.__members__)
    raise BadParameterError(f"{where}: expected one of {names}, got {value!r}")


def _convert(field_type: Any, value: object, where: str) -> object:
    if field_type is timedelta:
        return parse_duration(value, where=where)
    if isinstance(field_type, type) and issubclass(field_type, enum.Enum):
        return _parse_enum(field_type, value, where)
    if field_type is History:
        return _build_policy(History, value, where)
    if field_type is bytes:
        if isinstance(value, str):
            return value.encode()
        raise BadParameterError(f"{where}: expected a string, got {value!r}")
    if typing.get_origin(field_type) is tuple:
        item_type = typing.get_args(field_type)[0]
        items = [value] if isinstance(value, str) else value
        if not isinstance(items, list):
            raise BadParameterError(f"{where}: expected a list, got {value!r}")
        return tuple(_convert(item_type, item, f"{where}[{i}]") for i, item in enumerate(items))
    if field_type in (bool, int, str):
        if type(value) is not field_type:
            raise BadParameterError(f"{where}: expected a {field_type.__name__}, got {value!r}")
        return value
    raise BadParameterError(f"{where}: cannot read a value of this field from a file")


def _build_policy(cls: type[QosPolicy], value: object, where: str) -> QosPolicy:
    types = _field_types(cls)
    if cls is Properties:
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise BadParameterError(f"{where}: expected a table of text properties, got {value!r}")
        return Properties(value)
    if isinstance(value, dict):
        kwargs: dict[str, object] = {}
        for key, item in value.items():
            if key not in types:
                raise BadParameterError(
                    f"{where}: unknown field {key!r} of {cls.__name__} (fields: {', '.join(types)})"
                )
            kwargs[key] = _convert(types[key], item, f"{where}.{key}")
        if cls is Partition:
            return Partition(names=kwargs.get("names", ()))
        return cls(**kwargs)
    if cls is History and isinstance(value, int) and not isinstance(value, bool):
        return History.keep_last(value)
    if cls is History and isinstance(value, str):
        kind = _parse_enum(HistoryKind, value, where)
        return History.KEEP_ALL if kind is HistoryKind.KEEP_ALL else History()
    if cls is Partition:
        return Partition(names=_convert(types["names"], value, where))
    first = next(iter(types))
    if "kind" in types and isinstance(value, str):
        return cls(kind=_convert(types["kind"], value, where))  # type: ignore[call-arg]
    if len(types) == 1 or (first == "key_list" and isinstance(value, list | str)):
        policy = cls(**{first: _convert(types[first], value, where)})
        if first == "key_list":
            return policy.with_(use_key_list=True)
        return policy
    raise BadParameterError(
        f"{where}: give {cls.__name__} as a table of its fields ({', '.join(types)})"
    )


def _section(
    set_class: type[QosSet], table: object, where: str, *, lenient: bool = False
) -> list[QosPolicy]:
    if not isinstance(table, dict):
        raise BadParameterError(f"{where}: expected a table of policies, got {table!r}")
    known = _policy_classes()
    policies = []
    for key, value in table.items():
        cls = known.get(key)
        if cls is None:
            raise BadParameterError(
                f"{where}: unknown policy {key!r} (known: {', '.join(sorted(known))})"
            )
        if not set_class.applies(cls):
            if lenient:
                continue
            raise BadParameterError(f"{where}: {key!r} does not apply to a {set_class.entity_kind}")
        try:
            policies.append(_build_policy(cls, value, f"{where}.{key}"))
        except BadParameterError as exc:
            if str(exc).startswith(where):
                raise
            raise BadParameterError(f"{where}.{key}: {exc}") from exc
    return policies


def _parse_profile(
    source: str,
    name: str,
    table: object,
    raw: Mapping[str, object],
    resolving: tuple[str, ...],
    done: dict[str, Profile],
) -> Profile:
    where = f"{source}: profile {name!r}"
    if name in done:
        return done[name]
    if name in resolving:
        raise BadParameterError(
            f"{where}: base profiles form a cycle: {' -> '.join((*resolving, name))}"
        )
    if not isinstance(table, dict):
        raise BadParameterError(f"{where}: expected a table, got {table!r}")
    description = table.get("description", "")
    if not isinstance(description, str):
        raise BadParameterError(f"{where}: description must be a string")
    sets: dict[str, QosSet] = {key: cls() for key, cls in _SECTIONS.items()}
    base_name = table.get("base")
    if base_name is not None:
        if not isinstance(base_name, str):
            raise BadParameterError(f"{where}: base must be a profile name")
        if base_name in raw:
            base = _parse_profile(source, base_name, raw[base_name], raw, (*resolving, name), done)
        elif source != _BUILTIN_SOURCE and base_name in builtin_profiles():
            base = builtin_profiles()[base_name]
        else:
            raise BadParameterError(f"{where}: base profile {base_name!r} not found")
        sets = {key: getattr(base, key) for key in _SECTIONS}
    for key in table:
        if key not in ("description", "base", "common", *_SECTIONS):
            raise BadParameterError(
                f"{where}: unknown key {key!r} (expected description, base, common, "
                f"{', '.join(_SECTIONS)})"
            )
    try:
        if "common" in table:
            for target in _COMMON_TARGETS:
                policies = _section(
                    _SECTIONS[target], table["common"], f"{where}: common", lenient=True
                )
                sets[target] = sets[target].with_(*policies)
        for key, set_class in _SECTIONS.items():
            if key in table:
                sets[key] = sets[key].with_(*_section(set_class, table[key], f"{where}: {key}"))
    except InconsistentPolicyError as exc:
        raise InconsistentPolicyError(f"{where}: {exc}") from exc
    except BadParameterError as exc:
        if str(exc).startswith(source):
            raise
        raise BadParameterError(f"{where}: {exc}") from exc
    found = Profile(name, description, **sets)  # type: ignore[arg-type]
    done[name] = found
    return found


def _parse_library(source: str, text: str) -> ProfileLibrary:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BadParameterError(f"{source}: not a valid TOML file: {exc}") from exc
    done: dict[str, Profile] = {}
    for name, table in raw.items():
        _parse_profile(source, name, table, raw, (), done)
    return ProfileLibrary(source, {name: done[name] for name in raw})


_BUILTIN_SOURCE = "qos/profiles.toml (built-in)"


@functools.cache
def builtin_profiles() -> ProfileLibrary:
    """The profiles shipped with dcps (``sensor_data``, ``reliable_state``,
    ``event_stream``, ``command``, ``parameters``, ``default``)."""
    text = importlib.resources.files("qos").joinpath("profiles.toml").read_text("utf-8")
    return _parse_library(_BUILTIN_SOURCE, text)


def load_profiles(path: str | Path) -> ProfileLibrary:
    """Read the profiles of a user TOML file.

    Unknown policies, fields or keys and bad values raise
    :class:`BadParameterError` naming the file, the profile and the key;
    contradicting policies raise :class:`InconsistentPolicyError`.
    """
    path = Path(path)
    try:
        text = path.read_text("utf-8")
    except OSError as exc:
        raise BadParameterError(f"{path}: cannot read QoS profile file: {exc}") from exc
    return _parse_library(str(path), text)


def profile(name: str, library: ProfileLibrary | str | Path | None = None) -> Profile:
    """The profile ``name`` from ``library`` (a loaded library or a file path),
    falling back to the built-ins; without ``library``, a built-in."""
    if isinstance(library, str | Path):
        library = load_profiles(library)
    if library is not None:
        if not isinstance(library, ProfileLibrary):
            raise BadParameterError(f"library must be a ProfileLibrary or a path, got {library!r}")
        if name in library:
            return library[name]
    builtins = builtin_profiles()
    if name in builtins:
        return builtins[name]
    known = sorted({*builtins, *(library or {})})
    raise BadParameterError(f"no QoS profile named {name!r} (known: {', '.join(known)})")
