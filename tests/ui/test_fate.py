"""Fate view (issue 9): the fate of a merged record names the survivor and can jump to it."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

from pytestqt.qtbot import QtBot

from engine.ingest.kinds import Action
from engine.memory_engine import MemoryEngine
from engine.records import NewMemory
from engine.store import StoreSpec
from tests.engine.ingest.conftest import TableEmbedder
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow
from ui.records.record_links import RecordRef
from ui.shared.session import StoreSession


def test_merged_record_names_the_survivor(qtbot: QtBot, tmp_path: Path,
                                          make_window: Callable[..., MainWindow]) -> None:
    table = TableEmbedder()
    stored, paraphrase = "Bob takes his coffee black", "Bob always has black coffee"
    table.pair(stored, paraphrase, 0.92)  # the human tier merges from 0.90
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")), embedder=table)
    try:
        first = engine.ingest(NewMemory(stored))
        second = engine.ingest(NewMemory(paraphrase))
    finally:
        engine.close()
    assert second.action is Action.MERGED and first.record is not None
    survivor = first.record.id
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    window.nav.setCurrentRow(list(window.views).index("fate"))
    view = window.fate
    view.id_edit.setText(second.incoming_id)
    view.show_button.click()
    qtbot.waitUntil(lambda: view.fate is not None)
    # issue 19: records are named by their text, the id secondary; the full ids are on hover
    assert view.status_label.text() == (
        f"‘{paraphrase}’ · {second.incoming_id[:8]} — Merged into ‘{stored}’ · {survivor[:8]}")
    assert second.incoming_id in view.status_label.toolTip()
    assert survivor in view.status_label.toolTip()
    items = [view.steps.topLevelItem(i) for i in range(view.steps.topLevelItemCount())]
    stories = [item.text(2) for item in items if item is not None]
    assert f"merged into ‘{stored}’ · {survivor[:8]} (similarity 0.920 ≥ threshold 0.90)" \
        in stories
    assert not any(survivor in s for s in stories)
    whats = [item.text(1) for item in items if item is not None]
    assert "Merged into another record" in whats and "merged_into" not in whats
    whens = [item.text(0) for item in items if item is not None]
    assert whens and not any(re.search(r"\d{4}-\d\d-\d\dT", w) for w in whens)  # not ISO
    assert all("(UTC)" in item.toolTip(0) for item in items if item is not None)
    assert "Bob always has black coffee" in view.content_label.text()
    # a merged record has no decay forecast and no warning: no empty lines above its story
    # (they left a gap of two lines)
    assert view.forecast_label.isHidden() and view.warning_label.isHidden()
    layout = view.layout()
    assert layout is not None
    gap = view.steps.geometry().top() - view.content_label.geometry().bottom()
    assert gap <= layout.spacing() + 2
    assert view.open_button.isVisible()
    view.open_button.click()  # → the Records view shows the survivor
    assert window.stack.currentWidget() is window.records
    qtbot.waitUntil(lambda: window.records.detail.record is not None
                    and window.records.detail.record.id == survivor)
    # the survivor's story names the memory it absorbed (no longer stored) by its last text
    window.show_fate(survivor)
    qtbot.waitUntil(lambda: view.fate is not None and view.fate.record_id == survivor)
    items = [view.steps.topLevelItem(i) for i in range(view.steps.topLevelItemCount())]
    stories = [item.text(2) for item in items if item is not None]
    assert any(f"absorbed the incoming memory ‘{paraphrase}’" in s for s in stories)
    assert not any(second.incoming_id in s for s in stories)
    view.steps.setCurrentItem(next(item for item in items if item is not None
                                   and "absorbed" in item.text(2)))
    assert view.current_step_record() == RecordRef(second.incoming_id, paraphrase)


def test_the_story_shown_goes_on_when_its_record_is_edited_and_deleted(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    """Show fate, then edit and delete the record in Records: the Fate view said "Alive" with
    the words from before the edit until it was asked again."""
    engine = MemoryEngine.open(StoreSpec(str(tmp_path / "store")))
    try:
        record = engine.ingest(NewMemory("Answered a billing question about the mobile app")
                               ).record
    finally:
        engine.close()
    assert record is not None
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    view, session = window.fate, window.records.session
    assert isinstance(session, StoreSession)
    window.show_fate(record.id)
    qtbot.waitUntil(lambda: view.fate is not None and view.fate.status == "alive")

    run(qtbot, session.update(record.id,
                              {"content": "Answered a billing question about the web app"}))
    qtbot.waitUntil(lambda: "web app" in view.content_label.text())
    assert "mobile app" not in view.status_label.text()
    run(qtbot, window.records.delete_records([record.id]))
    qtbot.waitUntil(lambda: view.fate is not None and view.fate.status == "deleted")
    assert "Deleted" in view.status_label.text()
