"""Authentication of the protocol's messages: what each message kind seals, in one place.

:class:`Sealer` applies the trailers of :mod:`dcps.wire._auth` to the wire
structs: it knows, per struct, the *kind*, *sender* and *incarnation* the tag
covers, and that the *body* is the struct serialised with an empty ``auth``
field. The writers of :class:`~dcps.wire._transport.Endpoint` call its
``seal_*`` methods on every write (``seal=`` of ``Endpoint.writer``); the
store's request loop and the client's reply thread call its ``open_*``
methods on every sample they take. A sealer without a key seals nothing and
accepts everything (the store logs :data:`UNAUTHENTICATED_WARNING` then).

==================  ===================  ==============================  =========================
message             kind                 sender                          incarnation
==================  ===================  ==============================  =========================
Request             ``request/<op>``     the client id                   the store addressed
Reply               ``reply``            the store incarnation           the store incarnation
StoreAnnouncement   ``announcement``     its incarnation                 its incarnation
Assignment          ``assignment``       its (coordinator) incarnation   its incarnation
LiveBatch           ``live_batch``       ``<incarnation>/<topic>/<c>``   the store's incarnation
LiveBatch (a map)   ``map_change``       ``<incarnation>/<map name>``    the store's incarnation
==================  ===================  ==============================  =========================

A live push names its channel (or map) in its sender, so each has its own
replay stream: a late joiner takes a channel's kept history, in order, after
having seen other channels' newer pushes.
"""

from __future__ import annotations

import enum
import hmac
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any, Final

from ._auth import (
    MEMBER_TRAILER_BYTES,
    TRAILER_BYTES,
    UNAUTHENTICATED_WARNING,
    AuthenticationError,
    Authenticator,
    Body,
    DropReason,
    RateLimitedLog,
)
from ._auth_keys import (
    ADMIN_KEY_FILE_ENV,
    StoreKey,
    accepted_keys_from_environment,
    key_from_environment,
    load_key,
)
from ._auth_member import MemberOffer, MemberSecret
from ._codes import Op
from ._messages import Assignment, LiveBatch, Reply, Request, StoreAnnouncement

__all__ = [
    "FROM_ENVIRONMENT",
    "KIND_ANNOUNCEMENT",
    "KIND_ASSIGNMENT",
    "KIND_LIVE_BATCH",
    "KIND_MAP_CHANGE",
    "KIND_REPLY",
    "UNAUTHENTICATED_WARNING",
    "KeyOption",
    "Sealer",
    "authenticator",
    "request_kind",
]

KIND_REPLY: Final = "reply"
KIND_ANNOUNCEMENT: Final = "announcement"
KIND_ASSIGNMENT: Final = "assignment"
KIND_LIVE_BATCH: Final = "live_batch"
KIND_MAP_CHANGE: Final = "map_change"
_REQUEST_KINDS = {int(op): f"request/{op.name.lower()}" for op in Op}
#: Distinct announcements (verified or refused) remembered, so re-reading one costs nothing.
_ANNOUNCEMENT_MEMORY = 1024
_CDR_LE: Final = b"\x00\x01\x00\x00"  # the XCDR1 little-endian header, no options
_NO_AUTH: Final = bytes(4)  # an empty ``auth`` (a zero length): how a body ends
_PADDING: Final = tuple(bytes(n) for n in range(4))


class _FromEnvironment(enum.Enum):
    FROM_ENVIRONMENT = "from the environment"


#: Default of the ``key``/``admin_key`` options: read the file the environment names.
FROM_ENVIRONMENT: Final = _FromEnvironment.FROM_ENVIRONMENT
#: A key option: a key, a key file's path, None (no key) or :data:`FROM_ENVIRONMENT`.
KeyOption = StoreKey | str | os.PathLike[str] | None | _FromEnvironment


def _resolve(option: KeyOption, variable: str | None) -> StoreKey | None:
    if option is FROM_ENVIRONMENT:
        return key_from_environment() if variable is None else key_from_environment(variable)
    if option is None or isinstance(option, StoreKey):
        return option
    assert not isinstance(option, _FromEnvironment)
    return load_key(option)


