"""A subscriber's per-channel cursors: buffered runs, kept live batches, fetches, collecting.

Each owned channel has a :class:`ChannelCursor`: the offset of the next
element to deliver, the runs of elements received (from fetches and from the
channel's live tail) and the live batches that arrived while a fetch was due.
:class:`ChannelCursors` holds them for one subscriber and turns them into
:class:`~dcps.channels.Element` values, channel by channel in turn. It is
used under the subscriber's lock (the delivery thread, seeks, ownership).
"""

from __future__ import annotations

import functools
import logging
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import attrs

from dcps._record import new_record
from dcps.wire._batches import ELEMENT_STEP_NS
from dcps.wire._messages import LiveBatch
from dcps.wire._names import BATCH_READER_QOS, batch_partition
from dcps.wire._split import take_decoded
from dcps.wire._transport import Endpoint, Waiter, drop_endpoint
from idl._batch_codec import UNDECODABLE, BatchDecoder, PartialBatch, split_blob
from idl._errors import BadParameterError, DcpsError, DcpsTimeoutError

from ._client import StoreClient
from ._element import Element
from ._position import trusted_position
from ._undecodable import UndecodableElementError, UndecodablePolicy

__all__ = ["FETCH_MAX", "ChannelCursor", "ChannelCursors", "from_ns", "to_ns"]

_log = logging.getLogger("dcps.channels.subscriber")
#: Elements asked for per FETCH.
FETCH_MAX = 512
#: Live batches kept per channel while fetches catch up.
LIVE_KEPT = 64


def to_ns(when: datetime) -> int:
    """Nanoseconds since the epoch of an aware datetime (``BadParameterError`` otherwise)."""
    if not isinstance(when, datetime):
        raise BadParameterError(f"a seek timestamp must be a datetime, got {when!r}")
    if when.tzinfo is None:
        raise BadParameterError("a seek timestamp must be timezone-aware (e.g. UTC)")
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


@functools.lru_cache(maxsize=1024)
def from_ns(ns: int) -> datetime:
    """The UTC datetime of nanoseconds since the epoch (cached: batches share stamps)."""
    return datetime.fromtimestamp(ns // 1_000_000_000, tz=UTC) + timedelta(
        microseconds=(ns % 1_000_000_000) // 1000
    )


_STEPS: list[timedelta] = []


