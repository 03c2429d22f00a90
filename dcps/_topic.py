"""Topic: a name bound to a topic type within a participant."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from cyclonedds.topic import Topic as CycloneTopic

import idl
import qos as q
from dcps._entity import Entity
from dcps._participant import DomainParticipant
from dcps._qos_bridge import apply_qos, resolve_qos
from dcps._retcode import cyclone_call
from idl._errors import BadParameterError

T = TypeVar("T")


class Topic(Entity, Generic[T]):
    """A named, typed topic. Writers and readers are created on it."""

    def __init__(
        self,
        participant: DomainParticipant,
        name: str,
        data_type: type[T],
        *,
        qos: q.TopicQos | None = None,
    ) -> None:
        if not isinstance(participant, DomainParticipant):
            raise BadParameterError(
                f"a Topic is created on a DomainParticipant, got {type(participant).__name__}"
            )
        if not isinstance(name, str) or not name or any(c.isspace() for c in name):
            raise BadParameterError(f"topic name must be a non-empty string without spaces, got {name!r}")
        if not idl.is_topic_type(data_type):
            raise BadParameterError(
                f"{data_type!r} is not a topic type: declare it with idl (an idl.Struct)"
            )
        super().__init__(participant)
        self._participant = participant
        self._name = name
        self._type = data_type
        self._qos = resolve_qos(qos, q.TopicQos, "Topic")
        with cyclone_call(f"create Topic {name!r}"):
            self._cyclone: Any = CycloneTopic(
                participant._cyclone, name, data_type, qos=q.to_cyclone(self._qos)
            )
        self._adopted()

    def _describe(self) -> str:
        return f"Topic({self._name!r})"

    @property
    def name(self) -> str:
        """The topic name."""
        return self._name

    @property
    def type_name(self) -> str:
        """The IDL type name announced on the wire, e.g. ``sensors::Reading``."""
        return idl.describe(self._type).typename

    @property
    def data_type(self) -> type[T]:
        """The topic type (an ``idl`` struct class)."""
        return self._type

    @property
    def participant(self) -> DomainParticipant:
        """The participant this topic belongs to."""
        return self._participant

    @property
    def qos(self) -> q.TopicQos:
        """The topic's current QoS."""
        return self._qos

    def set_qos(self, qos: q.TopicQos) -> None:
        """Change the topic's QoS (only changeable policies may differ)."""
        self._check_open()
        self._qos = apply_qos(self, self._qos, qos)