def authenticator(
    key: KeyOption = FROM_ENVIRONMENT,
    admin_key: KeyOption = FROM_ENVIRONMENT,
    *,
    log: RateLimitedLog | None = None,
) -> Authenticator | None:
    """The authenticator of a namespace key (None: no key, nothing is authenticated).

    ``key`` and ``admin_key`` are keys, key file paths, None, or
    :data:`FROM_ENVIRONMENT` (``DCPS_STORE_KEY_FILE`` and
    ``DCPS_STORE_ADMIN_KEY_FILE``); keys of a rotation come from
    ``DCPS_STORE_ACCEPTED_KEY_FILES``. A bad key file raises
    :class:`~dcps.wire._auth_keys.KeyFileError` naming it.
    """
    namespace_key = _resolve(key, None)
    if namespace_key is None:
        return None
    return Authenticator(
        namespace_key,
        admin_key=_resolve(admin_key, ADMIN_KEY_FILE_ENV),
        accepted_keys=accepted_keys_from_environment(),
        log=log,
    )


def request_kind(op: int) -> str:
    """The authentication kind of a request of wire kind ``op``."""
    kind = _REQUEST_KINDS.get(op)
    return f"request/{op}" if kind is None else kind


def _body(message: Any) -> bytes:
    """``message`` serialised (XCDR1) with an empty ``auth``: what its tag covers."""
    trailer, message.auth = message.auth, b""
    try:
        return bytes(message.serialize())
    finally:
        message.auth = trailer


def _received_body(message: Any) -> Body:
    """:func:`_body` of a message taken from DDS, in place in its CDR bytes when it kept them.

    ``auth`` is the last field: a uint32 length then its octets (then, when
    the writer padded the sample to 4 bytes, padding), so the body is an
    unpadded CDR header, the bytes before that length, then a zero length:
    three parts, the middle one a view of the received bytes (no copy).
    (Without this fast path the receiver serialises the sample again: ~20 us
    per message.)
    """
    wire: bytes | None = getattr(message, "_wire", None)
    auth: bytes = message.auth
    if wire is not None:
        n = len(auth)
        for end in (len(wire), len(wire) - (-n % 4)):  # as written by _wire; padded
            start = end - n
            if (
                start >= 8
                and wire[start:end] == auth
                and int.from_bytes(wire[start - 4 : start], "little") == n
            ):
                return (_CDR_LE, memoryview(wire)[4 : start - 4], _NO_AUTH)
    return _body(message)


def _wire(body: bytes, trailer: bytes) -> bytes | None:
    """The XCDR1 bytes of a message whose :func:`_body` is ``body``, ``auth`` set to
    ``trailer``, zero-padded to a multiple of 4 bytes as writers send samples (one copy
    of the body; the writer sends these bytes as they are)."""
    if body[:2] != b"\x00\x01" or body[-4:] != _NO_AUTH:
        return None
    n = len(trailer)
    pad = _PADDING[-(len(body) + n) % 4]
    return b"".join((memoryview(body)[:-4], n.to_bytes(4, "little"), trailer, pad))


