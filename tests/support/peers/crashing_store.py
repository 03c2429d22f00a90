"""A store process that dies (like kill -9) just before one write: argv CRASH_BEFORE STORE-ARGS.

``CRASH_BEFORE`` is a substring of the ``doing`` text of a ``ChannelLog.write``
(e.g. ``forgetting the acknowledgements``); the first such write ends the
process with ``os._exit(9)`` before its transaction begins, so the file holds
exactly what the writes before it committed. The other arguments are those of
``python -m dcps.store``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from dcps.cli._store import store_main
from dcps.store._log import ChannelLog


def main() -> None:
    crash_before, *argv = sys.argv[1:]
    write = ChannelLog.write

    def dying_write(self: ChannelLog, doing: str, body: Callable[[Any], Any]) -> Any:
        if crash_before in doing:
            os._exit(9)
        return write(self, doing, body)

    ChannelLog.write = dying_write  # type: ignore[method-assign]
    store_main(argv)


if __name__ == "__main__":
    main()
