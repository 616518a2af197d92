"""The voyeur timeline: history from the ledger, the live tail, filters, binned lanes, click."""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np
import pytest
from PySide6.QtCore import QEvent, QPointF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from engine.events import Event
from engine.records import NewMemory
from engine.redaction import redact_text
from tests.ui.conftest import run
from tests.ui.observe_fixtures import BASE, CONTRADICTION, GRAY, PARAPHRASE, session
from ui.observe.timeline_data import LANES, TimelineData, TimelineFilter, lane_of
from ui.observe.timeline_view import TimelineView
from ui.shared.fields_view import FieldsPanel
from ui.shared.format import Field
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner

__all__ = ["session"]
pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")


def synthetic(n: int) -> list[Event]:
    kinds = ("ingest-start", "candidate-match", "merge-applied", "merge-deferred")
    return [Event(event_id=f"e{i}", kind=kinds[i % 4], ts=1.0e12 + i * 10.0,
                  record_id=f"r{i % 7}", source="import:a" if i % 2 else "user",
                  decision_reason="gray_zone" if i % 4 == 3 else None) for i in range(n)]


def test_bins_count_every_visible_event_once() -> None:
    data = TimelineData()
    events = synthetic(1000)
    assert data.extend(events[500:]) == 500
    assert data.extend(events[:500] + events[:10]) == 500  # out of order, duplicates ignored
    assert np.all(np.diff(data.t) >= 0)
    x0, x1 = data.span()
    edges, counts = data.bins(x0, x1 + 1, 37)
    assert len(edges) == 38 and counts.sum() == 1000
    assert counts[lane_of("merge-deferred")].sum() == 250
    assert counts[LANES.index("other")].sum() == 0
    data.set_filter(TimelineFilter(decision="gray"))
    assert data.bins(x0, x1 + 1, 10)[1].sum() == 250
    data.set_filter(TimelineFilter(kinds=frozenset({"ingest-start"}), source="import"))
    assert data.bins(x0, x1 + 1, 10)[1].sum() == 0  # even i only: source "user"
    data.set_filter(TimelineFilter(record_id="r3"))
    assert data.bins(x0, x1 + 1, 10)[1].sum() == len([i for i in range(1000) if i % 7 == 3])
    data.set_filter(TimelineFilter())
    mid = (x0 + x1) / 2
    assert data.bins(mid, x1 + 1, 5)[1].sum() == 500  # only the visible half is counted


def test_history_live_tail_filters_and_click(qtbot: QtBot, runner: TaskRunner,
                                             session: StoreSession) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    view.set_session(session)
    qtbot.waitUntil(lambda: len(view.data) == 4, timeout=5000)  # the fixture's ingest
    assert "4 events" in view.count_label.text()
    first_seq = max(e.seq for e in view.data.events)
    rebins = view.rebins
    run(qtbot, view._runner.run(session.engine.ingest, NewMemory(content=PARAPHRASE)))
    qtbot.waitUntil(lambda: len(view.data) > 4, timeout=5000)  # live tail, batched
    assert view.rebins > rebins
    assert any(e.kind == "merge-applied" and e.seq > first_seq for e in view.data.events)
    assert sum(view.lane_counts()) == len(view.data)
    # the lanes and the kind filter say what happened in words; the kind rides along
    assert view.kind_box.currentText() == "all kinds"
    view.kind_box.setCurrentText("merged")
    assert view.kind_box.currentData() == "merge-applied"
    labels = [label for _at, label in view.plot.getAxis("left")._tickLevels[0]]
    assert labels[:4] == ["ingest started", "embedded", "candidates found", "merged"]
    assert not any(":" in label or "-" in label for label in labels)
    assert view.lane_counts()[lane_of("merge-applied")] == 1
    assert sum(view.lane_counts()) == 1
    view.kind_box.setCurrentIndex(0)
    view.decision_edit.setText("near_duplicate")
    by_code = view.lane_counts()
    assert 0 < sum(by_code) < len(view.data)
    view.decision_edit.setText("Near duplicate")  # the words the details show, any case
    assert view.lane_counts() == by_code
    assert "near duplicate" in view.decision_edit.toolTip()
    assert not re.search(r"\b[a-z]+_[a-z]+\b", view.decision_edit.toolTip())  # no codes
    view.decision_edit.clear()

    # click the merge-applied event: its fields are shown
    index = next(i for i, e in enumerate(view.data.events) if e.kind == "merge-applied")
    box = view.plot.getViewBox()
    view.plot.setXRange(view.data.t[index] - 1, view.data.t[index] + 1, padding=0)
    scene = box.mapViewToScene(QPointF(view.data.t[index], lane_of("merge-applied") + 0.5))
    point = view.plot.mapFromScene(scene)
    with qtbot.waitSignal(view.event_selected, timeout=3000) as blocker:
        QTest.mouseClick(view.plot.viewport(), Qt.MouseButton.LeftButton, pos=point)
    assert blocker.args[0].kind == "merge-applied"
    assert not view.marks.isHidden() and "the selected event" in view.marks.text()
    runs = view.highlight_run(str(blocker.args[0].payload["incoming_id"]))  # the stepper's
    assert runs > 1 and f"the {runs} events of the Pipeline view's run" in view.marks.text()
    assert dict(view.detail.rows())["What happened"] == "Merged"
    assert '"kind": "merge-applied"' in view.detail.raw.toPlainText()
    assert '"merged_from"' in view.detail.raw.toPlainText()
    view.set_redactor(redact_text)  # details re-rendered through the redactor
    assert '"kind": "merge-applied"' in view.detail.raw.toPlainText()


SNAKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")
RAW_FLOAT = re.compile(r"\d\.\d{4,}")


def test_event_details_are_labelled_words(qtbot: QtBot, runner: TaskRunner,
                                          session: StoreSession) -> None:
    """Every event of a merge, a gray-zone deferral and a contradiction shows labelled fields
    in words — no snake_case codes, no raw floats, records by their text — and its JSON in the
    Raw tab."""
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.set_session(session)
    for text in (PARAPHRASE, GRAY, CONTRADICTION):
        run(qtbot, runner.run(session.engine.ingest, NewMemory(content=text)))
    qtbot.waitUntil(lambda: len(view.data) >= 16, timeout=5000)
    assert [view.detail.tabs.tabText(i) for i in range(view.detail.tabs.count())] == \
        ["Fields", "Raw"]
    stored = session.engine.list_records().records[0]
    for index, event in enumerate(view.data.events):
        view.select_event(index)
        qtbot.waitUntil(lambda: "reading its text" not in view.detail.text(), timeout=5000)
        rows = view.detail.rows()
        assert rows[0][0] == "What happened" and rows[1][0] == "When"
        for label, value in rows:
            assert not SNAKE.search(label) and not SNAKE.search(value), (event.kind, label,
                                                                         value)
            assert not RAW_FLOAT.search(value), (event.kind, label, value)
        raw = view.detail.raw.toPlainText()
        assert f'"event_id": "{event.event_id}"' in raw  # the raw view is one click away
        if event.record_id == stored.id:  # named by its text, id second, id kept as data
            record = dict(rows)["Record"]
            assert record.startswith(f"‘{stored.content[:20]}") and stored.id[:8] in record
            assert stored.id in view.detail.record_ids()
    deferred = [i for i, e in enumerate(view.data.events) if e.kind == "merge-deferred"]
    view.select_event(deferred[-1])
    why = dict(view.detail.rows())["Why"]
    assert why == f"Held for review: may contradict ‘{BASE}’ — long vs short"


def test_zoom_keeps_items_and_follows(qtbot: QtBot, runner: TaskRunner) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.resize(900, 400)
    items = list(view.plot.getPlotItem().items)
    view.add_events(synthetic(5000), fit=True)
    for factor in (0.5, 0.1, 0.01):
        x0, x1 = view.data.span()
        mid = (x0 + x1) / 2
        view.plot.setXRange(mid - (x1 - x0) * factor, mid + (x1 - x0) * factor, padding=0)
        view.rebin()
        assert list(view.plot.getPlotItem().items) == items  # created once, setData only
        assert 0 < sum(view.lane_counts()) <= 5000
    view.follow.setChecked(True)  # the user asks for the live tail
    x0, x1 = view.plot.getViewBox().viewRange()[0]
    assert x0 <= view.data.t[-1] <= x1
    later = [Event(event_id=f"late{i}", kind="error", ts=1.0e12 + 60_000.0 + i)
             for i in range(3)]
    view.add_events(later)
    v0, v1 = view.plot.getViewBox().viewRange()[0]
    assert v0 <= view.data.t[-1] <= v1  # the newest is kept in view
    assert v1 - v0 == pytest.approx(x1 - x0)  # at the width the user chose


