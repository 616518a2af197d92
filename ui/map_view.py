"""The embedding map: a 2D projection of the store's embeddings (pyqtgraph scatter).

The projection (:mod:`engine.projection`: PCA in numpy, UMAP when ``umap-learn`` is installed)
runs on a worker over a view snapshot (at most 20K points, evenly sampled). Points are coloured
by layer, agent or importance; hovering shows the record's text; clicking selects the record
(``record_selected`` → the records view). The retrieval view's query is placed on the map
(PCA: projected exactly; UMAP: at its neighbours' centre) and its packed neighbours ringed.
Both scatter items are created once and updated with ``setData``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QColor, QShowEvent
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from engine.errors import EngineError
from engine.memory_engine import MemoryEngine
from engine.projection import Projection, project_snapshot, umap_available
from engine.store.view import LAYERS
from ui.empty_state import EmptyState
from ui.plot_items import PassiveScatter
from ui.session import StoreSession
from ui.tasks import RequestTokens, TaskRunner, spawn
from ui.theme import apply_plot_theme, blend
from ui.timeline_view import current_theme

__all__ = ["MapData", "MapView"]

PALETTE = ("#0969da", "#1a7f37", "#bf8700", "#8250df", "#cf222e", "#bc4c00", "#54aeff",
           "#6e7781", "#2da44e", "#a40e26")
COLOR_BY = ("layer", "agent", "importance")


@dataclass(frozen=True, slots=True, eq=False)
class MapData:
    """A projection with the columns the map colours and labels by."""

    projection: Projection
    layer: npt.NDArray[np.int64]
    agent: npt.NDArray[np.int64]
    agents: tuple[str, ...]
    importance: npt.NDArray[np.float64]
    texts: tuple[str, ...]


def _project(engine: MemoryEngine, method: str) -> MapData:
    snapshot = engine.store.view.snapshot()
    projection = project_snapshot(snapshot, method=method)
    rows = projection.rows
    return MapData(projection, snapshot.layer[rows].astype(np.int64),
                   snapshot.agent[rows].astype(np.int64), tuple(snapshot.agents),
                   snapshot.importance[rows].astype(np.float64),
                   tuple(snapshot.contents[int(r)][:160] for r in rows))


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
        self.data: MapData | None = None
        self._stale = False
        self.query_point: npt.NDArray[np.float64] | None = None
        self.neighbours: list[str] = []
        self._query_vector: object = None

        self.method_box = QComboBox(self)
        self.method_box.addItem("pca")
        if umap_available():
            self.method_box.addItem("umap")
        self.color_box = QComboBox(self)
        self.color_box.addItems(COLOR_BY)
        self.refresh_button = QPushButton("Refresh", self)
        self.legend = QLabel("", self)
        self.legend.setWordWrap(True)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("projection", self))
        bar.addWidget(self.method_box)
        bar.addWidget(QLabel("colour by", self))
        bar.addWidget(self.color_box)
        bar.addWidget(self.refresh_button)
        bar.addWidget(self.legend, 1)

        self.plot = pg.PlotWidget(parent=self)
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.setAspectLocked(False)
        self.scatter = pg.ScatterPlotItem(size=8, pen=None, hoverable=True, tip=self._tip,
                                          hoverSize=12)
        self.plot.addItem(self.scatter)
        self.ring = PassiveScatter(size=16, pen=pg.mkPen("#cf222e", width=2), brush=None)
        self.plot.addItem(self.ring)
        self.query_item = PassiveScatter(size=20, symbol="star",
                                             pen=pg.mkPen("#1f2328", width=1),
                                             brush=pg.mkBrush("#cf222e"))
        self.plot.addItem(self.query_item)
        self.scatter.sigClicked.connect(self._on_clicked)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(bar)
        layout.addWidget(self.plot, 1)
        self.empty_state = EmptyState(self.plot, "map")
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

    async def load(self) -> MapData | None:
        """Compute the projection on a worker and draw it."""
        session = self._session
        if session is None:
            return None
        token = self._tokens.next_token()
        try:
            data = await self._runner.run(_project, session.engine,
                                          self.method_box.currentText())
        except EngineError as exc:
            self.legend.setText(f"projection failed: {exc}")
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        self.data = data
        if len(data.texts):
            self.empty_state.clear()
        else:
            self.empty_state.show_message(
                "Nothing to map yet", "The map places every memory by the meaning of its "
                "text (its embedding), so paraphrases sit together. Memories get their "
                "embedding once the model is ready; add or import some to see them here.")
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
            names = [x.value for x in LAYERS] if by == "layer" else list(data.agents)
            present = sorted(set((data.layer if by == "layer" else data.agent).tolist()))
            legend = "  ".join(
                f'<span style="color:{PALETTE[c % len(PALETTE)]}">●</span> {names[c]}'
                for c in present if c < len(names))
        proj = data.projection
        sampled = f" (sample of {proj.total_with_vector:,})" \
            if proj.total_with_vector > len(proj.rows) else ""
        variance = (f" · variance on axes {proj.explained[0]:.0%}, {proj.explained[1]:.0%}"
                    if proj.method == "pca" else "")
        if not len(proj.rows):
            self.legend.setText("No embeddings to map yet: records get vectors once the "
                                "embedding model is ready.")
            return
        self.legend.setText(f"{len(proj.rows):,} points{sampled} · {proj.method}{variance}"
                            f" · {legend}")

    def _tip(self, x: float, y: float, data: object) -> str:
        if self.data is None or not isinstance(data, int):
            return ""
        text = self.data.texts[data]
        shown = self._redact(text) if self._redact is not None else text
        return f"{self.data.projection.ids[data][:12]} · {shown}"

    def _on_clicked(self, _item: object, points: Sequence[object], _event: object) -> None:
        if self.data is None or not len(points):
            return
        index = points[0].data()  # type: ignore[attr-defined]  # pyqtgraph SpotItem
        self.record_selected.emit(self.data.projection.ids[int(index)])

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

    def apply_theme(self, name: str) -> None:
        """Plot colours of theme ``name``."""
        apply_plot_theme(self.plot, name)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme(current_theme())
        super().changeEvent(event)
