"""Peer: a plain reliable KEEP_ALL reader of ``sensors::Reading`` in its own process.

Usage: ``plain_reader.py DOMAIN TOPIC [best_effort]``. Prints ``ready`` once the reader exists,
then for each sample taken ``got SENSOR VALUE STATE`` (STATE: the instance state's
name; VALUE 0 for a sample without data) until stdin closes. A reader in another
process gets a writer's samples over the network, as any remote subscriber does
(readers in the writer's own process get them by local delivery).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading

# the repository root first, so the helpers import as tests.support.*
sys.path[:1] = [os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))]

import dcps  # noqa: E402
import qos as q  # noqa: E402
from tests.support.topic_types import Reading  # noqa: E402


def main() -> None:
    domain, topic_name = int(sys.argv[1]), sys.argv[2]
    best_effort = sys.argv[3:] == ["best_effort"]
    reliability = q.Reliability.BEST_EFFORT if best_effort else q.Reliability.RELIABLE
    with dcps.DomainParticipant(domain) as dp:
        reader = dcps.DataReader(
            dp,
            dcps.Topic(dp, topic_name, Reading),
            qos=q.DataReaderQos(reliability, q.History.KEEP_ALL),
        )
        waitset = dcps.WaitSet(dp)
        waitset.attach(dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ))
        done = threading.Event()  # stdin closed: the test is over
        threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
        print("ready", flush=True)
        while not done.is_set():
            for data, info in reader.take():
                value = data.value if info.valid_data else 0.0
                print(f"got {data.sensor} {value:g} {info.instance_state.name}", flush=True)
            with contextlib.suppress(dcps.DcpsTimeoutError):
                waitset.wait(0.2)


if __name__ == "__main__":
    main()
