"""The one value-record convention of dcps: immutable tuples, equal only to their own kind.

Records built per sample or per element on hot paths (``Sample``, ``SampleInfo``,
and the channels' ``Position`` and ``Element``) are tuple subclasses: one
allocation, C-level field getters, cheap hashing. The rules, decided once:

- A record **is not equal to a plain tuple** (nor to another record kind with
  the same fields): ``Position(1, 2) == (1, 2)`` is False. It is still a tuple
  underneath, so unpacking (``data, info = sample``), indexing and pickling work,
  but the tuple layout is not API.
- Equal records of one kind hash alike (tuple hashing).
- Fields are declared once each, with :func:`field`, which makes a read-only
  C-level getter that type checkers see as an attribute of the declared type::

      class Position(Record):
          __slots__ = ()
          __match_args__ = ("channel", "offset")
          channel: int = field(0, "The channel.")
          offset: int = field(1, "The offset within the channel.")

- Trusted hot paths build records with :func:`new_record` (``tuple.__new__``),
  skipping ``__new__``'s checks; public constructors check their arguments.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any

__all__ = ["Record", "field", "new_record"]

#: Build a record from a tuple of its fields, skipping the class's ``__new__``
#: (for trusted values on hot paths): ``new_record(Position, (channel, offset))``.
new_record = tuple.__new__


def field(index: int, doc: str) -> Any:
    """A read-only record field: the ``index``-th tuple item, as a C-level getter.

    Declare it with the field's type, ``name: int = field(0, "...")``; the
    annotation is what type checkers see, the property is what runs.
    """
    return property(itemgetter(index), doc=doc)


class Record(tuple[Any, ...]):
    """Base of dcps' value records: a tuple equal only to records of its own class."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            # False for other tuples: NotImplemented would let tuple's own == answer
            return False if isinstance(other, tuple) else NotImplemented
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = tuple.__hash__

    def __getnewargs__(self) -> tuple[Any, ...]:  # pickle and copy through __new__
        return tuple(self)
