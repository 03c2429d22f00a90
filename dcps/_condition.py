"""Conditions and wait sets: block until data or a status change is there.

Cyclone parents wait sets and guard conditions to a participant, so dcps'
``WaitSet`` and ``GuardCondition`` take the participant they serve.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from cyclonedds.core import DDSException
from cyclonedds.core import GuardCondition as CycloneGuard
from cyclonedds.core import QueryCondition as CycloneQuery
from cyclonedds.core import ReadCondition as CycloneRead
from cyclonedds.core import WaitSet as CycloneWaitSet

from dcps._cyclone.retcode import cyclone_call, error_for
from dcps._entity import Entity
from dcps._participant import DomainParticipant
from dcps._sample import ANY_STATE, InstanceState, SampleState, ViewState, state_mask
from dcps._status import StatusKind
from dcps._timeout import INFINITE_NS, Timeout, timeout_ns
from dcps._watched import Watched, WatchedReader
from idl._errors import BadParameterError, DcpsTimeoutError, PreconditionNotMetError
from idl._public import show_as

if TYPE_CHECKING:  # annotations only: the readers and writers import this module
    from dcps._reader import DataReader
    from dcps._writer import DataWriter


class Condition(Entity):
    """Something a :class:`WaitSet` can wait for."""

    _pending: Any = None  # SubscriptionKeys readers: "Cyclone holds undrained samples"
    _guard: Any = None  # SubscriptionKeys StatusConditions: "a status dcps keeps changed"

    def __init__(self, parent: Entity) -> None:
        super().__init__(parent)
        self._waitsets: list[WaitSet] = []

    def _on_close(self) -> None:
        # Leave every wait set: a StatusCondition's target is the reader or writer
        # itself, which outlives the condition and would keep waking the wait set.
        for ws in list(self._waitsets):
            for target in ws._own_targets(self) if not ws.closed else ():
                with contextlib.suppress(Exception):  # already gone with its entity
                    ws._cyclone.detach(target)
            ws._forget(self)
        # the reader refreshes its conditions under this lock, maybe on Cyclone's thread
        with self._refresh_lock():
            for name in ("_pending", "_guard"):
                entity = getattr(self, name)
                if entity is not None:
                    entity.__del__()
                    setattr(self, name, None)

    def _rebind(self) -> None:
        """Follow the reader onto its re-created Cyclone reader; stay attached."""
        old = self._cyclone
        self._cyclone = self._create()  # type: ignore[attr-defined]
        for ws in self._waitsets:
            with cyclone_call("re-attach condition"):
                for target in _targets(self):
                    ws._cyclone.attach(target)
        old.__del__()

    @property
    def triggered(self) -> bool:
        """Whether the condition holds now."""
        self._check_open()
        with cyclone_call(f"check {self._describe()}"):
            return bool(self._cyclone.is_triggered())

    def _participant(self) -> DomainParticipant:
        raise NotImplementedError

    def _keyed_reader(self) -> DataReader[Any] | None:
        """The SubscriptionKeys reader a wait set drains before judging this condition."""
        return None

    def _refresh_lock(self) -> Any:
        """The lock its reader refreshes this condition's trigger under, if any."""
        parent = self._parent
        return (
            parent._conditions_lock()
            if isinstance(parent, WatchedReader)
            else contextlib.nullcontext()
        )


