"""Conditions and wait sets: block until data or a status change is there.

Cyclone parents wait sets and guard conditions to a participant, so dcps'
``WaitSet`` and ``GuardCondition`` take the participant they serve.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs
from cyclonedds.core import DDSException
from cyclonedds.core import GuardCondition as CycloneGuard
from cyclonedds.core import QueryCondition as CycloneQuery
from cyclonedds.core import ReadCondition as CycloneRead
from cyclonedds.core import WaitSet as CycloneWaitSet

from dcps._cyclone.binding import entity_ref
from dcps._cyclone.retcode import cyclone_call, error_for
from dcps._entity import Entity
from dcps._participant import DomainParticipant
from dcps._sample import ANY_STATE, InstanceState, SampleState, ViewState, state_mask
from dcps._status import StatusKind
from dcps._timeout import INFINITE_NS, Timeout, timeout_ns
from dcps._watched import Watched, WatchedReader
from idl._errors import BadParameterError, DcpsError, DcpsTimeoutError, PreconditionNotMetError
from idl._public import show_as

if TYPE_CHECKING:  # annotations only: the readers and writers import this module
    from dcps._reader import DataReader
    from dcps._writer import DataWriter


@attrs.frozen(slots=True)
class ReaderSelection:
    """What a read or take through a :class:`ReadCondition` selects: the reader's
    whole view of the condition (``ReadCondition.selection``), one immutable value,
    replaced when the condition is re-created or its query parameters change."""

    #: The reader the condition belongs to: read/take refuse another reader's.
    reader: WatchedReader
    #: The Cyclone condition's entity handle, read or taken through (plain readers).
    ref: int
    #: The sample/view/instance state mask.
    mask: int
    #: The query's predicate, which a SubscriptionKeys reader applies itself; or None.
    predicate: Callable[[Any], bool] | None
    #: Sort key of the query's ORDER BY, applied to what read/take return; or None.
    order: Callable[[Any], Any] | None


class Condition(Entity):
    """Something a :class:`WaitSet` can wait for.

    Conditions and wait sets meet in this module only: a wait set attaches
    :meth:`_wait_targets`, keeps ``_waitsets`` of each condition it holds, and
    drains ``_keyed_reader()`` before judging a condition whose ``_pending`` is set.
    """

    _pending: Any = None  # SubscriptionKeys readers: "Cyclone holds undrained samples"
    _guard: Any = None  # SubscriptionKeys StatusConditions: "a status dcps keeps changed"

    def __init__(self, parent: Entity) -> None:
        super().__init__(parent)
        self._waitsets: list[WaitSet] = []  # the wait sets holding it (kept by WaitSet)

    def _on_close(self) -> None:
        # Leave every wait set: a StatusCondition's target is the reader or writer
        # itself, which outlives the condition and would keep waking the wait set.
        for ws in list(self._waitsets):
            with contextlib.suppress(DcpsError):  # its Cyclone entities went with their entity
                ws.detach(self)
        # the reader refreshes its conditions under this lock, maybe on Cyclone's thread
        with self._refresh_lock():
            for name in ("_pending", "_guard"):
                entity = getattr(self, name)
                if entity is not None:
                    entity.__del__()
                    setattr(self, name, None)

    def _wait_targets(self) -> list[Any]:
        """The Cyclone entities a wait set attaches to wait for this condition."""
        return [t for t in (self._trigger(), self._pending, self._guard) if t is not None]

    def _trigger(self) -> Any:
        """The Cyclone entity whose trigger is this condition's (its own, by default)."""
        return self._cyclone

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

    _predicate: Callable[[Any], bool] | None = None  # QueryCondition's
    _filter: Any = None  # QueryCondition's SQL expression, if it has one

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
        self._keyed = reader._keyed  # fixed for the reader's life
        self._cyclone: Any = self._create(reader.handle)
        self._selection = self._select()
        self._adopted()

    @property
    def selection(self) -> ReaderSelection:
        """What read/take through this condition select (for the reader; internal).

        Raises :class:`AlreadyClosedError` once the condition is closed.
        """
        self._check_open()
        return self._selection

    def _select(self) -> ReaderSelection:
        query = self._filter
        order = query.sort_key if query is not None and query.order_by else None
        return ReaderSelection(
            self._reader, entity_ref(self._cyclone), self.mask, self._predicate, order
        )

    def _follow(self, parent_handle: Any) -> None:
        """The reader's Cyclone reader was re-created as ``parent_handle``: move there."""
        self._rebind(parent_handle)

    def _rebind(self, reader_handle: Any) -> None:
        """Re-create the Cyclone condition on ``reader_handle``; stay attached."""
        old = self._cyclone
        self._cyclone = self._create(reader_handle)
        self._selection = self._select()
        for ws in self._waitsets:
            with cyclone_call("re-attach condition"):
                for target in self._wait_targets():
                    ws.handle.attach(target)
        old.__del__()

    def _create(self, reader_handle: Any) -> Any:
        if self._keyed is not None:
            return self._create_keyed(reader_handle)
        with cyclone_call("create ReadCondition"):
            return CycloneRead(reader_handle, self.mask)

    def _create_keyed(self, reader_handle: Any) -> Any:
        # A SubscriptionKeys reader keeps its samples in dcps: a guard condition
        # that the reader sets whenever its cache changes stands in, and a Cyclone
        # read condition on "anything not yet drained" wakes wait sets so that
        # WaitSet.wait drains (no Python runs on Cyclone's threads per sample).
        with cyclone_call("create ReadCondition"):
            guard = CycloneGuard(self._participant().handle)
            old_pending = self._pending
            self._pending = CycloneRead(reader_handle, ANY_STATE)
        if old_pending is not None:
            old_pending.__del__()
        self._cyclone = guard
        with self._refresh_lock():
            self._refresh()
        return guard

    def _refresh(self) -> None:
        keyed = self._keyed
        if keyed is not None and not self.closed:
            self._cyclone.set(keyed.matches(self.mask, self._predicate))

    @property
    def triggered(self) -> bool:
        """Whether the reader holds samples this condition selects."""
        self._check_open()
        if self._keyed is not None:
            return self._keyed.matches(self.mask, self._predicate)
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

    _predicate: Callable[[Any], bool]

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

            self._filter = QueryExpression(query, reader.topic.data_type, tuple(parameters))
            self._predicate = self._filter.matches
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

    def _create(self, reader_handle: Any) -> Any:
        if self._keyed is not None:
            return self._create_keyed(reader_handle)
        # Cyclone calls the predicate on the receive path; read() goes through it too.
        with cyclone_call("create QueryCondition"):
            return CycloneQuery(reader_handle, self.mask, lambda s: self._predicate(s))

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
        self._rebind(self._reader.handle)


