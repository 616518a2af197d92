"""Issue 20 in the GUI: a conversation import previewed before it writes, its summary, the
Imports window and Edit → Undo of an import, and the import dialog after a cancel.

The windows run without the model (word-overlap path): what is tested is the flow — what is
shown, what is written and when — not the embedding.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QDialog, QMessageBox
from pytestqt.qtbot import QtBot

from engine.query import RecordQuery
from tests.support.conversations import locomo_sample
from tests.ui.conftest import child_import, open_store, run
from ui.imports.import_dialogs import ConversationPreviewDialog, ImportsDialog
from ui.imports.importing import ImportSummary, LineOutcome
from ui.main_window import MainWindow
from ui.shared.dialogs import ImportProgressDialog
from ui.shared.session import StoreSession
from ui.shared.tasks import spawn

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

TURNS = 40  # the default salience cut keeps some of them (seed 000 §1), not all


def _conversation(tmp_path: Path, turns: int = TURNS) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([locomo_sample(turns)]), encoding="utf-8")
    return path


def _session(window: MainWindow) -> StoreSession:
    session = window.session
    assert isinstance(session, StoreSession)
    return session


def _count(qtbot: QtBot, window: MainWindow) -> int:
    session = _session(window)
    return int(run(qtbot, session.runner.run(session.engine.count)))


def _state(qtbot: QtBot, window: MainWindow) -> list[tuple[str, str, int]]:
    """Every record as (id, content hash, version), by id."""
    engine = _session(window).engine

    def read() -> list[tuple[str, str, int]]:
        page = engine.list_records(RecordQuery(limit=10_000))
        assert page.total <= 10_000
        return sorted((r.id, r.content_hash, r.version) for r in page.records)

    return run(qtbot, _session(window).runner.run(read))


def _box(qtbot: QtBot) -> QMessageBox:
    """The message box shown (window-modal, awaited by the code under test)."""
    found: list[QMessageBox] = []

    def shown() -> bool:
        found[:] = [w for w in QApplication.topLevelWidgets()
                    if isinstance(w, QMessageBox) and w.isVisible()]
        return bool(found)

    qtbot.waitUntil(shown)
    return found[0]


def _answer(qtbot: QtBot, button: QMessageBox.StandardButton) -> str:
    """Press ``button`` in the message box shown; returns its text."""
    box = _box(qtbot)
    text = box.text()
    clicked = box.button(button)
    assert clicked is not None
    clicked.click()
    return text


def _preview(qtbot: QtBot, window: MainWindow, path: Path) -> tuple[
        ConversationPreviewDialog, asyncio.Task[ImportSummary | None]]:
    """Start Import Conversation on ``path``; returns its preview dialog (first preview
    shown) and the import's task."""
    opened: list[ConversationPreviewDialog] = []
    task = spawn(window.import_conversation(path, opened=opened.append))
    qtbot.waitUntil(lambda: bool(opened) and opened[0].summary is not None, timeout=30_000)
    return opened[0], task


