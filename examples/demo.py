"""The dcps demo: a sensor fleet in another process, watched by a monitor here.

It shows typed keyed topics (each sensor is an instance), QoS from a named
profile (reliable, transient-local state) and the instance lifecycle:
a sensor retired with dispose, the fleet process killed (its sensors lose
their writer), and a new fleet process bringing them back (NEW again, with
generation counts). Then a channelled topic on an embedded store: three
worker processes in a subscriber group, one killed mid-run, its channels
moving, and a tally proving nothing was lost (``examples/channels_demo.py``).
Everything stays on this machine's loopback interface.

    ./dev demo            (or: python -m examples.demo)
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable

# Keep the demo's traffic on loopback unless the user configured the network.
if not any(name.startswith("DCPS_") for name in os.environ):
    os.environ["DCPS_INTERFACES"] = "lo"
    os.environ["DCPS_MULTICAST_INTERFACES"] = "lo"

import dcps
import qos
from examples import channels_demo
from examples.monitor import describe
from examples.sensors import Reading

TOPIC = "demo/fleet"


def start_fleet(domain: int, *args: str) -> subprocess.Popen[str]:
    """Start ``examples.sensor_fleet`` in its own process."""
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "examples.sensor_fleet",
            "--domain",
            str(domain),
            "--topic",
            TOPIC,
            *args,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


class Monitor:
    """A reader that prints what it takes and waits for lifecycle milestones."""

    def __init__(self, participant: dcps.DomainParticipant) -> None:
        profile = qos.profile("reliable_state")
        topic = dcps.Topic(participant, TOPIC, Reading, qos=profile.topic)
        self.reader = dcps.DataReader(participant, topic, qos=profile.reader)
        self.waitset = dcps.WaitSet(participant)
        self.waitset.attach(
            dcps.ReadCondition(self.reader, sample_states=dcps.SampleState.NOT_READ)
        )
        self.seen: list[dcps.Sample[Reading]] = []

    def until(
        self, done: Callable[[list[dcps.Sample[Reading]]], bool], timeout: float = 30
    ) -> None:
        """Print samples as they come until ``done(all samples so far)``."""
        while not done(self.seen):
            self.waitset.wait(timeout)
            # read, not take: the reader keeps the latest sample of each sensor, so it
            # remembers instances across their generations (keep-last 1 bounds memory)
            for sample in self.reader.read(sample_states=dcps.SampleState.NOT_READ):
                print("  monitor:", describe(sample), _counts(sample), flush=True)
                self.seen.append(sample)


def _counts(sample: dcps.Sample[Reading]) -> str:
    info = sample.info
    if info.disposed_generation_count or info.no_writers_generation_count:
        return (
            f"(generations: disposed {info.disposed_generation_count}, "
            f"no-writers {info.no_writers_generation_count})"
        )
    return ""


def _state(sensor: int, state: dcps.InstanceState) -> Callable[[list[dcps.Sample[Reading]]], bool]:
    return lambda seen: any(
        s.data.sensor_id == sensor and s.info.instance_state == state for s in seen
    )


def main(argv: list[str] | None = None) -> None:
    """Run the three acts of the demo."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=42)
    args = parser.parse_args(argv)
    with dcps.DomainParticipant(args.domain) as participant:
        monitor = Monitor(participant)

        print("1. A fleet process publishes sensors 1-3 and retires sensor 2 (dispose).")
        fleet = start_fleet(
            args.domain, "--sensors", "1", "2", "3", "--rounds", "3", "--retire", "2"
        )
        monitor.until(_state(2, dcps.InstanceState.NOT_ALIVE_DISPOSED))
        monitor.until(lambda seen: {s.data.sensor_id for s in seen} >= {1, 3})

        print("2. The fleet process is killed (kill -9): its sensors lose their only writer.")
        fleet.send_signal(signal.SIGKILL)
        fleet.wait()
        monitor.until(_state(1, dcps.InstanceState.NOT_ALIVE_NO_WRITERS))
        monitor.until(_state(3, dcps.InstanceState.NOT_ALIVE_NO_WRITERS))

        print(
            "3. A new fleet process brings sensors 1 and 3 back: NEW again, one generation later."
        )
        reborn = start_fleet(args.domain, "--sensors", "1", "3", "--rounds", "1")
        before = len(monitor.seen)
        monitor.until(
            lambda seen: {s.data.sensor_id for s in seen[before:] if s.valid_data} >= {1, 3}
        )
        assert reborn.stdin is not None
        reborn.stdin.close()  # let it exit cleanly
        reborn.wait(30)

    alive = [s for s in monitor.seen[before:] if s.valid_data]
    print(
        f"   {len(monitor.seen)} samples; sensors {sorted({s.data.sensor_id for s in alive})} "
        f"came back with view state {sorted({s.info.view_state.name for s in alive})}."
    )

    tally = channels_demo.main(["--domain", str(args.domain + 1)])
    print("Done." if tally["lost"] == 0 else "Done, but elements were LOST.")


if __name__ == "__main__":
    main()
