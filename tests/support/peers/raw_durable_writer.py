"""A non-dcps writer process on the raw ``cyclonedds`` binding: argv domain t_topic tl_topic.

Writes ``Reading(s, 1.0, "raw")`` for sensors 0-2 with a TRANSIENT writer on ``t_topic``
(after a durability service's reader matched it, so the service keeps them) and with a
TRANSIENT_LOCAL writer on ``tl_topic``, waits for the acknowledgements, prints
``written`` and keeps both writers alive until stdin closes.
"""

from __future__ import annotations

import sys
import time

from cyclonedds.core import Policy, Qos
from cyclonedds.domain import DomainParticipant
from cyclonedds.pub import DataWriter
from cyclonedds.topic import Topic

from tests.support.topic_types import Reading

SENSORS = 3


def main() -> None:
    domain, t_topic, tl_topic = sys.argv[1:4]
    dp = DomainParticipant(int(domain))
    common = (Policy.Reliability.Reliable(10**10), Policy.History.KeepLast(1))
    transient = DataWriter(
        dp, Topic(dp, t_topic, Reading), Qos(Policy.Durability.Transient, *common)
    )
    local = DataWriter(
        dp, Topic(dp, tl_topic, Reading), Qos(Policy.Durability.TransientLocal, *common)
    )
    deadline = time.monotonic() + 30
    # the durability service's reader: what is written before it matched, it never gets
    while transient.get_publication_matched_status().current_count < 1:
        if time.monotonic() > deadline:
            raise SystemExit("no durability service matched the TRANSIENT writer")
        time.sleep(0.01)  # polling the match count: the peer has no waitset to spare
    for s in range(SENSORS):
        transient.write(Reading(s, 1.0, "raw"))
        local.write(Reading(s, 1.0, "raw"))
    transient.wait_for_acks(10**10)
    print("written", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
