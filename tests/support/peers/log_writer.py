"""Peer: append 10-element batches to a channel log forever, printing each confirmed batch count."""

from __future__ import annotations

import sys

from dcps.store._log import ChannelLog, SyncMode


def main() -> None:
    path, sync = sys.argv[1], SyncMode(sys.argv[2])
    log = ChannelLog(path, sync=sync)
    log.ensure_topic("t", 1, retain_consumed=True)
    batches = 0
    offset = 0
    while True:
        log.append("t", 0, [b"%d" % (offset + i) for i in range(10)])
        offset += 10
        batches += 1
        print(batches, flush=True)


if __name__ == "__main__":
    main()
