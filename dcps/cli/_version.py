"""The installed distribution that ships ``dcps``: its name (for install hints) and version."""

from __future__ import annotations

from importlib import metadata

__all__ = ["dist_name", "dist_version"]


def dist_name() -> str:
    """The name of the distribution that installed the ``dcps`` package (``dcps`` if unknown)."""
    names = metadata.packages_distributions().get("dcps") or ["dcps"]
    return names[0]


def dist_version() -> str:
    """The installed version of :func:`dist_name`'s distribution."""
    try:
        return metadata.version(dist_name())
    except metadata.PackageNotFoundError:
        return "unknown (not installed)"
