"""A Chroma server store in the window before its full view is read (issue 24): the first page
and filtered pages come from the server, Find similar asks the server's index, and every record
is read into the process only when a feature needs them (a sort Chroma cannot do, Timeline),
with the read's progress and Cancel in the status bar and over the waiting views; a cancelled
read leaves the store open and browsable.

The full view's load is held back by the test (:class:`HeldView` waits for the test's word
before reading), so "before the view finished" is a fact of the test, not a race.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtWidgets import QMessageBox
from pytestqt.qtbot import QtBot

from engine.errors import Cancelled
from engine.memory_engine import MemoryEngine
from engine.query import RecordQuery, SortKey
from engine.records import Layer, MemoryRecord, NewMemory, RecordState
from engine.store import MemoryStore, StoreSpec
from engine.store.chroma_store import CancelFn, ProgressFn
from tests.ui.conftest import open_store, run
from ui.main_window import MainWindow
from ui.records.consolidate_view import ConsolidateDialog
from ui.records.record_links import RecordRef
from ui.records.records_model import COLUMNS
from ui.shared.session import StoreSession
from ui.shared.tasks import spawn

pytestmark = [pytest.mark.server, pytest.mark.slow,
              pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")]

NOW = 1_767_225_600_000.0
COUNT = 900
HANG_GUARD = 120.0  # seconds: only so a broken test cannot hang the run (never reached)


class HeldView(MemoryEngine):
    """The real engine, whose deferred view is read only once the test releases it."""

    release = threading.Event()

    def load_view(self, progress: ProgressFn | None = None,
                  cancelled: CancelFn | None = None) -> int:
        if progress is not None:
            progress(0, self.count())
        while not self.release.wait(0.05):
            if cancelled is not None and cancelled():
                raise Cancelled("the test's held view load was cancelled")
        return super().load_view(progress, cancelled)


def records() -> list[MemoryRecord]:
    """Record i: agent a{i%3}, layer by i%3, every 10th archived, "Harbour" in every 4th."""
    layers = (Layer.SEMANTIC, Layer.EPISODIC, Layer.PROCEDURAL)
    return [MemoryRecord.create(NewMemory(
        content=f"server record {i}" + (" near the HARBOUR" if i % 4 == 0 else ""),
        agent_id=f"a{i % 3}", layer=layers[i % 3], importance=(i % 10) / 10,
        state=RecordState.ARCHIVED if i % 10 == 9 else RecordState.ACTIVE), now_ms=NOW + i)
        for i in range(COUNT)]


@pytest.fixture(scope="module")
def server_store(chroma_server_url: str) -> tuple[StoreSpec, list[MemoryRecord]]:
    """COUNT records with random unit vectors; record 1's is record 0's plus a little noise
    (a planted near-duplicate, cosine ~0.99; other pairs are near 0)."""
    spec = StoreSpec(chroma_server_url, collection="gui-server-pages")
    batch = records()
    vectors = np.random.default_rng(3).standard_normal((COUNT, 384)).astype(np.float32)
    vectors[1] = vectors[0] + 0.1 * vectors[1]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = MemoryStore.open(spec, now_ms=NOW)
    for start in range(0, COUNT, 300):
        store.write(batch[start:start + 300], vectors[start:start + 300])
    store.close()
    return spec, batch


def reading(session: StoreSession) -> bool:
    """The session's read of every record is running (a call: it changes between asserts)."""
    return session.view_loading


def held_window(make_window: Callable[..., MainWindow]) -> MainWindow:
    """A window whose stores read their deferred view only once the test releases it."""
    HeldView.release.clear()
    return make_window(open_engine=lambda s: HeldView.open(s, defer_view=True))


