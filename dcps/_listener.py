"""Listeners: callbacks for DCPS statuses, bridged onto Cyclone's listener threads.

Callbacks run on Cyclone's threads. Keep them short; never close entities from
inside one (that can deadlock Cyclone). An exception escaping a callback is
logged, not propagated into Cyclone.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cyclonedds.core import Listener as CycloneListener

from dcps import _status as st
from idl._public import show_as

if TYPE_CHECKING:
    from dcps._reader import DataReader
    from dcps._writer import DataWriter

log = logging.getLogger("dcps.listener")


class Listener:
    """Override the ``on_...`` methods for the statuses you care about.

    Only overridden methods are installed, so statuses you do not handle stay
    readable through the entity's ``..._status`` properties and status conditions.
    """

    def on_data_available(self, reader: DataReader[Any]) -> None:
        """New data is available in ``reader``."""

    def on_subscription_matched(
        self, reader: DataReader[Any], status: st.SubscriptionMatchedStatus
    ) -> None:
        """``reader`` matched or lost a writer."""

    def on_liveliness_changed(
        self, reader: DataReader[Any], status: st.LivelinessChangedStatus
    ) -> None:
        """A writer matched by ``reader`` became alive or not alive."""

    def on_requested_deadline_missed(
        self, reader: DataReader[Any], status: st.RequestedDeadlineMissedStatus
    ) -> None:
        """An instance was not updated within ``reader``'s deadline."""

    def on_requested_incompatible_qos(
        self, reader: DataReader[Any], status: st.RequestedIncompatibleQosStatus
    ) -> None:
        """A writer offered a QoS ``reader`` cannot accept."""

    def on_sample_lost(self, reader: DataReader[Any], status: st.SampleLostStatus) -> None:
        """Samples were lost on their way to ``reader``."""

    def on_sample_rejected(self, reader: DataReader[Any], status: st.SampleRejectedStatus) -> None:
        """``reader`` rejected samples because of its resource limits."""

    def on_publication_matched(
        self, writer: DataWriter[Any], status: st.PublicationMatchedStatus
    ) -> None:
        """``writer`` matched or lost a reader."""

    def on_liveliness_lost(self, writer: DataWriter[Any], status: st.LivelinessLostStatus) -> None:
        """``writer`` failed to assert liveliness in time."""

    def on_offered_deadline_missed(
        self, writer: DataWriter[Any], status: st.OfferedDeadlineMissedStatus
    ) -> None:
        """``writer`` did not update an instance within its deadline."""

    def on_offered_incompatible_qos(
        self, writer: DataWriter[Any], status: st.OfferedIncompatibleQosStatus
    ) -> None:
        """A reader requested a QoS ``writer`` does not offer."""


# callback name -> status value class (None: the callback takes only the entity)
_CALLBACKS: dict[str, type[Any] | None] = {
    "on_data_available": None,
    "on_subscription_matched": st.SubscriptionMatchedStatus,
    "on_liveliness_changed": st.LivelinessChangedStatus,
    "on_requested_deadline_missed": st.RequestedDeadlineMissedStatus,
    "on_requested_incompatible_qos": st.RequestedIncompatibleQosStatus,
    "on_sample_lost": st.SampleLostStatus,
    "on_sample_rejected": st.SampleRejectedStatus,
    "on_publication_matched": st.PublicationMatchedStatus,
    "on_liveliness_lost": st.LivelinessLostStatus,
    "on_offered_deadline_missed": st.OfferedDeadlineMissedStatus,
    "on_offered_incompatible_qos": st.OfferedIncompatibleQosStatus,
}


def overrides(listener: Listener, name: str) -> bool:
    """Whether ``listener``'s class overrides callback ``name`` (else nobody listens)."""
    return getattr(type(listener), name) is not getattr(Listener, name)


def build_cyclone_listener(
    entity: object,
    listener: Listener | None,
    on_data_available: Callable[[], None] | None = None,
) -> CycloneListener | None:
    """A Cyclone listener calling ``listener``'s overridden methods with ``entity``.

    ``on_data_available`` is dcps' own hook (asyncio wake-up), run before the user's.
    """
    kwargs: dict[str, Callable[..., None]] = {}
    for name, status_cls in _CALLBACKS.items():
        user = listener is not None and overrides(listener, name)
        internal = name == "on_data_available" and on_data_available is not None
        if not (user or internal):
            continue
        kwargs[name] = _make_callback(
            entity,
            listener if user else None,
            name,
            status_cls,
            on_data_available if internal else None,
        )
    if not kwargs:
        return None
    return CycloneListener(**kwargs)  # type: ignore[no-untyped-call]


def _make_callback(
    entity: object,
    listener: Listener | None,
    name: str,
    status_cls: type[Any] | None,
    hook: Callable[[], None] | None,
) -> Callable[..., None]:
    method = getattr(listener, name) if listener is not None else None

    def callback(_cyclone_entity: object, status: object = None) -> None:
        try:
            if hook is not None:
                hook()
            if method is None:
                return
            if status_cls is None:
                method(entity)
            else:
                method(entity, st.from_cyclone(status_cls, status))
        except Exception:
            log.exception("listener %s raised", name)

    return callback


show_as("dcps", Listener)
