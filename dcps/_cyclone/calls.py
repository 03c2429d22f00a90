"""Cyclone C calls made through ctypes rather than the binding's C layer.

ctypes releases the GIL for the duration of each call; the binding's own
``ddspy_write``/``ddspy_take`` keep holding it. That matters: Cyclone runs
Python callbacks (content filters, query conditions, listeners) on its
receive threads, sometimes under its reader-cache lock. A thread blocked in a
reliable write, or waiting for that lock, while holding the GIL stalls those
callbacks, and with them acknowledgements or the lock itself (a deadlock).

- ``write``/``read_take``: data paths that release the GIL.
- ``peek_infos``: SampleInfos of a reader's cache without changing any
  sample's READ/NOT_READ state (for next-instance iteration).
- ``instance_key``: the serialised key of an instance handle, even when the
  reader holds no sample of it.
- ``matched_subscriptions``/``matched_publications``: the handles an entity is
  matched with; the binding's own methods size their buffer by one call and
  index it by the next, so a match in between raises IndexError.
- ``take_views``: take samples and read each one's serialised form in place
  (its large payload then copied once, not three times as the binding does).
- ``take_cdr``: take samples as Cyclone's serdata, which carries the per-sample
  DDSI status info: whether a valid sample came from ``write_dispose``. The
  SampleInfo cannot say that: its instance state is the instance's state at
  the time of the take, which a later dispose without data changes too.
"""

from __future__ import annotations

import ctypes as ct
import struct
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from cyclonedds.internal import dds_c_t, load_cyclonedds

from dcps._cyclone.retcode import error_for
from idl._errors import UnsupportedError

_lib = load_cyclonedds()
_lib.dds_peek_mask.restype = ct.c_int32
_lib.dds_return_loan.restype = ct.c_int32
_lib.dds_return_loan.argtypes = [ct.c_int32, ct.c_void_p, ct.c_int32]
_lib.dds_instance_get_key.restype = ct.c_int32
_lib.dds_assert_liveliness.restype = ct.c_int32
_lib.dds_takecdr.restype = ct.c_int32
_lib.dds_takecdr.argtypes = [ct.c_int32, ct.c_void_p, ct.c_uint32, ct.c_void_p, ct.c_uint32]
_lib.ddsi_serdata_size.restype = ct.c_uint32
_lib.ddsi_serdata_size.argtypes = [ct.c_void_p]
_lib.ddsi_serdata_to_ser.restype = None
_lib.ddsi_serdata_to_ser.argtypes = [ct.c_void_p, ct.c_size_t, ct.c_size_t, ct.c_void_p]
_lib.ddsi_serdata_unref.restype = None
_lib.ddsi_serdata_unref.argtypes = [ct.c_void_p]


class _SampleContainer(ct.Structure):
    """The Python binding's sample representation: serialised bytes."""

    _fields_ = [("usample", ct.c_void_p), ("usample_size", ct.c_size_t)]


class _OutgoingSample(ct.Structure):
    """The same layout, built straight from a ``bytes`` object (which it keeps alive)."""

    _fields_ = [("usample", ct.c_char_p), ("usample_size", ct.c_size_t)]


_INFO = dds_c_t.sample_info


def _info_format() -> str:
    """A ``struct`` format for ``dds_sample_info_t``, padding taken from ctypes' layout."""
    codes = {ct.c_uint32: "I", ct.c_int64: "q", ct.c_uint64: "Q", ct.c_bool: "?"}
    out, at = ["="], 0  # native byte order, standard sizes, explicit padding
    for field in _INFO._fields_:
        name, ctype = field[0], field[1]
        offset = getattr(_INFO, name).offset
        out.append(f"{offset - at}x" if offset > at else "")
        out.append(codes[ctype])
        at = offset + ct.sizeof(ctype)
    out.append(f"{ct.sizeof(_INFO) - at}x" if ct.sizeof(_INFO) > at else "")
    return "".join(out)


#: dds_sample_info_t as ``struct`` unpacks it: a tuple of its fields in order.
_INFO_STRUCT = struct.Struct(_info_format())
_INFO_SIZE = _INFO_STRUCT.size

#: ``bytes`` from a pointer and a length in one ctypes call (``ct.string_at`` adds a
#: Python frame); a PYFUNCTYPE keeps the GIL, as building a Python object needs.
_bytes_at = ct.PYFUNCTYPE(ct.py_object, ct.c_void_p, ct.c_ssize_t)(
    ("PyBytes_FromStringAndSize", ct.pythonapi)
)