# The labels a time axis may show: clock times with their unit, days, months, years.
TIME_LABEL = re.compile(r"\d{2}:\d{2}(:\d{2}(\.\d{3})?)?|\w{3} \d{2} \w{3}|\d{2} \w{3}|"
                        r"\w{3} \d{4}|\d{4}")


@pytest.mark.parametrize("seconds", [0.05, 4.0, 50.0, 600.0, 4 * 3600.0, 3 * 86_400.0,
                                     20 * 86_400.0, 120 * 86_400.0])
def test_time_axis_reads_as_local_dates_and_times(qtbot: QtBot, runner: TaskRunner,
                                                  seconds: float) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    qtbot.waitExposed(view)
    start = 1.7956e9 + 0.25  # Wed 25 Nov 2026 (UTC), a quarter second past
    view.add_events([Event(event_id=str(i), kind="ingest-start", ts=(start + t) * 1000.0)
                     for i, t in enumerate((0.0, seconds))], fit=True)
    view.zoom_to(start, start + seconds)
    labels = view.time_axis.labels()
    assert len(labels) >= 3, labels  # drawn (pyqtgraph drops a crowded level whole)
    assert all(TIME_LABEL.fullmatch(label) for label in labels), labels
    if seconds < 60:  # zoomed in to seconds: every label still reads as a clock time
        assert all(re.fullmatch(r"\d{2}:\d{2}:\d{2}(\.\d{3})?", label) for label in labels)
        first = datetime.fromtimestamp(start).astimezone()
        assert first.strftime("%H:%M") in labels[0]  # local hours and minutes, not "51.000"
    view.rebin()  # the axis title names the date and the unit
    title = view.time_axis.labelText
    assert datetime.fromtimestamp(start).astimezone().strftime("%d %b") in title
    assert "local time" in title and "2026" in title


def test_an_empty_timeline_shows_the_last_hour(qtbot: QtBot, runner: TaskRunner) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.rebin()
    x0, x1 = view.plot.getViewBox().viewRange()[0]
    assert x1 - x0 == pytest.approx(3600.0)  # around now, not the epoch's first second
    assert datetime.fromtimestamp(x1).astimezone().strftime("%d %b %Y") in \
        view.time_axis.labelText
    view.follow.setChecked(True)  # nothing to follow yet: the view stays
    assert view.plot.getViewBox().viewRange()[0] == pytest.approx([x0, x1])


def _drag(view: TimelineView, x0: float, x1: float, modifier: Qt.KeyboardModifier) -> None:
    """Press at time ``x0``, move to ``x1``, release (on the first lane) with ``modifier`` held.

    The events go straight to the viewport, as a hand makes them (button and key held while
    moving); through QTest a second drag would start with a synthesized double click.
    """
    box = view.plot.getViewBox()
    ends = [QPointF(view.plot.mapFromScene(box.mapViewToScene(QPointF(x, 0.5))))
            for x in (x0, x1)]
    viewport = view.plot.viewport()
    left, none = Qt.MouseButton.LeftButton, Qt.MouseButton.NoButton
    steps = [(QEvent.Type.MouseButtonPress, ends[0], left, left)]
    steps += [(QEvent.Type.MouseMove, ends[0] + (ends[1] - ends[0]) * (i / 10), none, left)
              for i in range(1, 11)]
    steps += [(QEvent.Type.MouseButtonRelease, ends[1], left, none)]
    for kind, local, button, held in steps:
        QApplication.sendEvent(viewport, QMouseEvent(kind, local, viewport.mapToGlobal(local),
                                                     button, held, modifier))


