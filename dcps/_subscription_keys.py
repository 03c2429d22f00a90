"""The reader-side instance administration behind the SubscriptionKeys policy.

Cyclone DDS keys a reader's instances by the topic's keys and has no
SubscriptionKeys (an OpenSplice extension). A reader with that policy
therefore takes everything from its Cyclone reader before every access (and,
if its history or resource limits bound what it keeps, as data arrives) and
keeps its own instances, keyed by the reader's key list, with OpenSplice's
rules:

- one writer instance can feed several reader instances and vice versa;
- taking all samples of a reader instance removes it: the next sample with
  the same keys starts a NEW instance;
- invalid samples (unregister, dispose without data, a writer's death) are
  skipped, so instances stay ALIVE;
- a ``write_dispose`` (a full, valid sample) disposes the reader instance; a
  later valid sample revives it (NEW, disposed generation count + 1).

Whether a valid sample is a ``write_dispose`` is read from the sample itself
(the DISPOSE bit of its DDSI status info, see ``dcps._cyclone.calls.take_cdr``), never
from the instance state Cyclone reports at take time: Cyclone folds a later
dispose or unregister without data into the state of an unread sample, and
that must not dispose the reader instance.

Samples taken from Cyclone together are filed in source-timestamp order
(Cyclone hands them over grouped by topic instance, not in arrival order).

History (KEEP_LAST depth, or KEEP_ALL) and ResourceLimits apply per reader
instance; samples beyond the limits are dropped oldest-first (KEEP_LAST) or
rejected (KEEP_ALL). Rejections are reported like a plain reader's, through
``sample_rejected_status``, ``on_sample_rejected`` and StatusConditions
(dcps keeps DATA_AVAILABLE and SAMPLE_REJECTED of these readers itself, as
Cyclone's reset when dcps takes the samples); unlike a plain reader,
a rejected sample is lost for good (dcps already took it from Cyclone, so
reliability does not send it again).
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable
from itertools import repeat
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import attrs

import idl
import qos as q
from dcps._sample import InstanceState, Sample, SampleInfo, SampleState, ViewState
from dcps._status import SampleRejectedReason, SampleRejectedStatus
from idl._errors import BadParameterError

T = TypeVar("T")

_KEYABLE = {"int", "uint", "float", "bool", "char", "octet", "string", "enum"}


def check_key_list(data_type: type, key_list: Iterable[str]) -> Callable[[Any], Any]:
    """Check each reader key against the type; return a function giving a sample's key:
    the field's value for one key, a tuple of values for several (``attrgetter``, in C)."""
    paths = tuple(key_list)
    for path in paths:
        try:
            field = idl.field_at(data_type, path)
        except idl.IdlError as exc:
            raise BadParameterError(
                f"SubscriptionKeys: {path!r} is not a field of {idl.describe(data_type).typename}"
            ) from exc
        if field.kind not in _KEYABLE:
            raise BadParameterError(
                f"SubscriptionKeys: {path!r} is a {field.kind}; only primitive, string "
                "and enum fields can be keys"
            )
    return operator.attrgetter(*paths)


class _Entry(list[Any], Generic[T]):
    """One filed sample: ``[data, timestamp, publication_handle, disposed_generation_count,
    read, no_writers_generation_count]``. A list, so that filing (once per arriving
    sample) builds it in C; only ``read`` ever changes. Compared by identity where it
    matters (``id``)."""

    __slots__ = ()

    if TYPE_CHECKING:

        @property
        def data(self) -> T: ...
        @property
        def timestamp(self) -> int: ...
        @property
        def publication_handle(self) -> int: ...
        @property
        def disposed_generation_count(self) -> int: ...
        @property
        def read(self) -> bool: ...
        @read.setter
        def read(self, value: bool) -> None: ...
        @property
        def no_writers_generation_count(self) -> int: ...

    else:
        data = property(operator.itemgetter(0))
        timestamp = property(operator.itemgetter(1))
        publication_handle = property(operator.itemgetter(2))
        disposed_generation_count = property(operator.itemgetter(3))
        read = property(operator.itemgetter(4), lambda self, value: self.__setitem__(4, value))
        no_writers_generation_count = property(operator.itemgetter(5))


