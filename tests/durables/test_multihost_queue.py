"""A queue consumer whose host is cut off for longer than the participant lease.

Two network namespaces (tests/support/netns.py): the store and a publisher on host a,
a consumer on host b. The consumer's long poll (QUEUE_RECEIVE) is parked at the store
when b's cable is pulled; elements published meanwhile are handed to it, and its
answer reaches b once the hosts find each other again (replies are TRANSIENT_LOCAL).
The client must not send that poll again to the same store: the copy would be
handed the next elements, which nobody would ever see (dcps/channels/_client.py,
``_FOUND_AGAIN_RESENDABLE``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.netns import Lan, PeerProcess, lan_factory
from tests.support.peers import PEERS_DIR

pytestmark = [pytest.mark.slow, pytest.mark.multiprocess]

PEER = PEERS_DIR / "queue_host.py"
#: Participant lease (s); the outage outlasts it, so the hosts forget each other.
LEASE = 3.0
ENV = {"DCPS_INTERFACES": "eth0", "DCPS_LEASE_DURATION": str(LEASE), "DCPS_SPDP_INTERVAL": "0.5"}


@pytest.fixture
def make_lan() -> Iterator[Callable[[int], Lan]]:
    yield from lan_factory()


def _is(ev: str) -> Callable[[dict[str, Any]], bool]:
    return lambda e: e.get("ev") == ev


def _got(consumer: PeerProcess) -> set[int]:
    return {e["seq"] for e in consumer.drain() if e.get("ev") == "got"}


def test_elements_published_while_the_consumer_was_cut_off_all_arrive(
    make_lan: Callable[[int], Lan], domain_id: int, unique: str
) -> None:
    """Every element published during the outage reaches the consumer after the link
    returns: at once when its poll was parked at the store, else once that lost poll's
    10 s request timeout ended and the next one went out. A poll sent again to the same
    store would hold the next elements for nobody for as long as the consumer lives."""
    lan = make_lan(2)
    a, b = lan.hosts
    config = {"domain": domain_id, "namespace": f"ns_{unique}", "queue": f"q_{unique}"}
    store = a.python(
        "-m", "dcps.store", "--data", str(lan.workdir / "store"), "--domain", str(domain_id),
        "--namespace", config["namespace"], "--sync", "NORMAL", env=ENV,
    )  # fmt: skip
    store.expect(
        lambda e: e.get("ev") == "text" and e["text"].startswith("dcps store ready"), 30, "store"
    )
    publisher = a.python(str(PEER), json.dumps({**config, "role": "publisher"}), env=ENV)
    publisher.expect(_is("ready"), 30, "publisher ready")
    consumer = b.python(str(PEER), json.dumps({**config, "role": "consumer"}), env=ENV)
    consumer.expect(_is("ready"), 30, "consumer ready")
    publisher.send(seqs=[0])
    publisher.expect(_is("published"), 30, "0 published")
    consumer.expect(lambda e: e.get("ev") == "got" and e["seq"] == 0, 30, "element 0")
    consumer.expect(_is("polling"), 30, "the consumer's next poll", since=len(consumer.drain()) - 1)
    b.link_down()
    mark = len(publisher.drain())
    publisher.send(seqs=[1, 2, 3])
    publisher.expect(_is("published"), 30, "1-3 published", since=mark)
    time.sleep(LEASE + 1.5)  # hold the cable out past the lease (the scenario itself)
    up = time.monotonic()
    b.link_up()
    deadline = up + 25  # the lost poll's 10 s timeout, and room for a loaded machine
    while not {1, 2, 3} <= _got(consumer) and time.monotonic() < deadline:
        time.sleep(0.05)
    print(f"\n1-3 arrived {time.monotonic() - up:.1f} s after the link returned")
    assert {1, 2, 3} <= _got(consumer), f"got {sorted(_got(consumer))} within 25 s"
