"""The dcps exception tree.

It lives in the lowest package (``idl``) so that every layer raises from one
tree; ``dcps`` re-exports all of it. Each class also derives from the standard
exception a caller would naturally catch, and is shown (in tracebacks, ``repr``
and docs) under the public package that exports it: ``dcps.BadParameterError``,
``idl.IdlError``::

    DcpsError
    ├── BadParameterError (ValueError)
    │   ├── IdlError               a topic type or sample that does not fit its type
    │   │   └── IdlSyntaxError     a malformed IDL file (file, line, column)
    │   ├── FilterSyntaxError      a malformed filter/query expression (position)
    │   │   └── InvalidSelectorError   a malformed JMS message selector (JMS
    │   │                              InvalidSelectorException)
    │   └── InvalidDestinationError    an unknown or unusable topic/subscription (JMS
    │                                  InvalidDestinationException)
    ├── PreconditionNotMetError (RuntimeError)
    ├── InconsistentPolicyError (ValueError)
    ├── ImmutablePolicyError (ValueError)
    ├── IncompatibleQosError (ValueError)
    ├── AlreadyClosedError (RuntimeError)
    ├── DcpsTimeoutError (TimeoutError)
    ├── NotEnabledError (RuntimeError)
    ├── OutOfResourcesError (RuntimeError)
    ├── IllegalOperationError (RuntimeError)
    └── UnsupportedError (NotImplementedError)
"""

from __future__ import annotations

__all__ = [
    "AlreadyClosedError",
    "BadParameterError",
    "DcpsError",
    "DcpsTimeoutError",
    "FilterSyntaxError",
    "IdlError",
    "IdlSyntaxError",
    "IllegalOperationError",
    "ImmutablePolicyError",
    "IncompatibleQosError",
    "InconsistentPolicyError",
    "InvalidDestinationError",
    "InvalidSelectorError",
    "NotEnabledError",
    "OutOfResourcesError",
    "PreconditionNotMetError",
    "UnsupportedError",
]


class DcpsError(Exception):
    """Root of every error dcps raises."""


class BadParameterError(DcpsError, ValueError):
    """An argument is invalid: wrong type, out of range, unknown name."""


class IdlError(BadParameterError):
    """A topic type definition or a sample does not fit its IDL type."""


class IdlSyntaxError(IdlError):
    """An IDL file could not be parsed.

    ``file``, ``line`` and ``column`` locate the problem (1-based).
    """

    def __init__(self, message: str, *, file: str, line: int, column: int) -> None:
        super().__init__(f"{file}:{line}:{column}: {message}")
        self.file = file
        self.line = line
        self.column = column


class FilterSyntaxError(BadParameterError):
    """A filter or query expression is malformed or does not fit the topic type.

    ``expression`` is the text and ``position`` the 0-based offset of the problem.
    """

    def __init__(self, message: str, *, expression: str, position: int) -> None:
        pointer = " " * position + "^"
        super().__init__(f"{message} at position {position}:\n  {expression}\n  {pointer}")
        self.expression = expression
        self.position = position


class InvalidSelectorError(FilterSyntaxError):
    """A JMS message selector is malformed or does not fit the message type (JMS's
    ``InvalidSelectorException``); ``position`` locates the problem.

    .. versionadded:: 0.3
    """


class InvalidDestinationError(BadParameterError):
    """A topic or durable subscription the operation cannot use: unknown, deleted, or
    owned by another connection (JMS's ``InvalidDestinationException``).

    .. versionadded:: 0.3
    """


class PreconditionNotMetError(DcpsError, RuntimeError):
    """The operation is valid but the entity is not in a state that allows it."""


class InconsistentPolicyError(DcpsError, ValueError):
    """Two QoS policies of one QoS set contradict each other."""


class ImmutablePolicyError(DcpsError, ValueError):
    """A policy that cannot change once the entity is enabled was changed."""


class IncompatibleQosError(DcpsError, ValueError):
    """A requested QoS is not satisfied by an offered one."""


class AlreadyClosedError(DcpsError, RuntimeError):
    """The entity was closed (deleted) and cannot be used any more."""


class DcpsTimeoutError(DcpsError, TimeoutError):
    """An operation did not complete within its timeout."""


class NotEnabledError(DcpsError, RuntimeError):
    """The entity is not enabled yet."""


class OutOfResourcesError(DcpsError, RuntimeError):
    """A resource limit was reached (a DDS limit, not the interpreter's memory:
    it is deliberately no ``MemoryError``)."""


class IllegalOperationError(DcpsError, RuntimeError):
    """The operation is never allowed on this entity."""


class UnsupportedError(DcpsError, NotImplementedError):
    """The operation or policy value is not supported by dcps on Cyclone DDS."""


# Tracebacks and docs name the public package, not this private module. The IDL
# errors belong to ``idl`` (which ``dcps`` re-exports); the rest to ``dcps``.
_PUBLIC_IDL = {"IdlError", "IdlSyntaxError"}
for _name in __all__:
    globals()[_name].__module__ = "idl" if _name in _PUBLIC_IDL else "dcps"
del _name
