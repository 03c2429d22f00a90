"""Running a selector on the encoded batch: decode only the messages it may keep.

Most messages a selective subscription receives are dropped, and decoding a
JMS envelope (the body and seven header fields, four of them strings) costs
far more than the selector. When a selector reads only body members that sit
at fixed offsets in every envelope (numbers and booleans ahead of the body's
first string or sequence, see :func:`idl._batch_codec.leading_scalars`),
:class:`Preselect` reads those members straight from the batch's bytes and
runs the same compiled selector on them: a message it rejects is never
decoded. It only ever rules messages out: the subscription's full predicate
(selector, noLocal, expiry) still runs on every message it lets through, so
what is kept is exactly what decoding everything would keep.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from dcps.sql._parse import Field
from dcps.sql._selector import compile_selector, parse_selector
from idl._batch_codec import leading_scalars, read_leading
from idl._introspect import describe

__all__ = ["Preselect", "preselect_of"]


def _fields(node: Any) -> list[Field]:
    """Every field path a selector's syntax tree reads."""
    if isinstance(node, Field):
        return [node]
    if isinstance(node, tuple):
        return [f for item in node for f in _fields(item)]
    if not attrs.has(type(node)):
        return []
    return [f for a in attrs.fields(type(node)) for f in _fields(getattr(node, a.name))]


class Preselect:
    """``preselect(blob, sizes)``: per element of an encoded batch of envelopes, False when
    the selector is certainly not TRUE for it, True when it may be (decode and check it);
    None when the batch cannot be read so (then every element is decoded)."""

    def __init__(
        self, names: Sequence[str], body_type: type, match_many: Callable[[list[Any]], list[bool]]
    ) -> None:
        self.names = tuple(names)
        self._body_type = body_type
        self._match_many = match_many
        # a sample stand-in: a tuple of the members read, each also an attribute
        self._view: type = type(
            "SelectorView",
            (tuple,),
            {
                "__slots__": (),
                **{n: property(operator.itemgetter(i)) for i, n in enumerate(self.names)},
            },
        )

    def __call__(self, blob: bytes, sizes: Sequence[int]) -> list[bool] | None:
        columns = read_leading(blob, sizes, self._body_type, self.names)
        if columns is None:
            return None
        return self._match_many(list(map(self._view, zip(*columns, strict=True))))


def preselect_of(
    selector: str,
    body_type: type,
    envelope: type | None,
    headers: Mapping[str, tuple[str, str, bool]],
) -> Preselect | None:
    """The :class:`Preselect` of a (valid) selector on ``envelope`` messages with
    ``body_type`` bodies, or None when it reads anything but top-level body members at
    fixed offsets (a header field, a nested or indexed member, a string), or the envelope
    is not a final struct that starts with its body."""
    if not selector or envelope is None:
        return None
    info = describe(envelope)
    if info.extensibility != "final" or not info.fields or info.fields[0].name != "body":
        return None
    names: list[str] = []
    for field in _fields(parse_selector(selector)):
        if len(field.parts) != 1 or not isinstance(field.parts[0], str):
            return None
        name = field.parts[0]
        if name in headers:
            return None
        if name not in names:
            names.append(name)
    if not names:
        return None  # a constant selector: nothing worth reading
    # (the offsets differ between XCDR1 and XCDR2; read_leading takes each batch's own)
    if any(n not in leading_scalars(body_type, 1) for n in names):
        return None
    compiled = compile_selector(selector, body_type, root="s", headers={})
    return Preselect(names, body_type, compiled.match_many)