_WRITE: dict[str, tuple[Any, Any]] = {
    "write": (_lib.dds_write, _lib.dds_write_ts),
    "write_dispose": (_lib.dds_writedispose, _lib.dds_writedispose_ts),
}
for _plain, _stamped in _WRITE.values():
    _plain.restype = _stamped.restype = ct.c_int32
    _plain.argtypes = [ct.c_int32, ct.POINTER(_OutgoingSample)]
    _stamped.argtypes = [ct.c_int32, ct.POINTER(_OutgoingSample), ct.c_int64]
for _fn in (_lib.dds_take_mask, _lib.dds_read_mask):
    _fn.restype = ct.c_int32
    _fn.argtypes = [ct.c_int32, ct.c_void_p, ct.c_void_p, ct.c_size_t, ct.c_uint32, ct.c_uint32]
for _fn in (_lib.dds_take_instance_mask, _lib.dds_read_instance_mask):
    _fn.restype = ct.c_int32
    _fn.argtypes = [
        ct.c_int32,
        ct.c_void_p,
        ct.c_void_p,
        ct.c_size_t,
        ct.c_uint32,
        ct.c_uint64,
        ct.c_uint32,
    ]


def write(op: str, writer_ref: int, data: bytes, timestamp: int | None) -> int:
    """``dds_write``/``dds_writedispose`` (optionally with a source timestamp); GIL released."""
    plain, stamped = _WRITE[op]
    if timestamp is None:
        rc: int = plain(writer_ref, _OutgoingSample(data, len(data)))
    else:
        rc = stamped(writer_ref, _OutgoingSample(data, len(data)), timestamp)
    return rc


class _Buffers:
    """Sample-pointer and SampleInfo arrays for loaned reads, reused per size and thread.

    The SampleInfo array lives in a bytearray so ``struct`` can unpack it in place.
    """

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, size: int) -> tuple[Any, Any, bytearray]:
        cache: dict[int, tuple[Any, Any, bytearray]] | None = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = {}
        found = cache.get(size)
        if found is None:
            raw = bytearray(size * _INFO_SIZE)
            found = cache[size] = ((ct.c_void_p * size)(), (_INFO * size).from_buffer(raw), raw)
        found[0][0] = None  # NULL first pointer: Cyclone loans the sample memory
        return found


def _info_rows(raw: bytearray, n: int) -> list[tuple[Any, ...]]:
    """The first ``n`` SampleInfos of a buffer, each a tuple of its fields in order."""
    if n == 1:
        return [_INFO_STRUCT.unpack_from(raw)]
    return list(_INFO_STRUCT.iter_unpack(memoryview(raw)[: n * _INFO_SIZE]))


_buffers = _Buffers()


def read_take(
    take: bool, ref: int, mask: int, max_samples: int, instance: int | None = None
) -> list[tuple[bytes, tuple[Any, ...]]] | int:
    """Read or take up to ``max_samples``: (CDR bytes, info tuple) pairs, or a negative return code.

    The info tuple holds the fields of ``dds_sample_info_t`` in order.
    """
    buf, infos, raw = _buffers.get(max_samples)
    if instance is None:
        fn = _lib.dds_take_mask if take else _lib.dds_read_mask
        n = fn(ref, buf, infos, max_samples, max_samples, mask)
    else:
        fn = _lib.dds_take_instance_mask if take else _lib.dds_read_instance_mask
        n = fn(ref, buf, infos, max_samples, max_samples, instance, mask)
    if n <= 0:
        return [] if n == 0 else int(n)
    try:
        rows = _info_rows(raw, n)
        at, bytes_at = _SampleContainer.from_address, _bytes_at
        out = []
        for i in range(n):
            container = at(buf[i])
            out.append((bytes_at(container.usample, container.usample_size), rows[i]))
    finally:
        _lib.dds_return_loan(ref, buf, n)
    return out


