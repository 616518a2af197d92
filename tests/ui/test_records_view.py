"""The Records view against real embedded stores: open, filter, sort, edit/undo, delete/undo."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from pytestqt.qtbot import QtBot

from engine.query import SortKey
from engine.records import Layer
from tests.ui.bigstore import AGENTS, build_store
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow
from ui.records_model import COLUMNS, PAGE_SIZE
from ui.session import UNDO_BATCH

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
