"""Before a store yields its share to another, it confirms that the other is alive.

Store announcements are transient-local state, so they are exempt from the
freshness window of :mod:`dcps.wire._auth`: a *genuine* announcement of a
store that has died since can be captured and written again by anyone on the
domain, and it still verifies. Were a store to stop on such an announcement
alone (an older store of its share seems to be back), a replayer could stop
every live store of a keyed namespace.

So a keyed store that finds an overlapping, older store in the announcements
(:func:`~dcps.store._shares.share_conflict_with`) first sends that store a
PING sealed for the announced incarnation (a fresh counter and timestamp,
addressed to one client id that names this store and to a random request id)
and yields only when a reply to *that* request comes back sealed by *that*
incarnation within :data:`PROBE_TIMEOUT` seconds. Such a reply cannot be
replayed: no earlier reply names this prober's client id and request id, and
every reply is fresh-checked. A store that does not answer is not alive: its
announcement is ignored (counted as
:attr:`~dcps.wire._auth_errors.DropReason.UNCONFIRMED_STORE` and logged) until
:data:`REPROBE_AFTER` seconds have passed, when it is asked again.

Without a key nothing can be confirmed (anyone could answer for any store), so
an unkeyed store yields to the announcement alone, as it always did.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from dcps.wire._auth import AuthenticationError
from dcps.wire._auth_errors import DropReason
from dcps.wire._messages import Reply, StoreAnnouncement
from dcps.wire._names import REPLY_QOS, REQUEST_WRITER_QOS, reply_partition, request_partition
from dcps.wire._requests import PingRequest
from dcps.wire._sealing import Sealer
from dcps.wire._transport import Endpoint, drop_endpoint

__all__ = ["PROBE_TIMEOUT", "REPROBE_AFTER", "LivenessProbe", "probe_client_id"]

#: Seconds an announced store has to answer the probe before it counts as dead.
PROBE_TIMEOUT = 1.5
#: Seconds a store that did not answer is ignored before it is asked again.
REPROBE_AFTER = 10.0
#: Seconds between re-sent pings of one probe (the first may go out before DDS matched).
_RESEND = 0.2


def probe_client_id(incarnation: str) -> str:
    """The client id a store's probes use (its own request loop ignores requests of it)."""
    return f"dcps-store-probe-{incarnation}"


class _Probe:
    __slots__ = ("deadline", "next_send", "request_ids")

    def __init__(self, now: float) -> None:
        self.deadline = now + PROBE_TIMEOUT
        self.next_send = now
        self.request_ids: set[int] = set()


class LivenessProbe:
    """Asks announced stores of this share's request partition whether they are alive.

    Not thread-safe: the store's service thread uses it (and its start, before that).
    """

    def __init__(
        self, endpoint: Endpoint, namespace: str, sealer: Sealer, incarnation: str
    ) -> None:
        self.client = probe_client_id(incarnation)
        self._endpoint = endpoint
        self._namespace = namespace
        self._sealer = sealer
        self._writers: dict[tuple[int, int], Any] = {}
        self._replies = endpoint.reader(
            endpoint.reply_topic, reply_partition(namespace, self.client), REPLY_QOS
        )
        self._probes: dict[str, _Probe] = {}
        self._alive: set[str] = set()
        self._dead: dict[str, float] = {}  # incarnation -> when to ask again
        #: Announcements ignored because their store did not answer.
        self.unconfirmed = 0

    def verdict(self, other: StoreAnnouncement) -> bool | None:
        """True: ``other`` answered (alive); False: it did not (ignore it); None: asking."""
        inc = other.incarnation
        if inc in self._alive:
            return True
        now = time.monotonic()
        again = self._dead.get(inc)
        if again is not None:
            if now < again:
                return False
            del self._dead[inc]
        self._collect()
        if inc in self._alive:
            self._probes.pop(inc, None)
            return True
        probe = self._probes.get(inc)
        if probe is None:
            probe = self._probes[inc] = _Probe(now)
        if now >= probe.deadline:
            del self._probes[inc]
            self._dead[inc] = now + REPROBE_AFTER
            self.unconfirmed += 1
            self._sealer.drop(
                AuthenticationError(
                    DropReason.UNCONFIRMED_STORE,
                    kind="announcement",
                    sender=inc,
                    detail=f"store {other.index}/{other.count} (pid {other.pid} on {other.host}) "
                    f"did not answer a sealed ping within {PROBE_TIMEOUT:g} s: not yielding to "
                    "it (a replayed announcement of a store that is gone?)",
                )
            )
            return False
        if now >= probe.next_send:
            probe.next_send = now + _RESEND
            request_id = secrets.randbits(62)
            probe.request_ids.add(request_id)
            self._send(other, request_id)
        return None

    def wait(self, other: StoreAnnouncement) -> bool:
        """:meth:`verdict`, blocking until it is known (at most :data:`PROBE_TIMEOUT` s)."""
        while True:
            verdict = self.verdict(other)
            if verdict is not None:
                return verdict
            time.sleep(0.01)

    def _send(self, other: StoreAnnouncement, request_id: int) -> None:
        share = (other.index, other.count)
        writer = self._writers.get(share)
        if writer is None:
            ep = self._endpoint
            writer = self._writers[share] = ep.writer(
                ep.request_topic, request_partition(self._namespace, *share), REQUEST_WRITER_QOS
            )
        request = PingRequest().to_wire(self.client, request_id)
        self._sealer.seal_request(request, other.incarnation)  # sets ``request.auth``
        writer.write(request)

    def _collect(self) -> None:
        """Take the replies; an authentic answer to one of our pings marks its store alive."""
        for reply in self._replies.take(N=64):
            if not isinstance(reply, Reply) or reply.client != self.client:
                continue
            inc = reply.text
            probe = self._probes.get(inc)
            if probe is None or reply.request_id not in probe.request_ids:
                continue
            if self._sealer.accept_reply(reply, inc):
                self._alive.add(inc)

    def close(self) -> None:
        """Delete the probe's readers and writers."""
        for writer in self._writers.values():
            drop_endpoint(writer)
        self._writers.clear()
        drop_endpoint(self._replies)
