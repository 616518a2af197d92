"""The embedding map: a 2D projection of the store's embeddings (pyqtgraph scatter).

The projection (:mod:`engine.projection`: PCA in numpy, UMAP when ``umap-learn`` is installed)
runs on a worker over a view snapshot (at most 20K points, evenly sampled). Points are coloured
by layer, agent or importance; hovering shows the record's text with its layer, agent,
importance and id; clicking selects the record (``record_selected`` → the records view). The
retrieval view's query is placed on the map (PCA: projected exactly; UMAP: at its neighbours'
centre) as a star and its packed results are ringed, both in the theme's text colour (no point
colour uses it); a legend under the controls names the colours and both marks. The scatter
items are created once and updated with ``setData``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QPoint
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction, QColor, QShowEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine import MapPoints, map_points, umap_available
from engine.errors import EngineError
from ui.observe.timeline_view import current_theme
from ui.records.record_links import RecordRef
from ui.shared.empty_state import EmptyState
from ui.shared.plot_items import PassiveScatter
from ui.shared.session import StoreSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.theme import apply_plot_theme, blend, plot_colors
from ui.shared.wording import count_of

__all__ = ["MapView"]

PALETTE = ("#0969da", "#1a7f37", "#bf8700", "#8250df", "#cf222e", "#bc4c00", "#54aeff",
           "#6e7781", "#2da44e", "#a40e26")
COLOR_BY = ("layer", "agent", "importance")


class MapView(QWidget):
    """Scatter of the projected embeddings with colouring, hover, query overlay and selection.

    Signals:
        record_selected(str): A point was clicked (its record id).
    """

    record_selected = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: StoreSession | None = None
        self._tokens = RequestTokens()
        self._redact: Callable[[str], str] | None = None
        self.data: MapPoints | None = None
        self._stale = False
        self.query_point: npt.NDArray[np.float64] | None = None
        self.neighbours: list[str] = []
        self._query_vector: object = None
        self.current_index = -1  # the point clicked or right-clicked last

        self.method_box = QComboBox(self)
        self.method_box.addItem("pca")
        if umap_available():
            self.method_box.addItem("umap")
        self.color_box = QComboBox(self)
        self.color_box.addItems(COLOR_BY)
        self.refresh_button = QPushButton("Refresh", self)
        self.legend = QLabel("", self)  # the points and what their colours mean
        self.legend.setWordWrap(True)
        self.marks = QLabel("", self)  # what the star and the rings mean
        self.marks.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("projection", self))
        bar.addWidget(self.method_box)
        bar.addWidget(QLabel("colour by", self))
        bar.addWidget(self.color_box)
        bar.addWidget(self.refresh_button)
        bar.addStretch(1)
        key = QHBoxLayout()
        key.addWidget(self.legend, 3)
        key.addWidget(self.marks, 2)

        self.plot = pg.PlotWidget(parent=self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setAspectLocked(False)
        for axis in ("bottom", "left"):  # coordinates without a unit: no "(x0.001)" scaling
            self.plot.getAxis(axis).enableAutoSIPrefix(False)
        self.scatter = pg.ScatterPlotItem(size=8, pen=None, hoverable=True, tip=self._tip,
                                          hoverSize=12)
        self.plot.addItem(self.scatter)
        self.ring = PassiveScatter(size=16, brush=None)  # colours: apply_theme
        self.plot.addItem(self.ring)
        self.query_item = PassiveScatter(size=22, symbol="star")
        self.plot.addItem(self.query_item)
        self.scatter.sigClicked.connect(self._on_clicked)
        # A right click makes the point under the pointer current before the window's record
        # menu (connected later, ui/records/record_links.py) asks for it: pyqtgraph's scatter only
        # reports left clicks.
        self.plot.customContextMenuRequested.connect(self.select_at)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(bar)
        layout.addLayout(key)
        layout.addWidget(self.plot, 1)
        self.empty_state = EmptyState(self.plot, "map")
        self.empty_actions: tuple[QAction, ...] = ()  # the window's ways to fill the store
        self.color_box.currentIndexChanged.connect(self._recolor)
        self.method_box.currentIndexChanged.connect(self.refresh)
        self.refresh_button.clicked.connect(self.refresh)
        self.apply_theme(current_theme())

    # -- state -----------------------------------------------------------------------------

    def set_session(self, session: StoreSession | None) -> None:
        """Map ``session``'s store (projected when the view is shown)."""
        self._session = session
        self.data = None
        self.scatter.setData(x=[], y=[])
        self.ring.setData(x=[], y=[])
        self.query_item.setData(x=[], y=[])
        self.legend.setText("")
        self._show_marks()
        self.empty_state.clear()
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
            self._stale = True
            if self.isVisible():
                self.refresh()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask hover text with ``redact`` (None: as stored)."""
        self._redact = redact

    def _on_records_changed(self, _ids: list[str]) -> None:
        if self.sender() is self._session:
            self._stale = True
            if self.isVisible():
                self.refresh()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._stale:
            self.refresh()

    def refresh(self, *_args: object) -> None:
        """Project again (on a worker)."""
        if self._session is not None:
            self._stale = False
            spawn(self.load())

    async def load(self) -> MapPoints | None:
        """Compute the projection on a worker and draw it."""
        session = self._session
        if session is None:
            return None
        token = self._tokens.next_token()
        try:
            data = await self._runner.run(map_points, session.engine,
                                          self.method_box.currentText())
        except EngineError as exc:
            self.legend.setText(f"projection failed: {exc}")
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        self.data = data
        self.current_index = -1
        # nothing to map: the empty state explains, so the marks key and legend stay quiet
        self.marks.setVisible(bool(len(data.texts)))
        if len(data.texts):
            self.empty_state.clear()
        else:
            self.empty_state.show_message(
                "Nothing to map yet", "The map places every memory by the meaning of its "
                "text (its embedding), so paraphrases sit together. Memories get their "
                "embedding once the model is ready; load the demo data set or import "
                "memories to see them here.", self.empty_actions)
        self._recolor()
        self.plot.autoRange()
        self._draw_query()
        return data

    # -- drawing ---------------------------------------------------------------------------

    def colors(self) -> list[QColor]:
        """Point colours for the current "colour by" choice."""
        data = self.data
        if data is None:
            return []
        by = self.color_box.currentText()
        if by == "importance":
            return [blend("#9ecbff", "#a40e26", v) for v in data.importance.tolist()]
        codes = data.layer if by == "layer" else data.agent
        return [QColor(PALETTE[c % len(PALETTE)]) for c in codes.tolist()]

    def _recolor(self, *_args: object) -> None:
        data = self.data
        if data is None:
            return
        points = data.projection.points
        brushes = [pg.mkBrush(c) for c in self.colors()]
        self.scatter.setData(x=points[:, 0], y=points[:, 1], brush=brushes,
                             data=list(range(len(points))))
        by = self.color_box.currentText()
        if by == "importance":
            legend = "importance: light blue 0 → dark red 1"
        else:
            names = list(data.layer_names) if by == "layer" else list(data.agents)
            present = sorted(set((data.layer if by == "layer" else data.agent).tolist()))
            legend = "  ".join(
                f'<span style="color:{PALETTE[c % len(PALETTE)]}">●</span> {names[c]}'
                for c in present if c < len(names))
        proj = data.projection
        sampled = f" (sample of {proj.total_with_vector:,})" \
            if proj.total_with_vector > len(proj.rows) else ""
        if not len(proj.rows):
            self.legend.setText("")  # the empty state says why there is nothing to map
            return
        self.legend.setText(f"{count_of(len(proj.rows), 'point')}{sampled} · {legend}")
        for axis, number in (("bottom", 0), ("left", 1)):  # what the plane's axes are
            self.plot.setLabel(axis, f"principal component {number + 1} "
                               f"({proj.explained[number]:.0%} of the variance)"
                               if proj.method == "pca" else f"UMAP {number + 1}")

    def _tip(self, x: float, y: float, data: object) -> str:
        """A point's tooltip: the record's text (wrapped), then its layer, agent, importance
        and id — the text first, as the record is known by it."""
        found = self.data
        if found is None or not isinstance(data, int):
            return ""
        text = found.texts[data]
        shown = self._redact(text) if self._redact is not None else text
        lines = textwrap.wrap(shown, 72, max_lines=6, placeholder=" …") or ["(no text)"]
        layer = int(found.layer[data])
        agent = int(found.agent[data])
        facts = " · ".join(part for part in (
            found.layer_names[layer] if layer < len(found.layer_names) else "",
            f"agent {found.agents[agent]}" if agent < len(found.agents) and found.agents[agent]
            else "", f"importance {found.importance[data]:.2f}") if part)
        return "\n".join([*lines, facts, f"id {found.projection.ids[data]}"])

    def _on_clicked(self, _item: object, points: Sequence[object], _event: object) -> None:
        if self.data is None or not len(points):
            return
        index = points[0].data()  # type: ignore[attr-defined]  # pyqtgraph SpotItem
        self.click_point(int(index))

    def click_point(self, index: int) -> None:
        """What a click on point ``index`` does: it becomes the map's current record (the
        context menu's) and opens in the Records view."""
        if self.data is None or not 0 <= index < len(self.data.projection.ids):
            return
        self.current_index = index
        self.record_selected.emit(self.data.projection.ids[index])

    def select_at(self, position: QPoint) -> int:
        """Make the point at ``position`` (plot viewport pixels) current; its index or -1."""
        if self.data is None:
            return -1
        spot = self.scatter.mapFromScene(self.plot.mapToScene(position))
        found = self.scatter.pointsAt(spot)
        if not len(found):
            return -1
        self.current_index = int(found[0].data())
        return self.current_index

    def current_record(self) -> RecordRef | None:
        """The point clicked or right-clicked last (the context menu's record)."""
        data = self.data
        if data is None or not 0 <= self.current_index < len(data.projection.ids):
            return None
        return RecordRef(data.projection.ids[self.current_index],
                         data.texts[self.current_index])

    # -- query overlay ---------------------------------------------------------------------

    def show_query(self, vector: object, neighbour_ids: list[str]) -> None:
        """Place the retrieval view's query and ring its packed neighbours."""
        self.neighbours = list(neighbour_ids)
        self._query_vector = vector
        self._draw_query()

    def _draw_query(self) -> None:
        data = self.data
        if data is None:
            return
        proj = data.projection
        index = {record_id: i for i, record_id in enumerate(proj.ids)}
        hits = [index[i] for i in self.neighbours if i in index]
        self.ring.setData(x=proj.points[hits, 0], y=proj.points[hits, 1])
        vector = self._query_vector
        point: npt.NDArray[np.float64] | None = None
        if vector is not None and proj.method == "pca":
            point = proj.place(np.asarray(vector))[0]
        elif self.neighbours:
            point = proj.place_near(self.neighbours)
        self.query_point = point
        if point is None:
            self.query_item.setData(x=[], y=[])
        else:
            self.query_item.setData(x=[point[0]], y=[point[1]])
        self._show_marks()

    def _show_marks(self) -> None:
        """The key to the star and the rings (or how to get them)."""
        colour = plot_colors(current_theme())[1]
        star = f'<span style="color:{colour}">★</span>'
        ring = f'<span style="color:{colour}">◯</span>'
        if self.query_point is None and not self.neighbours:
            self.marks.setText(f"{star} query and {ring} its results appear here after a "
                               "search in the Retrieval view")
            return
        count = len(self.neighbours)
        where = "" if self.query_point is not None or not count else " (not placed)"
        self.marks.setText(f"{star} the Retrieval view's query{where} · {ring} its "
                           f"{count_of(count, 'packed result')}")

    def apply_theme(self, name: str) -> None:
        """Plot colours of theme ``name``; the query's marks in its text colour."""
        apply_plot_theme(self.plot, name)
        background, foreground = plot_colors(name)
        self.ring.setPen(pg.mkPen(foreground, width=2))
        self.query_item.setPen(pg.mkPen(background, width=1))
        self.query_item.setBrush(pg.mkBrush(foreground))
        self._show_marks()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme(current_theme())
        super().changeEvent(event)
