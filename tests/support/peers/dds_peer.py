"""A DDS peer in its own process, driven by JSON lines on stdin.

Usage: dds_peer.py DOMAIN TOPIC [QOS_JSON]
Each command line is answered with one JSON line ``{"ok": ...}`` or
``{"error": "..."}``. Commands (``op``):

- ``writer`` {"qos": {...}, "partitions": [...]}: create the writer
- ``write`` / ``write_dispose`` / ``dispose`` / ``unregister`` {"sensor", "value", "label"}
- ``wait_readers`` {"count"}: block until that many readers match
- ``wait_acks``: block until every matched reliable reader acknowledged all writes
- ``assert_liveliness``
- ``close``: close the writer (with autodispose on, that disposes its instances)
- ``exit``
"""

from __future__ import annotations

import json
import os
import sys

# the repository root first, so the helpers import as tests.support.* and the
# test folders (tests/idl, tests/qos) cannot shadow the idl and qos packages
_REPO = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
sys.path[:1] = [_REPO]

import dcps  # noqa: E402
from tests.support.qos_spec import writer_qos  # noqa: E402
from tests.support.topic_types import Reading  # noqa: E402


def main() -> None:
    domain, topic_name = int(sys.argv[1]), sys.argv[2]
    participant = dcps.DomainParticipant(domain)
    topic = dcps.Topic(participant, topic_name, Reading)
    writer: dcps.DataWriter[Reading] | None = None
    for line in sys.stdin:
        cmd = json.loads(line)
        op = cmd.pop("op")
        try:
            result: object = True
            if op == "writer":
                publisher = dcps.Publisher(participant, partitions=cmd.get("partitions"))
                writer = dcps.DataWriter(publisher, topic, qos=writer_qos(cmd.get("qos", {})))
                result = writer.guid
            elif op == "wait_readers":
                assert writer is not None
                writer.wait_for_readers(cmd.get("count", 1), timeout=20)
            elif op == "wait_acks":
                assert writer is not None
                writer.wait_for_acknowledgments(timeout=20)
            elif op == "assert_liveliness":
                assert writer is not None
                writer.assert_liveliness()
            elif op == "close":
                assert writer is not None
                writer.close()
            elif op == "exit":
                participant.close()
                print(json.dumps({"ok": True}), flush=True)
                return
            else:
                assert writer is not None
                sample = Reading(cmd["sensor"], cmd.get("value", 0.0), cmd.get("label", ""))
                getattr(writer, {"unregister": "unregister_instance"}.get(op, op))(sample)
                if op != "dispose" and op != "unregister":
                    pass
            print(json.dumps({"ok": result}), flush=True)
        except Exception as exc:  # report to the test, keep serving
            print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)


if __name__ == "__main__":
    main()
