"""What a domain holds, as its built-in discovery topics tell: participants and endpoints.

:func:`scan` reads the DCPSParticipant, DCPSPublication and DCPSSubscription
built-in topics for a bounded time (or until a condition holds) and returns a
:class:`Scan` of plain values; :func:`lookup_type` turns a discovered type
identifier into a topic type through XTypes type lookup.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import attrs

from idl._errors import DcpsTimeoutError

__all__ = ["Endpoint", "Participant", "Scan", "lookup_type", "scan", "topic_pattern"]

_NS = 1_000_000_000


@attrs.frozen
class Participant:
    """A remote domain participant: its GUID, name and the process that runs it."""

    guid: str
    name: str | None
    host: str | None
    process: str | None
    pid: str | None
    addresses: str | None


@attrs.frozen
class Endpoint:
    """A writer or reader of a topic, with its QoS (``qos``: the Cyclone QoS object)."""

    kind: str  # "writer" or "reader"
    guid: str
    participant: str
    topic: str
    type_name: str
    partitions: tuple[str, ...]
    name: str | None
    qos: Any = attrs.field(eq=False, repr=False)
    type_id: Any = attrs.field(eq=False, repr=False)


@attrs.define
class Scan:
    """Participants and endpoints seen on a domain (this tool's own excluded)."""

    participants: dict[str, Participant] = attrs.field(factory=dict)
    endpoints: dict[str, Endpoint] = attrs.field(factory=dict)

    def topics(self) -> dict[str, list[Endpoint]]:
        """Endpoints by topic name, topics sorted."""
        result: dict[str, list[Endpoint]] = {}
        for e in sorted(self.endpoints.values(), key=lambda e: (e.topic, e.kind, e.guid)):
            result.setdefault(e.topic, []).append(e)
        return result

    def writers_of(self, topic: str) -> list[Endpoint]:
        """The writers of ``topic`` seen so far."""
        return [e for e in self.endpoints.values() if e.kind == "writer" and e.topic == topic]


def topic_pattern(pattern: str) -> re.Pattern[str]:
    """A full-match regular expression of ``pattern`` (taken literally if it is not one)."""
    try:
        return re.compile(f"(?:{pattern})\\Z")
    except re.error:
        return re.compile(re.escape(pattern) + "\\Z")


def _property(qos: Any, key: str) -> str | None:
    from cyclonedds.qos import Policy

    found = qos[Policy.Property(key, "")]
    return None if found is None else str(found.value)


def _split_qos(qos: Any) -> tuple[Any, str | None, tuple[str, ...]]:
    """(QoS without EntityName and Partition, the entity name, the partitions)."""
    from cyclonedds.qos import Policy, Qos

    name = qos[Policy.EntityName].name if Policy.EntityName in qos else None
    parts = tuple(qos[Policy.Partition].partitions) if Policy.Partition in qos else ()
    rest = qos
    for policy in (Policy.EntityName, Policy.Partition):
        if policy in rest:
            rest = rest - Qos(rest[policy])
    return rest, name, parts


def scan(
    participant: Any,
    seconds: float,
    *,
    topics: re.Pattern[str] | None = None,
    until: Callable[[Scan], bool] | None = None,
) -> Scan:
    """Read discovery for ``seconds`` (or until ``until(scan)`` holds) on a dcps participant.

    Endpoints of topics not matching ``topics`` are left out; so is everything
    of ``participant`` itself.
    """
    from cyclonedds import builtin, core

    cyclone = participant.handle
    own = str(cyclone.guid)
    readers = [
        builtin.BuiltinDataReader(cyclone, builtin.BuiltinTopicDcpsParticipant),
        builtin.BuiltinDataReader(cyclone, builtin.BuiltinTopicDcpsPublication),
        builtin.BuiltinDataReader(cyclone, builtin.BuiltinTopicDcpsSubscription),
    ]
    alive = core.SampleState.Any | core.ViewState.Any | core.InstanceState.Alive
    waitset = core.WaitSet(cyclone)
    conditions = [core.ReadCondition(r, alive) for r in readers]
    for condition in conditions:
        waitset.attach(condition)
    result = Scan()
    deadline = time.monotonic() + seconds
    try:
        while True:
            _take_participants(readers[0], conditions[0], own, result)
            for kind, reader, condition in (
                ("writer", readers[1], conditions[1]),
                ("reader", readers[2], conditions[2]),
            ):
                _take_endpoints(kind, reader, condition, own, topics, result)
            left = deadline - time.monotonic()
            if left <= 0 or (until is not None and until(result)):
                return result
            waitset.wait(int(min(left, 0.2) * _NS))
    finally:
        for condition in conditions:
            waitset.detach(condition)


def _take_participants(reader: Any, condition: Any, own: str, result: Scan) -> None:
    from cyclonedds.qos import Policy

    for p in reader.take(N=256, condition=condition):
        guid = str(p.key)
        if guid == own:
            continue
        result.participants[guid] = Participant(
            guid=guid,
            name=p.qos[Policy.EntityName].name if Policy.EntityName in p.qos else None,
            host=_property(p.qos, "__Hostname"),
            process=_property(p.qos, "__ProcessName"),
            pid=_property(p.qos, "__Pid"),
            addresses=_property(p.qos, "__NetworkAddresses"),
        )


def _take_endpoints(
    kind: str,
    reader: Any,
    condition: Any,
    own: str,
    topics: re.Pattern[str] | None,
    result: Scan,
) -> None:
    for e in reader.take(N=256, condition=condition):
        if not hasattr(e, "topic_name"):  # an invalid sample: an endpoint went away
            continue
        participant = str(e.participant_key)
        if participant == own or (topics is not None and not topics.match(e.topic_name)):
            continue
        qos, name, partitions = _split_qos(e.qos)
        result.endpoints[str(e.key)] = Endpoint(
            kind=kind,
            guid=str(e.key),
            participant=participant,
            topic=e.topic_name,
            type_name=e.type_name,
            partitions=partitions,
            name=name,
            qos=qos,
            type_id=e.type_id,
        )


def lookup_type(participant: Any, type_id: Any, seconds: float) -> tuple[Any, str]:
    """The topic type of a discovered type identifier and its IDL text (XTypes type lookup).

    Raises :class:`dcps.DcpsTimeoutError` when no participant answers in ``seconds``.
    """
    from cyclonedds import dynamic, util

    # the binding's own IDL printer (the `cyclonedds typeof` code): no other renders
    # a type built by type lookup, whose classes are plain binding IdlStructs
    from cyclonedds.tools.cli.idl import IdlType

    try:
        data_type, _nested = dynamic.get_types_for_typeid(
            participant.handle, type_id, util.duration(seconds=max(seconds, 0.1))
        )
    except Exception as exc:  # the binding raises plain Exception/DDSException on a timeout
        raise DcpsTimeoutError(f"type lookup got no answer within {seconds:g} s ({exc})") from exc
    printer: Any = IdlType
    return data_type, str(printer.idl([data_type]))