def peek_infos(reader_ref: int, mask: int, max_samples: int) -> list[tuple[Any, ...]]:
    """SampleInfo rows of up to ``max_samples`` samples matching ``mask``, states untouched."""
    size = min(256, max_samples)
    while True:
        buf, infos, raw = _buffers.get(size)
        n = _lib.dds_peek_mask(
            ct.c_int32(reader_ref),
            buf,
            infos,
            ct.c_size_t(size),
            ct.c_uint32(size),
            ct.c_uint32(mask),
        )
        if n < 0:
            raise error_for(n, "peek reader cache")
        if n > 0:
            _lib.dds_return_loan(reader_ref, buf, n)
        if n < size or size >= max_samples:
            return _info_rows(raw, n)
        size = min(size * 4, max_samples)


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


_lib.dds_wait_for_acks.restype = ct.c_int32
_lib.dds_wait_for_acks.argtypes = [ct.c_int32, ct.c_int64]


def wait_for_acks(entity_ref: int, timeout_ns: int) -> bool:
    """``dds_wait_for_acks`` on a writer or publisher: False on timeout (the binding's own
    wrapper fails there with an AttributeError)."""
    rc = _lib.dds_wait_for_acks(entity_ref, timeout_ns)
    if rc == -10:  # DDS_RETCODE_TIMEOUT
        return False
    if rc < 0:
        raise error_for(rc, "wait for acknowledgments")
    return True


_lib.dds_get_matched_subscriptions.restype = ct.c_int32
_lib.dds_get_matched_subscriptions.argtypes = [ct.c_int32, ct.c_void_p, ct.c_size_t]
_lib.dds_get_matched_publications.restype = ct.c_int32
_lib.dds_get_matched_publications.argtypes = [ct.c_int32, ct.c_void_p, ct.c_size_t]


def _matched(function: Any, entity_ref: int, what: str) -> list[int]:
    size = 16
    while True:
        handles = (ct.c_uint64 * size)()
        count = function(entity_ref, handles, size)
        if count < 0:
            raise error_for(count, what)
        if count <= size:  # Cyclone returns the total, which may exceed the buffer
            return list(handles[:count])
        size = count


def matched_subscriptions(writer_ref: int) -> list[int]:
    """Instance handles of the readers a writer is matched with now."""
    return _matched(_lib.dds_get_matched_subscriptions, writer_ref, "get matched subscriptions")


def matched_publications(reader_ref: int) -> list[int]:
    """Instance handles of the writers a reader is matched with now."""
    return _matched(_lib.dds_get_matched_publications, reader_ref, "get matched publications")


def assert_liveliness(entity_ref: int) -> None:
    """Assert liveliness of a participant or writer (MANUAL_BY_* liveliness)."""
    rc = _lib.dds_assert_liveliness(ct.c_int32(entity_ref))
    if rc < 0:
        raise error_for(rc, "assert liveliness")


Row = tuple[bytes, tuple[Any, ...]]
_READ_STATE = 1  # DDS_READ_SAMPLE_STATE


class ReaderBuffer:
    """Reads and takes of one reader through ctypes, in chunks sized by experience.

    A take that fills its chunk simply continues. A read cannot: the first call
    already marked its samples READ (and their instances NOT_NEW). So a read
    that overflows its chunk is repeated with a larger buffer, and the result is
    put together from both calls as one read would have returned it.
    """

    def __init__(self) -> None:
        self.capacity = 64

    def take(self, ref: int, mask: int, max_samples: int, instance: int | None) -> list[Row] | int:
        """Take up to ``max_samples`` matching samples."""
        out: list[Row] = []
        size = min(max_samples, self.capacity)
        while True:
            chunk = read_take(True, ref, mask, size, instance)
            if isinstance(chunk, int):
                return out if out else chunk
            out += chunk
            if len(chunk) < size or len(out) >= max_samples:
                return out
            self.capacity = min(max(self.capacity, size * 2), 1 << 16)
            size = min(max_samples - len(out), self.capacity)

    def read(self, ref: int, mask: int, max_samples: int, instance: int | None) -> list[Row] | int:
        """Read up to ``max_samples`` matching samples, as a single DDS read."""
        size = min(max_samples, self.capacity)
        first = read_take(False, ref, mask, size, instance)
        if isinstance(first, int) or len(first) < size or size >= max_samples:
            return first
        rest: list[Row] = []
        while True:
            self.capacity = min(self.capacity * 4, 1 << 16)
            size = min(max_samples, self.capacity + len(first))
            again = read_take(False, ref, mask, size, instance)
            if isinstance(again, int):
                return first
            # With READ in the mask the first batch comes back first; without, it does not.
            rest = again[len(first) :] if mask & _READ_STATE else again
            if len(again) < size or size >= max_samples or self.capacity >= 1 << 16:
                break
        return _as_one_read(first, rest[: max_samples - len(first)])


