"""The open store's scheduled lifecycle in the window: status line, toggle, stop on close."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QMenu
from pytestqt.qtbot import QtBot

from engine.clock import DeterministicClock
from engine.config import MemoryConfig
from engine.memory_engine import EngineConfig, MemoryEngine
from engine.records import NewMemory
from engine.scheduler import LifecycleScheduler
from engine.store import StoreSpec
from tests.conftest import T0
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow, Preferences

MINUTE = 60_000.0


def _running(scheduler: LifecycleScheduler) -> bool:
    return scheduler.running  # read afresh (mypy would keep an earlier assert's narrowing)


def _opener(clock: DeterministicClock, config: EngineConfig | None = None
            ) -> Callable[[StoreSpec], MemoryEngine]:
    def open_engine(spec: StoreSpec) -> MemoryEngine:
        from app.wiring import forget_embedded_clients

        forget_embedded_clients()
        return MemoryEngine.open(spec, clock=clock, config=config, defer_view=True)

    return open_engine


def _store_with_an_expiring_note(path: Path, clock: DeterministicClock) -> None:
    engine = MemoryEngine.open(StoreSpec(str(path)), clock=clock)
    try:
        engine.add(NewMemory("a note that expires in a minute", expires_at=clock.now() + MINUTE))
        engine.add(NewMemory("a fact that stays"))
    finally:
        engine.close()


def test_the_status_line_shows_the_last_scheduled_run(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    clock = DeterministicClock(T0)
    _store_with_an_expiring_note(tmp_path / "store", clock)
    saved: list[Preferences] = []
    window = make_window(open_engine=_opener(clock), save_preferences=saved.append)
    assert not window.lifecycle.label.isVisible()  # no store, no lifecycle
    open_store(qtbot, window, tmp_path / "store")
    scheduler = window.lifecycle.scheduler
    assert scheduler is not None and scheduler.running
    assert window.lifecycle.label.text() == "Lifecycle: first run in 5 min"

    clock.advance(scheduler.interval_ms)
    with qtbot.waitSignal(window.lifecycle.ran, timeout=60_000) as ran:
        scheduler.wake()
    assert ran.args[0].expired == 1
    assert window.lifecycle.label.text() == "Lifecycle: 1 expired · just now"
    qtbot.waitUntil(lambda: window.count_label.text() == "1 record", timeout=30_000)
    clock.advance(2 * MINUTE)
    window.lifecycle.refresh()  # what its timer does every 30 s
    assert window.lifecycle.label.text() == "Lifecycle: 1 expired · 2 min ago"

    # Settings → Run Lifecycle Automatically: off stops the thread and is remembered
    settings_menu = next(a.menu() for a in window.menuBar().actions()
                         if a.text() == "&Settings")
    assert isinstance(settings_menu, QMenu)
    assert window.lifecycle.action in settings_menu.actions()
    window.lifecycle.action.trigger()
    # the label is refreshed once the worker that stopped the thread has returned: under load
    # the thread is seen stopped before that
    qtbot.waitUntil(lambda: not scheduler.running
                    and window.lifecycle.label.text() == "Lifecycle: off", timeout=30_000)
    qtbot.waitUntil(lambda: bool(saved) and saved[-1].lifecycle is False)
    window.lifecycle.action.trigger()
    qtbot.waitUntil(lambda: scheduler.running, timeout=30_000)

    run(qtbot, window.close_store())  # closing the store stops its scheduler first
    assert not _running(scheduler)
    assert window.lifecycle.scheduler is None


def test_a_switched_off_lifecycle_never_starts(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    clock = DeterministicClock(T0)
    _store_with_an_expiring_note(tmp_path / "store", clock)
    window = make_window(open_engine=_opener(clock),
                         preferences=Preferences(lifecycle=False))
    window.resize(1100, 700)
    open_store(qtbot, window, tmp_path / "store")
    scheduler = window.lifecycle.scheduler
    assert scheduler is not None and not scheduler.running
    assert not window.lifecycle.action.isChecked()
    assert window.lifecycle.label.text() == "Lifecycle: off"


def test_the_environment_switch_wins_over_the_toggle(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    clock = DeterministicClock(T0)
    _store_with_an_expiring_note(tmp_path / "store", clock)
    off = EngineConfig(memory=dataclasses.replace(MemoryConfig(), lifecycle_enabled=False))
    window = make_window(open_engine=_opener(clock, off))
    open_store(qtbot, window, tmp_path / "store")
    scheduler = window.lifecycle.scheduler
    assert scheduler is not None and not scheduler.running
    assert window.lifecycle.action.isChecked() and not window.lifecycle.action.isEnabled()
    assert window.lifecycle.label.text() == "Lifecycle: off"
    assert "MEMORY_LIFECYCLE_ENABLED" in window.lifecycle.label.toolTip()
