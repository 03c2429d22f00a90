"""Per-member secrets, agreed at JOIN by a Diffie-Hellman exchange under the namespace key.

Why not the simpler choices:

* ``HMAC(key, "member" || group || member || incarnation)`` can be computed by
  every holder of the namespace key, so it would stop nobody the namespace
  tag does not already stop.
* A random secret returned in the JOIN reply travels in clear (the protocol
  has no encryption); anyone reading the reply partition would learn it.

So the member and the store each pick a private exponent and exchange the
public values (RFC 3526 group 14, 2048-bit MODP, generator 2) inside the JOIN
request and its reply, both sealed with the namespace key. The member secret
is ``HMAC(g^xy, label || group || member || incarnation || X || Y)``: it needs
one of the private exponents, which never leave their processes. (The
namespace key is deliberately not an input: during a key rotation the member
and the store may seal with different keys, and the exchange is already
authenticated by the namespace tags on the JOIN request and reply.) A
participant that only sees DDS traffic cannot compute it, even one holding the
namespace key. What it does not resist: a
holder of the namespace key who can intercept and replace the JOIN exchange
itself (an active man in the middle on the network path) -- see
``docs/security.md``.

Cost: one modular exponentiation per side for the public value and one for the
shared value, ~2 ms each in CPython; once per join.
"""

from __future__ import annotations

import hmac
import secrets

import attrs

from ._auth_errors import AuthenticationError, DropReason

__all__ = ["PUBLIC_VALUE_BYTES", "MemberOffer", "MemberSecret", "answer_member_offer"]

#: RFC 3526 2048-bit MODP group (id 14), generator 2.
_P = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74"
    "020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F1437"
    "4FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF05"
    "98DA48361C55D39A69163FA8FD24CF5F83655D23DCA3AD961C62F356208552BB"
    "9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF695581718"
    "3995497CEA956AE515D2261898FA051015728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
_G = 2
#: Size of a public key-exchange value on the wire (big-endian, fixed width).
PUBLIC_VALUE_BYTES = 256
_EXPONENT_BITS = 256  # 128-bit security, as the group offers
_LABEL = b"dcps-member/v1\x00"
_PROOF_LABEL = b"dcps-member-proof/v1\x00"


def _private_exponent() -> int:
    return secrets.randbits(_EXPONENT_BITS) | (1 << (_EXPONENT_BITS - 1))


def _encode(value: int) -> bytes:
    return value.to_bytes(PUBLIC_VALUE_BYTES, "big")


def _decode(public: bytes, *, member: str) -> int:
    """The peer's public value, refused unless it lies in ``2 .. p-2`` (no trivial subgroup)."""
    if len(public) != PUBLIC_VALUE_BYTES:
        raise AuthenticationError(
            DropReason.BAD_KEY_EXCHANGE,
            kind="join",
            sender=member,
            detail=f"public value of {len(public)} bytes, not {PUBLIC_VALUE_BYTES}",
        )
    value = int.from_bytes(public, "big")
    if not 1 < value < _P - 1:
        raise AuthenticationError(
            DropReason.BAD_KEY_EXCHANGE,
            kind="join",
            sender=member,
            detail="public value out of range",
        )
    return value


def _lp(text: str) -> bytes:
    raw = text.encode("utf-8")
    return len(raw).to_bytes(4, "big") + raw


@attrs.frozen(repr=False)
class MemberSecret:
    """The secret one member of one group shares with one store incarnation."""

    key: bytes
    group: str
    member: str
    incarnation: str

    def proof(self, data: bytes) -> bytes:
        """The 32-byte proof over ``data`` (a sealed trailer, whose tag covers the message)."""
        return hmac.digest(self.key, _PROOF_LABEL + data, "sha256")

    def __repr__(self) -> str:  # never show the key
        fields = f"group={self.group!r}, member={self.member!r}, incarnation={self.incarnation!r}"
        return f"MemberSecret({fields})"


def _derive(
    shared: int, client: bytes, store: bytes, group: str, member: str, incarnation: str
) -> MemberSecret:
    data = b"".join((_LABEL, _lp(group), _lp(member), _lp(incarnation), client, store))
    return MemberSecret(hmac.digest(_encode(shared), data, "sha256"), group, member, incarnation)


class MemberOffer:
    """The joining member's half of the exchange: put :attr:`public` in the JOIN request.

    Keep the offer until the JOIN reply arrives, then call :meth:`finish`
    with the store's public value from the (verified) reply.
    """

    def __init__(self) -> None:
        self._exponent = _private_exponent()
        #: The value to send in the JOIN request (:data:`PUBLIC_VALUE_BYTES` bytes).
        self.public = _encode(pow(_G, self._exponent, _P))

    def __repr__(self) -> str:
        return "MemberOffer()"

    def finish(
        self, store_public: bytes, *, group: str, member: str, incarnation: str
    ) -> MemberSecret:
        """The member secret, from the store's public value in the JOIN reply."""
        peer = _decode(store_public, member=member)
        shared = pow(peer, self._exponent, _P)
        return _derive(shared, self.public, store_public, group, member, incarnation)


def answer_member_offer(
    client_public: bytes, *, group: str, member: str, incarnation: str
) -> tuple[bytes, MemberSecret]:
    """The store's half: its public value for the JOIN reply, and the member secret to keep.

    Raises :class:`AuthenticationError` (``BAD_KEY_EXCHANGE``) for a public
    value of the wrong size or out of range.
    """
    peer = _decode(client_public, member=member)
    exponent = _private_exponent()
    store_public = _encode(pow(_G, exponent, _P))
    shared = pow(peer, exponent, _P)
    return store_public, _derive(shared, client_public, store_public, group, member, incarnation)
