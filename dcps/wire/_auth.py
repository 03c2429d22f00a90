"""Message authentication for the store protocol: seal and open trailers of HMAC-SHA256.

Every message of a namespace that has a key travels with a *trailer*
(:data:`TRAILER_BYTES` bytes, :data:`MEMBER_TRAILER_BYTES` with a member
proof)::

    version u8 | flags u8 | key id 4 | counter u64 | timestamp i64 (ns, wall clock) | tag 32
    [| member proof 32]        (flags bit 0)

``tag = HMAC-SHA256(key, label || header || kind || sender || incarnation ||
body)`` (strings length-prefixed, so no two field splits give the same bytes):

* ``kind`` separates domains: a request of one kind, a reply, an
  announcement... can never pass for another kind;
* ``sender`` is the client id (requests) or the store incarnation (the rest);
* ``incarnation`` is the store incarnation the message is addressed to
  (requests) or comes from (replies, announcements, assignments): a client
  accepts replies only from the store instance it connected to, and a
  restarted store refuses requests captured on its predecessor;
* ``counter`` and ``timestamp`` give freshness (a window, default 30 s, and a
  clock-skew allowance for the future, default 10 s) and replay protection
  (:class:`~dcps.wire._auth_replay.ReplayTable`);
* the member proof (:mod:`dcps.wire._auth_member`) is an HMAC with the
  member's own secret over the header and tag, so a commit, seek, heartbeat or
  leave is accepted only from the member that joined.

Kinds named in ``admin_kinds`` are sealed with the admin key instead of the
namespace key. Kinds in ``durable_kinds`` (transient-local state: store
announcements, group assignments, and the live pushes of channels and maps,
whose writers keep a history for late joiners) skip the freshness window,
since a late joiner legitimately receives old ones; the protocol orders those
by their own incarnation/generation, offset or revision. The replay table
still refuses a second copy of one.

Receivers call :meth:`Authenticator.accept`, which counts and logs each drop
(one line per reason per ``log_interval``); :meth:`Authenticator.open` raises
:class:`AuthenticationError` instead. Checks run cheapest first and a message
whose tag does not verify never touches the replay table, so forgeries cost
one HMAC and no memory.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import itertools
import logging
import struct
import threading
import time
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TypeAlias

from idl._errors import PreconditionNotMetError

from ._auth_errors import AuthenticationError, DropReason
from ._auth_keys import ADMIN_KEY_FILE_ENV, StoreKey
from ._auth_member import MemberOffer, MemberSecret, answer_member_offer
from ._auth_replay import ReplayTable

__all__ = [
    "DEFAULT_ADMIN_KINDS",
    "DEFAULT_DURABLE_KINDS",
    "DEFAULT_MEMBER_KINDS",
    "MEMBER_TRAILER_BYTES",
    "TRAILER_BYTES",
    "UNAUTHENTICATED_WARNING",
    "AuthenticationError",
    "Authenticator",
    "Body",
    "DropReason",
    "RateLimitedLog",
]

_log = logging.getLogger("dcps.wire.auth")

_VERSION = 1
_FLAG_MEMBER = 1
_HEADER = struct.Struct("!BB4sQq")
_TAG_BYTES = 32
#: Size of a trailer without member proof.
TRAILER_BYTES = _HEADER.size + _TAG_BYTES
#: Size of a trailer with a member proof.
MEMBER_TRAILER_BYTES = TRAILER_BYTES + _TAG_BYTES
_LABEL = b"dcps-auth/v1\x00"
_U64 = 2**64

#: Kinds that need the admin key.
DEFAULT_ADMIN_KINDS = frozenset(
    {
        "request/destroy_group",
        "request/reset_group",
        "request/delete_group",
        "request/queue_delete",
        # dcps durables|queues|maps delete, dcps durables reset (dcps/wire/_admin_objects.py)
        "request/delete_durable",
        "request/reset_durable",
        "request/delete_queue",
        "request/delete_map",
    }
)
#: Kinds accepted only with the proof of the member that joined.
DEFAULT_MEMBER_KINDS = frozenset(
    {"request/commit", "request/seek", "request/heartbeat", "request/leave"}
    # a durable subscriber's requests (its secret is agreed at DURABLE_SUBSCRIBE)
    | {"request/durable_poll", "request/durable_ack", "request/durable_rollback"}
    | {"request/durable_close"}
    # a queue consumer's requests (its secret is agreed at QUEUE_SUBSCRIBE)
    | {"request/queue_receive", "request/queue_ack", "request/queue_heartbeat"}
    | {"request/queue_leave"}
)
#: Kinds exempt from the freshness window (transient-local state; the live pushes of a
#: channel or map, whose writers keep a history for late joiners).
DEFAULT_DURABLE_KINDS = frozenset({"announcement", "assignment", "live_batch", "map_change"})

#: What a store without a key logs at start (``%s``: the namespace).
UNAUTHENTICATED_WARNING = (
    "store namespace %r has no key: any participant on the DDS domain can publish, read, "
    "commit, seek, join or leave for others and destroy groups (set DCPS_STORE_KEY_FILE; "
    "see docs/security.md)"
)


#: What a tag covers: the body's bytes, or the body in consecutive parts (so a receiver
#: can hash a message's CDR in place, without copying it into one bytes object).
Body: TypeAlias = bytes | tuple[bytes | memoryview, ...]


def _refusal(kind: str, sender: str, reason: DropReason, detail: str = "") -> AuthenticationError:
    """Why a ``kind`` message of ``sender`` is refused (raised by ``Authenticator._open``)."""
    return AuthenticationError(reason, kind=kind, sender=sender, detail=detail)


def _lp(text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    return len(raw).to_bytes(4, "big") + raw


@functools.lru_cache(maxsize=4096)
def _names(kind: str, sender: str, incarnation: str) -> bytes:
    """The length-prefixed names of a message (cached: a process uses few combinations)."""
    return _lp(kind) + _lp(sender) + _lp(incarnation)


#: Bodies are hashed in slices shorter than this. hashlib releases the GIL while it hashes
#: 2 KiB or more (CPython's HASHLIB_GIL_MINSIZE) and the thread must then queue for the GIL
#: again: in a busy client (publisher, reply and subscriber threads) that wait, up to the
#: 5 ms switch interval, was most of the cost of authentication (verifying a live batch of
#: ~400 elements took 280-340 us of wall time for 40 us of CPU; 60-80 us in slices).
_SLICE = 2040


class _Mac:
    """HMAC-SHA256 under one key, its padded-key hash states computed once.

    Same result as ``hmac.digest(key, label + header + names + body)``
    (RFC 2104), without concatenating the body or re-deriving the padded key
    per message: about half the cost of ``hmac.digest`` for a small message.
    """

    __slots__ = ("_inner", "_outer")

    def __init__(self, secret: bytes) -> None:
        if len(secret) > 64:
            secret = hashlib.sha256(secret).digest()
        padded = secret.ljust(64, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in padded))
        self._inner.update(_LABEL)
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in padded))

    def tag(self, header: bytes, names: bytes, body: Body) -> bytes:
        inner = self._inner.copy()
        inner.update(header)
        inner.update(names)
        for part in body if isinstance(body, tuple) else (body,):
            if len(part) < _SLICE:
                inner.update(part)
            else:
                view = memoryview(part)
                for i in range(0, len(view), _SLICE):
                    inner.update(view[i : i + _SLICE])
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()


class RateLimitedLog:
    """At most one WARNING line per reason per ``interval``; the lines in between are counted.

    Each line that follows a quiet spell says how many were suppressed, so
    a flood shows up as its size, not as its every message.
    """

    def __init__(
        self,
        logger: logging.Logger = _log,
        *,
        interval: timedelta = timedelta(seconds=10),
        clock: Callable[[], int] = time.monotonic_ns,
    ) -> None:
        self._logger = logger
        self._interval_ns = int(interval.total_seconds() * 1e9)
        self._clock = clock
        self._last: dict[object, int] = {}
        self._suppressed: dict[object, int] = {}
        self._lock = threading.Lock()

    def warning(self, reason: object, message: str) -> bool:
        """Log ``message`` unless ``reason`` was logged within the interval; True when logged."""
        now = self._clock()
        with self._lock:
            last = self._last.get(reason)
            if last is not None and now - last < self._interval_ns:
                self._suppressed[reason] = self._suppressed.get(reason, 0) + 1
                return False
            self._last[reason] = now
            suppressed = self._suppressed.pop(reason, 0)
        if suppressed:
            message = f"{message} (and {suppressed} more like it since the last report)"
        self._logger.warning("%s", message)
        return True


class Authenticator:
    """Seals outgoing and opens incoming messages of one store namespace.

    ``key`` seals and opens ordinary kinds; ``accepted_keys`` are also
    accepted when opening (the old key during a rotation); ``admin_key`` seals
    and opens ``admin_kinds`` (without it such kinds cannot be sealed and are
    always refused). ``window`` is the oldest a message may be, ``skew`` how far
    in the future its timestamp may lie. The replay table tracks at most
    ``max_streams`` (kind, sender) streams, each over the last
    ``replay_window`` counters. ``clock`` gives wall-clock nanoseconds (a test
    can move it). Thread-safe.
    """

    def __init__(
        self,
        key: StoreKey,
        *,
        admin_key: StoreKey | None = None,
        accepted_keys: Iterable[StoreKey] = (),
        window: timedelta = timedelta(seconds=30),
        skew: timedelta = timedelta(seconds=10),
        admin_kinds: frozenset[str] = DEFAULT_ADMIN_KINDS,
        member_kinds: frozenset[str] = DEFAULT_MEMBER_KINDS,
        durable_kinds: frozenset[str] = DEFAULT_DURABLE_KINDS,
        max_streams: int = 16384,
        replay_window: int = 4096,
        clock: Callable[[], int] = time.time_ns,
        log: RateLimitedLog | None = None,
    ) -> None:
        self._key = key
        self._admin_key = admin_key
        self._macs = {k.key_id: _Mac(k.secret) for k in (*accepted_keys, key)}
        self._mac = self._macs[key.key_id]
        self._admin_mac = None if admin_key is None else _Mac(admin_key.secret)
        if admin_key is not None and admin_key.key_id in self._macs:
            raise PreconditionNotMetError(
                f"the admin key ({admin_key.source}) must differ from the namespace keys"
            )
        self._window_ns = int(window.total_seconds() * 1e9)
        self._skew_ns = int(skew.total_seconds() * 1e9)
        self.admin_kinds = admin_kinds
        self.member_kinds = member_kinds
        self.durable_kinds = durable_kinds
        self._clock = clock
        self._replays = ReplayTable(max_streams=max_streams, window=replay_window)
        self._log = log if log is not None else RateLimitedLog()
        self._lock = threading.Lock()
        # a restarted sender continues above its old counters; next() is atomic (no lock)
        self._counter = itertools.count(clock() % _U64 + 1)
        self._drops: dict[DropReason, int] = dict.fromkeys(DropReason, 0)

    @property
    def key(self) -> StoreKey:
        """The namespace key messages are sealed with."""
        return self._key

    @property
    def tracked_streams(self) -> int:
        """How many (kind, sender) streams the replay table holds now."""
        return len(self._replays)

    def drops(self) -> dict[DropReason, int]:
        """How many messages were refused so far, per reason (a snapshot)."""
        with self._lock:
            return dict(self._drops)

    # -- sealing ---------------------------------------------------------------

    def seal(
        self,
        kind: str,
        sender: str,
        body: Body,
        *,
        incarnation: str,
        member: MemberSecret | None = None,
    ) -> bytes:
        """The trailer that authenticates ``body`` as a ``kind`` message of ``sender``.

        ``member`` is required for member kinds (the secret from JOIN). Raises
        :class:`PreconditionNotMetError` for an admin kind without an admin key
        or a member kind without a member secret.
        """
        if kind in self.admin_kinds:
            if self._admin_key is None or self._admin_mac is None:
                raise PreconditionNotMetError(
                    f"{kind} needs the admin key (set {ADMIN_KEY_FILE_ENV})"
                )
            key, mac = self._admin_key, self._admin_mac
        else:
            key, mac = self._key, self._mac
        if kind in self.member_kinds and member is None:
            raise PreconditionNotMetError(f"{kind} needs the member secret agreed at JOIN")
        counter = next(self._counter) % _U64
        header = _HEADER.pack(
            _VERSION, _FLAG_MEMBER if member is not None else 0, key.key_id, counter, self._clock()
        )
        sealed = header + mac.tag(header, _names(kind, sender, incarnation), body)
        if member is None:
            return sealed
        return sealed + member.proof(sealed)

    # -- opening ---------------------------------------------------------------

    def open(
        self,
        kind: str,
        sender: str,
        body: Body,
        trailer: bytes,
        *,
        incarnation: str,
        member: MemberSecret | None = None,
    ) -> None:
        """Check that ``trailer`` authenticates ``body`` as a fresh ``kind`` message of ``sender``.

        For member kinds pass the secret the receiver keeps for the member the
        message names (None when it knows no such member: refused as
        ``UNKNOWN_MEMBER`` once the namespace tag has verified, so the
        receiver may answer "not a member" to an authentic sender). Raises
        :class:`AuthenticationError` (and counts the drop); records the
        counter, so each message opens once.
        """
        try:
            self._open(kind, sender, body, trailer, incarnation, member)
        except AuthenticationError as exc:
            with self._lock:
                self._drops[exc.reason] += 1
            raise

    def accept(
        self,
        kind: str,
        sender: str,
        body: Body,
        trailer: bytes,
        *,
        incarnation: str,
        member: MemberSecret | None = None,
    ) -> bool:
        """:meth:`open`, but a refusal is counted, logged (rate-limited) and returned as False."""
        try:
            self._open(kind, sender, body, trailer, incarnation, member)
        except AuthenticationError as exc:
            with self._lock:
                self._drops[exc.reason] += 1
            self._log.warning(exc.reason, f"dropped: {exc}")
            return False
        return True

    def _open(
        self,
        kind: str,
        sender: str,
        body: Body,
        trailer: bytes,
        incarnation: str,
        member: MemberSecret | None,
    ) -> None:
        if len(trailer) not in (TRAILER_BYTES, MEMBER_TRAILER_BYTES):
            raise _refusal(kind, sender, DropReason.MALFORMED, f"trailer of {len(trailer)} bytes")
        version, flags, key_id, counter, stamp = _HEADER.unpack_from(trailer)
        if version != _VERSION or flags & ~_FLAG_MEMBER:
            raise _refusal(
                kind, sender, DropReason.MALFORMED, f"trailer version {version}, flags {flags}"
            )
        if bool(flags & _FLAG_MEMBER) != (len(trailer) == MEMBER_TRAILER_BYTES):
            raise _refusal(
                kind, sender, DropReason.MALFORMED, "member flag and trailer size disagree"
            )
        if kind in self.admin_kinds:
            admin = self._admin_key
            if admin is None or self._admin_mac is None or key_id != admin.key_id:
                raise _refusal(kind, sender, DropReason.ADMIN_KEY_REQUIRED)
            mac = self._admin_mac
        else:
            found = self._macs.get(key_id)
            if found is None:
                raise _refusal(kind, sender, DropReason.UNKNOWN_KEY, f"key id {key_id.hex()}")
            mac = found
        durable = kind in self.durable_kinds
        if not durable:
            age = self._clock() - stamp
            if age > self._window_ns:
                raise _refusal(
                    kind,
                    sender,
                    DropReason.STALE,
                    f"{age / 1e9:.1f} s old, window {self._window_ns / 1e9:g} s",
                )
            if -age > self._skew_ns:
                raise _refusal(
                    kind,
                    sender,
                    DropReason.FUTURE,
                    f"{-age / 1e9:.1f} s in the future, allowed skew {self._skew_ns / 1e9:g} s"
                    " (are the hosts' clocks synchronised?)",
                )
        header = trailer[: _HEADER.size]
        tag = trailer[_HEADER.size : TRAILER_BYTES]
        expected = mac.tag(header, _names(kind, sender, incarnation), body)
        if not hmac.compare_digest(tag, expected):
            raise _refusal(
                kind, sender, DropReason.BAD_TAG, "tampered, or another key or store incarnation"
            )
        if kind in self.member_kinds:
            if member is None:
                raise _refusal(kind, sender, DropReason.UNKNOWN_MEMBER)
            if len(trailer) != MEMBER_TRAILER_BYTES:
                raise _refusal(kind, sender, DropReason.BAD_MEMBER_PROOF, "no member proof")
            proof = member.proof(trailer[:TRAILER_BYTES])
            if not hmac.compare_digest(trailer[TRAILER_BYTES:], proof):
                raise _refusal(
                    kind, sender, DropReason.BAD_MEMBER_PROOF, f"not from member {member.member!r}"
                )
        if not self._replays.accept((kind, sender), counter, stamp, floor=not durable):
            raise _refusal(kind, sender, DropReason.REPLAYED, f"counter {counter}")

    # -- member secrets ----------------------------------------------------------

    def member_offer(self) -> MemberOffer:
        """A joining member's key-exchange offer (its ``public`` goes into the JOIN request)."""
        return MemberOffer()

    def answer_member_offer(
        self, client_public: bytes, *, group: str, member: str, incarnation: str
    ) -> tuple[bytes, MemberSecret]:
        """Store side of a JOIN: the public value for the reply, and the member's secret to keep.

        Call it only for a JOIN request that :meth:`accept` passed. Raises
        :class:`AuthenticationError` (``BAD_KEY_EXCHANGE``, counted) for a bad
        public value.
        """
        try:
            return answer_member_offer(
                client_public, group=group, member=member, incarnation=incarnation
            )
        except AuthenticationError as exc:
            with self._lock:
                self._drops[exc.reason] += 1
            raise

    def finish_member_offer(
        self, offer: MemberOffer, store_public: bytes, *, group: str, member: str, incarnation: str
    ) -> MemberSecret:
        """Member side of a JOIN: the member secret, from the store's public value in the reply."""
        return offer.finish(store_public, group=group, member=member, incarnation=incarnation)