def test_the_window_browses_a_server_store_before_its_full_view(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        server_store: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, batch = server_store
    window = held_window(make_window)
    model = window.records.model
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and session.indexing and not session.engine.view_ready
        # The first page: the server's newest written records, archived ones hidden.
        shown = [r for r in reversed(batch) if r.state is not RecordState.ARCHIVED]
        assert model.preview and model.total == len(shown)
        first = [model.record_at(i) for i in range(3)]
        assert [r.id if r else None for r in first] == [r.id for r in shown[:3]]
        assert "newest written first, from the store" in window.records.count_label.text()
        # Nothing reads every record until a feature needs them (issue 24): no progress, and
        # the views that need them say so, with the way to read them.
        assert not reading(session) and not window.index_label.isVisibleTo(window)
        assert window.no_store["map"].title() == "Map needs every record in this process"
        assert "not been read yet" in window.no_store["map"].text()
        assert window.no_store["map"].button_texts() == ["Read Every Record"]
        assert not window.no_store["records"].is_shown()
        # A filter with the text filter: Chroma answers it.
        model.set_query(RecordQuery(agent_id="a1", layer=Layer.EPISODIC, text="harbour"))
        qtbot.waitUntil(lambda: model.settled and model.query.text == "harbour")
        wanted = [r.id for r in shown if r.agent_id == "a1" and "HARBOUR" in r.content]
        assert model.preview and model.total == len(wanted)
        assert model.loaded_ids() == wanted
        assert not reading(session)
        # A sort Chroma cannot do needs every record: it asks for them, and says so.
        importance = next(n for n, c in enumerate(COLUMNS) if c.sort is SortKey.IMPORTANCE)
        model.sort(importance)
        qtbot.waitUntil(lambda: model.waiting)
        assert model.waiting_for == "sorting by importance"
        qtbot.waitUntil(lambda: "reading 0 of" in window.index_label.text())
        assert window.index_label.text() == f"Sorting by importance: reading 0 of {COUNT}"
        assert window.index_label.toolTip() == \
            f"Sorting by importance needs every record in this process: reading 0 of {COUNT}"
        assert window.index_label.isVisibleTo(window) and reading(session)
        assert window.no_store["map"].title().startswith(
            "Map needs every record in this process: reading")
        HeldView.release.set()
        qtbot.waitUntil(lambda: not session.indexing, timeout=int(HANG_GUARD * 1000))
        qtbot.waitUntil(lambda: model.settled and not model.waiting,
                        timeout=int(HANG_GUARD * 1000))
        assert (model.preview, model.total) == (False, len(wanted))
        rows = [model.record_at(i) for i in range(len(wanted))]
        importances = [r.importance for r in rows if r is not None]
        assert len(importances) == len(wanted) and importances == sorted(importances)
        assert not window.no_store["map"].is_shown()
        assert not window.index_label.isVisibleTo(window)
    finally:
        HeldView.release.set()


def test_find_similar_asks_the_server_before_the_full_view(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        server_store: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, batch = server_store
    window = held_window(make_window)
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None
        # The table's context menu offers Find similar before the full view is read.
        model = window.records.model
        model.set_query(RecordQuery(text="server record 0 near"))  # the server finds it
        qtbot.waitUntil(lambda: model.settled and model.total == 1)
        assert model.preview and model.loaded_ids() == [batch[0].id]
        window.records.table.selectRow(0)
        find = next(a for a in window.records.table.actions() if a.text() == "Find similar")
        assert find.isEnabled()
        fate = next(a for a in window.records.table.actions() if a.text() == "Show fate")
        assert not fate.isEnabled()  # Fate works on the full view
        window.nav.setCurrentRow(list(window.views).index("budget"))
        find.trigger()
        assert window.stack.currentWidget() is window.records
        similar = window.records.similar
        qtbot.waitUntil(lambda: bool(similar.ids()), timeout=int(HANG_GUARD * 1000))
        assert similar.isVisibleTo(window) and len(similar.ids()) == 20
        assert similar.ids()[0] == batch[1].id and similar.cosines()[0] > 0.98
        assert similar.cosines() == sorted(similar.cosines(), reverse=True)
        assert "most similar to" in similar.title.text()
        # the server's index answered: nothing read every record, nothing started to
        assert not session.engine.view_ready and not reading(session)
        # a neighbour opens in the detail panel (read by id from the server)
        nearest = similar.tree.topLevelItem(0)
        assert nearest is not None
        similar.tree.setCurrentItem(nearest)
        ref = similar.current_record()
        assert ref is not None and ref.id == batch[1].id and ref.text == batch[1].content
        similar.record_activated.emit(ref.id)
        qtbot.waitUntil(lambda: window.records.detail.record is not None
                        and window.records.detail.record.id == batch[1].id)
        assert not reading(session)
    finally:
        HeldView.release.set()


def test_opening_timeline_reads_every_record_with_progress_and_cancel_keeps_the_store(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        server_store: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, batch = server_store
    window = held_window(make_window)
    model = window.records.model
    timeline = window.no_store["timeline"]
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and not reading(session)
        window.nav.setCurrentRow(list(window.views).index("timeline"))
        assert reading(session) and session.view_wanted_by == "Timeline"
        qtbot.waitUntil(lambda: "reading 0 of" in window.index_label.text())
        assert window.index_label.text() == f"Timeline: reading 0 of {COUNT}"
        assert window.index_label.toolTip() == \
            f"Timeline needs every record in this process: reading 0 of {COUNT}"
        assert window.index_label.isVisibleTo(window) and window.index_cancel.isEnabled()
        qtbot.waitUntil(lambda: timeline.title().endswith(f"reading 0 of {COUNT}"))
        assert timeline.title().startswith("Timeline needs every record in this process")
        assert timeline.button_texts() == ["Cancel"]
        assert not window.read_view_action.isEnabled()
        # Cancel: the read stops, the store stays open and browsable.
        window.index_cancel.click()
        qtbot.waitUntil(lambda: not reading(session), timeout=int(HANG_GUARD * 1000))
        assert window.session is session and session.indexing and session.indexing_cancelled
        assert not window.index_label.isVisibleTo(window)
        assert timeline.title() == "Timeline needs every record in this process"
        assert "cancelled" in timeline.text() and timeline.button_texts() == \
            ["Read Every Record"]
        assert window.read_view_action.isEnabled()
        assert window.store_label.text().startswith("server:")
        assert "cancelled" not in window.banner_label.text() or not window.banner.isVisible()
        model.set_query(RecordQuery(agent_id="a2"))
        qtbot.waitUntil(lambda: model.settled and model.query.agent_id == "a2")
        wanted = [r.id for r in reversed(batch)
                  if r.agent_id == "a2" and r.state is not RecordState.ARCHIVED]
        assert model.preview and model.total == len(wanted)
        assert model.loaded_ids() == wanted[:len(model.loaded_ids())]
        # Asked again (the view's button): this time the read completes and Timeline opens.
        HeldView.release.set()
        window.read_view_action.trigger()
        assert reading(session)
        qtbot.waitUntil(lambda: not session.indexing, timeout=int(HANG_GUARD * 1000))
        assert session.engine.view_ready and not timeline.is_shown()
        assert window.stack.currentWidget() is window.observe.timeline
        assert not window.index_label.isVisibleTo(window)
    finally:
        HeldView.release.set()


def test_redaction_on_a_server_store_is_the_engines(
        qtbot: QtBot, make_window: Callable[..., MainWindow], chroma_server_url: str) -> None:
    """With redaction on, the server's pages arrive masked from the engine (the table shows
    what it was given), and a text filter — which must match the masked text — asks for
    every record instead of sending the secret to Chroma's ``where_document``."""
    email = "dana.whitlock@example.org"
    spec = StoreSpec(chroma_server_url, collection="gui-server-secrets")
    batch = [MemoryRecord.create(NewMemory(
        content=f"server memory {i}" + (f", mail {email}" if i % 5 == 0 else "")),
        now_ms=NOW + i) for i in range(30)]
    vectors = np.random.default_rng(5).standard_normal((30, 384)).astype(np.float32)
    store = MemoryStore.open(spec, now_ms=NOW)
    store.write(batch, vectors / np.linalg.norm(vectors, axis=1, keepdims=True))
    store.close()
    window = held_window(make_window)
    model = window.records.model
    try:
        window.redaction_action.trigger()
        assert window.redaction.enabled
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and model.preview and model.total == 30
        rows = [model.record_at(i) for i in range(30)]
        contents = [row.content for row in rows if row is not None]
        assert len(contents) == 30 and not any(email in text for text in contents)
        assert sum("<REDACT:sha256-" in text for text in contents) == 6
        shown = [model.data(model.index(i, 0)) for i in range(30)]
        assert not any(email in text for text in shown)
        assert not reading(session)
        # Find similar's texts come masked from the engine too (all 29 other records).
        window.links.trigger("similar", RecordRef(batch[0].id, batch[0].content))
        similar = window.records.similar
        qtbot.waitUntil(lambda: len(similar.ids()) == 20, timeout=int(HANG_GUARD * 1000))
        items = [similar.tree.topLevelItem(i) for i in range(20)]
        texts = [similar.title.text(), similar.title.toolTip()] + [
            text for item in items if item is not None
            for text in (item.text(1), item.toolTip(1))]
        assert len(texts) == 42 and not any(email in text for text in texts)
        assert "<REDACT:sha256-" in similar.title.text()
        assert not reading(session)
        # Part of the secret typed in the search box: answered by the view, never by Chroma.
        model.set_query(RecordQuery(text="whitlock"))
        qtbot.waitUntil(lambda: model.waiting)
        assert model.waiting_for == "filtering while redaction is on"
        assert reading(session) and session.view_wanted_by == "Filtering while redaction is on"
        HeldView.release.set()
        qtbot.waitUntil(lambda: model.settled and not model.waiting,
                        timeout=int(HANG_GUARD * 1000))
        assert model.total == 0  # the masked text holds no "whitlock"
    finally:
        HeldView.release.set()


def test_consolidate_on_a_server_store_reads_every_record_first(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        server_store: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, _batch = server_store
    window = held_window(make_window)
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and not reading(session)
        assert window.consolidate_action.isEnabled()  # it asks for the records itself
        window.consolidate_action.trigger()
        dialog = window.findChild(ConsolidateDialog)
        assert dialog is not None
        qtbot.waitUntil(lambda: reading(session))
        assert session.view_wanted_by == "Consolidate Duplicates"
        assert not session.engine.store.view_ready and "Comparing" in dialog.summary.text()
        HeldView.release.set()
        qtbot.waitUntil(lambda: dialog.report is not None, timeout=int(HANG_GUARD * 1000))
        report = dialog.report
        assert report is not None and report.scanned > 0 and session.engine.view_ready
        dialog.reject()
    finally:
        HeldView.release.set()


@pytest.mark.qt_log_ignore("This plugin does not support raise",  # offscreen popups
                           "This plugin does not support grabbing the keyboard")
def test_opening_the_agent_list_reads_the_agents(
        qtbot: QtBot, make_window: Callable[..., MainWindow],
        server_store: tuple[StoreSpec, list[MemoryRecord]]) -> None:
    spec, _batch = server_store
    window = held_window(make_window)
    agent = window.records.filters.agent
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and not reading(session) and agent.count() == 1  # Any
        agent.showPopup()
        agent.hidePopup()
        assert reading(session) and session.view_wanted_by == "The agent filter"
        HeldView.release.set()
        qtbot.waitUntil(lambda: agent.count() == 4, timeout=int(HANG_GUARD * 1000))
        assert [agent.itemData(i) for i in range(1, 4)] == ["a0", "a1", "a2"]
    finally:
        HeldView.release.set()


def test_export_reads_every_record_and_gives_up_when_the_read_is_cancelled(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path,
        server_store: tuple[StoreSpec, list[MemoryRecord]],
        monkeypatch: pytest.MonkeyPatch) -> None:
    spec, batch = server_store
    window = held_window(make_window)
    warnings: list[str] = []
    monkeypatch.setattr(QMessageBox, "warning",
                        lambda _parent, _title, text: warnings.append(text))
    try:
        open_store(qtbot, window, spec.location, collection=spec.collection, indexed=False,
                   timeout=HANG_GUARD)
        session = window.session
        assert session is not None and window.export_action.isEnabled()
        first = spawn(window.run_export(tmp_path / "first.jsonl", redact=False))
        qtbot.waitUntil(lambda: reading(session))
        assert session.view_wanted_by == "Export"
        window.index_cancel.click()
        qtbot.waitUntil(first.done, timeout=int(HANG_GUARD * 1000))
        assert first.result() is None and not (tmp_path / "first.jsonl").exists()
        assert warnings == ["Nothing was exported: the store's records were not all read."]
        assert window.session is session and session.indexing
        HeldView.release.set()
        count = run(qtbot, window.run_export(tmp_path / "second.jsonl", redact=False),
                    timeout=HANG_GUARD)
        assert count == len(batch) and session.engine.view_ready
        lines = (tmp_path / "second.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == len(batch)
    finally:
        HeldView.release.set()
