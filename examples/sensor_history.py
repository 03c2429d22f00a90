"""A sensor fleet whose writers die, and a monitor started later that sees every last reading.

    python -m examples.sensor_history --domain 0 --sensors 5

A store runs the durability service (``durability=["*"]``). Each sensor is a
process of its own: it writes a few TRANSIENT readings and exits. Only then
does the monitor start: a TRANSIENT DataReader, which receives from the
service each sensor's last reading, its instance NOT_ALIVE_NO_WRITERS (the
writers are gone).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from datetime import timedelta

import dcps
import qos as q
from dcps.store import Store, SyncMode
from examples.sensors import Kind, Reading

TOPIC = "SensorHistory"
#: What sensors write: TRANSIENT, and no dispose when a sensor goes (its state stays).
SENSOR_QOS = q.DataWriterQos(
    q.Durability.TRANSIENT,
    q.Reliability.RELIABLE,
    q.WriterDataLifecycle(autodispose_unregistered_instances=False),
)


def sensor(domain: int, sensor_id: int) -> None:
    """One sensor process: three readings, then it exits."""
    with dcps.DomainParticipant(domain) as dp:
        topic = dcps.Topic(dp, TOPIC, Reading)
        writer = dcps.DataWriter(dp, topic, qos=SENSOR_QOS)  # waits (2 s) for the service
        # the monitor starts later: the only reader is the service's, so wait for it as
        # long as a loaded host may need (what is written before it matched is not kept)
        writer.wait_for_readers(1, timedelta(seconds=30))
        for step in range(3):
            writer.write(Reading(sensor_id, Kind.TEMPERATURE, 20.0 + sensor_id + step, "lab"))
        writer.wait_for_acknowledgments(timedelta(seconds=10))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--sensors", type=int, default=5)
    parser.add_argument("--sensor", type=int, help=argparse.SUPPRESS)  # a sensor process
    args = parser.parse_args()
    if args.sensor is not None:
        sensor(args.domain, args.sensor)
        return
    with (
        tempfile.TemporaryDirectory() as data,
        Store(data, domain_id=args.domain, durability=["*"], sync=SyncMode.NORMAL),
    ):
        fleet = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "examples.sensor_history",
                    "--domain",
                    str(args.domain),
                    "--sensor",
                    str(i),
                ]
            )
            for i in range(args.sensors)
        ]
        for process in fleet:
            process.wait()
        print(f"{args.sensors} sensors wrote their readings and exited.")
        with dcps.DomainParticipant(args.domain) as dp:
            topic = dcps.Topic(dp, TOPIC, Reading)
            monitor = dcps.DataReader(
                dp, topic, qos=q.DataReaderQos(q.Durability.TRANSIENT, q.History.keep_last(1))
            )
            monitor.wait_for_historical_data(timedelta(seconds=10))
            for s in sorted(monitor.take(), key=lambda s: s.data.sensor_id):
                print(
                    f"sensor {s.data.sensor_id}: {s.data.value:.1f} ({s.info.instance_state.name})"
                )


if __name__ == "__main__":
    main()
