"""The store's replies to one client: an ordered outbox in front of the client's reply writer.

The store answers each client through a writer of its own (see ``REPLY_QOS``
in ``dcps/wire/_names.py``). A reply is given a slot in the client's outbox when its
request is taken, in request order, and filled when the answer is ready: at
once on the store's service thread, or later on a fetch thread. Replies leave
in slot order, so a client sees its replies in the order it sent the
requests, whichever thread answered them.

A write gives up after ``REPLY_QOS``'s 1 ms when the client has not
acknowledged enough earlier replies (Cyclone's write-history watermark, ~500
kB by default): the reply stays in the outbox and the service thread retries
on its next rounds. A fetch thread instead waits for the client's
acknowledgements before writing after a large reply (``wait_for_acks``, which
lets other threads run, where a blocking write would hold the interpreter
lock), for at most its patience; the service thread takes over after that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import attrs
from cyclonedds.core import DDSException
from cyclonedds.util import duration

from dcps._cyclone.calls import wait_for_acks
from dcps.wire._messages import Reply
from dcps.wire._transport import drop_endpoint
from idl._errors import DcpsError

__all__ = ["REPLY_WRITER_IDLE", "ReplyOutbox", "Slot"]

_log = logging.getLogger("dcps.store")
#: Seconds after which a reply nobody took is dropped, and the reply writer of a
#: client that has gone is deleted.
REPLY_WRITER_IDLE = 60.0
#: One wait for acknowledgements of a fetch thread (it re-checks the store's stop).
_ACK_WAIT = duration(milliseconds=20)


@attrs.define(eq=False)
class Slot:
    """One reply of the outbox: ``reply`` is None until its answer is ready."""

    queued: float
    reply: Reply | None = None


class ReplyOutbox:
    """The reply writer of one client and its replies not written yet, in request order.

    :meth:`reserve` is called on the store's service thread (which also
    creates and deletes outboxes); :meth:`put`, :meth:`send` and
    :meth:`retry` may be called on any thread.
    """

    def __init__(self, writer: Any, now: float) -> None:
        self.writer = writer
        self.used = now
        self._slots: deque[Slot] = deque()
        self._lock = threading.Lock()
        self._sending = False  # a fetch thread is writing the outbox out

    def reserve(self, now: float) -> Slot:
        """A slot for the answer to a request just taken (service thread)."""
        with self._lock:
            self.used = now
            slot = Slot(now)
            self._slots.append(slot)
            return slot

    def put(self, slot: Slot, reply: Reply) -> None:
        """Fill ``slot``; write every ready reply in order (a full writer: later retries)."""
        with self._lock:
            slot.reply = reply
            if not self._sending:  # otherwise the sending thread writes it too
                self._flush()

    def send(self, slot: Slot, reply: Reply, patience: float, stop: Callable[[], bool]) -> None:
        """Fill ``slot`` from a fetch thread and write the ready replies in order.

        While the client has not acknowledged a large reply, wait for it (up
        to ``patience`` seconds in all, or until ``stop()``) rather than let a
        write block; whatever is left is retried by :meth:`retry`.
        """
        with self._lock:
            slot.reply = reply
            if self._sending:
                return
            self._sending = True
        deadline = time.monotonic() + patience
        try:
            while True:
                with self._lock:  # the last check and the hand-back under one lock
                    if self._flush() or stop() or time.monotonic() >= deadline:
                        self._sending = False
                        return
                self._acked(_ACK_WAIT)
        except BaseException:
            with self._lock:
                self._sending = False
            raise

    def retry(self) -> None:
        """Write what is ready, unless a fetch thread is at it (service thread)."""
        with self._lock:
            if not self._sending:
                self._flush()

    def idle(self, now: float) -> bool:
        """True when nothing waits and the client has not been heard of for long."""
        with self._lock:
            return not self._slots and not self._sending and now - self.used > REPLY_WRITER_IDLE

    def close(self) -> None:
        """Delete the writer (replies not written are dropped)."""
        with self._lock:
            self._slots.clear()
            drop_endpoint(self.writer)

    def _acked(self, timeout: int) -> bool:
        """Whether the client acknowledged everything written, waiting up to ``timeout`` ns."""
        try:
            return wait_for_acks(self.writer._ref, timeout)
        except DcpsError:
            return False

    def _flush(self) -> bool:
        """Write the ready replies from the front; True unless a ready one is left waiting."""
        now = time.monotonic()
        while self._slots:
            slot = self._slots[0]
            if slot.reply is None:
                return True  # an earlier answer is not ready: its thread writes on
            if now - slot.queued > REPLY_WRITER_IDLE:  # the client timed it out long ago
                _log.warning("dcps store: reply to client %s dropped", slot.reply.client)
            else:
                try:
                    self.writer.write(slot.reply)
                except DDSException:
                    return False
            self._slots.popleft()
        return True