class ReadCondition(Condition):
    """Holds while ``reader`` has samples in the given states; also a read/take filter."""

    def __init__(
        self,
        reader: DataReader[Any],
        *,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
    ) -> None:
        if not isinstance(reader, WatchedReader):
            raise BadParameterError(
                f"a ReadCondition needs a DataReader, got {type(reader).__name__}"
            )
        self.mask = state_mask(sample_states, view_states, instance_states)
        super().__init__(reader)
        self._reader = reader
        self._cyclone: Any = self._create()
        self._adopted()

    def _create(self) -> Any:
        if self._reader._keyed is not None:
            return self._create_keyed()
        with cyclone_call("create ReadCondition"):
            return CycloneRead(self._reader._cyclone, self.mask)

    def _create_keyed(self) -> Any:
        # A SubscriptionKeys reader keeps its samples in dcps: a guard condition
        # that the reader sets whenever its cache changes stands in, and a Cyclone
        # read condition on "anything not yet drained" wakes wait sets so that
        # WaitSet.wait drains (no Python runs on Cyclone's threads per sample).
        with cyclone_call("create ReadCondition"):
            guard = CycloneGuard(self._participant()._cyclone)
            old_pending = getattr(self, "_pending", None)
            self._pending = CycloneRead(self._reader._cyclone, ANY_STATE)
        if old_pending is not None:
            old_pending.__del__()
        self._cyclone = guard
        with self._refresh_lock():
            self._refresh()
        return guard

    def _refresh(self) -> None:
        keyed = self._reader._keyed
        if keyed is not None and not self.closed:
            self._cyclone.set(keyed.matches(self.mask, getattr(self, "_predicate", None)))

    @property
    def triggered(self) -> bool:
        """Whether the reader holds samples this condition selects."""
        self._check_open()
        if self._reader._keyed is not None:
            return self._reader._keyed.matches(self.mask, getattr(self, "_predicate", None))
        with cyclone_call(f"check {self._describe()}"):
            return bool(self._cyclone.is_triggered())

    @property
    def reader(self) -> DataReader[Any]:
        """The reader this condition looks at."""
        return self._reader

    def _keyed_reader(self) -> DataReader[Any] | None:
        return self._reader if self._pending is not None else None

    def _participant(self) -> DomainParticipant:
        return self._reader.topic.participant


class QueryCondition(ReadCondition):
    """A ReadCondition that also requires samples to satisfy a query expression.

    ``query`` is an SQL expression over the topic type's fields (DDS 1.4
    Annex B, with ``%n`` parameters, and an optional ``ORDER BY`` that orders
    what read/take return through this condition), or a Python predicate.
    """

    def __init__(
        self,
        reader: DataReader[Any],
        query: str | Callable[[Any], bool],
        parameters: Sequence[str] = (),
        *,
        sample_states: SampleState = SampleState.ANY,
        view_states: ViewState = ViewState.ANY,
        instance_states: InstanceState = InstanceState.ANY,
    ) -> None:
        if isinstance(query, str):
            # late: the SQL grammar loads only once a query is used (keeps plain
            # conditions light); dcps.sql imports nothing of the core
            from dcps.sql._filter import QueryExpression

            self._filter: Any = QueryExpression(query, reader.topic.data_type, tuple(parameters))
            self._predicate: Callable[[Any], bool] = self._filter.matches
        elif callable(query):
            if parameters:
                raise BadParameterError("parameters only apply to an SQL query expression")
            self._filter = None
            self._predicate = query
        else:
            raise BadParameterError(f"query must be an SQL string or a callable, got {query!r}")
        super().__init__(
            reader,
            sample_states=sample_states,
            view_states=view_states,
            instance_states=instance_states,
        )

    def _create(self) -> Any:
        if self._reader._keyed is not None:
            return self._create_keyed()
        # Cyclone calls the predicate on the receive path; read() goes through it too.
        with cyclone_call("create QueryCondition"):
            return CycloneQuery(self._reader._cyclone, self.mask, lambda s: self._predicate(s))

    @property
    def expression(self) -> str | None:
        """The SQL query expression, if the query is one."""
        return None if self._filter is None else self._filter.expression

    @property
    def parameters(self) -> tuple[str, ...]:
        """The current query parameters."""
        return () if self._filter is None else tuple(self._filter.parameters)

    def set_parameters(self, parameters: Sequence[str]) -> None:
        """Change the ``%n`` parameters of the query (checked against the type)."""
        self._check_open()
        if self._filter is None:
            raise PreconditionNotMetError("this QueryCondition has no SQL expression")
        self._filter = self._filter.with_parameters(tuple(parameters))
        self._predicate = self._filter.matches
        # Cyclone caches each sample's match when it arrives: re-create the condition
        # so samples already in the reader are judged by the new parameters.
        self._rebind()


