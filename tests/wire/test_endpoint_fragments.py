"""An endpoint knows the fragment size dcps gave its domain: a publisher's default batch
size follows it (issue 19; the publisher's side is in
``tests/channels/test_publisher_mutants.py``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dcps import NetworkConfig
from dcps.wire._transport import Endpoint


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
