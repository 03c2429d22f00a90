"""How entities take, check and change their QoS sets."""

from __future__ import annotations

from typing import Any, TypeVar

import qos as q
from dcps._retcode import cyclone_call
from idl._errors import BadParameterError

Q = TypeVar("Q", bound=q.QosSet)


def resolve_qos(value: Any, kind: type[Q], entity: str, default: Q | None = None) -> Q:
    """The QoS set an entity starts with: ``value`` checked, or the default."""
    if value is None:
        return default if default is not None else kind()
    if not isinstance(value, kind):
        raise BadParameterError(f"{entity} takes a {kind.__name__}, got {type(value).__name__}")
    value.check()
    return value


def apply_qos(entity: Any, current: Q, new: Q) -> Q:
    """Check ``new`` against ``current`` (immutable policies) and push it to Cyclone."""
    if type(new) is not type(current):
        raise BadParameterError(
            f"{entity._describe()} takes a {type(current).__name__}, got {type(new).__name__}"
        )
    new.check()
    q.check_change(current, new)
    with cyclone_call(f"set QoS of {entity._describe()}"):
        entity._cyclone.set_qos(q.to_cyclone(new))
    return new
