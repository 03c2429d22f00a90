"""Peer: writes a burst with a batching writer and exits without closing anything.

Usage: ``burst_writer.py DOMAIN TOPIC COUNT``. Waits for one reader, prints
``matched`` and waits for a line on stdin (the test's go, once its reader has
matched this writer too), then writes COUNT ``sensors::Reading`` samples (values
0 .. COUNT-1) with flush delays of a minute, so all but the first are still held
when the program ends: only the exit-time flush (dcps/_write_batching.py) can
send them.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

# the repository root first, so the helpers import as tests.support.*
sys.path[:1] = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))]

import dcps  # noqa: E402
import qos as q  # noqa: E402
from dcps import _write_batching  # noqa: E402
from tests.support.topic_types import Reading  # noqa: E402


def main() -> None:
    domain, topic_name, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    _write_batching.MAX_DELAY_NS = _write_batching.QUIET_NS = 60_000_000_000
    participant = dcps.DomainParticipant(domain)
    writer = dcps.DataWriter(
        participant,
        dcps.Topic(participant, topic_name, Reading),
        qos=q.DataWriterQos(q.Reliability.reliable(timedelta(seconds=30)), q.History.KEEP_ALL),
        batching=True,
    )
    writer.wait_for_readers(1, timeout=20)
    print("matched", flush=True)
    sys.stdin.readline()
    for i in range(count):
        writer.write(Reading(i % 10, float(i), "burst"))
    print("written", flush=True)


if __name__ == "__main__":
    main()
