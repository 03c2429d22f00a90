"""Topic identities: :class:`Topic` (a name and the message type) and :class:`TemporaryTopic`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from dcps.wire._names import check_name
from idl._errors import InvalidDestinationError
from idl._public import show_as

if TYPE_CHECKING:
    from ._connection import Connection

__all__ = ["TemporaryTopic", "Topic"]


def _check_topic_name(_: object, __: attrs.Attribute[Any], value: str) -> None:
    try:
        check_name("a JMS topic name", value)
    except ValueError as exc:
        raise InvalidDestinationError(f"invalid topic name {value!r}: {exc}") from None


def _check_type(_: object, __: attrs.Attribute[Any], value: Any) -> None:
    if not (isinstance(value, type) and hasattr(value, "serialize")):
        raise InvalidDestinationError(
            "a topic's message type is an IDL struct class (idl.Struct or IdlStruct), "
            f"not {value!r}"
        )


@attrs.frozen
class Topic:
    """A topic identity (JMS ``Topic``): a name and the type of its messages' bodies.

    It does not create the physical topic (a channelled topic in the store, made
    when first published to or subscribed). The body type's members are the
    message's properties that selectors test.

    .. versionadded:: 0.3
    """

    name: str = attrs.field(validator=_check_topic_name)
    message_type: type = attrs.field(validator=_check_type)

    @property
    def topic_name(self) -> str:
        """The topic's name (JMS ``getTopicName``)."""
        return self.name


@attrs.frozen
class TemporaryTopic(Topic):
    """A topic that lives as long as the connection that made it (JMS ``TemporaryTopic``).

    Only its connection may consume from it; :meth:`delete` ends it earlier
    (refused while it has consumers).

    .. versionadded:: 0.3
    """

    connection_id: str = ""
    connection: Connection | None = attrs.field(default=None, eq=False, repr=False)

    def delete(self) -> None:
        """Delete the temporary topic; raises :class:`~dcps.PreconditionNotMetError`
        while a consumer of it is open."""
        if self.connection is None:
            raise InvalidDestinationError(
                f"temporary topic {self.name!r} belongs to another connection"
            )
        self.connection._delete_temporary(self)


show_as("dcps.jms", Topic, TemporaryTopic)
