"""What the views carry from one store to the next: the Records filters set on a store stay
with it (the reopen after an import), another store opens unfiltered, an empty store
says it is empty whatever the filters; the Timeline keeps its filters but not a record of the
last store."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtWidgets import QToolButton
from pytestqt.qtbot import QtBot

from engine.query import RecordQuery
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.ui.bigstore import build_store
from tests.ui.conftest import (
    answer_questions,
    open_fresh,
    open_store,
    run,
    store_of,
    type_into_first_record,
)
from ui.main_window import MainWindow
from ui.observe.timeline_data import TimelineFilter
from ui.observe.timeline_view import TimelineView
from ui.records.records_view import STATE_CHOICES


def test_another_store_opens_unfiltered_and_the_same_store_keeps_its_filters(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    first = tmp_path / "first"
    build_store(first, 12)  # agents alpha, beta, gamma, delta; "memory number …"
    second = store_of(tmp_path / "second",
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
    open_store(qtbot, window, store_of(empty))
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


def test_the_timeline_lets_go_of_a_record_of_another_store_and_keeps_its_other_filters(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    first = store_of(tmp_path / "first", NewMemory(content="Alpha keeps the spare keys"),
                      NewMemory(content="Beta waters the ferns on Mondays"))
    second = store_of(tmp_path / "second", NewMemory(content="Gamma feeds the cat at seven"),
                       NewMemory(content="Delta walks the dog after lunch"))
    window = make_window()
    open_store(qtbot, window, first)
    window.nav.setCurrentRow(list(window.views).index("timeline"))
    timeline = window.views["timeline"]
    assert isinstance(timeline, TimelineView)
    qtbot.waitUntil(lambda: len(timeline.data) > 0)
    picked = window.records.model.record_at(0)
    assert picked is not None
    run(qtbot, timeline.pick_record(picked.id))
    timeline.kind_box.setCurrentIndex(timeline.kind_box.findData("memory:record:created"))
    qtbot.waitUntil(lambda: timeline.count_label.text() == f"1 of {len(timeline.data)} events")

    open_store(qtbot, window, second)
    qtbot.waitUntil(lambda: len(timeline.data) > 0)
    # the box named the first store's record and the kind said "record created" over every
    # event of the second store ("8 events")
    assert timeline.record_edit.text() == ""
    assert timeline.current_filter() == TimelineFilter(
        kinds=frozenset({"memory:record:created"}))
    assert timeline.data.filter == timeline.current_filter()
    assert int(timeline.data.mask.sum()) == 2
    assert timeline.count_label.text() == f"2 of {len(timeline.data)} events"


@pytest.mark.parametrize("answer", ["cancel", "discard", "save"])
def test_opening_another_store_asks_about_unsaved_edits(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    """Typed into the Records form, then another store opened: the edit was dropped."""
    first = store_of(tmp_path / "first", NewMemory(content="Alpha keeps the spare keys"))
    second = store_of(tmp_path / "second", NewMemory(content="Gamma feeds the cat"))
    window = make_window()
    open_store(qtbot, window, first)
    view = window.records
    record = type_into_first_record(qtbot, window, "Alpha keeps the spare keys in the shed")
    asked = answer_questions(monkeypatch, answer)
    opened = run(qtbot, window.open_store(StoreSpec(str(second))))
    assert len(asked) == 1 and asked[0].endswith("before opening another store?")
    if answer == "cancel":  # the first store stays, the edit still in the form
        assert opened is None and view.session is not None
        assert view.session.store_key == (str(first), StoreSpec(str(first)).collection)
        assert view.detail.content.toPlainText().endswith("in the shed")
        return
    assert opened is not None
    run(qtbot, window.close_store())  # the first store was closed: read it back
    engine = open_fresh(StoreSpec(str(first)))
    try:
        content = engine.get(record.id).content
    finally:
        engine.close()
    assert content.endswith("in the shed") is (answer == "save")