@attrs.define
class _Instance(Generic[T]):
    handle: int
    key: Any  # what check_key_list's function returns
    key_sample: T
    new: bool = True
    state: InstanceState = InstanceState.ALIVE
    disposed_generation_count: int = 0
    no_writers_generation_count: int = 0
    entries: list[_Entry[T]] = attrs.field(factory=list)


#: A sample to file: (data, source timestamp ns, publication handle, is a write_dispose)
Arrival = tuple[T, int, int, bool]

_READ = int(SampleState.READ)
_NOT_READ = int(SampleState.NOT_READ)
_NEW = int(ViewState.NEW)
_NOT_NEW = int(ViewState.NOT_NEW)


class KeyedCache(Generic[T]):
    """A reader's samples, grouped into instances by the reader's own key list."""

    def __init__(
        self,
        data_type: type[T],
        reader_qos: q.DataReaderQos,
        key_of: Callable[[Any], Any] | None = None,
    ) -> None:
        # key_of: how a sample's instance key is found (default: the SubscriptionKeys list)
        self._key_of = (
            key_of
            if key_of is not None
            else check_key_list(data_type, reader_qos[q.SubscriptionKeys].key_list)
        )
        history = reader_qos[q.History]
        limits = reader_qos[q.ResourceLimits]
        self._depth = history.depth if history.kind is q.HistoryKind.KEEP_LAST else None
        self._max_per_instance = _limit(limits.max_samples_per_instance)
        self._max_instances = _limit(limits.max_instances)
        self._max_samples = _limit(limits.max_samples)
        #: Whether history or limits bound what the reader keeps (KEEP_ALL, no limits: no).
        self.bounded = not (
            self._depth is None
            and self._max_per_instance is None
            and self._max_instances is None
            and self._max_samples is None
        )
        self._instances: dict[Any, _Instance[T]] = {}
        # Handles only grow and a re-created instance gets a new one, so this
        # dict's insertion order is handle order.
        self._by_handle: dict[int, _Instance[T]] = {}
        self._next_handle = 1
        self._count = 0
        self.rejected = 0
        self._rejected_change = 0
        self._rejected_reason = SampleRejectedReason.NOT_REJECTED
        self._rejected_handle = 0
        self.lock = threading.RLock()

    # -- arrival ------------------------------------------------------------
    def add_batch(self, batch: list[Arrival[T]], keys: list[Any] | None = None) -> bool:
        """File valid samples taken from Cyclone together; True if anything was added.

        Cyclone returns a batch grouped by topic instance; one reader instance may
        gather several of those, so the batch is filed in source-timestamp order
        (stable: a writer's own samples keep their order). ``keys``: the reader
        keys of the batch's samples, when the caller has them (the batch is then
        filed in the order given: the caller sorted it).
        """
        if keys is None:
            batch.sort(key=_timestamp)
            keys = list(map(self._key_of, map(_data, batch)))
        added = False
        instances, unbounded = self._instances, not self.bounded
        alive = InstanceState.ALIVE
        with self.lock:
            for (data, timestamp, publication, disposes), key in zip(batch, keys, strict=True):
                instance = instances.get(key)
                if unbounded and instance is not None and instance.state is alive and not disposes:
                    # the common case, inline: a live instance, nothing to check
                    generation = instance.disposed_generation_count
                    instance.entries.append(
                        _Entry(
                            (
                                data,
                                timestamp,
                                publication,
                                generation,
                                False,
                                instance.no_writers_generation_count,
                            )
                        )
                    )
                    instance.key_sample = data
                    self._count += 1
                    added = True
                else:
                    added |= self._add(key, instance, data, timestamp, publication, disposes)
        return added

    def _add(
        self,
        key: Any,
        instance: _Instance[T] | None,
        data: T,
        timestamp: int,
        publication: int,
        disposes: bool,
    ) -> bool:
        if instance is None:
            if self._max_instances is not None and len(self._instances) >= self._max_instances:
                self._reject(SampleRejectedReason.REJECTED_BY_INSTANCES_LIMIT, 0)
                return False
            instance = _Instance(self._next_handle, key, data)
            self._next_handle += 1
            self._instances[key] = instance
            self._by_handle[instance.handle] = instance
        elif instance.state is InstanceState.NOT_ALIVE_DISPOSED:
            instance.state = InstanceState.ALIVE  # reborn: a new generation, NEW again
            instance.disposed_generation_count += 1
            instance.new = True
        elif instance.state is InstanceState.NOT_ALIVE_NO_WRITERS:
            instance.state = InstanceState.ALIVE  # a writer again: the next generation
            instance.no_writers_generation_count += 1
            instance.new = True
        entries = instance.entries
        if self._depth is not None and len(entries) >= self._depth:
            self._drop_oldest(instance)
        else:
            reason = None
            if self._max_per_instance is not None and len(entries) >= self._max_per_instance:
                reason = SampleRejectedReason.REJECTED_BY_SAMPLES_PER_INSTANCE_LIMIT
            elif self._max_samples is not None and self._count >= self._max_samples:
                reason = SampleRejectedReason.REJECTED_BY_SAMPLES_LIMIT
            if reason is not None:
                if not entries:
                    self._remove(instance)
                self._reject(reason, instance.handle if entries else 0)
                return False
        generation = instance.disposed_generation_count
        entries.append(
            _Entry(
                (
                    data,
                    timestamp,
                    publication,
                    generation,
                    False,
                    instance.no_writers_generation_count,
                )
            )
        )
        self._count += 1
        instance.key_sample = data
        if disposes:
            instance.state = InstanceState.NOT_ALIVE_DISPOSED
        return True

    def _reject(self, reason: SampleRejectedReason, handle: int) -> None:
        self.rejected += 1
        self._rejected_change += 1
        self._rejected_reason = reason
        self._rejected_handle = handle

    def rejected_status(self) -> SampleRejectedStatus:
        """Rejections so far (reading it resets the change count, as for a plain reader)."""
        with self.lock:
            status = SampleRejectedStatus(
                self.rejected, self._rejected_change, self._rejected_reason, self._rejected_handle
            )
            self._rejected_change = 0
            return status

    @property
    def rejected_changed(self) -> bool:
        """Whether samples were rejected since the status was last read."""
        return self._rejected_change > 0

    def _drop_oldest(self, instance: _Instance[T]) -> None:
        instance.entries.pop(0)
        self._count -= 1

    def _remove(self, instance: _Instance[T]) -> None:
        del self._instances[instance.key]
        del self._by_handle[instance.handle]

    # -- access -------------------------------------------------------------
    def access(
        self,
        take: bool,
        max_samples: int,
        mask: int,
        instance_handle: int | None = None,
        predicate: Callable[[T], bool] | None = None,
        after_handle: int | None = None,
    ) -> list[Sample[T]]:
        """read (or take) up to ``max_samples`` samples matching ``mask`` and ``predicate``.

        ``instance_handle`` limits to one instance; ``after_handle`` to the first
        instance with a larger handle that has matching samples.
        """
        mask = int(mask)
        want_read, want_unread = bool(mask & _READ), bool(mask & _NOT_READ)
        with self.lock:
            if instance_handle is not None:
                found = self._by_handle.get(instance_handle)
                if found is None:
                    raise BadParameterError(f"no instance with handle {instance_handle}")
                candidates = [found]
            elif after_handle is not None:
                candidates = [i for i in self._by_handle.values() if i.handle > after_handle]
            else:
                candidates = list(self._by_handle.values())
            out: list[Sample[T]] = []
            for instance in candidates:
                room = max_samples - len(out)
                if room <= 0:
                    break
                if not (mask & (_NEW if instance.new else _NOT_NEW) and mask & instance.state):
                    continue
                entries = instance.entries
                prefix = want_read and want_unread and predicate is None
                if prefix:
                    chosen = entries[:room]
                else:
                    chosen = [
                        e
                        for e in entries
                        if (want_read if e.read else want_unread)
                        and (predicate is None or predicate(e.data))
                    ][:room]
                if not chosen:
                    continue
                self._infos(instance, chosen, out)
                instance.new = False
                if take:
                    if len(chosen) == len(entries):
                        self._count -= len(entries)
                        instance.entries = []
                        self._remove(instance)  # taking everything removes the instance
                    elif prefix:
                        instance.entries = entries[len(chosen) :]
                        self._count -= len(chosen)
                    else:
                        gone = {id(e) for e in chosen}
                        instance.entries = [e for e in entries if id(e) not in gone]
                        self._count -= len(chosen)
                else:
                    for entry in chosen:
                        entry.read = True
                if after_handle is not None:
                    break
            return out

    def _infos(self, instance: _Instance[T], chosen: list[_Entry[T]], out: list[Sample[T]]) -> None:
        view = ViewState.NEW if instance.new else ViewState.NOT_NEW
        state = instance.state
        handle = instance.handle
        last = chosen[-1]
        latest = last.disposed_generation_count + last.no_writers_generation_count
        now = instance.disposed_generation_count + instance.no_writers_generation_count
        rank = len(chosen)
        read, not_read = SampleState.READ, SampleState.NOT_READ
        new = tuple.__new__  # Sample and SampleInfo are tuples
        first = chosen[0]
        if first[3] == last[3] and first[5] == last[5]:
            # The usual case (a late joiner takes 100 k's): one generation. Generations
            # never decrease along an instance's entries, so equal ends mean all are
            # equal, and every field but the state, timestamp, writer and rank is the
            # same: the infos are built by map/zip in C, not a Python loop per sample.
            disposed, no_writers = first[3], first[5]
            infos = map(
                new,
                repeat(SampleInfo),
                zip(
                    map({True: read, False: not_read}.__getitem__, map(_READ_FLAG, chosen)),
                    repeat(view),
                    repeat(state),
                    repeat(True),
                    map(_TIMESTAMP, chosen),
                    repeat(handle),
                    map(_PUBLICATION, chosen),
                    repeat(disposed),
                    repeat(no_writers),
                    range(rank - 1, -1, -1),
                    repeat(0),
                    repeat(now - disposed - no_writers),
                ),
            )
            out.extend(map(new, repeat(Sample), zip(map(_DATA, chosen), infos, strict=True)))
            return
        append = out.append
        # unpacked rather than read through the properties: a take runs this per sample
        for data, timestamp, publication, disposed, was_read, no_writers in chosen:
            rank -= 1
            generation = disposed + no_writers
            info = (
                read if was_read else not_read,
                view,
                state,
                True,
                timestamp,
                handle,
                publication,
                disposed,
                no_writers,
                rank,
                latest - generation,
                now - generation,
            )
            append(new(Sample, (data, new(SampleInfo, info))))

    def matches(self, mask: int, predicate: Callable[[T], bool] | None = None) -> bool:
        """Whether any sample matches (for conditions)."""
        mask = int(mask)
        want_read, want_unread = bool(mask & _READ), bool(mask & _NOT_READ)
        with self.lock:
            for instance in self._instances.values():
                if not (mask & (_NEW if instance.new else _NOT_NEW) and mask & instance.state):
                    continue
                for e in instance.entries:
                    if (want_read if e.read else want_unread) and (
                        predicate is None or predicate(e.data)
                    ):
                        return True
            return False

    def observe_purge(self, autopurge: Any) -> None:
        """Tell ``autopurge`` the state of every reader instance (disposed ones may be purged)."""
        with self.lock:
            autopurge.observe({i.handle: i.state for i in self._instances.values()})

    def purge(self, handle: int) -> None:
        """Drop instance ``handle`` and its samples (ReaderDataLifecycle autopurge)."""
        with self.lock:
            instance = self._by_handle.get(handle)
            if instance is not None:
                self._count -= len(instance.entries)
                self._remove(instance)

    def lookup(self, sample: T) -> int | None:
        """The handle of the reader instance with ``sample``'s reader keys."""
        with self.lock:
            instance = self._instances.get(self._key_of(sample))
            return None if instance is None else instance.handle

    def key_value(self, handle: int) -> T:
        """The latest sample of instance ``handle`` (its reader key fields are the key)."""
        with self.lock:
            instance = self._by_handle.get(handle)
            if instance is None:
                raise BadParameterError(f"no instance with handle {handle}")
            return instance.key_sample

    def handles(self) -> list[int]:
        """Handles of the instances the reader holds."""
        with self.lock:
            return list(self._by_handle)


def _timestamp(arrival: Arrival[Any]) -> int:
    return arrival[1]


_data = operator.itemgetter(0)
#: The fields of an ``_Entry``, read in C.
_DATA = operator.itemgetter(0)
_TIMESTAMP = operator.itemgetter(1)
_PUBLICATION = operator.itemgetter(2)
_READ_FLAG = operator.itemgetter(4)


def _limit(value: int) -> int | None:
    return None if value is None or value < 0 or value == q.LENGTH_UNLIMITED else value
