"""DataReader: typed samples with their full SampleInfo, selected by state masks."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import queue
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Generic, TypeVar, cast

from cyclonedds.sub import DataReader as CycloneReader

import idl
import qos as q
from dcps import _status as st
from dcps._autopurge import AutoPurge
from dcps._condition import ReadCondition, WaitSet
from dcps._cyclone.binding import entity_ref, install_listener
from dcps._cyclone.calls import (
    STATUSINFO_DISPOSE,
    ReaderBuffer,
    instance_key,
    matched_publications,
    peek_infos,
    take_cdr,
)
from dcps._cyclone.qos_bridge import resolve_qos
from dcps._cyclone.retcode import cyclone_call, error_for
from dcps._gc import paused_gc
from dcps._history import DurableCache, HistoryFetch, durability_namespace
from dcps._listener import Listener, build_cyclone_listener, overrides
from dcps._participant import DomainParticipant
from dcps._publisher import Subscriber
from dcps._sample import (
    ANY_STATE,
    InstanceState,
    Sample,
    SampleState,
    ViewState,
    samples_from_rows,
    state_mask,
)
from dcps._subscription_keys import KeyedCache
from dcps._timeout import Timeout, timeout_ns, timeout_seconds
from dcps._topic import ContentFilteredTopic, Topic
from dcps._wait import wait_until
from dcps._watched import WatchedReader
from dcps.wire._durability import PageColumns
from idl._errors import AlreadyClosedError, BadParameterError, DcpsTimeoutError
from idl._public import show_as
from idl._struct import decoder

T = TypeVar("T")

#: Durability kinds whose history a durability service keeps (see dcps/_history.py).
_SERVICED = (q.DurabilityKind.TRANSIENT, q.DurabilityKind.PERSISTENT)

#: ``max_samples`` meaning "everything available": the DDS value, the one ``qos`` uses.
LENGTH_UNLIMITED = q.LENGTH_UNLIMITED

#: What one read/take moves at most, whatever ``max_samples`` says (an internal cap:
#: callers pass LENGTH_UNLIMITED or any positive count).
_MAX_PER_CALL = 1_000_000

#: Samples a SubscriptionKeys reader moves out of Cyclone per call.
_DRAIN_CHUNK = 256

#: A SubscriptionKeys reader that drains as data arrives does so every this many
#: arrivals (one take per sample would cost more than the samples' decoding).
_EAGER_DRAIN = 32


def _sample_count(max_samples: int) -> int:
    """How many samples one read/take may return: ``max_samples`` checked, with
    LENGTH_UNLIMITED (and anything above it) as the internal cap."""
    if max_samples == LENGTH_UNLIMITED:
        return _MAX_PER_CALL
    if not isinstance(max_samples, int) or max_samples < 1:
        raise BadParameterError(
            f"max_samples must be a positive count or LENGTH_UNLIMITED (-1), got {max_samples!r}"
        )
    return min(max_samples, _MAX_PER_CALL)


class _StateObserver:
    """Observes autopurge readers' instance states off Cyclone's listener thread.

    Cyclone runs listeners while some operations on the reader (setting its
    status mask, for a StatusCondition) wait for them with the reader locked;
    reading the reader from inside the listener would wait for that lock: a
    deadlock. So the listener only asks, and this thread runs the reader's
    ``observe`` callback.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self._pending: set[Callable[[], None]] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def request(self, observe: Callable[[], None]) -> None:
        """Call ``observe`` soon on this thread (once, however often asked meanwhile)."""
        with self._lock:
            if observe in self._pending:
                return
            self._pending.add(observe)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dcps-autopurge-observer", daemon=True
                )
                self._thread.start()
        self._queue.put(observe)

    def _run(self) -> None:
        while True:
            observe = self._queue.get()
            with self._lock:
                self._pending.discard(observe)
            try:
                observe()
            except Exception:
                logging.getLogger("dcps").exception("observing instance states failed")


_state_observer = _StateObserver()


