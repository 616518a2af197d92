"""Issue 20's Records state bugs, each against a real embedded store: the Agent filter after
writes, select-all meaning every matching record, and actions that need a selection."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from engine.query import RecordQuery
from engine.records import Layer, RecordState
from tests.ui.bigstore import AGENTS, build_store
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow
from ui.records.records_model import PAGE_SIZE
from ui.records.records_view import _STATE_WORDS

_STATE_MEANING = _STATE_WORDS[RecordState.PAUSED][2]

MANY = 1035  # more than one page of the table


@pytest.fixture
def many_store(tmp_path: Path) -> Path:
    """A store of 1,035 generated records (no model); record i has agent AGENTS[i % 4]."""
    path = tmp_path / "many"
    build_store(path, MANY)
    return path


def _answer(monkeypatch: pytest.MonkeyPatch, answer: QMessageBox.StandardButton) -> list[str]:
    """Answer every QMessageBox.question with ``answer``; the questions asked are returned."""
    asked: list[str] = []

    def question(_parent: object, _title: str, text: str, *_args: Any) -> Any:
        asked.append(text)
        return answer

    monkeypatch.setattr(QMessageBox, "question", question)
    return asked


def test_agent_filter_keeps_its_agent_after_a_delete_and_an_undo(
        qtbot: QtBot, make_window: Callable[..., MainWindow], many_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, many_store)
    view, model, combo = window.records, window.records.model, window.records.filters.agent
    qtbot.waitUntil(lambda: combo.count() == len(AGENTS) + 1)
    combo.setCurrentIndex(combo.findData("beta"))
    beta = len(range(1, MANY, 4))
    qtbot.waitUntil(lambda: model.query.agent_id == "beta" and model.settled
                    and model.total == beta)

    first = model.record_at(0)
    assert first is not None
    run(qtbot, view.delete_records([first.id]))
    # the facets are read again after the write: the combo shows the new count, still beta
    qtbot.waitUntil(lambda: combo.itemText(combo.findData("beta")) == f"beta ({beta - 1:,})")
    assert combo.currentData() == "beta" and combo.currentText() == f"beta ({beta - 1:,})"
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: combo.itemText(combo.findData("beta")) == f"beta ({beta:,})")
    assert combo.currentData() == "beta"

    # a later filter change keeps the agent (it used to drop it silently)
    view.filters.layer.setCurrentText(Layer.SEMANTIC.value)
    qtbot.waitUntil(lambda: model.query.layer is Layer.SEMANTIC and model.settled)
    assert model.query.agent_id == "beta"
    assert {model.record_at(r).agent_id for r in range(model.total)} == {"beta"}  # type: ignore[union-attr]


def test_agent_whose_records_are_all_gone_stays_the_filter_shown(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    store = tmp_path / "few"
    build_store(store, 8)  # two records per agent
    window = make_window()
    open_store(qtbot, window, store)
    view, model, combo = window.records, window.records.model, window.records.filters.agent
    qtbot.waitUntil(lambda: combo.count() == len(AGENTS) + 1)
    combo.setCurrentIndex(combo.findData("gamma"))
    qtbot.waitUntil(lambda: model.query.agent_id == "gamma" and model.settled
                    and model.total == 2)
    run(qtbot, view.delete_records(list(model.loaded_ids())))
    qtbot.waitUntil(lambda: combo.currentText() == "gamma (0)" and model.settled)
    assert model.total == 0 and model.query.agent_id == "gamma"


def test_select_all_means_every_matching_record_and_the_confirmation_says_how_many(
        qtbot: QtBot, make_window: Callable[..., MainWindow], many_store: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = make_window()
    open_store(qtbot, window, many_store)
    view, model = window.records, window.records.model
    assert model.total == MANY and not model.is_loaded(MANY - 1)  # pages come lazily
    view.table.setFocus()
    view.table.selectRow(0)
    qtbot.keyClick(view.table, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # type: ignore[no-untyped-call]
    assert view.selected_count() == MANY and len(view.selected_ids()) <= 2 * PAGE_SIZE

    # a bulk move asks first, with the true count (answered No: nothing moves)
    asked = _answer(monkeypatch, QMessageBox.StandardButton.No)
    view.layer_actions[list(Layer).index(Layer.SEMANTIC)].trigger()
    assert asked == [f"Move all {MANY:,} records to semantic? You can undo this "
                     "(Edit → Undo)."]

    asked = _answer(monkeypatch, QMessageBox.StandardButton.Yes)
    view.delete_action.trigger()
    assert asked == [f"Delete all {MANY:,} records? You can undo this (Edit → Undo)."]
    session = window.session
    assert session is not None
    qtbot.waitUntil(lambda: model.settled and model.total == 0, timeout=60_000)
    assert run(qtbot, session.runner.run(session.engine.count)) == 0
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: model.settled and model.total == MANY, timeout=60_000)


def test_select_all_under_a_filter_is_every_record_the_filter_matches(
        qtbot: QtBot, make_window: Callable[..., MainWindow], many_store: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    window = make_window()
    open_store(qtbot, window, many_store)
    view, model = window.records, window.records.model
    combo = view.filters.agent
    qtbot.waitUntil(lambda: combo.count() == len(AGENTS) + 1)
    combo.setCurrentIndex(combo.findData("beta"))
    beta = len(range(1, MANY, 4))
    qtbot.waitUntil(lambda: model.query.agent_id == "beta" and model.settled)
    assert model.total == beta > PAGE_SIZE
    view.table.setFocus()
    view.table.selectAll()
    asked = _answer(monkeypatch, QMessageBox.StandardButton.Yes)
    view.delete_action.trigger()
    assert asked == [f"Delete all {beta:,} records matching the filters? You can undo this "
                     "(Edit → Undo)."]
    session = window.session
    assert session is not None
    qtbot.waitUntil(lambda: model.settled and model.total == 0, timeout=60_000)
    rows = run(qtbot, session.runner.run(session.engine.list_rows, RecordQuery(limit=10_000)))
    assert rows.total == MANY - beta and "beta" not in {row.agent_id for row in rows.rows}


def test_selection_actions_are_off_without_a_selection(
        qtbot: QtBot, make_window: Callable[..., MainWindow], many_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, many_store)
    view = window.records
    view.table.selectionModel().clear()
    needs_selection = [view.delete_action, view.tag_action, view.layer_menu.menuAction(),
                       *view.layer_actions]
    assert not any(made.isEnabled() for made in needs_selection)
    assert not view.layer_button.isEnabled()
    assert view.add_action.isEnabled()  # adding needs none
    view.table.selectRow(3)
    assert all(made.isEnabled() for made in needs_selection)
    view.table.selectionModel().clear()
    assert not any(made.isEnabled() for made in needs_selection)


def test_redact_in_place_confirms_with_the_true_count(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.ui.test_redaction_toggle import SECRETS, plant

    ids = plant(tmp_path / "store")
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    view = window.scan
    window.nav.setCurrentRow(list(window.views).index("secrets"))
    qtbot.waitUntil(lambda: len(view.hits) == len(ids))
    view.table.selectAll()
    asked = _answer(monkeypatch, QMessageBox.StandardButton.No)
    view.redact_button.click()
    assert asked == [f"Replace the secrets of these {len(ids)} records by placeholders? You "
                     "can undo this (Edit → Undo)."]
    session = window.session
    assert session is not None and session.pending() == 0
    assert SECRETS[0] in run(qtbot, session.runner.run(session.engine.get, ids[0])).content
    asked = _answer(monkeypatch, QMessageBox.StandardButton.Yes)
    view.redact_button.click()
    qtbot.waitUntil(lambda: window.statusBar().currentMessage()
                    == f"Redacted {len(ids)} records in place (Ctrl+Z undoes)")


def test_pausing_a_select_all_counts_every_matching_record(
        qtbot: QtBot, make_window: Callable[..., MainWindow], many_store: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Pause after Ctrl+A: the question counts all 1,035 records (not the loaded pages) and
    every one of them is paused."""
    window = make_window()
    open_store(qtbot, window, many_store)
    view = window.records
    view.table.setFocus()
    view.table.selectRow(0)
    qtbot.keyClick(view.table, Qt.Key.Key_A, Qt.KeyboardModifier.ControlModifier)  # type: ignore[no-untyped-call]
    assert view.selected_count() == MANY and len(view.selected_rows()) < MANY
    asked = _answer(monkeypatch, QMessageBox.StandardButton.Yes)
    said: list[str] = []
    view.message.connect(said.append)
    view.pause_action.trigger()
    qtbot.waitUntil(lambda: any(m.startswith("Paused") for m in said), timeout=120_000)
    assert asked == [f"Pause these {MANY:,} records? {_STATE_MEANING} You can undo this "
                     "(Edit → Undo)."]
    session = window.session
    assert session is not None
    paused = run(qtbot, session.runner.run(session.engine.list_rows, RecordQuery(
        states=frozenset({RecordState.PAUSED}), limit=1)))
    assert paused.total == MANY
