"""Issue 10 layer views: each shows hand-built data, and its clicks select records.

Clicks are real mouse events on the plots (pyqtgraph's scene decides what was hit) and on the
lists, through a main window over a real embedded store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from PySide6.QtCore import QEvent, QPointF, QRectF, Qt
from PySide6.QtGui import QMouseEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QTreeWidget, QTreeWidgetItem
from pytestqt.qtbot import QtBot

from engine.layers import SocialSummary, SpatialHit
from engine.records import Layer, NewMemory
from engine.store import StoreSpec
from tests.ui.conftest import open_fresh, open_store
from ui.layers.social_view import edge_width, sentiment_color
from ui.main_window import MainWindow
from ui.shared.tasks import TaskRunner

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")

T0 = 1_767_225_600_000.0  # 2026-01-01
DAY = 86_400_000.0


def _click_point(plot: object, x: float, y: float, *,
                 double: bool = False) -> None:
    """A real mouse click on the data point (x, y) of a pyqtgraph PlotWidget."""
    view_box = plot.getViewBox()  # type: ignore[attr-defined]  # pyqtgraph PlotWidget
    scene = view_box.mapViewToScene(QPointF(x, y))
    where = plot.mapFromScene(scene)  # type: ignore[attr-defined]
    viewport = plot.viewport()  # type: ignore[attr-defined]
    QTest.mouseClick(viewport, Qt.MouseButton.LeftButton, pos=where)
    if double:  # what a real double click sends after the first click: dblclick, release
        local = QPointF(where)
        QApplication.sendEvent(viewport, QMouseEvent(
            QEvent.Type.MouseButtonDblClick, local, viewport.mapToGlobal(local),
            Qt.MouseButton.LeftButton, Qt.MouseButton.LeftButton,
            Qt.KeyboardModifier.NoModifier))
        QTest.mouseRelease(viewport, Qt.MouseButton.LeftButton, pos=where)


def _click_row(tree: QTreeWidget, item: QTreeWidgetItem) -> None:
    QTest.mouseClick(tree.viewport(), Qt.MouseButton.LeftButton,
                     pos=tree.visualItemRect(item).center())


def _rows(tree: QTreeWidget) -> list[QTreeWidgetItem]:
    return [item for i in range(tree.topLevelItemCount())
            if (item := tree.topLevelItem(i)) is not None]


def _cell(tree: QTreeWidget, row: int, column: int) -> str:
    items = _rows(tree)
    return items[row].text(column) if row < len(items) else ""


def _shows(window: MainWindow, record_id: str) -> bool:
    record = window.records.detail.record
    return window.stack.currentWidget() is window.records and record is not None \
        and record.id == record_id


def _open_layers(qtbot: QtBot, make_window: Callable[..., MainWindow], path: Path,
                 tab: str) -> MainWindow:
    window = make_window()
    window.resize(1200, 760)
    open_store(qtbot, window, path)
    window.nav.setCurrentRow(list(window.views).index("layers"))
    window.layers.show_tab(tab)
    return window


def test_social_graph_colours_widths_and_links(qtbot: QtBot, tmp_path: Path,
                                               make_window: Callable[..., MainWindow]) -> None:
    engine = open_fresh(StoreSpec(str(tmp_path / "store")))
    try:
        made = {}
        for day, (person, sentiment) in enumerate([("mia", 0.2), ("mia", 0.6), ("chris", -0.3),
                                                   ("mia", 0.9), ("chris", -0.8)]):
            made[(person, day)] = engine.layers.record_interaction(
                "robot", person, f"{person} and the robot on day {day}", sentiment=sentiment,
                created_at=T0 + day * DAY)
        engine.layers.record_interaction("bot", "dana", "dana thanked the bot", sentiment=0.5,
                                         created_at=T0)
    finally:
        engine.close()
    window = _open_layers(qtbot, make_window, tmp_path / "store", "social")
    view = window.layers.social
    qtbot.waitUntil(lambda: len(view.summaries) == 3)
    nodes = view.graph.nodes
    assert sorted(n.name for n in nodes if n.summary is None) == ["bot", "robot"]
    assert sorted(n.name for n in nodes if n.summary) == ["chris", "dana", "mia"]
    assert len(view.graph.edges) == 3
    mia = next(n for n in nodes if n.name == "mia")
    chris = next(n for n in nodes if n.name == "chris")
    assert mia.summary is not None and chris.summary is not None
    brushes = view.graph_item.scatter.data["brush"]
    colour = {n.name: brushes[i].color().name() for i, n in enumerate(nodes)}
    assert colour["mia"] == sentiment_color(mia.summary.sentiment).name()
    assert colour["chris"] == sentiment_color(chris.summary.sentiment).name()
    assert sentiment_color(0.8).green() > sentiment_color(0.8).red()  # positive is green
    assert sentiment_color(-0.8).red() > sentiment_color(-0.8).green()  # negative is red
    widths = {nodes[c].name: float(view.graph_item.pen[i]["width"])
              for i, (_a, c) in enumerate(view.graph.edges)}
    assert widths["mia"] == edge_width(3) > widths["chris"] == edge_width(2) > widths["dana"]

    _click_point(view.plot, mia.x, mia.y)
    qtbot.waitUntil(lambda: view.selected is not None and view.selected.counterpart == "mia")
    assert view.interactions_label.text() == "3"
    assert "rising" in view.sentiment_label.text()
    assert len(view.sentiment_dots.data) == 3
    assert [r.text(1) for r in _rows(view.records)] == ["+0.90", "+0.60", "+0.20"]
    qtbot.waitUntil(lambda: _cell(view.records, 0, 2) == "mia and the robot on day 3")
    _click_row(view.records, _rows(view.records)[0])  # an interaction → its record
    qtbot.waitUntil(lambda: _shows(window, made[("mia", 3)].id))

    window.nav.setCurrentRow(list(window.views).index("layers"))
    _click_point(view.plot, mia.x, mia.y, double=True)  # → the summary record
    qtbot.waitUntil(lambda: _shows(window, mia.summary.record_id))  # type: ignore[union-attr]
    assert "Relationship with mia: 3 interactions" in window.records.detail.content.toPlainText()

    window.nav.setCurrentRow(list(window.views).index("layers"))
    robot = next(n for n in view.graph.nodes if n.name == "robot")
    _click_point(view.plot, robot.x, robot.y)  # an agent: only its people
    qtbot.waitUntil(lambda: view.agent_box.currentText() == "robot")
    assert sorted(n.name for n in view.graph.nodes) == ["chris", "mia", "robot"]


def test_pattern_list_success_over_time_and_links(qtbot: QtBot, tmp_path: Path,
                                                  make_window: Callable[..., MainWindow]
                                                  ) -> None:
    engine = open_fresh(StoreSpec(str(tmp_path / "store")))
    try:
        episodes = [engine.layers.record_episode(
            "bot", ["verify identity", "send reset link", "confirm login"], outcome=outcome,
            episode_id=f"reset-{i}", created_at=T0 + i * DAY)
            for i, outcome in enumerate((True, True, False, True))]
        for i in range(2):
            engine.layers.record_episode("robot", ["undock", "vacuum", "dock"], outcome=None,
                                         episode_id=f"clean-{i}", created_at=T0 + i * DAY)
    finally:
        engine.close()
    window = _open_layers(qtbot, make_window, tmp_path / "store", "procedural")
    view = window.layers.procedural
    qtbot.waitUntil(lambda: len(view.details) == 2)
    rows = {item.text(1): item for item in _rows(view.table)}
    reset = rows["verify identity → send reset link → confirm login"]
    assert (reset.text(0), reset.text(2), reset.text(3)) == ("bot", "4", "75%")
    assert rows["undock → vacuum → dock"].text(3) == "—"  # no outcome known

    _click_row(view.table, reset)
    qtbot.waitUntil(lambda: view.selected is not None and view.selected.pattern.agent_id == "bot")
    assert "3 succeeded, 1 failed — success rate 75%" in view.title.text()
    _x, rates = view.rate_curve.getData()
    assert [round(float(r), 3) for r in rates] == [1.0, 1.0, 0.667, 0.75]
    assert [r.text(1) for r in _rows(view.episodes)] == ["✓ success", "✗ failure",
                                                         "✓ success", "✓ success"]
    qtbot.waitUntil(lambda: "reset-2" in _cell(view.episodes, 1, 2))
    _click_row(view.episodes, _rows(view.episodes)[1])  # a source episode → its record
    qtbot.waitUntil(lambda: _shows(window, episodes[2].id))

    window.nav.setCurrentRow(list(window.views).index("layers"))
    view.open_button.click()  # → the pattern's procedural record
    assert view.selected is not None
    qtbot.waitUntil(lambda: _shows(window, view.selected.pattern.record_id))  # type: ignore[union-attr]
    assert "75% success over 4 episodes" in window.records.detail.content.toPlainText()


def test_spatial_scatter_time_filter_radius_and_links(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    engine = open_fresh(StoreSpec(str(tmp_path / "store")))
    try:
        places = [(0.0, 0.0), (1.0, 0.0), (1.5, 1.0), (6.0, 6.0), (0.5, 0.5), (9.0, 1.0)]
        made = [engine.add(NewMemory(
            f"landmark {i}: something memorable at ({x}, {y})", agent_id="robot" if i % 2
            else "drone", layer=Layer.SPATIAL, created_at=T0 + i * DAY,
            metadata={"spatial": {"x": x, "y": y, "z": 0.0}})) for i, (x, y) in
            enumerate(places)]
        expected: list[SpatialHit] = engine.spatial_within((1.0, 0.0, 0.0), 1.5,
                                                           since=T0 + 1 * DAY)
    finally:
        engine.close()
    window = _open_layers(qtbot, make_window, tmp_path / "store", "spatial")
    view = window.layers.spatial
    qtbot.waitUntil(lambda: len(view.data.hits) == 6)
    assert len(view.scatter.data) == 6 and "6 of 6 points" in view.time_label.text()
    assert set(view.data.agents) == {"drone", "robot"}
    # the key to the marks a click draws (the red star and the rings were not explained)
    assert "★</span> the point clicked" in view.legend.text()
    assert "within its radius" in view.legend.text()

    view.set_time_window((T0 + 0.5 * DAY) / 1000, (T0 + 10 * DAY) / 1000)  # day 0 left out
    assert len(view.scatter.data) == 5 and "5 of 6 points" in view.time_label.text()
    assert made[0].id not in {view.data.hits[int(r)].record_id for r in view.visible_rows}

    view.radius_spin.setValue(1.5)
    _click_point(view.plot, 1.0, 0.0)  # landmark 1 → select and query around it
    qtbot.waitUntil(lambda: view.selected is not None and view.selected.record_id == made[1].id)
    qtbot.waitUntil(lambda: view.neighbour_list.topLevelItemCount() > 0)
    assert [h.record_id for h in view.neighbours] == \
        [h.record_id for h in expected if h.record_id != made[1].id]
    assert made[0].id not in {h.record_id for h in view.neighbours}  # outside the time window
    assert "landmark 1" in view.content_label.text()
    _click_row(view.neighbour_list, _rows(view.neighbour_list)[0])  # a neighbour → its record
    qtbot.waitUntil(lambda: _shows(window, view.neighbours[0].record_id))

    window.nav.setCurrentRow(list(window.views).index("layers"))
    _click_point(view.plot, 6.0, 6.0, double=True)  # a point → its record
    qtbot.waitUntil(lambda: _shows(window, made[3].id))


def test_redaction_mode_masks_the_layer_texts(qtbot: QtBot, tmp_path: Path,
                                              make_window: Callable[..., MainWindow]) -> None:
    engine = open_fresh(StoreSpec(str(tmp_path / "store")))
    try:
        engine.layers.record_interaction("bot", "dana", "dana wrote from dana@globex.example",
                                         sentiment=0.5, created_at=T0)
    finally:
        engine.close()
    window = _open_layers(qtbot, make_window, tmp_path / "store", "social")
    view = window.layers.social
    qtbot.waitUntil(lambda: len(view.summaries) == 1)
    view.select_counterpart("bot", "dana")
    qtbot.waitUntil(lambda: "dana@globex.example" in _cell(view.records, 0, 2))
    window.redaction.toggle()  # View → Redaction Mode
    qtbot.waitUntil(lambda: "<REDACT:" in _cell(view.records, 0, 2))
    assert "dana@globex.example" not in _cell(view.records, 0, 2)


def test_paused_and_archived_records_leave_the_layer_views(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    """Issue 20: the Spatial scatter shows only active records (the social and pattern lists
    follow the same layer service: tests/engine/test_soft_states.py)."""
    engine = open_fresh(StoreSpec(str(tmp_path / "store")))
    try:
        made = [engine.add(NewMemory(f"landmark {i}", agent_id="robot", layer=Layer.SPATIAL,
                                     created_at=T0 + i * DAY,
                                     metadata={"spatial": {"x": float(i), "y": 0.0, "z": 0.0}}))
                for i in range(4)]
        engine.pause([made[0].id])
        engine.archive([made[1].id])
    finally:
        engine.close()
    window = _open_layers(qtbot, make_window, tmp_path / "store", "spatial")
    view = window.layers.spatial
    qtbot.waitUntil(lambda: view.data is not None and len(view.data.hits) > 0)
    assert {h.record_id for h in view.data.hits} == {made[2].id, made[3].id}
    assert "2 of 2 points" in view.time_label.text()


def test_an_empty_store_s_layers_say_what_fills_them(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    """Polish: each tab of an empty store covers its empty graph (and its axes of nothing) with
    words and the window's next steps, not a line about ``metadata.social.otherAgentId``; the
    cover goes once the store has something to show."""
    window = _open_layers(qtbot, make_window, tmp_path / "empty", "social")
    layers = window.layers
    expected = {"social": "No relationships yet", "procedural": "No recurring procedures yet",
                "spatial": "Nothing placed yet"}
    for name, title in expected.items():
        layers.show_tab(name)
        tab = getattr(layers, name)
        cover = tab.empty_state
        assert cover is not None
        qtbot.waitUntil(lambda cover=cover, title=title: cover.is_shown()  # type: ignore[misc]
                        and cover.title() == title, timeout=10_000)
        assert cover.button_texts() == ["Load Demo Data", "Import JSONL…"]
    assert layers.social.status.text() == ""
    window.demo_action.trigger()  # the demo data set has all three
    for name in expected:
        layers.show_tab(name)
        cover = getattr(layers, name).empty_state
        qtbot.waitUntil(lambda cover=cover: not cover.is_shown(),  # type: ignore[misc]
                        timeout=60_000)


def _summary(agent: str, person: str) -> SocialSummary:
    return SocialSummary(agent, person, 2, T0, T0 + DAY, 0.3, 0.2, "rising", 0.1, "private")


@pytest.mark.parametrize("width", [660, 700, 900])  # the window at 900×600 and up
@pytest.mark.qt_log_ignore("This plugin does not support propagateSizeHints")
def test_agent_labels_never_run_into_each_other(qtbot: QtBot, runner: TaskRunner,
                                                width: int) -> None:
    """Polish: in the demo's five-agent graph at 900×600, 'home-robot' and 'travel-planner'
    (left and right of the circle, their labels both pointing to the centre) ran together."""
    from ui.layers.social_view import SocialView

    people = {"code-assistant": ["Lena", "Marco", "Priya"], "home-robot": ["Chris", "Jordan",
              "Mia"], "research-agent": ["Dr. Okafor"], "support-bot": ["Bill Lumbergh",
              "Dana Whitfield", "Gavin Belson"], "travel-planner": ["Alex", "Sam"]}
    view = SocialView(runner)
    qtbot.addWidget(view)
    view.resize(width, 480)
    view.show()
    view.show_data([_summary(agent, person) for agent, names in people.items()
                    for person in names])
    qtbot.waitUntil(lambda: view.plot.width() > 100)
    view.plot.autoRange(padding=0.15)
    labels = {label.toPlainText(): label.sceneBoundingRect() for label in view._labels}
    assert len(labels) == 17
    agents = [labels[name] for name in people]
    touching = [(a, b) for i, a in enumerate(people) for b in list(people)[i + 1:]
                if labels[a].intersects(labels[b])]
    assert touching == [] and all(not rect.isEmpty() for rect in agents)
    # nor under a person's marker ('home-robot' below its square ran under Mia's)
    box = view.plot.getViewBox()
    covered = []
    for node in view.graph.nodes:
        if node.summary is None:
            continue
        centre = box.mapViewToScene(QPointF(node.x, node.y))
        size = 12.0 + 2.0 * 1  # two interactions each: _node_size
        marker = QRectF(centre.x() - size / 2, centre.y() - size / 2, size, size)
        covered += [(agent, node.name) for agent in people
                    if labels[agent].intersects(marker)]
    assert covered == []
