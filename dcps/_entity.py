"""The common shape of every DCPS entity: an owned Cyclone entity, children, close."""

from __future__ import annotations

import enum
import threading
from types import TracebackType
from typing import Any, Self, TypeVar

from dcps._cyclone.qos_bridge import apply_qos
from dcps._cyclone.retcode import cyclone_call
from dcps._status import from_cyclone
from idl._errors import AlreadyClosedError
from idl._public import show_as

S = TypeVar("S")


class EntityState(enum.Enum):
    """Life of an entity: usable until closed, then never again."""

    OPEN = "open"
    CLOSED = "closed"


class Entity:
    """Base of DomainParticipant, Topic, Publisher, Subscriber, DataWriter, DataReader.

    An entity owns one Cyclone entity and its dcps children; ``close()`` closes
    the children first, then deletes the Cyclone entity. Entities are context
    managers. Any use after ``close()`` raises :class:`AlreadyClosedError`.

    Between the entities of the core, one entity uses another only through its
    public API and :attr:`handle` (its Cyclone entity); parents and children
    meet in the hooks declared here (``_check_open``, ``_follow``). Readers and
    conditions meet through ``dcps._watched`` and ``ReadCondition.selection``.
    """

    _cyclone: Any
    _qos: Any

    def __init__(self, parent: Entity | None) -> None:
        self._state = EntityState.OPEN
        self._children: list[Entity] = []
        self._parent = parent
        self._lock = threading.RLock()
        if parent is not None:
            parent._check_open()

    def _adopted(self) -> None:
        """Called last in a constructor: only a fully created entity joins its parent."""
        if self._parent is not None:
            self._parent._children.append(self)

    # -- lifecycle -----------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called (on this entity or a parent)."""
        return self._state is EntityState.CLOSED

    def _check_open(self) -> None:
        if self._state is EntityState.CLOSED:
            raise AlreadyClosedError(f"{self._describe()} is closed")

    def _describe(self) -> str:
        return type(self).__name__

    def close(self) -> None:
        """Close this entity and everything created from it. Idempotent."""
        with self._lock:
            if self._state is EntityState.CLOSED:
                return
            for child in list(self._children):
                child.close()
            self._on_close()
            self._state = EntityState.CLOSED
            cyclone = getattr(self, "_cyclone", None)
            if cyclone is not None:
                # The binding deletes in __del__; calling it now deletes at once
                # and makes the later garbage-collection call a no-op.
                cyclone.__del__()
            self._leave_parent()

    def _leave_parent(self) -> None:
        """Stop being a child of the parent (closing, or closing before it)."""
        parent, self._parent = self._parent, None
        if parent is not None and self in parent._children:
            parent._children.remove(self)

    def _on_close(self) -> None:
        """Hook for subclasses: release what they own before the Cyclone entity goes."""

    def __enter__(self) -> Self:
        self._check_open()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def handle(self) -> Any:
        """The Cyclone DDS entity behind this one (a ``cyclonedds`` binding object).

        As rclpy's ``handle``: what the core's modules pass to Cyclone when they
        use another entity (the parent of a new entity, a wait set's attachment,
        a status mask), and a way to the binding for what dcps does not wrap
        (e.g. ``cyclonedds.builtin.BuiltinDataReader(participant.handle, ...)``).
        It changes when a partition change re-creates the entity underneath.
        Raises :class:`AlreadyClosedError` once the entity is closed.
        """
        if self._state is EntityState.CLOSED:
            self._check_open()
        return self._cyclone

    def _follow(self, parent_handle: Any) -> None:
        """Hook: the parent's Cyclone entity was re-created as ``parent_handle`` (its
        partitions changed). Entities that live on it re-create their own there and
        call :meth:`_rebind_children`; the default is for entities that need not."""

    def _rebind_children(self, handle: Any) -> None:
        """Tell every child that this entity's Cyclone entity is now ``handle``."""
        for child in list(self._children):
            child._follow(handle)

    # -- common operations ---------------------------------------------------
    @property
    def instance_handle(self) -> int:
        """This entity's instance handle (as peers see it in matched statuses)."""
        self._check_open()
        with cyclone_call(f"get instance handle of {self._describe()}"):
            # the binding returns handles signed; DDS handles are uint64
            return int(self._cyclone.get_instance_handle()) & ((1 << 64) - 1)

    @property
    def guid(self) -> str:
        """This entity's globally unique id."""
        self._check_open()
        with cyclone_call(f"get guid of {self._describe()}"):
            return str(self._cyclone.get_guid())

    def set_qos(self, qos: Any) -> None:
        """Change this entity's QoS: only changeable policies may differ from the current ones."""
        self._check_open()
        self._qos = apply_qos(self._describe(), self._cyclone, self._qos, qos)

    def _status(self, getter: str, cls: type[S]) -> S:
        """A communication status, read (and its change counts reset) from Cyclone."""
        self._check_open()
        with cyclone_call(f"{getter} on {self._describe()}"):
            value: S = from_cyclone(cls, getattr(self._cyclone, getter)())
            return value


show_as("dcps", Entity)