class GuardCondition(Condition):
    """A condition the application triggers by hand (e.g. to wake a waiting thread)."""

    def __init__(self, participant: DomainParticipant) -> None:
        if not isinstance(participant, DomainParticipant):
            raise BadParameterError("a GuardCondition is created on a DomainParticipant")
        super().__init__(participant)
        self._owner = participant
        with cyclone_call("create GuardCondition"):
            self._cyclone: Any = CycloneGuard(participant.handle)
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
        # the Cyclone entity itself is what a wait set attaches (and what gets the mask)
        self._cyclone = None
        self._target: Any = entity.handle
        if isinstance(entity, WatchedReader):
            # Where Cyclone's DATA_AVAILABLE cannot serve, the reader keeps its own
            # and sets this guard: while dcps' data listener consumes Cyclone's
            # status, and on a SubscriptionKeys reader, whose data (and rejections:
            # Cyclone rejects nothing there) live in dcps. For the latter, as for a
            # ReadCondition, a read condition on undrained samples wakes wait sets
            # so that they drain first.
            with cyclone_call("create StatusCondition"):
                self._guard = CycloneGuard(self._participant().handle)
                if entity._keyed is not None:
                    self._pending = CycloneRead(self._target, ANY_STATE)
        self.set_enabled_statuses(enabled_statuses)
        self._adopted()
        self._refresh_locked()  # a refresh between the first one and _adopted() missed us

    def _follow(self, parent_handle: Any) -> None:
        """The entity's Cyclone entity was re-created as ``parent_handle``: watch that."""
        self._target = parent_handle
        old_pending = self._pending
        if old_pending is not None:
            with cyclone_call("re-create StatusCondition"):
                self._pending = CycloneRead(parent_handle, ANY_STATE)
            old_pending.__del__()
        self.set_enabled_statuses(self.enabled_statuses)
        for ws in self._waitsets:
            with cyclone_call("re-attach condition"):
                ws.handle.attach(parent_handle)  # the guard stays attached
                if self._pending is not None:
                    ws.handle.attach(self._pending)

    def set_enabled_statuses(self, statuses: StatusKind) -> None:
        """Choose the statuses this condition (and the entity's wait-set trigger) reacts to."""
        self._check_open()
        self.enabled_statuses = StatusKind(statuses)
        with cyclone_call("set status mask"):
            self._target.set_status_mask(int(self.enabled_statuses))
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
            return bool(self._target.get_status_changes() & int(self.enabled_statuses))

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

    def _trigger(self) -> Any:
        return self._target

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
            self._cyclone: Any = CycloneWaitSet(participant.handle)
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
            for target in condition._wait_targets():
                self._cyclone.attach(target)  # Cyclone ignores one already attached
        self._conditions.append(condition)
        condition._waitsets.append(self)

    def detach(self, condition: Condition) -> None:
        """Stop waiting for ``condition``."""
        self._check_open()
        if condition not in self._conditions:
            raise PreconditionNotMetError("that condition is not attached to this WaitSet")
        # The condition's Cyclone entities that no other attached condition also uses
        # (StatusConditions of one reader share it) go with it.
        mine = [] if condition.closed else condition._wait_targets()
        self._conditions.remove(condition)
        condition._waitsets.remove(self)
        shared = {id(t) for c in self._conditions for t in c._wait_targets()}
        with cyclone_call("detach condition"):
            for target in mine:
                if id(target) not in shared:
                    self._cyclone.detach(target)

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


show_as("dcps", Condition, GuardCondition, QueryCondition, ReadCondition, StatusCondition, WaitSet)
