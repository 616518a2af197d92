"""The Tasks view: a workspace's dependency graph, card details and a scene preview (issue 9).

* Layered DAG layout by topological generations (prerequisites on the left); with a cycle the
  layers come from the condensation (each strongly connected component is one layer slot) and
  cycle edges are drawn red, their tasks ringed red, their paths listed.
* Zoom (wheel) and pan (drag), Fit (F); nodes filled by status, outlined by priority (the
  thicker, the higher), labelled with id and title over two lines; the full title and the
  card's facts on hover. Arrows point from a prerequisite to the task that needs it. A legend
  under the canvas names every colour and mark (one table, :data:`STATUS_COLOURS` and friends,
  feeds both the drawing and the legend).
* Click a node: its card, dependencies and dependents; the scene preview for it with a token
  budget slider showing what gets pruned (``engine.tasks.build_scene``).
* Live reload: a :class:`engine.tasks.WorkspaceWatcher` thread → a queued Qt signal →
  ``Workspace.update_paths`` on the view's own single worker thread. A ``Workspace`` is not
  thread-safe, so every call on it runs on that one thread (docs/tasks.md).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import itertools
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import networkx as nx
import shiboken6
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
    QFontMetricsF,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPainterPath,
    QPainterPathStroker,
    QPen,
    QPolygonF,
    QResizeEvent,
    QShortcut,
    QShowEvent,
    QWheelEvent,
)
from PySide6.QtWidgets import (
    QGraphicsItem,
    QGraphicsLineItem,
    QGraphicsPolygonItem,
    QGraphicsRectItem,
    QGraphicsScene,
    QGraphicsSimpleTextItem,
    QGraphicsView,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
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
from ui.shared.empty_state import EmptyState
from ui.shared.redaction import Redaction
from ui.shared.tasks import RequestTokens, spawn

__all__ = ["Flow", "TaskGraphView", "choose_flow", "layered_layout"]

T = TypeVar("T")

# One colour per meaning: fills say the status (no red among them), red says "on a cycle" and
# nothing else, the outline's width says the priority. The legend is built from these tables.
STATUS_COLOURS = {"todo": "#afb8c1", "in_progress": "#0969da", "review": "#8250df",
                  "blocked": "#d4a72c", "done": "#1a7f37", "cancelled": "#57606a"}
STATUS_WORDS = {"todo": "to do", "in_progress": "in progress", "review": "in review",
                "blocked": "blocked", "done": "done", "cancelled": "cancelled"}
NO_STATUS_COLOUR = "#eaeef2"  # a card without a (known) status
PRIORITY_WIDTHS = {"critical": 4.0, "high": 2.5, "medium": 1.5, "low": 0.75}
CYCLE_COLOUR = "#e5534b"
NODE_W, NODE_H = 170.0, 44.0
ARROW_LENGTH, ARROW_HALF_WIDTH = 10.0, 4.5
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
    """A dependency line from a prerequisite to its dependent, with an arrowhead at the
    dependent; follows both ends.

    Between layers it is straight, from the prerequisite's outgoing port to the dependent's
    incoming one. Within a layer (the members of a cycle share one) a straight line would run
    through its neighbours, so it leaves and enters on the side across the flow and bows out
    there, farther for rows farther apart (arcs of one cycle nest instead of overlapping);
    ``line()`` still holds the two ends.
    """

    def __init__(self, dependent: _NodeItem, prerequisite: _NodeItem, flow: Flow) -> None:
        super().__init__()
        self.dependent, self.prerequisite, self.flow = dependent, prerequisite, flow
        self.setZValue(-1)
        self.head = QGraphicsPolygonItem(self)
        self.path = QPainterPath()
        dependent.edges.add(self)
        prerequisite.edges.add(self)
        self.adjust()

    @property
    def bent(self) -> bool:
        """True when both ends are in one layer (the edge bows out to the side)."""
        a, b = self.prerequisite.pos(), self.dependent.pos()
        return abs(a.x() - b.x() if self.flow is Flow.LEFT_TO_RIGHT else a.y() - b.y()) < 1.0

    def adjust(self) -> None:
        """Redraw between the two nodes' ports (after either moved)."""
        a, b = self.prerequisite.pos(), self.dependent.pos()
        bent = self.bent
        if self.flow is Flow.LEFT_TO_RIGHT:
            start = a + QPointF(NODE_W, NODE_H / 2)
            end = b + QPointF(NODE_W if bent else 0.0, NODE_H / 2)
            bulge = QPointF(24.0 + abs(end.y() - start.y()) * 0.25, 0.0)
        else:
            start = a + QPointF(NODE_W / 2, NODE_H)
            end = b + QPointF(NODE_W / 2, NODE_H if bent else 0.0)
            bulge = QPointF(0.0, 24.0 + abs(end.x() - start.x()) * 0.25)
        path = QPainterPath(start)
        if bent:
            path.cubicTo(start + bulge, end + bulge, end)
            towards = end + bulge  # the curve's tangent at its end
        else:
            path.lineTo(end)
            towards = start
        self.prepareGeometryChange()
        self.path = path
        self.setLine(start.x(), start.y(), end.x(), end.y())
        dx, dy = end.x() - towards.x(), end.y() - towards.y()
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length  # along the arrow; (-uy, ux) across it
        base = end - QPointF(ux, uy) * ARROW_LENGTH
        across = QPointF(-uy, ux) * ARROW_HALF_WIDTH
        self.head.setPolygon(QPolygonF([end, base + across, base - across]))

    def boundingRect(self) -> QRectF:
        margin = self.pen().widthF() + 1.0
        return self.path.boundingRect().adjusted(-margin, -margin, margin, margin)

    def shape(self) -> QPainterPath:
        stroker = QPainterPathStroker()
        stroker.setWidth(max(self.pen().widthF(), 4.0))
        return stroker.createStroke(self.path)

    def paint(self, painter: QPainter, option: Any, widget: QWidget | None = None) -> None:
        painter.setPen(self.pen())
        painter.setBrush(Qt.BrushStyle.NoBrush)
        painter.drawPath(self.path)

    def set_style(self, colour: QColor, width: float) -> None:
        """Line and arrowhead in ``colour``."""
        self.setPen(QPen(colour, width))
        self.head.setPen(QPen(colour, 1.0))
        self.head.setBrush(QBrush(colour))

    def detach(self) -> None:
        """Forget both ends (before the line leaves the scene)."""
        self.dependent.edges.discard(self)
        self.prerequisite.edges.discard(self)


