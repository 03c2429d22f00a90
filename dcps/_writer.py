"""DataWriter: writes typed samples and manages the instances it publishes.

Lifecycle (DDS 1.4, 2.2.2.4.2.x): a writer announces
``autodispose_unregistered_instances=False`` to Cyclone whatever its QoS says,
and disposes explicitly when the QoS has it on. Cyclone's readers apply the
announced flag when a writer is lost (process killed, liveliness lost), so a
dcps writer that dies leaves its instances NOT_ALIVE_NO_WRITERS, as DDS says,
while ``unregister_instance``, ``close()`` and leaving a ``with`` block dispose
(NOT_ALIVE_DISPOSED) when autodispose is on. See :mod:`dcps._live_instances`.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Any, Generic, TypeVar, cast

from cyclonedds.pub import DataWriter as CycloneWriter

import idl
import qos as q
from dcps import _status as st
from dcps._cyclone.batching import BatchingCycloneWriter
from dcps._cyclone.binding import entity_ref, install_listener, uses_xcdr2
from dcps._cyclone.calls import (
    assert_liveliness,
    instance_key,
    matched_subscriptions,
    wait_for_acks,
)
from dcps._cyclone.calls import write as c_write
from dcps._cyclone.qos_bridge import apply_qos, resolve_qos
from dcps._cyclone.retcode import cyclone_call, error_for
from dcps._cyclone.timing import timestamp_ns
from dcps._entity import EntityState
from dcps._history import wait_for_durability_service
from dcps._listener import Listener, build_cyclone_listener
from dcps._live_instances import LiveInstances
from dcps._participant import DomainParticipant
from dcps._publisher import Publisher
from dcps._timeout import Timeout, timeout_ns
from dcps._topic import Topic
from dcps._wait import wait_until
from dcps._watched import Watched
from dcps._write_batching import FlushPolicy
from idl._errors import (
    AlreadyClosedError,
    BadParameterError,
    DcpsTimeoutError,
    PreconditionNotMetError,
)
from idl._public import show_as
from idl._struct import encoder

T = TypeVar("T")


def _announced(value: q.DataWriterQos) -> q.DataWriterQos:
    """The QoS Cyclone gets for a writer: autodispose always off (dcps disposes itself)."""
    lifecycle = value[q.WriterDataLifecycle]
    if not lifecycle.autodispose_unregistered_instances:
        return value
    return value.with_(q.WriterDataLifecycle(autodispose_unregistered_instances=False))


def _autodisposes(value: q.DataWriterQos) -> bool:
    return value[q.WriterDataLifecycle].autodispose_unregistered_instances


class DataWriter(Watched, Generic[T]):
    """Publishes samples of one topic.

    Created on a :class:`Publisher` (whose partitions it uses) or directly on a
    :class:`DomainParticipant` (it then gets a publisher of its own).

    Instance lifecycle, with the default ``WriterDataLifecycle`` (autodispose on):
    :meth:`dispose`, :meth:`unregister_instance`, :meth:`close` and leaving a
    ``with`` block make the writer's instances NOT_ALIVE_DISPOSED at every reader;
    a writer that dies (its process killed) or loses its liveliness leaves them
    NOT_ALIVE_NO_WRITERS. With autodispose off, only :meth:`dispose` and
    :meth:`write_dispose` dispose. To do this, dcps announces autodispose off to
    DDS (a remote reader's view of this writer's QoS shows it off) and disposes
    the instances it has written itself, so the writer remembers the key of each
    instance it wrote until that instance is disposed or unregistered.

    Write batching (``batching``): the writer packs the samples of a long,
    tight run of writes into shared packets for remote readers instead of
    sending a datagram per sample, which cuts what each remote reader costs
    the writer (a system call and an acknowledgement per sample). A lone
    write, every write of a stream up to 10 kHz and the first 16 writes of a
    burst are sent at once, as without batching; from the 17th write of a run
    (each write less than 0.1 ms after the one before) a sample waits at most
    1 ms (see :mod:`dcps._write_batching`; :meth:`flush` sends at once).
    Readers in the same process get every sample at once either way. On by
    default (``None``) for TRANSIENT and PERSISTENT writers, whose samples
    always go to a remote reader, the durability service: it cuts what the
    service costs such a writer (writer CPU per message on a quiet machine:
    9.8 us without batching, 7.7 us with it, 6.5 us without the service) at
    no cost in the round trip of a lone sample, a stream or a short burst
    (``docs/durability-writers.md``). Off by default for the other
    durabilities; ``True`` or ``False`` decides for any writer.
    """

    _qos: q.DataWriterQos

    def __init__(
        self,
        publisher: Publisher | DomainParticipant,
        topic: Topic[T],
        *,
        qos: q.DataWriterQos | None = None,
        listener: Listener | None = None,
        batching: bool | None = None,
    ) -> None:
        if not isinstance(publisher, Publisher | DomainParticipant):
            raise BadParameterError(
                f"a DataWriter is created on a Publisher or DomainParticipant, "
                f"got {type(publisher).__name__}"
            )
        if not isinstance(topic, Topic):
            raise BadParameterError(f"a DataWriter needs a Topic, got {type(topic).__name__}")
        participant = (
            publisher if isinstance(publisher, DomainParticipant) else publisher.participant
        )
        if topic.participant is not participant:
            raise BadParameterError("the topic and the publisher belong to different participants")
        if topic.closed:
            raise AlreadyClosedError(f"the topic {topic.name!r} is closed")
        checked_qos = resolve_qos(qos, q.DataWriterQos, "DataWriter")
        durable = checked_qos[q.Durability].kind.value >= q.DurabilityKind.TRANSIENT.value
        if batching is not None and not isinstance(batching, bool):
            raise BadParameterError(
                f"batching is True, False or None, got {type(batching).__name__}"
            )
        # on by default where a remote reader, the durability service, is certain
        self._batching = durable if batching is None else batching
        self._batch: FlushPolicy | None = None
        # Created on a participant: the publisher is our own, closed with us.
        self._own_publisher: Publisher | None = (
            Publisher(participant) if isinstance(publisher, DomainParticipant) else None
        )
        publisher = self._own_publisher or cast(Publisher, publisher)
        super().__init__(publisher)
        self._publisher = publisher
        self._topic = topic
        self._type = topic.data_type
        self._type_check = idl.validate
        self._qos = checked_qos
        self._listener = listener
        try:
            with cyclone_call(f"create DataWriter on topic {topic.name!r}"):
                self._cyclone: Any = self._create_cyclone(publisher.handle)
                self._ref = entity_ref(self._cyclone)  # what the ctypes write calls take
        except BaseException:
            if self._own_publisher is not None:
                self._own_publisher.close()
            raise
        self._encode = encoder(self._type, uses_xcdr2(self._cyclone))
        self._instances = LiveInstances(self._type)
        self._key_of = self._instances.key_of
        # The instances to dispose on close; None while autodispose is off (nothing to track).
        self._live: dict[Any, Any] | None = (
            self._instances.alive if _autodisposes(checked_qos) else None
        )
        self._batch = FlushPolicy(self._ref) if self._batching else None
        self._adopted()
        if durable:
            wait_for_durability_service(self._cyclone)  # see dcps/_history.py

    def _create_cyclone(self, cyclone_publisher: Any) -> Any:
        kind = BatchingCycloneWriter if self._batching else CycloneWriter
        return kind(
            cyclone_publisher,
            self._topic.handle,
            qos=q.to_cyclone(_announced(self._qos)),
            listener=build_cyclone_listener(self, self._listener),
        )

    def _follow(self, parent_handle: Any) -> None:
        """Move onto a re-created Cyclone publisher (its partitions changed)."""
        with cyclone_call(f"re-create {self._describe()} for new partitions"):
            new = self._create_cyclone(parent_handle)
        old, self._cyclone = self._cyclone, new
        self._ref = entity_ref(new)
        if self._batch is not None:
            self._batch.close()  # what the old writer queued leaves before it goes
            self._batch = FlushPolicy(self._ref)
        self._encode = encoder(self._type, uses_xcdr2(self._cyclone))
        self._rebind_children(new)  # the conditions
        # Leaving a partition must not dispose instances for the readers left behind
        # (the old writer announced autodispose off: they see NO_WRITERS), and the
        # readers of the new partitions never saw them: nothing to dispose there.
        self._instances.clear()
        old.__del__()

    def _describe(self) -> str:
        return f"DataWriter({self._topic.name!r})"

    def _on_close(self) -> None:
        if self._live is not None:
            self._dispose_alive()
        if self._batch is not None:
            self._batch.close()
        if self._own_publisher is not None:
            # Our implicit publisher is our parent; close it after we are gone.
            self._leave_parent()
            self._cyclone.__del__()
            self._own_publisher.close()

    def _dispose_alive(self) -> None:
        """Dispose every instance this writer made alive (closing with autodispose on)."""
        for holder in self._instances.drain():
            # Best effort, instance by instance: close() goes on whatever one dispose does
            # (a reliable writer whose readers stopped acknowledging may time out).
            with contextlib.suppress(Exception):
                self._cyclone.dispose(holder)

    def set_qos(self, qos: q.DataWriterQos) -> None:
        """Change this writer's QoS: only changeable policies may differ from the current ones.

        Turning autodispose on makes :meth:`close` dispose the instances written from
        then on (those written while it was off are left NOT_ALIVE_NO_WRITERS).
        """
        self._check_open()
        self._qos = apply_qos(self._describe(), self._cyclone, self._qos, qos, announce=_announced)
        if not _autodisposes(self._qos):
            self._live = None
            self._instances.clear()
        elif self._live is None:
            self._live = self._instances.alive

    # -- properties ----------------------------------------------------------
    @property
    def topic(self) -> Topic[T]:
        """The topic this writer publishes."""
        return self._topic

    @property
    def publisher(self) -> Publisher:
        """The publisher this writer belongs to."""
        return self._publisher

    @property
    def qos(self) -> q.DataWriterQos:
        """The writer's current QoS."""
        return self._qos

    @property
    def batching(self) -> bool:
        """Whether this writer batches what it sends to remote readers (see the class doc)."""
        return self._batching

    def set_listener(self, listener: Listener | None) -> None:
        """Replace this writer's listener (``None`` removes it)."""
        self._check_open()
        self._listener = listener
        install_listener(self._cyclone, build_cyclone_listener(self, listener))

    # -- writing -------------------------------------------------------------
    def _checked(self, sample: T) -> T:
        self._check_open()
        self._type_check(sample, self._type)
        return sample

    def _serialize(self, sample: T) -> bytes:
        """CDR bytes of ``sample``, padded as Cyclone expects; a clear IdlError if it does not fit.

        The binding's serializer checks ranges and bounds itself, so the full
        validator only runs to explain a failure: writing stays as fast as raw.
        """
        if type(sample) is not self._type and not isinstance(sample, self._type):
            self._type_check(sample, self._type)  # raises: wrong sample type
        try:
            data = self._encode(sample)
        except Exception as exc:
            self._type_check(sample, self._type)
            raise idl.IdlError(f"cannot serialise {type(sample).__name__}: {exc}") from exc
        padding = -len(data) % 4
        return data + b"\0" * padding if padding else data

    def write(self, sample: T, timestamp: datetime | int | None = None) -> None:
        """Publish ``sample``; ``timestamp`` overrides the source timestamp (UTC datetime or ns)."""
        if self._state is EntityState.CLOSED:
            self._check_open()
        batch = self._batch
        # a batching writer's runs count the time between writes, not in them (a write
        # blocked by flow control is no pause): when this one started
        started = time.monotonic_ns() if batch is not None else 0
        data = self._serialize(sample)
        stamp = None if timestamp is None else timestamp_ns(timestamp)
        rc = c_write("write", self._ref, data, stamp)
        if rc < 0:
            raise error_for(rc, f"write on {self._describe()}")
        if batch is not None:
            batch.written(started)
        live = self._live
        if live is not None:  # autodispose on: remember the instance for close()
            key = self._key_of(sample)
            try:
                if key in live:
                    return
            except TypeError:  # an unhashable key value (a list, an array)
                pass
            self._instances.remember(key, sample)

    def write_dispose(self, sample: T, timestamp: datetime | int | None = None) -> None:
        """Publish ``sample`` and dispose its instance in one step."""
        self._check_open()
        started = time.monotonic_ns()
        data = self._serialize(sample)
        stamp = None if timestamp is None else timestamp_ns(timestamp)
        rc = c_write("write_dispose", self._ref, data, stamp)
        if rc < 0:
            raise error_for(rc, f"write_dispose on {self._describe()}")
        self._sent(started)
        if self._live is not None:
            self._instances.forget(sample)

    def dispose(self, instance: T | int, timestamp: datetime | int | None = None) -> None:
        """Dispose an instance, given by a sample with its key or by its handle."""
        self._check_open()
        ts = None if timestamp is None else timestamp_ns(timestamp)
        with cyclone_call(f"dispose on {self._describe()}"):
            if isinstance(instance, int):
                self._cyclone.dispose_instance_handle(self._known_handle(instance), ts)
            else:
                self._cyclone.dispose(self._checked_key(instance), ts)
        self._sent()
        self._forget(instance)

    def unregister_instance(
        self, instance: T | int, timestamp: datetime | int | None = None
    ) -> None:
        """Stop updating an instance.

        With autodispose on (the default ``WriterDataLifecycle``) the instance is
        disposed first: readers see NOT_ALIVE_DISPOSED. With it off, readers see
        NOT_ALIVE_NO_WRITERS once no writer of the instance is left.
        """
        self._check_open()
        ts = None if timestamp is None else timestamp_ns(timestamp)
        dispose = _autodisposes(self._qos)
        with cyclone_call(f"unregister on {self._describe()}"):
            if isinstance(instance, int):
                handle = self._known_handle(instance)
                if dispose:
                    self._cyclone.dispose_instance_handle(handle, ts)
                self._forget(instance)  # before: the handle goes with the registration
                self._cyclone.unregister_instance_handle(handle, ts)
            else:
                key = self._checked_key(instance)
                if dispose:
                    self._cyclone.dispose(key, ts)
                self._cyclone.unregister_instance(key, ts)
                self._forget(instance)
        self._sent()

    def _sent(self, started: int | None = None) -> None:
        """After a write, dispose or unregister (``started``: when it began, monotonic
        ns; None: now): have a batching writer send it in time."""
        if self._batch is not None:
            self._batch.written(started)

    def flush(self) -> None:
        """Send what this writer has batched at once (nothing to do without batching)."""
        self._check_open()
        if self._batch is not None:
            rc = self._batch.flush()
            if rc < 0:
                raise error_for(rc, f"flush {self._describe()}")

    def _forget(self, instance: T | int) -> None:
        """Stop tracking an instance that is no longer alive through this writer."""
        if self._live is None:
            return
        sample = self.key_value(instance) if isinstance(instance, int) else instance
        self._instances.forget(sample)

    def register_instance(self, sample: T) -> int:
        """Pre-register the instance of ``sample``; returns its handle."""
        self._checked_key(sample)
        with cyclone_call(f"register_instance on {self._describe()}"):
            return int(self._cyclone.register_instance(sample))

    def lookup_instance(self, sample: T) -> int | None:
        """The handle of ``sample``'s instance, or None if this writer does not know it."""
        self._checked_key(sample)
        with cyclone_call(f"lookup_instance on {self._describe()}"):
            handle = self._cyclone.lookup_instance(sample)
        return None if not handle else int(handle)

    def key_value(self, handle: int) -> T:
        """A sample whose key fields are those of instance ``handle``."""
        self._check_open()
        data = instance_key(self._ref, handle)
        if data is None:
            raise BadParameterError(f"{self._describe()} has no instance with handle {handle}")
        return self._type.deserialize_key(data)  # type: ignore[attr-defined,no-any-return]

    def _known_handle(self, handle: int) -> int:
        if instance_key(self._ref, handle) is None:
            raise PreconditionNotMetError(
                f"{self._describe()} has no registered instance with handle {handle}"
            )
        return handle

    def _checked_key(self, sample: T) -> T:
        self._check_open()
        if not isinstance(sample, self._type):
            idl.validate(sample, self._type)  # raises, naming both types
        idl.validate(sample, self._type)
        return sample

    def wait_for_acknowledgments(self, timeout: Timeout | None = None) -> None:
        """Block until all reliable readers acknowledged everything written so far.

        Raises :class:`DcpsTimeoutError` if that does not happen within ``timeout``.
        """
        self._check_open()
        if self._batch is not None:
            self._batch.flush()  # what is still queued cannot be acknowledged
        ok = wait_for_acks(self._ref, timeout_ns(timeout))
        if not ok:
            raise DcpsTimeoutError(
                f"{self._describe()}: not all samples were acknowledged within {timeout}"
            )

    def assert_liveliness(self) -> None:
        """Assert this writer is alive (for MANUAL_BY_TOPIC/PARTICIPANT liveliness)."""
        self._check_open()
        assert_liveliness(self._ref)

    # -- matching and statuses ----------------------------------------------
    @property
    def matched_subscriptions(self) -> list[int]:
        """Instance handles of the readers this writer currently matches."""
        self._check_open()
        with cyclone_call("get matched subscriptions"):
            return matched_subscriptions(self._ref)

    @property
    def matched_subscription_guids(self) -> list[str]:
        """GUIDs of the readers this writer currently matches (compare with ``reader.guid``)."""
        self._check_open()
        with cyclone_call("get matched subscription data"):
            return [
                str(self._cyclone.get_matched_subscription_data(h).key)
                for h in matched_subscriptions(self._ref)
            ]

    def wait_for_readers(self, count: int = 1, timeout: Timeout | None = 10.0) -> None:
        """Block until at least ``count`` readers are matched (discovery is asynchronous)."""
        wait_until(
            lambda: self.publication_matched_status.current_count >= count,
            timeout,
            f"{self._describe()} waiting for {count} matched reader(s)",
        )

    @property
    def publication_matched_status(self) -> st.PublicationMatchedStatus:
        """Readers matched so far and now (reading it resets the change counts)."""
        return self._status("get_publication_matched_status", st.PublicationMatchedStatus)

    @property
    def liveliness_lost_status(self) -> st.LivelinessLostStatus:
        """How often this writer failed to assert liveliness."""
        return self._status("get_liveliness_lost_status", st.LivelinessLostStatus)

    @property
    def offered_deadline_missed_status(self) -> st.OfferedDeadlineMissedStatus:
        """How often this writer missed its deadline for an instance."""
        return self._status("get_offered_deadline_missed_status", st.OfferedDeadlineMissedStatus)

    @property
    def offered_incompatible_qos_status(self) -> st.OfferedIncompatibleQosStatus:
        """Readers that requested a QoS this writer does not offer."""
        return self._status("get_offered_incompatible_qos_status", st.OfferedIncompatibleQosStatus)


show_as("dcps", DataWriter)
