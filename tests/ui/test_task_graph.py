"""Tasks view (issue 9): cycle paths, budget slider → pruned set, click → card, live reload."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QGraphicsLineItem
from pytestqt.qtbot import QtBot

from engine.tasks import Scene
from tests.ui.conftest import run
from ui.main_window import MainWindow
from ui.task_graph_view import CYCLE_COLOUR, STATUS_COLOURS, TaskGraphView

DEMO = Path(__file__).resolve().parents[2] / "assets" / "demo_workspace"


def _card(root: Path, name: str, status: str, deps: str) -> None:
    (root / f"{name}.md").write_text(
        f"---\nid: {name}\ntitle: Task {name}\nstatus: {status}\npriority: high\n"
        f"depends_on: [{deps}]\n---\n# Task {name}\n\nDo {name}.\n", encoding="utf-8")


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
    assert set(view._nodes) == {"A", "B", "C", "D"}
    assert view._nodes["B"].brush().color().name() == STATUS_COLOURS["in_progress"]
    red = [line for line in view.graphics.items() if isinstance(line, QGraphicsLineItem)
           and line.pen().color().name() == CYCLE_COLOUR]
    assert len(red) == 3  # the three cycle edges
    view._nodes["A"].setSelected(True)  # a click selects the node
    assert "Task A" in view.card_label.text()
    assert view.dependencies.item(0).text() == "B"
    assert view.dependents.item(0).text() == "C"
    with qtbot.waitSignal(view.graph_shown, timeout=10_000):  # the watcher sees a new card
        _card(root, "E", "todo", "D")
    assert "E" in view._nodes


def test_budget_slider_changes_the_pruned_set(
        qtbot: QtBot, tmp_path: Path, make_window: Callable[..., MainWindow]) -> None:
    root = tmp_path / "demo"
    shutil.copytree(DEMO, root, ignore=shutil.ignore_patterns(".mnemoscope"))
    window = make_window()
    view: TaskGraphView = window.tasks_view
    graph = run(qtbot, view.open_workspace(root))
    assert graph is not None and not view.cycles and len(graph.generations) > 1
    # prerequisites are left of their dependents
    column = {i: view._nodes[i].pos().x() for i in view._nodes}
    assert all(column[e.target] < column[e.source] for e in graph.edges
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
