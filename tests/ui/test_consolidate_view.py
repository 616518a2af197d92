"""Store → Consolidate Duplicates (issue 23): a dry run that writes nothing, then stepped by
keyboard or applied at once, each step undoable, deferrals counted in the Review queue."""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import qasync
import shiboken6
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from engine import (
    Action,
    ConsolidationStep,
    DeterministicClock,
    MemoryEngine,
    NewMemory,
    StoreSpec,
)
from engine.ingest import Reason
from tests.engine.ingest.conftest import T0, TableEmbedder
from tests.ui.conftest import open_fresh, open_store, run
from tests.ui.observe_fixtures import BASE, PARAPHRASE
from ui.main_window import MainWindow
from ui.observe.review_view import ReviewView
from ui.records.consolidate_view import (
    MERGED,
    PENDING,
    SKIPPED,
    ConsolidateDialog,
    decision_sentence,
)
from ui.shared.redaction import Redaction
from ui.shared.session import UNDO_BATCH, StoreSession
from ui.shared.tasks import TaskRunner, pending_tasks

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

SHORT, LONG = "Bob takes his coffee black", "Bob always has his coffee black"
EARLY, LATE = "Standup is at 3pm", "Standup is at 5pm"
OTHER = "The build server lives in Frankfurt"


def _open(path: Path, table: TableEmbedder | None = None) -> MemoryEngine:
    return MemoryEngine.open(StoreSpec(str(path)), embedder=table or _table(),
                             clock=DeterministicClock(T0))


def _table() -> TableEmbedder:
    """A paraphrase at cosine 0.90 and a contradiction at 0.95 (the guard holds it)."""
    table = TableEmbedder()
    table.pair(SHORT, LONG, 0.9)
    table.pair(EARLY, LATE, 0.95)
    return table


@pytest.fixture
def planted(tmp_path: Path, qtbot: QtBot, qloop: qasync.QEventLoop,
            runner: TaskRunner) -> Iterator[StoreSession]:
    """A session on a store holding a near-duplicate, a contradiction and an unrelated record,
    stored side by side (``add`` stores as given)."""
    engine = _open(tmp_path / "store")
    for text, importance in ((SHORT, 0.4), (LONG, 0.7), (EARLY, 0.6), (LATE, 0.5),
                             (OTHER, 0.5)):
        engine.add(NewMemory(text, importance=importance))
    session = StoreSession(engine, runner, StoreSpec(str(tmp_path / "store")))
    yield session
    _close(qtbot, session)


def _close(qtbot: QtBot, session: StoreSession) -> None:
    """Close the store and free the session on the GUI thread, as the window does: left to
    the cyclic GC (the undo commands refer to their session), a worker thread that happens to
    allocate would delete Qt objects and crash."""
    _settle(qtbot)
    run(qtbot, session.drain())
    session.engine.close()
    session.deleteLater()
    qtbot.waitUntil(lambda: not shiboken6.isValid(session), timeout=5_000)
    gc.collect()


def _dialog(qtbot: QtBot, session: StoreSession, runner: TaskRunner) -> ConsolidateDialog:
    dialog = ConsolidateDialog(session, runner)
    qtbot.addWidget(dialog)
    dialog.show()
    _wait(qtbot, dialog.start())
    return dialog


def _wait(qtbot: QtBot, task: asyncio.Task[None]) -> None:
    qtbot.waitUntil(task.done, timeout=30_000)
    task.result()


def _choose(dialog: ConsolidateDialog, index: int) -> None:
    item = dialog.table.topLevelItem(index)
    assert item is not None
    dialog.table.setCurrentItem(item)


def _row(dialog: ConsolidateDialog, action: Action) -> int:
    return next(i for i, r in enumerate(dialog.rows) if r.step.action is action)


def _press(qtbot: QtBot, dialog: ConsolidateDialog, key: Qt.Key) -> None:
    """A key on the list, then wait for the write it starts (Skip writes nothing)."""
    if key == Qt.Key.Key_S:
        QTest.keyClick(dialog.table, key)
        return
    with qtbot.waitSignal(dialog.applied, timeout=20_000):
        QTest.keyClick(dialog.table, key)


def _settle(qtbot: QtBot) -> None:
    """Wait for the undo/redo and view reloads started on the GUI loop to finish."""
    qtbot.waitUntil(lambda: not pending_tasks(), timeout=20_000)