class GuardCondition(Condition):
    """A condition the application triggers by hand (e.g. to wake a waiting thread)."""

    def __init__(self, participant: DomainParticipant) -> None:
        if not isinstance(participant, DomainParticipant):
            raise BadParameterError("a GuardCondition is created on a DomainParticipant")
        super().__init__(participant)
        self._owner = participant
        with cyclone_call("create GuardCondition"):
            self._cyclone: Any = CycloneGuard(participant._cyclone)
        self._adopted()

    def set_trigger_value(self, value: bool = True) -> None:
        """Trigger (or reset) the condition."""
        self._check_open()
        with cyclone_call("set GuardCondition"):
            self._cyclone.set(bool(value))

    @property
    def triggered(self) -> bool:
        """Whether the condition is triggered."""
        self._check_open()
        with cyclone_call("read GuardCondition"):
            return bool(self._cyclone.read())

    def _participant(self) -> DomainParticipant:
        return self._owner


class StatusCondition(Condition):
    """Holds while ``entity`` has a changed status among ``enabled_statuses``.

    Cyclone keeps one status mask per entity: with several StatusConditions on
    one entity, the statuses of the one enabled last decide what wakes a
    WaitSet. Use one condition with every status of interest.
    """

    def __init__(
        self, entity: DataReader[Any] | DataWriter[Any], enabled_statuses: StatusKind
    ) -> None:
        if not isinstance(entity, Watched):
            raise BadParameterError("a StatusCondition watches a DataReader or DataWriter")
        super().__init__(entity)
        self._entity = entity
        self._cyclone = None  # the Cyclone entity itself is what a wait set attaches
        if isinstance(entity, WatchedReader):
            # Where Cyclone's DATA_AVAILABLE cannot serve, the reader keeps its own
            # and sets this guard: while dcps' data listener consumes Cyclone's
            # status, and on a SubscriptionKeys reader, whose data (and rejections:
            # Cyclone rejects nothing there) live in dcps. For the latter, as for a
            # ReadCondition, a read condition on undrained samples wakes wait sets
            # so that they drain first.
            with cyclone_call("create StatusCondition"):
                self._guard = CycloneGuard(self._participant()._cyclone)
                if entity._keyed is not None:
                    self._pending = CycloneRead(entity._cyclone, ANY_STATE)
        self.set_enabled_statuses(enabled_statuses)
        self._adopted()
        self._refresh_locked()  # a refresh between the first one and _adopted() missed us

    def _rebind(self) -> None:
        old_pending = self._pending
        if old_pending is not None:
            with cyclone_call("re-create StatusCondition"):
                self._pending = CycloneRead(self._entity._cyclone, ANY_STATE)
            old_pending.__del__()
        self.set_enabled_statuses(self.enabled_statuses)
        for ws in self._waitsets:
            with cyclone_call("re-attach condition"):
                ws._cyclone.attach(self._attach_target())  # the guard stays attached
                if self._pending is not None:
                    ws._cyclone.attach(self._pending)

    def set_enabled_statuses(self, statuses: StatusKind) -> None:
        """Choose the statuses this condition (and the entity's wait-set trigger) reacts to."""
        self._check_open()
        self.enabled_statuses = StatusKind(statuses)
        with cyclone_call("set status mask"):
            self._entity._cyclone.set_status_mask(int(self.enabled_statuses))
        self._refresh_locked()

    @property
    def triggered(self) -> bool:
        """Whether one of the enabled statuses changed since it was last read."""
        self._check_open()
        if self._pending is not None:
            self._entity._drain()  # type: ignore[union-attr]
        if self._guard is not None and self._reader_statuses():
            return True
        with cyclone_call("get status changes"):
            return bool(self._entity._cyclone.get_status_changes() & int(self.enabled_statuses))

    def _reader_statuses(self) -> bool:
        """Whether a status the reader keeps itself (not Cyclone) is enabled and changed."""
        reader = self._entity
        assert isinstance(reader, WatchedReader)
        enabled, keyed = self.enabled_statuses, reader._keyed
        return bool(
            (enabled & StatusKind.DATA_AVAILABLE and reader._data_available)
            or (enabled & StatusKind.SAMPLE_REJECTED and keyed and keyed.rejected_changed)
        )

    def _refresh(self) -> None:
        """Set the guard from the reader's own statuses; callers hold ``_refresh_lock()``."""
        guard = self._guard
        if guard is not None and not self.closed:
            guard.set(self._reader_statuses())

    def _refresh_locked(self) -> None:
        with self._refresh_lock():
            self._refresh()

    def _keyed_reader(self) -> DataReader[Any] | None:
        return self._entity if self._pending is not None else None  # type: ignore[return-value]

    def _attach_target(self) -> Any:
        return self._entity._cyclone

    def _participant(self) -> DomainParticipant:
        return self._entity.topic.participant


