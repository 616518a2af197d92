"""The social graph: who each agent knows, how it feels about them, how often they talk.

Nodes are agents (squares) and their counterparts (circles, one per agent that knows them:
what an agent knows is its own); an edge joins an agent to each counterpart. A counterpart's
colour is its sentiment (the summary's EWMA, red −1 → grey 0 → green +1) and an edge's width
grows with the number of interactions (log scale). The layout is deterministic
(:func:`layout_graph`: agents on a circle, counterparts around their agent), so a refresh does
not move anything that did not change.

Clicking a counterpart shows its summary (interactions, first and last contact, sentiment and
trend), a sentiment plot over time (each interaction and the running EWMA) and the interaction
records; clicking one of those, or double-clicking the node, or "Open summary record" selects
the record in the records view. Clicking an agent shows only that agent's counterparts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine import MemoryReader, SocialSummary
from engine.errors import EngineError
from engine.records import MemoryRecord, format_timestamp
from ui.layers.layer_tab import LayerTab
from ui.observe.timeline_view import current_theme
from ui.shared.plot_items import PassiveScatter
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.theme import apply_plot_theme, blend, plot_colors
from ui.shared.wording import count_of

__all__ = ["GraphNode", "SocialGraph", "SocialView", "edge_width", "layout_graph",
           "sentiment_color"]

_ALL = "All agents"
_EMPTY_TEXT = ("When an agent remembers talking with someone — a record whose metadata names the "
               "other person (social.otherAgentId) — that person appears here, with how the "
               "interactions felt over time. The demo data set has a few agents who know people.")
AGENT_COLOR = "#0969da"
_TREND_ARROWS = {"rising": "↗ rising", "falling": "↘ falling", "steady": "→ steady",
                 "unknown": "? too few to tell"}


def sentiment_color(value: float | None) -> QColor:
    """Red (−1) through grey (0) to green (+1); grey when unknown."""
    if value is None:
        return QColor("#8c959f")
    strength = abs(value) ** 0.6  # moderate feelings are visibly coloured, not near-grey
    return blend("#8c959f", "#cf222e" if value < 0 else "#1a7f37", strength)


def edge_width(interactions: int) -> float:
    """Line width for an edge of ``interactions`` contacts (1.5 px for one, at most 9)."""
    return min(9.0, 1.5 + 1.5 * math.log2(max(1, interactions)))


@dataclass(frozen=True, slots=True)
class GraphNode:
    """A node: an agent (``summary`` None) or one agent's counterpart."""

    name: str
    agent: str
    x: float
    y: float
    summary: SocialSummary | None = None


@dataclass(frozen=True, slots=True)
class SocialGraph:
    """Nodes and the (agent index, counterpart index) edges between them."""

    nodes: tuple[GraphNode, ...]
    edges: tuple[tuple[int, int], ...]


def layout_graph(summaries: Sequence[SocialSummary], agent: str | None = None) -> SocialGraph:
    """Place agents on a circle and each agent's counterparts on an arc facing outwards.

    The arc (at most 200°, 300° for a lone agent) leaves the side towards the centre free for
    the agent's label. Deterministic: agents and counterparts in name order; ``agent`` keeps
    only that agent.
    """
    by_agent: dict[str, list[SocialSummary]] = {}
    for summary in summaries:
        if agent is None or summary.agent_id == agent:
            by_agent.setdefault(summary.agent_id, []).append(summary)
    agents = sorted(by_agent)
    ring = 0.0 if len(agents) <= 1 else max(3.0, 0.75 * len(agents))
    nodes: list[GraphNode] = []
    edges: list[tuple[int, int]] = []
    for number, name in enumerate(agents):
        angle = 2 * math.pi * number / max(1, len(agents)) + math.pi / 2
        ax, ay = ring * math.cos(angle), ring * math.sin(angle)
        agent_index = len(nodes)
        nodes.append(GraphNode(name, name, ax, ay))
        known = sorted(by_agent[name], key=lambda s: s.counterpart)
        widest = math.radians(200.0 if ring else 300.0)
        arc = min(widest, math.radians(55.0) * (len(known) - 1))
        radius = 1.2 if ring else 1.6
        for k, summary in enumerate(known):
            theta = angle + (arc * (k / (len(known) - 1) - 0.5) if len(known) > 1 else 0.0)
            nodes.append(GraphNode(summary.counterpart, name, ax + radius * math.cos(theta),
                                   ay + radius * math.sin(theta), summary))
            edges.append((agent_index, len(nodes) - 1))
    return SocialGraph(tuple(nodes), tuple(edges))


