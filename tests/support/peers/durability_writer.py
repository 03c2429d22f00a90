"""A TRANSIENT/PERSISTENT writer process: writes readings, says so, then waits to be killed.

argv: domain topic kind(TRANSIENT|PERSISTENT) sensors rounds [dispose_sensor]
Writes ``rounds`` readings of each of ``sensors`` sensors (value = round), optionally
disposes one sensor, prints ``written <writer guid>`` and sleeps until killed (or
until stdin closes).
"""

from __future__ import annotations

import os
import sys

import dcps
import qos as q
from tests.support.topic_types import Reading


def main() -> None:
    domain, topic_name, kind, sensors, rounds = sys.argv[1:6]
    dispose = int(sys.argv[6]) if len(sys.argv) > 6 else None
    durability = q.Durability.PERSISTENT if kind == "PERSISTENT" else q.Durability.TRANSIENT
    dp = dcps.DomainParticipant(int(domain))
    topic = dcps.Topic(dp, topic_name, Reading)
    writer = dcps.DataWriter(
        dp,
        topic,
        qos=q.DataWriterQos(durability, q.Reliability.RELIABLE, q.History.keep_last(1)),
    )
    # DURABILITY_PEER_READERS: how many readers (e.g. redundant services) must have
    # matched before the first write; a service that matches later never gets it
    writer.wait_for_readers(int(os.environ.get("DURABILITY_PEER_READERS", "1")), 30)
    for r in range(int(rounds)):
        for s in range(int(sensors)):
            writer.write(Reading(s, float(r), f"s{s}"))
    if dispose is not None:
        writer.dispose(Reading(dispose, 0.0, ""))
    print("written", flush=True)
    sys.stdin.read()  # until the test closes stdin or kills us
    dp.close()


if __name__ == "__main__":
    main()