def test_preview_names_the_format_counts_and_samples_and_writes_nothing(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    path = _conversation(tmp_path)
    dialog, task = _preview(qtbot, window, path)
    assert "LoCoMo sessions" in dialog.header.text() and "40 messages" in dialog.header.text()
    summary = dialog.summary
    assert summary is not None and summary.dry_run and not summary.cancelled
    kept, left = summary.decisions["inserted"], summary.decisions["not_salient"]
    assert 0 < kept < TURNS and kept + left == TURNS
    assert f"Stored as new: {kept}" in dialog.counts.text()
    assert f"Left out (not salient): {left}" in dialog.counts.text()
    # samples of each decision with their text ("speaker: words")
    items = [dialog.samples.topLevelItem(i) for i in range(dialog.samples.topLevelItemCount())]
    groups = {item.data(0, Qt.ItemDataRole.UserRole): item for item in items if item}
    assert set(groups) == {"inserted", "not_salient"}
    first = groups["inserted"].child(0)
    assert first is not None and first.text(0).startswith("Message ")
    assert first.text(1).startswith("Caroline: ")
    assert groups["not_salient"].childCount() == 6  # five samples and "… and N more"
    more = groups["not_salient"].child(5)
    assert more is not None and more.text(0) == f"… and {left - 5} more"
    assert dialog.import_button.isEnabled()
    assert dialog.import_button.text() == f"Import {kept} memories"
    # nothing was written: no record, no import in the log
    session = _session(window)
    assert _count(qtbot, window) == 0
    assert run(qtbot, session.runner.run(session.engine.imports)) == []
    dialog.reject()
    qtbot.waitUntil(task.done)
    assert task.result() is None
    assert _count(qtbot, window) == 0


def test_keep_all_recomputes_the_preview_and_confirm_writes_what_it_showed(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    """Through the app's child-process import: the cut previewed is the cut imported."""
    window = make_window(bulk_import=child_import)
    open_store(qtbot, window, tmp_path / "store")
    path = _conversation(tmp_path)
    dialog, task = _preview(qtbot, window, path)
    with qtbot.waitSignal(dialog.preview_shown, timeout=30_000) as shown:
        dialog.keep.setCurrentIndex(dialog.keep.findData("all"))
    every: ImportSummary = shown.args[0]
    assert every.decisions["inserted"] == TURNS and every.decisions["not_salient"] == 0
    assert "every turn" in dialog.status.text()
    with qtbot.waitSignal(dialog.preview_shown, timeout=30_000) as shown:
        dialog.keep.setCurrentIndex(dialog.keep.findData("top"))  # 50 % by default
    assert shown.args[0].decisions["inserted"] == TURNS // 2
    with qtbot.waitSignal(dialog.preview_shown, timeout=30_000):
        dialog.keep.setCurrentIndex(dialog.keep.findData("all"))
    assert _count(qtbot, window) == 0  # three previews, nothing written
    dialog.import_button.click()
    qtbot.waitUntil(task.done, timeout=60_000)
    progress = next(d for d in window.findChildren(ImportProgressDialog) if d.isVisible())
    assert not progress.running and progress.button.text() == "Close"
    summary = task.result()
    assert summary is not None
    assert summary.import_id and summary.format == "locomo" and summary.keep == "every turn"
    assert summary.counts["inserted"] == TURNS
    assert _count(qtbot, window) == TURNS
    # the stored turns are the previewed ones, with their speakers
    stored = run(qtbot, _session(window).runner.run(
        lambda: sorted(r.content for r in _session(window).engine.get_many(
            [o.record_id for o in summary.outcomes if o.record_id]))))
    assert stored == sorted(o.text for o in every.outcomes)


def test_the_import_summary_is_read_only_sortable_and_filterable(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    path = _conversation(tmp_path)
    dialog, task = _preview(qtbot, window, path)
    dialog.import_button.click()
    qtbot.waitUntil(task.done, timeout=60_000)
    shown = next(d for d in window.findChildren(ImportProgressDialog) if d.isVisible())
    table = shown.outcomes
    assert table.proxy.rowCount() == TURNS
    left = shown.summary.decisions["not_salient"] if shown.summary else 0
    index = table.proxy.index(0, 2)
    assert not table.proxy.flags(index) & Qt.ItemFlag.ItemIsEditable
    table.show_decision("not_salient")
    assert left and [o.decision for o in table.visible_outcomes()] == ["not_salient"] * left
    table.view.sortByColumn(0, Qt.SortOrder.DescendingOrder)
    lines = [o.line for o in table.visible_outcomes()]
    assert lines == sorted(lines, reverse=True)
    cell = str(table.proxy.data(table.proxy.index(0, 1)))
    assert cell == "Left out (not salient)"  # words, not the code
    shown.accept()


def test_an_unknown_format_names_the_accepted_ones_and_not_import_finished(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    path = tmp_path / "notes.json"
    path.write_text(json.dumps({"title": "my notes", "items": [1, 2]}), encoding="utf-8")
    task = spawn(window.import_conversation(path))
    box = _box(qtbot)
    assert box.windowTitle() == "Not a conversation Mnemoscope reads"
    assert "Import finished" not in box.windowTitle() + box.text()
    assert "Accepted:" in box.informativeText() and "LoCoMo" in box.informativeText()
    assert not window.findChildren(ConversationPreviewDialog)
    _answer(qtbot, QMessageBox.StandardButton.Ok)
    qtbot.waitUntil(task.done)
    assert task.result() is None and _count(qtbot, window) == 0


def test_undo_from_the_imports_window_restores_the_store(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    assert run(qtbot, window.run_import(_demo())) is not None
    before = _count(qtbot, window)
    path = _conversation(tmp_path)
    dialog, task = _preview(qtbot, window, path)
    kept = dialog.summary.written if dialog.summary else 0
    dialog.import_button.click()
    qtbot.waitUntil(task.done, timeout=60_000)
    assert kept and _count(qtbot, window) == before + kept
    imports = ImportsDialog(_session(window), _session(window).runner, window)
    imports.show()
    qtbot.waitUntil(imports.refresh().done)
    assert imports.table.topLevelItemCount() == 2  # the demo and the conversation
    newest = imports.table.topLevelItem(0)
    assert newest is not None and newest.text(1) == "locomo.json"
    assert (newest.text(2), newest.text(3)) == ("LoCoMo sessions", "assistant")
    assert f"stored as new {kept}" in newest.text(4)
    demo = imports.table.topLevelItem(1)
    assert demo is not None and (demo.text(2), demo.text(3)) == ("JSONL memories", "")
    undo = spawn(imports.undo(imports.entries[0].id))
    question = _answer(qtbot, QMessageBox.StandardButton.Yes)
    assert question == f"Remove {kept} inserted records?"
    qtbot.waitUntil(undo.done, timeout=30_000)
    assert undo.result() is not None
    assert _count(qtbot, window) == before
    qtbot.waitUntil(lambda: window.records.model.total == before and
                    window.records.model.settled)
    newest = imports.table.topLevelItem(0)
    assert newest is not None and newest.text(5).startswith("undone")
    assert not imports.undo_button.isEnabled()  # an undone import cannot be undone again
    # declining changes nothing
    first_demo = imports.entries[1].id
    declined = spawn(imports.undo(first_demo))
    assert _answer(qtbot, QMessageBox.StandardButton.No).startswith("Remove ")
    qtbot.waitUntil(declined.done)
    assert declined.result() is None and _count(qtbot, window) == before
    imports.accept()


def test_edit_undo_right_after_an_import_takes_the_import_back(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    dialog = ImportProgressDialog("Import", window)
    summary = run(qtbot, window.run_import(_conversation(tmp_path), conversation_agent="a",
                                           dialog=dialog))
    dialog.accept()
    assert summary is not None
    kept = summary.written
    assert 0 < kept == summary.counts["inserted"] and _count(qtbot, window) == kept
    assert window.undo_action.isEnabled()
    assert window.undo_action.text() == f"&Undo Import locomo.json ({kept} records)"
    window.undo_action.trigger()
    assert _answer(qtbot, QMessageBox.StandardButton.No) == f"Remove {kept} inserted records?"
    # declined: still offered, nothing removed
    qtbot.waitUntil(lambda: window.undo_action.isEnabled())
    assert _count(qtbot, window) == kept
    window.undo_action.trigger()
    _answer(qtbot, QMessageBox.StandardButton.Yes)
    qtbot.waitUntil(lambda: _count(qtbot, window) == 0, timeout=30_000)
    qtbot.waitUntil(lambda: window.records.model.total == 0)
    assert not window.undo_action.isEnabled()  # no redo of an import either
    assert not window.redo_action.isEnabled()


def test_stop_preview_shows_what_was_decided_so_far(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    path = _conversation(tmp_path, turns=3000)
    dialog, task = _preview(qtbot, window, path)  # the default cut: a few turns, at once

    def on_progress(value: int) -> None:
        if value > 0 and dialog.running:
            dialog.stop_preview()

    dialog.bar.valueChanged.connect(on_progress)
    with qtbot.waitSignal(dialog.preview_shown, timeout=120_000) as shown:
        dialog.keep.setCurrentIndex(dialog.keep.findData("all"))
    stopped: ImportSummary = shown.args[0]
    # stopped within the first chunk the pipeline decides (its outcomes come a chunk at a time)
    assert stopped.cancelled and len(stopped.outcomes) < 3000
    assert dialog.status.text().startswith("Preview stopped after")
    assert dialog.import_button.isEnabled() == bool(stopped.outcomes)
    assert _count(qtbot, window) == 0
    dialog.reject()
    qtbot.waitUntil(task.done)


# -- the import dialog after a cancel (issue 20's state bugs) --------------------------------

def _stopped_summary(lines: int) -> ImportSummary:
    return ImportSummary("in.jsonl", [LineOutcome(n, "inserted", f"id-{n}") for n in
                                      range(1, lines + 1)], True)


def test_after_a_cancel_progress_does_not_overwrite_cancelling(qtbot: QtBot) -> None:
    dialog = ImportProgressDialog("Import")
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.set_progress(300, 1000)
    dialog.button.click()
    assert dialog.label.text().startswith("Cancelling")
    dialog.set_progress(512, 1000)  # the import reports until it reaches the next chunk
    assert dialog.label.text().startswith("Cancelling")
    assert dialog.bar.value() == 512


def test_after_a_cancel_close_is_enabled_and_the_bar_stays_where_it_stopped(
        qtbot: QtBot) -> None:
    dialog = ImportProgressDialog("Import")
    qtbot.addWidget(dialog)
    dialog.show()
    dialog.set_progress(512, 1000)
    dialog.button.click()
    dialog.finish(_stopped_summary(512))
    assert dialog.button.text() == "Close" and dialog.button.isEnabled()
    assert (dialog.bar.value(), dialog.bar.maximum()) == (512, 1000)  # not 100 %
    dialog.set_progress(1000, 1000)  # a report relayed after the end changes nothing
    assert dialog.bar.value() == 512 and dialog.label.text().startswith("Import cancelled")
    dialog.button.click()
    assert not dialog.isVisible()


def _laid_out(dialog: QDialog) -> QSize:
    """The dialog's size once its layout took the new texts in (as the next paint would)."""
    layout = dialog.layout()
    assert layout is not None
    layout.activate()
    return dialog.size()


def test_the_import_dialogs_keep_their_size_as_messages_appear(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    dialog = ImportProgressDialog("Import")
    qtbot.addWidget(dialog)
    dialog.show()
    size = _laid_out(dialog)
    dialog.set_progress(10, 100_000)
    assert _laid_out(dialog) == size
    dialog.button.click()
    assert _laid_out(dialog) == size
    dialog.finish(_stopped_summary(40))
    assert _laid_out(dialog) == size
    failed = ImportProgressDialog("Import")
    qtbot.addWidget(failed)
    failed.show()
    size = _laid_out(failed)
    failed.fail("not a conversation format Mnemoscope reads (a JSON object with keys items, "
                "title). Accepted: a JSON list of {speaker|role, content, ts} objects (or "
                "{\"messages\": [...]}); OpenAI chat: {\"messages\": [{\"role\", \"content\"}]}, "
                "content a string or text parts; Anthropic messages; LoCoMo; a transcript")
    assert _laid_out(failed) == size
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    preview, task = _preview(qtbot, window, _conversation(tmp_path))
    size = _laid_out(preview)
    with qtbot.waitSignal(preview.preview_shown, timeout=30_000):
        preview.keep.setCurrentIndex(preview.keep.findData("all"))
    assert _laid_out(preview) == size
    preview.reject()
    qtbot.waitUntil(task.done)


def _demo() -> Path:
    from tests.ui.conftest import DEMO

    return DEMO


def test_walkthrough_demo_previewed_locomo_import_retrieval_and_undo(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    """Issue 20's walkthrough: an empty store, the demo data, a LoCoMo conversation previewed
    with keep-all and imported through the app's child process, one of its turns found in
    Retrieval, a paraphrase of it simulated through the Pipeline view (nothing written), and
    the import undone: the store is the demo's again."""
    window = make_window(bulk_import=child_import)
    open_store(qtbot, window, tmp_path / "store")
    assert _count(qtbot, window) == 0
    demo = ImportProgressDialog("Import", window)
    assert run(qtbot, window.run_import(_demo(), dialog=demo), timeout=120) is not None
    demo.accept()
    session = _session(window)
    demo_state = _state(qtbot, window)
    dialog, task = _preview(qtbot, window, _conversation(tmp_path))
    with qtbot.waitSignal(dialog.preview_shown, timeout=30_000):
        dialog.keep.setCurrentIndex(dialog.keep.findData("all"))
    assert dialog.summary is not None and dialog.summary.decisions["inserted"] == TURNS
    assert _state(qtbot, window) == demo_state  # the preview wrote nothing
    dialog.import_button.click()
    qtbot.waitUntil(task.done, timeout=120_000)
    summary = task.result()
    assert summary is not None and summary.counts["inserted"] == TURNS
    next(d for d in window.findChildren(ImportProgressDialog) if d.isVisible()).accept()
    assert _count(qtbot, window) == len(demo_state) + TURNS
    # one of its turns, found in Retrieval by its words
    turn = next(o for o in summary.outcomes if o.line == 7)
    retrieval = window.observe.retrieval
    retrieval.query_edit.setText(turn.text.split(": ", 1)[1])
    retrieval.agent_edit.setText("assistant")
    bundle = run(qtbot, retrieval.retrieve())
    assert bundle is not None and turn.record_id in [r.id for r in bundle.records]
    # a paraphrase of that turn, simulated through the pipeline: every stage, nothing written
    imported = _state(qtbot, window)
    steps = session.undo_stack.count()
    speaker, words = turn.text.split(": ", 1)
    pipeline = window.observe.pipeline
    pipeline.content_edit.setPlainText(f"{words} (as {speaker} put it)")
    pipeline.agent_edit.setText("assistant")
    QTest.mouseClick(pipeline.simulate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: pipeline.run is not None, timeout=10_000)
    assert pipeline.run is not None and pipeline.run.simulated
    run(qtbot, pipeline.continue_run(), timeout=60)
    assert pipeline.run.done and pipeline.run.result is not None
    assert "simulated: nothing was written" in pipeline.status_label.text()
    assert _state(qtbot, window) == imported  # the store is unchanged, record for record
    assert session.undo_stack.count() == steps
    # undo the import from the Imports window: back to the demo's records
    imports = ImportsDialog(session, session.runner, window)
    imports.show()
    qtbot.waitUntil(imports.refresh().done)
    undo = spawn(imports.undo(imports.entries[0].id))
    assert _answer(qtbot, QMessageBox.StandardButton.Yes) == f"Remove {TURNS} inserted records?"
    qtbot.waitUntil(undo.done, timeout=30_000)
    imports.accept()
    assert _state(qtbot, window) == demo_state
    bundle = run(qtbot, retrieval.retrieve())
    assert bundle is not None and turn.record_id not in [r.id for r in bundle.records]
