"""Flow control of publishers and subscribers (seed 000's ``getFlowControl()``).

A :class:`FlowControl` lets the application govern the rate of its own
asynchronous requests instead of (or before) being blocked: it reports the
backlog of requests still outstanding, waits for it to drain, or calls back
once it has. A publisher's backlog is its batches awaiting the store's
confirmation (the store falling behind); a subscriber's is its receive
requests not completed yet (the application asking for more than arrives).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from dcps._timeout import Timeout, timeout_seconds
from idl._public import show_as

__all__ = ["FlowControl", "InFlightFlowControl", "ReceiveFlowControl"]


class FlowControl:
    """The flow control of one publisher or subscriber (seed 000's ``FlowControl``).

    The backlog is *excessive* once :attr:`backlog` reaches :attr:`max_backlog`.

    - :meth:`flush` dispatches buffered requests now, without blocking.
    - :meth:`drain_backlog` blocks until the backlog is no longer excessive
      (or the timeout passes).
    - :meth:`check_backlog` tells, without blocking, whether the backlog is
      excessive and, if it is, calls a function once it no longer is.

    .. versionadded:: 0.2
    """

    def __init__(self, max_backlog: int, condition: threading.Condition) -> None:
        self._max = max_backlog
        # notified (holding it) whenever the backlog may have dropped
        self._cond = condition

    @property
    def backlog(self) -> int:
        """Requests outstanding now (see the owner's documentation for what counts)."""
        raise NotImplementedError

    @property
    def max_backlog(self) -> int:
        """The backlog at which it counts as excessive."""
        return self._max

    @property
    def is_backlogged(self) -> bool:
        """True while the backlog is excessive."""
        return self.backlog >= self._max

    def flush(self) -> None:
        """Dispatch buffered requests now; never blocks."""
        raise NotImplementedError

    def drain_backlog(self, timeout: Timeout | None = None) -> bool:
        """Block until the backlog is not excessive; False if ``timeout`` passed first.

        ``timeout`` is a ``timedelta`` or seconds; ``None`` waits as long as it takes.
        """
        seconds = timeout_seconds(timeout, "a backlog timeout")
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._cond:
            while self.is_backlogged:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                # bounded waits: a backlog drop noticed only by polling costs <= 50 ms
                self._cond.wait(0.05 if left is None else min(left, 0.05))
        return True

    def check_backlog(self, on_normal: Callable[[], None] | None = None) -> bool:
        """True if the backlog is excessive now; ``on_normal()`` then runs once when it is not.

        ``on_normal`` is called only when this returns True, on whichever
        thread notices the drop (possibly the delivery or reply thread, so it
        must be short and must not block).
        """
        if not self.is_backlogged:
            return False
        if on_normal is not None:
            _Continuation(self, on_normal).check()
        return True

    def _arm(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (once) the next time the backlog may have dropped."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backlog={self.backlog}/{self._max}>"


class _Continuation:
    """Runs a function once the backlog of a flow control is no longer excessive."""

    def __init__(self, flow: FlowControl, action: Callable[[], None]) -> None:
        self._flow = flow
        self._action = action
        self._lock = threading.Lock()
        self._done = False

    def check(self) -> None:
        if self._done:  # a leftover arming after the action ran
            return
        if self._flow.is_backlogged:
            self._flow._arm(self.check)
            if self._flow.is_backlogged:  # else it dropped while arming: run now
                return
        with self._lock:
            if self._done:
                return
            self._done = True
        self._action()


class InFlightFlowControl(FlowControl):
    """A publisher's flow control: the backlog is its batches awaiting the store.

    ``in_flight`` is the publisher's set of outstanding reply futures, guarded
    by ``condition``, which the publisher notifies on every confirmation.
    """

    def __init__(
        self,
        max_backlog: int,
        condition: threading.Condition,
        in_flight: set[Future[Any]],
        flush: Callable[[], None],
    ) -> None:
        super().__init__(max_backlog, condition)
        self._in_flight = in_flight
        self._flush = flush

    @property
    def backlog(self) -> int:
        """Batches sent to the store and not confirmed yet."""
        return len(self._in_flight)

    def flush(self) -> None:
        """Send every queued batch now instead of after its linger; never blocks.

        Batches that find the in-flight window full go out as soon as the
        store confirms earlier ones.
        """
        self._flush()

    def _arm(self, callback: Callable[[], None]) -> None:
        with self._cond:
            pending = next((f for f in self._in_flight if not f.done()), None)
        if pending is None:  # all answered, not yet counted off: look again shortly
            threading.Timer(0.005, callback).start()
        else:  # runs after the publisher's own confirmation callback
            pending.add_done_callback(lambda _: callback())


class ReceiveFlowControl(FlowControl):
    """A subscriber's flow control: the backlog is its receive requests not completed yet."""

    def __init__(self, max_backlog: int, flush: Callable[[], None]) -> None:
        super().__init__(max_backlog, threading.Condition())
        self._pending = 0
        self._waiters: list[Callable[[], None]] = []
        self._flush = flush

    @property
    def backlog(self) -> int:
        """Receive requests neither completed nor cancelled yet."""
        return self._pending

    def flush(self) -> None:
        """Hand queued receive requests to the delivery thread now; never blocks."""
        self._flush()

    def track(self, request: Future[Any]) -> None:
        """Count ``request`` in the backlog until it completes (or is cancelled)."""
        with self._cond:
            self._pending += 1
        request.add_done_callback(self._completed)

    def _completed(self, _: Future[Any]) -> None:
        with self._cond:
            self._pending -= 1
            waiters, self._waiters = self._waiters, []
            self._cond.notify_all()
        for waiter in waiters:
            waiter()

    def _arm(self, callback: Callable[[], None]) -> None:
        with self._cond:
            self._waiters.append(callback)


show_as("dcps.channels", FlowControl)
