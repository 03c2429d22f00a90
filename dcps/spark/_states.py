"""Channel states shipped with the data source: a streaming query starts without the store.

Spark runs each streaming query's stream reader (``initialOffset``,
``latestOffset``, ...) in a Python process it starts for that query alone
(``pyspark.sql.streaming.python_streaming_source_runner``, not a reused
worker). Over DDS that process would import the store client, create a
participant with the protocol's topics, discover the store and ask it for the
topic's heads and tails before the first micro-batch: about 0.25 s of every
query's fixed cost on a quiet 2-core machine, measured (docs/spark.md).

The data source object is made and pickled earlier, when the DataFrame is
loaded, in a planner worker that Spark keeps across queries, and that keeps
its store connection (:func:`~dcps.spark._access.connect_store`). So the data
source carries the topic's channel states, read when it is pickled, to the
stream reader (:func:`ship_states`), which takes them for the query's start
(``prepareForTriggerAvailableNow``, ``initialOffset``, the first
``latestOffset``) instead of the store's, if they are at most
:data:`MAX_AGE` seconds old. A query started later than that after its
DataFrame was loaded (a DataFrame kept and started again), or one without
shipped states, asks the store as before. Nothing is lost either way: rows
stored between the two moments are read by the next micro-batch (or the next
``availableNow`` run); states are never newer than the store.

A planner worker without a connection yet ships no states and connects in the
background (once per store), so the next query loaded through it has them.

:class:`StartStates` and :class:`ChannelStates` reach the stream reader's
process pickled by value (:mod:`dcps.spark._stream`), so this module imports
only the standard library at the top and the store client where a call needs
it: unpickling them must not import Cyclone DDS (that process's start is on
every query's critical path).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._options import SourceOptions

__all__ = ["MAX_AGE", "Bounds", "ChannelStates", "StartStates", "ship_states"]

#: Oldest (s) shipped channel states a query's start still takes. Quiet, a query's
#: stream reader calls for them about 1 s after the DataFrame was loaded; 8 s was
#: seen at a load average of 13 on 2 cores.
MAX_AGE = 10.0

#: Longest wait (s) for the store's answer when shipping states (a store gone since the
#: connection was made must not hold up ``load()``: the query then asks it itself).
SHIP_TIMEOUT = 1.0

#: ``{channel: (head, next_offset)}``
Bounds = dict[int, tuple[int, int]]


class StartStates:
    """A topic's channel states and the wall time they were read at (on the driver's host).

    A plain class (not attrs): it is pickled by value into the stream reader's process.
    """

    def __init__(self, taken: float, bounds: Bounds) -> None:
        self.taken = taken
        self.bounds = bounds  # {channel: (head, next_offset)}

    def __repr__(self) -> str:
        return f"StartStates(taken={self.taken!r}, bounds={self.bounds!r})"

    def fresh(self, now: float | None = None) -> bool:
        """True while at most :data:`MAX_AGE` s old (and not from the future)."""
        age = (time.time() if now is None else now) - self.taken
        return 0.0 <= age <= MAX_AGE


_warming: set[tuple[int, str, str | None]] = set()
_warming_lock = threading.Lock()


def ship_states(opts: SourceOptions) -> StartStates | None:
    """The topic's channel states read now over this process's existing store connection.

    None when this process has no connection to the store yet (one is then
    opened in the background, for the next call) or when the store cannot
    answer (an unknown topic: the sink's, or a mistake the query's first
    offset call reports by name). Never raises a ``DcpsError``.
    """
    # the planner's side (which has the store client loaded): imported on use, see the
    # module docstring
    from idl._errors import DcpsError

    from ._access import cached_store

    access = cached_store(opts.domain_id, opts.namespace, opts.data_dir)
    if access is None:
        _warm(opts)
        return None
    try:
        return StartStates(time.time(), access.bounds(opts.topic, timeout=SHIP_TIMEOUT))
    except DcpsError:
        return None


def _warm(opts: SourceOptions) -> None:
    key = (opts.domain_id, opts.namespace, opts.data_dir)
    with _warming_lock:
        if key in _warming:
            return
        _warming.add(key)

    from idl._errors import DcpsError

    from ._access import connect_store

    def connect() -> None:
        try:
            connect_store(opts.domain_id, opts.namespace, opts.data_dir, opts.timeout)
        except DcpsError:
            pass  # no store (yet): the query's own calls report it, by name
        finally:
            with _warming_lock:
                _warming.discard(key)

    threading.Thread(target=connect, name="dcps-spark-connect", daemon=True).start()


class ChannelStates:
    """The channel states a stream reader works from: shipped, or the store's.

    :meth:`shipped` gives the shipped states while they are fresh and no
    micro-batch has been planned yet (:attr:`planned`); :meth:`store` asks the
    store (connecting on first use); :meth:`prefetch` starts that request in
    the background, so that the connection is made while the query's first
    micro-batch runs, and :meth:`store` then returns its answer (once).
    """

    def __init__(self, opts: SourceOptions, shipped: StartStates | None) -> None:
        self.opts = opts
        self._shipped = shipped
        self._pending: Future[Bounds] | None = None
        self.planned = False

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_pending": None}  # a request under way stays here

    def shipped(self) -> Bounds | None:
        """The shipped states if fresh and before the first micro-batch is planned."""
        s = self._shipped
        if s is None or self.planned or not s.fresh():
            return None
        return s.bounds

    def store(self) -> Bounds:
        """The store's states: the prefetched answer if there is one, else asked now."""
        pending, self._pending = self._pending, None
        if pending is not None:
            return pending.result()  # the request has its own timeouts
        from ._access import connect_store  # on use: see the module docstring

        opts = self.opts
        return connect_store(opts.domain_id, opts.namespace, opts.data_dir, opts.timeout).bounds(
            opts.topic
        )

    def settle(self) -> None:
        """Wait for a background request to end (its outcome is dropped): a process must
        not exit while that thread is inside Cyclone DDS, creating a participant."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.exception()  # waits; the request has its own timeouts

    def prefetch(self) -> None:
        """Ask the store in the background (no-op while an answer is pending)."""
        if self._pending is not None:
            return
        pending: Future[Bounds] = Future()
        self._pending = pending

        def ask() -> None:
            try:
                # on use, in this thread: in the stream reader's process the store
                # client's import (Cyclone DDS) is made here, off the query's start
                from ._access import connect_store

                opts = self.opts
                access = connect_store(opts.domain_id, opts.namespace, opts.data_dir, opts.timeout)
                pending.set_result(access.bounds(opts.topic))
            except BaseException as exc:  # handed to store(), which raises it
                pending.set_exception(exc)

        threading.Thread(target=ask, name="dcps-spark-states", daemon=True).start()
