"""The review queue: approve and reject update the store and the timeline; keyboard, bulk, undo."""

from __future__ import annotations

import html
import re

import pytest
from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from pytestqt.qtbot import QtBot

from engine.records import NewMemory
from tests.ui.conftest import run
from tests.ui.observe_fixtures import BASE, CONTRADICTION, GRAY, session
from ui.observe.review_view import ReviewView, word_diff_html
from ui.observe.timeline_view import TimelineView
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner

__all__ = ["session"]
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


@pytest.fixture
def queue(qtbot: QtBot, runner: TaskRunner, session: StoreSession) -> ReviewView:
    session.engine.ingest(NewMemory(content=GRAY))
    session.engine.ingest(NewMemory(content=CONTRADICTION))
    assert len(session.engine.review_queue()) == 2
    view = ReviewView(runner)
    qtbot.addWidget(view)
    view.show()
    view.set_session(session)
    qtbot.waitUntil(lambda: len(view.items) == 2, timeout=10000)
    return view


def test_side_by_side_with_diff(queue: ReviewView) -> None:
    item, target = queue.items[0]
    assert target is not None and target.content == BASE
    assert item.incoming.content == GRAY
    info = html.unescape(queue.info.text())
    assert f"In the gray zone of ‘{BASE}’: held for review" in info
    assert re.search(r"similarity <b>0\.\d{3} < threshold 0\.\d\d</b>", info)
    assert "merge threshold 0." in info and "gray zone from 0." in info
    assert "gray_zone" not in info and "review_floor" not in info
    assert re.match(r"0\.\d\d · gray zone\n", queue.list.item(0).text())
    assert "legroom" in queue.incoming.toPlainText()
    queue.list.setCurrentRow(1)
    assert f"Held for review: may contradict ‘{BASE}’ — long vs short" in \
        html.unescape(queue.info.text())
    left, right = word_diff_html("a long trip", "a short trip")
    assert "long" in left and "#ffcecb" in left and "short" in right and "#aceebb" in right


def test_approve_and_reject_update_store_and_timeline(qtbot: QtBot, queue: ReviewView,
                                                      session: StoreSession,
                                                      runner: TaskRunner) -> None:
    timeline = TimelineView(runner)
    qtbot.addWidget(timeline)
    timeline.set_session(session)
    engine = session.engine
    target_id = queue.items[0][1].id  # type: ignore[union-attr]
    version = engine.get(target_id).version
    queue.list.setCurrentRow(0)
    QTest.keyClick(queue.list, Qt.Key.Key_A)  # approve by keyboard
    qtbot.waitUntil(lambda: len(queue.items) == 1 and queue.loads >= 2, timeout=10000)
    assert engine.get(target_id).version == version + 1
    assert engine.count() == 1
    QTest.keyClick(queue.list, Qt.Key.Key_R)  # reject: the contradiction becomes a record
    qtbot.waitUntil(lambda: not queue.items and engine.count() == 2, timeout=10000)
    qtbot.waitUntil(lambda: {"review-approved", "review-rejected"} <= {
        e.kind for e in timeline.data.events}, timeout=5000)
    counts = dict(zip(("review-approved", "review-rejected"),
                      timeline.lane_counts()[8:10], strict=True))
    assert counts == {"review-approved": 1, "review-rejected": 1}
    assert not queue.approve_button.isEnabled()

    # undo both (one command each), newest first: the queue is back, the store as before
    session.undo_stack.undo()
    qtbot.waitUntil(lambda: len(queue.items) == 1 and engine.count() == 1, timeout=10000)
    session.undo_stack.undo()
    qtbot.waitUntil(lambda: len(queue.items) == 2, timeout=10000)
    assert engine.get(target_id).version == version  # the approve's merge was undone
    assert len(engine.review_queue()) == 2
    session.undo_stack.redo()
    qtbot.waitUntil(lambda: len(queue.items) == 1, timeout=10000)
    assert engine.get(target_id).version > version


def test_skip_and_bulk(qtbot: QtBot, queue: ReviewView, session: StoreSession) -> None:
    queue.list.setCurrentRow(0)
    QTest.keyClick(queue.list, Qt.Key.Key_S)
    assert queue.list.currentRow() == 1
    queue.list.selectAll()
    assert len(queue.selected_ids()) == 2
    decisions = run(qtbot, queue.decide(queue.selected_ids(), "reject"))
    assert [d.action for d in decisions] == ["reject", "reject"]
    qtbot.waitUntil(lambda: not queue.items, timeout=10000)
    assert session.engine.count() == 3
    assert session.undo_stack.count() == 1  # bulk is one step
    session.undo_stack.undo()
    qtbot.waitUntil(lambda: len(queue.items) == 2 and session.engine.count() == 1,
                    timeout=10000)


def test_undo_of_a_consolidation_deferral_keeps_both_stored_records(
        qtbot: QtBot, runner: TaskRunner, session: StoreSession) -> None:
    # a consolidation deferral's incoming memory is a stored record: approve deletes it (undo
    # must bring it back), reject writes nothing (undo must not delete it)
    engine = session.engine
    engine.add(NewMemory(content=CONTRADICTION, importance=0.1))
    [step] = engine.consolidate().steps
    assert step.review_id is not None and step.other.content == CONTRADICTION
    view = ReviewView(runner)
    qtbot.addWidget(view)
    view.show()
    view.set_session(session)
    qtbot.waitUntil(lambda: len(view.items) == 1, timeout=10000)
    view.list.setCurrentRow(0)
    QTest.keyClick(view.list, Qt.Key.Key_A)
    qtbot.waitUntil(lambda: not view.items and engine.count() == 1, timeout=10000)
    session.undo_stack.undo()
    qtbot.waitUntil(lambda: len(view.items) == 1 and engine.count() == 2, timeout=10000)
    assert engine.get(step.other.id).content == CONTRADICTION
    view.list.setCurrentRow(0)
    QTest.keyClick(view.list, Qt.Key.Key_R)
    qtbot.waitUntil(lambda: not view.items, timeout=10000)
    session.undo_stack.undo()
    qtbot.waitUntil(lambda: len(view.items) == 1, timeout=10000)
    assert engine.count() == 2 and engine.get(step.other.id).content == CONTRADICTION
