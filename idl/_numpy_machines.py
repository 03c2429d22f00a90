"""numpy-backed serialisation of numeric sequences and arrays.

The binding serialises ``sequence<float>`` with ``struct.pack`` over every
element. These machines write and read the whole payload with one
``ndarray.tobytes()`` / ``np.frombuffer`` call, and hand numpy arrays back on
read. They replace the binding's primitive sequence/array machines in the
machine tree of every dcps struct after the binding built it; key scanning
and the C key VM program are delegated to the replaced machine, so key
handling and the wire format stay byte-for-byte those of the binding (and
of ``idlc``).
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from cyclonedds.idl import _machinery as m

_NATIVE = "<" if sys.byteorder == "little" else ">"

# struct codes used by the binding -> numpy dtype characters
_CODE_TO_DTYPE = {
    "b": "i1",
    "h": "i2",
    "i": "i4",
    "q": "i8",
    "B": "u1",
    "H": "u2",
    "I": "u4",
    "Q": "u8",
    "f": "f4",
    "d": "f8",
    "?": "?",
}


class NumpyMachine(m.Machine):
    """Serialise a numeric sequence (``shape is None``) or fixed array as one block."""

    def __init__(
        self, original: m.Machine, code: str, shape: tuple[int, ...] | None, max_length: int | None
    ) -> None:
        self.original = original
        self.code = code
        base = np.dtype(_CODE_TO_DTYPE[code])
        self.dtype = base.newbyteorder("=")
        self._dtypes = {"<": base.newbyteorder("<"), ">": base.newbyteorder(">")}
        self.itemsize = base.itemsize
        self.alignment = base.itemsize if shape is not None else 4
        self.elem_alignment = base.itemsize
        self.shape = shape
        self.count = int(np.prod(shape)) if shape is not None else 0
        self.max_length = max_length

    def serialize(
        self, buffer: Any, value: Any, serialize_kind: Any = None, key_enabled: Any = None
    ) -> None:
        dt = self._dtypes[buffer._endian]
        if isinstance(value, (bytes, bytearray, memoryview)):
            arr = np.frombuffer(value, dtype=dt)
            if self.shape is not None and len(self.shape) > 1 and arr.size == self.count:
                arr = arr.reshape(self.shape)
        else:
            arr = np.asarray(value, dtype=dt)
        if self.shape is None:
            if arr.ndim != 1:
                raise ValueError(f"sequence must be one-dimensional, got shape {arr.shape}")
            n = arr.shape[0]
            if self.max_length is not None and n > self.max_length:
                raise ValueError(f"sequence of length {n} exceeds its bound {self.max_length}")
            buffer.align(4)
            buffer.write("I", 4, n)
            if not n:
                return
        elif arr.shape != self.shape:
            raise ValueError(f"array must have shape {self.shape}, got {arr.shape}")
        buffer.align(self.elem_alignment)
        buffer.write_bytes(arr.tobytes())

    def deserialize(
        self, buffer: Any, deserialize_kind: Any = None, key_enabled: Any = None
    ) -> np.ndarray:
        if self.shape is None:
            buffer.align(4)
            n = buffer.read("I", 4)
            if not n:
                return np.empty(0, dtype=self.dtype)
        else:
            n = self.count
        buffer.align(self.elem_alignment)
        dt = self._dtypes[buffer._endian]
        arr = np.frombuffer(buffer._bytes, dtype=dt, count=n, offset=buffer._pos)
        buffer._pos += n * self.itemsize
        arr = arr.astype(self.dtype, copy=True)  # own the memory, native byte order
        if self.shape is not None and len(self.shape) > 1:
            arr = arr.reshape(self.shape)
        return arr

    def key_scan(self) -> Any:
        return self.original.key_scan()

    def cdr_key_machine_op(self, skip: Any) -> Any:
        return self.original.cdr_key_machine_op(skip)  # type: ignore[no-untyped-call]

    def default_initialize(self) -> np.ndarray:
        if self.shape is None:
            return np.empty(0, dtype=self.dtype)
        return np.zeros(self.shape, dtype=self.dtype)


def _convert(machine: m.Machine) -> m.Machine:
    """Return ``machine`` with numeric sequences/arrays replaced by NumpyMachines."""
    if isinstance(machine, m.PlainCdrV2SequenceOfPrimitiveMachine):
        return NumpyMachine(machine, machine.code, None, machine.max_length)
    if isinstance(machine, m.PlainCdrV2ArrayOfPrimitiveMachine):
        return NumpyMachine(
            machine, machine.code[len(str(machine.length)) :], (machine.length,), None
        )
    if isinstance(machine, m.ByteArrayMachine):
        return NumpyMachine(machine, "B", (machine.size,), None)
    if isinstance(machine, m.ArrayMachine):
        sub = _convert(machine.submachine)
        if isinstance(sub, NumpyMachine) and sub.shape is not None and not machine.add_size_header:
            return NumpyMachine(machine, sub.code, (machine.size, *sub.shape), None)
        machine.submachine = sub
        return machine
    if isinstance(machine, m.SequenceMachine):
        machine.submachine = _convert(machine.submachine)
        return machine
    if isinstance(machine, m.OptionalMachine):
        machine.submachine = _convert(machine.submachine)
        return machine
    if isinstance(machine, m.StructMachine):
        machine.members_machines = {k: _convert(v) for k, v in machine.members_machines.items()}
        return machine
    if isinstance(machine, m.DelimitedCdrAppendableStructMachine):
        machine.member_machines = {k: _convert(v) for k, v in machine.member_machines.items()}
        return machine
    if isinstance(machine, m.PLCdrMutableStructMachine):
        for member in machine.mutablemembers:
            member.machine = _convert(member.machine)
        return machine
    return machine


def numpyfy(machine: m.Machine) -> m.Machine:
    """Public entry: convert a struct's top-level machine in place (and return it)."""
    return _convert(machine)
