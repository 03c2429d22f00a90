"""When a batching writer's queued samples leave: at once, unless it writes a long tight run.

Cyclone sends each sample as its own datagram to every remote reader: one system
call and one acknowledgement per sample and reader. With write batching on (see
:mod:`dcps._cyclone.batching`) it packs samples into one packet, but sends that
packet only when it is full or flushed. :class:`FlushPolicy` decides the flushes.
A *run* is a series of writes each less than :data:`QUIET_NS` (0.1 ms) after the
one before:

- **No delay for a lone sample, a stream or a short burst.** A run's first
  :data:`RUN_WRITES` (16) writes are sent at once, each as without batching: a
  lone sample (a command, a ping), every sample of a stream up to 10 kHz (each
  write starts a run of its own) and a burst of up to 16 samples leave as fast
  as without batching.
- **A long run: at most 1 ms.** From the 17th write of a run on (a writer
  writing as fast as it can, where the sample would queue behind the system
  calls anyway), writes are queued, and the first queued sample is sent at most
  :data:`MAX_DELAY_NS` later: by a later write that finds the time up (a run
  flushes itself, about one packet per millisecond), by the first write after a
  pause (it starts a new run), or else by one process-wide flusher thread (the
  end of the run).

Cyclone also sends the packet when it is full and before a write blocks on a
full history.

Why runs and not the time since the last flush (the first policy, a write
within 1 ms of the last flush was queued): that one held every sample of a
stream faster than 1 kHz, and of every burst, for up to 1 ms, and its flusher
thread sent most of them, late when the writing thread holds the GIL or the
host is loaded. Measured (``python -m benchmarks.bench_durability --only
latency``): a stream of pings 0.2 ms apart had a round trip p99 of 35 ms
against 0.6 ms without batching; bursts of 10 pings a p50 of 1.4 ms against
0.35 ms. With runs, both are as without batching. Why not let the flusher look
for a run's end soon after it (a first try): each look takes the GIL from the
writing thread, and a loaded host breaks a tight loop into many runs: five
times the wake-ups, more than batching saved.

A program that exits without closing its writers still sends what they hold
(an exit handler flushes them); one killed (SIGKILL) loses what its writers
held, at most the last millisecond of a long run, as it loses what was sent but
not yet acknowledged.

Thread safety: a write's state update happens after its C write returned, and a
flush clears the queued state before its C flush, so every sample is covered by
a flush that starts after it was queued (an extra flush of an empty packet is
harmless).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
import weakref

from dcps._cyclone.batching import write_flush
from dcps._cyclone.calls import wait_for_acks
from idl._errors import DcpsError

#: The longest a queued sample waits for its packet to be sent (ns).
MAX_DELAY_NS = 1_000_000
#: A write this long (ns) after the writer's previous write starts a new run of
#: writes (and is sent at once, with whatever is queued).
QUIET_NS = 100_000
#: The first writes of a run, sent at once: only a longer run is batched.
RUN_WRITES = 16
_NEVER = 1 << 62


class FlushPolicy:
    """The flushes of one batching writer (its C handle ``ref``)."""

    __slots__ = ("__weakref__", "_lock", "_queued_at", "_run", "_wrote_at", "ref")

    def __init__(self, ref: int) -> None:
        self.ref = ref
        self._lock = threading.Lock()
        self._queued_at = 0  # monotonic ns of the first unsent write; 0: nothing queued
        self._wrote_at = 0  # monotonic ns when the last write returned
        self._run = 0  # the writes of the current run so far
        _open.add(self)

    def written(self, started: int | None = None) -> None:
        """After a write (or dispose, unregister) returned: flush now or make sure one comes.

        ``started``: when the write began (monotonic ns; None: now). A run is
        broken by a pause between writes, not by a write that took long (one
        blocked by flow control until the readers acknowledged, or preempted).
        """
        now = time.monotonic_ns()
        with self._lock:
            if (now if started is None else started) - self._wrote_at < QUIET_NS:
                self._run += 1
            else:
                self._run = 1  # after a pause: a new run
            self._wrote_at = now
            if self._run > RUN_WRITES:  # a long run: batch
                queued = self._queued_at
                if queued == 0:
                    self._queued_at = now
                    _flusher.due(self, now + MAX_DELAY_NS)
                    return
                if now - queued < MAX_DELAY_NS:
                    return
            self._queued_at = 0
        write_flush(self.ref)
        # the flush is part of this write, not of the pause before the next one
        self._wrote_at = time.monotonic_ns()

    def flush(self) -> int:
        """Send what is queued now; Cyclone's return code."""
        with self._lock:
            self._queued_at = 0
        return write_flush(self.ref)

    def flush_if_due(self, now: int) -> int:
        """The flusher's call: flush if the first queued sample has waited long enough.

        Returns 0 when flushed or nothing is queued, else when to come back (ns).
        """
        with self._lock:
            queued = self._queued_at
            if queued == 0:
                return 0
            if now - queued < MAX_DELAY_NS:
                return queued + MAX_DELAY_NS
            self._queued_at = 0
        write_flush(self.ref)
        return 0

    def close(self) -> None:
        """Flush a last time and leave the flusher (the writer is about to be deleted)."""
        self.flush()
        _flusher.drop(self)
        _open.discard(self)


