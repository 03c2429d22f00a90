"""DomainParticipant: the entry point to a DDS domain."""

from __future__ import annotations

import os
import threading
from typing import Any

from cyclonedds.domain import DomainParticipant as CycloneParticipant

import qos as q
from dcps._cyclone.binding import entity_ref
from dcps._cyclone.calls import assert_liveliness
from dcps._cyclone.qos_bridge import resolve_qos
from dcps._cyclone.retcode import cyclone_call
from dcps._entity import Entity
from dcps._network import ENV_SETTINGS, NetworkConfig
from idl._errors import BadParameterError, PreconditionNotMetError
from idl._public import show_as

#: Cyclone maps domain ids to UDP ports; ids above this do not fit.
MAX_DOMAIN_ID = 232


class _Domains:
    """The Cyclone domains this process configured: one configuration per domain id,
    shared by every participant that asks for the same one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, tuple[NetworkConfig, Any, int]] = {}

    def acquire(self, domain_id: int, network: NetworkConfig) -> None:
        with self._lock:
            current = self._by_id.get(domain_id)
            if current is None:
                self._by_id[domain_id] = (network, network.apply(domain_id), 1)
            elif current[0] == network:
                self._by_id[domain_id] = (current[0], current[1], current[2] + 1)
            else:
                raise PreconditionNotMetError(
                    f"domain {domain_id} already runs with another network configuration in "
                    f"this process ({current[0]}); close its participants first"
                )

    def network_of(self, domain_id: int) -> NetworkConfig | None:
        """The configuration domain ``domain_id`` runs with in this process, if dcps set one."""
        with self._lock:
            current = self._by_id.get(domain_id)
            return current[0] if current is not None else None

    def release(self, domain_id: int) -> None:
        with self._lock:
            network, domain, users = self._by_id[domain_id]
            if users > 1:
                self._by_id[domain_id] = (network, domain, users - 1)
            else:
                del self._by_id[domain_id]
                domain.__del__()


_domains = _Domains()


def _network_from_env() -> NetworkConfig | None:
    if not any(name in os.environ for name in ENV_SETTINGS):
        return None
    return NetworkConfig.from_env()


class DomainParticipant(Entity):
    """Membership in DDS domain ``domain_id``; creates topics, publishers and subscribers.

    ``network`` configures the interfaces, multicast and discovery peers this
    participant's domain uses in this process (see :class:`NetworkConfig`);
    without it, the ``DCPS_*`` environment variables if any is set
    (:meth:`NetworkConfig.from_env`), else Cyclone's own configuration
    (``CYCLONEDDS_URI``). All participants of one domain in a process share
    one network configuration.
    """

    _qos: q.DomainParticipantQos

    def __init__(
        self,
        domain_id: int = 0,
        *,
        qos: q.DomainParticipantQos | None = None,
        network: NetworkConfig | None = None,
    ) -> None:
        if (
            not isinstance(domain_id, int)
            or isinstance(domain_id, bool)
            or not (0 <= domain_id <= MAX_DOMAIN_ID)
        ):
            raise BadParameterError(
                f"domain_id must be an integer from 0 to {MAX_DOMAIN_ID}, got {domain_id!r}"
            )
        checked_qos = resolve_qos(qos, q.DomainParticipantQos, "DomainParticipant")
        network = network if network is not None else _network_from_env()
        if (
            network is not None
            and network.participant_name
            and not checked_qos.is_set(q.EntityName)
        ):
            checked_qos = checked_qos.with_(q.EntityName(network.participant_name))
        super().__init__(None)
        self._domain_id = domain_id
        self._qos = checked_qos
        self._network = network
        if network is not None:
            _domains.acquire(domain_id, network)
        try:
            with cyclone_call(f"create DomainParticipant on domain {domain_id}"):
                self._cyclone = CycloneParticipant(domain_id, qos=q.to_cyclone(self._qos))
        except BaseException:
            if network is not None:
                _domains.release(domain_id)
            raise

    def _describe(self) -> str:
        return f"DomainParticipant(domain {self._domain_id})"

    def _on_close(self) -> None:
        if self._network is not None:
            self._cyclone.__del__()
            _domains.release(self._domain_id)

    @property
    def network(self) -> NetworkConfig | None:
        """The network configuration this participant's domain runs with, if dcps set one."""
        return self._network

    def assert_liveliness(self) -> None:
        """Assert liveliness of this participant's MANUAL_BY_PARTICIPANT writers."""
        self._check_open()
        assert_liveliness(entity_ref(self._cyclone))

    @property
    def domain_id(self) -> int:
        """The DDS domain this participant belongs to."""
        return self._domain_id

    @property
    def qos(self) -> q.DomainParticipantQos:
        """The participant's current QoS."""
        return self._qos


show_as("dcps", DomainParticipant)
