"""The slow-mo stepper: a paraphrase merge, a gray-zone deferral and a contradiction, stage by
stage, with each stage's panel checked; Continue with a delay; the threshold what-if."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QPoint, QRect, Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QWidget
from pytestqt.qtbot import QtBot

from engine import PairChange, WhatIf
from engine.ingest.kinds import Stage
from engine.redaction import redact_text
from tests.ui.conftest import run
from tests.ui.observe_fixtures import BASE, CONTRADICTION, GRAY, PARAPHRASE, session
from ui.observe.stepper_view import SimilarityBars, StagePanel, StepperView, memory_from_json
from ui.observe.timeline_view import TimelineView
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner

__all__ = ["session"]


@pytest.fixture
def stepper(qtbot: QtBot, runner: TaskRunner, session: StoreSession) -> StepperView:
    view = StepperView(runner)
    qtbot.addWidget(view)
    view.set_session(session)
    return view


def step_all(qtbot: QtBot, view: StepperView, text: str, *, simulate: bool = False) -> None:
    view.content_edit.setPlainText(text)
    assert run(qtbot, view.start(simulate=simulate))
    assert view.run is not None
    for stage in Stage:
        assert view.run.next_stage is stage
        report = run(qtbot, view.step())
        assert report is not None and report.stage is stage
        assert view.stage_list.currentRow() == report.index
        assert "not run yet" not in view.panels[stage].headline.text()


def test_paraphrase_merge_stage_by_stage(qtbot: QtBot, stepper: StepperView,
                                         session: StoreSession, runner: TaskRunner) -> None:
    timeline = TimelineView(runner)
    qtbot.addWidget(timeline)
    timeline.set_session(session)
    stepper.run_finished.connect(timeline.highlight_run)
    with qtbot.waitSignal(stepper.run_finished, timeout=20000):
        step_all(qtbot, stepper, PARAPHRASE)
    panels = stepper.panels
    assert "hash" in panels[Stage.NORMALIZE].headline.text()
    assert "by word overlap" in panels[Stage.EMBED].headline.text()
    bars = panels[Stage.CANDIDATES].bars
    assert bars is not None and bars.candidates
    assert bars.candidates[0][1] >= bars.threshold > bars.floor
    assert f"near duplicate: merged into ‘{BASE}’" in panels[Stage.DECISION].headline.text()
    assert "contradiction check: none found" in panels[Stage.DECISION].headline.text()
    diff = {name: (old, new) for name, old, new in panels[Stage.APPLY].diff_rows()}
    assert diff["Text"][0] == diff["Text"][1] == BASE  # the stored text is kept
    assert diff["Version"] == ("1", "2")
    assert "merged" in panels[Stage.EVENTS].headline.text()
    assert session.engine.count() == 1  # merged into the stored record
    # the timeline receives the run's events (live tail) and highlights them
    assert stepper.run is not None
    incoming = stepper.run.incoming_id
    qtbot.waitUntil(lambda: timeline.highlight_run(incoming) >= 5, timeout=5000)
    kinds = {timeline.data.events[int(i)].kind for i in timeline.data.matching(incoming)}
    assert {"ingest-start", "embed-request", "candidate-match", "merge-applied"} <= kinds


def test_gray_zone_deferral(qtbot: QtBot, stepper: StepperView, session: StoreSession) -> None:
    step_all(qtbot, stepper, GRAY)
    bars = stepper.panels[Stage.CANDIDATES].bars
    assert bars is not None
    assert bars.floor <= bars.candidates[0][1] < bars.threshold  # inside the gray zone
    assert f"in the gray zone of ‘{BASE}’: held for review" in \
        stepper.panels[Stage.DECISION].headline.text()
    assert "held for review" in stepper.panels[Stage.APPLY].headline.text()
    assert len(session.engine.review_queue()) == 1
    assert f"In the gray zone of ‘{BASE}’: held for review" in stepper.status_label.text()
    assert stepper.status_label.toolTip() == "deferred (gray_zone)"  # the codes on hover


def test_contradiction_goes_to_review(qtbot: QtBot, stepper: StepperView,
                                      session: StoreSession) -> None:
    step_all(qtbot, stepper, CONTRADICTION)
    headline = stepper.panels[Stage.DECISION].headline.text()
    assert f"held for review: may contradict ‘{BASE}’ — long vs short" in headline
    items = session.engine.review_queue()
    assert [i.reason for i in items] == ["possible_contradiction"]


SNAKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
RAW_FLOAT = re.compile(r"\d\.\d{4,}")


@pytest.mark.parametrize("text", [PARAPHRASE, GRAY, CONTRADICTION])
def test_stage_panels_are_labelled_words(qtbot: QtBot, stepper: StepperView,
                                         session: StoreSession, text: str) -> None:
    """Every stage panel shows labelled fields in words (no snake_case codes, no raw floats,
    stored records by their text with the id as item data) and its JSON in the Raw tab."""
    step_all(qtbot, stepper, text)
    stored = session.engine.list_records().records[0]
    for stage in Stage:
        panel = stepper.panels[stage]
        fields = panel.fields
        assert [fields.tabs.tabText(i) for i in range(fields.tabs.count())] == ["Fields", "Raw"]
        rows = fields.rows()
        assert rows, stage
        shown = [panel.headline.text(), *(f"{label}: {value}" for label, value in rows)]
        for line in shown:
            assert not SNAKE.search(line), (stage, line)
            assert not RAW_FLOAT.search(line), (stage, line)
        raw = json.loads(fields.raw.toPlainText())  # the raw view is the stage's data
        assert isinstance(raw, dict) and raw
    decision = dict(stepper.panels[Stage.DECISION].fields.rows())
    assert decision["Stored record"].startswith(f"‘{BASE[:20]}")
    assert stored.id[:8] in decision["Stored record"]
    assert stored.id in stepper.panels[Stage.DECISION].fields.record_ids()
    assert decision["Merge threshold"] == f"{stepper.threshold:.2f} (human tier)"
    assert re.fullmatch(r"0\.\d{3} [≥<] threshold \d\.\d{2}", decision["Similarity"])
    candidates = dict(stepper.panels[Stage.CANDIDATES].fields.rows())
    assert candidates["Candidates"] == "1 candidate"
    start = dict(stepper.panels[Stage.START].fields.rows())
    assert start["Incoming memory"].startswith(f"‘{text[:20]}")


def test_redaction_masks_the_stages_already_shown(qtbot: QtBot, stepper: StepperView) -> None:
    secret = "sam.tanaka@example.com"
    step_all(qtbot, stepper, f"{BASE}, write to {secret}")
    shown = [stepper.panels[s].fields.text() + stepper.panels[s].fields.raw.toPlainText()
             for s in Stage]
    assert any(secret in text for text in shown)
    stepper.stage_list.setCurrentRow(2)
    stepper.set_redactor(redact_text)
    for stage in Stage:
        panel = stepper.panels[stage]
        assert secret not in panel.fields.text() + panel.fields.raw.toPlainText(), stage
        assert secret not in "".join(cell for row in panel.diff_rows() for cell in row)
    assert stepper.stage_list.currentRow() == 2


def test_continue_pause_and_speed(qtbot: QtBot, stepper: StepperView) -> None:
    stepper.speed.setValue(30)
    stepper.content_edit.setPlainText(PARAPHRASE)
    assert run(qtbot, stepper.start(simulate=False))
    assert stepper.continue_button.isEnabled() and not stepper.pause_button.isEnabled()
    task_done: list[bool] = []

    async def go() -> None:
        await stepper.continue_run()
        task_done.append(True)

    from ui.shared.tasks import spawn

    spawn(go())
    qtbot.waitUntil(lambda: stepper.pause_button.isEnabled(), timeout=5000)
    stepper.pause()  # stops between stages
    qtbot.waitUntil(lambda: bool(task_done), timeout=10000)
    assert stepper.run is not None and not stepper.run.done
    paused_at = len(stepper.run.reports)
    assert 0 < paused_at < len(Stage)
    run(qtbot, stepper.continue_run())
    assert stepper.run.next_stage is None
    result = stepper.run.result
    assert result is not None and result.action.value == "merged"


def test_stored_memory_and_import_line(qtbot: QtBot, stepper: StepperView,
                                       session: StoreSession, tmp_path: Path) -> None:
    record_id = session.engine.store.view.snapshot().ids[0]
    assert run(qtbot, stepper.load_stored(record_id))
    assert stepper.content_edit.toPlainText() == BASE
    path = tmp_path / "in.jsonl"
    path.write_text("not json\n" + json.dumps({"content": GRAY, "agent_id": "travel",
                                               "layer": "episodic"}) + "\n", "utf-8")
    assert run(qtbot, stepper.open_file(path)) == 2
    assert stepper.next_line()  # the bad first line is reported and skipped
    assert stepper.content_edit.toPlainText() == GRAY
    assert stepper.agent_edit.text() == "travel" and stepper.layer_box.currentText() == \
        "episodic"
    assert stepper.new_memory().source == "import:in.jsonl"
    assert not stepper.next_line()
    assert memory_from_json('{"content": "x", "importance": 0.5}', "s").importance == 0.5


def test_a_stored_memory_is_picked_by_its_words(qtbot: QtBot, stepper: StepperView) -> None:
    """Issue 19: the stored-memory source searches by words; no id to paste."""
    stepper.source_box.setCurrentIndex(1)
    stepper.record_edit.setFocus()
    QTest.keyClicks(stepper.record_edit, "tokyo WINDOW")
    results = stepper.record_results
    qtbot.waitUntil(lambda: not results.isHidden() and results.count() == 1, timeout=10_000)
    item = results.item(0)
    assert item is not None and item.text().startswith(BASE)
    QTest.keyClick(stepper.record_edit, Qt.Key.Key_Return)  # Enter picks the first match
    qtbot.waitUntil(lambda: stepper.content_edit.toPlainText() == BASE, timeout=10_000)
    assert results.isHidden() and stepper.record_edit.text() == ""
    QTest.keyClicks(stepper.record_edit, "no such words")
    qtbot.waitUntil(lambda: not results.isHidden(), timeout=10_000)
    assert results.count() == 1 and "No stored memory contains" in results.item(0).text()


def test_what_if_in_the_view(qtbot: QtBot, stepper: StepperView, session: StoreSession) -> None:
    before = session.engine.count()
    stepper.whatif_value.setValue(0.6)
    result = run(qtbot, stepper.what_if())
    assert result is not None and result.old == 0.85 and result.new == 0.6
    assert "0.85 → 0.60" in stepper.whatif_summary.text()
    assert session.engine.count() == before  # read-only


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_what_if_pairs_read_on_one_line_each_without_scrolling(
        qtbot: QtBot, stepper: StepperView) -> None:
    """Polish: in the narrow what-if box the fixed columns wrapped each text into two cut
    lines and the table scrolled sideways."""
    stepper.resize(1120, 700)  # as in the window at its default size
    stepper.show()
    pairs = tuple(PairChange(f"a{i}", f"b{i}", 0.9 - i / 100, "merge", f"{BASE} ({i})",
                             f"{GRAY} ({i})") for i in range(6))
    stepper.show_what_if(WhatIf(0.85, 0.6, pairs, len(pairs), 40, False))
    table = stepper.whatif_table
    qtbot.waitUntil(lambda: table.horizontalHeader().length() <= table.viewport().width())
    assert not table.wordWrap()
    assert table.columnWidth(1) == table.columnWidth(2) > table.columnWidth(0)


def _store_state(session: StoreSession) -> dict[str, Any]:
    """What an ingest could change: every record, the history, the review queue, the events."""
    engine = session.engine
    snapshot = engine.store.view.snapshot()
    ids = sorted(snapshot.ids[r] for r in snapshot.live_rows.tolist())
    return {"records": {r.id: json.dumps(r.to_json(), sort_keys=True)
                        for r in engine.get_many(ids)},
            "edits": len(engine.edit_history(limit=0)),
            "review": [item.id for item in engine.review_queue()],
            "events": engine.ledger.query("SELECT COUNT(*) AS n FROM events")[0]["n"]}


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")  # shown
def test_simulate_is_the_default_writes_nothing_and_decides_as_ingest(
        qtbot: QtBot, stepper: StepperView, session: StoreSession) -> None:
    """Issue 20: Simulate runs every stage with the same numbers; nothing is written."""
    assert stepper.simulate_button.isDefault() and not stepper.ingest_button.isDefault()
    base = session.engine.get(session.engine.store.view.snapshot().ids[0])
    before = _store_state(session)
    stepper.content_edit.setPlainText(PARAPHRASE)
    QTest.mouseClick(stepper.simulate_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: stepper.run is not None, timeout=10_000)
    assert stepper.run is not None and stepper.run.simulated
    run(qtbot, stepper.continue_run())
    simulated = stepper.run.result
    shown = {stage: stepper.panels[stage].headline.text().split(" · ", 2)[-1]
             for stage in (Stage.DECISION, Stage.APPLY)}
    assert "simulated: nothing was written" in stepper.status_label.text()
    assert "simulated: nothing written (an ingest would write 1 record)" in \
        stepper.panels[Stage.PERSIST].headline.text()
    assert stepper.panels[Stage.EVENTS].headline.text().endswith("simulated: none emitted")
    assert _store_state(session) == before  # no record, history row, review item or event
    assert session.engine.get(base.id).confidence == base.confidence
    assert session.undo_stack.count() == 0

    # Ctrl+Shift+Return simulates too, from the memory's text box
    stepper.show()
    qtbot.waitExposed(stepper)
    stepper.activateWindow()
    stepper.content_edit.setFocus()
    qtbot.waitUntil(stepper.content_edit.hasFocus, timeout=5_000)
    first = stepper.run
    QTest.keyClick(stepper.content_edit, Qt.Key.Key_Return,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    # the shortcut moves the focus while the keys are down: release them by name, or the
    # application keeps Ctrl+Shift pressed for every later test (a table's selectRow toggles)
    for key in (Qt.Key.Key_Control, Qt.Key.Key_Shift):
        QTest.keyRelease(stepper, key)
    qtbot.waitUntil(lambda: stepper.run is not first and stepper.run is not None,
                    timeout=10_000)
    assert stepper.run is not None and stepper.run.simulated
    assert stepper.content_edit.toPlainText() == PARAPHRASE

    with qtbot.waitSignal(stepper.run_finished, timeout=20_000):
        step_all(qtbot, stepper, PARAPHRASE)  # a real ingest of the same memory
    real = stepper.run.result
    assert (real.action, real.reason, real.similarity) == (
        simulated.action, simulated.reason, simulated.similarity)
    assert real.action.value == "merged"
    assert {stage: stepper.panels[stage].headline.text().split(" · ", 2)[-1]
            for stage in (Stage.DECISION, Stage.APPLY)} == shown
    assert _store_state(session)["records"] != before["records"]


def test_candidate_search_names_its_partition(qtbot: QtBot, stepper: StepperView) -> None:
    """The paraphrase in another layer is out of the merge partition, and the panel says so."""
    stepper.layer_box.setCurrentText("episodic")
    step_all(qtbot, stepper, PARAPHRASE, simulate=True)
    note = stepper.panels[Stage.CANDIDATES].note
    assert not note.isHidden()
    assert note.text().startswith("Candidates searched among 0 records in layer ‘episodic’, "
                                  "privacy ‘private’, agent ‘default’.")
    assert "1 more record of this agent and privacy in other layers: compared for novelty " \
        "only" in note.text()
    assert "other than ‘fact’ merge only at similarity 0.95 or above" in note.text()
    stepper.layer_box.setCurrentText("semantic")
    step_all(qtbot, stepper, PARAPHRASE, simulate=True)
    assert note.text().startswith("Candidates searched among 1 record in layer ‘semantic’,")
    assert "other layers" not in note.text()


@pytest.mark.parametrize("text", [PARAPHRASE, GRAY, "Sam's cat is called Miso"],
                         ids=["merge", "review-item", "insert"])
def test_undo_takes_an_ingest_from_the_pipeline_back(
        qtbot: QtBot, stepper: StepperView, session: StoreSession, text: str) -> None:
    before = _store_state(session)
    with qtbot.waitSignal(session.records_changed, timeout=20_000):
        step_all(qtbot, stepper, text)
    assert stepper.run is not None and stepper.run.written is not None
    changed = _store_state(session)
    assert (changed["records"], changed["review"]) != (before["records"], before["review"])
    first = _shapes(session)
    stack = session.undo_stack
    assert stack.count() == 1 and stack.undoText().startswith("Ingest ‘")
    stack.undo()
    run(qtbot, session.drain())
    after = _store_state(session)
    assert after["records"] == before["records"] and after["review"] == before["review"]
    # Redo ingests the memory again: the same decision against the same store
    assert stack.canRedo() and stack.redoText() == stack.text(0)
    with qtbot.waitSignal(session.records_changed, timeout=20_000):
        stack.redo()
    run(qtbot, session.drain())
    assert _shapes(session) == first
    stack.undo()  # and that is undone again: the redo's write, not the first run's
    run(qtbot, session.drain())
    again = _store_state(session)
    assert again["records"] == before["records"] and again["review"] == before["review"]


def _shapes(session: StoreSession) -> tuple[object, ...]:
    """What a redo must give again: every record's content, confidence, number of sources
    and of merged records (not ids or times, which a fresh run makes anew), and the review
    queue's pairs (incoming content, target)."""
    state = _store_state(session)
    records = sorted((data["content"], data["confidence"], len(data["provenance"]),
                      len(data["merged_from"]))
                     for data in (json.loads(text) for text in state["records"].values()))
    queue = session.engine.review_queue()
    return (records, sorted((item.incoming.content, item.target_id) for item in queue))