def test_opens_fitted_fit_all_and_zoom_to_a_span(qtbot: QtBot, runner: TaskRunner,
                                                 session: StoreSession,
                                                 every_move: None) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    qtbot.waitExposed(view)
    view.set_session(session)
    qtbot.waitUntil(lambda: len(view.data) == 4, timeout=5000)  # the fixture's ingest

    def covers_all() -> bool:
        v0, v1 = view.plot.getViewBox().viewRange()[0]
        return bool(v0 <= view.data.t[0] and view.data.t[-1] <= v1)

    assert covers_all() and not view.follow.isChecked()  # fitted, not on the live tail
    # an import: the new events join the fitted view (the lanes are not left empty)
    records = [NewMemory(content=f"Fact number {i} about the garden shed") for i in range(3)]
    run(qtbot, view._runner.run(session.engine.ingest_batch, records))
    qtbot.waitUntil(lambda: len(view.data) > 4 and covers_all(), timeout=5000)
    assert sum(view.lane_counts()) == len(view.data)

    # Shift+drag over a tenth of the view: it zooms to that span
    (v0, v1), _ = view.plot.getViewBox().viewRange()
    mark = (v0 + (v1 - v0) * 0.3, v0 + (v1 - v0) * 0.4)
    _drag(view, *mark, Qt.KeyboardModifier.ShiftModifier)
    z0, z1 = view.plot.getViewBox().viewRange()[0]
    assert z0 == pytest.approx(mark[0], abs=(v1 - v0) * 0.01)
    assert z1 == pytest.approx(mark[1], abs=(v1 - v0) * 0.01)
    assert not view.fitted
    # a plain drag pans (same width, moved)
    _drag(view, z0 + (z1 - z0) * 0.6, z0 + (z1 - z0) * 0.4, Qt.KeyboardModifier.NoModifier)
    p0, p1 = view.plot.getViewBox().viewRange()[0]
    assert p1 - p0 == pytest.approx(z1 - z0) and p0 > z0
    # zoomed in, new events do not move the user's view
    count = len(view.data)
    run(qtbot, view._runner.run(session.engine.ingest, NewMemory(content="A late fact")))
    qtbot.waitUntil(lambda: len(view.data) > count, timeout=5000)
    assert view.plot.getViewBox().viewRange()[0] == pytest.approx([p0, p1])

    view.fit_button.click()  # Fit all brings every event back
    assert covers_all()
    view.zoom_to(p0, p1)
    assert not covers_all()
    view.plot.setFocus()
    QTest.keyClick(view.plot, Qt.Key.Key_F)  # and so does its shortcut
    assert covers_all()


def test_hovering_a_lane_bar_says_how_many_events_and_when(qtbot: QtBot, runner: TaskRunner,
                                                           every_move: None) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.resize(1000, 500)
    view.show()
    qtbot.waitExposed(view)
    start = 1.7956e9
    burst = [Event(event_id=f"m{i}", kind="merge-applied", ts=(start + 5 + i * 0.001) * 1000.0)
             for i in range(7)]
    ends = [Event(event_id=f"e{i}", kind="ingest-start", ts=(start + t) * 1000.0)
            for i, t in enumerate((0.0, 10.0))]
    view.add_events(burst + ends, fit=True)
    box = view.plot.getViewBox()
    viewport = view.plot.viewport()

    def hover(x: float, lane: str) -> str:
        point = QPointF(x, LANES.index(lane) + 0.5)
        local = QPointF(view.plot.mapFromScene(box.mapViewToScene(point)))
        QApplication.sendEvent(viewport, QMouseEvent(
            QEvent.Type.MouseMove, local, viewport.mapToGlobal(local), Qt.MouseButton.NoButton,
            Qt.MouseButton.NoButton, Qt.KeyboardModifier.NoModifier))
        return str(box.toolTip())  # (pyqtgraph is untyped)

    tip = hover(start + 5.003, "merge-applied")
    assert tip.startswith("7 events: merged (merge-applied)\n"), tip
    moment = datetime.fromtimestamp(start + 5.003).astimezone()  # in local time, the bar's
    found = re.search(r"(\w{3} \d{2} \w{3}), (\S+) – (\S+)\n", tip)  # day, from, to
    assert found is not None, tip
    assert found[1] == moment.strftime("%a %d %b")
    assert found[2] <= moment.strftime("%H:%M:%S.%f")[:-3] <= found[3]
    assert hover(start + 5.003, "error") == ""  # an empty lane: no tooltip
    assert hover(start + 2.0, "merge-applied") == ""  # between bars: none either


