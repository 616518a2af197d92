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
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx
from PySide6.QtCore import (
    QEasingCurve,
    QEvent,
    QPointF,
    QRectF,
    QSizeF,
    Qt,
    QVariantAnimation,
    Signal,
)
from PySide6.QtGui import (
    QAction,
    QBrush,
    QColor,
    QMouseEvent,
    QPainter,
    QPen,
    QResizeEvent,
    QShowEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsLineItem,
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
from engine.tasks import (
    FileChanges,
    GraphNode,
    GraphView,
    Scene,
    Workspace,
    WorkspaceWatcher,
    build_scene,
)
from ui.empty_state import EmptyState
from ui.redaction import Redaction
from ui.tasks import RequestTokens, spawn

__all__ = ["Flow", "TaskGraphView", "choose_flow", "layered_layout"]

T = TypeVar("T")

STATUS_COLOURS = {"todo": "#8c959f", "in_progress": "#0969da", "review": "#8250df",
                  "blocked": "#cf222e", "done": "#1a7f37", "cancelled": "#57606a"}
PRIORITY_PENS = {"critical": ("#cf222e", 4.0), "high": ("#bc4c00", 3.0),
                 "medium": ("#9a6700", 2.0), "low": ("#57606a", 1.0)}
CYCLE_COLOUR = "#e5534b"
NODE_W, NODE_H = 150.0, 44.0
LAYER_GAP = {"left_to_right": 60.0, "top_to_bottom": 36.0}  # between layers
SIBLING_GAP = {"left_to_right": 18.0, "top_to_bottom": 20.0}  # between nodes of a layer
READABLE_ZOOM = 0.6  # the automatic fit never shrinks labels below this
MOVE_MS = 250  # a node whose layer changed glides to its new place


class Flow(Enum):
    """Which way dependencies flow on the canvas: prerequisites first."""

    LEFT_TO_RIGHT = "left_to_right"
    TOP_TO_BOTTOM = "top_to_bottom"

    def position(self, layer: int, row: int) -> QPointF:
        """Scene position of the ``row``-th node of topological ``layer``."""
        along = layer * ((NODE_W if self is Flow.LEFT_TO_RIGHT else NODE_H)
                         + LAYER_GAP[self.value])
        across = row * ((NODE_H if self is Flow.LEFT_TO_RIGHT else NODE_W)
                        + SIBLING_GAP[self.value])
        return QPointF(along, across) if self is Flow.LEFT_TO_RIGHT else QPointF(across, along)

    def extent(self, layers: int, rows: int) -> tuple[float, float]:
        """Width and height of ``layers`` × ``rows`` nodes."""
        corner = self.position(max(layers - 1, 0), max(rows - 1, 0))
        return corner.x() + NODE_W, corner.y() + NODE_H


def choose_flow(layers: Sequence[Sequence[str]], width: float, height: float) -> Flow:
    """The direction that shows the graph largest in a ``width`` × ``height`` canvas
    (left to right unless top to bottom is clearly better: deep, narrow graphs)."""
    depth, breadth = len(layers), max((len(layer) for layer in layers), default=0)

    def scale(flow: Flow) -> float:
        w, h = flow.extent(depth, breadth)
        return min(1.0, width / w, height / h) if w > 0 and h > 0 else 1.0

    better = scale(Flow.TOP_TO_BOTTOM) > 1.15 * scale(Flow.LEFT_TO_RIGHT)
    return Flow.TOP_TO_BOTTOM if better else Flow.LEFT_TO_RIGHT


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
    """Wheel zooms around the cursor; dragging the background pans.

    Signals:
        user_moved(): The user zoomed or panned (the view stops refitting itself).
    """

    user_moved = Signal()

    def __init__(self, scene: QGraphicsScene, parent: QWidget | None = None) -> None:
        super().__init__(scene, parent)
        self.setRenderHint(QPainter.RenderHint.Antialiasing)
        self.setDragMode(QGraphicsView.DragMode.ScrollHandDrag)
        self.setTransformationAnchor(QGraphicsView.ViewportAnchor.AnchorUnderMouse)

    def wheelEvent(self, event: QWheelEvent) -> None:
        factor = 1.15 if event.angleDelta().y() > 0 else 1 / 1.15
        self.zoom(factor)

    def mouseMoveEvent(self, event: QMouseEvent) -> None:
        super().mouseMoveEvent(event)
        if event.buttons() & Qt.MouseButton.LeftButton:
            self.user_moved.emit()  # a drag pans

    def zoom(self, factor: float) -> None:
        """Scale the view by ``factor`` (clamped to 0.1×–5×)."""
        current = self.transform().m11()
        if 0.1 <= current * factor <= 5.0:
            self.scale(factor, factor)
            self.user_moved.emit()


class _EdgeItem(QGraphicsLineItem):
    """A dependency line from a prerequisite to its dependent; follows both ends."""

    def __init__(self, dependent: _NodeItem, prerequisite: _NodeItem, flow: Flow) -> None:
        super().__init__()
        self.dependent, self.prerequisite, self.flow = dependent, prerequisite, flow
        self.setZValue(-1)
        dependent.edges.add(self)
        prerequisite.edges.add(self)
        self.adjust()

    def adjust(self) -> None:
        """Redraw between the two nodes' ports (after either moved)."""
        if self.flow is Flow.LEFT_TO_RIGHT:
            start = self.prerequisite.pos() + QPointF(NODE_W, NODE_H / 2)
            end = self.dependent.pos() + QPointF(0.0, NODE_H / 2)
        else:
            start = self.prerequisite.pos() + QPointF(NODE_W / 2, NODE_H)
            end = self.dependent.pos() + QPointF(NODE_W / 2, 0.0)
        self.setLine(start.x(), start.y(), end.x(), end.y())

    def detach(self) -> None:
        """Forget both ends (before the line leaves the scene)."""
        self.dependent.edges.discard(self)
        self.prerequisite.edges.discard(self)


class _NodeItem(QGraphicsRectItem):
    """One task: filled by status, outlined by priority, labelled; its lines follow it."""

    def __init__(self, node_id: str) -> None:
        super().__init__(0.0, 0.0, NODE_W, NODE_H)
        self.node_id = node_id
        self.edges: set[_EdgeItem] = set()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setData(0, node_id)
        self.label = QGraphicsSimpleTextItem("", self)
        self.label.setBrush(QBrush(QColor("#ffffff")))
        self.label.setPos(6.0, 13.0)

    def show_node(self, node: GraphNode, show: Callable[[str], str]) -> None:
        """Colour and label for ``node``; ``show`` masks text while redaction is on."""
        self.setBrush(QBrush(QColor(STATUS_COLOURS.get(node.status or "", "#d0d7de"))))
        colour, width = PRIORITY_PENS.get(node.priority or "", ("#57606a", 1.0))
        self.setPen(QPen(QColor(colour), width))
        self.setToolTip(show(f"{node.id}: {node.title}\n{node.status} · {node.priority}"))
        self.label.setText(_elide(show(f"{node.id} {node.title}"), 22))  # mask, then cut

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged:
            for edge in self.edges:
                edge.adjust()
        return super().itemChange(change, value)


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
        self._nodes: dict[str, _NodeItem] = {}
        self._edges: dict[tuple[str, str], _EdgeItem] = {}  # (dependent, prerequisite)
        self._slots: dict[str, tuple[int, int]] = {}  # node → (layer, row) it was placed in
        self._moves: dict[str, QVariantAnimation] = {}
        self._cycle_edges: set[tuple[str, str]] = set()
        self.flow = Flow.LEFT_TO_RIGHT
        self._user_view = False  # the user zoomed or panned: reloads and resizes keep it
        self._relayout_on_show = False
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
        self.fit_button.clicked.connect(self._on_fit_clicked)
        self.canvas.user_moved.connect(self._on_user_moved)
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
        side.setMinimumWidth(300)
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
        self.open_action = QAction("Open workspace…", self)
        self.open_action.setToolTip("Choose a folder of task cards")
        self.open_action.triggered.connect(self._on_open_clicked)
        self.empty_state = EmptyState(splitter, "tasks")
        self.empty_state.show_message(
            "Open a task workspace…", "…a folder of Markdown task cards. Their dependency "
            "graph shows here, cycles marked, with what each task needs and the context scene "
            "an agent would get for it.",
            [self.open_action])
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
        self.empty_state.clear()
        self.root_label.setText(str(root))
        self._clear_graph()
        self._show_graph(graph)
        self._user_view = False
        self.fit(readable=True)
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
            self._show_graph(graph)  # in place: zoom, pan and selection stay

    # -- drawing ---------------------------------------------------------------------------

    @property
    def nodes(self) -> Mapping[str, QGraphicsRectItem]:
        """The node items by task id (kept across live reloads while the task exists)."""
        return self._nodes

    @property
    def edges(self) -> Mapping[tuple[str, str], QGraphicsLineItem]:
        """The dependency lines by (dependent, prerequisite)."""
        return self._edges

    def _on_fit_clicked(self) -> None:
        self._user_view = False
        self.fit(readable=False)

    def _on_user_moved(self) -> None:
        self._user_view = True

    def fit(self, *, readable: bool = False) -> None:
        """Fit the whole graph in the view (never enlarged past 1:1).

        Args:
            readable: Do not shrink below :data:`READABLE_ZOOM`; a graph too large for that is
                shown from its start (or around the selected task) and panned from there.
        """
        self._fit_scene_rect(grow_only=False)  # forget the room of nodes gone since
        bounds = self.graphics.sceneRect()
        viewport = self.canvas.viewport()
        self.canvas.resetTransform()
        if bounds.isEmpty():
            return
        scale = min(1.0, viewport.width() / bounds.width(), viewport.height() / bounds.height())
        if readable and scale < READABLE_ZOOM:
            self.canvas.scale(READABLE_ZOOM, READABLE_ZOOM)
            selected = self._nodes.get(self._selected or "")
            if selected is not None:
                self.canvas.centerOn(selected)
            else:  # the prerequisites' end: where reading starts
                self.canvas.centerOn(bounds.left() + viewport.width() / READABLE_ZOOM / 2,
                                     bounds.top() + viewport.height() / READABLE_ZOOM / 2)
            return
        if scale < 1.0:
            self.canvas.fitInView(bounds, Qt.AspectRatioMode.KeepAspectRatio)
        self.canvas.centerOn(bounds.center())

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._relayout_on_show and self._graph is not None:
            self._relayout_on_show = False
            self._relayout(layered_layout(self._graph))
        if not self._user_view:
            self.fit(readable=True)  # the canvas has its real size only once shown

    def _best_flow(self, layers: list[tuple[str, ...]]) -> Flow:
        viewport = self.canvas.viewport()
        return choose_flow(layers, viewport.width(), viewport.height())

    def _relayout(self, layers: list[tuple[str, ...]]) -> None:
        """Lay every node out afresh, in the flow that suits the canvas now."""
        self.flow = self._best_flow(layers)
        self._slots = {}
        for node_id, slot in self._place(layers).items():
            self._move(node_id, slot, animate=False)
        for edge in self._edges.values():
            edge.flow = self.flow
            edge.adjust()
        self._fit_scene_rect(grow_only=False)

    def _fit_scene_rect(self, *, grow_only: bool) -> None:
        """The scrollable area: every node's place (where it is going, not where a gliding
        node is now) with a margin. On a live reload it only grows, so the view's scroll
        position (the user's pan) never jumps."""
        rect = QRectF()
        for slot in self._slots.values():
            rect = rect.united(QRectF(self.flow.position(*slot), QSizeF(NODE_W, NODE_H)))
        rect = rect.adjusted(-40, -40, 40, 40)
        self.graphics.setSceneRect(self.graphics.sceneRect().united(rect) if grow_only
                                   else rect)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if not self._user_view:
            self.fit(readable=True)

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._restyle()  # edge colours follow the light / dark theme

    def _clear_graph(self) -> None:
        """Forget every item (another workspace is shown)."""
        for move in self._moves.values():
            move.stop()
        self._moves.clear()
        self.graphics.clear()
        self._nodes, self._edges, self._slots = {}, {}, {}
        self._graph = None

    def _show_graph(self, graph: GraphView) -> None:
        """Bring the scene to ``graph`` in place: changed nodes are restyled, new ones added,
        gone ones removed; nodes that keep their layer keep their place (others glide to
        theirs), so the user's zoom, pan and selection stay."""
        first = self._graph is None
        self._graph = graph
        tasks = {n.id: n for n in graph.nodes if n.is_task}
        layers = layered_layout(graph)
        if first:
            self.flow = self._best_flow(layers)
            # laid out while hidden: the canvas size is not real yet, decide again when shown
            self._relayout_on_show = not self.isVisible()
        for gone in [i for i in self._nodes if i not in tasks]:
            self._remove_node(gone)
        for node_id, node in tasks.items():
            item = self._nodes.get(node_id)
            if item is None:
                item = self._nodes[node_id] = _NodeItem(node_id)
                self.graphics.addItem(item)
            item.show_node(node, self._redaction.show)
        for node_id, slot in self._place(layers).items():
            self._move(node_id, slot, animate=not first and node_id in self._slots)
        self._fit_scene_rect(grow_only=not first)
        self._link(graph)
        self._cycle_edges = {(path[i], path[i + 1]) for path in graph.cycles
                             for i in range(len(path) - 1)}
        self._restyle_edges()
        self.cycles = [tuple(c) for c in graph.cycles]
        self.cycle_list.clear()
        for path in self.cycles:
            self.cycle_list.addItem(" → ".join(path))
        self.cycle_list.setVisible(bool(self.cycles))
        self.cycle_label.setText(f"{len(self.cycles)} cycle(s): a cycle blocks every task on it"
                                 if self.cycles else "")
        if self._selected in self._nodes:
            self._nodes[self._selected].setSelected(True)
            self._show_card(self._selected)
        elif self._selected is not None:
            self._selected = None
            self._clear_card("The selected task was removed.")
        self.graph_shown.emit(graph)

    def _place(self, layers: list[tuple[str, ...]]) -> dict[str, tuple[int, int]]:
        """(layer, row) of every task: a node that stays in its layer keeps its row; new and
        re-layered nodes take the free rows of their layer, top first."""
        slots: dict[str, tuple[int, int]] = {}
        taken: dict[int, set[int]] = {}
        for layer, members in enumerate(layers):
            for node_id in members:
                old = self._slots.get(node_id)
                if old is not None and old[0] == layer:
                    slots[node_id] = old
                    taken.setdefault(layer, set()).add(old[1])
        for layer, members in enumerate(layers):
            free = (row for row in itertools.count() if row not in taken.get(layer, set()))
            for node_id in members:
                if node_id not in slots:
                    slots[node_id] = (layer, next(free))
        return slots

    def _move(self, node_id: str, slot: tuple[int, int], *, animate: bool) -> None:
        item = self._nodes.get(node_id)
        if item is None or self._slots.get(node_id) == slot:
            return
        self._slots[node_id] = slot
        target = self.flow.position(*slot)
        running = self._moves.pop(node_id, None)
        if running is not None:
            running.stop()
        if not animate or not self.isVisible():
            item.setPos(target)
            return
        move = QVariantAnimation(self)
        move.setStartValue(item.pos())
        move.setEndValue(target)
        move.setDuration(MOVE_MS)
        move.setEasingCurve(QEasingCurve.Type.OutCubic)
        move.valueChanged.connect(item.setPos)
        move.finished.connect(lambda: self._moves.pop(node_id, None))
        self._moves[node_id] = move
        move.start(QVariantAnimation.DeletionPolicy.DeleteWhenStopped)

    def _remove_node(self, node_id: str) -> None:
        item = self._nodes.pop(node_id)
        self._slots.pop(node_id, None)
        move = self._moves.pop(node_id, None)
        if move is not None:
            move.stop()
        for key in [k for k, e in self._edges.items() if item in (e.dependent, e.prerequisite)]:
            self._remove_edge(key)
        self.graphics.removeItem(item)

    def _remove_edge(self, key: tuple[str, str]) -> None:
        edge = self._edges.pop(key)
        edge.detach()
        self.graphics.removeItem(edge)

    def _link(self, graph: GraphView) -> None:
        """Add the new dependency lines, remove the gone ones; kept lines stay."""
        wanted = {(e.source, e.target) for e in graph.edges if e.kind == "depends_on"
                  and e.source in self._nodes and e.target in self._nodes}
        for key in [k for k in self._edges if k not in wanted]:
            self._remove_edge(key)
        for key in sorted(wanted - set(self._edges)):
            dependent, prerequisite = self._nodes[key[0]], self._nodes[key[1]]
            edge = self._edges[key] = _EdgeItem(dependent, prerequisite, self.flow)
            self.graphics.addItem(edge)

    def _restyle_edges(self) -> None:
        text = self.palette().text().color()
        for key, edge in self._edges.items():
            red = key in self._cycle_edges
            edge.setPen(QPen(QColor(CYCLE_COLOUR) if red else text, 2.5 if red else 1.0))

    def _restyle(self) -> None:
        """Labels (through redaction) and line colours again, on the same items."""
        if self._graph is None:
            return
        for node in self._graph.nodes:
            item = self._nodes.get(node.id)
            if item is not None:
                item.show_node(node, self._redaction.show)
        self._restyle_edges()
        if self._selected in self._nodes:
            self._show_card(self._selected)

    def _on_redaction_changed(self, _on: bool) -> None:
        self._restyle()

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

    def _clear_card(self, text: str) -> None:
        self.card_label.setText(text)
        for widget in (self.dependencies, self.dependents, self.included, self.pruned):
            widget.clear()
        self.budget_label.clear()

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
