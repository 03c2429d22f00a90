"""Reading a durable's elements from the log ahead of its deliveries.

A durable delivers a window (tens of elements) per poll, mostly in offset
order, and each read of the log costs a query and the cutting of stored
batches whatever its length. :class:`ReadAhead` reads up to
:data:`AHEAD_BYTES` of a channel at once (at most :data:`AHEAD_ELEMENTS`
elements) and serves the next deliveries from it. Elements never change once
appended (a topic's offsets are not reused), so what was read stays right;
a read beyond what is kept goes to the log again.

Memory is bounded: one run per (durable, channel), at most
:data:`MAX_RUNS` runs kept (least recently used first out), none of more
than :data:`MAX_KEPT_BYTES` (a read of larger elements is not kept).
"""

from __future__ import annotations

from collections import OrderedDict

import attrs

from idl._errors import PreconditionNotMetError

from ._log import ChannelLog

__all__ = ["AHEAD_BYTES", "AHEAD_ELEMENTS", "MAX_KEPT_BYTES", "MAX_RUNS", "ReadAhead"]

#: Bytes of payload read beyond a delivery's own elements (a run of small elements).
AHEAD_BYTES = 256 * 1024
#: Most elements read at once.
AHEAD_ELEMENTS = 1024
#: Largest run kept for the next deliveries (bytes of payload).
MAX_KEPT_BYTES = 512 * 1024
#: Runs kept at once (one per durable and channel being read).
MAX_RUNS = 64


@attrs.define
class _Run:
    first: int
    payloads: list[bytes]
    stamps: list[int]
    #: average payload size seen on this channel (decides how far to read ahead)
    average: int


class ReadAhead:
    """The elements of durables' channels read ahead of their deliveries (service thread)."""

    def __init__(self, log: ChannelLog) -> None:
        self._log = log
        self._runs: OrderedDict[tuple[str, str, int], _Run] = OrderedDict()

    def read(
        self, durable: str, topic: str, channel: int, first: int, count: int
    ) -> tuple[list[bytes], list[int]]:
        """Payloads and accept timestamps of elements ``first .. first + count - 1``.

        Raises :class:`~dcps.PreconditionNotMetError` when the log does not
        have them all (released by retention).
        """
        key = (durable, topic, channel)
        run = self._runs.get(key)
        if run is not None:
            start = first - run.first
            if start >= 0 and start + count <= len(run.payloads):
                self._runs.move_to_end(key)
                end = start + count
                return run.payloads[start:end], run.stamps[start:end]
        average = run.average if run is not None else 0
        ahead = 0 if average <= 0 else min(AHEAD_ELEMENTS, AHEAD_BYTES // average)
        got = self._log.fetch_run(topic, channel, first, max(count, ahead))
        if got.first != first or got.count < count:
            raise PreconditionNotMetError(
                f"durable {durable!r}: elements {first}..{first + count - 1} of topic "
                f"{topic!r} channel {channel} are no longer in the log"
            )
        payloads = got.payloads()
        stamps: list[int] = got.timestamps().tolist()
        size = len(got.data)
        kept = size <= MAX_KEPT_BYTES
        self._runs[key] = _Run(
            first, payloads if kept else [], stamps if kept else [], max(1, size // got.count)
        )
        self._runs.move_to_end(key)
        while len(self._runs) > MAX_RUNS:
            self._runs.popitem(last=False)
        return payloads[:count], stamps[:count]

    def forget(self, durable: str) -> None:
        """Drop what was read for ``durable`` (deleted, or reset)."""
        for key in [k for k in self._runs if k[0] == durable]:
            del self._runs[key]
