"""The one place dcps reaches under the ``cyclonedds`` binding's public API.

The binding keeps some things dcps needs private: an entity's C handle (the
``dds_entity_t`` the ctypes calls in :mod:`dcps._cyclone.calls` take), whether a
writer encodes XCDR2, and its listener plumbing (whose own ``set_listener`` is
unsafe while data flows). Every such access is here, named and explained, so an
upgrade of the binding has one module to check.
"""

from __future__ import annotations

from typing import Any

from cyclonedds.core import Listener as CycloneListener

from dcps._cyclone.calls import matched_publications, matched_subscriptions
from dcps._cyclone.retcode import error_for


def entity_ref(cyclone_entity: Any) -> int:
    """The C handle (``dds_entity_t``) of a binding entity: what ctypes calls take."""
    ref: int = cyclone_entity._ref
    return ref


def matched_readers(cyclone_writer: Any) -> list[int]:
    """Handles of the readers a binding writer is matched with (race-free, unlike the
    binding's ``get_matched_subscriptions``)."""
    return matched_subscriptions(entity_ref(cyclone_writer))


def matched_writers(cyclone_reader: Any) -> list[int]:
    """Handles of the writers a binding reader is matched with (race-free, unlike the
    binding's ``get_matched_publications``)."""
    return matched_publications(entity_ref(cyclone_reader))


def uses_xcdr2(cyclone_writer: Any) -> bool:
    """Whether a binding writer serialises with XCDR2 (its type's extensibility decides)."""
    return bool(cyclone_writer._use_version_2)


def install_listener(cyclone_entity: Any, listener: CycloneListener | None) -> None:
    """Put ``listener`` (or none) on a Cyclone entity in one ``dds_set_listener`` call.

    The binding's own ``set_listener`` first copies the new callbacks into the
    entity's current listener object, which frees the old ctypes callbacks while
    Cyclone may still call them (a crash while data flows), and it never drops
    callbacks the new listener lacks. ``dds_set_listener`` replaces the whole
    set and returns once no old callback runs, so the old object can go then.
    """
    old = cyclone_entity._listener
    rc = cyclone_entity._set_listener(
        cyclone_entity._ref, listener._ref if listener is not None else None
    )
    if rc != 0:
        raise error_for(rc, "set listener")
    cyclone_entity._listener = listener  # keeps the installed callbacks alive
    del old
