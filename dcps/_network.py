"""Network configuration of a DDS domain, without hand-written Cyclone DDS XML.

A :class:`NetworkConfig` names the interfaces to use, whether multicast is
allowed, the unicast discovery peers, a domain tag and a few discovery
timings. It renders to a Cyclone DDS configuration (:meth:`NetworkConfig.to_cyclone_xml`)
and creates the Cyclone domain with it (:meth:`NetworkConfig.apply`).

An explicit configuration *replaces* ``CYCLONEDDS_URI`` for that domain:
Cyclone DDS does not consult the environment variable when a domain is created
with a configuration, so everything network-related must be in the
:class:`NetworkConfig`.

Environment variables read by :meth:`NetworkConfig.from_env`:

``DCPS_NETWORK_CONFIG``
    path of a TOML file (see :meth:`NetworkConfig.load`), read first; the
    variables below override its settings.
``DCPS_INTERFACES``
    comma-separated interface names or addresses, e.g. ``lo,eth1``.
``DCPS_MULTICAST_INTERFACES``
    comma-separated interfaces on which multicast is assumed to work even if
    the operating system does not flag it (``lo``); they are added to the
    interface list if not in it.
``DCPS_MULTICAST``
    ``1``/``0`` (also ``true``/``false``, ``yes``/``no``, ``on``/``off``).
``DCPS_PEERS``
    comma-separated unicast discovery peers, ``host`` or ``host:port``
    (``[v6addr]:port`` for IPv6 with a port).
``DCPS_DOMAIN_TAG``, ``DCPS_PARTICIPANT_NAME``
    strings.
``DCPS_MAX_PARTICIPANT_INDEX``
    integer.
``DCPS_LEASE_DURATION``, ``DCPS_SPDP_INTERVAL``
    seconds (float).
``DCPS_FRAGMENT_SIZE``
    bytes (integer).
``DCPS_WHC_HIGH``, ``DCPS_SOCKET_RECEIVE_BUFFER``, ``DCPS_SOCKET_SEND_BUFFER``
    bytes (integer).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
import socket
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

import attrs

from idl._errors import BadParameterError, PreconditionNotMetError
from idl._public import show_as

__all__ = ["ENV_SETTINGS", "NetworkConfig", "NetworkInterface", "Peer"]

#: The environment variables :meth:`NetworkConfig.from_env` reads (see the module doc).
ENV_SETTINGS = (
    "DCPS_NETWORK_CONFIG",
    "DCPS_INTERFACES",
    "DCPS_MULTICAST_INTERFACES",
    "DCPS_MULTICAST",
    "DCPS_PEERS",
    "DCPS_DOMAIN_TAG",
    "DCPS_PARTICIPANT_NAME",
    "DCPS_MAX_PARTICIPANT_INDEX",
    "DCPS_LEASE_DURATION",
    "DCPS_SPDP_INTERVAL",
    "DCPS_FRAGMENT_SIZE",
)

#: Highest DDS domain id the default DDSI port mapping (7400 + 250 * id) allows.
MAX_DOMAIN_ID = 232
#: Highest participant index accepted (ports must also fit: 7411 + 250 * domain + 2 * index).
MAX_PARTICIPANT_INDEX = 120
# Cyclone's FragmentSize must leave room for RTPS headers in a UDP datagram
MIN_FRAGMENT_SIZE = 1024
MAX_FRAGMENT_SIZE = 64000
CYCLONE_MAX_MESSAGE_SIZE = 14720  # Cyclone's default MaxMessageSize
#: The fragment size a configuration whose interfaces are all loopback gets by default:
#: loopback's MTU (65536) carries it in one IP packet, so no IP fragmentation, and a
#: 1 MiB sample travels in 18 datagrams instead of 781 (``docs/large-payloads.md``).
LOOPBACK_FRAGMENT_SIZE = 60000
#: The socket receive buffer a loopback-only configuration asks for by default (a
#: request, not a minimum: the kernel caps it at ``net.core.rmem_max``). Cyclone's own
#: default overflowed on bursts of 1 MiB samples, each overflow costing a retransmission.
LOOPBACK_RECEIVE_BUFFER = 4 << 20

_HOSTNAME_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_IFNAME = re.compile(r"^[^\s/:,]{1,15}$")


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def _check_hostname(setting: str, value: str, host: str) -> None:
    if _is_ip(host):
        return
    labels = host.rstrip(".").split(".")
    if (
        not host
        or len(host) > 253
        or not all(_HOSTNAME_LABEL.match(label) for label in labels)
        or labels[-1].isdigit()
    ):
        raise BadParameterError(f"{setting}: {value!r} is not a valid host name or IP address")


def _check_port(setting: str, value: str, port: int) -> None:
    if not 1 <= port <= 65535:
        raise BadParameterError(f"{setting}: port {port} in {value!r} is not in 1..65535")


@attrs.frozen
class Peer:
    """A unicast discovery peer: a host name or IP address and an optional port.

    Without a port Cyclone DDS probes the discovery ports of participant
    indices ``0..max_participant_index`` on that host.
    """

    host: str
    port: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.host, str):
            raise BadParameterError(f"peers: host {self.host!r} is not a string")
        _check_hostname("peers", self.host, self.host)
        if self.port is not None:
            if isinstance(self.port, bool) or not isinstance(self.port, int):
                raise BadParameterError(f"peers: port {self.port!r} is not an integer")
            _check_port("peers", f"{self.host}:{self.port}", self.port)

    @classmethod
    def parse(cls, text: str) -> Peer:
        """Parse ``host``, ``host:port``, ``v6addr`` or ``[v6addr]:port``."""
        if not isinstance(text, str):
            raise BadParameterError(f"peers: {text!r} is not a string")
        value = text.strip()
        host, port_text = value, None
        if value.startswith("["):
            close = value.find("]")
            if close < 0:
                raise BadParameterError(f"peers: {text!r} has an unclosed '['")
            host, rest = value[1:close], value[close + 1 :]
            if rest:
                if not rest.startswith(":"):
                    raise BadParameterError(f"peers: {text!r} has junk after ']'")
                port_text = rest[1:]
            if not _is_ip(host):
                raise BadParameterError(f"peers: {host!r} in {text!r} is not an IPv6 address")
        elif value.count(":") == 1:
            host, port_text = value.split(":")
        elif value.count(":") > 1 and not _is_ip(value):
            raise BadParameterError(f"peers: {text!r} is not an address (use [v6addr]:port)")
        port: int | None = None
        if port_text is not None:
            if not port_text.isdigit():
                raise BadParameterError(f"peers: port {port_text!r} in {text!r} is not a number")
            port = int(port_text)
            _check_port("peers", text, port)
        _check_hostname("peers", text, host)
        return cls(host, port)

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port is None else f"{host}:{self.port}"


@attrs.frozen
class NetworkInterface:
    """One network interface, by name (``eth0``) or by address (``10.0.0.5``).

    ``multicast``: ``None`` trusts the operating system's flag; ``True``
    assumes multicast works even if the flag says no (needed on ``lo``);
    ``False`` never uses multicast on this interface.
    ``priority``: higher is preferred (Cyclone's default: 2 for loopback, 0 otherwise).
    """

    name: str | None = None
    address: str | None = None
    multicast: bool | None = None
    priority: int | None = None

    def __attrs_post_init__(self) -> None:
        if (self.name is None) == (self.address is None):
            raise BadParameterError(
                f"interfaces: give exactly one of name or address, got name={self.name!r}, "
                f"address={self.address!r}"
            )
        if self.name is not None and (
            not isinstance(self.name, str) or not _IFNAME.match(self.name)
        ):
            raise BadParameterError(f"interfaces: {self.name!r} is not a valid interface name")
        if self.address is not None and (
            not isinstance(self.address, str) or not _is_ip(self.address)
        ):
            raise BadParameterError(f"interfaces: {self.address!r} is not an IP address")
        if self.multicast is not None and not isinstance(self.multicast, bool):
            raise BadParameterError(
                f"interfaces: multicast {self.multicast!r} of {self.label} is not a bool"
            )
        if self.priority is not None and (
            isinstance(self.priority, bool) or not isinstance(self.priority, int)
        ):
            raise BadParameterError(
                f"interfaces: priority {self.priority!r} of {self.label} is not an integer"
            )

    @property
    def label(self) -> str:
        """The name or address identifying the interface."""
        return self.name if self.name is not None else str(self.address)

    @classmethod
    def parse(cls, text: str, *, multicast: bool | None = None) -> NetworkInterface:
        """An interface from a name or an address given as text."""
        if not isinstance(text, str):
            raise BadParameterError(f"interfaces: {text!r} is not a string")
        value = text.strip()
        if _is_ip(value):
            return cls(address=value, multicast=multicast)
        return cls(name=value, multicast=multicast)


def _to_interfaces(values: Iterable[NetworkInterface | str] | str) -> tuple[NetworkInterface, ...]:
    if isinstance(values, str):
        values = [values]
    result = []
    for value in values:
        if isinstance(value, NetworkInterface):
            result.append(value)
        elif isinstance(value, str):
            result.append(NetworkInterface.parse(value))
        elif isinstance(value, Mapping):
            result.append(_interface_from_mapping(value))
        else:
            raise BadParameterError(f"interfaces: {value!r} is not an interface name or address")
    labels = [i.label for i in result]
    for label in labels:
        if labels.count(label) > 1:
            raise BadParameterError(f"interfaces: {label!r} is listed twice")
    return tuple(result)


def _interface_from_mapping(value: Mapping[str, Any]) -> NetworkInterface:
    unknown = set(value) - {"name", "address", "multicast", "priority"}
    if unknown:
        raise BadParameterError(f"interfaces: unknown key(s) {sorted(unknown)} in {dict(value)!r}")
    return NetworkInterface(
        name=value.get("name"),
        address=value.get("address"),
        multicast=value.get("multicast"),
        priority=value.get("priority"),
    )


def _to_peers(values: Iterable[Peer | str] | str) -> tuple[Peer, ...]:
    if isinstance(values, str):
        values = [values]
    result = []
    for value in values:
        if isinstance(value, Peer):
            result.append(value)
        elif isinstance(value, str):
            result.append(Peer.parse(value))
        else:
            raise BadParameterError(f"peers: {value!r} is not 'host' or 'host:port'")
    return tuple(result)


def _duration(setting: str, value: Any) -> datetime.timedelta | None:
    if value is None or isinstance(value, datetime.timedelta):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.timedelta(seconds=value)
    raise BadParameterError(f"{setting}: {value!r} is not a timedelta or seconds")


def _to_lease_duration(value: Any) -> datetime.timedelta | None:
    return _duration("lease_duration", value)


def _to_spdp_interval(value: Any) -> datetime.timedelta | None:
    return _duration("spdp_interval", value)


def _seconds(value: datetime.timedelta) -> str:
    return f"{value.total_seconds():g} s"


@attrs.frozen
class NetworkConfig:
    """How a process joins a DDS domain on the network.

    ``interfaces``: names or addresses (or :class:`NetworkInterface` values);
    empty lets Cyclone DDS pick the best interface.
    ``multicast``: allow multicast at all (discovery and data); with ``False``
    discovery needs ``peers``.
    ``peers``: unicast discovery peers, ``"host"`` or ``"host:port"``.
    ``domain_tag``: participants discover each other only if their tags are equal.
    ``participant_name``: the EntityName of participants, visible to remote tools.
    ``max_participant_index``: highest participant index probed on unicast peers
    (participants per host when multicast is off).
    ``lease_duration``: how long others keep this participant without hearing
    from it (Cyclone's default is 10 s); ``spdp_interval``: how often it announces itself.
    ``fragment_size``: the largest piece of a sample in one datagram, in bytes.
    Unset, it is :data:`LOOPBACK_FRAGMENT_SIZE` (60000) when every interface is
    loopback (:attr:`loopback_only`), else Cyclone's 1344, below a 1500-byte MTU.
    Above the link's MTU a fragment relies on IP fragmentation, where losing one
    packet loses the whole datagram: keep 1344 on a real network (or set the
    MTU minus ~150 on a clean jumbo-frame LAN). It governs only what this
    process sends (every writer of the domain in it, application topics and
    the store's protocol alike); readers reassemble fragments of any size, so
    peers need not agree.
    ``whc_high``: the writer history cache's high watermark in bytes (Cyclone's
    ``Internal/Watermarks/WhcHigh``, default 500 kB): a reliable writer with
    more unacknowledged bytes than this waits for acknowledgements, so a sample
    larger than it is sent one acknowledgement round at a time; 4-8 MiB suits
    64 KiB-1 MiB samples. ``socket_receive_buffer`` / ``socket_send_buffer``:
    the least socket buffer sizes in bytes Cyclone must get from the kernel (a
    size above ``net.core.rmem_max`` / ``wmem_max`` makes :meth:`apply` raise
    ``BadParameterError``); a few MiB absorb bursts of large samples on a real
    network. Measurements: ``docs/large-payloads.md``.

    .. versionadded:: 0.1
    .. versionadded:: 0.2 ``whc_high``, ``socket_receive_buffer``, ``socket_send_buffer``
    .. versionchanged:: 0.2 loopback-only configurations default to 60000-byte
       fragments and a 4 MiB socket receive buffer
    """

    interfaces: tuple[NetworkInterface, ...] = attrs.field(default=(), converter=_to_interfaces)
    multicast: bool = True
    peers: tuple[Peer, ...] = attrs.field(default=(), converter=_to_peers)
    domain_tag: str | None = None
    participant_name: str | None = None
    max_participant_index: int | None = None
    lease_duration: datetime.timedelta | None = attrs.field(
        default=None, converter=_to_lease_duration
    )
    spdp_interval: datetime.timedelta | None = attrs.field(
        default=None, converter=_to_spdp_interval
    )
    fragment_size: int | None = None
    whc_high: int | None = None
    socket_receive_buffer: int | None = None
    socket_send_buffer: int | None = None

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.multicast, bool):
            raise BadParameterError(f"multicast: {self.multicast!r} is not a bool")
        for setting in ("domain_tag", "participant_name"):
            value = getattr(self, setting)
            if value is not None and (not isinstance(value, str) or not value.isprintable()):
                raise BadParameterError(f"{setting}: {value!r} is not a printable string")
        index = self.max_participant_index
        if index is not None and (
            isinstance(index, bool)
            or not isinstance(index, int)
            or not 0 <= index <= MAX_PARTICIPANT_INDEX
        ):
            raise BadParameterError(
                f"max_participant_index: {index!r} is not an integer in 0..{MAX_PARTICIPANT_INDEX}"
            )
        size = self.fragment_size
        if size is not None and (
            isinstance(size, bool)
            or not isinstance(size, int)
            or not MIN_FRAGMENT_SIZE <= size <= MAX_FRAGMENT_SIZE
        ):
            raise BadParameterError(
                f"fragment_size: {size!r} is not a byte count in "
                f"{MIN_FRAGMENT_SIZE}..{MAX_FRAGMENT_SIZE}"
            )
        for setting in _BUFFER_SETTINGS:
            size = getattr(self, setting)
            if size is not None and (
                isinstance(size, bool)
                or not isinstance(size, int)
                or not MIN_BUFFER_BYTES <= size <= MAX_BUFFER_BYTES
            ):
                raise BadParameterError(
                    f"{setting}: {size!r} is not a byte count in "
                    f"{MIN_BUFFER_BYTES}..{MAX_BUFFER_BYTES}"
                )
        for setting in ("lease_duration", "spdp_interval"):
            duration = getattr(self, setting)
            if duration is not None and duration <= datetime.timedelta(0):
                raise BadParameterError(f"{setting}: {duration!r} is not positive")

    # -- constructors -------------------------------------------------------------------------

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, source: str = "mapping") -> NetworkConfig:
        """A configuration from a mapping with the field names as keys (TOML-shaped)."""
        if "network" in data and isinstance(data["network"], Mapping):
            data = data["network"]
        fields = {f.name for f in attrs.fields(cls)}
        unknown = set(data) - fields
        if unknown:
            raise BadParameterError(
                f"{source}: unknown network setting(s) {sorted(unknown)}; known: {sorted(fields)}"
            )
        return cls(**dict(data))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> NetworkConfig:
        """Read a configuration from a TOML file (keys at top level or in ``[network]``).

        Example::

            interfaces = ["eth1", { name = "lo", multicast = true }]
            multicast = false
            peers = ["10.0.0.2", "10.0.0.3:7410"]
            domain_tag = "plant-a"
            lease_duration = 5.0
        """
        file = Path(path)
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise BadParameterError(f"network config file {str(file)!r} does not exist") from exc
        except tomllib.TOMLDecodeError as exc:
            raise BadParameterError(f"network config file {str(file)!r}: {exc}") from exc
        return cls.from_mapping(data, source=str(file))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> NetworkConfig:
        """A configuration from ``DCPS_*`` environment variables (see the module docs)."""
        env = os.environ if environ is None else environ
        base = cls.load(env["DCPS_NETWORK_CONFIG"]) if env.get("DCPS_NETWORK_CONFIG") else cls()
        changes: dict[str, Any] = {}

        def items(name: str) -> list[str]:
            return [item.strip() for item in env[name].split(",") if item.strip()]

        interfaces = list(base.interfaces)
        if "DCPS_INTERFACES" in env:
            interfaces = [NetworkInterface.parse(item) for item in items("DCPS_INTERFACES")]
        if "DCPS_MULTICAST_INTERFACES" in env:
            forced = [NetworkInterface.parse(item) for item in items("DCPS_MULTICAST_INTERFACES")]
            for force in forced:
                index = next(
                    (i for i, itf in enumerate(interfaces) if itf.label == force.label), None
                )
                if index is None:
                    interfaces.append(attrs.evolve(force, multicast=True))
                else:
                    interfaces[index] = attrs.evolve(interfaces[index], multicast=True)
        changes["interfaces"] = tuple(interfaces)
        if "DCPS_MULTICAST" in env:
            changes["multicast"] = _parse_bool("DCPS_MULTICAST", env["DCPS_MULTICAST"])
        if "DCPS_PEERS" in env:
            changes["peers"] = tuple(items("DCPS_PEERS"))
        for var, field in (
            ("DCPS_DOMAIN_TAG", "domain_tag"),
            ("DCPS_PARTICIPANT_NAME", "participant_name"),
        ):
            if var in env:
                changes[field] = env[var] or None
        if env.get("DCPS_FRAGMENT_SIZE"):
            text = env["DCPS_FRAGMENT_SIZE"]
            if not text.strip().isdigit():
                raise BadParameterError(f"DCPS_FRAGMENT_SIZE: {text!r} is not a byte count")
            changes["fragment_size"] = int(text)
        for setting in _BUFFER_SETTINGS:
            var = f"DCPS_{setting.upper()}"
            if env.get(var):
                text = env[var]
                if not text.strip().isdigit():
                    raise BadParameterError(f"{var}: {text!r} is not a byte count")
                changes[setting] = int(text)
        if env.get("DCPS_MAX_PARTICIPANT_INDEX"):
            text = env["DCPS_MAX_PARTICIPANT_INDEX"]
            if not text.strip().isdigit():
                raise BadParameterError(f"DCPS_MAX_PARTICIPANT_INDEX: {text!r} is not an integer")
            changes["max_participant_index"] = int(text)
        for var, field in (
            ("DCPS_LEASE_DURATION", "lease_duration"),
            ("DCPS_SPDP_INTERVAL", "spdp_interval"),
        ):
            if env.get(var):
                try:
                    changes[field] = float(env[var])
                except ValueError as exc:
                    raise BadParameterError(f"{var}: {env[var]!r} is not seconds") from exc
        return attrs.evolve(base, **changes)

    # -- checks and rendering -----------------------------------------------------------------

    @property
    def loopback_only(self) -> bool:
        """True when interfaces are listed and every one is a loopback interface.

        (``lo``/``lo0`` by name, or a loopback address.) Such a domain never
        leaves the host, whose loopback MTU is 64 KiB, so it gets the loopback
        defaults of ``fragment_size`` and ``socket_receive_buffer``.
        """
        return bool(self.interfaces) and all(_is_loopback(itf) for itf in self.interfaces)

    @property
    def effective_fragment_size(self) -> int | None:
        """The FragmentSize this configuration gives Cyclone (None: Cyclone's 1344)."""
        if self.fragment_size is not None:
            return self.fragment_size
        return LOOPBACK_FRAGMENT_SIZE if self.loopback_only else None

    def check_peers(self) -> None:
        """Raise :class:`BadParameterError` if a peer's host name does not resolve.

        (Cyclone DDS aborts the whole process on a peer it cannot resolve.)
        """
        for peer in self.peers:
            if _is_ip(peer.host):
                continue
            try:
                socket.getaddrinfo(peer.host, None)
            except (OSError, UnicodeError) as exc:
                raise BadParameterError(
                    f"peers: cannot resolve host name {peer.host!r} ({exc})"
                ) from exc

    def check_interfaces(self) -> None:
        """Raise :class:`BadParameterError` if a named interface does not exist on this host."""
        present = {name for _, name in socket.if_nameindex()}
        for itf in self.interfaces:
            if itf.name is not None and itf.name not in present:
                raise BadParameterError(
                    f"interfaces: no interface named {itf.name!r} on this host "
                    f"(present: {', '.join(sorted(present))})"
                )

    def to_cyclone_xml(self, domain_id: int) -> str:
        """The Cyclone DDS configuration (XML) of domain ``domain_id`` with these settings."""
        _check_domain_id(domain_id)
        index = self.max_participant_index
        if index is not None and 7411 + 250 * domain_id + 2 * index > 65535:
            raise BadParameterError(
                f"max_participant_index: {index} gives unicast ports above 65535 in domain "
                f"{domain_id} (7411 + 250 * domain + 2 * index)"
            )
        general: list[str] = []
        if self.interfaces:
            rows = []
            for itf in self.interfaces:
                attributes = []
                if itf.name is not None:
                    attributes.append(f"name={quoteattr(itf.name)}")
                if itf.address is not None:
                    attributes.append(f"address={quoteattr(itf.address)}")
                if itf.multicast is not None:
                    attributes.append(f'multicast="{str(itf.multicast).lower()}"')
                if itf.priority is not None:
                    attributes.append(f'priority="{itf.priority}"')
                rows.append(f"<NetworkInterface {' '.join(attributes)}/>")
            general.append(f"<Interfaces>{''.join(rows)}</Interfaces>")
        allow = "default" if self.multicast else "false"
        general.append(f"<AllowMulticast>{allow}</AllowMulticast>")
        fragment = self.effective_fragment_size
        if fragment is not None:
            # a message must hold at least one fragment and its headers
            message = max(fragment + 1024, CYCLONE_MAX_MESSAGE_SIZE)
            general.append(f"<MaxMessageSize>{message}B</MaxMessageSize>")
            general.append(f"<FragmentSize>{fragment}B</FragmentSize>")
        discovery: list[str] = []
        if self.peers:
            rows = [f"<Peer address={quoteattr(str(peer))}/>" for peer in self.peers]
            discovery.append(f"<Peers>{''.join(rows)}</Peers>")
        if not self.multicast:
            discovery.append("<ParticipantIndex>auto</ParticipantIndex>")
        if self.max_participant_index is not None:
            discovery.append(
                f"<MaxAutoParticipantIndex>{self.max_participant_index}</MaxAutoParticipantIndex>"
            )
        if self.domain_tag is not None:
            discovery.append(f"<Tag>{escape(self.domain_tag)}</Tag>")
        if self.lease_duration is not None:
            discovery.append(f"<LeaseDuration>{_seconds(self.lease_duration)}</LeaseDuration>")
        if self.spdp_interval is not None:
            discovery.append(f"<SPDPInterval>{_seconds(self.spdp_interval)}</SPDPInterval>")
        internal: list[str] = []
        if self.whc_high is not None:
            internal.append(f"<Watermarks><WhcHigh>{self.whc_high}B</WhcHigh></Watermarks>")
        if self.socket_receive_buffer is not None:
            internal.append(f'<SocketReceiveBufferSize min="{self.socket_receive_buffer}B"/>')
        elif self.loopback_only:  # asked for, not required: the kernel may give less
            internal.append(f'<SocketReceiveBufferSize max="{LOOPBACK_RECEIVE_BUFFER}B"/>')
        if self.socket_send_buffer is not None:
            internal.append(f'<SocketSendBufferSize min="{self.socket_send_buffer}B"/>')
        body = f"<General>{''.join(general)}</General>"
        if discovery:
            body += f"<Discovery>{''.join(discovery)}</Discovery>"
        if internal:
            body += f"<Internal>{''.join(internal)}</Internal>"
        return (
            '<CycloneDDS xmlns="https://cdds.io/config">'
            f'<Domain id="{domain_id}">{body}</Domain></CycloneDDS>'
        )

    def participant_qos(self) -> Any:
        """The Cyclone participant QoS carrying ``participant_name`` (``None`` without one)."""
        if self.participant_name is None:
            return None
        from cyclonedds.qos import Policy, Qos

        return Qos(Policy.EntityName(self.participant_name))

    def apply(self, domain_id: int) -> Any:
        """Create Cyclone domain ``domain_id`` with this configuration; keep the result alive.

        Returns the ``cyclonedds.domain.Domain``: participants created afterwards
        in this process for ``domain_id`` use it, and deleting (or dropping) it
        deletes them. Raises :class:`BadParameterError` for an unknown interface,
        a peer whose name does not resolve or a configuration Cyclone rejects,
        and :class:`PreconditionNotMetError` if this process already has domain
        ``domain_id`` (e.g. a participant was created earlier without a network
        configuration).
        """
        self.check_interfaces()
        self.check_peers()
        xml = self.to_cyclone_xml(domain_id)
        from cyclonedds.core import DDSException
        from cyclonedds.domain import Domain

        try:
            return Domain(domain_id, config=xml)
        except DDSException as exc:
            if exc.code == DDSException.DDS_RETCODE_PRECONDITION_NOT_MET:
                raise PreconditionNotMetError(
                    f"domain {domain_id} already exists in this process (a participant or "
                    "domain was created before); its network configuration cannot change. "
                    "Apply the NetworkConfig before creating any participant in that domain, "
                    "or close them all first"
                ) from exc
            raise BadParameterError(
                f"Cyclone DDS rejected the network configuration of domain {domain_id} "
                f"({exc}); configuration: {xml}"
            ) from exc


#: The byte-count settings of Internal (validated alike; ``DCPS_<NAME>`` in the environment).
_BUFFER_SETTINGS = ("whc_high", "socket_receive_buffer", "socket_send_buffer")
#: Bounds of those byte counts (Cyclone takes 32-bit byte counts).
MIN_BUFFER_BYTES = 1024
MAX_BUFFER_BYTES = (1 << 31) - 1


def _is_loopback(itf: NetworkInterface) -> bool:
    if itf.address is not None:
        return ipaddress.ip_address(itf.address).is_loopback
    return itf.name in _LOOPBACK_NAMES


#: Names of the loopback interface (Linux, the BSDs and macOS).
_LOOPBACK_NAMES = frozenset({"lo", "lo0"})


def _check_domain_id(domain_id: int) -> None:
    if isinstance(domain_id, bool) or not isinstance(domain_id, int):
        raise BadParameterError(f"domain_id: {domain_id!r} is not an integer")
    if not 0 <= domain_id <= MAX_DOMAIN_ID:
        raise BadParameterError(f"domain_id: {domain_id} is not in 0..{MAX_DOMAIN_ID}")


def _parse_bool(setting: str, text: str) -> bool:
    value = text.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise BadParameterError(f"{setting}: {text!r} is not a boolean (1/0, true/false, on/off)")


show_as("dcps", NetworkConfig, NetworkInterface)
