"""The message body type of the JMS tests, example and peers.

No ``from __future__ import annotations``: cyclonedds resolves field types at run time.
"""

from dataclasses import dataclass
from typing import Optional

from cyclonedds.idl import IdlStruct
from cyclonedds.idl import types as t


@dataclass
class Quote(IdlStruct, typename="dcps_test.jms.Quote"):
    """A price quote: the selectors of the JMS tests test its members."""

    symbol: str
    price: t.float64
    seq: t.int64
    note: Optional[str] = None  # noqa: UP045 - cyclonedds reads typing.Optional
