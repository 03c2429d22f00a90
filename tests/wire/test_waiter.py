"""A Waiter's wake-ups: from any thread, and harmless after close.

A store reply's callback (a heartbeat answered as its subscriber closes) may wake
a subscriber's delivery waiter after the subscriber closed it; that must not raise
on the client's reply thread.
"""

from __future__ import annotations

import time

from dcps.wire._transport import Endpoint, Waiter


def test_a_wake_returns_the_wait_at_once_and_does_nothing_after_close(
    domain_id: int, namespace: str
) -> None:
    endpoint = Endpoint(domain_id, namespace)
    try:
        waiter = Waiter(endpoint)
        waiter.wake()
        started = time.monotonic()
        waiter.wait(30.0)  # returns at once: the wake came first
        assert time.monotonic() - started < 10.0
        waiter.close()
        waiter.wake()  # a late callback: no DDSException for the deleted guard
        waiter.wake()
    finally:
        endpoint.close()