def test_run_through_pipeline_fills_every_field_of_the_record(
        qtbot: QtBot, stepper: StepperView, session: StoreSession) -> None:
    from engine.records import Category, Layer, NewMemory, Privacy, TrustTier

    record = session.engine.add(NewMemory(
        "Sam books aisle seats for work trips", agent_id="travel", layer=Layer.EPISODIC,
        category=Category.PREFERENCE, privacy=Privacy.PUBLIC, source_tier=TrustTier.AGENT))
    assert run(qtbot, stepper.load_stored(record.id))
    memory = stepper.new_memory()
    assert (memory.content, memory.agent_id, memory.layer, memory.category, memory.privacy,
            memory.source_tier) == (record.content, "travel", Layer.EPISODIC,
                                    Category.PREFERENCE, Privacy.PUBLIC, TrustTier.AGENT)


def test_undo_of_an_ingest_keeps_a_later_edit_and_says_so(
        qtbot: QtBot, stepper: StepperView, session: StoreSession) -> None:
    with qtbot.waitSignal(session.records_changed, timeout=20_000):
        step_all(qtbot, stepper, PARAPHRASE)  # merges into BASE
    result = stepper.run.result if stepper.run is not None else None
    assert result is not None and result.record_id is not None
    edited = session.engine.update(result.record_id, {"importance": 0.9})
    with qtbot.waitSignal(session.failed, timeout=20_000) as failed:
        session.undo_stack.undo()
    assert failed.args is not None and "left 1 record alone: changed since the run" in \
        failed.args[0]
    run(qtbot, session.drain())
    assert session.engine.get(result.record_id) == edited


