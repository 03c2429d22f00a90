"""Options every DDS-side command shares: domain, network settings, output, bounds.

The network options build a :class:`dcps.NetworkConfig`: ``--network-config``
(a TOML file) or else the ``DCPS_*`` environment variables give the base, and
``--interface``, ``--peer``, ``--multicast/--no-multicast`` and
``--domain-tag`` override it. Without any of them the participant reads the
environment itself (``DCPS_*``, else Cyclone's ``CYCLONEDDS_URI``).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import typer

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = [
    "DOMAIN",
    "DOMAIN_TAG",
    "INTERFACE",
    "JSON",
    "MULTICAST",
    "NETWORK_CONFIG",
    "PEER",
    "Network",
    "fail",
]

DOMAIN = typer.Option(0, "--domain", "-i", help="DDS domain id.", min=0)
JSON = typer.Option(False, "--json", help="Print JSON (a document, or JSON lines when streaming).")
NETWORK_CONFIG = typer.Option(
    None,
    "--network-config",
    help="TOML file of network settings (as DCPS_NETWORK_CONFIG; see dcps.NetworkConfig).",
    rich_help_panel="Network",
)
INTERFACE = typer.Option(
    [],
    "--interface",
    help="Network interface name or address (repeatable).",
    rich_help_panel="Network",
)
PEER = typer.Option(
    [],
    "--peer",
    help="Unicast discovery peer HOST[:PORT] (repeatable).",
    rich_help_panel="Network",
)
MULTICAST = typer.Option(
    None,
    "--multicast/--no-multicast",
    help="Use multicast for discovery and data (default: the configuration's).",
    rich_help_panel="Network",
    show_default=False,
)
DOMAIN_TAG = typer.Option(
    None,
    "--domain-tag",
    help="Discover only participants with this tag.",
    rich_help_panel="Network",
)


@attrs.frozen
class Network:
    """The network options of one command, turned into a configuration on demand."""

    config_file: Path | None = None
    interfaces: tuple[str, ...] = ()
    peers: tuple[str, ...] = ()
    multicast: bool | None = None
    domain_tag: str | None = None

    def config(self) -> NetworkConfig | None:
        """The :class:`NetworkConfig` these options give, or None to use the environment.

        Raises :class:`dcps.BadParameterError` naming a bad setting.
        """
        # function-local: `dcps --help` does not load the network module
        from dcps._network import NetworkConfig

        if (
            self.config_file is None
            and not self.interfaces
            and not self.peers
            and self.multicast is None
            and self.domain_tag is None
        ):
            return None
        base = (
            NetworkConfig.load(self.config_file)
            if self.config_file is not None
            else NetworkConfig.from_env()
        )
        changes: dict[str, Any] = {}
        if self.interfaces:
            changes["interfaces"] = self.interfaces
        if self.peers:
            changes["peers"] = self.peers
        if self.multicast is not None:
            changes["multicast"] = self.multicast
        if self.domain_tag is not None:
            changes["domain_tag"] = self.domain_tag
        return attrs.evolve(base, **changes)


def check_seconds(option: str, value: float | None) -> float | None:
    """``value`` if it is a finite, non-negative number of seconds (None passes)."""
    if value is not None and (not math.isfinite(value) or value < 0):
        raise typer.BadParameter(f"{value} is not a number of seconds >= 0", param_hint=option)
    return value


def fail(command: str, exc: BaseException, where: str = "", code: int = 1) -> typer.Exit:
    """Print ``dcps COMMAND: Error: [where: ]message`` on stderr; return the Exit to raise."""
    place = f"{where}: " if where else ""
    typer.echo(f"dcps {command}: {type(exc).__name__}: {place}{exc}", err=True)
    return typer.Exit(code)