def _as_one_read(first: list[Row], rest: list[Row]) -> list[Row]:
    """Merge two reads into what one read returns: view states and ranks over the whole."""
    view_of = {info[5]: info[1] for _, info in first}
    merged = first + [(d, (i[0], view_of.get(i[5], i[1]), *i[2:])) for d, i in rest]
    latest: dict[int, int] = {}
    count: dict[int, int] = {}
    for _, info in merged:
        latest[info[5]] = info[7] + info[8]
        count[info[5]] = count.get(info[5], 0) + 1
    seen: dict[int, int] = {}
    out: list[Row] = []
    for data, info in merged:
        handle = info[5]
        seen[handle] = seen.get(handle, 0) + 1
        sample_rank = count[handle] - seen[handle]
        generation_rank = latest[handle] - (info[7] + info[8])
        out.append((data, (*info[:9], sample_rank, generation_rank, info[11])))
    return out


class _SerdataHead(ct.Structure):
    """The leading fields of ``struct ddsi_serdata`` (``dds/ddsi/ddsi_serdata.h``)."""

    _fields_ = [
        ("ops", ct.c_void_p),
        ("hash", ct.c_uint32),
        ("refc", ct.c_uint32),
        ("kind", ct.c_int),
        ("type", ct.c_void_p),
        ("timestamp", ct.c_int64),
        ("statusinfo", ct.c_uint32),
    ]


class _PythonSerdata(ct.Structure):
    """``struct ddspy_serdata`` of the Python binding (``clayer/pysertype.c``): Cyclone
    11's ``struct ddsi_serdata`` followed by the serialised sample's address and size.

    Reading those two fields saves two ctypes calls per sample; :func:`take_cdr`
    only does so after checking them against ``ddsi_serdata_to_ser_ref``.
    """

    _fields_ = [
        *_SerdataHead._fields_,
        ("twrite", ct.c_int64),
        ("loan", ct.c_void_p),
        ("data", ct.c_void_p),
        ("data_size", ct.c_size_t),
    ]


class _IoVec(ct.Structure):
    _fields_ = [("iov_base", ct.c_void_p), ("iov_len", ct.c_size_t)]


_lib.ddsi_serdata_to_ser_ref.restype = ct.c_void_p
_lib.ddsi_serdata_to_ser_ref.argtypes = [ct.c_void_p, ct.c_size_t, ct.c_size_t, ct.POINTER(_IoVec)]
_lib.ddsi_serdata_to_ser_unref.restype = None
_lib.ddsi_serdata_to_ser_unref.argtypes = [ct.c_void_p, ct.POINTER(_IoVec)]


def _serdata_fields_readable(pointer: int) -> bool:
    """Whether ``_PythonSerdata`` finds this serdata's bytes where Cyclone's own API does
    (compares addresses and sizes; reads nothing through the guessed pointer)."""
    size = _lib.ddsi_serdata_size(pointer)
    iov = _IoVec()
    _lib.ddsi_serdata_to_ser_ref(pointer, 0, size, iov)
    _lib.ddsi_serdata_to_ser_unref(pointer, iov)
    fields = _PythonSerdata.from_address(pointer)
    return bool(iov.iov_base) and fields.data == iov.iov_base and fields.data_size == size


#: DDSI status info bit set on a sample written with ``dds_writedispose``.
STATUSINFO_DISPOSE = 1

#: (CDR bytes or None for an invalid sample, dds_sample_info_t row, DDSI status info)
CdrRow = tuple[bytes | None, tuple[Any, ...], int]


class _Scratch:
    """A per-thread buffer that serialised samples are copied through."""

    def __init__(self) -> None:
        self._local = threading.local()

    def get(self, size: int) -> Any:
        buffer = getattr(self._local, "buffer", None)
        if buffer is None or len(buffer) < size:
            buffer = self._local.buffer = ct.create_string_buffer(max(size, 4096))
        return buffer


_scratch = _Scratch()


