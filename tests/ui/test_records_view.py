"""The Records view against real embedded stores: open, filter, sort, edit/undo, delete/undo."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from engine.query import SortKey
from engine.records import Layer, NewMemory
from tests.ui.bigstore import AGENTS, build_store
from tests.ui.conftest import (
    answer_questions,
    open_store,
    run,
    store_of,
    type_into_first_record,
)
from ui.main_window import MainWindow
from ui.records.records_model import COLUMNS, PAGE_SIZE
from ui.shared.session import UNDO_BATCH

SMALL = 600


@pytest.fixture
def small_store(tmp_path: Path) -> Path:
    """A store of 600 generated records (no model)."""
    path = tmp_path / "small"
    build_store(path, SMALL)
    return path


def _column(key: SortKey) -> int:
    return next(i for i, c in enumerate(COLUMNS) if c.sort is key)


def test_open_store_shows_count_and_first_page(qtbot: QtBot, make_window: Callable[..., MainWindow],
                                               small_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, small_store)
    model = window.records.model
    assert model.total == SMALL
    assert model.rowCount() == SMALL
    assert model.is_loaded(0) and model.is_loaded(PAGE_SIZE - 1)
    assert not model.is_loaded(PAGE_SIZE)  # later pages come lazily
    # Default order: newest first (the engine's sort).
    assert model.record_at(0).id == f"r{SMALL - 1:06d}"  # type: ignore[union-attr]
    qtbot.waitUntil(lambda: window.count_label.text() == f"{SMALL:,} records")
    assert "embedded" in window.store_label.text()
    assert not window.banner.isVisible()
    assert window.records.add_action.isEnabled()


def test_filter_and_sort_are_engine_queries(qtbot: QtBot, make_window: Callable[..., MainWindow],
                                            small_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, small_store)
    view, model = window.records, window.records.model

    view.filters.layer.setCurrentText(Layer.SEMANTIC.value)  # record i has layer i % 6
    qtbot.waitUntil(lambda: model.query.layer is Layer.SEMANTIC and model.settled)
    assert model.total == SMALL // 6
    assert {model.record_at(r).layer for r in range(model.total)} == {Layer.SEMANTIC}  # type: ignore[union-attr]

    qtbot.waitUntil(lambda: view.filters.agent.count() == len(AGENTS) + 1)
    view.filters.agent.setCurrentIndex(view.filters.agent.findData("beta"))
    qtbot.waitUntil(lambda: model.query.agent_id == "beta" and model.settled)
    assert model.total == len([i for i in range(SMALL) if i % 6 == 1 and i % 4 == 1]) > 0
    assert {model.record_at(r).agent_id for r in range(model.total)} == {"beta"}  # type: ignore[union-attr]

    view.filters.clear()
    qtbot.waitUntil(lambda: model.query.layer is None and model.settled)
    view.filters.text.setText("number 00012")  # debounced typing
    qtbot.waitUntil(lambda: model.query.text == "number 00012" and model.settled)
    assert sorted(model.record_at(r).id for r in range(model.total)) == [  # type: ignore[union-attr]
        f"r{i:06d}" for i in range(120, 130)]

    view.filters.clear()
    qtbot.waitUntil(lambda: model.query.text is None and model.settled)
    view.table.horizontalHeader().setSortIndicator(_column(SortKey.IMPORTANCE),
                                                   Qt.SortOrder.AscendingOrder)
    qtbot.waitUntil(lambda: model.query.sort_by is SortKey.IMPORTANCE and model.settled)
    assert not model.query.descending
    values = [model.record_at(r).importance for r in range(PAGE_SIZE)]  # type: ignore[union-attr]
    assert values == sorted(values) and values[0] == 0.0
    # Ties break by id ascending, so paging is deterministic.
    assert model.record_at(0).id == "r000000"  # type: ignore[union-attr]


def test_edit_save_undo_redo(qtbot: QtBot, make_window: Callable[..., MainWindow],
                             small_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, small_store)
    view = window.records
    session = window.session
    assert session is not None
    view.table.selectRow(3)
    original = view.model.record_at(3)
    assert original is not None
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.id == original.id)
    # times in words: relative in the table with the exact local and UTC time on hover,
    # local in the detail's fields, labelled (no ISO strings, no snake_case names)
    created = view.model.index(3, next(i for i, c in enumerate(COLUMNS)
                                       if c.key == "created_at"))
    cell = str(view.model.data(created))
    assert cell and not re.search(r"\d{4}-\d\d-\d\dT", cell)
    assert "(UTC)" in str(view.model.data(created, Qt.ItemDataRole.ToolTipRole))
    fields = view.detail.fields_view.toPlainText()
    assert "Created at" in fields and "created_at" not in fields
    assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", fields)
    assert not re.search(r"\d\.\d{4,}", fields)

    view.detail.importance.setValue(0.955)
    view.detail.tags.setText("edited, gui")
    view.detail.content.setPlainText("an edited memory")
    view.detail.save_button.click()
    qtbot.waitUntil(lambda: session.undo_stack.count() == 1)
    saved = run(qtbot, session.runner.run(session.engine.get, original.id))
    assert (saved.importance, saved.tags, saved.content) == (0.955, ("edited", "gui"),
                                                              "an edited memory")
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.content == "an edited memory")
    assert not view.detail.error.isVisible()

    window.undo_action.trigger()
    qtbot.waitUntil(lambda: session.pending() == 0)
    restored = run(qtbot, session.runner.run(session.engine.get, original.id))
    assert (restored.importance, restored.tags, restored.content) == (
        original.importance, original.tags, original.content)
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.content == original.content)

    window.redo_action.trigger()
    qtbot.waitUntil(lambda: session.pending() == 0)
    again = run(qtbot, session.runner.run(session.engine.get, original.id))
    assert again.content == "an edited memory"
    # Every step is in the ledger's edit history: update, restore (undo), restore (redo).
    history = run(qtbot, session.runner.run(session.engine.edit_history, original.id))
    assert [e.op for e in history][:3] == ["restore", "restore", "update"]


def test_validation_errors_show_inline(qtbot: QtBot, make_window: Callable[..., MainWindow],
                                       small_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, small_store)
    view = window.records
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.record is not None)
    view.detail.tags.setText("x" * 80)
    view.detail.save_button.click()
    qtbot.waitUntil(view.detail.error.isVisible)
    assert "tags" in view.detail.error.text() and "64" in view.detail.error.text()
    assert view.detail.tags.styleSheet()  # the field is marked
    view.detail.revert_button.click()
    view.detail.content.setPlainText("   ")
    view.detail.save_button.click()
    assert view.detail.error.isVisible() and "content" in view.detail.error.text()
    assert window.session is not None and window.session.undo_stack.count() == 0


def test_delete_and_undo(qtbot: QtBot, make_window: Callable[..., MainWindow],
                         small_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, small_store)
    view, model = window.records, window.records.model
    session = window.session
    assert session is not None
    doomed = [model.record_at(r) for r in (0, 1, 2)]
    ids = [r.id for r in doomed if r is not None]
    run(qtbot, view.delete_records(ids))
    qtbot.waitUntil(lambda: model.total == SMALL - 3 and model.settled)
    assert not set(ids) & set(model.loaded_ids())
    assert run(qtbot, session.runner.run(session.engine.count)) == SMALL - 3

    window.undo_action.trigger()
    qtbot.waitUntil(lambda: model.total == SMALL and model.settled)
    back = run(qtbot, session.runner.run(session.engine.get_many, ids))
    assert [(r.id, r.content, r.importance) for r in back] == [
        (r.id, r.content, r.importance) for r in doomed if r is not None]


class RecordingCollection:
    """A real Chroma collection that records the size of every upsert."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.upserts: list[int] = []

    def upsert(self, **batch: Any) -> None:
        self.upserts.append(len(batch["ids"]))
        self._inner.upsert(**batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def test_undoing_a_200_row_delete_writes_small_batches(
        qtbot: QtBot, make_window: Callable[..., MainWindow], small_store: Path) -> None:
    # Chroma's bindings hold the GIL for a whole upsert: one upsert of 200 records stalled the
    # GUI thread 150-550 ms, so the undo writes them back UNDO_BATCH at a time (still one step)
    window = make_window()
    open_store(qtbot, window, small_store)
    model, session = window.records.model, window.session
    assert session is not None
    snapshot = run(qtbot, session.runner.run(session.engine.store.view.snapshot))
    ids = list(snapshot.ids[:200])
    run(qtbot, window.records.delete_records(ids), timeout=120)
    qtbot.waitUntil(lambda: model.total == SMALL - 200 and model.settled, timeout=60_000)
    store = session.engine.store
    recording = RecordingCollection(store._collection)
    store._collection = recording
    try:
        window.undo_action.trigger()
        # a hang guard, not a time bound: 25 Chroma calls take seconds on a loaded machine
        qtbot.waitUntil(lambda: model.total == SMALL and model.settled and not session.pending(),
                        timeout=120_000)
    finally:
        store._collection = recording._inner
    assert sum(recording.upserts) == 200
    assert max(recording.upserts) <= UNDO_BATCH < 200
    assert run(qtbot, session.runner.run(session.engine.count)) == SMALL
    assert session.undo_stack.count() == 1 and session.undo_stack.index() == 0  # one step


def test_bulk_relayer_and_tag_undo_as_one_step(qtbot: QtBot,
                                               make_window: Callable[..., MainWindow],
                                               small_store: Path) -> None:
    window = make_window()
    open_store(qtbot, window, small_store)
    session = window.session
    assert session is not None
    ids = [f"r{i:06d}" for i in (10, 11, 12, 13)]
    run(qtbot, session.relayer(ids, Layer.SYSTEM))
    run(qtbot, session.add_tags(ids, ["bulk"]))
    records = run(qtbot, session.runner.run(session.engine.get_many, ids))
    assert {r.layer for r in records} == {Layer.SYSTEM}
    assert all("bulk" in r.tags for r in records)
    window.undo_action.trigger()
    window.undo_action.trigger()
    qtbot.waitUntil(lambda: session.pending() == 0)
    records = run(qtbot, session.runner.run(session.engine.get_many, ids))
    assert [r.layer for r in records] == [list(Layer)[i % 6] for i in (10, 11, 12, 13)]
    assert not any("bulk" in r.tags for r in records)


def test_pause_archive_resume_a_multi_selection(
        qtbot: QtBot, make_window: Callable[..., MainWindow], small_store: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20: soft states from the Records view, with true counts, the State filter and
    column, the detail's badge and history, and undo."""
    from PySide6.QtCore import QItemSelectionModel

    from engine.records import RecordState
    from ui.records.records_view import STATE_CHOICES

    window = make_window()
    open_store(qtbot, window, small_store)
    view, model, session = window.records, window.records.model, window.session
    assert session is not None
    engine = session.engine
    asked: list[tuple[str, str]] = []

    def yes(_parent: object, title: str, text: str, *_args: object) -> object:
        asked.append((title, text))
        return QMessageBox.StandardButton.Yes

    monkeypatch.setattr(QMessageBox, "question", yes)
    state_column = next(i for i, c in enumerate(COLUMNS) if c.key == "state")

    def select(rows: range) -> list[str]:
        selection = view.table.selectionModel()
        selection.clear()
        for row in rows:
            selection.select(model.index(row, 0), QItemSelectionModel.SelectionFlag.Select
                             | QItemSelectionModel.SelectionFlag.Rows)
        return view.selected_ids()

    def states(ids: list[str]) -> set[RecordState]:
        return {record.state for record in engine.get_many(ids)}

    ids = select(range(3))
    assert len(ids) == 3 and view.pause_action.isEnabled()
    assert not view.resume_action.isEnabled()  # nothing selected to resume
    view.pause_action.trigger()
    qtbot.waitUntil(lambda: states(ids) == {RecordState.PAUSED}, timeout=10_000)
    assert asked[-1][0] == "Pause" and asked[-1][1].startswith(
        "Pause these 3 records? Paused records stay stored and listed but are not retrieved")
    qtbot.waitUntil(lambda: model.settled and model.data(model.index(0, state_column)) == "paused")
    assert model.total == SMALL  # paused records stay listed
    assert model.data(model.index(0, 0), Qt.ItemDataRole.ForegroundRole) is not None
    assert model.data(model.index(3, state_column)) == "active"
    assert model.data(model.index(3, 0), Qt.ItemDataRole.ForegroundRole) is None

    # the confirmation counts what changes: one of four (three are paused already)
    four = select(range(4))
    view.pause_action.trigger()
    qtbot.waitUntil(lambda: states(four) == {RecordState.PAUSED}, timeout=10_000)
    assert asked[-1][1].startswith("Pause this record?")
    assert "(3 of the 4 selected are paused already.)" in asked[-1][1]

    # the detail pane names the state and the history shows the change
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.record is not None and view.detail.record.id == ids[0]
                    and view.detail.record.state is RecordState.PAUSED, timeout=10_000)
    assert view.detail._title.text().endswith("· paused")
    assert "State: active → paused" in view.detail.history_view.toPlainText()
    assert "record paused" in view.detail.history_view.toPlainText()

    # archived records leave the default list; the State filter brings them back
    archived = select(range(2))
    view.archive_action.trigger()
    qtbot.waitUntil(lambda: states(archived) == {RecordState.ARCHIVED}, timeout=10_000)
    assert asked[-1][1].startswith("Archive these 2 records?")
    qtbot.waitUntil(lambda: model.settled and model.total == SMALL - 2, timeout=10_000)
    labels = [label for label, _ in STATE_CHOICES]
    assert labels == ["Active and paused", "Active", "Paused", "Archived", "Any"]
    assert view.filters.state.currentText() == "Active and paused"
    view.filters.state.setCurrentText("Archived")
    qtbot.waitUntil(lambda: model.settled and model.total == 2, timeout=10_000)
    assert {model.record_at(r).state for r in range(2)} == {RecordState.ARCHIVED}  # type: ignore[union-attr]
    view.filters.state.setCurrentText("Paused")
    qtbot.waitUntil(lambda: model.settled and model.total == 2, timeout=10_000)
    view.filters.state.setCurrentText("Any")
    qtbot.waitUntil(lambda: model.settled and model.total == SMALL, timeout=10_000)

    # resume, then undo the resume: archived again
    view.filters.state.setCurrentText("Archived")
    qtbot.waitUntil(lambda: model.settled and model.total == 2, timeout=10_000)
    select(range(2))
    view.resume_action.trigger()
    qtbot.waitUntil(lambda: states(archived) == {RecordState.ACTIVE}, timeout=10_000)
    assert asked[-1][1].startswith("Resume these 2 records? Resumed records are retrieved")
    qtbot.waitUntil(lambda: model.settled and model.total == 0, timeout=10_000)
    assert session.undo_stack.undoText() == "Resume 2 records"
    session.undo_stack.undo()
    run(qtbot, session.drain())
    assert states(archived) == {RecordState.ARCHIVED}
    qtbot.waitUntil(lambda: model.settled and model.total == 2, timeout=10_000)

    # a link to an archived record widens the filters to every state to show it
    view.filters.state.setCurrentText("Active and paused")
    qtbot.waitUntil(lambda: model.settled and model.total == SMALL - 2, timeout=10_000)
    view.go_to_record(archived[0])
    qtbot.waitUntil(lambda: view.filters.state.currentText() == "Any" and model.settled
                    and model.total == SMALL, timeout=10_000)
    qtbot.waitUntil(lambda: archived[0] in view.selected_ids(), timeout=10_000)


def test_the_detail_of_no_record_shows_no_record_s_values(
        qtbot: QtBot, make_window: Callable[..., MainWindow], small_store: Path) -> None:
    """Polish: after the shown record is deleted, the detail said "No record selected" beside
    the deleted record's layer, privacy, importance and confidence."""
    window = make_window()
    open_store(qtbot, window, small_store)
    view = window.records
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.record is not None, timeout=10_000)
    detail = view.detail
    assert detail.layer.currentText() and detail.importance.text()
    record = detail.record
    assert record is not None
    run(qtbot, view.delete_records([record.id]))
    qtbot.waitUntil(lambda: detail.record is None, timeout=10_000)
    assert [detail.layer.currentText(), detail.privacy.currentText(), detail.importance.text(),
            detail.confidence.text(), detail.ttl.text()] == ["", "", "", "", ""]
    # the next record's values come back (the table reloaded after the delete first)
    qtbot.waitUntil(lambda: view.model.settled and view.model.total == SMALL - 1,
                    timeout=10_000)
    view.table.clearSelection()
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: detail.record is not None, timeout=10_000)
    shown = detail.record
    assert shown is not None
    assert detail.layer.currentText() == shown.layer.value
    assert detail.privacy.currentText() == shown.privacy.value.lower()  # a word, not a code
    assert detail.importance.text() == f"{shown.importance:.3f}" and detail.ttl.text()


