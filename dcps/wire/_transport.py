"""The protocol's transport over Cyclone DDS (the raw ``cyclonedds`` binding).

:class:`Endpoint` is a participant with the protocol's topics; :class:`Waiter`
is one thread's wait for data. Moving onto dcps's own entities later touches
this module only.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

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

from dcps._cyclone.binding import entity_ref, uses_xcdr2
from dcps._cyclone.gather import GATHER_MIN, write_gathered
from dcps._cyclone.retcode import cyclone_call

from ._batches import message_pieces
from ._messages import Assignment, LiveBatch, Reply, Request, StoreAnnouncement
from ._names import ANY_STATE, check_name

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

_E = TypeVar("_E")

__all__ = ["Endpoint", "Waiter", "delete_entity", "drop_endpoint", "live_announcements"]

#: The participant the endpoints of one domain share in this process, and how many use it.
#: Keyed by process id too: a forked child must not use its parent's participant.
_shared: dict[tuple[int, int], tuple[DomainParticipant, int]] = {}
_shared_lock = threading.Lock()


def _acquire_participant(domain_id: int, qos: Qos | None) -> DomainParticipant:
    """The process's participant of ``domain_id`` for the protocol, created on first use.

    One participant per domain per process, not one per endpoint: a new
    participant must be discovered by every other process before it can talk
    (SPDP), and Cyclone was seen to ignore a remote process's new participant
    for tens of seconds while participants were created and deleted in the
    store's process. New readers and writers on a known participant are
    matched at once (SEDP). It is also far lighter.
    """
    key = (os.getpid(), domain_id)
    with _shared_lock:
        participant, users = _shared.get(key, (None, 0))
        if participant is None:
            participant = DomainParticipant(domain_id, qos=qos)
        _shared[key] = (participant, users + 1)
        return participant


def _release_participant(domain_id: int) -> None:
    """One user fewer of the shared participant; the last one deletes it."""
    key = (os.getpid(), domain_id)
    with _shared_lock:
        participant, users = _shared[key]
        if users > 1:
            _shared[key] = (participant, users - 1)
            return
        del _shared[key]
    delete_entity(participant)


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


def write_message(writer: DataWriter[Any], message: Any, *, whole: bool) -> None:
    """Write a protocol message whose last members are ``blob`` and ``auth`` (a
    :class:`Request` or :class:`LiveBatch`); a failure raises the dcps error of it.

    One of ``GATHER_MIN`` (128 KiB) or more goes to Cyclone in pieces
    (:func:`~dcps.wire._batches.message_pieces`,
    :func:`~dcps._cyclone.gather.write_gathered`): its blob is not copied into a new
    sample first, and the GIL is free while Cyclone copies and sends. ``whole``: through
    the writer all the same (a sealed message: its tag covers every byte).
    """
    if whole or len(message.blob) < GATHER_MIN or uses_xcdr2(writer):
        with cyclone_call(f"write a {type(message).__name__}"):
            writer.write(message)
    else:
        write_gathered(entity_ref(writer), message_pieces(message))


class Endpoint:
    """The channel-layer topics of one namespace, on the participant this process shares.

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
        self.participant = _acquire_participant(domain_id, name_qos)
        # what this endpoint made on the shared participant, deleted by close() (weakly held:
        # a reader or writer dropped meanwhile is gone with its parent)
        self._owned: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()
        self._closed = False
        dp = self.participant
        self.request_topic = self.own(Topic(dp, "dcps_channels_request", Request))
        self.reply_topic = self.own(Topic(dp, "dcps_channels_reply", Reply))
        self.batch_topic = self.own(Topic(dp, "dcps_channels_batch", LiveBatch))
        self.assign_topic = self.own(Topic(dp, "dcps_channels_assignment", Assignment))
        self.store_topic = self.own(Topic(dp, "dcps_channels_store", StoreAnnouncement))

    @property
    def fragment_size(self) -> int | None:
        """The Cyclone FragmentSize of this endpoint's domain when dcps configured it, here
        or by another participant of this process on the same domain
        (:attr:`dcps.NetworkConfig.effective_fragment_size`); None: Cyclone's 1,344 bytes,
        or whatever ``CYCLONEDDS_URI`` says."""
        from dcps._participant import _domains  # see __init__

        network = self._network or _domains.network_of(self._domain_id)
        return network.effective_fragment_size if network is not None else None

    def own(self, entity: _E) -> _E:
        """Record ``entity`` (made on :attr:`participant`) for :meth:`close` to delete."""
        self._owned[id(entity)] = entity
        return entity

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
        pub = self.own(Publisher(self.participant, qos=Qos(Policy.Partition([partition]))))
        if seal is None:
            return DataWriter(pub, topic, qos=qos)
        return _SealingWriter(pub, topic, qos, seal)

    def reader(self, topic: Topic[Any], partition: str, qos: Qos) -> DataReader[Any]:
        """A reader of ``topic`` in one partition."""
        sub = self.own(Subscriber(self.participant, qos=Qos(Policy.Partition([partition]))))
        return DataReader(sub, topic, qos=qos)

    def close(self) -> None:
        """Delete everything this endpoint made, and the participant if no other endpoint
        of the process uses it (idempotent)."""
        if not self._closed:
            self._closed = True
            owned = list(self._owned.values())
            self._owned.clear()
            # publishers, subscribers (with their writers and readers) and waits first:
            # a topic is deleted only once nothing of it is left
            for entity in sorted(owned, key=lambda e: isinstance(e, Topic)):
                delete_entity(entity)
            _release_participant(self._domain_id)
            if self._network is not None:
                from dcps._participant import _domains  # see __init__

                _domains.release(self._domain_id)


class Waiter:
    """One thread's wait for data on some readers, or for a wake-up from another thread."""

    def __init__(self, endpoint: Endpoint) -> None:
        self._ws = endpoint.own(WaitSet(endpoint.participant))
        self._guard = endpoint.own(GuardCondition(endpoint.participant))
        self._ws.attach(self._guard)
        self._conds: dict[int, ReadCondition] = {}
        self._closed = False

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
        """Make the current or next :meth:`wait` return at once (any thread).

        After :meth:`close` it does nothing: a late reply's callback (a heartbeat
        answered as its subscriber closed) may still call it.
        """
        if self._closed:
            return
        try:
            self._guard.set(True)
        except DDSException:
            if not self._closed:  # else closed between the check and the call
                raise

    def close(self) -> None:
        """Delete the conditions and the wait set."""
        self._closed = True
        for cond in self._conds.values():
            delete_entity(cond)
        self._conds.clear()
        delete_entity(self._guard)
        delete_entity(self._ws)