def take_cdr(ref: int, mask: int, max_samples: int) -> list[CdrRow] | int:
    """Take up to ``max_samples`` samples with their DDSI status info, or a negative return code.

    Only valid samples carry bytes. The serdata header layout is checked on the
    first valid sample of each call (its timestamp must be the SampleInfo's
    source timestamp), so a Cyclone whose ``struct ddsi_serdata`` differs fails
    loudly instead of misreading the status info. The bytes are read straight
    from the binding's serdata when the first sample shows that layout holds,
    else copied out through Cyclone's API.
    """
    buf, infos, raw = _buffers.get(max_samples)
    n = _lib.dds_takecdr(ref, buf, max_samples, infos, mask)
    if n <= 0:
        return [] if n == 0 else int(n)
    out: list[CdrRow] = []
    try:
        rows = _info_rows(raw, n)
        size_of, to_ser, bytes_at = _lib.ddsi_serdata_size, _lib.ddsi_serdata_to_ser, _bytes_at
        from_address = _PythonSerdata.from_address
        scratch = _scratch.get(0)
        checked = direct = False
        for i in range(n):
            row = rows[i]
            if not row[3]:
                out.append((None, row, 0))
                continue
            pointer = buf[i]
            serdata = from_address(pointer)
            if not checked:
                if serdata.timestamp != row[4]:
                    raise UnsupportedError(
                        "this Cyclone DDS build lays out struct ddsi_serdata differently: "
                        "SubscriptionKeys readers cannot tell write_dispose samples apart"
                    )
                checked = True
                direct = _serdata_fields_readable(pointer)
            if direct:
                out.append((bytes_at(serdata.data, serdata.data_size), row, serdata.statusinfo))
                continue
            size = size_of(pointer)
            if size > len(scratch):
                scratch = _scratch.get(size)
            to_ser(pointer, 0, size, scratch)
            out.append((bytes_at(scratch, size), row, serdata.statusinfo))
    finally:
        unref = _lib.ddsi_serdata_unref
        for i in range(n):
            unref(buf[i])
    return out


V = TypeVar("V")


def take_views(
    ref: int,
    mask: int,
    max_samples: int,
    use: Callable[[bytes | memoryview], V],
    view_min: int = 0,
) -> list[V]:
    """Take up to ``max_samples`` valid samples, handing ``use`` each one's serialised form
    as a read-only view of Cyclone's own buffer; a list of what ``use`` returned.

    Nothing is copied here: ``use`` copies what it keeps (the view is valid only
    during the call; the samples are released after the last one). A sample
    smaller than ``view_min`` bytes is handed over as a ``bytes`` copy instead
    (one C call: cheaper than a view where copying costs little). Invalid
    samples (a dispose or unregister without data) are skipped. Raises the dcps
    error of a negative return code. Only for readers of the binding's own
    types (``struct ddspy_serdata``), whose layout is checked on the first
    sample of each call as in :func:`take_cdr`.
    """
    global _views_checked
    buf, infos, raw = _buffers.get(max_samples)
    n = _takecdr_unchecked(ref, buf, max_samples, infos, mask)
    if n <= 0:
        if n < 0:
            raise error_for(n, "take samples")
        return []
    out: list[V] = []
    try:
        rows = _info_rows(raw, n)
        from_address, array, bytes_at = _PythonSerdata.from_address, ct.c_ubyte, _bytes_at
        for i in range(n):
            if not rows[i][3]:
                continue
            pointer = buf[i]
            if not _views_checked:  # once per process: the layout is the build's
                if not _serdata_fields_readable(pointer):
                    raise UnsupportedError(
                        "this Cyclone DDS build lays out the binding's serdata differently"
                    )
                _views_checked = True
            serdata = from_address(pointer)
            size = serdata.data_size
            if size < view_min:
                out.append(use(bytes_at(serdata.data, size)))
                continue
            view = memoryview((array * size).from_address(serdata.data))
            out.append(use(view.cast("B").toreadonly()))
    finally:
        unref = _lib.ddsi_serdata_unref
        for i in range(n):
            unref(buf[i])
    return out


#: Whether :func:`take_views` checked the binding's serdata layout (on its first sample).
_views_checked = False
#: ``dds_takecdr`` without ``argtypes``: ctypes then passes the arrays as pointers and
#: the small ints as C ints without converting each argument (0.5 us a call instead of
#: 2.9: a subscriber takes from every channel's reader each round, most often nothing).
_takecdr_unchecked = ct.CDLL(_lib._name).dds_takecdr
_takecdr_unchecked.restype = ct.c_int32