def _ordered(samples: list[Sample[T]], order: Callable[[Any], Any] | None) -> list[Sample[T]]:
    """Apply a query condition's ORDER BY, if it has one (valid samples by the key, stable)."""
    if order is None:
        return samples
    return sorted(samples, key=lambda s: order(s.data) if s.valid_data else ())


class DataReader(WatchedReader, Generic[T]):
    """Receives samples of one topic.

    ``read`` leaves samples in the reader (marked READ); ``take`` removes them.
    Both return :class:`Sample` objects: ``sample.data`` and ``sample.info``.
    ``async for sample in reader`` takes samples as they arrive.
    """

    _qos: q.DataReaderQos

    def __init__(
        self,
        subscriber: Subscriber | DomainParticipant,
        topic: Topic[T] | ContentFilteredTopic[T],
        *,
        qos: q.DataReaderQos | None = None,
        listener: Listener | None = None,
    ) -> None:
        if not isinstance(subscriber, Subscriber | DomainParticipant):
            raise BadParameterError(
                f"a DataReader is created on a Subscriber or DomainParticipant, "
                f"got {type(subscriber).__name__}"
            )
        if not isinstance(topic, Topic | ContentFilteredTopic):
            raise BadParameterError(f"a DataReader needs a Topic, got {type(topic).__name__}")
        participant = (
            subscriber if isinstance(subscriber, DomainParticipant) else subscriber.participant
        )
        if topic.participant is not participant:
            raise BadParameterError("the topic and the subscriber belong to different participants")
        if topic.closed:
            raise AlreadyClosedError(f"the topic {topic.name!r} is closed")
        checked_qos = resolve_qos(qos, q.DataReaderQos, "DataReader")
        # Created on a participant: the subscriber is our own, closed with us.
        self._own_subscriber: Subscriber | None = (
            Subscriber(participant) if isinstance(subscriber, DomainParticipant) else None
        )
        subscriber = self._own_subscriber or cast(Subscriber, subscriber)
        super().__init__(subscriber)
        self._subscriber = subscriber
        self._topic = topic
        self._type = topic.data_type
        self._decode = decoder(topic.data_type)
        self._qos = checked_qos
        self._listener = listener
        self._wakeups: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self._wakeup_lock = threading.Lock()
        self._autopurge = AutoPurge(checked_qos[q.ReaderDataLifecycle])
        self._buffer = ReaderBuffer()
        # With SubscriptionKeys, dcps keeps the instances (Cyclone has no such policy);
        # TRANSIENT/PERSISTENT readers too: they merge a durability service's history.
        self._durable = checked_qos[q.Durability].kind in _SERVICED
        self._keyed: KeyedCache[T] | None = (
            DurableCache(topic.data_type, checked_qos)
            if self._durable
            else KeyedCache(topic.data_type, checked_qos)
            if checked_qos[q.SubscriptionKeys].use_key_list
            else None
        )
        self._history: HistoryFetch | None = None
        self._guids: dict[int, bytes] = {}
        # A keyed reader with its own bounds (KEEP_LAST, resource limits) moves
        # samples out of Cyclone (KEEP_ALL, unlimited) as they arrive, every
        # _EAGER_DRAIN of them, so what Cyclone holds between reads stays small
        # and rejections are reported soon. Correctness does not depend on it:
        # every access drains first. Without bounds, Cyclone holding samples
        # until the next access costs the same memory as dcps holding them, and
        # a Python listener per sample costs CPU (see benchmarks/README.md).
        self._drains_eagerly = self._keyed is not None and self._keyed.bounded
        self._arrived = 0  # data-available notifications since the last drain
        # DATA_AVAILABLE as DDS defines it, for StatusConditions, wherever Cyclone's
        # own cannot serve: on a SubscriptionKeys reader (set when a drain files
        # samples) and while dcps' data listener consumes Cyclone's (set by the
        # listener); reset by read/take. _status_lock orders a plain reader's
        # updates from Cyclone's thread and the application's.
        self._data_available = False
        self._status_lock = threading.RLock()
        try:
            with cyclone_call(f"create DataReader on topic {topic.name!r}"):
                self._cyclone: Any = self._create_cyclone(subscriber.handle)
                self._ref = entity_ref(self._cyclone)  # what the ctypes read/take calls take
        except BaseException:
            if self._own_subscriber is not None:
                self._own_subscriber.close()
            raise
        self._adopted()
        if self._durable:
            related = topic.related_topic if isinstance(topic, ContentFilteredTopic) else topic
            self._history = HistoryFetch(
                participant.domain_id,
                participant.network,
                related.name,
                subscriber.partitions,
                self._file_history,
                self._history_done,
            )

    # -- TRANSIENT/PERSISTENT history (dcps/_history.py) ---------------------------
    def _guid(self, handle: int) -> bytes:
        """The GUID of matched writer ``handle`` (cached: handles are not reused)."""
        found = self._guids.get(handle)
        if found is None:
            data = self._cyclone.get_matched_publication_data(handle)
            found = data.key.bytes if data is not None else handle.to_bytes(16, "big")
            self._guids[handle] = found
        return found

    def _live_writers(self) -> set[bytes]:
        """The GUIDs of the writers matched now."""
        return {self._guid(h) for h in matched_publications(self._ref)}

    def _file_history(self, page: PageColumns, late: bool) -> None:
        """File a page of stored history (the history client's thread); ``late``: after
        live data flowed (see ``DurableCache.file_history``)."""
        keyed = self._keyed
        assert isinstance(keyed, DurableCache)
        with self._lock:
            if self.closed:
                return
            live = self._live_writers()
        with keyed.lock:
            added = keyed.file_history(page, self._decode, live, late=late)
            if added:
                self._data_available = True
                self._refresh_conditions()
        if added:
            self._wake()

    def _history_done(self) -> None:
        """History is filed (or no service answered): live samples may flow now."""
        with self._lock:
            if self.closed:
                return
        self._drain()
        self._wake()

    def _create_cyclone(self, cyclone_subscriber: Any) -> Any:
        cyclone_qos = self._qos
        if self._keyed is not None:
            # dcps applies history and limits per reader instance; Cyclone keeps all
            cyclone_qos = cyclone_qos.with_(q.History.KEEP_ALL, q.ResourceLimits())
        return CycloneReader(
            cyclone_subscriber,
            self._topic.handle,
            qos=q.to_cyclone(cyclone_qos),
            listener=self._cyclone_listener(),
        )

    def _follow(self, parent_handle: Any) -> None:
        """Move onto a re-created Cyclone subscriber (its partitions changed)."""
        with cyclone_call(f"re-create {self._describe()} for new partitions"):
            new = self._create_cyclone(parent_handle)
        old, self._cyclone = self._cyclone, new
        self._ref = entity_ref(new)
        self._rebind_children(new)  # the conditions
        old.__del__()

    def _describe(self) -> str:
        return f"DataReader({self._topic.name!r})"

    def _needs_data_hook(self) -> bool:
        """Whether dcps itself must hear of every arriving sample (else no Python runs then)."""
        return self._drains_eagerly or self._autopurge.active or bool(self._wakeups)

    def _cyclone_listener(self) -> Any:
        # A Python on_data_available runs on Cyclone's receive thread for every
        # sample and must take the GIL: install it only while something needs it.
        hook = None
        if self._needs_data_hook():
            # decided with the listener it goes with: set_listener swaps both together
            user_hears = self._listener is not None and overrides(
                self._listener, "on_data_available"
            )
            hook = functools.partial(self._on_data, not user_hears)
        return build_cyclone_listener(self, self._listener, on_data_available=hook)

    def _update_listener(self) -> None:
        install_listener(self._cyclone, self._cyclone_listener())

    def _on_data(self, keeps_status: bool) -> None:
        """dcps' own data listener (Cyclone's thread). ``keeps_status``: no application
        listener takes DATA_AVAILABLE, so the reader keeps the status this consumed
        (when one does, DDS counts it as consumed: StatusConditions do not see it)."""
        try:
            if self._keyed is None and keeps_status:
                self._set_data_available(True)
            if self._keyed is not None:
                self._arrived += 1
                if self._arrived >= _EAGER_DRAIN or self._autopurge.active:
                    self._drain()
                if self._autopurge.active:
                    self._keyed.observe_purge(self._autopurge)
            elif self._autopurge.active:
                _state_observer.request(self._observe_states_if_open)
        finally:
            self._wake()  # asyncio waiters, whatever happened above

    def _set_data_available(self, value: bool) -> None:
        """A plain reader's own DATA_AVAILABLE (see ``_data_available``)."""
        with self._status_lock:
            if self._data_available is not value:
                self._data_available = value
                self._refresh_conditions()

    def _observe_states_if_open(self) -> None:
        """``_observe_states`` on the observer thread, unless the reader closed meanwhile."""
        with self._lock:  # close() holds it while it deletes the Cyclone reader
            if not self.closed:
                self._observe_states()

    def _observe_states(self) -> None:
        infos = peek_infos(self._ref, ANY_STATE, _MAX_PER_CALL)
        self._autopurge.observe({row[5]: InstanceState(row[2]) for row in infos})

    def _purge(self) -> None:
        """Apply ReaderDataLifecycle: drop samples of instances not alive for too long."""
        if self._keyed is not None:
            self._keyed.observe_purge(self._autopurge)
        else:
            self._observe_states()
        for handle in self._autopurge.due():
            if self._keyed is not None:
                self._keyed.purge(handle)
            else:
                self._buffer.take(self._ref, ANY_STATE, _MAX_PER_CALL, handle)

    def _drain(self) -> None:
        """Move everything Cyclone holds into the SubscriptionKeys cache."""
        keyed = self._keyed
        assert keyed is not None
        deserialize = self._decode
        if self._history is not None and not self._history.done.is_set():
            return  # live samples wait in Cyclone until the stored history is filed
        with keyed.lock:
            if self.closed:
                return
            self._arrived = 0
            added = False
            while True:
                raw = take_cdr(self._ref, ANY_STATE, _DRAIN_CHUNK)
                if isinstance(raw, int):
                    if self.closed:  # deleted under a listener callback
                        return
                    raise error_for(raw, f"take on {self._describe()}")
                if isinstance(keyed, DurableCache):
                    added |= keyed.file_live(raw, deserialize, self._guid, STATUSINFO_DISPOSE)
                    if len(raw) < _DRAIN_CHUNK:
                        if keyed.history_writers:
                            added |= keyed.writers_gone(self._live_writers())
                        break
                    continue
                batch = [
                    (deserialize(data), row[4], row[6], bool(status & STATUSINFO_DISPOSE))
                    for data, row, status in raw
                    if data is not None  # unregister, dispose without data, writer death
                ]
                added |= keyed.add_batch(batch)
                if len(raw) < _DRAIN_CHUNK:
                    break
            rejected = keyed.rejected_changed
            if added:
                self._data_available = True
            if added or rejected:
                self._refresh_conditions()
        if rejected:
            self._report_rejections()

    def _report_rejections(self) -> None:
        """Call the listener's ``on_sample_rejected`` for a keyed reader's rejections."""
        listener = self._listener
        if listener is None or not overrides(listener, "on_sample_rejected"):
            return
        assert self._keyed is not None
        status = self._keyed.rejected_status()
        self._refresh_conditions()
        try:
            listener.on_sample_rejected(self, status)
        except Exception:
            logging.getLogger("dcps.listener").exception("listener on_sample_rejected raised")

    def _conditions_lock(self) -> Any:  # WatchedReader
        """The lock under which the reader's own statuses and their guards change (the
        keyed cache's; Cyclone's listener thread takes it as well as the application)."""
        return self._keyed.lock if self._keyed is not None else self._status_lock

    def _refresh_conditions(self) -> None:
        """Bring the triggers of conditions that dcps keeps up to date with the reader."""
        with self._conditions_lock():
            for child in list(self._children):
                refresh = getattr(child, "_refresh", None)
                if refresh is not None:
                    refresh()

    def _on_close(self) -> None:
        if self._history is not None:
            self._history.close()
        self._wake()
        if self._own_subscriber is not None:
            self._leave_parent()  # our implicit subscriber closes after we are gone
            for child in list(self._children):
                child.close()
            self._cyclone.__del__()
            self._own_subscriber.close()

    # -- properties ----------------------------------------------------------
    @property
    def topic(self) -> Topic[T] | ContentFilteredTopic[T]:
        """The topic (or content-filtered topic) this reader subscribes to."""
        return self._topic

    @property
    def subscriber(self) -> Subscriber:
        """The subscriber this reader belongs to."""
        return self._subscriber

    @property
    def qos(self) -> q.DataReaderQos:
        """The reader's current QoS."""
        return self._qos

    def set_listener(self, listener: Listener | None) -> None:
        """Replace this reader's listener (``None`` removes it)."""
        self._check_open()
        self._listener = listener
        install_listener(self._cyclone, self._cyclone_listener())

    # -- read / take ---------------------------------------------------------
    def read(
        self,
        max_samples: int = LENGTH_UNLIMITED,
        *,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
        instance: int | None = None,
        condition: ReadCondition | None = None,
    ) -> list[Sample[T]]:
        """Samples matching the states (or ``condition``), left in the reader and marked READ.

        ``instance`` restricts the result to one instance handle.
        """
        return self._access(
            False, max_samples, sample_states, view_states, instance_states, instance, condition
        )

    def take(
        self,
        max_samples: int = LENGTH_UNLIMITED,
        *,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
        instance: int | None = None,
        condition: ReadCondition | None = None,
    ) -> list[Sample[T]]:
        """Like :meth:`read`, but removes the returned samples from the reader."""
        return self._access(
            True, max_samples, sample_states, view_states, instance_states, instance, condition
        )

    def read_next_instance(
        self,
        previous: int | None = None,
        max_samples: int = LENGTH_UNLIMITED,
        *,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
    ) -> list[Sample[T]]:
        """Samples of the instance with the smallest handle greater than ``previous``
        that has matching samples (``None`` starts at the beginning); ``[]`` at the end."""
        return self._next_instance(
            False, previous, max_samples, sample_states, view_states, instance_states
        )

    def take_next_instance(
        self,
        previous: int | None = None,
        max_samples: int = LENGTH_UNLIMITED,
        *,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
    ) -> list[Sample[T]]:
        """Like :meth:`read_next_instance`, but takes the samples."""
        return self._next_instance(
            True, previous, max_samples, sample_states, view_states, instance_states
        )

    def instances(
        self,
        *,
        take: bool = False,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
    ) -> Iterator[list[Sample[T]]]:
        """Iterate instance by instance (in handle order), yielding each one's samples."""
        previous: int | None = None
        while True:
            batch = self._next_instance(
                take, previous, LENGTH_UNLIMITED, sample_states, view_states, instance_states
            )
            if not batch:
                return
            previous = batch[0].info.instance_handle
            yield batch

    def _next_instance(
        self,
        take: bool,
        previous: int | None,
        max_samples: int,
        sample_states: SampleState,
        view_states: ViewState,
        instance_states: InstanceState,
    ) -> list[Sample[T]]:
        self._check_open()
        max_samples = _sample_count(max_samples)
        mask = state_mask(sample_states, view_states, instance_states)
        if self._autopurge.active:
            self._purge()
        if self._keyed is not None:
            self._drain()
            with self._keyed.lock:  # as in _access
                out = self._keyed.access(take, max_samples, mask, after_handle=previous or 0)
                self._data_available = False
                self._refresh_conditions()
            return out
        floor = -1 if previous is None else previous
        handles = {row[5] for row in peek_infos(self._ref, mask, _MAX_PER_CALL)}
        later = [h for h in handles if h > floor]
        if not later:
            return []
        return self._access(
            take, max_samples, sample_states, view_states, instance_states, min(later), None
        )

    def _access(
        self,
        take: bool,
        max_samples: int,
        sample_states: SampleState,
        view_states: ViewState,
        instance_states: InstanceState,
        instance: int | None,
        condition: ReadCondition | None,
    ) -> list[Sample[T]]:
        self._check_open()
        max_samples = _sample_count(max_samples)
        predicate = order = None
        if condition is not None:
            selection = condition.selection  # AlreadyClosedError once closed
            if selection.reader is not self:
                raise BadParameterError("the condition belongs to another reader")
            ref, mask = selection.ref, selection.mask
            predicate, order = selection.predicate, selection.order
        if self._autopurge.active:
            self._purge()
        if self._keyed is not None:
            self._drain()
            if condition is None:
                mask = state_mask(sample_states, view_states, instance_states)
            # a drain on Cyclone's thread must not slip in between; a take of many
            # samples builds two tuples per sample (dcps/_gc.py)
            with self._keyed.lock, paused_gc():
                kept = self._keyed.access(take, max_samples, mask, instance, predicate)
                self._data_available = False
                self._refresh_conditions()
            return _ordered(kept, order)
        if condition is None:
            ref, mask = self._ref, state_mask(sample_states, view_states, instance_states)
        if self._data_available:  # reset before the access: what arrives during it sets it again
            self._set_data_available(False)
        raw = (self._buffer.take if take else self._buffer.read)(ref, mask, max_samples, instance)
        if isinstance(raw, int):
            action = "take" if take else "read"
            if instance is not None and raw in (-3, -4):  # Cyclone says either
                raise BadParameterError(
                    f"{self._describe()} has no instance with handle {instance}"
                )
            raise error_for(raw, f"{action} on {self._describe()}")
        out = samples_from_rows(raw, self._decode, self._type.deserialize_key)  # type: ignore[attr-defined]
        return _ordered(out, order)

    # -- instances -----------------------------------------------------------
    def lookup_instance(self, sample: T) -> int | None:
        """The handle of the instance with ``sample``'s key, or None if the reader has none."""
        self._check_open()
        if not isinstance(sample, self._type):
            idl.validate(sample, self._type)  # raises, naming both types
        if self._keyed is not None:
            self._drain()
            return self._keyed.lookup(sample)
        with cyclone_call(f"lookup_instance on {self._describe()}"):
            handle = self._cyclone.lookup_instance(sample)
        return None if not handle else int(handle)

    def key_value(self, handle: int) -> T:
        """A sample whose key fields are those of instance ``handle``."""
        self._check_open()
        if self._keyed is not None:
            return self._keyed.key_value(handle)
        data = instance_key(self._ref, handle)
        if data is None:
            raise BadParameterError(f"{self._describe()} has no instance with handle {handle}")
        return self._type.deserialize_key(data)  # type: ignore[attr-defined,no-any-return]

    # -- waiting -------------------------------------------------------------
    def wait_for_historical_data(self, timeout: Timeout | None = 10.0) -> None:
        """Block until historical data has arrived: the history of matched TRANSIENT_LOCAL
        (and stronger) writers and, for a TRANSIENT/PERSISTENT reader, what the
        durability services keep. :class:`DcpsTimeoutError` if it did not arrive within
        ``timeout`` (for a TRANSIENT/PERSISTENT reader: also when no durability service
        answered)."""
        self._check_open()
        history = self._history
        if history is not None:
            seconds = timeout_seconds(timeout)
            if not history.wait(seconds):
                raise DcpsTimeoutError(
                    f"{self._describe()}: no durability service (namespace "
                    f"{durability_namespace()!r}) served the history of "
                    f"{history.topic!r} within {timeout}"
                )
        with cyclone_call("wait for historical data"):
            ok = self._cyclone.wait_for_historical_data(timeout_ns(timeout))
        if not ok:
            raise DcpsTimeoutError(f"historical data did not arrive within {timeout}")

    def wait_for_writers(self, count: int = 1, timeout: Timeout | None = 10.0) -> None:
        """Block until at least ``count`` writers are matched."""
        wait_until(
            lambda: self.subscription_matched_status.current_count >= count,
            timeout,
            f"{self._describe()} waiting for {count} matched writer(s)",
        )

    def wait_for_data(self, timeout: Timeout | None = 10.0) -> None:
        """Block until the reader holds an unread sample."""
        self._check_open()
        participant = self._topic.participant
        with (
            ReadCondition(self, sample_states=SampleState.NOT_READ) as cond,
            WaitSet(participant) as ws,
        ):
            ws.attach(cond)
            ws.wait(timeout)

    # -- asyncio -------------------------------------------------------------
    def _wake(self) -> None:
        with self._wakeup_lock:
            wakeups = list(self._wakeups)
        for loop, event in wakeups:
            with contextlib.suppress(RuntimeError):  # a closed loop: its iterator is gone
                loop.call_soon_threadsafe(event.set)

    async def atake(self, max_samples: int = LENGTH_UNLIMITED) -> list[Sample[T]]:
        """Wait (without blocking the event loop) for unread samples, then take them."""
        async for batch in self._batches(max_samples):
            return batch
        return []

    def __aiter__(self) -> AsyncIterator[Sample[T]]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[Sample[T]]:
        async for batch in self._batches(LENGTH_UNLIMITED):
            for sample in batch:
                yield sample

    async def _batches(self, max_samples: int) -> AsyncIterator[list[Sample[T]]]:
        # One data-available listener per reader wakes every waiting coroutine:
        # no thread per call, no polling.
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        entry = (loop, event)
        with self._wakeup_lock:
            self._wakeups.append(entry)
            first = len(self._wakeups) == 1
        if first:
            self._update_listener()  # before the first take, so no sample slips by
        try:
            while not self.closed:
                event.clear()
                batch = self.take(max_samples, sample_states=SampleState.NOT_READ)
                if batch:
                    yield batch
                    continue
                await event.wait()
        finally:
            with self._wakeup_lock:
                self._wakeups.remove(entry)
                last = not self._wakeups
            if last and not self.closed:
                self._update_listener()

    # -- matching and statuses ----------------------------------------------
    @property
    def matched_publications(self) -> list[int]:
        """Instance handles of the writers this reader currently matches."""
        self._check_open()
        with cyclone_call("get matched publications"):
            return matched_publications(self._ref)

    @property
    def matched_publication_guids(self) -> list[str]:
        """GUIDs of the writers this reader currently matches (compare with ``writer.guid``)."""
        self._check_open()
        with cyclone_call("get matched publication data"):
            return [
                str(self._cyclone.get_matched_publication_data(h).key)
                for h in matched_publications(self._ref)
            ]

    @property
    def subscription_matched_status(self) -> st.SubscriptionMatchedStatus:
        """Writers matched so far and now (reading it resets the change counts)."""
        return self._status("get_subscription_matched_status", st.SubscriptionMatchedStatus)

    @property
    def liveliness_changed_status(self) -> st.LivelinessChangedStatus:
        """How many matched writers are alive and not alive."""
        return self._status("get_liveliness_changed_status", st.LivelinessChangedStatus)

    @property
    def requested_deadline_missed_status(self) -> st.RequestedDeadlineMissedStatus:
        """How often an instance was not updated within the deadline."""
        return self._status(
            "get_requested_deadline_missed_status", st.RequestedDeadlineMissedStatus
        )

    @property
    def requested_incompatible_qos_status(self) -> st.RequestedIncompatibleQosStatus:
        """Writers whose offered QoS this reader could not accept."""
        return self._status(
            "get_requested_incompatible_qos_status", st.RequestedIncompatibleQosStatus
        )

    @property
    def sample_lost_status(self) -> st.SampleLostStatus:
        """Samples lost on their way to this reader."""
        return self._status("get_sample_lost_status", st.SampleLostStatus)

    @property
    def sample_rejected_status(self) -> st.SampleRejectedStatus:
        """Samples rejected by this reader's resource limits.

        On a SubscriptionKeys reader, dcps applies the limits per reader instance
        after taking the sample from Cyclone: a rejected sample is not sent again.
        """
        if self._keyed is not None:
            self._check_open()
            self._drain()
            status = self._keyed.rejected_status()
            self._refresh_conditions()
            return status
        return self._status("get_sample_rejected_status", st.SampleRejectedStatus)


show_as("dcps", DataReader)
