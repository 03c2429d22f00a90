"""Topic: a name bound to a topic type within a participant."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from cyclonedds.topic import Topic as CycloneTopic

import idl
import qos as q
from dcps._cyclone.qos_bridge import resolve_qos
from dcps._cyclone.retcode import cyclone_call
from dcps._entity import Entity
from dcps._participant import DomainParticipant
from idl._errors import BadParameterError
from idl._public import show_as

T = TypeVar("T")


class Topic(Entity, Generic[T]):
    """A named, typed topic. Writers and readers are created on it."""

    _qos: q.TopicQos

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
            raise BadParameterError(
                f"topic name must be a non-empty string without spaces, got {name!r}"
            )
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
                participant.handle, name, data_type, qos=q.to_cyclone(self._qos)
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


class ContentFilteredTopic(Entity, Generic[T]):
    """A topic seen through an SQL filter (DDS 1.4 Annex B, with ``%n`` parameters).

    Readers created on it only receive samples that match; non-matching
    samples never enter their cache (they do not count against history or
    trigger data-available). Parameters can change at run time and apply to
    samples that arrive afterwards.
    """

    def __init__(
        self,
        name: str,
        related_topic: Topic[T],
        filter_expression: str,
        expression_parameters: Sequence[str] = (),
    ) -> None:
        # late: the SQL grammar loads only once a filter is used (keeps ``import dcps``
        # and plain topics light); dcps.sql imports nothing of the core
        from dcps.sql._filter import ContentFilter

        if not isinstance(related_topic, Topic):
            raise BadParameterError(
                f"a ContentFilteredTopic filters a Topic, got {type(related_topic).__name__}"
            )
        super().__init__(related_topic)  # AlreadyClosedError if the topic is closed
        self._filter = ContentFilter(
            filter_expression, related_topic.data_type, tuple(expression_parameters)
        )
        self._name = name
        self._related = related_topic
        participant = related_topic.participant
        with cyclone_call(f"create ContentFilteredTopic {name!r}"):
            # Cyclone filters per topic entity: a topic entity of our own carries the filter.
            self._cyclone: Any = CycloneTopic(
                participant.handle,
                related_topic.name,
                related_topic.data_type,
                qos=q.to_cyclone(related_topic.qos),
            )
            self._cyclone.set_topic_filter(self._accepts)
        self._adopted()

    def _accepts(self, _topic: Any, sample: Any) -> bool:
        try:
            return self._filter.matches(sample)
        except Exception:  # never let an exception cross into Cyclone's receive thread
            return False

    def _describe(self) -> str:
        return f"ContentFilteredTopic({self._name!r} on {self._related.name!r})"

    @property
    def name(self) -> str:
        """The name of this filtered view (local; readers use the related topic's name)."""
        return self._name

    @property
    def related_topic(self) -> Topic[T]:
        """The topic being filtered."""
        return self._related

    @property
    def data_type(self) -> type[T]:
        """The topic type."""
        return self._related.data_type

    @property
    def participant(self) -> DomainParticipant:
        """The participant of the related topic."""
        return self._related.participant

    @property
    def qos(self) -> q.TopicQos:
        """The related topic's QoS."""
        return self._related.qos

    @property
    def filter_expression(self) -> str:
        """The SQL filter expression."""
        return self._filter.expression

    @property
    def expression_parameters(self) -> tuple[str, ...]:
        """The current ``%n`` parameters."""
        return self._filter.parameters

    def set_expression_parameters(self, parameters: Sequence[str]) -> None:
        """Change the ``%n`` parameters (checked against the type before anything changes)."""
        self._check_open()
        self._filter = self._filter.with_parameters(tuple(parameters))


show_as("dcps", ContentFilteredTopic, Topic)
