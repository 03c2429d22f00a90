"""Durables without subscribing: unsubscribe (destroy) and inspect them."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from dcps._timeout import Timeout, timeout_seconds
from dcps.channels._client import StoreClient
from dcps.channels._topic import ChannelledTopic
from dcps.wire._durables import (
    DurableInfo,
    DurableInfoRequest,
    DurableUnsubscribed,
    DurableUnsubscribeRequest,
)
from dcps.wire._names import check_name
from dcps.wire._transport import Endpoint
from idl._public import show_as

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["durable_info", "unsubscribe"]


def _with_client(
    domain_id: int, namespace: str, network: NetworkConfig | None, timeout: Timeout
) -> tuple[Endpoint, StoreClient]:
    endpoint = Endpoint(domain_id, namespace, network)
    client = StoreClient(endpoint)
    try:
        client.connect(timeout_seconds(timeout) or 10.0)
    except BaseException:
        client.close()
        endpoint.close()
        raise
    return endpoint, client


def unsubscribe(
    topic: ChannelledTopic,
    name: str,
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    network: NetworkConfig | None = None,
    connect_timeout: Timeout = timedelta(seconds=10),
) -> bool:
    """Destroy durable ``name`` of ``topic``, discarding its pending elements (FTL's
    ``unsubscribe``). Returns False when there was no such durable.

    Raises :class:`~dcps.PreconditionNotMetError` while a subscriber is active.

    .. versionadded:: 0.3
    """
    check_name("durable name", name)
    endpoint, client = _with_client(domain_id, namespace, network, connect_timeout)
    try:
        fut = client.request_async(
            DurableUnsubscribeRequest(topic.name, name), DurableUnsubscribed.from_wire
        )
        result: DurableUnsubscribed = client.wait_for(DurableUnsubscribeRequest.op, fut, None)
        return result.existed
    finally:
        client.close()
        endpoint.close()


def durable_info(
    topic: ChannelledTopic,
    name: str,
    *,
    domain_id: int = 0,
    namespace: str = "dcps",
    network: NetworkConfig | None = None,
    connect_timeout: Timeout = timedelta(seconds=10),
) -> DurableInfo:
    """The state of durable ``name`` of ``topic`` in the store: its kind, persistence,
    subscriber count and outstanding elements (UM's
    ``getSharedNamedObjectOutstandingEvents``; -1 for a last-value durable).

    Raises :class:`~dcps.PreconditionNotMetError` when there is no such durable.

    .. versionadded:: 0.3
    """
    check_name("durable name", name)
    endpoint, client = _with_client(domain_id, namespace, network, connect_timeout)
    try:
        fut = client.request_async(
            DurableInfoRequest(topic.name, name),
            lambda r: DurableInfo.from_wire_for(r, topic.name, name),
        )
        info: DurableInfo = client.wait_for(DurableInfoRequest.op, fut, None)
        return info
    finally:
        client.close()
        endpoint.close()


show_as("dcps.durables", durable_info, unsubscribe)