def _label_direction(node: GraphNode, graph: SocialGraph) -> tuple[float, float]:
    """Unit vector pointing away from where the node's edges go (its label goes there)."""
    if node.summary is not None:
        agent = next(n for n in graph.nodes if n.summary is None and n.name == node.agent)
        dx, dy = node.x - agent.x, node.y - agent.y
        length = math.hypot(dx, dy)
        return (0.0, 1.0) if length < 1e-9 else (dx / length, dy / length)
    # An agent: its people face outwards, so the side towards the centre is free; but two
    # agents level with each other (left and right of the circle) put horizontal labels into
    # each other's in a narrow plot. So a label goes below or above its agent (towards the
    # centre), and sideways only where the agent's own people are there.
    if math.hypot(node.x, node.y) < 1e-9:
        return 0.0, -1.0  # a lone agent's people are above it
    people = [math.atan2(n.y - node.y, n.x - node.x) for n in graph.nodes
              if n.summary is not None and n.agent == node.name]
    vertical = (0.0, -1.0 if node.y > 1e-9 else 1.0)
    choices = (vertical, (-math.copysign(1.0, node.x), 0.0) if abs(node.x) > 1e-9 else
               vertical, (0.0, -vertical[1]))
    for dx, dy in choices:
        direction = math.atan2(dy, dx)
        if all(abs(math.remainder(direction - angle, 2 * math.pi)) > math.radians(40)
               for angle in people):
            return dx, dy
    return choices[1]


def _label_anchor(node: GraphNode, graph: SocialGraph) -> tuple[float, float]:
    """Where the label's box hangs on its position (pyqtgraph's ``anchor``).

    Opposite its direction, so the label sits beside the node; an agent's label set below or
    above it, with one of its people close to that side, leans away from them (its left edge
    near the node when they are on its left), so it does not run under that person's marker.
    """
    dx, dy = _label_direction(node, graph)
    anchor = (0.5 - 0.5 * dx, 0.5 + 0.5 * dy)
    if node.summary is not None or dx != 0.0:
        return anchor
    people = [n for n in graph.nodes if n.summary is not None and n.agent == node.name]
    side = math.atan2(dy, dx)
    near = [n.x - node.x for n in people if abs(math.remainder(
        math.atan2(n.y - node.y, n.x - node.x) - side, 2 * math.pi)) < math.radians(75)]
    if not near or abs(sum(near)) < 1e-6:
        return anchor
    return (0.1 if sum(near) < 0 else 0.9), anchor[1]


def _node_size(node: GraphNode) -> float:
    """Marker size in pixels: agents fixed, people growing with their interactions."""
    if node.summary is None:
        return 22.0
    return 12.0 + 2.0 * math.log2(max(1, node.summary.interactions))


