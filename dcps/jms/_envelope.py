"""The physical form of a JMS message: the body sample inside an envelope of header fields.

A JMS topic is a channelled topic whose elements are envelopes: the body (a
sample of the topic's message type) and the JMS header fields, plus the
publishing connection and client id that ``noLocal`` needs. Selectors read
the body's members and the header fields (:data:`SELECTOR_HEADERS`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

import idl

__all__ = ["SELECTOR_HEADERS", "envelope_of"]

#: JMS header fields a selector may name: identifier -> (code on the envelope, kind, nullable).
SELECTOR_HEADERS: dict[str, tuple[str, str, bool]] = {
    "JMSMessageID": ("s.message_id", "string", False),
    "JMSTimestamp": ("s.timestamp", "number", False),
    "JMSPriority": ("s.priority", "number", False),
    "JMSCorrelationID": ("(s.correlation_id or None)", "string", True),
    "JMSType": ("(s.jms_type or None)", "string", True),
}


@functools.cache
def envelope_of(body_type: type) -> Any:
    """The envelope struct of messages whose body is a ``body_type`` sample (one per type)."""
    typename = getattr(body_type, "__idl_typename__", body_type.__name__)
    tag = re.sub(r"[^A-Za-z0-9_]", "_", typename)
    return idl.make_struct(
        f"JmsMessage_{tag}",
        {
            "body": body_type,
            "message_id": idl.string,
            "timestamp": idl.int64,
            "priority": idl.int32,
            "correlation_id": idl.string,
            "jms_type": idl.string,
            "client_id": idl.string,
            "connection_id": idl.string,
        },
        typename=f"dcps::jms::Message_{tag}",
        module="dcps.jms.envelopes",
    )
