"""The instances a DataWriter has written and not yet disposed or unregistered.

dcps announces ``autodispose_unregistered_instances=False`` to Cyclone for every
writer: Cyclone's readers apply a lost writer's autodispose flag when its lease
expires, so a crashed writer would otherwise look like a deliberate dispose
(NOT_ALIVE_DISPOSED) where DDS says NOT_ALIVE_NO_WRITERS. When the user's QoS
has autodispose on, the writer disposes explicitly on ``unregister_instance``
and on ``close()``; for the latter it needs to know which instances are alive.

The write path pays one attribute read of the key fields and one dict lookup
per sample; a new instance costs a copy of its key values. ``close()`` rebuilds
a key holder for each remembered instance on a private copy of one written
sample (its non-key fields are never sent: a dispose carries the key only).
"""

from __future__ import annotations

import copy
import operator
import threading
from collections.abc import Callable, Iterator
from typing import Any

import idl


def _frozen(value: Any) -> Any:
    """A hashable stand-in for a key value (lists, arrays, structs become tuples)."""
    if isinstance(value, str | bytes | int | float | bool) or value is None:
        return value
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return _frozen(value.tolist())
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    try:
        hash(value)
    except TypeError:
        fields = getattr(value, "__dict__", None)
        if fields is None:
            return repr(value)
        return (type(value).__name__, tuple((k, _frozen(v)) for k, v in sorted(fields.items())))
    return value


class LiveInstances:
    """Keys of the instances a writer made alive, and key holders to dispose them.

    Thread-safe for the operations a writer makes: ``note`` from any writing
    thread (one dict lookup, atomic under the GIL), ``forget`` and ``drain``
    under a lock.
    """

    def __init__(self, data_type: type) -> None:
        self._paths = idl.key_fields(data_type)
        self.key_of: Callable[[Any], Any] = (
            operator.attrgetter(*self._paths) if self._paths else _keyless
        )
        self.alive: dict[Any, Any] = {}  # frozen key -> the key values (copied)
        self._template: Any = None  # a private copy of one written sample
        self._lock = threading.Lock()

    def remember(self, key: Any, sample: Any) -> None:
        """Record ``sample``'s instance (``key`` = ``key_of(sample)``) as alive.

        Called by the writer only when ``key`` is not yet known (or unhashable).
        """
        try:
            hash(key)
            frozen, values = key, key
        except TypeError:
            frozen, values = _frozen(key), copy.deepcopy(key)
        with self._lock:
            if self._template is None:
                self._template = copy.deepcopy(sample)
            self.alive[frozen] = values

    def forget(self, sample: Any) -> None:
        """Drop ``sample``'s instance (disposed or unregistered): nothing to dispose on close."""
        key = self.key_of(sample)
        try:
            hash(key)
        except TypeError:
            key = _frozen(key)
        with self._lock:
            self.alive.pop(key, None)

    def clear(self) -> None:
        """Forget every instance (the writer moved to readers that never saw them)."""
        with self._lock:
            self.alive.clear()

    def drain(self) -> Iterator[Any]:
        """Yield a key holder per alive instance, forgetting each; the holder is reused."""
        with self._lock:
            values = list(self.alive.values())
            self.alive.clear()
            holder = self._template
        single = len(self._paths) == 1
        for value in values:
            if self._paths:
                parts = (value,) if single else value
                for path, part in zip(self._paths, parts, strict=True):
                    _set_path(holder, path, part)
            yield holder


def _keyless(sample: Any) -> None:
    """The key of a keyless type: every sample is the one instance."""
    return None


def _set_path(sample: Any, path: str, value: Any) -> None:
    """Set the member at dotted ``path`` (``"id.site"``) of ``sample``."""
    *outer, last = path.split(".")
    target = sample
    for name in outer:
        target = getattr(target, name)
    setattr(target, last, value)
