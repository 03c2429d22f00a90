"""Opening a channel client's connection: the endpoint, the store client, the topic.

Shared by publishers, subscribers and :func:`destroy_subscriber_group`, so each
opens (and on failure releases) its DDS entities the same way.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Endpoint
from idl._errors import BadParameterError
from idl._identity import type_identity

from ._client import StoreClient
from ._topic import ChannelledTopic

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["Connection", "connect_topic", "require_topic"]


class Connection:
    """A participant with the channel topics (``endpoint``) and a connected ``client``.

    Connecting waits up to ``connect_timeout`` seconds (None: as long as it
    takes) for the store(s); on
    failure everything opened so far is released before the error propagates.
    ``store_key`` and ``admin_key`` are the client's keys (``docs/security.md``;
    by default the files named by ``DCPS_STORE_KEY_FILE`` and
    ``DCPS_STORE_ADMIN_KEY_FILE``, if set).
    """

    def __init__(
        self,
        domain_id: int,
        namespace: str,
        network: NetworkConfig | None,
        *,
        connect_timeout: float | None,
        request_timeout: float,
        store_key: KeyOption = FROM_ENVIRONMENT,
        admin_key: KeyOption = FROM_ENVIRONMENT,
    ) -> None:
        self.endpoint = Endpoint(domain_id, namespace, network)
        try:
            self.client = StoreClient(
                self.endpoint,
                request_timeout=request_timeout,
                key=store_key,
                admin_key=admin_key,
            )
        except BaseException:
            self.endpoint.close()
            raise
        try:
            self.client.connect(math.inf if connect_timeout is None else connect_timeout)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Stop the store client and release the participant (idempotent)."""
        self.client.close()
        self.endpoint.close()


def connect_topic(client: StoreClient, topic: ChannelledTopic) -> tuple[int, bool]:
    """Make sure the store knows ``topic``; return its ``(channel_count, retain_consumed)``.

    The type's identity (:func:`idl.type_identity`) goes along: the store
    records it for a new topic and refuses another type for an existing one.
    """
    config = client.ensure_topic(
        topic.name,
        topic.channel_count or 0,
        topic.retain_consumed,
        getattr(topic.type, "__idl_typename__", topic.type.__name__),
        type_identity=type_identity(topic.type),
    )
    return config.channel_count, config.retain_consumed


def require_topic(client: StoreClient, topic: ChannelledTopic) -> None:
    """Raise ``BadParameterError`` naming topic and namespace unless the store has ``topic``.

    Asks for the topic's channel states, which the store answers only for a
    topic it has (a STATE request names no other parameter to get wrong), so
    nothing is created.
    """
    try:
        client.state(topic.name)
    except BadParameterError as exc:
        ep = client.endpoint
        raise BadParameterError(
            f"channelled topic {topic.name!r} does not exist in namespace {ep.namespace!r} "
            f"(domain {ep.participant.domain_id}): check its name, or pass create=True "
            f"(or a channel_count) to create it ({exc})"
        ) from exc
