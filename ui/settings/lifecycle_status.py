"""The open store's lifecycle scheduler, its status-bar line and its Settings toggle.

While a writable store is open, its :class:`~engine.lifecycle.LifecycleScheduler` runs expiry,
compaction, retention caps and pruning on its interval in its own thread (issue 23; see
docs/gui.md). The status bar shows the last run (``Lifecycle: 3 expired, 1 compacted · 2 min
ago``), or that it is off or waiting for its first run; Settings → Run Lifecycle
Automatically is the off switch, remembered in the preferences.

The scheduler's thread reports a finished run through a queued signal; starting the scheduler
is quick, stopping it waits for a run in progress, so it is done on a worker.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QLabel, QWidget

from engine import LifecycleRun, LifecycleScheduler, MemoryEngine
from ui.shared.format import relative_time
from ui.shared.tasks import TaskRunner, spawn

__all__ = ["LifecycleStatus"]

REFRESH_MS = 30_000  # how often "2 min ago" is brought up to date


class LifecycleStatus(QObject):
    """Owns the scheduler of the open store; shows and switches it.

    Args:
        runner: The app's task runner (stopping a scheduler waits for its run).
        enabled: The remembered position of the off switch.
        parent: The window (the label and action are its children).

    Signals:
        ran(object): A :class:`LifecycleRun` finished (on the GUI thread).
        toggled(bool): The person switched scheduled runs on or off.
    """

    ran = QtSignal(object)
    toggled = QtSignal(bool)
    _finished = QtSignal(object)  # emitted on the scheduler's thread, delivered queued

    def __init__(self, runner: TaskRunner, *, enabled: bool, parent: QWidget) -> None:
        super().__init__(parent)
        self._runner = runner
        self._enabled = enabled
        self._scheduler: LifecycleScheduler | None = None
        self._allowed = True  # the open engine's MEMORY_LIFECYCLE_ENABLED
        self.label = QLabel("", parent)
        self.label.setObjectName("lifecycle_status")
        self.action = QAction("Run &Lifecycle Automatically", parent)
        self.action.setCheckable(True)
        self.action.setChecked(enabled)
        self.action.setToolTip("Expire, compact and keep the retention caps of the open store "
                               "on a schedule (MEMORY_LIFECYCLE_INTERVAL_MS)")
        self.action.toggled.connect(self._on_action_toggled)
        self._finished.connect(self._on_finished)
        self._timer = QTimer(self)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self.refresh()

    @property
    def scheduler(self) -> LifecycleScheduler | None:
        """The open store's scheduler (None without a writable store)."""
        return self._scheduler

    @property
    def enabled(self) -> bool:
        """The off switch's position."""
        return self._enabled

    async def set_engine(self, engine: MemoryEngine | None) -> None:
        """Stop the scheduler of the store shown so far and start one for ``engine``.

        A read-only engine (a store another process writes, a foreign collection) gets none:
        its writer keeps it.
        """
        old, self._scheduler = self._scheduler, None
        if old is not None:
            await self._runner.run(old.stop)
        # MEMORY_LIFECYCLE_ENABLED=off wins over the toggle (docs/retrieval.md "Lifecycle")
        self._allowed = engine is None or engine.config.memory.lifecycle_enabled
        self.action.setEnabled(self._allowed)
        if engine is not None and not engine.read_only:
            scheduler = LifecycleScheduler.for_engine(engine)
            scheduler.subscribe(self._finished.emit)
            self._scheduler = scheduler
            if self._enabled and self._allowed:
                scheduler.start()
        if self._scheduler is not None:
            self._timer.start()
        else:
            self._timer.stop()
        self.refresh()

    def refresh(self) -> None:
        """Bring the status line up to date (the relative time of the last run)."""
        scheduler = self._scheduler
        self.label.setVisible(scheduler is not None)
        if scheduler is None:
            self.label.setText("")
            return
        run = scheduler.last_run
        now = scheduler.clock.now()
        if not self._allowed:
            text = "Lifecycle: off"
            tip = "Scheduled expiry, compaction and retention are off: MEMORY_LIFECYCLE_ENABLED"
        elif not self._enabled or not scheduler.enabled:
            text = "Lifecycle: off"
            tip = "Scheduled expiry, compaction and retention are off (Settings menu)"
        elif run is None:
            text = f"Lifecycle: first run {relative_time(scheduler.next_due, now_ms=now)}"
            tip = "Expiry, compaction and retention caps run on a schedule"
        else:
            text = f"Lifecycle: {run.summary()} · {relative_time(run.finished_at, now_ms=now)}"
            tip = "\n".join([f"Last run: {run.remaining} records remain", *run.errors])
        self.label.setText(text)
        self.label.setToolTip(tip)

    def _on_finished(self, run: LifecycleRun) -> None:
        self.refresh()
        self.ran.emit(run)

    def _on_action_toggled(self, checked: bool) -> None:
        self._enabled = checked
        self.toggled.emit(checked)
        spawn(self._apply_enabled(checked))

    async def _apply_enabled(self, enabled: bool) -> None:
        scheduler = self._scheduler
        if scheduler is not None and self._allowed:
            await self._runner.run(scheduler.set_enabled, enabled)
        self.refresh()