class WaitSet(Entity):
    """Blocks a thread until one of its attached conditions holds."""

    def __init__(self, participant: DomainParticipant) -> None:
        if not isinstance(participant, DomainParticipant):
            raise BadParameterError("a WaitSet is created on a DomainParticipant")
        super().__init__(participant)
        self._owner = participant
        self._conditions: list[Condition] = []
        with cyclone_call("create WaitSet"):
            self._cyclone: Any = CycloneWaitSet(participant._cyclone)
        self._adopted()

    def _on_close(self) -> None:
        for condition in self._conditions:
            if self in condition._waitsets:
                condition._waitsets.remove(self)
        self._conditions.clear()

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The attached conditions."""
        return tuple(c for c in self._conditions if not c.closed)

    def attach(self, condition: Condition) -> None:
        """Wake :meth:`wait` when ``condition`` holds."""
        self._check_open()
        if not isinstance(condition, Condition):
            raise BadParameterError(
                f"only conditions can be attached, got {type(condition).__name__}"
            )
        condition._check_open()
        if condition._participant() is not self._owner:
            raise BadParameterError("the condition belongs to another participant than the WaitSet")
        if condition in self._conditions:
            return
        with cyclone_call("attach condition"):
            for target in _targets(condition):
                self._cyclone.attach(target)  # Cyclone ignores one already attached
        self._conditions.append(condition)
        condition._waitsets.append(self)

    def detach(self, condition: Condition) -> None:
        """Stop waiting for ``condition``."""
        self._check_open()
        if condition not in self._conditions:
            raise PreconditionNotMetError("that condition is not attached to this WaitSet")
        if not condition.closed:
            with cyclone_call("detach condition"):
                for target in self._own_targets(condition):
                    self._cyclone.detach(target)
        self._forget(condition)

    def _own_targets(self, condition: Condition) -> list[Any]:
        """The condition's Cyclone entities that no other attached condition also uses
        (StatusConditions of one reader share it): the ones to detach with it."""
        shared = {t._ref for c in self._conditions if c is not condition for t in _targets(c)}
        return [t for t in _targets(condition) if t._ref not in shared]

    def _forget(self, condition: Condition) -> None:
        """Drop a detached (or closing) condition from the books."""
        self._conditions.remove(condition)
        condition._waitsets.remove(self)

    def wait(self, timeout: Timeout | None = None) -> list[Condition]:
        """Block until at least one attached condition holds; return those that do.

        Raises :class:`DcpsTimeoutError` if none holds within ``timeout``.
        """
        # the wake-up path of every event loop: kept to plain statements (no context
        # manager, no generator), it runs on a cold cache after each wake-up
        self._check_open()
        ns = timeout_ns(timeout)
        deadline = None if ns == INFINITE_NS else time.monotonic() + ns / 1e9
        wait = self._cyclone.wait
        remaining = ns
        while True:
            try:
                count = wait(remaining)
            except DDSException as exc:
                raise error_for(exc.code, "wait") from exc
            conditions = self._conditions
            if count and len(conditions) == 1 and conditions[0]._pending is None:
                return conditions.copy()  # what fired can only be this one's
            if count == 0:
                raise DcpsTimeoutError(f"no condition triggered within {timeout}")
            conditions = [c for c in conditions if not c.closed]
            drained = [c._keyed_reader() for c in conditions if c._pending is not None]
            for reader in dict.fromkeys(drained):
                if reader is not None:
                    reader._drain()  # SubscriptionKeys: file what arrived, then judge
            triggered = [c for c in conditions if c.triggered]
            if triggered:
                return triggered
            if deadline is not None:
                remaining = int((deadline - time.monotonic()) * 1e9)
                if remaining <= 0:
                    raise DcpsTimeoutError(f"no condition triggered within {timeout}")


def _targets(condition: Condition) -> list[Any]:
    targets = [_target(condition)]
    for extra in (condition._pending, condition._guard):
        if extra is not None:
            targets.append(extra)
    return targets


def _target(condition: Condition) -> Any:
    if isinstance(condition, StatusCondition):
        return condition._attach_target()
    return condition._cyclone


show_as("dcps", Condition, GuardCondition, QueryCondition, ReadCondition, StatusCondition, WaitSet)
