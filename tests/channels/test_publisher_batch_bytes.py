"""A publisher's default batch size follows the domain's fragment size (issue 19).

With Cyclone's 1,344-byte fragments a 1 MiB batch is 781 datagrams and halves the rate
of 4 KiB and 64 KiB elements on loopback; with dcps's 60,000-byte loopback fragments it is
18 datagrams and 1.25-1.45x the rate of 256 KiB batches (``docs/large-payloads.md``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dcps import BadParameterError, NetworkConfig
from dcps.channels import ChannelledTopic, ChannelPublisher
from dcps.channels._publisher import (
    BATCH_BYTES,
    BATCH_BYTES_LARGE_FRAGMENTS,
    default_batch_bytes,
)
from dcps.store import Store
from dcps.wire._transport import Endpoint
from tests.support.peers.channels_types import Msg


@pytest.mark.parametrize(
    ("fragment_size", "batch_bytes"),
    [
        (None, 256 << 10),  # Cyclone's 1,344 (no dcps network configuration)
        (1344, 256 << 10),
        (8850, 256 << 10),  # jumbo frames: ~30 datagrams per 256 KiB already
        (32 << 10, 1 << 20),
        (60000, 1 << 20),  # dcps's loopback default
    ],
)
def test_default_batch_bytes_follows_the_fragment_size(
    fragment_size: int | None, batch_bytes: int
) -> None:
    assert default_batch_bytes(fragment_size) == batch_bytes


@pytest.fixture
def own_domain(domain_id: int) -> Iterator[int]:
    """A domain id of this worker no other test uses (100..149; test_network's are 150..229)."""
    yield 100 + domain_id % 50
    gc.collect()


def test_an_endpoint_knows_the_fragment_size_dcps_configured(own_domain: int) -> None:
    endpoint = Endpoint(own_domain, "ns_fragments", NetworkConfig(interfaces=["lo"]))
    try:
        assert endpoint.fragment_size == 60000
    finally:
        endpoint.close()


def test_without_a_dcps_network_the_fragment_size_is_cyclones(domain_id: int) -> None:
    endpoint = Endpoint(domain_id, "ns_fragments")  # the tests' CYCLONEDDS_URI only
    try:
        assert endpoint.fragment_size is None
    finally:
        endpoint.close()


class TestPublisher:
    def test_the_default_is_the_domains_and_a_given_size_wins(
        self, store: Store, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        kw = {"domain_id": domain_id, "namespace": namespace}
        with ChannelPublisher(topic, **kw) as pub:
            assert pub.batch_bytes == BATCH_BYTES  # the tests run on Cyclone's fragments
        with ChannelPublisher(topic, batch_bytes=BATCH_BYTES_LARGE_FRAGMENTS, **kw) as pub:
            assert pub.batch_bytes == BATCH_BYTES_LARGE_FRAGMENTS

    def test_a_batch_size_below_one_byte_is_refused(
        self, store: Store, domain_id: int, namespace: str, topic_name: str
    ) -> None:
        topic = ChannelledTopic(topic_name, Msg, channel_count=1)
        with pytest.raises(BadParameterError, match="batch_bytes"):
            ChannelPublisher(topic, domain_id=domain_id, namespace=namespace, batch_bytes=0)
