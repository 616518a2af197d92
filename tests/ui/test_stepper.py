"""The slow-mo stepper: a paraphrase merge, a gray-zone deferral and a contradiction, stage by
stage, with each stage's panel checked; Continue with a delay; the threshold what-if."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from engine.ingest.kinds import Stage
from engine.redaction import redact_text
from tests.ui.conftest import run
from tests.ui.observe_fixtures import BASE, CONTRADICTION, GRAY, PARAPHRASE, session
from ui.session import StoreSession
from ui.stepper_view import StepperView, memory_from_json
from ui.tasks import TaskRunner
from ui.timeline_view import TimelineView

__all__ = ["session"]


@pytest.fixture
def stepper(qtbot: QtBot, runner: TaskRunner, session: StoreSession) -> StepperView:
    view = StepperView(runner)
    qtbot.addWidget(view)
    view.set_session(session)
    return view


def step_all(qtbot: QtBot, view: StepperView, text: str) -> None:
    view.content_edit.setPlainText(text)
    assert run(qtbot, view.start())
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
    assert run(qtbot, stepper.start())
    assert stepper.continue_button.isEnabled() and not stepper.pause_button.isEnabled()
    task_done: list[bool] = []

    async def go() -> None:
        await stepper.continue_run()
        task_done.append(True)

    from ui.tasks import spawn

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
