"""A publisher's batches and the futures of their elements.

A :class:`Batch` gathers one channel's elements until it is sent, then holds
the store's answer for all of them. Each element's future
(:class:`ElementFuture`) reads its position from its batch, so futures nobody
looks at cost almost nothing; :class:`ManyResult` completes the one future of
``publish_many``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from typing import Any

from ._position import Position, trusted_position

__all__ = ["DONE", "Batch", "ElementFuture", "ManyResult"]

# what every unconfirmed publish returns: a future completed with None (shared,
# since a completed future never changes)
DONE: Future[Position | None] = Future()
DONE.set_result(None)


class Batch:
    """Elements queued for one channel, then the store's answer for all of them."""

    __slots__ = (
        "channel",
        "discarded",
        "done",
        "error",
        "first",
        "lock",
        "payloads",
        "size",
        "started",
        "waiting",
    )

    def __init__(self, channel: int, started: float) -> None:
        self.channel = channel
        self.payloads: list[bytes] = []
        self.size = 0
        self.started = started
        self.done = False
        self.discarded = False
        self.first = 0
        self.error: BaseException | None = None
        self.lock = threading.Lock()
        # futures (or callbacks) to complete when the store answers
        self.waiting: list[ElementFuture | Callable[[Batch], None]] = []

    def position(self, index: int) -> Position:
        """The position of element ``index`` (or the batch's error raised); only when done."""
        if self.error is not None:
            raise self.error
        return trusted_position(self.channel, self.first + index)

    def when_done(self, action: Callable[[Batch], None]) -> None:
        """Run ``action(batch)`` once the store answered (now if it has)."""
        with self.lock:
            if not self.done:
                self.waiting.append(action)
                return
        action(self)

    def resolve(self, first: int, error: BaseException | None, *, discarded: bool = False) -> None:
        """Record the store's answer and complete what waits for it (``discarded``: the
        store kept nothing, its topic having no group nor durable)."""
        with self.lock:
            self.first, self.error, self.done = first, error, True
            self.discarded = discarded
            waiting, self.waiting = self.waiting, []
        for item in waiting:
            if isinstance(item, ElementFuture):
                try:
                    if error is None:
                        Future.set_result(item, trusted_position(self.channel, first + item._index))
                    else:
                        Future.set_exception(item, error)
                except InvalidStateError:
                    pass  # the user cancelled it meanwhile
            else:
                item(self)


_FUTURE_STATE = frozenset(
    ("_condition", "_state", "_result", "_exception", "_waiters", "_done_callbacks")
)


class ElementFuture(Future[Position | None]):
    """The future of one element's position, answered by its batch.

    A real :class:`concurrent.futures.Future`, but its lock and condition (which
    cost more than the rest of ``publish``) are only made when a Future method
    needs them; ``done()`` and ``result()`` once the batch is confirmed never
    do. So the futures of elements nobody looks at cost almost nothing.
    """

    # False (on the class) until a Future method needs the Future's own state; then
    # True on the instance. A class attribute, not ``"_state" in self.__dict__``:
    # reading ``__dict__`` makes CPython build a dict for every future it is read on.
    _lazy_state = False

    def __init__(self, batch: Batch, index: int) -> None:  # no Future.__init__: see class doc
        self._batch = batch
        self._index = index

    def __getattr__(self, name: str) -> Any:
        if name not in _FUTURE_STATE:
            raise AttributeError(name)
        batch = self._batch
        with batch.lock:
            if not self._lazy_state:
                Future.__init__(self)
                self._lazy_state = True
                if not batch.done:
                    batch.waiting.append(self)
                elif batch.error is None:
                    Future.set_result(
                        self, trusted_position(batch.channel, batch.first + self._index)
                    )
                else:
                    Future.set_exception(self, batch.error)
        return object.__getattribute__(self, name)

    @property
    def discarded(self) -> bool:
        """True once the store confirmed the element *discarded*: its topic had no
        subscriber group nor durable (nor retention), so the element reached only the live
        subscribers of that moment and is not stored (FTL's confirm of a discard).
        False while not done, on an error, and when the element is stored."""
        batch = self._batch
        return batch.done and batch.error is None and batch.discarded

    def done(self) -> bool:
        if not self._lazy_state:
            return self._batch.done
        return super().done()

    def cancelled(self) -> bool:
        return self._lazy_state and super().cancelled()

    def running(self) -> bool:
        return self._lazy_state and super().running()

    def result(self, timeout: float | None = None) -> Position | None:
        if not self._lazy_state and self._batch.done:
            return self._batch.position(self._index)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self._lazy_state and self._batch.done:
            return self._batch.error
        return super().exception(timeout)


class ManyResult:
    """Completes :meth:`ChannelPublisher.publish_many`'s future from its batches."""

    def __init__(self, out: Future[list[Position] | None], placed: list[tuple[Batch, int]]):
        self._out = out
        self._placed = placed
        self._batches = list({id(b): b for b, _ in placed}.values())
        self._left = len(self._batches)
        self._lock = threading.Lock()

    def start(self) -> None:
        for batch in self._batches:
            batch.when_done(self._one_done)

    def _one_done(self, batch: Batch) -> None:
        with self._lock:
            self._left -= 1
            last = self._left == 0
        if batch.error is not None:
            with contextlib.suppress(InvalidStateError):
                self._out.set_exception(batch.error)
            return
        if not last or any(b.error is not None for b in self._batches):
            return
        positions = [trusted_position(b.channel, b.first + i) for b, i in self._placed]
        with contextlib.suppress(InvalidStateError):
            self._out.set_result(positions)