def test_the_dry_run_lists_both_pairs_in_words_and_writes_nothing(
        qtbot: QtBot, planted: StoreSession, runner: TaskRunner) -> None:
    engine = planted.engine
    dialog = _dialog(qtbot, planted, runner)
    assert dialog.summary.text() == ("2 pairs among 5 records: 1 to merge, 1 to send to review "
                                     "(dry run: nothing written yet).")
    merge = dialog.table.topLevelItem(_row(dialog, Action.MERGED))
    review = dialog.table.topLevelItem(_row(dialog, Action.DEFERRED))
    assert merge is not None and review is not None
    assert [merge.text(c) for c in (0, 1, 2, 4)] == ["merge", LONG, SHORT, PENDING]
    assert merge.text(3) == "0.900 ≥ threshold 0.90"  # the human tier merges from 0.90
    assert review.text(0) == "review: may contradict"
    assert {review.text(1), review.text(2)} == {EARLY, LATE}
    # which text survives and why (seed 004: the higher importance), in words, no codes
    assert merge.toolTip(0) == (
        f"Merge: keeps ‘{LONG}’ — its importance 0.70 is higher than 0.40 (the more important "
        f"text survives a merge). ‘{SHORT}’ is folded into it (tags, sources, access counts) "
        "and removed.")
    assert review.toolTip(0) == (f"‘{LATE}’: held for review: may contradict ‘{EARLY}’ — "
                                 "15:00 vs 17:00")
    assert "_" not in review.toolTip(0) + merge.toolTip(3)
    # nothing written: the records, the review queue and the import log are as they were
    assert engine.count() == 5 and engine.review_queue() == [] and engine.imports() == []


def test_stepping_merges_defers_and_undo_restores(
        qtbot: QtBot, planted: StoreSession, runner: TaskRunner) -> None:
    engine = planted.engine
    queue = ReviewView(runner)
    qtbot.addWidget(queue)
    queue.set_session(planted)
    qtbot.waitUntil(lambda: queue.count_label.text() == "0 pending", timeout=10_000)
    dialog = _dialog(qtbot, planted, runner)
    merge, review = _row(dialog, Action.MERGED), _row(dialog, Action.DEFERRED)
    kept, other = dialog.rows[merge].step.kept.id, dialog.rows[merge].step.other.id

    _choose(dialog, merge)
    _press(qtbot, dialog, Qt.Key.Key_A)  # apply the merge
    assert engine.count() == 4 and other not in engine.stored_ids([kept, other])
    assert engine.get(kept).content == LONG and engine.get(kept).merged_from == (other,)
    assert dialog.table.topLevelItem(merge).text(4) == MERGED  # type: ignore[union-attr]
    assert dialog.current_index() == review  # on to the next pair to decide

    _press(qtbot, dialog, Qt.Key.Key_A)  # the contradiction goes to the review queue
    assert engine.count() == 4
    assert [(i.target_id, i.incoming_id) for i in engine.review_queue()] == [
        (dialog.rows[review].step.kept.id, dialog.rows[review].step.other.id)]
    qtbot.waitUntil(lambda: queue.count_label.text() == "1 pending", timeout=10_000)
    assert "1 merged, 1 sent to review" in dialog.summary.text()

    # Edit → Undo, newest first: the review item is withdrawn, then the merged record is back
    planted.undo_stack.undo()
    _settle(qtbot)
    assert engine.review_queue() == []
    qtbot.waitUntil(lambda: queue.count_label.text() == "0 pending", timeout=10_000)
    planted.undo_stack.undo()
    _settle(qtbot)
    assert engine.count() == 5 and engine.get(kept).merged_from == ()
    assert engine.get(other).content == SHORT
    assert [r.state for r in dialog.rows] == [PENDING, PENDING]
    # Redo applies the merge again
    planted.undo_stack.redo()
    _settle(qtbot)
    assert engine.count() == 4 and engine.get(kept).merged_from == (other,)
    assert dialog.rows[merge].state == MERGED
    qtbot.waitUntil(lambda: queue.count_label.text() == "0 pending", timeout=10_000)
    _settle(qtbot)


def test_defer_skip_and_apply_all(qtbot: QtBot, planted: StoreSession,
                                  runner: TaskRunner) -> None:
    engine = planted.engine
    dialog = _dialog(qtbot, planted, runner)
    merge, review = _row(dialog, Action.MERGED), _row(dialog, Action.DEFERRED)
    _choose(dialog, merge)
    _press(qtbot, dialog, Qt.Key.Key_D)  # a person holds the merge for review instead
    step = dialog.rows[merge].step
    assert engine.count() == 5
    assert [(i.target_id, i.incoming_id) for i in engine.review_queue()] == [
        (step.kept.id, step.other.id)]
    assert dialog.current_index() == review
    _press(qtbot, dialog, Qt.Key.Key_S)
    assert dialog.rows[review].state == SKIPPED and len(engine.review_queue()) == 1
    assert not dialog.apply_all_button.isEnabled()  # nothing left to decide

    planted.undo_stack.undo()  # the deferral withdrawn: both pairs can be applied at once
    _settle(qtbot)
    dialog.rows[review].skipped = False
    dialog._update_buttons()
    with qtbot.waitSignal(dialog.applied, timeout=20_000):
        dialog.apply_all_button.click()
    assert engine.count() == 4 and len(engine.review_queue()) == 1
    assert planted.undo_stack.undoText() == "Consolidate 2 pairs"
    planted.undo_stack.undo()  # one step takes both back
    _settle(qtbot)
    assert engine.count() == 5 and engine.review_queue() == []


