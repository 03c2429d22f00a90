"""Build QoS sets from small JSON-able dicts, so tests can hand them to peer processes."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import qos


def _policies(spec: dict[str, Any]) -> list[qos.QosPolicy]:
    out: list[qos.QosPolicy] = []
    if "reliable" in spec:
        out.append(qos.Reliability.RELIABLE if spec["reliable"] else qos.Reliability.BEST_EFFORT)
    if spec.get("transient_local"):
        out.append(qos.Durability.TRANSIENT_LOCAL)
    if "depth" in spec:
        out.append(qos.History.keep_last(spec["depth"]))
    if spec.get("keep_all"):
        out.append(qos.History.KEEP_ALL)
    if "strength" in spec:  # a reader only asks for EXCLUSIVE; a writer also has a strength
        out.append(qos.Ownership.EXCLUSIVE)
    if "deadline" in spec:
        out.append(qos.Deadline(timedelta(seconds=spec["deadline"])))
    if "lease" in spec:
        out.append(
            qos.Liveliness.manual_by_topic(timedelta(seconds=spec["lease"]))
            if spec.get("manual")
            else qos.Liveliness.automatic(timedelta(seconds=spec["lease"]))
        )
    if "lifespan" in spec:
        out.append(qos.Lifespan(timedelta(seconds=spec["lifespan"])))
    if spec.get("keep_instances"):  # do not unregister instances when the writer goes away
        out.append(qos.WriterDataLifecycle(autodispose_unregistered_instances=False))
    return out


def writer_qos(spec: dict[str, Any]) -> qos.DataWriterQos:
    """A DataWriterQos from a dict such as ``{"reliable": True, "depth": 5}``."""
    policies = _policies(spec)
    if "strength" in spec:
        policies.append(qos.OwnershipStrength(spec["strength"]))
    return qos.DataWriterQos(*policies)


def reader_qos(spec: dict[str, Any]) -> qos.DataReaderQos:
    """A DataReaderQos from the same kind of dict."""
    policies = _policies(spec)
    if "min_separation" in spec:
        policies.append(qos.TimeBasedFilter(timedelta(seconds=spec["min_separation"])))
    return qos.DataReaderQos(*policies)