def test_details_keep_values_visible_in_a_narrow_pane(qtbot: QtBot) -> None:
    """Long labels never push the values out of a narrow details pane (no sideways scroll)."""
    panel = FieldsPanel("nothing yet")
    qtbot.addWidget(panel)
    panel.resize(220, 300)
    panel.show()
    qtbot.waitExposed(panel)
    assert panel.rows() == [("nothing yet", "")]
    panel.set_fields([Field("Merge across categories from", "0.95"),
                      Field("Record", "‘Alice likes green tea’ · 3f2a9c1e", record_id="3f2a")],
                     "{}")
    width = panel.fields.viewport().width()
    assert panel.fields.columnWidth(0) <= width // 2
    label = panel.fields.topLevelItem(0)
    assert label is not None and label.toolTip(0) == "Merge across categories from"  # elided
    panel.resize(900, 300)
    qtbot.waitUntil(lambda: panel.fields.viewport().width() > 600)
    assert panel.fields.columnWidth(0) > width // 2  # room: the labels get it back
    assert panel.record_ids() == ["3f2a"]
    assert panel.text().splitlines()[1] == "Record: ‘Alice likes green tea’ · 3f2a9c1e"


def test_details_read_an_edited_record_again(qtbot: QtBot, runner: TaskRunner,
                                             session: StoreSession) -> None:
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.set_session(session)
    qtbot.waitUntil(lambda: len(view.data) == 4, timeout=5000)
    created = next(i for i, e in enumerate(view.data.events)
                   if e.kind == "memory:record:created")
    record_id = view.data.events[created].record_id
    assert record_id is not None
    view.select_event(created)
    qtbot.waitUntil(lambda: dict(view.detail.rows())["Record"].startswith(f"‘{BASE[:20]}"),
                    timeout=5000)
    run(qtbot, runner.run(session.engine.update, record_id, {"content": "Sam flies aisle"}))
    session.records_changed.emit([record_id])
    view.select_event(created)
    qtbot.waitUntil(lambda: dict(view.detail.rows())["Record"].startswith("‘Sam flies aisle’"),
                    timeout=5000)


def test_the_record_filter_takes_a_memorys_words(qtbot: QtBot, runner: TaskRunner,
                                                 session: StoreSession) -> None:
    """Issue 19: the timeline's record filter asked for a record id ("record id"); a person
    types words of the memory and picks it, as in Fate."""
    view = TimelineView(runner)
    qtbot.addWidget(view)
    view.set_session(session)
    other = run(qtbot, runner.run(session.engine.ingest,
                                  NewMemory(content="Mia waters the fern on Sundays")))
    qtbot.waitUntil(lambda: len(view.data) >= 8, timeout=5000)
    every = int(view.data.mask.sum())
    stored = next(r for r in session.engine.list_records().records if r.content == BASE)
    assert "words" in view.record_edit.placeholderText()
    QTest.keyClicks(view.record_edit, "window seats")  # typing words filters nothing yet
    assert int(view.data.mask.sum()) == every
    qtbot.waitUntil(lambda: view.record_results.count() == 1
                    and not view.record_results.isHidden(), timeout=10_000)
    item = view.record_results.item(0)
    assert item is not None and item.text().startswith(BASE)
    view.record_results.itemClicked.emit(item)  # picked: only its events, named by its text
    qtbot.waitUntil(lambda: view.record_edit.text() == f"‘{BASE}’", timeout=10_000)
    shown = [view.data.events[int(i)] for i in np.flatnonzero(view.data.mask)]
    assert shown and all(e.record_id == stored.id for e in shown)
    assert int(view.data.mask.sum()) < every
    assert stored.id in view.record_edit.toolTip()
    view.record_edit.setText(other.record.id if other.record else "")  # an id still works
    shown = [view.data.events[int(i)] for i in np.flatnonzero(view.data.mask)]
    assert shown and other.record is not None \
        and all(e.record_id == other.record.id for e in shown)
