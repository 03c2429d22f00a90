"""ReaderDataLifecycle autopurge, which Cyclone DDS stores but never applies.

The reader records when it first sees an instance NOT_ALIVE_NO_WRITERS or
NOT_ALIVE_DISPOSED (on every data-available notification, so the time is
close to the transition) and, before each access, takes away the samples of
instances that stayed so for longer than the policy's delay. A purge is
therefore visible exactly where DDS makes it visible: in what read/take
return.
"""

from __future__ import annotations

import time

import qos as q
from dcps._sample import InstanceState
from dcps._timeout import timeout_seconds

_NOT_ALIVE = (InstanceState.NOT_ALIVE_NO_WRITERS, InstanceState.NOT_ALIVE_DISPOSED)


class AutoPurge:
    """Deadlines for purging not-alive instances, per instance handle."""

    def __init__(self, policy: q.ReaderDataLifecycle) -> None:
        # seconds, None for never (an INFINITE delay); the policy's own validator has
        # refused every value timeout_seconds would, so no label for an error is needed
        nowriter, disposed = (
            policy.autopurge_nowriter_samples_delay,
            policy.autopurge_disposed_samples_delay,
        )
        self._delays = {
            InstanceState.NOT_ALIVE_NO_WRITERS: timeout_seconds(nowriter),
            InstanceState.NOT_ALIVE_DISPOSED: timeout_seconds(disposed),
        }
        self._since: dict[int, tuple[InstanceState, float]] = {}
        #: Whether any delay is finite (else the reader skips all of this).
        self.active = any(d is not None for d in self._delays.values())

    def observe(self, states: dict[int, InstanceState], now: float | None = None) -> None:
        """Record the current instance states (handle -> state) seen in the reader."""
        now = time.monotonic() if now is None else now
        for handle, state in states.items():
            if state in _NOT_ALIVE and self._delays[state] is not None:
                known = self._since.get(handle)
                if known is None or known[0] != state:
                    self._since[handle] = (state, now)
            else:
                self._since.pop(handle, None)

    def due(self, now: float | None = None) -> list[int]:
        """Handles whose samples must go now; they are forgotten here."""
        now = time.monotonic() if now is None else now
        out = []
        for handle, (state, since) in list(self._since.items()):
            delay = self._delays[state]
            if delay is not None and now - since >= delay:
                out.append(handle)
                del self._since[handle]
        return out
