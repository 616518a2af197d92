"""Tasks view (issue 9): cycle paths, budget slider → pruned set, click → card, live reload."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QColor, QPalette
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QGraphicsLineItem, QGraphicsPolygonItem
from pytestqt.qtbot import QtBot

from engine.tasks import Scene
from engine.tasks.watcher import FileChanges
from tests.ui.conftest import run
from ui.main_window import MainWindow
from ui.shared.tasks import pending_tasks, spawn
from ui.tasks.task_graph_view import (
    CYCLE_COLOUR,
    NODE_H,
    NODE_W,
    READABLE_ZOOM,
    STATUS_COLOURS,
    Flow,
    TaskGraphView,
    choose_flow,
)

DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo_workspace"


def _card(root: Path, name: str, status: str, deps: str, title: str = "") -> None:
    title = title or f"Task {name}"
    (root / f"{name}.md").write_text(
        f"---\nid: {name}\ntitle: {title}\nstatus: {status}\npriority: high\n"
        f"depends_on: [{deps}]\n---\n# {title}\n\nDo {name}.\n", encoding="utf-8")


def test_cycle_is_drawn_red_with_its_path_and_live_reload(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _card(root, "A", "todo", "B")
    _card(root, "B", "in_progress", "C")
    _card(root, "C", "blocked", "A")
    _card(root, "D", "done", "")
    window = make_window()
    view: TaskGraphView = window.tasks_view
    view._watch_interval_ms = 50
    window.nav.setCurrentRow(list(window.views).index("tasks"))
    graph = run(qtbot, view.open_workspace(root))
    assert graph is not None
    assert view.cycles == [("A", "B", "C", "A")]
    assert view.cycle_list.item(0).text() == "A → B → C → A"
    assert set(view.nodes) == {"A", "B", "C", "D"}
    assert view.nodes["B"].brush().color().name() == STATUS_COLOURS["in_progress"]
    red = [line for line in view.graphics.items() if isinstance(line, QGraphicsLineItem)
           and line.pen().color().name() == CYCLE_COLOUR]
    assert len(red) == 3  # the three cycle edges
    view.nodes["A"].setSelected(True)  # a click selects the node
    assert "Task A" in view.card_label.text()
    # a related task by its title, as on its node (the id alone said little)
    assert view.dependencies.item(0).text() == "B — Task B"
    assert view.dependents.item(0).text() == "C — Task C"
    assert "status: blocked" in view.dependents.item(0).toolTip()
    view.dependencies.itemActivated.emit(view.dependencies.item(0))  # Enter / double-click
    assert view.nodes["B"].isSelected() and "Task B" in view.card_label.text()
    assert view.dependents.item(0).text() == "A — Task A"
    with qtbot.waitSignal(view.graph_shown, timeout=10_000):  # the watcher sees a new card
        _card(root, "E", "todo", "D")
    assert "E" in view.nodes


def test_budget_slider_changes_the_pruned_set(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".mnemoscope"))
    window = make_window()
    view: TaskGraphView = window.tasks_view
    graph = run(qtbot, view.open_workspace(root))
    assert graph is not None and not view.cycles and len(graph.generations) > 1
    # prerequisites come before their dependents along the flow (left→right or top→bottom)
    def along_flow(point: QPointF) -> float:
        return point.x() if view.flow is Flow.LEFT_TO_RIGHT else point.y()

    along = {i: along_flow(view.nodes[i].pos()) for i in view.nodes}
    assert all(along[e.target] < along[e.source] for e in graph.edges
               if e.kind == "depends_on")
    task = max((n for n in graph.nodes if n.is_task), key=lambda n: sum(
        1 for e in graph.edges if e.source == n.id))
    view.budget.setValue(12000)
    with qtbot.waitSignal(view.scene_shown, timeout=10_000) as big:
        view.select(task.id)
    large: Scene = big.args[0]
    with qtbot.waitSignal(view.scene_shown, timeout=10_000) as small:
        view.budget.setValue(300)
    tight: Scene = small.args[0]
    assert {p.id for p in tight.pruned} > {p.id for p in large.pruned}
    assert view.pruned.count() == len(tight.pruned) > 0
    assert tight.used_tokens <= 300 or tight.over_budget


def _red(view: TaskGraphView) -> set[tuple[str, str]]:
    return {key for key, line in view.edges.items()
            if line.pen().color().name() == CYCLE_COLOUR}


def test_live_reload_updates_items_in_place(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _card(root, "A", "todo", "B")
    _card(root, "B", "in_progress", "C")
    _card(root, "C", "todo", "")
    _card(root, "D", "done", "")
    _card(root, "E", "todo", "D")
    for other in ("P", "Q", "R"):  # unrelated tasks: a taller graph, to pan both ways
        _card(root, other, "done", "")
    window = make_window()
    view: TaskGraphView = window.tasks_view
    view._watch_interval_ms = 50
    window.nav.setCurrentRow(list(window.views).index("tasks"))
    assert run(qtbot, view.open_workspace(root)) is not None
    items, lines = dict(view.nodes), dict(view.edges)
    places = {i: item.pos() for i, item in items.items()}
    view.nodes["B"].setSelected(True)  # the user selects B, zooms and pans
    for _ in range(4):
        view.canvas.zoom(1.25)  # large enough to pan both ways
    for bar in (view.canvas.horizontalScrollBar(), view.canvas.verticalScrollBar()):
        assert bar.maximum() - bar.minimum() > 20
        bar.setValue((bar.minimum() + bar.maximum()) // 2)
    transform = view.canvas.transform()
    scroll = (view.canvas.horizontalScrollBar().value(), view.canvas.verticalScrollBar().value())

    def kept_view() -> None:
        assert view.canvas.transform() == transform
        assert (view.canvas.horizontalScrollBar().value(),
                view.canvas.verticalScrollBar().value()) == scroll
        assert view.nodes["B"].isSelected() and "Task B" in view.card_label.text()

    with qtbot.waitSignal(view.graph_shown, timeout=10_000):  # edit one card
        _card(root, "C", "done", "", title="Renamed C")
    assert all(view.nodes[i] is items[i] for i in items)  # no item was rebuilt
    assert all(view.edges[k] is lines[k] for k in lines)
    assert view.nodes["C"].brush().color().name() == STATUS_COLOURS["done"]
    assert view.nodes["C"].label.text().startswith("C Renamed C")  # type: ignore[attr-defined]
    assert {i: item.pos() for i, item in view.nodes.items()} == places
    kept_view()

    with qtbot.waitSignal(view.graph_shown, timeout=10_000):  # a new card appears
        _card(root, "F", "todo", "D")
    assert set(view.nodes) == {*items, "F"} and view.nodes["F"].scene() is view.graphics
    assert ("F", "D") in view.edges and view.edges[("F", "D")].scene() is view.graphics
    assert all(view.nodes[i] is items[i] for i in items)
    kept_view()

    removed_node, removed_line = view.nodes["E"], view.edges[("E", "D")]
    with qtbot.waitSignal(view.graph_shown, timeout=10_000):  # a card is deleted
        (root / "E.md").unlink()
    assert "E" not in view.nodes and ("E", "D") not in view.edges
    assert removed_node.scene() is None and removed_line.scene() is None
    kept_view()

    assert not _red(view) and not view.cycle_list.isVisible()
    with qtbot.waitSignal(view.graph_shown, timeout=10_000):  # C now needs A: a cycle
        _card(root, "C", "done", "A", title="Renamed C")
    assert view.cycle_list.item(0).text() == "A → B → C → A"
    assert _red(view) == {("A", "B"), ("B", "C"), ("C", "A")}
    assert all(view.nodes[i] is items[i] for i in ("A", "B", "C", "D"))
    kept_view()
    qtbot.waitUntil(lambda: not view._moves, timeout=5000)  # re-layered nodes glided home
    assert view.nodes["A"].pos() != places["A"]  # A, B, C share a layer now: A moved
    edge = view.edges[("A", "B")]  # and the line followed it to the new place: in one
    line = edge.line()  # layer now, it leaves and enters on the side and bows out there
    assert edge.bent  # type: ignore[attr-defined]
    side = (QPointF(NODE_W, NODE_H / 2) if view.flow is Flow.LEFT_TO_RIGHT
            else QPointF(NODE_W / 2, NODE_H))
    assert line.p1() == view.nodes["B"].pos() + side  # prerequisite's port
    assert line.p2() == view.nodes["A"].pos() + side  # dependent's port
    beyond = edge.boundingRect()
    assert (beyond.right() > view.nodes["A"].sceneBoundingRect().right() + 20
            if view.flow is Flow.LEFT_TO_RIGHT else
            beyond.bottom() > view.nodes["A"].sceneBoundingRect().bottom() + 20)


def test_flow_follows_the_canvas_shape() -> None:
    deep = [(f"T{i}",) for i in range(11)]
    wide = [tuple(f"T{i}" for i in range(8)), ("U",)]
    assert choose_flow(deep, 760, 660) is Flow.TOP_TO_BOTTOM
    assert choose_flow(wide, 760, 660) is Flow.LEFT_TO_RIGHT
    assert choose_flow(deep[:3], 760, 660) is Flow.LEFT_TO_RIGHT  # fits either way: default


def test_auto_fit_keeps_labels_readable_and_fit_shows_all(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "chain"
    root.mkdir()
    for i in range(30):  # a long chain: too long to show whole at a readable size
        _card(root, f"T{i:02d}", "todo", f"T{i - 1:02d}" if i else "")
    window = make_window()
    view: TaskGraphView = window.tasks_view
    window.nav.setCurrentRow(list(window.views).index("tasks"))
    assert run(qtbot, view.open_workspace(root)) is not None
    assert view.canvas.transform().m11() == READABLE_ZOOM
    view.fit_button.click()
    assert view.canvas.transform().m11() < READABLE_ZOOM
    visible = view.canvas.mapToScene(view.canvas.viewport().rect()).boundingRect()
    assert visible.contains(view.graphics.itemsBoundingRect())
    fitted = view.canvas.transform().m11()
    view.canvas.zoom(2.0)
    QTest.keyClick(view.canvas, Qt.Key.Key_F)  # the shortcut fits too
    assert view.canvas.transform().m11() == fitted


LONG = "Migrate the billing database to the new cluster without any downtime"


def test_arrows_legend_full_titles_and_the_cycle_marked(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _card(root, "A", "todo", "B")
    _card(root, "B", "in_progress", "C")
    _card(root, "C", "blocked", "A")
    _card(root, "D", "done", "")
    _card(root, "E", "review", "D", title=LONG)
    window = make_window()
    view: TaskGraphView = window.tasks_view
    window.nav.setCurrentRow(list(window.views).index("tasks"))
    assert run(qtbot, view.open_workspace(root)) is not None

    # one arrowhead per edge, its tip at the dependent's end of the line
    heads = [i for i in view.graphics.items() if isinstance(i, QGraphicsPolygonItem)]
    assert len(heads) == len(view.edges) == 4
    for (dependent, prerequisite), line in view.edges.items():
        head = next(h for h in heads if h.parentItem() is line)
        tip = line.mapToScene(head.polygon().at(0))
        assert tip == line.mapToScene(line.line().p2())
        assert view.nodes[dependent].sceneBoundingRect().adjusted(-1, -1, 1, 1).contains(tip)
        assert not view.nodes[prerequisite].sceneBoundingRect().contains(tip)
        assert head.brush().color() == line.pen().color()
    out, into = ((QPointF(NODE_W, NODE_H / 2), QPointF(0, NODE_H / 2))
                 if view.flow is Flow.LEFT_TO_RIGHT else
                 (QPointF(NODE_W / 2, NODE_H), QPointF(NODE_W / 2, 0)))
    straight = view.edges[("E", "D")].line()  # between layers: port to port
    assert straight.p1() == view.nodes["D"].pos() + out
    assert straight.p2() == view.nodes["E"].pos() + into

    # the legend names every colour drawn; red means a cycle and nothing else
    legend = {colour for colour, _meaning in view.legend_entries}
    drawn = {item.brush().color().name() for item in view.nodes.values()}
    drawn |= {line.pen().color().name() for line in view.edges.values()}
    drawn |= {item.pen().color().name() for item in view.nodes.values()}
    assert drawn <= legend
    assert CYCLE_COLOUR not in STATUS_COLOURS.values()
    assert view.nodes["C"].brush().color().name() != CYCLE_COLOUR  # blocked is not red
    text = view.legend.text()
    assert view.legend.isVisible()
    assert all(word in text for word in ("to do", "in progress", "blocked", "done", "cycle",
                                         "priority", "arrow"))

    # the cycle's path: its edges red, its tasks ringed, named in the status line and tooltips
    assert {k for k, line in view.edges.items()
            if line.pen().color().name() == CYCLE_COLOUR} == {("A", "B"), ("B", "C"),
                                                                ("C", "A")}
    assert {i for i, item in view.nodes.items()
            if item.cycle_ring.isVisible()} == {"A", "B", "C"}  # type: ignore[attr-defined]
    assert "cycle" in view.cycle_label.text()
    assert "on a cycle: A → B → C → A" in view.nodes["B"].toolTip()
    path = view.cycle_list.visualItemRect(view.cycle_list.item(0)).center()
    QTest.mouseClick(view.cycle_list.viewport(), Qt.MouseButton.LeftButton, pos=path)
    assert view.nodes["A"].isSelected() and "Task A" in view.card_label.text()
    assert view.nodes["A"].selection_ring.isVisible()  # type: ignore[attr-defined]

    # a long title: wrapped on the node, whole on hover
    label = view.nodes["E"].label.text()  # type: ignore[attr-defined]
    assert "billing" in label and "\n" in label
    assert LONG in view.nodes["E"].toolTip() and "in review" in view.nodes["E"].toolTip()
    assert "depends on: D" in view.nodes["E"].toolTip()


def test_a_closed_view_schedules_no_work(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _card(root, "A", "todo", "B")
    _card(root, "B", "done", "")
    window = make_window()
    view: TaskGraphView = window.tasks_view
    assert run(qtbot, view.open_workspace(root)) is not None
    with qtbot.waitSignal(view.scene_shown, timeout=10_000):
        view.select("A")
    view.shutdown()  # as the window's close does
    view.setPalette(QPalette(QColor("#202329")))  # a theme switch reaches closed windows too
    assert run(qtbot, view.preview_scene()) is None  # nothing submitted to the stopped thread
    # a reload that was between two of its steps on the owner thread when the view closed:
    # its next step is cancelled, not submitted to the stopped executor (an error)
    step = spawn(view._on_owner(len, "abc"))
    qtbot.waitUntil(step.done, timeout=5000)
    assert step.cancelled()
    # a change the watcher thread noticed just before the close: its queued signal arrives
    # after, and starts nothing (in CI one arrived in a later test, with no event loop left)
    reloads: list[FileChanges] = []

    async def record(changes: FileChanges) -> None:
        reloads.append(changes)

    view._reload = record  # type: ignore[method-assign]
    view._files_changed.emit(FileChanges(added=(), changed=("A.md",), removed=()))
    qtbot.wait(50)
    assert reloads == []
    assert not pending_tasks()


def test_an_empty_tasks_view_offers_the_demo_workspace(
        qtbot: QtBot, make_window: Callable[..., MainWindow]) -> None:
    """Polish: a new user's Tasks view offered only a folder picker; the demo task cards ship
    with the app. They open from a copy, so the shipped folder gets no cache and no edits."""
    from app.wiring import DEMO_WORKSPACE

    plain = make_window()
    assert plain.tasks_view.empty_state.button_texts() == ["Open workspace…"]
    window = make_window(demo_workspace=DEMO_WORKSPACE)
    view = window.tasks_view
    assert view.empty_state.button_texts() == ["Open workspace…", "Open the Demo Workspace"]
    before = sorted(p.name for p in DEMO_WORKSPACE.iterdir())
    copy = run(qtbot, window.open_demo_workspace(), timeout=60)
    assert copy is not None and copy != DEMO_WORKSPACE and copy.name == DEMO_WORKSPACE.name
    assert not view.empty_state.is_shown()
    assert view.root_label.text() == str(copy) and len(view.nodes) > 5  # its task cards
    assert sorted(p.name for p in DEMO_WORKSPACE.iterdir()) == before  # nothing written there


def test_the_demo_workspace_copy_goes_when_replaced_and_when_the_window_closes(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    """Polish: each "Open the Demo Workspace" left a copy in the temporary folder for good."""
    from app.wiring import DEMO_WORKSPACE

    window = make_window(demo_workspace=DEMO_WORKSPACE)
    view = window.tasks_view
    first = run(qtbot, window.open_demo_workspace(), timeout=60)
    second = run(qtbot, window.open_demo_workspace(), timeout=60)
    assert first is not None and second is not None and first.parent != second.parent
    assert not first.parent.exists()  # replaced by the second copy
    assert view.root_label.text() == str(second) and len(view.nodes) > 5
    mine = tmp_path / "mine"  # a person's own workspace replaces the copy, and stays
    shutil.copytree(DEMO_WORKSPACE, mine, ignore=shutil.ignore_patterns(".mnemoscope"))
    assert run(qtbot, view.open_workspace(mine), timeout=60) is not None
    assert not second.parent.exists() and mine.is_dir()
    third = run(qtbot, window.open_demo_workspace(), timeout=60)
    assert third is not None and third.is_dir()
    window.close()  # the window's close shuts the view down
    assert not third.parent.exists() and mine.is_dir()


def test_a_temporary_copy_that_cannot_be_opened_is_deleted_at_once(
        qtbot: QtBot, make_window: Callable[..., MainWindow], tmp_path: Path) -> None:
    view = make_window().tasks_view
    scratch = tmp_path / "copy"
    scratch.mkdir()
    assert run(qtbot, view.open_workspace(scratch / "gone", scratch=scratch)) is None
    assert "Cannot open" in view.root_label.text() and not scratch.exists()