class Sealer:
    """Seals and opens the protocol's messages under one optional :class:`Authenticator`.

    Thread-safe. Refusals are counted (:meth:`drops`) and logged at WARNING,
    at most once per reason per 10 s.
    """

    def __init__(self, auth: Authenticator | None, log: RateLimitedLog | None = None) -> None:
        self.auth = auth
        self._log = log if log is not None else RateLimitedLog()
        self._lock = threading.Lock()
        self._announcements: OrderedDict[tuple[str, bytes], bool] = OrderedDict()
        self._proof_drops = 0  # JOINs of a live member without its proof
        self._dropped: dict[DropReason, int] = {}  # refusals judged outside the authenticator

    @classmethod
    def from_keys(
        cls, key: KeyOption = FROM_ENVIRONMENT, admin_key: KeyOption = FROM_ENVIRONMENT
    ) -> Sealer:
        """A sealer of the namespace ``key`` (see :func:`authenticator`; None: no key)."""
        log = RateLimitedLog()
        return cls(authenticator(key, admin_key, log=log), log)

    @property
    def enabled(self) -> bool:
        """True when messages are sealed and checked (the namespace has a key)."""
        return self.auth is not None

    def drops(self) -> dict[DropReason, int]:
        """Messages refused so far, per reason (all zero without a key)."""
        if self.auth is None:
            return dict.fromkeys(DropReason, 0)
        drops = self.auth.drops()
        with self._lock:
            drops[DropReason.BAD_MEMBER_PROOF] += self._proof_drops
            for reason, count in self._dropped.items():
                drops[reason] += count
        return drops

    def refused(self, exc: AuthenticationError) -> None:
        """Log a refusal (rate-limited)."""
        self._log.warning(exc.reason, f"dropped: {exc}")

    def drop(self, exc: AuthenticationError) -> None:
        """Count and log (rate-limited) a refusal judged by the caller, e.g. a store that
        did not answer the ping that would have confirmed its announcement."""
        with self._lock:
            self._dropped[exc.reason] = self._dropped.get(exc.reason, 0) + 1
        self.refused(exc)

    # -- member secrets --------------------------------------------------------------

    def member_offer(self) -> MemberOffer | None:
        """A joining member's key-exchange offer (None without a key)."""
        return None if self.auth is None else self.auth.member_offer()

    def answer_member_offer(
        self, offer: bytes, *, group: str, member: str, incarnation: str
    ) -> tuple[bytes, MemberSecret | None]:
        """The store's side of a JOIN's exchange: its public value and the member's secret."""
        if self.auth is None:
            return b"", None
        return self.auth.answer_member_offer(
            offer, group=group, member=member, incarnation=incarnation
        )

    # -- requests (client seals, store opens) ----------------------------------------

    def seal_request(
        self, request: Request, incarnation: str, member: MemberSecret | None = None
    ) -> bytes | None:
        """Seal ``request`` for the store ``incarnation`` (with ``member``'s proof if given).

        Returns its XCDR1 bytes, sealed (None without a key), so a writer need
        not serialise it again. Raises :class:`~dcps.PreconditionNotMetError`
        for a member kind without ``member`` or an admin kind without the admin key.
        """
        if self.auth is None:
            return None
        request.auth = b""
        body = bytes(request.serialize())  # what the tag covers (see _body)
        request.auth = self.auth.seal(
            request_kind(request.op), request.client, body, incarnation=incarnation, member=member
        )
        return _wire(body, request.auth)

    def open_request(
        self,
        request: Request,
        incarnation: str,
        member: MemberSecret | None = None,
        *,
        proof_required: bool = False,
    ) -> None:
        """Check that ``request`` is an authentic, fresh request to store ``incarnation``.

        For member kinds ``member`` is the secret kept for the member the
        request names (None: not known). ``proof_required`` demands ``member``'s
        proof on any kind (a JOIN naming a live member; refused when ``member`` is None,
        i.e. the receiver forgot that member's secret). Raises
        :class:`AuthenticationError` (counted; not logged: see :meth:`refused`).
        """
        if self.auth is None:
            return
        kind = request_kind(request.op)
        self.auth.open(
            kind,
            request.client,
            _received_body(request),
            request.auth,
            incarnation=incarnation,
            member=member,
        )
        if proof_required and member is None and kind not in self.auth.member_kinds:
            with self._lock:
                reason = DropReason.UNKNOWN_MEMBER
                self._dropped[reason] = self._dropped.get(reason, 0) + 1
            raise AuthenticationError(
                DropReason.UNKNOWN_MEMBER,
                kind=kind,
                sender=request.client,
                detail=f"member {request.member!r} is live but its secret is no longer kept "
                "(forgotten): it may subscribe again once it left or timed out",
            )
        if proof_required and member is not None and kind not in self.auth.member_kinds:
            trailer = request.auth
            if len(trailer) != MEMBER_TRAILER_BYTES or not hmac.compare_digest(
                trailer[TRAILER_BYTES:], member.proof(trailer[:TRAILER_BYTES])
            ):
                with self._lock:
                    self._proof_drops += 1
                raise AuthenticationError(
                    DropReason.BAD_MEMBER_PROOF,
                    kind=kind,
                    sender=request.client,
                    detail=f"member {request.member!r} is live and joined from another client",
                )

    # -- replies (store seals, client opens) ------------------------------------------

    def seal_reply(self, reply: Reply, incarnation: str) -> bytes | None:
        """Seal ``reply`` as coming from store ``incarnation``; its sealed XCDR1 bytes."""
        if self.auth is None:
            return None
        reply.auth = b""
        body = bytes(reply.serialize())  # what the tag covers (see _body)
        reply.auth = self.auth.seal(KIND_REPLY, incarnation, body, incarnation=incarnation)
        return _wire(body, reply.auth)

    def accept_reply(self, reply: Reply, incarnation: str) -> bool:
        """True when ``reply`` comes, fresh, from store ``incarnation`` (refusals logged)."""
        if self.auth is None:
            return True
        return self.auth.accept(
            KIND_REPLY, incarnation, _received_body(reply), reply.auth, incarnation=incarnation
        )

    # -- announcements and assignments (store seals, stores and clients open) ---------

    def seal_announcement(self, announcement: StoreAnnouncement) -> None:
        """Seal a store's announcement of itself."""
        if self.auth is None:
            return
        inc = announcement.incarnation
        announcement.auth = b""
        announcement.auth = self.auth.seal(
            KIND_ANNOUNCEMENT, inc, _body(announcement), incarnation=inc
        )

    def verified_announcements(
        self, announcements: Iterable[StoreAnnouncement]
    ) -> list[StoreAnnouncement]:
        """The announcements that verify (all without a key).

        Announcements are re-read while they live; each distinct one is
        checked (and a forgery counted and logged) once.
        """
        if self.auth is None:
            return list(announcements)
        out = []
        for a in announcements:
            memo = (a.incarnation, bytes(a.auth))
            with self._lock:
                known = self._announcements.get(memo)
            if known is None:
                known = self.auth.accept(
                    KIND_ANNOUNCEMENT,
                    a.incarnation,
                    _body(a),
                    a.auth,
                    incarnation=a.incarnation,
                )
                with self._lock:
                    self._announcements[memo] = known
                    while len(self._announcements) > _ANNOUNCEMENT_MEMORY:
                        self._announcements.popitem(last=False)
            if known:
                out.append(a)
        return out

    def seal_assignment(self, assignment: Assignment) -> None:
        """Seal a coordinator's assignment (``assignment.incarnation`` is the coordinator's)."""
        if self.auth is None:
            return
        inc = assignment.incarnation
        assignment.auth = b""
        assignment.auth = self.auth.seal(KIND_ASSIGNMENT, inc, _body(assignment), incarnation=inc)

    def accept_assignment(self, assignment: Assignment) -> bool:
        """True when ``assignment`` was sealed by the coordinator it names (refusals logged)."""
        if self.auth is None:
            return True
        inc = assignment.incarnation
        return self.auth.accept(
            KIND_ASSIGNMENT, inc, _body(assignment), assignment.auth, incarnation=inc
        )

    # -- live pushes (store seals, subscribers and map watches open) -------------------

    def seal_live(self, batch: LiveBatch, incarnation: str) -> bytes | None:
        """Seal a channel's live batch from store ``incarnation``; its sealed XCDR1 bytes."""
        return self._seal_push(
            KIND_LIVE_BATCH, batch, f"{incarnation}/{batch.topic}/{batch.channel}", incarnation
        )

    def accept_live(self, batch: LiveBatch, incarnation: str, topic: str, channel: int) -> bool:
        """True when ``batch`` was pushed by store ``incarnation`` for channel ``channel`` of
        ``topic`` (where the receiver took it from) and not seen before.

        A forgery, a replay, a push of another incarnation, or a genuine push of
        another topic or channel written again where this one's are read (its
        tag names its own channel's stream) is counted and logged
        (rate-limited). Always True without a key.
        """
        return self._accept_push(
            KIND_LIVE_BATCH, batch, f"{incarnation}/{topic}/{channel}", incarnation
        )

    def seal_map_change(self, push: LiveBatch, incarnation: str) -> bytes | None:
        """Seal a map's change push (``push.topic`` is the map) from store ``incarnation``."""
        return self._seal_push(KIND_MAP_CHANGE, push, f"{incarnation}/{push.topic}", incarnation)

    def accept_map_change(self, push: LiveBatch, incarnation: str, name: str) -> bool:
        """:meth:`accept_live` for a change push of map ``name`` (the watched map)."""
        return self._accept_push(KIND_MAP_CHANGE, push, f"{incarnation}/{name}", incarnation)

    def _seal_push(self, kind: str, push: LiveBatch, sender: str, incarnation: str) -> bytes | None:
        if self.auth is None:
            return None
        push.auth = b""
        body = bytes(push.serialize())  # what the tag covers (see _body)
        push.auth = self.auth.seal(kind, sender, body, incarnation=incarnation)
        return _wire(body, push.auth)

    def _accept_push(self, kind: str, push: LiveBatch, sender: str, incarnation: str) -> bool:
        if self.auth is None:
            return True
        return self.auth.accept(
            kind, sender, _received_body(push), push.auth, incarnation=incarnation
        )
