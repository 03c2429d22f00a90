"""Writing a serialised sample given in pieces, without joining them first.

The binding's ``DataWriter.write`` takes one ``bytes`` object: a sample of
1 MiB made of a small header and a large payload is joined into a new 1 MiB
object (and padded into another when its length is not a multiple of 4)
before Cyclone copies it once more into its own serdata, all with the GIL
held. :func:`write_gathered` hands Cyclone the pieces as an ``iovec`` array
instead (``ddsi_serdata_from_ser_iov`` of the writer's sertype copies them
straight into the serdata) and writes that serdata with ``dds_writecdr``;
ctypes releases the GIL for both calls, so the other threads of the process
run while Cyclone copies, fragments and sends. The pieces must already be
the sample's serialised form (a CDR header first); Cyclone's own check of
that form (the binding's sertype normalises every serdata it builds) refuses
anything else.
"""

from __future__ import annotations

import ctypes as ct
import sys
from collections.abc import Sequence

import numpy as np
from cyclonedds.internal import load_cyclonedds

from dcps._cyclone.retcode import error_for

__all__ = ["GATHER_MIN", "write_gathered"]

#: Samples under this many bytes are cheaper to join and write the binding's way (three
#: ctypes calls cost ~5 us; measured equal at 256 KiB, 35 % less CPU at 1 MiB).
GATHER_MIN = 128 * 1024

_lib = load_cyclonedds()


class _IoVec(ct.Structure):
    """``ddsrt_iovec_t`` on POSIX: ``struct iovec``."""

    _fields_ = [("iov_base", ct.c_void_p), ("iov_len", ct.c_size_t)]


_SDK_DATA = 2  # enum ddsi_serdata_kind { SDK_EMPTY, SDK_KEY, SDK_DATA }
#: ``ddsrt_msg_iovlen_t`` (dds/ddsrt/iovec.h): size_t on Linux, int on other POSIX systems
_IovLen = ct.c_size_t if sys.platform.startswith("linux") else ct.c_int
_lib.dds_get_entity_sertype.restype = ct.c_int32
_lib.dds_get_entity_sertype.argtypes = [ct.c_int32, ct.POINTER(ct.c_void_p)]
_lib.ddsi_serdata_from_ser_iov.restype = ct.c_void_p
_lib.ddsi_serdata_from_ser_iov.argtypes = [
    ct.c_void_p,
    ct.c_int,
    _IovLen,
    ct.POINTER(_IoVec),
    ct.c_size_t,
]
_lib.dds_writecdr.restype = ct.c_int32
_lib.dds_writecdr.argtypes = [ct.c_int32, ct.c_void_p]
_ZEROS = b"\0\0\0"
_BAD_PARAMETER = -3  # DDS_RETCODE_BAD_PARAMETER


def _address(piece: bytes | memoryview) -> tuple[int, int]:
    """The address and length of a piece's bytes (the caller keeps the piece alive)."""
    if piece.__class__ is bytes:
        return ct.cast(ct.c_char_p(piece), ct.c_void_p).value or 0, len(piece)
    view = memoryview(piece)
    if not view.c_contiguous:
        raise ValueError("a sample piece must be contiguous")
    if not view.nbytes:
        return 0, 0
    # a read-only view (of bytes) has no ctypes address; numpy reads the buffer's
    return int(np.frombuffer(view, dtype=np.uint8).ctypes.data), view.nbytes


def write_gathered(writer_ref: int, pieces: Sequence[bytes | memoryview]) -> None:
    """Write the sample whose serialised form is ``pieces`` concatenated (zero bytes
    are added to a multiple of 4, as the binding pads); GIL released while Cyclone
    copies and sends. Raises the dcps error of Cyclone's return code."""
    total = 0
    n = len(pieces)
    iov = (_IoVec * (n + 1))()
    for i, piece in enumerate(pieces):
        base, length = _address(piece)
        iov[i].iov_base = base
        iov[i].iov_len = length
        total += length
    pad = -total & 3
    if pad:
        iov[n].iov_base = ct.cast(ct.c_char_p(_ZEROS), ct.c_void_p).value
        iov[n].iov_len = pad
        total += pad
        n += 1
    sertype = ct.c_void_p()
    rc = _lib.dds_get_entity_sertype(writer_ref, ct.byref(sertype))
    if rc < 0:
        raise error_for(rc, "get the writer's sertype")
    serdata = _lib.ddsi_serdata_from_ser_iov(sertype, _SDK_DATA, n, iov, total)
    if not serdata:
        raise error_for(_BAD_PARAMETER, "build a sample from its serialised form (malformed)")
    rc = _lib.dds_writecdr(writer_ref, serdata)  # consumes the serdata's reference
    if rc < 0:
        raise error_for(rc, "write a sample")
