"""Many new TRANSIENT writers, each writing one reading the moment it exists.

argv: domain topic count
Creates ``count`` writers of ``topic`` one after the other in this process; each writes
sensor ``i`` right after its creation returns (the creation waits for the durability
service: dcps/_history.py ``wait_for_durability_service``). Then waits until every
writer's sample was acknowledged, prints ``written`` and exits without disposing.
"""

from __future__ import annotations

import sys

import dcps
import qos as q
from tests.support.topic_types import Reading

QOS = q.DataWriterQos(
    q.Durability.TRANSIENT,
    q.Reliability.RELIABLE,
    q.History.KEEP_ALL,
    q.WriterDataLifecycle(autodispose_unregistered_instances=False),
)


def main() -> None:
    domain, topic_name, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    with dcps.DomainParticipant(domain) as participant:
        topic = dcps.Topic(participant, topic_name, Reading)
        writers = []
        for sensor in range(count):
            writer = dcps.DataWriter(participant, topic, qos=QOS)
            writer.write(Reading(sensor, 1.0, "new"))
            writers.append(writer)
        for writer in writers:
            writer.wait_for_acknowledgments(timeout=30)
    print("written", flush=True)


if __name__ == "__main__":
    main()
