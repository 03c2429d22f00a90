"""The few Cyclone C calls the Python binding does not expose (via ctypes).

- ``peek_infos``: the SampleInfos of a reader's cache without changing any
  sample's READ/NOT_READ state (for next-instance iteration).
- ``instance_key``: the serialised key of an instance handle, even when the
  reader holds no sample of it.
"""

from __future__ import annotations

import ctypes as ct

from cyclonedds.internal import dds_c_t, load_cyclonedds

from dcps._retcode import error_for

_lib = load_cyclonedds()
_lib.dds_peek_mask.restype = ct.c_int32
_lib.dds_return_loan.restype = ct.c_int32
_lib.dds_instance_get_key.restype = ct.c_int32
_lib.dds_assert_liveliness.restype = ct.c_int32


class _SampleContainer(ct.Structure):
    """The Python binding's sample representation: serialised bytes."""

    _fields_ = [("usample", ct.c_void_p), ("usample_size", ct.c_size_t)]


def peek_infos(reader_ref: int, mask: int, max_samples: int) -> list[dds_c_t.sample_info]:
    """SampleInfos of up to ``max_samples`` samples matching ``mask``, states untouched."""
    buf = (ct.c_void_p * max_samples)()
    infos = (dds_c_t.sample_info * max_samples)()
    n = _lib.dds_peek_mask(
        ct.c_int32(reader_ref), buf, infos, ct.c_size_t(max_samples),
        ct.c_uint32(max_samples), ct.c_uint32(mask),
    )
    if n < 0:
        raise error_for(n, "peek reader cache")
    if n > 0:
        _lib.dds_return_loan(ct.c_int32(reader_ref), buf, ct.c_int32(n))
    return [infos[i] for i in range(n)]


def instance_key(entity_ref: int, handle: int) -> bytes | None:
    """Serialised key of ``handle`` in a reader or writer, or None if unknown."""
    container = _SampleContainer()
    rc = _lib.dds_instance_get_key(ct.c_int32(entity_ref), ct.c_uint64(handle), ct.byref(container))
    if rc < 0:
        return None
    try:
        return ct.string_at(container.usample, container.usample_size)
    finally:
        _lib.dds_free(ct.c_void_p(container.usample))


def assert_liveliness(entity_ref: int) -> None:
    """Assert liveliness of a participant or writer (MANUAL_BY_* liveliness)."""
    rc = _lib.dds_assert_liveliness(ct.c_int32(entity_ref))
    if rc < 0:
        raise error_for(rc, "assert liveliness")
