"""The store's fetch pool: threads answering FETCH requests beside the service thread.

Each thread reads the log through its own read-only connection, so
subscribers catching up and Spark reads do not hold up publishes and commits.
A FETCH's place among its client's replies is reserved on the service thread
when it is taken (``_replies.ReplyOutbox``), so replies still leave in request
order.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

from dcps.wire._messages import Reply
from dcps.wire._replies import Fetched, error_reply
from dcps.wire._requests import FetchRequest

from ._log import ChannelLog, LogReader
from ._replies import ReplyOutbox, Slot

__all__ = ["DEFAULT_FETCH_THREADS", "FetchPool"]

_log = logging.getLogger("dcps.store")
#: Threads answering FETCH requests by default, each with its own read connection.
DEFAULT_FETCH_THREADS = 3
#: Seconds a fetch thread waits for a client to acknowledge replies before it
#: leaves the rest to the service thread (so a stuck client holds it briefly).
_SEND_PATIENCE = 1.0

#: One queued FETCH: who asked, what, and where its reply goes.
_Job = tuple[str, int, FetchRequest, ReplyOutbox, Slot]


class FetchPool:
    """``count`` threads answering queued FETCHes until :meth:`stop`."""

    def __init__(
        self,
        log: ChannelLog,
        count: int,
        stopping: Callable[[], bool],
        on_answer: Callable[[FetchRequest, Reply], None] | None = None,
    ) -> None:
        self._log = log
        self._on_answer = on_answer  # told of every reply (the store's metrics)
        self._count = count
        self._stopping = stopping
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        """Start the threads."""
        for i in range(self._count):
            thread = threading.Thread(target=self._loop, name=f"dcps-store-fetch-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def submit(
        self, client: str, request_id: int, request: FetchRequest, out: ReplyOutbox, slot: Slot
    ) -> None:
        """Queue a FETCH whose reply fills ``slot`` of ``out``."""
        self._jobs.put((client, request_id, request, out, slot))

    def stop(self) -> None:
        """Stop the threads and wait for them (idempotent)."""
        for _ in self._threads:
            self._jobs.put(None)
        for thread in self._threads:
            thread.join()
        self._threads.clear()

    def _loop(self) -> None:
        reader = self._log.reader()
        try:
            while True:
                job = self._jobs.get()
                if job is None or self._stopping():
                    return
                client, request_id, request, out, slot = job
                try:
                    reply = answer_fetch(reader, client, request_id, request)
                    if self._on_answer is not None:
                        self._on_answer(request, reply)
                    out.send(slot, reply, _SEND_PATIENCE, self._stopping)
                except Exception:  # keep serving; the reply, if filled in, is retried
                    _log.exception("dcps store: unexpected error in a fetch thread")
        finally:
            reader.close()


def answer_fetch(reader: LogReader, client: str, request_id: int, request: FetchRequest) -> Reply:
    """The reply to one FETCH (an error reply if it fails)."""
    try:
        run, state = reader.fetch(request.topic, request.channel, request.offset, request.count)
        return Fetched(request.channel, run, state.head, state.tail).to_wire(client, request_id)
    except Exception as exc:  # every failure becomes an error reply
        return error_reply(client, request_id, exc)