class _NodeItem(QGraphicsRectItem):
    """One task: filled by status, outlined by priority, labelled; its lines follow it.

    Two rings around it, drawn only when they apply: red when the task is on a cycle, the
    highlight colour when it is selected (Qt's own dotted selection frame is hard to see on a
    coloured fill).
    """

    def __init__(self, node_id: str) -> None:
        super().__init__(0.0, 0.0, NODE_W, NODE_H)
        self.node_id = node_id
        self.edges: set[_EdgeItem] = set()
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemIsSelectable)
        self.setFlag(QGraphicsItem.GraphicsItemFlag.ItemSendsGeometryChanges)
        self.setData(0, node_id)
        self.label = QGraphicsSimpleTextItem("", self)
        self.cycle_ring = self._ring(4.0, QPen(QColor(CYCLE_COLOUR), 2.5))
        self.selection_ring = self._ring(8.0, QPen(QColor("#2f6feb"), 2.5))

    def _ring(self, gap: float, pen: QPen) -> QGraphicsRectItem:
        ring = QGraphicsRectItem(-gap, -gap, NODE_W + 2 * gap, NODE_H + 2 * gap, self)
        ring.setPen(pen)
        ring.setFlag(QGraphicsItem.GraphicsItemFlag.ItemStacksBehindParent)
        ring.hide()
        return ring

    def show_node(self, node: GraphNode, show: Callable[[str], str], outline: QColor,
                  details: str) -> None:
        """Colour, label and tooltip for ``node``; ``show`` masks text while redaction is on.

        Args:
            outline: The outline colour (the theme's text colour; its width is the priority).
            details: Lines for the tooltip below the card's own facts (its links, its cycle).
        """
        fill = QColor(STATUS_COLOURS.get(node.status or "", NO_STATUS_COLOUR))
        self.setBrush(QBrush(fill))
        self.setPen(QPen(outline, PRIORITY_WIDTHS.get(node.priority or "", 0.75)))
        facts = (f"{status_word(node.status)} · {node.priority or 'no'} priority · "
                 f"importance {node.importance:.2f}")
        self.setToolTip(show(f"{node.id} — {node.title}\n{facts}\n{node.path}"
                             + (f"\n{details}" if details else "")))
        self.label.setBrush(QBrush(QColor(label_colour(fill))))
        metrics = QFontMetricsF(self.label.font())  # mask, then cut
        self.label.setText(wrap_label(show(f"{node.id} {node.title}"), metrics,
                                      NODE_W - 12.0, lines=2))
        self.label.setPos(6.0, (NODE_H - self.label.boundingRect().height()) / 2)

    def set_selection_colour(self, colour: QColor) -> None:
        """The selection ring's colour (the theme's highlight)."""
        self.selection_ring.setPen(QPen(colour, 2.5))

    def itemChange(self, change: QGraphicsItem.GraphicsItemChange, value: Any) -> Any:
        if change == QGraphicsItem.GraphicsItemChange.ItemPositionHasChanged:
            for edge in self.edges:
                edge.adjust()
        elif change == QGraphicsItem.GraphicsItemChange.ItemSelectedHasChanged:
            self.selection_ring.setVisible(bool(value))
        return super().itemChange(change, value)

    def paint(self, painter: QPainter, option: Any, widget: QWidget | None = None) -> None:
        painter.setPen(self.pen())
        painter.setBrush(self.brush())
        painter.drawRect(self.rect())  # without Qt's dotted selection frame: the ring says it


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
        self._closed = False
        self._workspace: Workspace | None = None
        self._scratch: Path | None = None  # a temporary folder holding the workspace shown
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
        self.fit_button.setToolTip("Show the whole graph (F). Wheel: zoom · drag: pan")
        self.fit_shortcut = QShortcut(QKeySequence(Qt.Key.Key_F), self, self._on_fit_clicked)
        self.graphics = QGraphicsScene(self)
        self.canvas = _GraphCanvas(self.graphics, self)
        self.zoom_in.clicked.connect(lambda: self.canvas.zoom(1.25))
        self.zoom_out.clicked.connect(lambda: self.canvas.zoom(0.8))
        self.fit_button.clicked.connect(self._on_fit_clicked)
        self.canvas.user_moved.connect(self._on_user_moved)
        self.graphics.selectionChanged.connect(self._on_selection_changed)

        self.legend = QLabel("", self)
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend_entries: list[tuple[str, str]] = []  # (colour, meaning), as shown
        self.cycle_label = QLabel("", self)
        self.cycle_label.setStyleSheet(f"color: {CYCLE_COLOUR}; font-weight: 600;")
        self.cycle_list = QListWidget(self)
        self.cycle_list.setMaximumHeight(80)
        self.cycle_list.setToolTip("Click a cycle to select its first task and bring it into "
                                   "view")
        self.cycle_list.itemClicked.connect(self._on_cycle_clicked)
        self.card_label = QLabel("Click a node to see its card.", self)
        self.card_label.setWordWrap(True)
        self.card_label.setTextFormat(Qt.TextFormat.PlainText)
        self.dependencies = QListWidget(self)
        self.dependents = QListWidget(self)
        for related in (self.dependencies, self.dependents):
            related.itemActivated.connect(self._on_related_activated)
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
        left_layout.addWidget(self.legend)
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
        self._show_legend()
        self.open_action = QAction("Open workspace…", self)
        self.open_action.setToolTip("Choose a folder of task cards")
        self.open_action.triggered.connect(self._on_open_clicked)
        self.empty_state = EmptyState(splitter, "tasks")
        self.set_empty_actions(())
        redaction.changed.connect(self._on_redaction_changed)

    def set_empty_actions(self, extra: Sequence[QAction]) -> None:
        """Offer ``extra`` beside "Open workspace…" while no workspace is open (the window's
        "Open the Demo Workspace")."""
        if self._workspace is None:
            self.empty_state.show_message(
                "Open a task workspace…", "…a folder of Markdown task cards. Their dependency "
                "graph shows here, cycles marked, with what each task needs and the context "
                "scene an agent would get for it.",
                [self.open_action, *extra])

    # -- the owner thread ------------------------------------------------------------------

    async def _on_owner(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn(*args)`` on the owner thread.

        A reload or preview that was already under way when the view closed (between two of
        its steps) is cancelled here: its result has nowhere to go, and the thread is gone.
        """
        if self._closed:
            raise asyncio.CancelledError
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._owner, lambda: fn(*args))

    def shutdown(self) -> None:
        """Stop the watcher and the owner thread (the window calls this on close).

        The workspace goes with its thread: a later restyle (a theme switch reaches closed
        windows too) or reload then finds nothing to run instead of submitting to a stopped
        executor. A temporary copy shown (the demo workspace) is deleted on that thread, after
        whatever it was still doing with the copy.
        """
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self._workspace = None
        self._closed = True
        if self._scratch is not None:
            self._owner.submit(_remove_folder, self._scratch)
            self._scratch = None
        self._owner.shutdown(wait=True)

    # -- opening and reloading -------------------------------------------------------------

    def _on_open_clicked(self) -> None:
        from PySide6.QtWidgets import QFileDialog

        folder = QFileDialog.getExistingDirectory(self, "Open a task workspace")
        if folder:
            spawn(self.open_workspace(Path(folder)))

    async def open_workspace(self, root: Path, *, scratch: Path | None = None
                             ) -> GraphView | None:
        """Load ``root`` on the owner thread, draw its graph and watch it for changes.

        Args:
            root: The workspace folder.
            scratch: A temporary folder that holds ``root`` and belongs to this view (the
                demo workspace's copy): deleted when another workspace replaces it, when the
                view shuts down, or at once if ``root`` cannot be opened.
        """
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        self.root_label.setText(f"Loading {root}…")
        try:
            workspace = await self._on_owner(Workspace.open, root)
            graph = await self._on_owner(_graph_of, workspace)
        except EngineError as exc:
            self.root_label.setText(f"Cannot open {root}: {exc}")
            if scratch is not None and scratch != self._scratch:
                await self._on_owner(_remove_folder, scratch)
            return None
        replaced, self._scratch = self._scratch, scratch
        if replaced is not None and replaced != scratch:  # nothing reads it any more
            await self._on_owner(_remove_folder, replaced)
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
        # The watcher thread's signal is queued: one emitted just before the view shut down
        # (or before another workspace replaced this one) arrives after, with nothing to reload
        # and perhaps no event loop left to run a reload on.
        if self._closed or self._watcher is None:
            return
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
        self.cycles = [tuple(c) for c in graph.cycles]
        self._cycle_edges = {(path[i], path[i + 1]) for path in self.cycles
                             for i in range(len(path) - 1)}
        for gone in [i for i in self._nodes if i not in tasks]:
            self._remove_node(gone)
        for node_id in tasks:
            if node_id not in self._nodes:
                item = self._nodes[node_id] = _NodeItem(node_id)
                self.graphics.addItem(item)
        self._style_nodes()
        for node_id, slot in self._place(layers).items():
            self._move(node_id, slot, animate=not first and node_id in self._slots)
        self._fit_scene_rect(grow_only=not first)
        self._link(graph)
        self._restyle_edges()
        self._show_legend()
        self.cycle_list.clear()
        for path in self.cycles:
            self.cycle_list.addItem(" → ".join(path))
        self.cycle_list.setVisible(bool(self.cycles))
        count = len(self.cycles)
        self.cycle_label.setText(
            f"{count} dependency cycle{'' if count == 1 else 's'} (red): no task on a cycle "
            "can start, each waits for itself" if count else "")
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
            edge.set_style(QColor(CYCLE_COLOUR) if red else text, 2.5 if red else 1.0)

    def _style_nodes(self) -> None:
        """Fill, outline, label, tooltip and rings of every node from the current graph."""
        graph = self._graph
        if graph is None:
            return
        outline = self.palette().text().color()
        highlight = self.palette().highlight().color()
        needs: dict[str, list[str]] = {}
        needed_by: dict[str, list[str]] = {}
        for edge in graph.edges:
            if edge.kind == "depends_on":
                needs.setdefault(edge.source, []).append(edge.target)
                needed_by.setdefault(edge.target, []).append(edge.source)
        for node in graph.nodes:
            item = self._nodes.get(node.id)
            if item is None:
                continue
            details = [f"{label}: {', '.join(ids)}" for label, ids in
                       (("depends on", needs.get(node.id)), ("needed by", needed_by.get(node.id)))
                       if ids]
            details += [f"on a cycle: {' → '.join(path)}" for path in self.cycles
                        if node.id in path]
            item.show_node(node, self._redaction.show, outline, "\n".join(details))
            item.set_selection_colour(highlight)
            item.cycle_ring.setVisible(any(node.id in path for path in self.cycles))

    def _show_legend(self) -> None:
        """What every colour and mark means, in the colours the graph is drawn with now."""
        text = self.palette().text().color().name()
        highlight = self.palette().highlight().color().name()
        entries = [(colour, f"{STATUS_WORDS[status]}") for status, colour
                   in STATUS_COLOURS.items()]
        if self._graph is not None and any(
                n.is_task and n.status not in STATUS_COLOURS for n in self._graph.nodes):
            entries.append((NO_STATUS_COLOUR, "no status"))
        marks = [(text, "⟶", "arrow: from a prerequisite to the task that needs it"),
                 (CYCLE_COLOUR, "▬", "red edges and ring: on a dependency cycle"),
                 (highlight, "▢", "ring: selected"),
                 (text, "▭", "outline: priority, thin (low) to thick (critical)")]
        self.legend_entries = entries + [(colour, meaning) for colour, _g, meaning in marks]
        key = '<span style="color:{};">{}</span>&nbsp;{}'
        fills = "&nbsp;&nbsp; ".join(key.format(c, "■", html.escape(m)) for c, m in entries)
        rest = "&nbsp;&nbsp; ".join(key.format(c, g, html.escape(m)) for c, g, m in marks)
        self.legend.setText(f"<b>Fill</b>: status&nbsp;&nbsp; {fills}<br>{rest}")

    def _restyle(self) -> None:
        """Labels (through redaction), line colours and the legend again, on the same items."""
        self._show_legend()
        if self._graph is None:
            return
        self._style_nodes()
        self._restyle_edges()
        if self._selected in self._nodes:
            self._show_card(self._selected)

    def _on_redaction_changed(self, _on: bool) -> None:
        self._restyle()

    # -- selection, card and scene ---------------------------------------------------------

    def _on_cycle_clicked(self, item: QListWidgetItem) -> None:
        """Go to the clicked cycle: select its first task and scroll it into view."""
        row = self.cycle_list.row(item)
        if 0 <= row < len(self.cycles) and self.cycles[row][0] in self._nodes:
            node = self._nodes[self.cycles[row][0]]
            self.select(node.node_id)
            self.canvas.ensureVisible(node, 60, 60)

    def _on_selection_changed(self) -> None:
        chosen = [i for i in self.graphics.selectedItems() if i.data(0)]
        if chosen:
            self.select(str(chosen[0].data(0)))

    def select(self, card_id: str) -> None:
        """Select ``card_id``: ring it, show its card, dependencies, dependents and scene
        preview."""
        self._selected = card_id
        item = self._nodes.get(card_id)
        if item is not None and not item.isSelected():  # from code: as a click would
            blocked = self.graphics.blockSignals(True)
            self.graphics.clearSelection()
            item.setSelected(True)
            self.graphics.blockSignals(blocked)
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
        self.card_label.setText(show(f"{info.id} — {info.title}\n"
                                     f"status: {status_word(info.status)} · "
                                     f"priority: {info.priority} · importance "
                                     f"{node.importance:.2f}\n{node.path}"))
        nodes = {n.id: n for n in graph.nodes}
        for widget, ids in ((self.dependencies, deps), (self.dependents, users)):
            widget.clear()
            for task_id in ids:  # a task by its title, as on its node: ids alone say little
                other = nodes.get(task_id)
                title = other.title if other is not None and other.title != task_id else ""
                item = QListWidgetItem(show(f"{task_id} — {title}" if title else task_id))
                item.setData(Qt.ItemDataRole.UserRole, task_id)
                if other is not None:
                    item.setToolTip(show(f"{task_id} — {other.title}\nstatus: "
                                         f"{status_word(other.status)} (double-click to "
                                         "select it)"))
                widget.addItem(item)
            if not ids:
                widget.addItem("—")
        spawn(self.preview_scene())

    def _on_related_activated(self, item: QListWidgetItem) -> None:
        """Go to a prerequisite or dependent: select it and scroll it into view."""
        task_id = item.data(Qt.ItemDataRole.UserRole)
        if isinstance(task_id, str) and task_id in self._nodes:
            self.select(task_id)  # refills this list: ``item`` is gone from here on
            self.canvas.ensureVisible(self._nodes[task_id], 60, 60)

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
            if self._scene_tokens.is_current(token) and shiboken6.isValid(self.budget_label):
                self.budget_label.setText(f"No scene for {card_id}: {exc}")
                self.included.clear()
                self.pruned.clear()
            return None
        if not self._scene_tokens.is_current(token) or not shiboken6.isValid(self.budget_label):
            return None  # another card or budget was asked for, or the view was closed meanwhile
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


def _remove_folder(folder: Path) -> None:
    """Owner thread: delete ``folder`` (a temporary copy; what cannot be removed is left to
    the system's temporary-file clean-up)."""
    shutil.rmtree(folder, ignore_errors=True)


def _graph_of(workspace: Workspace) -> GraphView:
    return workspace.graph_view(include_references=False)


def label_colour(fill: QColor) -> str:
    """Dark text on a light fill, white on a dark one (by perceived brightness)."""
    luma = 0.299 * fill.redF() + 0.587 * fill.greenF() + 0.114 * fill.blueF()
    return "#1f2328" if luma > 0.6 else "#ffffff"


def status_word(status: str | None) -> str:
    """A card status as a reader says it (``in_progress`` → "in progress")."""
    if not status:
        return "no status"
    return STATUS_WORDS.get(status, status.replace("_", " "))


def wrap_label(text: str, metrics: QFontMetricsF, width: float, lines: int) -> str:
    """``text`` broken at spaces into at most ``lines`` lines of ``width``; what does not fit
    is elided on the last line (a word longer than a line is elided too)."""
    words = text.split()
    out: list[str] = []
    while words and len(out) < lines - 1:
        line = words.pop(0)
        while words and metrics.horizontalAdvance(f"{line} {words[0]}") <= width:
            line = f"{line} {words.pop(0)}"
        out.append(metrics.elidedText(line, Qt.TextElideMode.ElideRight, width))
    if words:
        out.append(metrics.elidedText(" ".join(words), Qt.TextElideMode.ElideRight, width))
    return "\n".join(out)