def test_privacy_is_offered_as_words_and_saved_as_the_engine_s_code(
        qtbot: QtBot, make_window: Callable[..., MainWindow], small_store: Path) -> None:
    """Polish: the filter, the detail, Add memory and the Pipeline's form said PUBLIC and
    PRIVATE where every other choice is a word (and the detail's fields say "private")."""
    from engine.records import Privacy
    from ui.shared.dialogs import AddMemoryDialog

    window = make_window()
    open_store(qtbot, window, small_store)
    view = window.records
    words = ["public", "private"]
    combos = {"filter": view.filters.privacy, "detail": view.detail.privacy,
              "pipeline": window.observe.pipeline.privacy_box,
              "add": AddMemoryDialog(["default"], window).privacy}
    for where, combo in combos.items():
        shown = [combo.itemText(i) for i in range(combo.count())]
        assert shown[-2:] == words, where
    window.observe.pipeline.content_edit.setPlainText("Sam's flight lands at 9")
    assert window.observe.pipeline.new_memory().privacy is Privacy.PRIVATE  # the default
    dialog = AddMemoryDialog(["default"], window)
    dialog.content.setPlainText("Sam's flight lands at 9")
    dialog.privacy.setCurrentIndex(words.index("private"))
    assert dialog.build().privacy is Privacy.PRIVATE

    view.filters.privacy.setCurrentText("public")
    qtbot.waitUntil(lambda: view.model.settled
                    and view.model.query.privacy is Privacy.PUBLIC, timeout=10_000)
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.record is not None, timeout=10_000)
    record = view.detail.record
    assert record is not None and record.privacy is Privacy.PUBLIC
    assert view.detail.privacy.currentText() == "public"
    view.detail.privacy.setCurrentText("private")
    assert view.detail.changes() == {"privacy": "PRIVATE"}


