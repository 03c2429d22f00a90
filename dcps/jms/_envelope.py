"""The physical form of a JMS message: the body sample inside an envelope of header fields.

A JMS topic is a channelled topic whose elements are envelopes: the body (a
sample of the topic's message type) and the JMS header fields, plus the
publishing connection and client id that ``noLocal`` needs. Selectors read
the body's members and the header fields (:func:`selector_headers`).

Two envelope versions exist, and a topic keeps the one it was created with
(the store records a topic's type identity and refuses another):

* version 2 (``dcps::jms::Message2_<body type>``, every topic a connection
  creates now) carries ``expiration``: ``JMSExpiration`` in ms since the Unix
  epoch, 0 for never;
* version 1 (``dcps::jms::Message_<body type>``, topics created by dcps 0.3
  before expiry existed) has no expiration: its messages never expire, and a
  publish with a time to live is refused with :class:`~dcps.UnsupportedError`
  naming the topic (``Connection._physical`` finds out which one a topic has).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import idl

__all__ = ["SELECTOR_HEADERS", "envelope_of", "expiring", "selector_headers"]

#: JMS header fields a selector may name: identifier -> (code on the envelope, kind, nullable).
SELECTOR_HEADERS: dict[str, tuple[str, str, bool]] = {
    "JMSMessageID": ("s.message_id", "string", False),
    "JMSTimestamp": ("s.timestamp", "number", False),
    "JMSPriority": ("s.priority", "number", False),
    "JMSCorrelationID": ("(s.correlation_id or None)", "string", True),
    "JMSType": ("(s.jms_type or None)", "string", True),
    "JMSExpiration": ("s.expiration", "number", False),
}
#: The same for version-1 envelopes (no expiration: ``JMSExpiration`` is 0, never).
_LEGACY_HEADERS = {**SELECTOR_HEADERS, "JMSExpiration": ("0", "number", False)}


def selector_headers(envelope: type) -> dict[str, tuple[str, str, bool]]:
    """The header fields a selector reads on envelopes of type ``envelope``."""
    return SELECTOR_HEADERS if expiring(envelope) else _LEGACY_HEADERS


def expiring(envelope: type) -> bool:
    """Whether envelopes of type ``envelope`` carry an expiration (version 2)."""
    return "expiration" in getattr(envelope, "__annotations__", {}) or hasattr(
        envelope, "expiration"
    )


@functools.cache
def envelope_of(body_type: type, version: int = 2) -> Any:
    """The envelope struct of messages whose body is a ``body_type`` sample (one per type
    and version; version 1 is the envelope of topics made before expiry existed)."""
    if version not in (1, 2):
        raise ValueError(f"JMS envelope versions are 1 and 2, not {version!r}")
    typename = getattr(body_type, "__idl_typename__", body_type.__name__)
    tag = re.sub(r"[^A-Za-z0-9_]", "_", typename)
    fields: dict[str, Any] = {
        "body": body_type,
        "message_id": idl.string,
        "timestamp": idl.int64,
        "priority": idl.int32,
        "correlation_id": idl.string,
        "jms_type": idl.string,
        "client_id": idl.string,
        "connection_id": idl.string,
    }
    name = "Message"
    if version == 2:
        fields["expiration"] = idl.int64
        name = "Message2"
    return idl.make_struct(
        f"Jms{name}_{tag}",
        fields,
        typename=f"dcps::jms::{name}_{tag}",
        module="dcps.jms.envelopes",
    )