def _steps(n: int) -> list[timedelta]:
    """The offsets of elements ``0 .. n-1`` from their batch's time (``ELEMENT_STEP_NS``
    apart), kept: the delivery thread adds one to each element's time. A longer list
    replaces the kept one whole, so a list handed out never changes."""
    global _STEPS
    steps = _STEPS
    if len(steps) < n:
        count = max(n, 2 * len(steps), 1024)
        steps = [timedelta(microseconds=i * ELEMENT_STEP_NS // 1000) for i in range(count)]
        _STEPS = steps
    return steps


class _Run:
    """Elements of one channel at offsets ``first``, ``first + 1``, ... as received.

    Decoded all at once when first needed; ``taken`` of them are delivered.
    ``stamps`` is the accept time (ns) of the first, the next ones following
    ``ELEMENT_STEP_NS`` apart (as the store stamps a batch), or a list of one per element.
    """

    __slots__ = ("blob", "first", "sizes", "stamps", "taken", "values")

    def __init__(self, first: int, stamps: int | list[int], blob: bytes, sizes: list[int]) -> None:
        self.first = first
        self.stamps = stamps
        self.blob = blob
        self.sizes = sizes
        self.values: list[Any] | None = None
        self.taken = 0


@attrs.define
class ChannelCursor:
    """Where one owned channel stands: its reader, next offset and buffered elements."""

    reader: Any
    next: int | None = None  # offset of the next element to deliver
    runs: deque[_Run] = attrs.Factory(deque)
    need_fetch: bool = True
    # live batches that arrived while a fetch was due, kept to spare the store
    # refetching them once the fetches catch up
    live: deque[LiveBatch] = attrs.Factory(lambda: deque(maxlen=LIVE_KEPT))

    @property
    def end(self) -> int:
        """The offset after the last buffered element (only when ``next`` is known)."""
        if self.runs:
            last = self.runs[-1]
            return last.first + len(last.sizes)
        assert self.next is not None
        return self.next

    def reset(self, next_offset: int) -> None:
        """Forget what is buffered; deliver from ``next_offset`` on (fetched first)."""
        self.next = next_offset
        self.runs.clear()
        self.need_fetch = True

    def add_live(self, batch: LiveBatch) -> None:
        """Buffer a live batch, or keep it for later when a fetch must come first."""
        if self.next is None:
            return
        if self.need_fetch or batch.first > self.end:
            self.need_fetch = True
            self.live.append(batch)
            return
        self._append_live(batch)

    def _append_live(self, batch: LiveBatch) -> None:
        """Buffer the part of ``batch`` after ``end`` (which ``batch.first`` must not pass)."""
        first, sizes, blob = batch.first, batch.sizes, batch.blob
        skip = self.end - first
        if skip >= len(sizes):
            return
        if skip:
            blob = blob[sum(sizes[:skip]) :]
            sizes = sizes[skip:]
        stamp = batch.timestamp + skip * ELEMENT_STEP_NS
        self.runs.append(_Run(first + skip, stamp, blob, sizes))

    def drain_live(self) -> None:
        """Buffer kept live batches that now follow on; drop those already covered."""
        live = self.live
        while live and live[0].first <= self.end:
            self._append_live(live.popleft())


class ChannelCursors:
    """The cursors of the channels one subscriber owns, and the elements they yield.

    ``decode`` turns a run's bytes into values; ``accept`` (a filter) and
    ``convert`` apply to each value; ``policy`` decides about elements that
    do not decode. Elements are built with ``subscriber`` as their receiver.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        waiter: Waiter,
        client: StoreClient,
        topic: str,
        group: str,
        *,
        type_name: str,
        decode: BatchDecoder,
        accept: Callable[[Any], bool] | None,
        convert: Callable[[Any], Any] | None,
        policy: UndecodablePolicy,
        subscriber: Any,
    ) -> None:
        self._endpoint = endpoint
        self._waiter = waiter
        self._client = client
        self._topic = topic
        self._group = group
        self._type_name = type_name
        self._decode = decode
        self._accept = accept
        self._convert = convert
        self._policy = policy
        self._subscriber = subscriber
        self.chans: dict[int, ChannelCursor] = {}
        self.carry: list[Element[Any]] = []  # taken for a receive that was cancelled
        self._rr = 0

    # -- ownership -------------------------------------------------------------------

    def own(self, owned: set[int]) -> tuple[set[int], set[int]]:
        """Hold cursors for exactly ``owned``; return the channels ``(gained, gone)``.

        A gained channel resumes after the group's last commit.
        """
        current = set(self.chans)
        gained, gone = owned - current, current - owned
        self.carry = [e for e in self.carry if e.channel not in gone]
        for c in gone:
            self._drop(self.chans.pop(c))
        for c in sorted(gained):
            reader = self._endpoint.reader(
                self._endpoint.batch_topic,
                batch_partition(self._endpoint.namespace, self._topic, c),
                BATCH_READER_QOS,
            )
            self._waiter.watch(reader)
            self.chans[c] = ChannelCursor(reader)
        if gained:
            self._resume(sorted(gained))
        return gained, gone

    def _resume(self, channels: list[int]) -> None:
        states = self._client.state(self._topic, self._group, channels)
        for i, c in enumerate(states.channels):
            ch = self.chans.get(c)
            if ch is not None:
                committed = states.committed[i] if states.committed else states.heads[i] - 1
                resume = max(committed + 1, states.heads[i])
                ch.reset(resume)
                if states.tails[i] < resume:
                    # Nothing stored from there on: what comes next comes live, and a
                    # fetch would only return nothing. Skipping it matters at start-up,
                    # where the fetches of all channels ran one after another before the
                    # first element was delivered. (An element stored after this reply
                    # whose push was missed shows as a gap before the next live batch,
                    # or to poll_tails, and is fetched then, as after an empty fetch.)
                    ch.drain_live()
                    ch.need_fetch = bool(ch.live)

    def _drop(self, ch: ChannelCursor) -> None:
        self._waiter.unwatch(ch.reader)
        drop_endpoint(ch.reader)

    def close(self) -> None:
        """Release every channel's reader."""
        for ch in self.chans.values():
            self._drop(ch)
        self.chans.clear()

    def forget(self, channels: Iterable[int]) -> None:
        """Drop elements of ``channels`` kept for a cancelled receive (before a seek)."""
        gone = set(channels)
        self.carry = [e for e in self.carry if e.channel not in gone]

    # -- arriving data ---------------------------------------------------------------

    def take_live(self) -> None:
        """Take the live batches every owned channel's reader holds."""
        accept = self._client.accept_live
        sealed = self._client.sealer.enabled
        for c, ch in self.chans.items():
            # each batch's payloads copied once out of Cyclone (the binding's take: three times)
            for batch in take_decoded(ch.reader, LiveBatch, 256, sealed=sealed):
                # checked against where it was read: a genuine batch of another topic or
                # channel written again into this partition must not pass for this one's
                if isinstance(batch, LiveBatch) and accept(batch, self._topic, c):
                    ch.add_live(batch)

    def poll_tails(self) -> None:
        """Safety net for live batches lost before discovery completed."""
        if not self.chans:
            return
        try:
            # A safety net must not hold the delivery thread: if the store is out of
            # reach, give up quickly and let the heartbeat/assignment path take over.
            states = self._client.state(self._topic, "", sorted(self.chans), timeout=1.0)
        except DcpsTimeoutError:
            return
        for i, c in enumerate(states.channels):
            ch = self.chans.get(c)
            if ch is not None and ch.next is not None and states.tails[i] >= ch.end:
                ch.need_fetch = True

    def fetch(self, c: int, ch: ChannelCursor, timeout: float) -> None:
        """Fetch what follows the channel's buffered elements from the store."""
        if ch.next is None:
            return
        ch.drain_live()
        expected = ch.end
        # with live batches kept, only the gap before the first of them is missing
        limit = min(FETCH_MAX, ch.live[0].first - expected) if ch.live else FETCH_MAX
        # the bulk form: the stored batches as they are (no per-element fields to
        # build in the store, encode, decode and turn back into lists here)
        fetched = self._client.fetch(self._topic, c, expected, limit, timeout)
        run = fetched.run
        count = run.count
        if count and run.first > expected and not ch.runs:
            ch.next = expected = run.first  # removed by retention: skip ahead
        elif not count and fetched.head > expected and not ch.runs:
            ch.next = fetched.head
        if count and run.first == expected:  # a run is dense: no gap inside it
            stamps: int | list[int] = (
                run.stamps[0] if len(run.stamps) == 1 else run.timestamps().tolist()
            )
            ch.runs.append(_Run(expected, stamps, run.data, run.element_sizes().tolist()))
        ch.drain_live()
        ch.need_fetch = count >= FETCH_MAX or bool(ch.live)

    # -- collecting elements ------------------------------------------------------------

    def collect(self, n: int, fetch_timeout: float) -> tuple[list[Element[Any]], dict[int, int]]:
        """Up to ``n`` elements, the channels in turn; and the last offset taken per channel.

        Raises :class:`UndecodableElementError` when the first element to
        deliver does not decode and the policy says so (the cursor stays
        before it); a later one ends the collection before it instead.
        """
        out: list[Element[Any]] = self.carry[:n]
        del self.carry[:n]
        committed: dict[int, int] = {}
        if len(out) >= n:
            return out, committed
        order = sorted(self.chans)
        if not order:
            return out, committed
        start = self._rr % len(order)
        self._rr += 1
        subscriber = self._subscriber
        for c in order[start:] + order[:start]:
            ch = self.chans[c]
            if ch.next is None:
                continue
            runs = ch.runs
            while len(out) < n:
                if not runs:
                    if ch.need_fetch:
                        try:
                            self.fetch(c, ch, fetch_timeout)
                        except DcpsError:
                            # this channel's store is out of reach: deliver what was already
                            # taken from the others (raising here would drop it) and retry
                            # the fetch next round
                            _log.debug("fetch of channel %s failed; retried", c, exc_info=True)
                    if not runs:
                        break
                run = runs[0]
                values = run.values
                if values is None:
                    values = run.values = self._decode(run.blob, run.sizes)
                    if values.__class__ is not PartialBatch:
                        run.blob = b""  # kept while undecodable elements may need their bytes
                begin = run.taken
                stop = min(len(values), begin + n - len(out))
                first = run.first
                stamps = run.stamps
                if (
                    isinstance(stamps, int)
                    and self._accept is None
                    and self._convert is None
                    and values.__class__ is list
                ):
                    when = from_ns(stamps)  # element i: i microseconds later
                    steps = _steps(stop)
                    out += [
                        new_record(Element, (values[i], c, first + i, when + steps[i], subscriber))
                        for i in range(begin, stop)
                    ]
                else:
                    stop = self._collect_slow(c, run, values, begin, stop, out)
                run.taken = stop
                if stop == len(values):
                    runs.popleft()
                if stop > begin:
                    ch.next = first + stop
                    committed[c] = first + stop - 1
                if stop < len(values) and len(out) < n:  # stopped before an undecodable one
                    return out, committed
            if len(out) >= n:
                break
        return out, committed

    def _collect_slow(
        self, c: int, run: _Run, values: list[Any], begin: int, stop: int, out: list[Any]
    ) -> int:
        """Append elements ``begin:stop`` of ``run`` one by one; where it stopped.

        Applies the filter, the converter and the undecodable policy; stops
        before an undecodable element the policy raises for (raising it when
        nothing was collected yet).
        """
        accept, convert = self._accept, self._convert
        first, stamps, subscriber = run.first, run.stamps, self._subscriber
        for i in range(begin, stop):
            value = values[i]
            stamp = stamps + i * ELEMENT_STEP_NS if isinstance(stamps, int) else stamps[i]
            if value is UNDECODABLE:
                error = self._undecodable(c, run, values, i, stamp)
                if not self._policy.should_raise(error):
                    continue
                if out:
                    return i
                run.taken = i  # what the filter passed over stays passed over
                raise error
            try:
                if accept is not None and not accept(value):
                    continue
                if convert is not None:
                    value = convert(value)
            except Exception:
                _log.exception("filter or converter failed on %s:%s: skipped", c, first + i)
                continue
            out.append(new_record(Element, (value, c, first + i, from_ns(stamp), subscriber)))
        return stop

    def _undecodable(
        self, c: int, run: _Run, values: list[Any], i: int, stamp: int
    ) -> UndecodableElementError:
        errors = values.errors if isinstance(values, PartialBatch) else {}
        data = split_blob(run.blob, run.sizes)[i] if run.blob else b""
        return UndecodableElementError(
            self._topic,
            self._type_name,
            trusted_position(c, run.first + i),
            from_ns(stamp),
            data,
            errors.get(i),
        )
