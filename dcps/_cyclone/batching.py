"""Cyclone's per-writer write batching, which the Python binding does not expose.

A writer created with ``dds_qset_writer_batching(qos, true)`` (``dds_public_qos.h``:
``void dds_qset_writer_batching (dds_qos_t *qos, bool batch_updates)``) queues
what it writes in its own packet (``wr->m_xp``) instead of sending one datagram
per sample: Cyclone 11 sends the packet when the next sample no longer fits, when
the writer blocks on a full history cache, when it is deleted, and on
``dds_write_flush`` (``dds.h``: ``dds_return_t dds_write_flush (dds_entity_t
entity)``). Nothing else sends it: a writer that batches must be flushed (see
:mod:`dcps._write_batching` for the policy dcps uses). Readers in the same
process get each sample at once whatever the batching (local delivery does not
go through the packet). The policy is Cyclone's own (``DDSI_PID_PAD``): it is
not announced in discovery, so remote peers see no difference.
"""

from __future__ import annotations

import ctypes as ct
from typing import Any

from cyclonedds.internal import load_cyclonedds
from cyclonedds.pub import DataWriter as CycloneWriter

_lib = load_cyclonedds()
_lib.dds_qset_writer_batching.restype = None
_lib.dds_qset_writer_batching.argtypes = [ct.c_void_p, ct.c_bool]
_lib.dds_write_flush.restype = ct.c_int32
_lib.dds_write_flush.argtypes = [ct.c_int32]
_lib.dds_create_qos.restype = ct.c_void_p
_lib.dds_delete_qos.restype = None
_lib.dds_delete_qos.argtypes = [ct.c_void_p]


class BatchingCycloneWriter(CycloneWriter[Any]):
    """A binding writer created with write batching on.

    The binding builds the C QoS from its own policies and hands it to its
    ``_create_writer`` (``dds_create_writer``); this adds the batching policy
    there, the one place the binding lets a C QoS be changed before creation.
    """

    def _create_writer(self, publisher: Any, topic: Any, qos: Any, listener: Any) -> Any:
        own = qos is None
        if own:
            qos = _lib.dds_create_qos()
        try:
            _lib.dds_qset_writer_batching(qos, True)
            return super()._create_writer(publisher, topic, qos, listener)
        finally:
            if own:
                _lib.dds_delete_qos(qos)


def write_flush(writer_ref: int) -> int:
    """``dds_write_flush``: send what the writer has queued now (GIL released); its return code."""
    rc: int = _lib.dds_write_flush(writer_ref)
    return rc
