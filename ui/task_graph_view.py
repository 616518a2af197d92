"""The Tasks view: a workspace's dependency graph, card details and a scene preview (issue 9).

* Layered DAG layout by topological generations (prerequisites on the left); with a cycle the
  layers come from the condensation (each strongly connected component is one layer slot) and
  cycle edges are drawn red, their paths listed.
* Zoom (wheel) and pan (drag); nodes filled by status, outlined by priority.
* Click a node: its card, dependencies and dependents; the scene preview for it with a token
  budget slider showing what gets pruned (``engine.tasks.build_scene``).
* Live reload: a :class:`engine.tasks.WorkspaceWatcher` thread → a queued Qt signal →
  ``Workspace.update_paths`` on the view's own single worker thread. A ``Workspace`` is not
  thread-safe, so every call on it runs on that one thread (docs/tasks.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx
from PySide6.QtCore import QEvent, QPointF, Qt, Signal
from PySide6.QtGui import (
    QBrush,
    QColor,
    QPainter,
    QPen,
    QResizeEvent,
    QShowEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QSlider,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.errors import EngineError
from engine.tasks import FileChanges, GraphView, Scene, Workspace, WorkspaceWatcher, build_scene
from ui.redaction import Redaction
from ui.tasks import RequestTokens, spawn

__all__ = ["TaskGraphView", "layered_layout"]

T = TypeVar("T")

STATUS_COLOURS = {"todo": "#8c959f", "in_progress": "#0969da", "review": "#8250df",
                  "blocked": "#cf222e", "done": "#1a7f37", "cancelled": "#57606a"}
PRIORITY_PENS = {"critical": ("#cf222e", 4.0), "high": ("#bc4c00", 3.0),
                 "medium": ("#9a6700", 2.0), "low": ("#57606a", 1.0)}
CYCLE_COLOUR = "#e5534b"
NODE_W, NODE_H, GAP_X, GAP_Y = 150.0, 44.0, 70.0, 18.0


def layered_layout(view: GraphView) -> list[tuple[str, ...]]:
    """Layers of task ids, prerequisites first.

    The engine's topological generations when the graph is acyclic; otherwise generations of
    the condensation (the members of a cycle share a layer), so a cyclic workspace still shows.
    """
    if view.generations:
        return [tuple(layer) for layer in view.generations]
    graph: Any = nx.DiGraph()
    graph.add_nodes_from(n.id for n in view.nodes if n.is_task)
    graph.add_edges_from((e.target, e.source) for e in view.edges  # prerequisite → dependent
                         if e.kind == "depends_on")
    condensed = nx.condensation(graph)
    layers: list[tuple[str, ...]] = []
    for generation in nx.topological_generations(condensed):
        members = sorted(m for c in generation for m in condensed.nodes[c]["members"])
        layers.append(tuple(members))
    return layers


@dataclass(frozen=True, slots=True)
class CardInfo:
    """The selected card as the side panel shows it."""

    id: str
    title: str
    status: str | None
    priority: str | None
    dependencies: tuple[str, ...]
    dependents: tuple[str, ...]


class _GraphCanvas(QGraphicsView):
    """Wheel zooms around the cursor; dragging the background pans."""

    def __init__(self, scene: QGraphicsScene, parent: QWidget | None = None) -> None:
        super().__init__(scene, parent)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)

    def wheelEvent(self, event: QWheelEvent) -> None:
        factor = 1.15 if event.angleDelta().y() > 0 else 1 / 1.15
        self.zoom(factor)

    def zoom(self, factor: float) -> None:
        """Scale the view by ``factor`` (clamped to 0.1×–5×)."""
        current = self.transform().m11()
        if 0.1 <= current * factor <= 5.0:
            self.scale(factor, factor)


class TaskGraphView(QWidget):
    """Open a workspace and explore its task graph.

    Signals:
        graph_shown(object): A :class:`GraphView` was drawn (after open or a live reload).
        scene_shown(object): A :class:`Scene` preview was shown.
    """

    graph_shown = Signal(object)
    scene_shown = Signal(object)
    _files_changed = Signal(object)  # emitted on the watcher thread → queued to the GUI

    def __init__(self, redaction: Redaction, parent: QWidget | None = None, *,
                 watch_interval_ms: int = 500) -> None:
        super().__init__(parent)
        self._redaction = redaction
        # One thread owns the Workspace: it is not thread-safe (docs/tasks.md).
        self._owner = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="mnemo-workspace")
        self._workspace: Workspace | None = None
        self._watcher: WorkspaceWatcher | None = None
        self._watch_interval_ms = watch_interval_ms
        self._graph: GraphView | None = None
        self._nodes: dict[str, QGraphicsRectItem] = {}
        self._selected: str | None = None
        self._scene_tokens = RequestTokens()
        self._scene_result: Scene | None = None
        self.cycles: list[tuple[str, ...]] = []

        self.open_button = QPushButton("Open workspace…", self)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.root_label = QLabel("No workspace", self)
        self.zoom_in = QPushButton("+", self)
        self.zoom_out = QPushButton("−", self)
        self.fit_button = QPushButton("Fit", self)
        self.graphics = QGraphicsScene(self)
        self.canvas = _GraphCanvas(self.graphics, self)
        self.zoom_in.clicked.connect(lambda: self.canvas.zoom(1.25))
        self.zoom_out.clicked.connect(lambda: self.canvas.zoom(0.8))
        self.fit_button.clicked.connect(self.fit)
        self.graphics.selectionChanged.connect(self._on_selection_changed)

        self.cycle_label = QLabel("", self)
        self.cycle_label.setStyleSheet(f"color: {CYCLE_COLOUR}; font-weight: 600;")
        self.cycle_list = QListWidget(self)
        self.cycle_list.setMaximumHeight(80)
        self.card_label = QLabel("Click a node to see its card.", self)
        self.card_label.setWordWrap(True)
        self.card_label.setTextFormat(Qt.TextFormat.PlainText)
        self.dependencies = QListWidget(self)
        self.dependents = QListWidget(self)
        self.budget = QSlider(Qt.Orientation.Horizontal, self)
        self.budget.setRange(200, 12000)
        self.budget.setSingleStep(100)
        self.budget.setPageStep(1000)
        self.budget.setValue(4000)
        self.budget_label = QLabel("", self)
        self.included = QListWidget(self)
        self.pruned = QListWidget(self)
        self.budget.valueChanged.connect(self._on_budget_changed)
        self._files_changed.connect(self._on_files_changed)

        side = QWidget(self)
        side.setMaximumWidth(380)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(6, 0, 0, 0)
        side_layout.addWidget(self.card_label)
        for title, widget in (("Depends on", self.dependencies),
                              ("Needed by", self.dependents)):
            side_layout.addWidget(QLabel(title, side))
            side_layout.addWidget(widget, 1)
        side_layout.addWidget(QLabel("Scene preview — token budget", side))
        side_layout.addWidget(self.budget)
        side_layout.addWidget(self.budget_label)
        side_layout.addWidget(QLabel("Included", side))
        side_layout.addWidget(self.included, 2)
        side_layout.addWidget(QLabel("Pruned", side))
        side_layout.addWidget(self.pruned, 1)
        left = QWidget(self)
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.canvas, 1)
        left_layout.addWidget(self.cycle_label)
        left_layout.addWidget(self.cycle_list)
        splitter = QSplitter(self)
        splitter.addWidget(left)
        splitter.addWidget(side)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        top = QHBoxLayout()
        top.addWidget(self.open_button)
        top.addWidget(self.root_label, 1)
        for button in (self.zoom_out, self.zoom_in, self.fit_button):
            top.addWidget(button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        self.cycle_list.hide()
        redaction.changed.connect(self._on_redaction_changed)

    # -- the owner thread ------------------------------------------------------------------

    async def _on_owner(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._owner, lambda: fn(*args))

    def shutdown(self) -> None:
        """Stop the watcher and the owner thread (the window calls this on close)."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._owner.shutdown(wait=True)

    # -- opening and reloading -------------------------------------------------------------

    def _on_open_clicked(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        folder = QFileDialog.getExistingDirectory(self, "Open a task workspace")
        if folder:
            spawn(self.open_workspace(Path(folder)))

    async def open_workspace(self, root: Path) -> GraphView | None:
        """Load ``root`` on the owner thread, draw its graph and watch it for changes."""
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self.root_label.setText(f"Loading {root}…")
        try:
            workspace = await self._on_owner(Workspace.open, root)
            graph = await self._on_owner(_graph_of, workspace)
        except EngineError as exc:
            self.root_label.setText(f"Cannot open {root}: {exc}")
            return None
        self._workspace = workspace
        self.root_label.setText(str(root))
        self._draw(graph)
        self._watcher = WorkspaceWatcher(root, self._files_changed.emit,
                                         interval_ms=self._watch_interval_ms)
        self._watcher.start()
        return graph

    def _on_files_changed(self, changes: FileChanges) -> None:
        spawn(self._reload(changes))

    async def _reload(self, changes: FileChanges) -> None:
        workspace = self._workspace
        if workspace is None:
            return
        try:
            await self._on_owner(workspace.update_paths, changes.paths)
            graph = await self._on_owner(_graph_of, workspace)
        except EngineError as exc:
            self.root_label.setText(f"{workspace.root}: {exc}")
            return
        if workspace is self._workspace:
            self._draw(graph)

    # -- drawing ---------------------------------------------------------------------------

    def fit(self) -> None:
        """Fit the whole graph in the view (not enlarged past 1:1)."""
        bounds = self.graphics.itemsBoundingRect().adjusted(-20, -20, 20, 20)
        self.canvas.resetTransform()
        if bounds.width() > self.canvas.viewport().width() \
                or bounds.height() > self.canvas.viewport().height():
            self.canvas.fitInView(bounds, Qt.AspectRatioMode.KeepAspectRatio)
        self.canvas.centerOn(bounds.center())

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self.fit()  # the canvas has its real size only once shown

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.fit()

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._graph is not None:
            self._draw(self._graph)  # edge colours follow the light / dark theme

    def _draw(self, graph: GraphView) -> None:
        self._graph = graph
        self.graphics.clear()
        self._nodes = {}
        nodes = {n.id: n for n in graph.nodes if n.is_task}
        text_colour = self.palette().text().color()
        for column, layer in enumerate(layered_layout(graph)):
            for row, node_id in enumerate(layer):
                node = nodes.get(node_id)
                if node is None:
                    continue
                item = QGraphicsRectItem(0.0, 0.0, NODE_W, NODE_H)
                item.setPos(column * (NODE_W + GAP_X), row * (NODE_H + GAP_Y))
                item.setBrush(QBrush(QColor(STATUS_COLOURS.get(node.status or "", "#d0d7de"))))
                colour, width = PRIORITY_PENS.get(node.priority or "", ("#57606a", 1.0))
                item.setPen(QPen(QColor(colour), width))
                item.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
                item.setData(0, node_id)
                item.setToolTip(self._redaction.show(
                    f"{node.id}: {node.title}\n{node.status} · {node.priority}"))
                label = QGraphicsSimpleTextItem(self._redaction.show(
                    _elide(f"{node.id} {node.title}", 22)), item)
                label.setBrush(QBrush(QColor("#ffffff")))
                label.setPos(6.0, 13.0)
                self.graphics.addItem(item)
                self._nodes[node_id] = item
        cycle_edges = {(path[i], path[i + 1]) for path in graph.cycles
                       for i in range(len(path) - 1)}
        for edge in graph.edges:
            if edge.kind != "depends_on":
                continue
            source, target = self._nodes.get(edge.source), self._nodes.get(edge.target)
            if source is None or target is None:
                continue
            # prerequisite (target) → dependent (source): left to right
            start = target.pos() + QPointF(NODE_W, NODE_H / 2)
            end = source.pos() + QPointF(0.0, NODE_H / 2)
            in_cycle = (edge.source, edge.target) in cycle_edges
            pen = QPen(QColor(CYCLE_COLOUR) if in_cycle else text_colour,
                       2.5 if in_cycle else 1.0)
            line = self.graphics.addLine(start.x(), start.y(), end.x(), end.y(), pen)
            line.setZValue(-1)
        self.cycles = [tuple(c) for c in graph.cycles]
        self.cycle_list.clear()
        for path in self.cycles:
            self.cycle_list.addItem(" → ".join(path))
        self.cycle_list.setVisible(bool(self.cycles))
        self.cycle_label.setText(f"{len(self.cycles)} cycle(s): a cycle blocks every task on it"
                                 if self.cycles else "")
        self.fit()
        if self._selected in self._nodes:
            self._nodes[self._selected].setSelected(True)
            self._show_card(self._selected)
        self.graph_shown.emit(graph)

    def _on_redaction_changed(self, _on: bool) -> None:
        if self._graph is not None:
            self._draw(self._graph)

    # -- selection, card and scene ---------------------------------------------------------

    def _on_selection_changed(self) -> None:
        chosen = [i for i in self.graphics.selectedItems() if i.data(0)]
        if chosen:
            self.select(str(chosen[0].data(0)))

    def select(self, card_id: str) -> None:
        """Select ``card_id``: show its card, dependencies, dependents and scene preview."""
        self._selected = card_id
        self._show_card(card_id)

    def _show_card(self, card_id: str) -> None:
        graph = self._graph
        if graph is None:
            return
        node = next((n for n in graph.nodes if n.id == card_id), None)
        if node is None:
            return
        deps = tuple(e.target for e in graph.edges
                     if e.kind == "depends_on" and e.source == card_id)
        users = tuple(e.source for e in graph.edges
                      if e.kind == "depends_on" and e.target == card_id)
        info = CardInfo(node.id, node.title, node.status, node.priority, deps, users)
        show = self._redaction.show
        self.card_label.setText(show(f"{info.id} — {info.title}\nstatus: {info.status} · "
                                     f"priority: {info.priority} · importance "
                                     f"{node.importance:.2f}\n{node.path}"))
        for widget, ids in ((self.dependencies, deps), (self.dependents, users)):
            widget.clear()
            widget.addItems([show(i) for i in ids] or ["—"])
        spawn(self.preview_scene())

    def _on_budget_changed(self, _value: int) -> None:
        spawn(self.preview_scene())

    async def preview_scene(self) -> Scene | None:
        """Build the scene of the selected card at the slider's budget (owner thread)."""
        workspace, card_id = self._workspace, self._selected
        if workspace is None or card_id is None:
            return None
        budget = self.budget.value()
        token = self._scene_tokens.next_token()
        try:
            scene = await self._on_owner(build_scene, workspace, card_id, budget)
        except EngineError as exc:
            if self._scene_tokens.is_current(token):
                self.budget_label.setText(f"No scene for {card_id}: {exc}")
                self.included.clear()
                self.pruned.clear()
            return None
        if not self._scene_tokens.is_current(token):
            return None
        self._scene_result = scene
        show = self._redaction.show
        self.budget_label.setText(f"{scene.used_tokens:,} of {budget:,} tokens · "
                                  f"{len(scene.included)} included, {len(scene.pruned)} pruned")
        self.included.clear()
        self.included.addItems([show(f"{e.id}  ({e.tokens} tok, priority {e.priority})")
                                for e in scene.included])
        self.pruned.clear()
        self.pruned.addItems([show(f"{e.id}  ({e.tokens} tok, priority {e.priority})")
                              for e in scene.pruned])
        self.scene_shown.emit(scene)
        return scene


def _graph_of(workspace: Workspace) -> GraphView:
    return workspace.graph_view(include_references=False)


def _elide(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"
