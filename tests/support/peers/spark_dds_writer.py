"""Peer: write spark_types.Variable samples to a plain DDS topic, then dispose one.

Usage: spark_dds_writer.py DOMAIN TOPIC COUNT
Waits for one reader, writes ids 0..COUNT-1, disposes id 0, waits for
acknowledgements and prints ``wrote N``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from spark_types import Color, Point, Variable

import dcps
import qos


def sample(i: int) -> Variable:
    """Variable sample ``i``."""
    return Variable(
        id=i,
        name=f"s{i}",
        note="ü",
        values=np.arange(i % 3, dtype=np.float32),
        blob=np.arange(i % 4, dtype=np.uint8),
        points=[Point(x=i, y=0.5)],
        big=2**64 - 1 - i,
        color=Color.BLUE,
        maybe=i if i % 2 else None,
    )


def main() -> None:
    """Write, dispose, wait for acknowledgements."""
    domain, topic_name, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    with dcps.DomainParticipant(domain) as participant:
        topic = dcps.Topic(participant, topic_name, Variable)
        writer = dcps.DataWriter(
            participant,
            topic,
            qos=qos.DataWriterQos(qos.Reliability.RELIABLE, qos.History.KEEP_ALL),
        )
        writer.wait_for_readers(1, timeout=30)
        for i in range(count):
            writer.write(sample(i))
        writer.dispose(sample(0))
        writer.wait_for_acknowledgments(timeout=30)
    print(f"wrote {count}", flush=True)


if __name__ == "__main__":
    main()
