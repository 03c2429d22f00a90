"""Publish readings for a few sensors; decommission one (dispose) along the way.

Run it next to ``examples/monitor.py`` (any number of processes or hosts):

    python -m examples.sensor_fleet --domain 0 --sensors 1 2 3 --rounds 5
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta

import dcps
import qos
from examples.sensors import Kind, Reading


def main(argv: list[str] | None = None) -> None:
    """Publish ``rounds`` readings per sensor, dispose the ``--retire`` sensor, then linger."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--topic", default="fleet/readings")
    parser.add_argument("--sensors", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--retire", type=int, default=None, help="sensor to dispose at the end")
    parser.add_argument("--readers", type=int, default=1, help="wait for this many readers")
    args = parser.parse_args(argv)

    profile = qos.profile("reliable_state")  # reliable, transient-local, keep last 1
    writer_qos = profile.writer.with_(
        # readers notice within a second if this process dies ...
        qos.Liveliness.automatic(timedelta(seconds=1)),
        # ... and then see NOT_ALIVE_NO_WRITERS, not DISPOSED: only --retire disposes
        qos.WriterDataLifecycle(autodispose_unregistered_instances=False),
    )
    with dcps.DomainParticipant(args.domain) as participant:
        topic = dcps.Topic(participant, args.topic, Reading, qos=profile.topic)
        writer = dcps.DataWriter(participant, topic, qos=writer_qos)
        writer.wait_for_readers(args.readers, timeout=30)
        for round_ in range(args.rounds):
            for sensor in args.sensors:
                kind = Kind.TEMPERATURE if sensor % 2 else Kind.HUMIDITY
                writer.write(Reading(sensor, kind, 20.0 + sensor + round_ / 10, "lab"))
        if args.retire is not None:
            writer.dispose(Reading(args.retire, Kind.TEMPERATURE, 0.0, ""))
        writer.wait_for_acknowledgments(30)
        print("published", flush=True)
        # Stay alive (our instances stay ALIVE) until told to stop or killed.
        sys.stdin.readline()


if __name__ == "__main__":
    main()
