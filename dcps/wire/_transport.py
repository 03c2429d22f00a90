"""The protocol's transport over Cyclone DDS (the raw ``cyclonedds`` binding).

:class:`Endpoint` is a participant with the protocol's topics; :class:`Waiter`
is one thread's wait for data. Moving onto dcps's own entities later touches
this module only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cyclonedds._clayer import ddspy_write
from cyclonedds.core import (
    DDSException,
    GuardCondition,
    InstanceState,
    Policy,
    Qos,
    ReadCondition,
    WaitSet,
)
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter, Publisher
from cyclonedds.sub import DataReader, Subscriber
from cyclonedds.topic import Topic

from ._messages import Assignment, LiveBatch, Reply, Request, StoreAnnouncement
from ._names import ANY_STATE, check_name

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["Endpoint", "Waiter", "delete_entity", "drop_endpoint", "live_announcements"]


def delete_entity(entity: Any) -> None:
    """Delete a cyclonedds entity now (the binding otherwise waits for garbage collection)."""
    entity.__del__()


def drop_endpoint(entity: DataReader[Any] | DataWriter[Any]) -> None:
    """Delete a reader or writer made by :meth:`Endpoint.reader`/``writer`` and its parent."""
    parent = entity.parent
    delete_entity(entity)
    if parent is not None:
        delete_entity(parent)


def live_announcements(reader: DataReader[Any]) -> list[StoreAnnouncement]:
    """The announcements of the stores alive now (read, not taken: they stay cached)."""
    return [
        s
        for s in reader.read(N=1024)
        if isinstance(s, StoreAnnouncement) and s.sample_info.instance_state == InstanceState.Alive  # type: ignore[attr-defined]
    ]


class _SealingWriter(DataWriter[Any]):
    """A writer that seals each sample (``dcps.wire._sealing``) just before it is written.

    ``seal`` may return the sealed sample's XCDR1 bytes, written as they are
    (unless the writer uses XCDR2) instead of serialising the sample again.
    """

    def __init__(
        self, publisher: Publisher, topic: Topic[Any], qos: Qos, seal: Callable[[Any], Any]
    ) -> None:
        super().__init__(publisher, topic, qos=qos)
        self._seal = seal

    def write(self, sample: Any, timestamp: int | None = None) -> None:
        wire = self._seal(sample)
        if wire is None or self._use_version_2 or timestamp is not None:
            super().write(sample, timestamp)
            return
        ret = ddspy_write(self._ref, wire.ljust((len(wire) + 3) & ~3, b"\0"))
        if ret < 0:
            raise DDSException(ret, f"Occurred while writing sample in {self!r}")


class Endpoint:
    """A DomainParticipant with the channel-layer topics of one namespace.

    ``network`` (a :class:`dcps.NetworkConfig`) configures the domain as for
    :class:`dcps.DomainParticipant`; without it the ``DCPS_*`` environment
    settings do, if any is set.
    """

    def __init__(
        self, domain_id: int, namespace: str, network: NetworkConfig | None = None
    ) -> None:
        # function-local: dcps._participant imports the whole DCPS core, which
        # the store's and Spark's users of the wire do not otherwise need
        from dcps._participant import _domains, _network_from_env

        self.namespace = check_name("namespace", namespace)
        # one network configuration per domain per process, as for dcps.DomainParticipant
        self._network = network if network is not None else _network_from_env()
        if self._network is not None:
            _domains.acquire(domain_id, self._network)
        self._domain_id = domain_id
        name_qos = self._network.participant_qos() if self._network is not None else None
        self.participant = DomainParticipant(domain_id, qos=name_qos)
        dp = self.participant
        self.request_topic = Topic(dp, "dcps_channels_request", Request)
        self.reply_topic = Topic(dp, "dcps_channels_reply", Reply)
        self.batch_topic = Topic(dp, "dcps_channels_batch", LiveBatch)
        self.assign_topic = Topic(dp, "dcps_channels_assignment", Assignment)
        self.store_topic = Topic(dp, "dcps_channels_store", StoreAnnouncement)
        self._closed = False

    def writer(
        self,
        topic: Topic[Any],
        partition: str,
        qos: Qos,
        *,
        seal: Callable[[Any], Any] | None = None,
    ) -> DataWriter[Any]:
        """A writer of ``topic`` in one partition; ``seal`` (if given) authenticates each sample
        as it is written (a :class:`~dcps.wire._sealing.Sealer` method): the one place where
        the protocol's outgoing messages get their trailer."""
        pub = Publisher(self.participant, qos=Qos(Policy.Partition([partition])))
        if seal is None:
            return DataWriter(pub, topic, qos=qos)
        return _SealingWriter(pub, topic, qos, seal)

    def reader(self, topic: Topic[Any], partition: str, qos: Qos) -> DataReader[Any]:
        """A reader of ``topic`` in one partition."""
        sub = Subscriber(self.participant, qos=Qos(Policy.Partition([partition])))
        return DataReader(sub, topic, qos=qos)

    def close(self) -> None:
        """Delete the participant and everything in it (idempotent)."""
        if not self._closed:
            self._closed = True
            delete_entity(self.participant)
            if self._network is not None:
                from dcps._participant import _domains  # see __init__

                _domains.release(self._domain_id)


class Waiter:
    """One thread's wait for data on some readers, or for a wake-up from another thread."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._ws = WaitSet(endpoint.participant)
        self._guard = GuardCondition(endpoint.participant)
        self._ws.attach(self._guard)
        self._conds: dict[int, ReadCondition] = {}

    def watch(self, reader: DataReader[Any]) -> None:
        """Wake :meth:`wait` whenever ``reader`` holds samples."""
        cond = ReadCondition(reader, ANY_STATE)
        self._ws.attach(cond)
        self._conds[id(reader)] = cond

    def unwatch(self, reader: DataReader[Any]) -> None:
        """Stop watching ``reader`` (before deleting it)."""
        cond = self._conds.pop(id(reader), None)
        if cond is not None:
            self._ws.detach(cond)
            delete_entity(cond)

    def wait(self, seconds: float) -> None:
        """Block until a watched reader holds data, :meth:`wake` is called, or ``seconds``."""
        self._ws.wait(int(seconds * 1_000_000_000))
        self._guard.set(False)

    def wake(self) -> None:
        """Make the current or next :meth:`wait` return at once (any thread)."""
        self._guard.set(True)

    def close(self) -> None:
        """Delete the conditions and the wait set."""
        for cond in self._conds.values():
            delete_entity(cond)
        self._conds.clear()
        delete_entity(self._guard)
        delete_entity(self._ws)
