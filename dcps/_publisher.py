"""Publisher and Subscriber: groups of writers/readers sharing partitions and group QoS."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from cyclonedds.pub import Publisher as CyclonePublisher
from cyclonedds.sub import Subscriber as CycloneSubscriber

import qos as q
from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import wait_for_acks
from dcps._cyclone.qos_bridge import apply_qos, check_supported, resolve_qos
from dcps._cyclone.retcode import cyclone_call
from dcps._entity import Entity
from dcps._participant import DomainParticipant
from dcps._timeout import Timeout, timeout_ns
from idl._errors import BadParameterError, DcpsTimeoutError
from idl._public import show_as

Q = TypeVar("Q", q.PublisherQos, q.SubscriberQos)


def _with_partitions(qos: Q, partitions: Iterable[str] | None) -> Q:
    if partitions is None:
        return qos
    if isinstance(partitions, str):
        partitions = [partitions]
    names = tuple(partitions)
    for name in names:
        if not isinstance(name, str):
            raise BadParameterError(f"partition names are strings, got {name!r}")
    return qos.with_(q.Partition(names))


class _Group(Entity):
    _qos: Any
    _kind: str

    def __init__(self, participant: DomainParticipant) -> None:
        if not isinstance(participant, DomainParticipant):
            raise BadParameterError(
                f"a {self._kind} is created on a DomainParticipant, "
                f"got {type(participant).__name__}"
            )
        super().__init__(participant)
        self._participant = participant

    @property
    def participant(self) -> DomainParticipant:
        """The participant this entity belongs to."""
        return self._participant

    @property
    def partitions(self) -> tuple[str, ...]:
        """The partitions (names or wildcard patterns) this entity's endpoints live in."""
        return tuple(self._qos.get(q.Partition).names)

    def set_partitions(self, partitions: Sequence[str]) -> None:
        """Move all endpoints of this entity to other partitions, at run time.

        Cyclone DDS cannot change the partitions of a live publisher or
        subscriber, so dcps re-creates the Cyclone entities underneath: your
        writers, readers, conditions and listeners stay valid. Readers start
        with an empty cache in the new partitions (take what you still need
        first); a writer's TRANSIENT_LOCAL history restarts, and readers in the
        old partitions see its instances lose their writer (not disposed).
        """
        self.set_qos(_with_partitions(self._qos, partitions))

    def set_qos(self, qos: Any) -> None:
        """Change the QoS (only changeable policies may differ)."""
        self._check_open()
        if qos.get(q.Partition) == self._qos.get(q.Partition):
            self._qos = apply_qos(self._describe(), self._cyclone, self._qos, qos)
            return
        if type(qos) is not type(self._qos):
            raise BadParameterError(f"{self._kind} takes a {type(self._qos).__name__}")
        qos.check()
        q.check_change(self._qos, qos)
        check_supported(qos, self._kind)
        self._rebuild(qos)

    def _create_cyclone(self, qos: Any) -> Any:
        raise NotImplementedError

    def _rebuild(self, qos: Any) -> None:
        with cyclone_call(f"re-create {self._kind} for new partitions"):
            new = self._create_cyclone(qos)
        old, self._cyclone, self._qos = self._cyclone, new, qos
        self._rebind_children(new)
        old.__del__()


class Publisher(_Group):
    """Groups DataWriters; its Partition policy decides which readers they reach."""

    _qos: q.PublisherQos

    _kind = "Publisher"

    def __init__(
        self,
        participant: DomainParticipant,
        *,
        partitions: Iterable[str] | None = None,
        qos: q.PublisherQos | None = None,
    ) -> None:
        super().__init__(participant)
        self._qos = _with_partitions(resolve_qos(qos, q.PublisherQos, "Publisher"), partitions)
        self._qos.check()
        with cyclone_call("create Publisher"):
            self._cyclone = self._create_cyclone(self._qos)
        self._adopted()

    def _create_cyclone(self, qos: Any) -> Any:
        return CyclonePublisher(self._participant.handle, qos=q.to_cyclone(qos))

    @property
    def qos(self) -> q.PublisherQos:
        """The publisher's current QoS."""
        return self._qos

    def wait_for_acknowledgments(self, timeout: Timeout | None = None) -> None:
        """Block until every reliable reader acknowledged all data of all writers here."""
        self._check_open()
        ok = wait_for_acks(entity_ref(self._cyclone), timeout_ns(timeout))
        if not ok:
            raise DcpsTimeoutError(f"not all samples were acknowledged within {timeout}")


class Subscriber(_Group):
    """Groups DataReaders; its Partition policy decides which writers they hear."""

    _qos: q.SubscriberQos

    _kind = "Subscriber"

    def __init__(
        self,
        participant: DomainParticipant,
        *,
        partitions: Iterable[str] | None = None,
        qos: q.SubscriberQos | None = None,
    ) -> None:
        super().__init__(participant)
        self._qos = _with_partitions(resolve_qos(qos, q.SubscriberQos, "Subscriber"), partitions)
        self._qos.check()
        with cyclone_call("create Subscriber"):
            self._cyclone = self._create_cyclone(self._qos)
        self._adopted()

    def _create_cyclone(self, qos: Any) -> Any:
        return CycloneSubscriber(self._participant.handle, qos=q.to_cyclone(qos))

    @property
    def qos(self) -> q.SubscriberQos:
        """The subscriber's current QoS."""
        return self._qos


show_as("dcps", Publisher, Subscriber)