def _shown_rect(widget: QWidget, top: QWidget) -> QRect:
    """The part of ``widget`` that can show inside ``top`` (clipped by every parent between)."""
    rect = QRect(widget.mapTo(top, QPoint(0, 0)), widget.size())
    parent = widget.parentWidget()
    while parent is not None and parent is not top:
        rect &= QRect(parent.mapTo(top, QPoint(0, 0)), parent.size())
        parent = parent.parentWidget()
    return rect


@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_candidate_bars_scroll_instead_of_covering_the_fields_in_a_short_panel(
        qtbot: QtBot) -> None:
    """Polish: at 900×600 the eight bars were drawn over the Fields tab below them."""
    panel = StagePanel(Stage.CANDIDATES)
    qtbot.addWidget(panel)
    panel.resize(560, 300)
    panel.show()
    bars = panel.bars
    assert bars is not None
    bars.set_data([(f"candidate {i}", 0.9 - i * 0.05) for i in range(8)], 0.85, 0.7,
                  [f"id-{i}" for i in range(8)])
    qtbot.waitUntil(lambda: bars.height() >= bars.minimumHeight())  # a layout pass
    shown, fields = _shown_rect(bars, panel), _shown_rect(panel.fields, panel)
    assert not shown.isEmpty() and fields.height() > 60
    assert not shown.intersects(fields), (shown, fields)
    panel.resize(560, 700)  # room enough: every bar shows, nothing to scroll
    qtbot.waitUntil(lambda: _shown_rect(bars, panel).height() >= bars.minimumHeight())
    assert not _shown_rect(bars, panel).intersects(_shown_rect(panel.fields, panel))


@pytest.mark.parametrize("width", [300, 420, 700])
@pytest.mark.parametrize("threshold", [0.80, 0.90, 0.95, 0.99])
def test_the_threshold_label_is_never_cut_at_the_edge(
        qtbot: QtBot, width: int, threshold: float) -> None:
    """Polish: "merges at 0.90" ran past the bars' right edge ("merges at 0.9") at 1000×700."""
    bars = SimilarityBars()
    qtbot.addWidget(bars)
    bars.resize(width, 200)
    bars.set_data([("a", 0.92)], threshold, threshold - 0.15)
    band, label = bars.label_rects()
    assert label.width() >= bars.fontMetrics().horizontalAdvance(bars.threshold_text())
    assert label.left() >= 0 and label.right() <= width
    assert band.left() == bars.x_of(threshold - 0.15)
    assert band.width() == 0 or band.right() <= label.left()  # the gray zone's gives way
