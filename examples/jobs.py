"""The job type of the channelled-topic examples."""

from __future__ import annotations

import idl


class Job(idl.Struct, typename="demo::Job"):
    """A unit of work; ``job_id`` is the key, so one job's updates stay in one channel."""

    job_id: idl.key[idl.int32]
    seq: idl.int64
    payload: idl.bounded_str[32]
