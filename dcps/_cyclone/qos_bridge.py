"""How entities take, check and change their QoS sets."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import qos as q
from dcps._cyclone.retcode import cyclone_call
from idl._errors import BadParameterError, UnsupportedError

Q = TypeVar("Q", bound=q.QosSet)


def check_supported(value: q.QosSet, entity: str) -> None:
    """Raise :class:`UnsupportedError` for policy values dcps accepts but cannot honour.

    TRANSIENT and PERSISTENT durability are accepted: the store's durability
    service keeps that history (``dcps.store.DurabilityService``), and dcps
    readers with those kinds fetch it when they join (``dcps._history``).
    """
    if value.applies(q.EntityFactory) and not value[q.EntityFactory].autoenable_created_entities:
        raise UnsupportedError(
            f"{entity}: EntityFactory(autoenable_created_entities=False) is not supported: "
            f"dcps enables every entity when it is created (there is no enable())"
        )


def resolve_qos(value: Any, kind: type[Q], entity: str, default: Q | None = None) -> Q:
    """The QoS set an entity starts with: ``value`` checked, or the default."""
    if value is None:
        return default if default is not None else kind()
    if not isinstance(value, kind):
        raise BadParameterError(f"{entity} takes a {kind.__name__}, got {type(value).__name__}")
    value.check()
    check_supported(value, entity)
    return value


def _as_is(value: Q) -> Q:
    return value


def apply_qos(
    entity: str,
    cyclone_entity: Any,
    current: Q,
    new: Q,
    *,
    announce: Callable[[Q], Q] = _as_is,
) -> Q:
    """Check ``new`` against ``current`` (immutable policies) and push ``announce(new)``
    to ``cyclone_entity`` (what DDS sees may differ: a writer's autodispose);
    ``entity`` names the dcps entity in errors. Returns ``new``."""
    if type(new) is not type(current):
        raise BadParameterError(
            f"{entity} takes a {type(current).__name__}, got {type(new).__name__}"
        )
    new.check()
    q.check_change(current, new)
    check_supported(new, entity)
    with cyclone_call(f"set QoS of {entity}"):
        cyclone_entity.set_qos(q.to_cyclone(announce(new)))
    return new