class SocialView(LayerTab[list[SocialSummary]]):
    """The social graph with the selected counterpart's summary, sentiment plot and records.

    Signals: see :class:`~ui.layers.layer_tab.LayerTab`.
    """

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(runner, parent)
        self.summaries: list[SocialSummary] = []
        self.graph = SocialGraph((), ())
        self.selected: SocialSummary | None = None
        self._record_tokens = RequestTokens()
        self._labels: list[pg.TextItem] = []

        self.agent_box = QComboBox(self)
        self.agent_box.addItem(_ALL)
        self.agent_box.setMinimumContentsLength(12)
        self.agent_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.refresh_button = QPushButton("Refresh", self)
        self.legend = QLabel("", self)
        self.legend.setWordWrap(True)
        self.legend.setText(
            'sentiment <span style="color:#cf222e">●</span> −1 '
            '<span style="color:#8c959f">●</span> 0 '
            '<span style="color:#1a7f37">●</span> +1 · edge width = interactions · '
            'click a person for details, double-click to open their summary record')
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Agent", self))
        bar.addWidget(self.agent_box)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.legend, 1)

        self.plot = pg.PlotWidget(parent=self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setAspectLocked(True)
        for axis in ("left", "bottom"):
            self.plot.hideAxis(axis)
        self.graph_item = pg.GraphItem()
        self.plot.addItem(self.graph_item)
        self.plot.getViewBox().sigTransformChanged.connect(self._place_labels)
        self.ring = PassiveScatter(size=28, pen=pg.mkPen("#2f6feb", width=3), brush=None)
        self.plot.addItem(self.ring)
        self.graph_item.scatter.sigClicked.connect(self._on_node_clicked)
        self.status = QLabel("", self.plot)

        self.title = QLabel("Click a person in the graph.", self)
        self.title.setWordWrap(True)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.facts = QFormLayout()
        self.interactions_label = QLabel("", self)
        self.contact_label = QLabel("", self)
        self.sentiment_label = QLabel("", self)
        self.sentiment_label.setWordWrap(True)
        self.facts.addRow("Interactions", self.interactions_label)
        self.facts.addRow("Contact", self.contact_label)
        self.facts.addRow("Sentiment", self.sentiment_label)
        self.trend_plot = pg.PlotWidget(parent=self, axisItems={
            "bottom": pg.DateAxisItem(orientation="bottom")})
        self.trend_plot.setMenuEnabled(False)
        self.trend_plot.hideButtons()
        self.trend_plot.setMouseEnabled(x=False, y=False)
        self.trend_plot.setYRange(-1.05, 1.05, padding=0)
        self.trend_plot.setMinimumHeight(120)
        self.trend_plot.setMaximumHeight(170)
        self.trend_plot.getAxis("left").setTicks([[(-1, "−1"), (0, "0"), (1, "+1")]])
        self.trend_plot.getAxis("bottom").setTickDensity(0.6)
        self.trend_plot.getViewBox().setLimits(yMin=-1.05, yMax=1.05)
        self.zero_line = pg.InfiniteLine(pos=0.0, angle=0, pen=pg.mkPen("#8c959f", width=1,
                                                                        style=Qt.PenStyle.DotLine))
        self.trend_plot.addItem(self.zero_line)
        self.ewma_curve = pg.PlotDataItem(pen=pg.mkPen("#2f6feb", width=2))
        self.trend_plot.addItem(self.ewma_curve)
        self.sentiment_dots = pg.ScatterPlotItem(size=8, pen=None)
        self.trend_plot.addItem(self.sentiment_dots)
        self.records = self.record_tree(["When", "Sentiment", "Interaction"], (120, 72))
        self.open_button = QPushButton("Open summary record", self)
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._on_open_summary)

        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(6, 0, 0, 0)
        side_layout.addWidget(self.title)
        side_layout.addLayout(self.facts)
        side_layout.addWidget(self.trend_plot)
        side_layout.addWidget(QLabel("Interaction records (click to open)", side))
        side_layout.addWidget(self.records, 1)
        side_layout.addWidget(self.open_button)
        self.lay_out(bar, self.plot, side, stretch=(3, 2), sizes=(640, 420))
        self.agent_box.currentIndexChanged.connect(self._on_agent_changed)
        self.refresh_button.clicked.connect(self.refresh)
        self.apply_theme(current_theme())

    # -- loading -------------------------------------------------------------------------------

    @staticmethod
    def fetch(reader: MemoryReader) -> list[SocialSummary]:
        """Every summary with its series (worker)."""
        return reader.social_summaries()

    def clear(self) -> None:
        """No session: an empty graph."""
        self.summaries = []
        self._draw()
        self._select(None)
        self.status.setText("")
        self.show_empty(False, "", "")

    def show_error(self, text: str) -> None:
        """Loading failed."""
        self.status.setText(f"Social layer unavailable: {text}")
        self.status.adjustSize()

    def show_data(self, data: list[SocialSummary]) -> None:
        """Draw the summaries, keeping the agent filter and the selection where they still are."""
        self.summaries = list(data)
        agents = sorted({s.agent_id for s in data})
        current = self.agent_box.currentText()
        self.agent_box.blockSignals(True)
        self.agent_box.clear()
        self.agent_box.addItems([_ALL, *agents])
        self.agent_box.setCurrentText(current if current in agents else _ALL)
        self.agent_box.blockSignals(False)
        self._draw()
        self.show_empty(not data, "No relationships yet", _EMPTY_TEXT)
        if not data:
            self.status.setText("")
        else:
            self.status.setText(f"{count_of(len(data), 'relationship')} of "
                                f"{count_of(len(agents), 'agent')}")
        self.status.adjustSize()
        previous = self.selected
        self._select(next((s for s in data if previous is not None
                           and (s.agent_id, s.counterpart) == (previous.agent_id,
                                                               previous.counterpart)), None))

    # -- drawing -------------------------------------------------------------------------------

    def _agent_filter(self) -> str | None:
        text = self.agent_box.currentText()
        return None if text == _ALL else text

    def _draw(self) -> None:
        self.graph = layout_graph(self.summaries, self._agent_filter())
        nodes = self.graph.nodes
        for label in self._labels:
            self.plot.removeItem(label)
        self._labels = []
        if not nodes:
            self.graph_item.setData(pos=np.zeros((0, 2)), adj=np.zeros((0, 2), dtype=int))
            self.ring.setData(x=[], y=[])
            return
        pos = np.array([[n.x, n.y] for n in nodes], dtype=float)
        adj = np.array(self.graph.edges, dtype=int).reshape(-1, 2)
        pens = np.empty(len(adj), dtype=[("red", np.ubyte), ("green", np.ubyte),
                                         ("blue", np.ubyte), ("alpha", np.ubyte),
                                         ("width", float)])
        for i, (_a, c) in enumerate(self.graph.edges):
            summary = nodes[c].summary
            colour = sentiment_color(summary.sentiment if summary else None)
            pens[i] = (colour.red(), colour.green(), colour.blue(), 170,
                       edge_width(summary.interactions if summary else 1))
        brushes = [pg.mkBrush(AGENT_COLOR if n.summary is None
                              else sentiment_color(n.summary.sentiment)) for n in nodes]
        sizes = [_node_size(n) for n in nodes]
        symbols = ["s" if n.summary is None else "o" for n in nodes]
        self.graph_item.setData(pos=pos, adj=adj, pen=pens, size=sizes, symbol=symbols,
                                symbolBrush=brushes, symbolPen=pg.mkPen("#57606a", width=1),
                                data=list(range(len(nodes))), pxMode=True, hoverable=True,
                                tip=self._tip)
        background, foreground = plot_colors(current_theme())
        for node in nodes:
            label = pg.TextItem(node.name, color=foreground, fill=pg.mkBrush(background),
                                anchor=_label_anchor(node, self.graph))
            if node.summary is None:
                font = label.textItem.font()
                font.setBold(True)
                label.setFont(font)
            label.setZValue(-1)  # under the nodes and edges: its fill never hides a node
            self.plot.addItem(label)
            self._labels.append(label)
        self._draw_ring()
        self.plot.autoRange(padding=0.15)
        self._place_labels()

    def _place_labels(self, *_args: object) -> None:
        """Put each label just outside its node, a few pixels away at any zoom."""
        size_x, size_y = self.plot.getViewBox().viewPixelSize()
        for label, node in zip(self._labels, self.graph.nodes, strict=False):
            dx, dy = _label_direction(node, self.graph)
            gap = _node_size(node) / 2 + 4  # pixels
            label.setPos(node.x + dx * gap * size_x, node.y + dy * gap * size_y)

    def _draw_ring(self) -> None:
        selected = self.selected
        for node in self.graph.nodes:
            if selected is not None and node.summary is not None and \
                    (node.agent, node.name) == (selected.agent_id, selected.counterpart):
                self.ring.setData(x=[node.x], y=[node.y])
                return
        self.ring.setData(x=[], y=[])

    def _tip(self, x: float, y: float, data: object) -> str:
        if not isinstance(data, int) or data >= len(self.graph.nodes):
            return ""
        node = self.graph.nodes[data]
        summary = node.summary
        if summary is None:
            known = sum(1 for n in self.graph.nodes if n.agent == node.agent and n.summary)
            return f"agent {node.name}: knows {count_of(known, 'person')} (click to show only them)"
        sentiment = "unknown" if summary.sentiment is None else f"{summary.sentiment:+.2f}"
        return (f"{summary.counterpart} (known to {summary.agent_id}): {summary.interactions} "
                f"interactions, sentiment {sentiment}, {summary.trend}")

    # -- interaction ---------------------------------------------------------------------------

    def _on_agent_changed(self, _index: int) -> None:
        self._draw()

    def _on_node_clicked(self, _item: object, points: Sequence[object], event: object) -> None:
        if not len(points):
            return
        index = int(points[0].data())  # type: ignore[attr-defined]  # pyqtgraph SpotItem
        if index >= len(self.graph.nodes):
            return
        node = self.graph.nodes[index]
        if node.summary is None:
            self.agent_box.setCurrentText(node.agent)
            return
        self.select_counterpart(node.agent, node.name)
        if getattr(event, "double", lambda: False)():
            self.record_selected.emit(node.summary.record_id)

    def select_counterpart(self, agent: str, counterpart: str) -> SocialSummary | None:
        """Select ``counterpart`` as known to ``agent`` (None when there is no such summary)."""
        found = next((s for s in self.summaries
                      if (s.agent_id, s.counterpart) == (agent, counterpart)), None)
        self._select(found)
        return found

    def _select(self, summary: SocialSummary | None) -> None:
        self.selected = summary
        self._draw_ring()
        self.open_button.setEnabled(summary is not None)
        self.records.clear()
        if summary is None:
            self.title.setText("Click a person in the graph.")
            for label in (self.interactions_label, self.contact_label, self.sentiment_label):
                label.setText("")
            self.ewma_curve.setData(x=[], y=[])
            self.sentiment_dots.setData(x=[], y=[])
            return
        self.title.setText(f"{summary.counterpart} — as {summary.agent_id} knows them")
        self.interactions_label.setText(f"{summary.interactions}")
        first = (format_timestamp(summary.first_contact) or "")[:10]
        last = (format_timestamp(summary.last_contact) or "")[:16].replace("T", " ")
        self.contact_label.setText(f"first {first} · last {last}")
        if summary.sentiment is None:
            self.sentiment_label.setText("no sentiment recorded")
        else:
            mean = "" if summary.mean_sentiment is None else \
                f" (mean {summary.mean_sentiment:+.2f})"
            colour = sentiment_color(summary.sentiment).name()
            self.sentiment_label.setText(
                f'<span style="color:{colour}">●</span> {summary.sentiment:+.2f}{mean} · '
                f"{_TREND_ARROWS.get(summary.trend, summary.trend)}")
        points = [p for p in summary.series if p.sentiment is not None]
        self.sentiment_dots.setData(
            x=[p.ts / 1000.0 for p in points], y=[p.sentiment for p in points],
            brush=[pg.mkBrush(sentiment_color(p.sentiment)) for p in points])
        running = [p for p in summary.series if p.ewma is not None]
        self.ewma_curve.setData(x=[p.ts / 1000.0 for p in running],
                                y=[p.ewma for p in running])
        if summary.series:
            t0, t1 = summary.series[0].ts / 1000.0, summary.series[-1].ts / 1000.0
            pad = max((t1 - t0) * 0.05, 3600.0)
            self.trend_plot.setXRange(t0 - pad, t1 + pad, padding=0)
        for point in reversed(summary.series):
            self.records.add_record([
                (format_timestamp(point.ts) or "")[:16].replace("T", " "),
                "—" if point.sentiment is None else f"{point.sentiment:+.2f}"], point.record_id)
        if self.session is not None and summary.series:
            spawn(self._load_contents(summary))

    async def _load_contents(self, summary: SocialSummary) -> list[MemoryRecord]:
        """Fetch the interaction records' text for the list (worker)."""
        session = self.session
        if session is None:
            return []
        token = self._record_tokens.next_token()
        ids = [p.record_id for p in summary.series]
        try:
            found: list[MemoryRecord] = await self._runner.run(session.reader.get_records, ids)
        except EngineError as exc:
            self.message.emit(f"Could not read the interactions: {exc}")
            return []
        if not self._record_tokens.is_current(token) or summary is not self.selected:
            return []
        self.records.set_texts({r.id: r.content for r in found}, self._shown)
        return found

    def _on_open_summary(self) -> None:
        if self.selected is not None:
            self.record_selected.emit(self.selected.record_id)

    def apply_theme(self, name: str) -> None:
        """Plot and label colours of theme ``name``."""
        apply_plot_theme(self.plot, name)
        apply_plot_theme(self.trend_plot, name)
        background, foreground = plot_colors(name)
        for label in self._labels:
            label.setColor(foreground)
            label.fill = pg.mkBrush(background)
            label.update()
