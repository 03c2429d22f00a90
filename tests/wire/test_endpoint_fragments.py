"""An endpoint knows the fragment size dcps gave its domain: a publisher's default batch
size follows it (issue 19; the publisher's side is in
``tests/channels/test_publisher_mutants.py``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from dcps import DomainParticipant, NetworkConfig
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


def test_dcps_environment_settings_give_the_fragment_size(
    own_domain: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DCPS_INTERFACES", "lo")
    monkeypatch.setenv("DCPS_FRAGMENT_SIZE", "8000")
    endpoint = Endpoint(own_domain, "ns_env")
    try:
        assert endpoint.fragment_size == 8000
    finally:
        endpoint.close()


def test_an_endpoint_shares_the_fragment_size_of_a_domain_a_participant_configured(
    own_domain: int,
) -> None:
    """One Cyclone domain per id per process: an endpoint made without ``network=`` on a
    domain a participant configured runs with that participant's fragments, and says so
    (a publisher's default batch size follows it)."""
    dp = DomainParticipant(own_domain, network=NetworkConfig(interfaces=["lo"]))
    try:
        endpoint = Endpoint(own_domain, "ns_shared")
        try:
            assert endpoint.fragment_size == 60000
        finally:
            endpoint.close()
    finally:
        dp.close()
