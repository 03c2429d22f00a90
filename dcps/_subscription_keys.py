"""The reader-side instance administration behind the SubscriptionKeys policy.

Cyclone DDS keys a reader's instances by the topic's keys and has no
SubscriptionKeys (an OpenSplice extension). A reader with that policy
therefore drains its Cyclone reader as data arrives and keeps its own
instances, keyed by the reader's key list, with OpenSplice's rules:

- one writer instance can feed several reader instances and vice versa;
- taking all samples of a reader instance removes it: the next sample with
  the same keys starts a NEW instance;
- invalid samples (unregister, dispose without data, a writer's death) are
  skipped, so instances stay ALIVE;
- a ``write_dispose`` (a full, valid sample) disposes the reader instance; a
  later valid sample revives it (NEW, disposed generation count + 1).

Cyclone reports per sample only the instance state at the time it is taken,
so a valid sample is taken for a ``write_dispose`` when its topic instance is
disposed and no later sample of that topic instance revived it. dcps drains
on every data-available notification, so a plain ``dispose`` that arrives
while the previous sample of that topic instance is still undrained would be
read as a ``write_dispose`` of that sample: a narrow race Cyclone's API gives
no way to close.

Samples taken from Cyclone together are filed in source-timestamp order
(Cyclone hands them over grouped by topic instance, not in arrival order).

History (KEEP_LAST depth, or KEEP_ALL) and ResourceLimits apply per reader
instance; samples beyond the limits are dropped oldest-first (KEEP_LAST) or
rejected (KEEP_ALL, counted in ``rejected``).
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

import attrs

import idl
import qos as q
from dcps._sample import InstanceState, Sample, SampleInfo, SampleState, ViewState
from idl._errors import BadParameterError

T = TypeVar("T")

_KEYABLE = {"int", "uint", "float", "bool", "char", "octet", "string", "enum"}


def check_key_list(data_type: type, key_list: Iterable[str]) -> Callable[[Any], Any]:
    """Check each reader key against the type; return a function giving a sample's key."""
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
    getter = operator.attrgetter(*paths)
    return getter if len(paths) > 1 else (lambda sample: (getter(sample),))


@attrs.define
class _Entry(Generic[T]):
    data: T
    source_timestamp_ns: int
    publication_handle: int
    disposed_generation_count: int
    read: bool = False


@attrs.define
class _Instance(Generic[T]):
    handle: int
    key: tuple[Any, ...]
    key_sample: T
    new: bool = True
    state: InstanceState = InstanceState.ALIVE
    disposed_generation_count: int = 0
    entries: list[_Entry[T]] = attrs.field(factory=list)


