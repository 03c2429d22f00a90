"""Change an autopurge reader's conditions or listener over and over while a writer floods it.

Run: ``python reader_churn.py DOMAIN TOPIC SECONDS conditions|listeners``; prints
how many changes it made. ``conditions`` creates and closes StatusConditions:
setting a status mask waits for running listener calls with the reader locked,
so a listener that reads the reader deadlocks it. ``listeners`` swaps the
reader's listener: freeing callbacks Cyclone may still call crashes it.
"""

import os
import sys
import threading
import time
from datetime import timedelta

# the repository root first, so the helpers import as tests.support.* and the
# test folders (tests/idl, tests/qos) cannot shadow the idl and qos packages
_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
sys.path[:1] = [_REPO]

import dcps  # noqa: E402
import qos  # noqa: E402
from tests.support.topic_types import Reading  # noqa: E402


class _Matches(dcps.Listener):
    def on_subscription_matched(self, reader: object, status: object) -> None:
        pass


def main() -> None:
    domain, topic_name, seconds, mode = (
        int(sys.argv[1]),
        sys.argv[2],
        float(sys.argv[3]),
        sys.argv[4],
    )
    reliable = qos.Reliability.reliable()
    purging = qos.DataReaderQos(
        reliable,
        qos.History.KEEP_ALL,
        qos.ReaderDataLifecycle(autopurge_disposed_samples_delay=timedelta(seconds=30)),
    )
    with dcps.DomainParticipant(domain) as participant:
        topic = dcps.Topic(participant, topic_name, Reading)
        reader = dcps.DataReader(participant, topic, qos=purging)
        writer = dcps.DataWriter(participant, topic, qos=qos.DataWriterQos(reliable))
        writer.wait_for_readers()
        done = threading.Event()

        def flood() -> None:
            i = 0
            while not done.is_set():
                writer.write(Reading(i % 5, 1.0, ""))
                i += 1

        thread = threading.Thread(target=flood)
        thread.start()
        made = 0
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                if mode == "conditions":
                    condition = dcps.StatusCondition(reader, dcps.StatusKind.DATA_AVAILABLE)
                    reader.take()
                    condition.close()
                else:
                    reader.set_listener(_Matches() if made % 2 else None)
                    reader.take()
                made += 1
        finally:
            done.set()
            thread.join()
        print(made, flush=True)


if __name__ == "__main__":
    main()
