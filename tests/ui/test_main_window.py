"""Main window: themes, restored window state, model state, read-only banner, navigation."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from PySide6.QtGui import QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from engine.embedding import EmbedderState, EmbedderStatus
from ui.main_window import MainWindow, Preferences
from ui.shared.theme import apply_theme, is_dark


def test_theme_switch_applies_palette_and_is_saved(
        qtbot: QtBot, qapp: QApplication, make_window: Callable[..., MainWindow]) -> None:
    saved: list[Preferences] = []
    window = make_window(save_preferences=saved.append)
    window.set_theme("dark")
    assert is_dark(qapp)
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() < 80
    qtbot.waitUntil(lambda: bool(saved) and saved[-1].theme == "dark")
    window.set_theme("light")
    assert not is_dark(qapp)
    assert qapp.palette().color(QPalette.ColorRole.Window).lightness() > 200
    checked = [a.text() for a in window.theme_actions.actions() if a.isChecked()]
    assert checked == ["Light"]
    apply_theme(qapp, "light")


def test_window_geometry_is_restored(qtbot: QtBot,
                                     make_window: Callable[..., MainWindow]) -> None:
    saved: list[Preferences] = []
    first = make_window(save_preferences=saved.append)
    first.resize(781, 523)  # within the offscreen screen (800×600)
    first.close()
    qtbot.waitUntil(lambda: bool(saved) and bool(saved[-1].geometry))
    second = make_window(preferences=dataclasses.replace(saved[-1]))
    assert (second.width(), second.height()) == (781, 523)


def test_model_state_and_redaction_in_the_status_bar(
        make_window: Callable[..., MainWindow]) -> None:
    window = make_window(preferences=Preferences(redaction=True))
    assert window.redaction_label.text() == "redaction: on"
    window.show_model_state(EmbedderStatus(EmbedderState.LOADING, "all-MiniLM-L6-v2", 384))
    assert "loading" in window.model_label.text()
    window.show_model_state(EmbedderStatus(EmbedderState.FAILED, "all-MiniLM-L6-v2", 384,
                                           "OSError: no weights at /x"))
    assert "fallback" in window.model_label.text()
    assert "no weights" in window.model_label.toolTip()
    window.show_model_state(EmbedderStatus(EmbedderState.READY, "all-MiniLM-L6-v2", 384))
    assert window.model_label.text() == "model: ready (all-MiniLM-L6-v2)"
    # the first launch's conversion in a helper process says what it is doing, and a helper
    # that failed is still told once the model is ready (it loaded in the app instead)
    window.show_model_state(EmbedderStatus(
        EmbedderState.LOADING, "all-MiniLM-L6-v2", 384,
        "first launch: preparing the model for OpenVINO in a helper process: converting it "
        "for OpenVINO (2 of 3)"))
    assert window.model_label.text() == "model: preparing (first launch)…"
    assert "converting it for OpenVINO (2 of 3)" in window.model_label.toolTip()
    window.show_model_state(EmbedderStatus(
        EmbedderState.READY, "all-MiniLM-L6-v2", 384,
        "the conversion helper failed (exit 1); the model loaded in the app",
        backend="OpenVINO bf16 (converted)"))
    assert window.model_label.text() == "model: ready (all-MiniLM-L6-v2)"
    assert "run by OpenVINO bf16 (converted)" in window.model_label.toolTip()
    assert "the conversion helper failed (exit 1)" in window.model_label.toolTip()


def test_only_working_views_are_listed_and_shortcuts_exist(
        make_window: Callable[..., MainWindow]) -> None:
    window = make_window()
    assert [window.nav.item(i).text() for i in range(window.nav.count())] == [
        "Records", "Timeline", "Pipeline", "Review", "Retrieval", "Map",  # + issue 8
        "Layers",  # + issue 10
        "Secrets", "Fate", "Budget", "Tasks"]  # + issue 9
    assert window.undo_action.shortcut().toString() == "Ctrl+Z"
    assert window.import_action.shortcut().toString() == "Ctrl+I"
    assert window.records.add_action.shortcut().toString() == "Ctrl+N"
    # Nothing is open yet: writing actions are off.
    assert not window.import_action.isEnabled() and not window.records.add_action.isEnabled()
