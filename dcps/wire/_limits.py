"""Bounds on what one request may ask of the store, and the checks that enforce them.

Every request is checked whole against these before it has any effect; a
request over a bound is refused alone, with a :class:`~dcps.BadParameterError`
(or :class:`~dcps.OutOfResourcesError` for the open-client bound) naming the
field and the limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from idl._errors import BadParameterError

__all__ = [
    "MAX_BATCH_ELEMENTS",
    "MAX_CHANNELS",
    "MAX_CLIENTS",
    "MAX_CLIENT_ID_LENGTH",
    "MAX_ELEMENT_SIZE",
    "MAX_FETCH_COUNT",
    "MAX_NAME_LENGTH",
    "check_channel_count",
    "check_channels",
    "check_client_id",
    "check_wire_name",
]

#: Most elements one FETCH may ask for (a subscriber asks for 512, Spark for 20,000).
MAX_FETCH_COUNT = 100_000
#: Most channels a channelled topic may have.
MAX_CHANNELS = 4096
#: Largest element, in bytes (a zero-length element is refused too).
MAX_ELEMENT_SIZE = 64 * 1024 * 1024
#: Most elements in one PUBLISH batch.
MAX_BATCH_ELEMENTS = 1_000_000
#: Longest topic, group, member or idempotence-key name, in characters.
MAX_NAME_LENGTH = 256
#: Longest client id, in characters (a StoreClient's is 32 hex digits).
MAX_CLIENT_ID_LENGTH = 64
#: Most clients the store answers at once (one reply writer each).
MAX_CLIENTS = 1024

#: Characters a DDS partition expression reads as wildcards or escapes.
_WILDCARDS = frozenset("*?\\")
#: A client id names a partition level of its own: no separator either.
_NOT_IN_CLIENT_IDS = frozenset("*?\\/")


def check_client_id(client: str) -> str:
    """A client id fit for a reply partition: 1..MAX_CLIENT_ID_LENGTH, no ``* ? \\ /``."""
    if (
        not client
        or len(client) > MAX_CLIENT_ID_LENGTH
        or not _NOT_IN_CLIENT_IDS.isdisjoint(client)
        or not client.isprintable()
    ):
        raise BadParameterError(
            f"client id {client[:80]!r} is refused: a client id has 1..{MAX_CLIENT_ID_LENGTH} "
            "printable characters, none of '*', '?', '\\' or '/'"
        )
    return client


def check_wire_name(field: str, value: str, *, required: bool = True) -> str:
    """A topic, group or member name of a request: at most MAX_NAME_LENGTH, no wildcards."""
    if not value:
        if required:
            raise BadParameterError(f"request field {field!r} must not be empty")
        return value
    if len(value) > MAX_NAME_LENGTH:
        raise BadParameterError(
            f"request field {field!r} has {len(value)} characters; "
            f"the limit is MAX_NAME_LENGTH = {MAX_NAME_LENGTH}"
        )
    if not _WILDCARDS.isdisjoint(value):
        raise BadParameterError(
            f"request field {field!r} ({value[:80]!r}) must not contain '*', '?' or '\\'"
        )
    return value


def check_channel_count(count: int) -> int:
    """A topic's channel count (0: the store's default), at most MAX_CHANNELS."""
    if not 0 <= count <= MAX_CHANNELS:
        raise BadParameterError(
            f"a channelled topic has 1..{MAX_CHANNELS} channels (MAX_CHANNELS), not {count}"
        )
    return count


def check_channels(channels: Sequence[int], *, parallel: Sequence[int] | None = None) -> None:
    """Channel numbers in range; ``parallel`` (offsets) of the same length when given."""
    if channels and not (min(channels) >= 0 and max(channels) < MAX_CHANNELS):
        bad = [c for c in channels if not 0 <= c < MAX_CHANNELS][:5]
        raise BadParameterError(
            f"request field 'channels' holds {bad}: channels are "
            f"0..{MAX_CHANNELS - 1} (MAX_CHANNELS = {MAX_CHANNELS})"
        )
    if len(set(channels)) != len(channels):
        raise BadParameterError("request field 'channels' names a channel twice")
    if parallel is not None and len(parallel) != len(channels):
        raise BadParameterError(
            f"request fields 'channels' and 'offsets' differ in length "
            f"({len(channels)} and {len(parallel)})"
        )
