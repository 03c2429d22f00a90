"""The store's answers to the admin requests of durables, queues and maps (kinds 75-81).

Describing reads the store's memory and file and changes nothing (a
described durable or queue gets no subscriber). Deleting and resetting need
the admin key (checked by the authentication layer before a handler runs)
and are refused while the durable or queue has subscribers unless forced;
forced, the subscribers are told at their next request. Durables, queues
and maps live in the coordinating store, which the admin client asks.

Handlers run on the store's service thread, like every other handler.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from dcps.wire._admin import GroupReset
from dcps.wire._admin_objects import (
    DeleteDurableRequest,
    DeleteMapRequest,
    DeleteQueueRequest,
    DescribeDurablesRequest,
    DescribeMapsRequest,
    DescribeQueuesRequest,
    DurablesReport,
    MapsReport,
    QueuesReport,
    ResetDurableRequest,
)
from dcps.wire._queues import QueueDeleteRequest
from idl._errors import AlreadyClosedError, PreconditionNotMetError

from ._admin import reset_channel, reset_targets
from ._groups import check_channels_exist
from ._maps import drop_map

if TYPE_CHECKING:
    from ._service import Store, _Call

__all__ = ["ADMIN_OBJECT_HANDLERS"]

_log = logging.getLogger("dcps.store")


# -- durables --------------------------------------------------------------------------------


def _on_describe_durables(store: Store, call: _Call[DescribeDurablesRequest]) -> None:
    r = call.request
    if r.topic:
        store.log.topic(r.topic)  # an unknown topic is an error naming it
    store._reply(call, DurablesReport(tuple(store.durables.reports(r.topic, r.name))))


def _on_delete_durable(store: Store, call: _Call[DeleteDurableRequest]) -> None:
    r = call.request
    store.log.topic(r.topic)
    store._reply(call, store.durables.delete(r.topic, r.name, force=r.force))


def _on_reset_durable(store: Store, call: _Call[ResetDurableRequest]) -> None:
    r = call.request
    log = store.log
    info = log.topic(r.topic)
    check_channels_exist(log, r.topic, r.channels)
    done: dict[int, int] = {}

    def move(group: str) -> None:
        for c, target in reset_targets(store, r, info.channel_count).items():
            done[c] = reset_channel(log, r.topic, group, r.mode, c, target)

    store.durables.reset(r.topic, r.group, move, force=r.force)
    _log.info(
        "durable %r of topic %r reset to %s%s: next offsets %s",
        r.group,
        r.topic,
        r.mode.name.lower(),
        " (forced)" if r.force else "",
        done,
    )
    store._reply(call, GroupReset(done))


# -- queues ----------------------------------------------------------------------------------


def _on_describe_queues(store: Store, call: _Call[DescribeQueuesRequest]) -> None:
    store._reply(call, QueuesReport(tuple(store._queues.reports(call.request.queue))))


def _on_delete_queue(store: Store, call: _Call[DeleteQueueRequest]) -> None:
    r = call.request
    known = store._queues.reports() if not r.force else []
    consumers = [c.name for q in known if q.name == r.queue for c in q.consumers]
    if consumers:
        names = ", ".join(consumers[:5]) + (" ..." if len(consumers) > 5 else "")
        raise PreconditionNotMetError(
            f"cannot delete queue {r.queue!r}: it has {len(consumers)} active consumer(s) "
            f"({names}); stop them first, or force it (dcps queues delete ... --force)"
        )
    answer, parked = store._queues.delete(QueueDeleteRequest(r.queue))
    store._reply(call, answer)
    for waiting in parked:
        store._fail(
            waiting,
            AlreadyClosedError(
                f"queue {r.queue!r} was deleted by an administrator; "
                "its pending elements were discarded"
            ),
        )
    if answer.existed:
        _log.info(
            "queue %r deleted by an administrator%s: %d element(s) discarded",
            r.queue,
            " (forced)" if r.force else "",
            answer.discarded,
        )


# -- maps ------------------------------------------------------------------------------------


def _on_describe_maps(store: Store, call: _Call[DescribeMapsRequest]) -> None:
    store._reply(call, MapsReport(tuple(store._maps.reports(call.request.map))))


def _on_delete_map(store: Store, call: _Call[DeleteMapRequest]) -> None:
    dropped = drop_map(store, call.request.map)
    store._reply(call, dropped)
    if dropped.existed:
        _log.info("map %r dropped by an administrator", call.request.map)


#: Handlers of every store (registered in ``Store._HANDLERS``).
ADMIN_OBJECT_HANDLERS: dict[int, Any] = {
    DescribeDurablesRequest.op: _on_describe_durables,
    DeleteDurableRequest.op: _on_delete_durable,
    ResetDurableRequest.op: _on_reset_durable,
    DescribeQueuesRequest.op: _on_describe_queues,
    DeleteQueueRequest.op: _on_delete_queue,
    DescribeMapsRequest.op: _on_describe_maps,
    DeleteMapRequest.op: _on_delete_map,
}
