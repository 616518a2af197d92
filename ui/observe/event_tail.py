"""Bridge from an event feed (worker threads) to the GUI thread, batched.

The feed is the engine's ``EventBus`` or, for an attached agent, the remote reader's follower
(:class:`~engine.reader.EventFeed`); either calls back on the thread that produced the event.
The callback only appends to a locked list and, for the first event of a batch, emits a Qt
signal; the signal crosses to the GUI thread as a queued connection, where a single-shot timer
coalesces everything that arrived in the next ``interval_ms`` (default 80 ms) into one
:attr:`EventTail.arrived` delivery. So an ingest of thousands of events costs the GUI ~12
deliveries per second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer, Slot
from PySide6.QtCore import Signal as QtSignal

from engine import Event, EventFeed

__all__ = ["EventTail"]


class EventTail(QObject):
    """Live events of one feed, delivered on the GUI thread in batches.

    Signals:
        arrived(list): Events (oldest first) that were emitted since the last delivery.
    """

    arrived = QtSignal(list)
    _wake = QtSignal()

    def __init__(self, interval_ms: int = 80, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._accept: Callable[[Event], bool] | None = None
        self._lock = threading.Lock()
        self._pending: list[Event] = []
        self._scheduled = False
        self._unsubscribe: Callable[[], None] | None = None
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.flush)
        self._wake.connect(self._on_wake, Qt.ConnectionType.QueuedConnection)

    def attach(self, feed: EventFeed | None, *,
               accept: Callable[[Event], bool] | None = None) -> None:
        """Follow ``feed`` (None: follow nothing). Events not yet delivered are dropped.

        Args:
            accept: Picks the events to deliver (None: every one). It is called on the
                emitting thread: an event it refuses costs that thread one call, the GUI
                thread nothing.
        """
        self._accept = accept
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        with self._lock:
            self._pending.clear()
            self._scheduled = False
        if feed is not None:
            self._unsubscribe = feed.subscribe(self._on_event)

    def _on_event(self, event: Event) -> None:  # any thread
        if self._accept is not None and not self._accept(event):
            return
        with self._lock:
            self._pending.append(event)
            first = not self._scheduled
            self._scheduled = True
        if first:
            self._wake.emit()

    @Slot()
    def _on_wake(self) -> None:  # GUI thread (queued from the emitting thread)
        self._timer.start()

    def flush(self) -> None:
        """Deliver what has arrived (GUI thread)."""
        with self._lock:
            batch = self._pending
            self._pending = []
            self._scheduled = False
        if batch:
            self.arrived.emit(batch)