class KeyedCache(Generic[T]):
    """A reader's samples, grouped into instances by the reader's own key list."""

    def __init__(self, data_type: type[T], reader_qos: q.DataReaderQos) -> None:
        self._key_of = check_key_list(data_type, reader_qos[q.SubscriptionKeys].key_list)
        history = reader_qos[q.History]
        limits = reader_qos[q.ResourceLimits]
        self._depth = history.depth if history.kind is q.HistoryKind.KEEP_LAST else None
        self._max_per_instance = _limit(limits.max_samples_per_instance)
        self._max_instances = _limit(limits.max_instances)
        self._max_samples = _limit(limits.max_samples)
        self._instances: dict[tuple[Any, ...], _Instance[T]] = {}
        self._by_handle: dict[int, _Instance[T]] = {}
        self._next_handle = 1
        self._count = 0
        self.rejected = 0
        self.lock = threading.RLock()

    # -- arrival ------------------------------------------------------------
    def add_batch(self, batch: list[tuple[T, Any]]) -> bool:
        """File a batch taken from Cyclone (data, SampleInfo); True if anything was added.

        Cyclone returns a batch grouped by topic instance; one reader instance may
        gather several of those, so the batch is filed in source-timestamp order
        (stable: a writer's own samples keep their order).
        """
        batch = sorted(batch, key=lambda item: item[1].source_timestamp_ns)
        last_valid: dict[int, int] = {}
        for index, (_, info) in enumerate(batch):
            if info.valid_data:
                last_valid[info.instance_handle] = index
        added = False
        with self.lock:
            for index, (data, info) in enumerate(batch):
                if not info.valid_data:
                    continue  # unregister, dispose without data, writer death: skipped
                disposes = (
                    last_valid[info.instance_handle] == index
                    and info.instance_state == InstanceState.NOT_ALIVE_DISPOSED
                )
                added |= self._add(data, info, disposes)
        return added

    def _add(self, data: T, info: Any, disposes: bool) -> bool:
        key = self._key_of(data)
        instance = self._instances.get(key)
        if instance is None:
            if self._max_instances is not None and len(self._instances) >= self._max_instances:
                self.rejected += 1
                return False
            instance = _Instance(self._next_handle, key, data)
            self._next_handle += 1
            self._instances[key] = instance
            self._by_handle[instance.handle] = instance
        elif instance.state is InstanceState.NOT_ALIVE_DISPOSED:
            instance.state = InstanceState.ALIVE  # reborn: a new generation, NEW again
            instance.disposed_generation_count += 1
            instance.new = True
        entries = instance.entries
        if self._depth is not None and len(entries) >= self._depth:
            self._drop_oldest(instance)
        elif (self._max_per_instance is not None and len(entries) >= self._max_per_instance) or (
            self._max_samples is not None and self._count >= self._max_samples
        ):
            self.rejected += 1
            if not entries:
                self._remove(instance)
            return False
        entries.append(
            _Entry(
                data,
                info.source_timestamp_ns,
                info.publication_handle,
                instance.disposed_generation_count,
            )
        )
        self._count += 1
        instance.key_sample = data
        if disposes:
            instance.state = InstanceState.NOT_ALIVE_DISPOSED
        return True

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
        with self.lock:
            if instance_handle is not None:
                found = self._by_handle.get(instance_handle)
                if found is None:
                    raise BadParameterError(f"no instance with handle {instance_handle}")
                candidates = [found]
            else:
                candidates = sorted(self._by_handle.values(), key=lambda i: i.handle)
                if after_handle is not None:
                    candidates = [i for i in candidates if i.handle > after_handle]
            out: list[Sample[T]] = []
            for instance in candidates:
                if len(out) >= max_samples:
                    break
                if not (_view(instance) & mask and int(instance.state) & mask):
                    continue
                chosen = [
                    e
                    for e in instance.entries
                    if (SampleState.READ if e.read else SampleState.NOT_READ) & mask
                    and (predicate is None or predicate(e.data))
                ]
                chosen = chosen[: max_samples - len(out)]
                if not chosen:
                    continue
                out += self._infos(instance, chosen)
                instance.new = False
                if take:
                    kept = [e for e in instance.entries if not any(e is c for c in chosen)]
                    self._count -= len(instance.entries) - len(kept)
                    instance.entries = kept
                    if not kept:
                        self._remove(instance)  # taking everything removes the instance
                else:
                    for entry in chosen:
                        entry.read = True
                if after_handle is not None:
                    break
            return out

    def _infos(self, instance: _Instance[T], chosen: list[_Entry[T]]) -> list[Sample[T]]:
        view = _view(instance)
        latest = chosen[-1].disposed_generation_count
        now = instance.disposed_generation_count
        n = len(chosen)
        return [
            Sample(
                e.data,
                SampleInfo(
                    SampleState.READ if e.read else SampleState.NOT_READ,
                    view,
                    instance.state,
                    True,
                    e.source_timestamp_ns,
                    instance.handle,
                    e.publication_handle,
                    e.disposed_generation_count,
                    0,
                    n - 1 - i,
                    latest - e.disposed_generation_count,
                    now - e.disposed_generation_count,
                ),
            )
            for i, e in enumerate(chosen)
        ]

    def matches(self, mask: int, predicate: Callable[[T], bool] | None = None) -> bool:
        """Whether any sample matches (for conditions)."""
        with self.lock:
            for instance in self._instances.values():
                if not (_view(instance) & mask and int(instance.state) & mask):
                    continue
                for e in instance.entries:
                    state = SampleState.READ if e.read else SampleState.NOT_READ
                    if state & mask and (predicate is None or predicate(e.data)):
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
            return sorted(self._by_handle)


def _view(instance: _Instance[Any]) -> ViewState:
    return ViewState.NEW if instance.new else ViewState.NOT_NEW


def _limit(value: int) -> int | None:
    return None if value is None or value < 0 or value == q.LENGTH_UNLIMITED else value
