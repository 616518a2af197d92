"""Collections written by mem0, LangChain and LlamaIndex in the window (issue 22): the layout is
named, every view shows the real texts, agents and times, a plain collection is mapped in the
field-mapping dialog (saved, and used again after a restart), and adopting reports its dedup
decisions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QApplication, QDialog, QTableWidget, QWidget
from pytestqt.qtbot import QtBot

from app.settings import SettingsFile, load_settings
from app.wiring import open_engine, save_mapping
from engine.memory_engine import MemoryEngine
from engine.query import RecordRow
from engine.store import StoreSpec
from tests.support import foreign_stores
from tests.ui.conftest import open_store, run
from ui.imports.foreign_dialogs import FieldMappingDialog, TargetDialog
from ui.main_window import MainWindow
from ui.records.records_model import RecordTableModel
from ui.shared.dialogs import ImportProgressDialog
from ui.shared.tasks import spawn

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

# layout → (writer, collection, what the banner names, {text: (agent, created day)})
LAYOUTS = {
    "mem0": (foreign_stores.write_mem0, "mem0", "mem0", {
        "Likes green tea in the morning": {("travel-bot", "2024-05-01"),
                                           ("travel-bot", "2024-07-01")},
        "Is allergic to peanuts": {("bob", "2024-06-10")}}),
    "langchain": (foreign_stores.write_langchain, "langchain", "LangChain", {
        "The deploy key rotates every Friday": {("carol", "2024-03-02")},
        "Staging database lives in eu-west-1": {("default", "2024-05-01")}}),
    "llamaindex": (foreign_stores.write_llamaindex, "llamaindex", "LlamaIndex", {
        "Quarterly revenue grew eight percent": {("erin", "2024-04-05")},
        "The board approved the new office lease": {("default", "2024-04-06")}}),
}


def _day(ms: float) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d")


def _cell(table: QTableWidget, row: int, column: int) -> str:
    item = table.item(row, column)
    assert item is not None
    return item.text()


def _rows(model: RecordTableModel) -> list[RecordRow]:
    rows = [model.record_at(i) for i in range(model.rowCount())]
    assert all(row is not None for row in rows)
    return [row for row in rows if row is not None]


def _settings_file(tmp_path: Path) -> SettingsFile:
    config = tmp_path / "config"
    config.mkdir(exist_ok=True)
    return SettingsFile(load_settings({"MNEMOSCOPE_CONFIG_DIR": str(config),
                                       "MNEMOSCOPE_DATA_DIR": str(tmp_path / "data")}),
                        config)


def _window(make_window: Callable[..., MainWindow], settings_file: SettingsFile) -> MainWindow:
    """A window with the app's own services for opening stores, saving mappings, adopting."""
    return make_window(
        open_engine=lambda spec: open_engine(settings_file.current, None, spec),
        save_mapping=partial(save_mapping, settings_file),
        open_target=lambda spec: open_engine(settings_file.current, None, spec, beside=True))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_view_shows_the_real_texts_agents_and_times(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        every_move: None, layout: str) -> None:
    writer, collection, name, expected = LAYOUTS[layout]
    ids = writer(tmp_path / "store")
    window = _window(make_window, _settings_file(tmp_path))
    open_store(qtbot, window, tmp_path / "store", collection=collection)
    assert window.banner.isVisible()
    assert window.banner_label.text().startswith(
        f"{name} collection '{collection}' — read-only; Adopt into a Mnemoscope store…")
    assert window.banner_button.text() == "Adopt…" and window.adopt_action.isEnabled()
    assert window.mapping_action.isEnabled()

    # Records: the table's rows
    model = window.records.model
    shown: dict[str, set[tuple[str, str]]] = {}
    for row in _rows(model):
        shown.setdefault(row.content, set()).add((row.agent_id, _day(row.created_at)))
    assert shown == expected

    # Retrieval: a question in the memory's words finds it, with its agent and time
    text = next(iter(expected))
    retrieval = window.observe.retrieval
    retrieval.query_edit.setText(text.lower())
    bundle = run(qtbot, retrieval.retrieve())
    assert bundle is not None
    found = [(r.content, r.agent_id, _day(r.created_at)) for r in bundle.records]
    assert any((t, a, d) in found for t in (text,) for a, d in expected[text]), found

    # Fate: the record is named by its text
    window.nav.setCurrentRow(list(window.views).index("fate"))
    window.fate.id_edit.setText(ids[0])
    window.fate.show_button.click()
    qtbot.waitUntil(lambda: window.fate.fate is not None, timeout=10_000)
    first = window.fate.fate
    assert first is not None
    assert any(t in window.fate.content_label.text() for t in expected)

    # Map: hovering a point shows its record's text (where the tool's vectors fit the model)
    window.nav.setCurrentRow(list(window.views).index("map"))
    view = window.observe.map
    data = run(qtbot, view.load())
    assert data is not None
    if layout == "langchain":  # 1536-d vectors from another model: nothing to place
        assert len(data.texts) == 0
        return
    assert set(data.texts) == set(expected)
    box = view.plot.getViewBox()
    viewport = view.plot.viewport()
    tips = []
    for x, y in data.projection.points.tolist():
        local = QPointF(view.plot.mapFromScene(box.mapViewToScene(QPointF(x, y))))
        QApplication.sendEvent(viewport, QMouseEvent(
            QEvent.Type.MouseMove, local, viewport.mapToGlobal(local), Qt.MouseButton.NoButton,
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
        tips.append(box.toolTip())
    for text, agents in expected.items():
        assert any(tip.startswith(text) and f"agent {agent}" in tip
                   for tip in tips for agent, _ in agents), (text, tips)


def _dialog(qtbot: QtBot, window: MainWindow, kind: type[QDialog]) -> QDialog:
    qtbot.waitUntil(lambda: any(d.isVisible() for d in window.findChildren(kind)),
                    timeout=10_000)
    return next(d for d in window.findChildren(kind) if d.isVisible())


def test_mapping_dialog_maps_a_plain_collection_and_the_mapping_persists(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    foreign_stores.write_custom(tmp_path / "store")
    window = _window(make_window, _settings_file(tmp_path))
    open_store(qtbot, window, tmp_path / "store", collection="notes")
    assert "Plain Chroma collection 'notes'" in window.banner_label.text()
    assert "Store → Field Mapping…" in window.banner_label.text()
    model = window.records.model
    assert {row.content for row in _rows(model)} == {"(no document)"}

    task = spawn(window.edit_field_mapping())
    dialog = _dialog(qtbot, window, FieldMappingDialog)
    assert isinstance(dialog, FieldMappingDialog)
    keys = {_cell(dialog.keys, r, 0): _cell(dialog.keys, r, 1)
            for r in range(dialog.keys.rowCount())}
    assert keys["who"] == "frank · grace" and "memory" in keys and "weight" in keys
    assert "No record has a text yet" in dialog.note.text()
    for field, key in (("text", "memory"), ("agent", "who"), ("time", "when"),
                       ("updated", "changed"), ("importance", "weight"), ("run", "thread")):
        combo = dialog.combos[field]
        combo.setCurrentIndex(combo.findData(key))
    preview = [[_cell(dialog.preview, r, c) for c in range(dialog.preview.columnCount())]
               for r in range(dialog.preview.rowCount())]
    assert preview[0][:2] == ["Prefers aisle seats", "frank"]  # live, before saving
    assert preview[0][4:] == ["0.90", "t-1"] and "2024" in preview[0][2]
    assert dialog.note.text() == ""
    dialog.save_button.click()
    qtbot.waitUntil(task.done, timeout=30_000)
    session = task.result()
    assert session is not None and window.session is session
    qtbot.waitUntil(lambda: window.records.model.settled, timeout=10_000)
    rows = {(r.content, r.agent_id, r.importance, r.tags, _day(r.created_at))
            for r in _rows(model)}
    assert rows == {("Prefers aisle seats", "frank", 0.9, ("run:t-1",), "2024-02-01"),
                    ("Works from Lisbon in winter", "grace", 0.3, ("run:t-2",), "2024-02-02")}
    assert "Mapped collection 'notes'" in window.banner_label.text()
    run(qtbot, window.close_store())

    # saved where `mnemoscope map-collection` saves it: a new run reads it from the file
    restarted = _window(make_window, _settings_file(tmp_path))
    open_store(qtbot, restarted, tmp_path / "store", collection="notes")
    again = restarted.records.model
    assert {row.agent_id for row in _rows(again)} == {"frank", "grace"}
    saved = load_settings({"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config")})
    mapping = saved.mapping_for(str(tmp_path / "store"), "notes")
    assert mapping is not None and mapping.text == "memory" and mapping.run == "thread"

    # Forget Mapping: detection alone again
    task = spawn(restarted.edit_field_mapping())
    dialog = _dialog(qtbot, restarted, FieldMappingDialog)
    assert isinstance(dialog, FieldMappingDialog)
    assert dialog.combos["agent"].currentData() == "who"  # the saved choice, preselected
    dialog.forget_button.click()
    qtbot.waitUntil(task.done, timeout=30_000)
    qtbot.waitUntil(lambda: again.settled, timeout=10_000)  # the reopened store's first page
    assert {row.content for row in _rows(again)} == {"(no document)"}


def test_adopt_from_the_window_reports_its_decisions(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    foreign_stores.write_mem0(tmp_path / "mem0-store")
    window = _window(make_window, _settings_file(tmp_path))
    open_store(qtbot, window, tmp_path / "mem0-store", collection="mem0")
    target = tmp_path / "ours"
    task = spawn(window.adopt_collection())
    ask = _dialog(qtbot, window, TargetDialog)
    assert isinstance(ask, TargetDialog) and not ask.adopt_button.isEnabled()
    ask.location.setText(str(target))
    ask.adopt_button.click()
    qtbot.waitUntil(task.done, timeout=60_000)
    summary = task.result()
    assert summary is not None and not summary.cancelled
    # the same fact written by two mem0 runs is one memory: the second is a duplicate
    assert summary.counts["inserted"] == 2
    assert summary.counts["updated"] + summary.counts["skipped"] + summary.counts["merged"] == 1
    progress = _dialog(qtbot, window, ImportProgressDialog)
    assert isinstance(progress, ImportProgressDialog)
    assert progress.label.text().startswith(f"Adopted 'mem0' into {target}: 3 records")
    counts = progress.counts.text()
    assert "Stored as new: 2" in counts and "Not stored: 1" in counts
    assert progress.outcomes.model.rowCount() == 3  # every record, with its decision
    progress.accept()
    adopted = MemoryEngine.open(StoreSpec(str(target)))
    try:
        records = adopted.list_records().records
        assert {r.content for r in records} == {"Likes green tea in the morning",
                                                "Is allergic to peanuts"}
        assert all(r.metadata["adopted_from"]["collection"] == "mem0" for r in records)
    finally:
        adopted.close()


def test_adopt_cancelled_before_its_first_batch_writes_nothing(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    foreign_stores.write_mem0(tmp_path / "mem0-store")
    window = _window(make_window, _settings_file(tmp_path))
    open_store(qtbot, window, tmp_path / "mem0-store", collection="mem0")

    def cancel_at_once(dialog: QWidget) -> None:
        if isinstance(dialog, ImportProgressDialog):
            dialog.button.click()  # Cancel, before the worker reads its first record

    target = tmp_path / "ours"
    summary = run(qtbot, window.adopt_collection(str(target), opened=cancel_at_once))
    assert summary is not None and summary.cancelled and summary.written == 0
    progress = _dialog(qtbot, window, ImportProgressDialog)
    assert isinstance(progress, ImportProgressDialog)
    assert progress.label.text().startswith("Adoption cancelled: 0 records decided")
    assert progress.button.text() == "Close"
    progress.accept()
    adopted = MemoryEngine.open(StoreSpec(str(target)))
    try:
        assert adopted.count() == 0
    finally:
        adopted.close()


def test_mapping_dialog_masks_sample_values_and_previews_while_redaction_is_on(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    import chromadb
    from chromadb.config import Settings as ChromaSettings

    secret = "AKIAIOSFODNN7EXAMPLE"
    client = chromadb.PersistentClient(path=str(tmp_path / "store"),
                                       settings=ChromaSettings(anonymized_telemetry=False))
    vectors: list[Sequence[float]] = [[1.0, 0.0, 0.0]]
    client.get_or_create_collection(name="notes", embedding_function=None).add(
        ids=["n-1"], embeddings=vectors,
        metadatas=[{"memory": f"backup key {secret}", "who": "ops"}])
    window = _window(make_window, _settings_file(tmp_path))
    window.redaction.set_enabled(True)
    open_store(qtbot, window, tmp_path / "store", collection="notes")
    assert window.banner_button.text() == "Map Fields…"  # a plain collection: map it first
    window.banner_button.click()
    dialog = _dialog(qtbot, window, FieldMappingDialog)
    assert isinstance(dialog, FieldMappingDialog)
    combo = dialog.combos["text"]
    combo.setCurrentIndex(combo.findData("memory"))
    cells = [_cell(table, r, c) for table in (dialog.keys, dialog.preview)
             for r in range(table.rowCount()) for c in range(table.columnCount())]
    assert any(cell.startswith("backup key <REDACT:") for cell in cells), cells
    assert not any(secret in cell for cell in cells)
    session = window.session
    dialog.reject()
    qtbot.waitUntil(lambda: not dialog.isVisible())
    assert window.session is session  # cancelled: nothing saved, the store stays open
    assert not (tmp_path / "config" / "settings.json").exists()


@pytest.mark.server
@pytest.mark.slow
def test_a_collection_on_a_chroma_server_is_mapped_and_adopted_from_the_window(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow],
        chroma_server_url: str, unique_collection: str) -> None:
    """The sample is read from a real `chroma run` (on a worker), the mapping is saved under the
    server's URL, and the server collection is adopted into a local folder."""
    foreign_stores.write_custom(chroma_server_url, name=unique_collection)
    window = _window(make_window, _settings_file(tmp_path))
    # issue 24: a server store is read only when a feature needs it (Adopt asks below)
    open_store(qtbot, window, chroma_server_url, collection=unique_collection, indexed=False)
    assert f"Plain Chroma collection '{unique_collection}'" in window.banner_label.text()
    task = spawn(window.edit_field_mapping())
    dialog = _dialog(qtbot, window, FieldMappingDialog)
    assert isinstance(dialog, FieldMappingDialog)
    for field, key in (("text", "memory"), ("agent", "who"), ("time", "when")):
        combo = dialog.combos[field]
        combo.setCurrentIndex(combo.findData(key))
    dialog.save_button.click()
    qtbot.waitUntil(task.done, timeout=60_000)
    assert task.result() is not None
    qtbot.waitUntil(lambda: window.records.model.settled, timeout=30_000)
    assert {(r.content, r.agent_id) for r in _rows(window.records.model)} == {
        ("Prefers aisle seats", "frank"), ("Works from Lisbon in winter", "grace")}
    saved = load_settings({"MNEMOSCOPE_CONFIG_DIR": str(tmp_path / "config")})
    assert saved.mapping_for(chroma_server_url, unique_collection) is not None

    summary = run(qtbot, window.adopt_collection(str(tmp_path / "ours")), timeout=60)
    assert summary is not None and summary.counts["inserted"] == 2
    adopted = MemoryEngine.open(StoreSpec(str(tmp_path / "ours")))
    try:
        assert {(r.content, r.agent_id) for r in adopted.list_records().records} == {
            ("Prefers aisle seats", "frank"), ("Works from Lisbon in winter", "grace")}
    finally:
        adopted.close()
