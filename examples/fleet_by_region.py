"""Track a vehicle fleet by region with SubscriptionKeys.

On the wire each vehicle is its own instance (keyed by ``vehicle_id``). This
reader keys instances by ``region`` instead, so ``read()`` groups positions
per region, ``lookup_instance`` finds a region, and a region whose samples
were all taken disappears until a vehicle reports from it again.

    python -m examples.fleet_by_region --domain 0
"""

from __future__ import annotations

import argparse
import os

if not any(name.startswith("DCPS_") for name in os.environ):  # stay on loopback
    os.environ["DCPS_INTERFACES"] = "lo"
    os.environ["DCPS_MULTICAST_INTERFACES"] = "lo"

import dcps
import idl
import qos


class Position(idl.Struct, typename="fleet::Position"):
    """Where a vehicle is; the topic key is the vehicle."""

    vehicle_id: idl.key[idl.int32]
    region: idl.bounded_str[32]
    x: idl.float64
    y: idl.float64


def main(argv: list[str] | None = None) -> None:
    """Publish a few positions and print them grouped by region."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    args = parser.parse_args(argv)
    reliable = qos.DataReaderQos(qos.Reliability.RELIABLE, qos.History.keep_last(10))
    with dcps.DomainParticipant(args.domain) as participant:
        topic = dcps.Topic(participant, "fleet/positions", Position)
        by_region = dcps.DataReader(
            participant, topic, qos=reliable.with_(qos.SubscriptionKeys.of("region"))
        )
        writer = dcps.DataWriter(participant, topic)
        writer.wait_for_readers()
        by_region.wait_for_writers()
        for vehicle, region, x in (
            (1, "north", 0.5),
            (2, "north", 1.5),
            (3, "south", 9.0),
            (1, "south", 8.0),
        ):
            writer.write(Position(vehicle, region, x, 0.0))
        writer.wait_for_acknowledgments(10)

        for samples in by_region.instances():
            region = samples[0].data.region
            vehicles = [s.data.vehicle_id for s in samples]
            print(f"{region}: vehicles {vehicles}")
        north = by_region.lookup_instance(Position(0, "north", 0.0, 0.0))
        by_region.take(instance=north)
        print("after taking north:", by_region.lookup_instance(Position(0, "north", 0.0, 0.0)))


if __name__ == "__main__":
    main()
