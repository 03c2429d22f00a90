"""The topic struct base class: an ``IdlStruct`` that is also a dataclass.

Declare a topic type once::

    class Reading(idl.Struct, typename="sensors::Reading"):
        sensor: idl.key[idl.int32]
        value: idl.float64
        samples: idl.sequence[idl.float32, 64]

The class is a ``cyclonedds.idl.IdlStruct`` subclass and a dataclass, so it can
be handed straight to ``cyclonedds.topic.Topic``. Extensibility defaults to
``final`` (as ``idlc``'s), so the data representation defaults to XCDR1 exactly
as for a C peer built from the same IDL.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from collections.abc import Callable
from typing import Annotated, Any, ClassVar, get_args, get_origin

import numpy as np
from cyclonedds.idl import IdlEnum, IdlStruct
from cyclonedds.idl._main import IDL, IdlMeta, IDLNamespaceScope
from cyclonedds.idl._support import DeserializeKind, Endianness, SerializeKind

from ._codec import Codec, build_codec
from ._errors import IdlError
from ._introspect import _members
from ._numpy_machines import numpyfy
from ._types import KEY

__all__ = ["Enum", "Struct", "make_enum", "make_struct"]

_EXTENSIBILITIES = ("final", "appendable", "mutable")


class _NumpyIDL(IDL):
    """The binding's per-type IDL support, with numpy machines for numeric sequences.

    Final structs also get a compiled codec (``_codec.py``) for the common
    case: a whole sample in native little-endian XCDR1/XCDR2 with a header.
    Everything else goes through the binding's machines.
    """

    _codec: Codec | None = None

    #: Numeric sequences decode to numpy arrays (what ``_introspect`` looks for).
    numpy_sequences: ClassVar[bool] = True

    def populate_locked(self) -> None:
        already = self._populating
        super().populate_locked()  # type: ignore[no-untyped-call]
        if not already:
            self.v1_machine = numpyfy(self.v1_machine)
            self.v2_machine = numpyfy(self.v2_machine)
            self._codec = build_codec(self.datatype)

    def serialize(
        self,
        object: Any,
        use_version_2: bool | None = None,
        buffer: Any = None,
        endianness: Any = None,
        serialize_kind: Any = SerializeKind.DataSample,
        prepend_header: bool = True,
    ) -> bytes:
        if not self._populated:
            self.populate()  # type: ignore[no-untyped-call]
        codec = self._codec
        if (
            codec is not None
            and buffer is None
            and prepend_header
            and serialize_kind is SerializeKind.DataSample
            and (endianness is None or endianness is Endianness.Little)
        ):
            if use_version_2 is None:
                use_version_2 = self.default_version == 2
            result: bytes = codec.ser[2 if use_version_2 else 1](object)
            return result
        version: Any = use_version_2  # the binding accepts None although it says bool
        return super().serialize(
            object, version, buffer, endianness, serialize_kind, prepend_header
        )

    def deserialize(
        self,
        data: Any,
        has_header: bool = True,
        use_version_2: bool | None = None,
        deserialize_kind: Any = DeserializeKind.DataSample,
    ) -> object:
        if not self._populated:
            self.populate()  # type: ignore[no-untyped-call]
        codec = self._codec
        if (
            codec is not None
            and has_header
            and use_version_2 is None
            and deserialize_kind is DeserializeKind.DataSample
            and data.__class__ is bytes
            and len(data) >= 4
        ):
            enc = data[1]
            if enc == 0x01:  # CDR_LE
                return codec.de[1](data)
            if enc == 0x07:  # PLAIN_CDR2_LE
                return codec.de[2](data)
        version: Any = use_version_2  # the binding accepts None although it says bool
        return super().deserialize(data, has_header, version, deserialize_kind)


def encoder(t: type, use_version_2: bool) -> Callable[[Any], bytes]:
    """The fastest serialiser of whole ``t`` samples (with header) in one data representation.

    For writers, which look it up once: the compiled codec where the type has one.
    """
    support = t.__idl__  # type: ignore[attr-defined]
    support.populate()
    codec: Codec | None = getattr(support, "_codec", None)
    if codec is not None:
        compiled: Callable[[Any], bytes] = codec.ser[2 if use_version_2 else 1]
        return compiled
    return functools.partial(t.serialize, use_version_2=use_version_2)  # type: ignore[attr-defined]


def decoder(t: type) -> Callable[[bytes], Any]:
    """The fastest deserialiser of whole ``t`` samples (with header, either representation).

    For readers, which look it up once: the compiled codec where the type has one.
    """
    support = t.__idl__  # type: ignore[attr-defined]
    support.populate()
    codec: Codec | None = getattr(support, "_codec", None)
    general: Callable[[bytes], Any] = t.deserialize  # type: ignore[attr-defined]
    if codec is None:
        return general
    xcdr1, xcdr2 = codec.de[1], codec.de[2]

    def decode(data: bytes) -> Any:
        encoding = data[1]
        if encoding == 0x01:  # CDR_LE
            return xcdr1(data)
        if encoding == 0x07:  # PLAIN_CDR2_LE
            return xcdr2(data)
        return general(data)

    return decode


def _strip_key(annotation: Any) -> tuple[Any, bool]:
    """Remove the ``KEY`` marker from an annotation; say whether it was there."""
    if get_origin(annotation) is not Annotated:
        return annotation, False
    args = get_args(annotation)
    meta = tuple(a for a in args[1:] if a is not KEY)
    if len(meta) == len(args) - 1:
        return annotation, False
    if not meta:
        return args[0], True
    return Annotated[(args[0], *meta)], True


def _resolve(annotation: Any, name: str, module: str, namespace: dict[str, Any]) -> Any:
    """Evaluate a string annotation (``from __future__ import annotations``)."""
    if not isinstance(annotation, str):
        return annotation
    mod = sys.modules.get(module)
    globalns = dict(vars(mod)) if mod is not None else {}
    try:
        return eval(annotation, globalns, dict(namespace))
    except Exception as exc:
        raise IdlError(f"cannot resolve the type {annotation!r} of field {name!r}") from exc


class _StructMeta(IdlMeta):
    """Metaclass of ``Struct``: key markers, extensibility, dataclass, numpy machines."""

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwds: Any
    ) -> Any:
        if namespace.get("_dcps_root", False):
            return super().__new__(mcls, name, bases, namespace)  # type: ignore[no-untyped-call]
        try:
            extensibility = kwds.get("extensibility")
            if extensibility is not None:
                if extensibility not in _EXTENSIBILITIES:
                    raise IdlError(
                        f"extensibility of {name} must be one of {_EXTENSIBILITIES},"
                        f" got {extensibility!r}"
                    )
                namespace["__idl_annotations__"]["extensibility"] = extensibility
            annotations = namespace["__annotations__"]
            module = namespace.get("__module__", "")
            for field, ann in list(annotations.items()):
                if get_origin(ann) is ClassVar or (isinstance(ann, str) and "ClassVar" in ann):
                    del annotations[field]
                    continue
                ann = _resolve(ann, field, module, namespace)
                ann, is_key = _strip_key(ann)
                annotations[field] = ann
                if is_key:
                    namespace["__idl_field_annotations__"].setdefault(field, {})["key"] = True
        except BaseException:
            IDLNamespaceScope.exit()  # type: ignore[no-untyped-call]
            raise
        # ``Struct`` is a virtual base: the binding's XTypes builder would turn a real
        # base class into IDL inheritance (``struct Reading : Struct``), which C
        # peers do not have. Subclass IdlStruct directly and copy Struct's methods.
        if Struct in bases:
            bases = tuple(IdlStruct if b is Struct else b for b in bases)
            namespace.setdefault("__eq__", _struct_eq)
            namespace.setdefault("__hash__", None)
            namespace.setdefault("__doc__", None)
        cls = super().__new__(mcls, name, bases, namespace)  # type: ignore[no-untyped-call]
        cls = dataclasses.dataclass(cls, eq=False)
        cls.__idl__ = _NumpyIDL(cls)  # type: ignore[no-untyped-call]
        _members(cls, "", None, (cls,))  # reject non-IDL field types at declaration
        return cls

    def __subclasscheck__(cls, subclass: type) -> bool:
        if cls.__dict__.get("_dcps_root", False):
            return isinstance(subclass, _StructMeta)
        return super().__subclasscheck__(subclass)

    def __instancecheck__(cls, instance: Any) -> bool:
        return cls.__subclasscheck__(type(instance))


def _as_array(v: Any) -> Any:
    if isinstance(v, (bytes, bytearray, memoryview)):
        return np.frombuffer(v, dtype=np.uint8)
    return np.asarray(v)


def _values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(_as_array(a), _as_array(b)))
        except (TypeError, ValueError):
            return False
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_values_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _struct_eq(self: Any, other: Any) -> Any:
    """Field-wise equality; numpy fields compare by shape and values."""
    if other.__class__ is not self.__class__:
        return NotImplemented
    return all(
        _values_equal(getattr(self, f.name), getattr(other, f.name))
        for f in dataclasses.fields(self)
    )


class Struct(IdlStruct, metaclass=_StructMeta):
    """Base class of topic types; subclasses are dataclasses and ``IdlStruct``\\ s.

    Class keywords: ``typename="module::Name"`` (default: the class name) and
    ``extensibility="final" | "appendable" | "mutable"`` (default ``final``,
    like ``idlc``). Mark key fields with ``idl.key[T]``. Numeric sequences and
    arrays accept any array-like on write and come back as ``numpy.ndarray``.
    """

    _dcps_root = True  # no annotation: the binding would take it for a field

    # Subclasses do not really inherit from Struct (see _StructMeta.__new__);
    # isinstance/issubclass still answer True for them.


class Enum(IdlEnum):
    """Base class of IDL enums: ``class Color(idl.Enum, typename="m::Color"): RED = 0``."""


def make_struct(
    name: str,
    fields: dict[str, Any],
    *,
    typename: str | None = None,
    keys: tuple[str, ...] = (),
    extensibility: str | None = None,
    base: type | None = None,
    module: str = "idl.dynamic",
    member_ids: dict[str, int] | None = None,
) -> type:
    """Create a ``Struct`` subclass at run time (what the IDL loader builds).

    ``fields`` maps member names to annotations (``idl.int32``, ...), in order;
    ``keys`` names the key members; ``member_ids`` sets explicit member ids
    (IDL ``@id``), which matter on the wire for mutable types.
    """
    inherited = {f.name for f in dataclasses.fields(base)} if base is not None else set()
    for k in keys:
        if k not in fields and k not in inherited:
            raise IdlError(f"key {k!r} of {typename or name} is not a member")
    bases = (base,) if base is not None else (Struct,)
    kwds: dict[str, Any] = {"typename": typename or name}
    if extensibility is not None:
        kwds["extensibility"] = extensibility
    ns: Any = _StructMeta.__prepare__(name, bases, **dict(kwds))
    ns["__module__"] = module
    ns["__qualname__"] = name
    for fname, ann in fields.items():
        ns["__annotations__"][fname] = Annotated[ann, KEY] if fname in keys else ann
    for fname, mid in (member_ids or {}).items():
        if fname not in fields:
            raise IdlError(f"member id for {fname!r} of {typename or name}: no such member")
        ns["__idl_field_annotations__"].setdefault(fname, {})["id"] = mid
    cls: type = _StructMeta(name, bases, dict(ns), **kwds)
    return cls


def make_enum(name: str, values: dict[str, int], *, typename: str | None = None) -> type:
    """Create an ``idl.Enum`` subclass at run time: ``values`` maps names to integers."""
    from cyclonedds.idl._main import IdlEnumMeta

    ns: Any = IdlEnumMeta.__prepare__(name, (Enum,), typename=typename or name)
    for member, value in values.items():
        ns[member] = value
    ns["__module__"] = "idl.dynamic"
    ns["__qualname__"] = name
    cls: type = IdlEnumMeta(name, (Enum,), ns)  # type: ignore[no-untyped-call]
    return cls