def test_a_pair_changed_since_the_dry_run_is_refused_with_the_reason(
        qtbot: QtBot, planted: StoreSession, runner: TaskRunner) -> None:
    dialog = _dialog(qtbot, planted, runner)
    merge = _row(dialog, Action.MERGED)
    other = dialog.rows[merge].step.other.id
    planted.engine.update(other, {"content": "Bob has switched to green tea"})
    _choose(dialog, merge)
    QTest.keyClick(dialog.table, Qt.Key.Key_A)
    qtbot.waitUntil(lambda: dialog.status.text() != "", timeout=20_000)
    assert dialog.status.text().startswith(f"Not applied: record {other} changed since")
    assert "Dry Run Again" in dialog.status.text()
    assert dialog.rows[merge].state == PENDING and planted.engine.count() == 5
    assert planted.undo_stack.count() == 0
    _wait(qtbot, dialog.start())  # the store as it is now: no near-duplicate left to merge
    assert [r.step.action for r in dialog.rows] == [Action.DEFERRED]


def test_nothing_to_consolidate_is_an_empty_state(qtbot: QtBot, tmp_path: Path,
                                                  qloop: qasync.QEventLoop,
                                                  runner: TaskRunner) -> None:
    engine = _open(tmp_path / "store")
    for text in (SHORT, EARLY, OTHER):
        engine.add(NewMemory(text))
    session = StoreSession(engine, runner, StoreSpec(str(tmp_path / "store")))
    try:
        dialog = _dialog(qtbot, session, runner)
        assert dialog.rows == [] and dialog.empty_state.is_shown()
        assert dialog.empty_state.title() == "No near-duplicates among 3 records"
        assert dialog.summary.text() == "Dry run over 3 records: nothing to consolidate."
        assert not dialog.apply_all_button.isEnabled()
    finally:
        _close(qtbot, session)


def test_texts_follow_the_redaction_toggle(qtbot: QtBot, tmp_path: Path,
                                           qloop: qasync.QEventLoop,
                                           runner: TaskRunner) -> None:
    mail, again = "Write to bob@example.com about lunch", "Email bob@example.com about lunch"
    table = TableEmbedder()
    table.pair(mail, again, 0.95)
    engine = _open(tmp_path / "store", table)
    engine.add(NewMemory(mail, importance=0.6))
    engine.add(NewMemory(again, importance=0.3))
    session = StoreSession(engine, runner, StoreSpec(str(tmp_path / "store")))
    redaction = Redaction(enabled=True)
    try:
        dialog = ConsolidateDialog(session, runner, redaction=redaction)
        qtbot.addWidget(dialog)
        dialog.show()
        _wait(qtbot, dialog.start())
        item = dialog.table.topLevelItem(0)
        assert item is not None
        shown = item.text(1) + item.toolTip(1) + item.toolTip(0) + dialog.detail.text()
        assert "bob@example.com" not in shown and "<REDACT:" in item.text(1)
        redaction.set_enabled(False)  # shown as stored again, the same pair still selected
        item = dialog.table.topLevelItem(0)
        assert item is not None and item.text(1) == mail and item.text(2) == again
        assert dialog.current_index() == 0 and "bob@example.com" in dialog.detail.text()
    finally:
        _close(qtbot, session)


def test_cancel_stops_the_dry_run(qtbot: QtBot, planted: StoreSession,
                                  runner: TaskRunner) -> None:
    dialog = ConsolidateDialog(planted, runner)
    qtbot.addWidget(dialog)
    dialog.show()
    task = dialog.start()
    dialog.cancel_button.click()
    _wait(qtbot, task)
    assert dialog.summary.text() == "Dry run cancelled: nothing was compared or written."
    assert dialog.rows == [] and not dialog.cancel_button.isVisible()
    assert dialog.again_button.isEnabled()


def test_the_store_menu_opens_it(qtbot: QtBot, tmp_path: Path,
                                 make_window: Callable[..., MainWindow]) -> None:
    """The window's own store (no model: the word-overlap path) and its menu action."""

    engine = open_fresh(StoreSpec(str(tmp_path / "store")))
    engine.add(NewMemory(BASE, importance=0.6))
    engine.add(NewMemory(PARAPHRASE, importance=0.3))
    engine.close()
    window = make_window()
    open_store(qtbot, window, tmp_path / "store")
    assert window.consolidate_action.isEnabled()
    window.consolidate_action.trigger()
    dialog = window.findChild(ConsolidateDialog)
    assert dialog is not None
    qtbot.waitUntil(lambda: len(dialog.rows) == 1, timeout=20_000)
    assert dialog.rows[0].step.kept.content == BASE and not dialog.rows[0].step.semantic
    run(qtbot, window.close_store())  # the dialog goes with its store
    qtbot.waitUntil(lambda: not shiboken6.isValid(dialog) or not dialog.isVisible(),
                    timeout=10_000)



