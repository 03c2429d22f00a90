"""StoreAdmin: the admin requests of ``dcps topics``, ``dcps groups``, ``dcps store status``,
``dcps durables``, ``dcps queues`` and ``dcps maps``.

It asks every store of a namespace (each answers for its share of the
channels) and merges the answers; durables, queues and maps live in the
coordinating store, which alone is asked about them. Looking needs the namespace key (if the
namespace has one); resetting and deleting need the admin key too. Nothing
here joins a group or subscribes: describing a group, durable or queue
leaves its members and what they hold as they were.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, TypeVar

from dcps.channels._client import StoreClient
from dcps.wire._admin import (
    DeleteGroupRequest,
    DescribeGroupsRequest,
    DescribeTopicsRequest,
    GroupDeleted,
    GroupReset,
    GroupsReport,
    ResetGroupRequest,
    StoreStatus,
    StoreStatusRequest,
    TopicsReport,
    merge_groups,
    merge_topics,
)
from dcps.wire._admin_objects import (
    DeleteDurableRequest,
    DeleteMapRequest,
    DeleteQueueRequest,
    DescribeDurablesRequest,
    DescribeMapsRequest,
    DescribeQueuesRequest,
    DurableDeleted,
    DurablesReport,
    MapsReport,
    QueuesReport,
    ResetDurableRequest,
)
from dcps.wire._codes import SeekMode
from dcps.wire._maps import MapDropped
from dcps.wire._messages import Reply
from dcps.wire._queues import QueueDeleted
from dcps.wire._sealing import FROM_ENVIRONMENT, KeyOption
from dcps.wire._transport import Endpoint

if TYPE_CHECKING:
    from dcps._network import NetworkConfig
    from dcps.wire._requests import StoreRequest

__all__ = ["StoreAdmin"]

T = TypeVar("T")


class StoreAdmin:
    """Admin requests to the store(s) of ``namespace`` on ``domain_id``.

    Connecting waits up to ``timeout`` seconds for every store share to
    answer (:class:`~dcps.DcpsTimeoutError` naming the missing ones). ``key``
    and ``admin_key`` are as for :class:`~dcps.store.Store`. Use it as a
    context manager, or :meth:`close` it.
    """

    def __init__(
        self,
        domain_id: int = 0,
        namespace: str = "dcps",
        *,
        network: NetworkConfig | None = None,
        key: KeyOption = FROM_ENVIRONMENT,
        admin_key: KeyOption = FROM_ENVIRONMENT,
        timeout: float = 10.0,
    ) -> None:
        self._endpoint = Endpoint(domain_id, namespace, network)
        try:
            self._client = StoreClient(
                self._endpoint, request_timeout=timeout, key=key, admin_key=admin_key
            )
            try:
                self._client.connect(timeout)
            except BaseException:
                self._client.close()
                raise
        except BaseException:
            self._endpoint.close()
            raise

    def __enter__(self) -> StoreAdmin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Release the client and its participant (idempotent)."""
        self._client.close()
        self._endpoint.close()

    @property
    def store_count(self) -> int:
        """How many stores share the namespace's channels."""
        return self._client.store_count

    def _ask(
        self, request: StoreRequest, decode: Callable[[Reply], T], stores: Sequence[int]
    ) -> list[T]:
        # StoreClient routes the protocol's own kinds; admin requests go to named stores
        futures = [self._client.request_store_async(i, request, decode) for i in stores]
        return [self._client.wait_for(request.op, f, None) for f in futures]

    def _ask_all(self, request: StoreRequest, decode: Callable[[Reply], T]) -> list[T]:
        return self._ask(request, decode, range(self.store_count))

    def _ask_coordinator_first(
        self, request: StoreRequest, decode: Callable[[Reply], T]
    ) -> list[T]:
        """The coordinator decides (refusing an active group), then the other stores follow."""
        first = self._ask(request, decode, [0])
        return first + self._ask(request, decode, range(1, self.store_count))

    def topics(self, topic: str = "", *, channels: bool = False) -> TopicsReport:
        """The channelled topics (``topic``: just that one), with per-channel detail if
        ``channels``."""
        request = DescribeTopicsRequest(topic, channels)
        return merge_topics(self._ask_all(request, TopicsReport.from_wire))

    def groups(self, topic: str = "", group: str = "") -> GroupsReport:
        """The subscriber groups (of ``topic``; ``group`` of it), without joining them."""
        request = DescribeGroupsRequest(topic, group)
        return merge_groups(self._ask_all(request, GroupsReport.from_wire))

    def reset(
        self,
        topic: str,
        group: str,
        mode: SeekMode,
        target: int | None = None,
        *,
        channels: Sequence[int] = (),
        force: bool = False,
    ) -> dict[int, int]:
        """Move ``group``'s commits (see :class:`~dcps.wire._admin.ResetGroupRequest`); the
        offset each channel delivers next. Needs the admin key."""
        per_store: dict[int, list[int]] = {}
        for c in channels:
            per_store.setdefault(c % self.store_count, []).append(c)
        stores = sorted(per_store) if channels else list(range(self.store_count))
        targets = () if target is None else (target,)
        done: dict[int, int] = {}
        for index in sorted(stores, key=lambda i: i != 0):
            mine = tuple(per_store.get(index, ()))
            request = ResetGroupRequest(topic, group, mode, mine, targets * (len(mine) or 1), force)
            for reset in self._ask(request, GroupReset.from_wire, [index]):
                done.update(reset.next_offsets)
        return dict(sorted(done.items()))

    def delete(self, topic: str, group: str, *, force: bool = False) -> GroupDeleted:
        """Delete ``group`` of ``topic`` and its commits. Needs the admin key."""
        answers = self._ask_coordinator_first(
            DeleteGroupRequest(topic, group, force), GroupDeleted.from_wire
        )
        return GroupDeleted(any(a.existed for a in answers), answers[0].members)

    def status(self) -> list[StoreStatus]:
        """Every store of the namespace, by share."""
        return self._ask_all(StoreStatusRequest(), StoreStatus.from_wire)

    # -- durables, queues, maps (in the coordinating store) ------------------------------------

    def _ask_coordinator(self, request: StoreRequest, decode: Callable[[Reply], T]) -> T:
        return self._ask(request, decode, [0])[0]

    def durables(self, topic: str = "", name: str = "") -> DurablesReport:
        """The durables (of ``topic``; ``name`` of it), without subscribing."""
        return self._ask_coordinator(DescribeDurablesRequest(topic, name), DurablesReport.from_wire)

    def delete_durable(self, topic: str, name: str, *, force: bool = False) -> DurableDeleted:
        """Delete durable ``name`` of ``topic`` and what it has not acknowledged (admin key)."""
        return self._ask_coordinator(
            DeleteDurableRequest(topic, name, force), DurableDeleted.from_wire
        )

    def reset_durable(
        self,
        topic: str,
        name: str,
        mode: SeekMode,
        target: int | None = None,
        *,
        channels: Sequence[int] = (),
        force: bool = False,
    ) -> dict[int, int]:
        """Move what durable ``name`` acknowledged (admin key); per channel, the offset it
        delivers next."""
        targets = () if target is None else (target,) * (len(channels) or 1)
        request = ResetDurableRequest(topic, name, mode, tuple(channels), targets, force)
        return dict(
            sorted(self._ask_coordinator(request, GroupReset.from_wire).next_offsets.items())
        )

    def queues(self, name: str = "") -> QueuesReport:
        """The queues (``name``: that one), without subscribing."""
        return self._ask_coordinator(DescribeQueuesRequest(name), QueuesReport.from_wire)

    def delete_queue(self, name: str, *, force: bool = False) -> QueueDeleted:
        """Delete queue ``name`` and its elements (admin key)."""
        return self._ask_coordinator(DeleteQueueRequest(name, force), QueueDeleted.from_wire)

    def maps(self, name: str = "") -> MapsReport:
        """The key-value maps (``name``: that one)."""
        return self._ask_coordinator(DescribeMapsRequest(name), MapsReport.from_wire)

    def delete_map(self, name: str) -> MapDropped:
        """Drop map ``name`` with every key (admin key)."""
        return self._ask_coordinator(DeleteMapRequest(name), MapDropped.from_wire)
