"""The internal interface between conditions and the endpoints they watch.

Conditions and wait sets (``_condition``) sit below the readers and writers
(``_reader``, ``_writer``, which build ``wait_for_data`` from them), so they
never import those classes. They work against these two bases instead, which
``DataWriter`` and ``DataReader`` derive from; every member a condition may use
is declared and documented here, and nothing else of an endpoint is touched.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from dcps._entity import Entity

if TYPE_CHECKING:  # types only: _subscription_keys imports nothing of the entities
    from dcps._subscription_keys import KeyedCache


class Watched(Entity):
    """An endpoint (reader or writer) that a StatusCondition can watch.

    - ``_cyclone``: the Cyclone entity; conditions set its status mask, read its
      status changes, and attach it to wait sets (its status trigger).
    - ``topic``: the endpoint's topic, whose participant must be the wait set's.
    """

    _cyclone: Any

    @property
    def topic(self) -> Any:
        """The topic of this endpoint."""
        raise NotImplementedError


class WatchedReader(Watched):
    """A DataReader as its ReadConditions, QueryConditions and StatusConditions see it.

    - ``_keyed``: the SubscriptionKeys cache, or None when Cyclone keeps the
      samples. With a cache, conditions judge the cache (``matches``,
      ``rejected_changed``) and a Cyclone read condition on undrained samples
      wakes wait sets so that they call ``_drain`` first.
    - ``_data_available``: DATA_AVAILABLE as dcps keeps it where Cyclone's own
      cannot serve (read under ``_conditions_lock()``).
    - ``_drain()``: file what Cyclone holds into the cache (SubscriptionKeys only).
    - ``_conditions_lock()``: the lock under which the reader refreshes its
      conditions' triggers (``Condition._refresh``), possibly on Cyclone's thread.
    """

    _keyed: KeyedCache[Any] | None
    _data_available: bool

    def _drain(self) -> None:
        """Move everything Cyclone holds into the SubscriptionKeys cache."""
        raise NotImplementedError

    def _conditions_lock(self) -> AbstractContextManager[Any]:
        """The lock the reader's own statuses and its conditions' triggers change under."""
        raise NotImplementedError