def test_a_tie_in_importance_is_said_as_such(planted: StoreSession) -> None:
    """seed 004 keeps the higher importance; on a tie the older record, else either."""
    records = {r.content: r for r in planted.engine.list_records().records}
    kept = records[EARLY]
    other = replace(records[LATE], importance=kept.importance, created_at=kept.created_at)
    step = ConsolidationStep(Action.MERGED, Reason.NEAR_DUPLICATE, kept, other, 0.97, True)
    assert "both have importance 0.60 and the same age: either could be kept" in \
        decision_sentence(step)
    older = replace(kept, created_at=kept.created_at - 1)
    assert "both have importance 0.60: the older record is kept" in \
        decision_sentence(replace(step, kept=older))


class ChromaCalls:
    """A real Chroma collection that records each write call: its kind, its size, and whether
    it ran on the GUI thread."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.calls: list[tuple[str, int, bool]] = []

    def _record(self, kind: str, ids: Sequence[str]) -> None:
        self.calls.append((kind, len(ids),
                           threading.current_thread() is threading.main_thread()))

    def upsert(self, **batch: Any) -> None:
        self._record("upsert", batch["ids"])
        self._inner.upsert(**batch)

    def update(self, **batch: Any) -> None:
        self._record("update", batch["ids"])
        self._inner.update(**batch)

    def delete(self, **batch: Any) -> None:
        self._record("delete", batch["ids"])
        self._inner.delete(**batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


PAIRS = 20
NAMES = ("Ada", "Bea", "Cai", "Dov", "Eli", "Fay", "Gus", "Hal", "Ivo", "Jan", "Kit", "Lev",
         "Mia", "Ned", "Oli", "Pia", "Quin", "Rex", "Sam", "Tess")


def test_apply_all_and_its_undo_write_small_chroma_batches_off_the_gui_thread(
        qtbot: QtBot, tmp_path: Path, qloop: qasync.QEventLoop, runner: TaskRunner) -> None:
    """Chroma's bindings hold the GIL for a whole call, so one write of every merge of an
    Apply All stalled the GUI thread 230-470 ms; the pass and its undo now write UNDO_BATCH
    records per call on a worker (still one step). Deletes stay whole: a delete call costs
    about the same for 8 ids as for 100."""
    table = TableEmbedder()
    pairs = [(f"{name} takes the coffee black", f"{name} always has the coffee black")
             for name in NAMES[:PAIRS]]
    for short, long in pairs:
        table.pair(short, long, 0.9)
    engine = _open(tmp_path / "store", table)
    for short, long in pairs:
        engine.add(NewMemory(short, importance=0.4))
        engine.add(NewMemory(long, importance=0.7))
    before = {r.id: r.content for r in engine.get_many(list(engine.store.view.snapshot().ids))}
    session = StoreSession(engine, runner, StoreSpec(str(tmp_path / "store")))
    store = engine.store
    recording = ChromaCalls(store._collection)
    try:
        dialog = _dialog(qtbot, session, runner)
        assert [r.step.action for r in dialog.rows] == [Action.MERGED] * PAIRS
        store._collection = recording
        with qtbot.waitSignal(dialog.applied, timeout=60_000):
            dialog.apply_all_button.click()
        assert engine.count() == PAIRS
        applied = list(recording.calls)
        assert sum(n for kind, n, _ in applied if kind == "delete") == PAIRS
        assert sum(n for kind, n, _ in applied if kind != "delete") == PAIRS  # the kept ones
        assert max(n for kind, n, _ in applied if kind != "delete") <= UNDO_BATCH < PAIRS
        session.undo_stack.undo()  # one step takes the whole pass back
        _settle(qtbot)
        qtbot.waitUntil(lambda: not session.pending(), timeout=60_000)
        undone = recording.calls[len(applied):]
        assert sum(n for kind, n, _ in undone if kind != "delete") == 2 * PAIRS
        assert max(n for kind, n, _ in undone if kind != "delete") <= UNDO_BATCH
        assert not any(on_gui for _, _, on_gui in recording.calls)
        assert engine.count() == 2 * PAIRS
        # every record back as it was (the merged-away ones restored, the kept ones written
        # back)
        assert {r.id: r.content for r in engine.get_many(list(before))} == before
    finally:
        store._collection = recording._inner
        _close(qtbot, session)
