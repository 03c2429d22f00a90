"""Why a message failed authentication: :class:`DropReason`, :class:`AuthenticationError`."""

from __future__ import annotations

import enum

from idl._errors import IllegalOperationError

__all__ = ["AuthenticationError", "DropReason"]


class DropReason(enum.Enum):
    """Why a message failed authentication (one drop counter each)."""

    #: No trailer, or one of the wrong size or version.
    MALFORMED = "malformed"
    #: Signed with a key this receiver does not hold (another namespace, a retired key).
    UNKNOWN_KEY = "unknown key"
    #: An admin kind not signed with the admin key, or a receiver without an admin key.
    ADMIN_KEY_REQUIRED = "admin key required"
    #: The tag does not verify: tampered kind, sender, incarnation, body or trailer.
    BAD_TAG = "bad tag"
    #: Timestamp older than the freshness window.
    STALE = "stale"
    #: Timestamp further in the future than the allowed clock skew.
    FUTURE = "future"
    #: Counter already accepted on this stream, or too far behind to tell.
    REPLAYED = "replayed"
    #: A member kind whose receiver knows no secret for the member (not joined, expelled).
    UNKNOWN_MEMBER = "unknown member"
    #: A member kind without a member proof, or with one that does not verify.
    BAD_MEMBER_PROOF = "bad member proof"
    #: A key-exchange value in a JOIN or its reply is out of range.
    BAD_KEY_EXCHANGE = "bad key exchange"
    #: A verified announcement of a store that did not answer a fresh, sealed ping
    #: (a replayed announcement of a store that is gone): not yielded to.
    UNCONFIRMED_STORE = "unconfirmed store"


class AuthenticationError(IllegalOperationError):
    """A message failed authentication; ``reason``, ``kind`` and ``sender`` say which and why.

    ``kind`` and ``sender`` are as the message claims them (unverified).
    """

    def __init__(self, reason: DropReason, *, kind: str, sender: str, detail: str = "") -> None:
        text = f"{kind} message from {sender!r} refused: {reason.value}"
        super().__init__(f"{text} ({detail})" if detail else text)
        self.reason = reason
        self.kind = kind
        self.sender = sender
