"""One connection to the store for a durables client object: an endpoint and its StoreClient.

Maps and queues talk to the coordinating store (share 0) with the typed
requests of ``dcps.wire._maps`` and ``dcps.wire._queues``; this module holds
what they share: connecting, calling with a timeout, closing.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, TypeVar

from dcps._timeout import Timeout, timeout_seconds
from dcps.channels._client import StoreClient
from dcps.wire._codes import Op
from dcps.wire._messages import Reply
from dcps.wire._requests import StoreRequest
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Endpoint
from idl._errors import BadParameterError

if TYPE_CHECKING:
    from dcps._network import NetworkConfig

__all__ = ["StoreLink", "seconds"]

T = TypeVar("T")


def seconds(value: Timeout, what: str) -> float:
    """Seconds of a finite timeout option (``BadParameterError`` naming ``what`` otherwise)."""
    out = timeout_seconds(value, what)
    if out is None:
        raise BadParameterError(f"{what} must be finite, got {value!r}")
    return out


class StoreLink:
    """A participant and a connected :class:`StoreClient` of one namespace, closed together."""

    def __init__(
        self,
        *,
        domain_id: int,
        namespace: str,
        network: NetworkConfig | None,
        timeout: Timeout,
        connect_timeout: Timeout,
        store_key: KeyOption = FROM_ENVIRONMENT,
        admin_key: KeyOption = FROM_ENVIRONMENT,
        client_class: type[StoreClient] = StoreClient,
    ) -> None:
        """``client_class``: the store client to use (a queue consumer's proves its requests
        with its own secret: ``dcps/durables/_client.py``)."""
        self.timeout = seconds(timeout, "timeout")
        connect = seconds(connect_timeout, "connect_timeout")
        self.endpoint = Endpoint(domain_id, namespace, network)
        try:
            self.client = client_class(
                self.endpoint,
                request_timeout=max(self.timeout, 1.0),
                key=store_key,
                admin_key=admin_key,
            )
        except BaseException:
            self.endpoint.close()
            raise
        try:
            self.client.connect(connect)
        except BaseException:
            self.close()
            raise

    def call_async(self, request: StoreRequest, decode: Callable[[Reply], T]) -> Future[T]:
        """Send ``request`` (to the coordinating store); a future of its decoded answer."""
        return self.client.request_async(request, decode)

    def call(
        self, request: StoreRequest, decode: Callable[[Reply], T], timeout: float | None = None
    ) -> T:
        """Send ``request`` and wait for its answer (a store error raises as its DcpsError)."""
        fut = self.client.request_async(request, decode)
        return self.client.wait_for(request.op, fut, self.timeout if timeout is None else timeout)

    def wait(self, op: Op, fut: Future[T]) -> T:
        """The result of a request's future (``DcpsTimeoutError`` after the link's timeout)."""
        return self.client.wait_for(op, fut, self.timeout + 1)

    def close(self) -> None:
        """Close the client and the participant (idempotent)."""
        self.client.close()
        self.endpoint.close()
