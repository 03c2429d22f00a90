"""Logging of the ``dcps`` loggers, as the command line's ``-v``/``--log-level`` set it.

Every logger of the project is a child of ``dcps`` (``dcps.store``,
``dcps.channels.subscriber``, ``dcps.wire.auth``, ...); see docs/logging.md.
"""

from __future__ import annotations

import logging

__all__ = ["LEVELS", "configure_logging", "level_of"]

#: The level names ``--log-level`` accepts (any case).
LEVELS = ("CRITICAL", "ERROR", "WARNING", "INFO", "DEBUG")

_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_HANDLER_NAME = "dcps-cli"


def level_of(log_level: str | None, verbose: int) -> int:
    """The level from ``--log-level`` (wins when given) or the ``-v`` count.

    No option: WARNING; ``-v``: INFO; ``-vv``: DEBUG.
    """
    if log_level:
        name = log_level.strip().upper()
        if name not in LEVELS:
            raise ValueError(f"unknown log level {log_level!r} (known: {', '.join(LEVELS)})")
        return int(getattr(logging, name))
    return logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG


def configure_logging(level: int) -> logging.Logger:
    """Send the ``dcps`` loggers at ``level`` and above to stderr (once per process).

    Only the ``dcps`` logger tree is touched, so an application that embeds
    the command line keeps its own root configuration.
    """
    logger = logging.getLogger("dcps")
    logger.setLevel(level)
    if not any(h.get_name() == _HANDLER_NAME for h in logger.handlers):
        handler = logging.StreamHandler()  # stderr: stdout carries the command's data
        handler.set_name(_HANDLER_NAME)
        handler.setFormatter(logging.Formatter(_FORMAT))
        logger.addHandler(handler)
    return logger
