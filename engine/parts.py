"""The engine's parts, built once in one place, and the one way a service is built on first use.

:class:`EngineParts` holds what every service of one open store shares: the store, the ledger,
the event bus, the clock, the configuration, the embedding model, the write lock and the edit
history. :meth:`EngineParts.build` makes the write lock and the edit history, so no two
services can end up with different ones. Services (lifecycle, layers, ingest, retrieval) are
given the parts they use, not the :class:`~engine.memory_engine.MemoryEngine` facade.

:class:`Lazy` is how the facade builds a service on first use: once, under the slot's own lock,
and droppable (``reset``) when the service must be rebuilt or released.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Generic, TypeVar

from engine.history import EditHistory

if TYPE_CHECKING:
    from engine.clock import Clock
    from engine.config import EngineConfig
    from engine.embedding import Embedder
    from engine.events import EventBus
    from engine.ledger import Ledger
    from engine.store import MemoryStore

__all__ = ["EngineParts", "Lazy"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True, eq=False)
class EngineParts:
    """What the services of one open store share.

    Attributes:
        store: The record store (Chroma and the columnar view).
        ledger: The SQLite ledger beside it.
        events: The event bus (subscribers and the ledger's event log).
        clock: The clock every timestamp comes from.
        config: The engine configuration.
        embedder: The embedding model (None: the Jaccard path only).
        write_lock: Serializes every write to the store and its ledger rows.
        history: The edit history (``edits`` table).
    """

    store: MemoryStore
    ledger: Ledger
    events: EventBus
    clock: Clock
    config: EngineConfig
    embedder: Embedder | None
    write_lock: threading.RLock
    history: EditHistory

    @classmethod
    def build(cls, store: MemoryStore, ledger: Ledger, *, events: EventBus, clock: Clock,
              config: EngineConfig, embedder: Embedder | None) -> EngineParts:
        """The parts of one store: a new write lock and the ledger's edit history."""
        return cls(store, ledger, events, clock, config, embedder, threading.RLock(),
                   EditHistory(ledger, clock))

    @property
    def model_name(self) -> str:
        """The embedding model's name ("" without one): what new vectors are stamped with."""
        return self.embedder.model_name if self.embedder is not None else ""


class Lazy(Generic[T]):
    """A slot for a value built on first use, exactly once even when threads race for it.

    The builder is passed to :meth:`get`, not kept: a slot holds no reference back to the
    object that owns it, so a closed engine is freed by reference counting alone.
    """

    def __init__(self) -> None:
        self._value: T | None = None
        # Re-entrant: a build may read another part that is built the same way.
        self._lock = threading.RLock()

    def get(self, build: Callable[[], T]) -> T:
        """The value, built by ``build()`` now when it was not yet (double-checked under the
        lock, so two threads never build two)."""
        value = self._value
        if value is None:
            with self._lock:
                value = self._value
                if value is None:
                    value = build()
                    self._value = value
        return value

    def peek(self) -> T | None:
        """The value if it was built, else None (builds nothing)."""
        return self._value

    def reset(self) -> T | None:
        """Forget the value (the next :meth:`get` builds a new one); returns the old one."""
        with self._lock:
            value, self._value = self._value, None
        return value