class _Flusher:
    """One daemon thread for the process: flushes the writers whose queued samples are due."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._due: dict[FlushPolicy, int] = {}
        self._thread: threading.Thread | None = None
        self._wakes_at = _NEVER  # when the thread wakes by itself (monotonic ns)

    def due(self, policy: FlushPolicy, at: int) -> None:
        """``policy`` has samples queued that must be sent by ``at`` (monotonic ns).

        The thread is woken only when it would otherwise wake too late: in a steady
        stream each write that queues finds its writer still due (its deadline comes
        first) or the thread already waking in time, so it wakes about once per
        :data:`MAX_DELAY_NS` and takes the GIL from the writing thread no more often.
        """
        with self._cond:
            if policy in self._due:
                return  # an earlier deadline stands; the flusher re-checks then
            self._due[policy] = at
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="dcps-write-flusher", daemon=True
                )
                self._thread.start()
            if at < self._wakes_at:
                self._cond.notify()

    def drop(self, policy: FlushPolicy) -> None:
        with self._cond:
            self._due.pop(policy, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due:
                    self._wakes_at = _NEVER
                    self._cond.wait()
                self._wakes_at = min(self._due.values())
                wait = self._wakes_at - time.monotonic_ns()
                if wait > 0:
                    self._cond.wait(wait / 1e9)
                now = time.monotonic_ns()
                self._wakes_at = now  # awake: due() need not notify
                ready = [p for p, at in self._due.items() if at <= now]
                for policy in ready:
                    del self._due[policy]
            for policy in ready:
                again = policy.flush_if_due(now)
                if again:
                    with self._cond:
                        self._due.setdefault(policy, again)


_flusher = _Flusher()

#: The policies of the writers not closed yet, flushed when the interpreter exits.
_open: weakref.WeakSet[FlushPolicy] = weakref.WeakSet()


#: How long the interpreter's exit waits, all writers together, for the readers to
#: acknowledge what the exit flush sent (Cyclone's own linger of a deleted writer).
EXIT_ACK_WAIT_S = 1.0


@atexit.register
def _flush_at_exit() -> None:
    """Send what unclosed writers hold: a program that writes a burst and ends without
    closing its writer must not lose the burst's end (the flusher is a daemon thread,
    stopped at exit, and Cyclone deletes writers at exit without sending their batch).
    Exit handlers run before the interpreter tears down the binding's entities and
    before the C library's own clean-up.

    Then wait, up to :data:`EXIT_ACK_WAIT_S` in all, for the reliable readers to
    acknowledge it: a datagram lost, or a reader that has not discovered the writer
    yet and dropped its samples, needs the writer alive to send them again."""
    policies = list(_open)
    for policy in policies:
        policy.flush()
    deadline = time.monotonic() + EXIT_ACK_WAIT_S
    for policy in policies:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        with contextlib.suppress(DcpsError):  # a writer already gone: nothing to wait for
            wait_for_acks(policy.ref, int(left * 1e9))