@pytest.mark.parametrize("answer", ["cancel", "discard", "save"])
def test_unsaved_edits_are_not_dropped_by_a_click_on_another_row(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    """Typed into the form, then another row clicked: the edit was gone without a word."""
    store = store_of(tmp_path / "store", NewMemory(content="Alpha keeps the spare keys"),
                     NewMemory(content="Beta waters the ferns on Mondays"))
    window = make_window()
    open_store(qtbot, window, store)
    view, model = window.records, window.records.model
    first, second = model.record_at(0), model.record_at(1)
    assert first is not None and second is not None
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.id == first.id)
    view.detail.content.setPlainText(first.content + " (and the shed's)")
    asked = answer_questions(monkeypatch, answer)
    view.table.selectRow(1)
    assert len(asked) == 1 and "(content)" in asked[0]
    if answer == "cancel":  # back on the record being edited, the edit still in the form
        assert view.detail.record is not None and view.detail.record.id == first.id
        assert view.detail.content.toPlainText().endswith("(and the shed's)")
        assert view.table.selectionModel().currentIndex().row() == model.row_of(first.id)
        return
    qtbot.waitUntil(lambda: view.detail.record is not None
                    and view.detail.record.id == second.id)
    session = window.session
    assert session is not None
    if answer == "save":  # saved as the Save button saves: one undoable edit
        qtbot.waitUntil(lambda: session.undo_stack.count() == 1 and session.pending() == 0)
    stored = run(qtbot, session.runner.run(session.reader.get_records, [first.id]))
    assert stored[0].content.endswith("(and the shed's)") is (answer == "save")
    assert session.undo_stack.count() == (answer == "save")


@pytest.mark.parametrize("answer", ["cancel", "discard", "save"])
def test_closing_the_window_asks_about_unsaved_edits(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    """Typed into the form, then the window closed: the edit was dropped without a word."""
    store = store_of(tmp_path / "store", NewMemory(content="Alpha keeps the spare keys"))
    window = make_window()
    open_store(qtbot, window, store)
    view = window.records
    record = type_into_first_record(qtbot, window, "Alpha keeps the spare keys in the shed")
    asked = answer_questions(monkeypatch, answer)
    session = window.session
    assert session is not None
    window.close()
    assert len(asked) == 1 and asked[0].endswith("(content) before closing?")
    if answer == "cancel":
        assert window.isVisible()
        assert view.detail.content.toPlainText().endswith("in the shed")
        return
    qtbot.waitUntil(lambda: not window.isVisible())
    stored = run(qtbot, session.runner.run(session.reader.get_records, [record.id]))
    assert stored[0].content.endswith("in the shed") is (answer == "save")
    assert len(asked) == 1  # asked once: the save does not ask again on the way out
