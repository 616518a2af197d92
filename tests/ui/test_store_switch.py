"""What the Records view carries from one store to the next: the filters set on a store stay
with it (an import or a detach reopens it), another store opens unfiltered, and an empty store
says it is empty whatever the filters."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QToolButton
from pytestqt.qtbot import QtBot

from engine.query import RecordQuery
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.ui.bigstore import build_store
from tests.ui.conftest import open_fresh, open_store
from ui.main_window import MainWindow
from ui.records.records_view import STATE_CHOICES


def _store_of(path: Path, *memories: NewMemory) -> Path:
    engine = open_fresh(StoreSpec(str(path)))
    try:
        for memory in memories:
            engine.ingest(memory)
    finally:
        engine.close()
    return path


def test_another_store_opens_unfiltered_and_the_same_store_keeps_its_filters(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    first = tmp_path / "first"
    build_store(first, 12)  # agents alpha, beta, gamma, delta; "memory number …"
    second = _store_of(tmp_path / "second",
                       NewMemory(content="Bob is allergic to peanuts", agent_id="bob"),
                       NewMemory(content="Carol hates Monday meetings", agent_id="carol"))
    window = make_window()
    view, model, filters = window.records, window.records.model, window.records.filters
    open_store(qtbot, window, first)
    qtbot.waitUntil(lambda: filters.agent.findData("beta") >= 0)
    filters.agent.setCurrentIndex(filters.agent.findData("beta"))
    filters.text.setText("memory")
    qtbot.waitUntil(lambda: model.query.agent_id == "beta" and model.query.text == "memory"
                    and model.settled)
    model.sort(1)  # by layer: a way of looking, kept
    qtbot.waitUntil(lambda: model.settled and model.total == 3)
    sort = (model.query.sort_by, model.query.descending)

    open_store(qtbot, window, second)
    # the first store's agent and words hid every record ("0 of 2 records", agent "beta (0)")
    qtbot.waitUntil(lambda: model.settled and model.total == 2)
    assert filters.query() == RecordQuery()
    assert filters.agent.currentData() is None and filters.text.text() == ""
    assert filters.agent.findData("beta") < 0
    assert (model.query.sort_by, model.query.descending) == sort
    assert not view.empty_state.is_shown()

    filters.agent.setCurrentIndex(filters.agent.findData("bob"))
    qtbot.waitUntil(lambda: model.query.agent_id == "bob" and model.settled)
    open_store(qtbot, window, second)  # the same store again: its filters stay
    qtbot.waitUntil(lambda: model.settled and model.total == 1)
    assert filters.agent.currentData() == "bob" and model.query.agent_id == "bob"


def test_an_empty_store_says_so_whatever_the_filters(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    window = make_window()
    view, filters = window.records, window.records.filters
    open_store(qtbot, window, _store_of(empty))
    filters.state.setCurrentIndex(len(STATE_CHOICES) - 1)  # archived too: not the default
    qtbot.waitUntil(lambda: view.model.query.states == STATE_CHOICES[-1][1]
                    and view.model.settled and view.empty_state.is_shown())
    # "No records match these filters" with Clear filters, which brings nothing back
    assert view.empty_state.title() == "No memories yet"
    assert "Clear filters" not in view.empty_state.button_texts()


def test_clearing_the_filters_hides_the_search_boxes_clear_buttons(
        qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    filters = make_window().records.filters
    buttons = [edit.findChildren(QToolButton)[0] for edit in (filters.text, filters.tags)]
    filters.text.setText("kitchen")
    filters.tags.setText("home")
    qtbot.waitUntil(lambda: all(b.property("opacity") == 1.0 for b in buttons))
    filters.clear()
    # the boxes' signals were blocked while they were emptied: their ⊗ stayed on empty boxes
    qtbot.waitUntil(lambda: all(b.property("opacity") == 0.0 for b in buttons))
