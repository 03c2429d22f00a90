"""DomainParticipant: the entry point to a DDS domain."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from cyclonedds.domain import DomainParticipant as CycloneParticipant

import qos as q
from dcps._entity import Entity
from dcps._qos_bridge import apply_qos, resolve_qos
from dcps._retcode import cyclone_call
from idl._errors import BadParameterError

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

#: Cyclone maps domain ids to UDP ports; ids above this do not fit.
MAX_DOMAIN_ID = 232


class DomainParticipant(Entity):
    """Membership in DDS domain ``domain_id``; creates topics, publishers and subscribers.

    ``network`` configures the interfaces, multicast and discovery peers this
    participant's domain uses in this process (see :class:`NetworkConfig`);
    without it Cyclone's own configuration (``CYCLONEDDS_URI``) applies.
    """

    def __init__(
        self,
        domain_id: int = 0,
        *,
        qos: q.DomainParticipantQos | None = None,
        network: NetworkConfig | None = None,
    ) -> None:
        if not isinstance(domain_id, int) or isinstance(domain_id, bool) or not (
            0 <= domain_id <= MAX_DOMAIN_ID
        ):
            raise BadParameterError(
                f"domain_id must be an integer from 0 to {MAX_DOMAIN_ID}, got {domain_id!r}"
            )
        super().__init__(None)
        self._domain_id = domain_id
        self._qos = resolve_qos(qos, q.DomainParticipantQos, "DomainParticipant")
        self._domain: Any = network.apply(domain_id) if network is not None else None
        with cyclone_call(f"create DomainParticipant on domain {domain_id}"):
            self._cyclone = CycloneParticipant(domain_id, qos=q.to_cyclone(self._qos))

    def _describe(self) -> str:
        return f"DomainParticipant(domain {self._domain_id})"

    def _on_close(self) -> None:
        if self._domain is not None:
            self._cyclone.__del__()
            self._domain.__del__()
            self._domain = None

    @property
    def domain_id(self) -> int:
        """The DDS domain this participant belongs to."""
        return self._domain_id

    @property
    def qos(self) -> q.DomainParticipantQos:
        """The participant's current QoS."""
        return self._qos

    def set_qos(self, qos: q.DomainParticipantQos) -> None:
        """Change the participant's QoS (only changeable policies may differ)."""
        self._check_open()
        self._qos = apply_qos(self, self._qos, qos)
