"""A JMS-style ``TopicSession`` over dcps (seed 004): durable subscribers, message
selectors, noLocal, temporary topics and acknowledgement modes.

A thin layer on the store's durables (``dcps.durables``) and on the JMS
selector dialect of ``dcps.sql``. The README's JMS section maps each
``TopicSession`` method to its dcps call and each JMS exception to the
:class:`~dcps.DcpsError` it becomes.

The names are imported on first use (PEP 562), as ``dcps.durables``'s are.
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from idl._errors import InvalidDestinationError, InvalidSelectorError

    from ._connection import Connection
    from ._destination import TemporaryTopic, Topic
    from ._message import Message
    from ._publisher import TopicPublisher
    from ._session import AcknowledgeMode, TopicSession
    from ._subscriber import TopicSubscriber

# public name -> defining module, imported by __getattr__ on first access
_LAZY: dict[str, str] = {
    "AcknowledgeMode": "dcps.jms._session",
    "Connection": "dcps.jms._connection",
    "InvalidDestinationError": "idl._errors",
    "InvalidSelectorError": "idl._errors",
    "Message": "dcps.jms._message",
    "TemporaryTopic": "dcps.jms._destination",
    "Topic": "dcps.jms._destination",
    "TopicPublisher": "dcps.jms._publisher",
    "TopicSession": "dcps.jms._session",
    "TopicSubscriber": "dcps.jms._subscriber",
}

__all__ = [
    "AcknowledgeMode",
    "Connection",
    "InvalidDestinationError",
    "InvalidSelectorError",
    "Message",
    "TemporaryTopic",
    "Topic",
    "TopicPublisher",
    "TopicSession",
    "TopicSubscriber",
]


def __getattr__(name: str) -> _typing.Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dcps.jms' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
