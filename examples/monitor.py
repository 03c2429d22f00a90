"""Print every reading and every instance lifecycle change of the sensor fleet.

python -m examples.monitor --domain 0
"""

from __future__ import annotations

import argparse

import dcps
import qos
from examples.sensors import Reading


def describe(sample: dcps.Sample[Reading]) -> str:
    """One line about a sample: its data or the lifecycle change it announces."""
    info = sample.info
    who = f"sensor {sample.data.sensor_id}"
    if not sample.valid_data:
        return f"{who}: {info.instance_state.name}"
    news = " (new instance)" if info.view_state == dcps.ViewState.NEW else ""
    state = (
        "" if info.instance_state == dcps.InstanceState.ALIVE else f" [{info.instance_state.name}]"
    )
    return f"{who}: {sample.data.kind.name.lower()} {sample.data.value:.1f}{news}{state}"


def main(argv: list[str] | None = None) -> None:
    """Take samples as they arrive and print them, until interrupted."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--domain", type=int, default=0)
    parser.add_argument("--topic", default="fleet/readings")
    args = parser.parse_args(argv)
    profile = qos.profile("reliable_state")
    with dcps.DomainParticipant(args.domain) as participant:
        topic = dcps.Topic(participant, args.topic, Reading, qos=profile.topic)
        reader = dcps.DataReader(participant, topic, qos=profile.reader)
        with dcps.WaitSet(participant) as waitset:
            waitset.attach(dcps.ReadCondition(reader, sample_states=dcps.SampleState.NOT_READ))
            while True:
                waitset.wait()
                for sample in reader.take(sample_states=dcps.SampleState.NOT_READ):
                    print(describe(sample), flush=True)


if __name__ == "__main__":
    main()
