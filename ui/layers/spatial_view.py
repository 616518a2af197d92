"""The spatial scatter: where things were remembered, filtered by when.

Every record with ``metadata.spatial`` is a point at (x, y) seen from above (z is in the tool
tip and in the radius query), coloured by agent. The strip below counts the points over time;
dragging the edges of its shaded region (or "All time") sets the time filter, which hides the
points created outside it and bounds the radius query.

Clicking a point selects it: its record's text is shown and the engine is asked for the points
within the chosen radius of it (a 3-D sphere, drawn as a circle; the neighbours are ringed and
listed, nearest first). Clicking a neighbour, double-clicking a point or "Open record" selects
the record in the records view. The scatter items are created once and updated with ``setData``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from engine import MemoryReader, SpatialHit
from engine.errors import EngineError
from engine.records import MemoryRecord, format_timestamp
from ui.layers.layer_tab import LayerTab
from ui.observe.map_view import PALETTE
from ui.observe.timeline_view import current_theme
from ui.shared.plot_items import PassiveScatter
from ui.shared.record_tree import GONE
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.theme import apply_plot_theme
from ui.shared.wording import count_of

__all__ = ["SpatialData", "SpatialView"]

_MARKS = ('  · <span style="color:#cf222e">★</span> the point clicked, '
          '<span style="color:#2f6feb">◯</span> the points within its radius (dashed)')
"""The key to the marks a click draws (they were not explained)."""
_ALL = "All agents"
_EMPTY_TEXT = ("Memories made somewhere — a record whose metadata has a position (spatial: x, y, "
               "z) — are drawn here where they were made, filtered by time. The demo data set "
               "has a home robot's.")
F64 = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class SpatialData:
    """The points as columns (sorted by time) with their agents."""

    hits: tuple[SpatialHit, ...]
    x: F64
    y: F64
    z: F64
    t: F64  # seconds (pyqtgraph's DateAxisItem unit)
    agent: npt.NDArray[np.int64]
    agents: tuple[str, ...]

    @classmethod
    def of(cls, hits: Sequence[SpatialHit]) -> SpatialData:
        """Columns of ``hits``."""
        ordered = tuple(sorted(hits, key=lambda h: (h.ts, h.record_id)))
        agents = tuple(sorted({h.agent_id for h in ordered}))
        code = {name: i for i, name in enumerate(agents)}
        return cls(ordered, np.array([h.x for h in ordered], dtype=np.float64),
                   np.array([h.y for h in ordered], dtype=np.float64),
                   np.array([h.z for h in ordered], dtype=np.float64),
                   np.array([h.ts / 1000.0 for h in ordered], dtype=np.float64),
                   np.array([code[h.agent_id] for h in ordered], dtype=np.int64), agents)


class SpatialView(LayerTab[SpatialData]):
    """Scatter of positions with a time filter and radius queries from a clicked point.

    Signals: see :class:`~ui.layers.layer_tab.LayerTab`.
    """

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(runner, parent)
        self.data = SpatialData.of(())
        self.visible_rows: npt.NDArray[np.intp] = np.zeros(0, np.intp)
        self.selected: SpatialHit | None = None
        self.neighbours: list[SpatialHit] = []
        self._query_tokens = RequestTokens()
        self._fitted = False

        self.agent_box = QComboBox(self)
        self.agent_box.addItem(_ALL)
        self.agent_box.setMinimumContentsLength(12)
        self.agent_box.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.radius_spin = QDoubleSpinBox(self)
        self.radius_spin.setRange(0.1, 1000.0)
        self.radius_spin.setDecimals(1)
        self.radius_spin.setSingleStep(0.5)
        self.radius_spin.setValue(2.0)
        self.radius_spin.setToolTip("Radius of the query around a clicked point (3-D)")
        self.refresh_button = QPushButton("Refresh", self)
        self.legend = QLabel("", self)
        self.legend.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("Agent", self))
        bar.addWidget(self.agent_box)
        bar.addWidget(QLabel("Radius", self))
        bar.addWidget(self.radius_spin)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.legend, 1)

        self.plot = pg.PlotWidget(parent=self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setAspectLocked(True)
        self.plot.showGrid(x=True, y=True, alpha=0.15)
        self.plot.setLabel("bottom", "x")
        self.plot.setLabel("left", "y")
        self.scatter = pg.ScatterPlotItem(size=10, pen=pg.mkPen("#57606a", width=0.5),
                                          hoverable=True, tip=self._tip, hoverSize=14)
        self.plot.addItem(self.scatter)
        self.circle = pg.PlotDataItem(pen=pg.mkPen("#2f6feb", width=1.5,
                                                   style=Qt.PenStyle.DashLine))
        self.plot.addItem(self.circle)
        self.ring = PassiveScatter(size=17, pen=pg.mkPen("#2f6feb", width=2), brush=None)
        self.plot.addItem(self.ring)
        self.marker = PassiveScatter(size=20, symbol="star", pen=pg.mkPen("#1f2328"),
                                     brush=pg.mkBrush("#cf222e"))
        self.plot.addItem(self.marker)
        self.scatter.sigClicked.connect(self._on_point_clicked)

        self.strip = pg.PlotWidget(parent=self)  # date ticks set per data (_date_ticks)
        self.strip.setMenuEnabled(False)
        self.strip.hideButtons()
        self.strip.setMouseEnabled(x=False, y=False)
        self.strip.setFixedHeight(86)
        self.strip.getAxis("left").setWidth(40)
        self.strip.getAxis("left").setTicks([[]])
        self.counts = pg.PlotDataItem(stepMode="center", fillLevel=0, pen=pg.mkPen("#0969da"),
                                      brush=pg.mkBrush(9, 105, 218, 90))
        self.strip.addItem(self.counts)
        self.region = pg.LinearRegionItem(brush=pg.mkBrush(47, 111, 235, 40),
                                          pen=pg.mkPen("#2f6feb", width=3),
                                          hoverPen=pg.mkPen("#cf222e", width=4))
        self.region.setToolTip("Drag an edge to narrow the time window, the middle to move it")
        self.strip.addItem(self.region)
        self.all_time_button = QPushButton("All time", self)
        self.time_label = QLabel("", self)
        self._filter_timer = QTimer(self)
        self._filter_timer.setSingleShot(True)
        self._filter_timer.setInterval(60)
        self._filter_timer.timeout.connect(self.apply_filter)
        self.region.sigRegionChanged.connect(self._filter_timer.start)
        self.region.sigRegionChangeFinished.connect(self._on_region_finished)
        self.all_time_button.clicked.connect(self.show_all_time)
        strip_bar = QHBoxLayout()
        strip_bar.addWidget(QLabel("Time filter: drag the shaded region's edges", self))
        strip_bar.addWidget(self.time_label, 1)
        strip_bar.addWidget(self.all_time_button)

        self.title = QLabel("Click a point.", self)
        self.title.setWordWrap(True)
        bold = self.title.font()
        bold.setBold(True)
        self.title.setFont(bold)
        self.content_label = QLabel("", self)
        self.content_label.setWordWrap(True)
        self.neighbour_list = self.record_tree(["Distance", "Agent", "Memory"], (70, 100))
        self.within_label = QLabel("Points within the radius (click to open)", self)
        self.open_button = QPushButton("Open record", self)
        self.open_button.setEnabled(False)
        self.open_button.clicked.connect(self._on_open_selected)
        self.radius_spin.valueChanged.connect(self._on_radius_changed)

        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(6, 0, 0, 0)
        side_layout.addWidget(self.title)
        side_layout.addWidget(self.content_label)
        side_layout.addWidget(self.within_label)
        side_layout.addWidget(self.neighbour_list, 1)
        side_layout.addWidget(self.open_button)
        layout = self.lay_out(bar, self.plot, side, stretch=(3, 2),
                              sizes=(660, 400))
        layout.addWidget(self.strip)
        layout.addLayout(strip_bar)
        self.agent_box.currentIndexChanged.connect(self.apply_filter)
        self.refresh_button.clicked.connect(self.refresh)
        self.apply_theme(current_theme())

    # -- loading -------------------------------------------------------------------------------

    @staticmethod
    def fetch(reader: MemoryReader) -> SpatialData:
        """Every point with a position, as columns (worker)."""
        return SpatialData.of(reader.spatial_points())

    def clear(self) -> None:
        """No session: no points."""
        self.data = SpatialData.of(())
        self._fitted = False
        self._draw_strip()
        self.apply_filter()
        self._select(None)
        self.legend.setText("")
        self.show_empty(False, "", "")

    def show_error(self, text: str) -> None:
        """Loading failed."""
        self.legend.setText(f"Spatial layer unavailable: {text}")

    def show_data(self, data: SpatialData) -> None:
        """Draw the points, keeping the time window when it still fits the data."""
        old_span = self.time_window()
        was_all = self._covers_all(old_span)
        self.data = data
        self.show_empty(not len(data.x), "Nothing placed yet", _EMPTY_TEXT)
        current = self.agent_box.currentText()
        self.agent_box.blockSignals(True)
        self.agent_box.clear()
        self.agent_box.addItems([_ALL, *data.agents])
        self.agent_box.setCurrentText(current if current in data.agents else _ALL)
        self.agent_box.blockSignals(False)
        self._draw_strip()
        if was_all or not self._fitted:
            self.show_all_time()
        else:
            self.apply_filter()
        if not self._fitted and len(data.x):
            self.plot.autoRange(padding=0.08)
            self._fitted = True
        selected = self.selected
        self._select(next((h for h in data.hits
                           if selected is not None and h.record_id == selected.record_id),
                          None), query=selected is not None)

    # -- time filter ---------------------------------------------------------------------------

    def _span(self) -> tuple[float, float]:
        t = self.data.t
        if not len(t):
            return 0.0, 1.0
        t0, t1 = float(t[0]), float(t[-1])
        pad = max((t1 - t0) * 0.02, 60.0)
        return t0 - pad, t1 + pad

    def _covers_all(self, window: tuple[float, float]) -> bool:
        t = self.data.t
        return not len(t) or (window[0] <= t[0] and window[1] >= t[-1])

    def time_window(self) -> tuple[float, float]:
        """The time filter (seconds since the epoch, inclusive)."""
        low, high = self.region.getRegion()
        return float(low), float(high)

    def set_time_window(self, start: float, end: float) -> None:
        """Show only points created in ``start..end`` (seconds since the epoch)."""
        self.region.setRegion((start, end))
        self.apply_filter()

    def show_all_time(self) -> None:
        """Drop the time filter (the region spans every point)."""
        self.set_time_window(*self._span())

    def _draw_strip(self) -> None:
        t = self.data.t
        t0, t1 = self._span()
        bins = max(10, min(120, len(t) // 2 or 10))
        counts, edges = np.histogram(t, bins=bins, range=(t0, t1))
        self.counts.setData(x=edges, y=counts.astype(np.float64))
        self.strip.setXRange(t0, t1, padding=0)
        self.strip.getAxis("bottom").setTicks(_date_ticks(t0, t1))
        self.strip.setYRange(0, max(1.0, float(counts.max(initial=0))) * 1.1, padding=0)
        self.region.setBounds((t0, t1))

    def _mask(self) -> npt.NDArray[np.bool_]:
        low, high = self.time_window()
        mask = (self.data.t >= low) & (self.data.t <= high)
        agent = self.agent_box.currentText()
        if agent != _ALL and agent in self.data.agents:
            mask &= self.data.agent == self.data.agents.index(agent)
        return mask

    def apply_filter(self, *_args: object) -> None:
        """Show the points inside the time window (and of the chosen agent)."""
        rows = np.flatnonzero(self._mask())
        self.visible_rows = rows
        data = self.data
        brushes = [pg.mkBrush(PALETTE[int(c) % len(PALETTE)]) for c in data.agent[rows]]
        self.scatter.setData(x=data.x[rows], y=data.y[rows], brush=brushes,
                             data=rows.tolist())
        low, high = self.time_window()
        when = "" if not len(data.t) else \
            f" · {_date(low * 1000)} → {_date(high * 1000)}"
        self.time_label.setText(f"{len(rows):,} of {count_of(len(data.t), 'point')}{when}")
        present = sorted(set(data.agent[rows].tolist()))
        self.legend.setText("  ".join(
            f'<span style="color:{PALETTE[c % len(PALETTE)]}">●</span> {data.agents[c]}'
            for c in present) + ("  · seen from above (x, y); z in the tool tip" + _MARKS
                                 if present else ""))
        if not len(data.t) and self.session is not None:
            self.legend.setText("No positions yet: records with metadata.spatial {x, y, z} "
                                "appear here (docs/layers.md).")

    def _on_region_finished(self, *_args: object) -> None:
        self._filter_timer.stop()
        self.apply_filter()
        if self.selected is not None:
            spawn(self.query_radius())

    # -- points --------------------------------------------------------------------------------

    def _tip(self, x: float, y: float, data: object) -> str:
        if not isinstance(data, int) or data >= len(self.data.hits):
            return ""
        hit = self.data.hits[data]
        return (f"{hit.agent_id} · ({hit.x:g}, {hit.y:g}, {hit.z:g}) · {_date(hit.ts)}\n"
                f"{hit.record_id}")

    def _on_point_clicked(self, _item: object, points: Sequence[object], event: object) -> None:
        if not len(points):
            return
        row = int(points[0].data())  # type: ignore[attr-defined]  # pyqtgraph SpotItem
        hit = self.data.hits[row]
        if getattr(event, "double", lambda: False)():
            self.record_selected.emit(hit.record_id)
            return
        self.select_point(hit.record_id)

    def select_point(self, record_id: str) -> SpatialHit | None:
        """Select the point of ``record_id`` and query around it (None: no such point)."""
        hit = next((h for h in self.data.hits if h.record_id == record_id), None)
        self._select(hit, query=True)
        return hit

    def _select(self, hit: SpatialHit | None, *, query: bool = False) -> None:
        self.selected = hit
        self.open_button.setEnabled(hit is not None)
        if hit is None:
            self.title.setText("Click a point.")
            self.content_label.setText("")
            self.neighbours = []
            self.neighbour_list.clear()
            for item in (self.marker, self.ring, self.circle):
                item.setData(x=[], y=[])
            return
        self.title.setText(f"{hit.agent_id} at ({hit.x:g}, {hit.y:g}, {hit.z:g}) · "
                           f"{_date(hit.ts)}")
        self.marker.setData(x=[hit.x], y=[hit.y])
        self._draw_circle()
        if query and self.session is not None:
            spawn(self.query_radius())

    def _draw_circle(self) -> None:
        hit = self.selected
        if hit is None:
            self.circle.setData(x=[], y=[])
            return
        radius = self.radius_spin.value()
        angles = np.linspace(0, 2 * math.pi, 97)
        self.circle.setData(x=hit.x + radius * np.cos(angles), y=hit.y + radius * np.sin(angles))

    def _on_radius_changed(self, _value: float) -> None:
        self._draw_circle()
        if self.selected is not None:
            spawn(self.query_radius())

    async def query_radius(self) -> list[SpatialHit] | None:
        """Ask the engine for the points within the radius of the selected one (worker)."""
        session, hit = self.session, self.selected
        if session is None or hit is None:
            return None
        token = self._query_tokens.next_token()
        low, high = self.time_window()
        radius = self.radius_spin.value()
        try:
            found: list[SpatialHit] = await self._runner.run(
                session.reader.spatial_within, (hit.x, hit.y, hit.z), radius,
                since=low * 1000.0, until=high * 1000.0)
            records: list[MemoryRecord] = await self._runner.run(
                session.reader.get_records, [hit.record_id, *(h.record_id for h in found[:50])])
        except EngineError as exc:
            if self._query_tokens.is_current(token):
                self.content_label.setText(f"Query failed: {exc}")
            return None
        if not self._query_tokens.is_current(token) or hit is not self.selected:
            return None
        agent = self.agent_box.currentText()
        self.neighbours = [h for h in found if h.record_id != hit.record_id
                           and (agent == _ALL or h.agent_id == agent)]
        contents = {r.id: r.content for r in records}
        own = contents.get(hit.record_id)
        self.content_label.setText(self._shown(" ".join(own.split())) if own is not None
                                   else GONE)
        self.ring.setData(x=[h.x for h in self.neighbours], y=[h.y for h in self.neighbours])
        self.within_label.setText(f"{len(self.neighbours)} other point"
                                  f"{'s' if len(self.neighbours) != 1 else ''} within "
                                  f"{radius:g} (click to open)")
        self.neighbour_list.clear()
        for neighbour in self.neighbours:  # the texts of the first 50 were read above
            self.neighbour_list.add_record(
                [f"{neighbour.distance or 0.0:.2f}", neighbour.agent_id], neighbour.record_id,
                contents.get(neighbour.record_id), self._shown)
        return self.neighbours

    def _on_open_selected(self) -> None:
        if self.selected is not None:
            self.record_selected.emit(self.selected.record_id)

    def apply_theme(self, name: str) -> None:
        """Plot colours of theme ``name``."""
        apply_plot_theme(self.plot, name)
        apply_plot_theme(self.strip, name)


def _date(ms: float) -> str:
    return (format_timestamp(ms) or "")[:10]


def _date_ticks(t0: float, t1: float) -> list[list[tuple[float, str]]]:
    """Axis ticks over ``t0..t1`` (seconds, UTC): months labelled, then Mondays by day.

    pyqtgraph's date axis labels days and month starts at the same level, so "30", "Sep" and
    "04" ran into each other; here a Monday within three days of a month start stays unlabelled.
    """
    start = datetime.fromtimestamp(t0, UTC).date()
    end = datetime.fromtimestamp(t1, UTC).date()
    months: list[tuple[float, str]] = []
    mondays: list[tuple[float, str]] = []
    day = start
    while day <= end:
        at = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()
        if day.day == 1:
            months.append((at, day.strftime("%b %Y" if day.month == 1 else "%b")))
        elif day.weekday() == 0 and 4 <= day.day <= 28:
            mondays.append((at, str(day.day)))
        day += timedelta(days=1)
    if not months and start.day != 1:  # a window inside one month still names it
        months.append((t0, start.strftime("%b %Y")))
    return [months, mondays]
