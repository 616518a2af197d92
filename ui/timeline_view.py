"""The voyeur timeline: pipeline events in lanes by kind over time (pyqtgraph).

History comes from the session's reader on a worker (the ledger of a local store, or the
``/v1/events`` pages of an attached agent); while the session is open the live tail
(:class:`~ui.event_tail.EventTail`) appends what its event feed delivers (the engine's bus, or
the attached agent's follower), batched every 80 ms.
Drawing is binned (:class:`~ui.timeline_data.TimelineData.bins`): one filled step curve
per lane, created once and updated with ``setData`` when the visible range changes (debounced)
or events arrive, so 100K events pan and zoom like 100. Clicking a lane shows the nearest
event's fields; the stepper highlights the events of its run (a small scatter, created once).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine.errors import EngineError
from engine.events import Event
from ui.empty_state import EmptyState
from ui.event_tail import EventTail
from ui.session import DataSession
from ui.tasks import RequestTokens, TaskRunner, spawn
from ui.theme import apply_plot_theme
from ui.timeline_data import LANES, TimelineData, TimelineFilter
from ui.wording import count_of

__all__ = ["HISTORY_LIMIT", "LANE_COLORS", "TimelineView"]

HISTORY_LIMIT = 200_000  # newest events loaded from the ledger when a store opens
LANE_COLORS = ("#6e7781", "#8250df", "#0969da", "#1a7f37", "#bf8700", "#8c959f", "#2da44e",
               "#54aeff", "#116329", "#cf222e", "#bc4c00", "#6639ba", "#a40e26", "#ff0000",
               "#57606a")
_ALL = "all kinds"
_BASE = 0.9  # lane baseline below the lane index (the y axis is inverted)


def current_theme() -> str:
    """The applied theme name (``light`` / ``dark``)."""
    app = QApplication.instance()
    return "dark" if app is not None and app.property("mnemoscope_theme") == "dark" else "light"


def event_text(event: Event, redact: Callable[[str], str] | None) -> str:
    """An event's fields as indented JSON (strings redacted when ``redact`` is given)."""
    def clean(value: object) -> object:
        if redact is None:
            return value
        if isinstance(value, str):
            return redact(value)
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    return json.dumps(clean(event.to_json()), indent=2, ensure_ascii=False, default=str)


def _history(session: DataSession) -> TimelineData:
    """The newest :data:`HISTORY_LIMIT` events as timeline columns (runs on a worker)."""
    events = session.reader.recent_events(HISTORY_LIMIT)
    data = TimelineData()
    data.extend(events)
    return data


class TimelineView(QWidget):
    """Events in lanes over time with filters, live tail, zoom/pan and event details.

    Signals:
        event_selected(object): The clicked :class:`Event`.
    """

    event_selected = QtSignal(object)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: DataSession | None = None
        self._tokens = RequestTokens()
        self._redact: Callable[[str], str] | None = None
        self.data = TimelineData()
        self.tail = EventTail(parent=self)
        self.tail.arrived.connect(self.add_events)
        self.selected: Event | None = None
        self.rebins = 0

        self.follow = QCheckBox("Live tail", self)
        self.follow.setChecked(True)
        self.follow.setToolTip("Keep the newest events in view while the engine works")
        self.kind_box = QComboBox(self)
        self.kind_box.addItem(_ALL)
        self.kind_box.addItems([k for k in LANES if k != "other"])
        self.record_edit = QLineEdit(self)
        self.record_edit.setPlaceholderText("record id")
        self.source_edit = QLineEdit(self)
        self.source_edit.setPlaceholderText("source")
        self.decision_edit = QLineEdit(self)
        self.decision_edit.setPlaceholderText("decision")
        self.reload_button = QPushButton("Reload", self)
        self.count_label = QLabel("", self)
        bar = QHBoxLayout()
        bar.addWidget(self.follow)
        bar.addWidget(self.kind_box)
        for edit in (self.record_edit, self.source_edit, self.decision_edit):
            edit.setClearButtonEnabled(True)
            edit.setMaximumWidth(220)
            bar.addWidget(edit, 1)
            edit.textChanged.connect(self._on_filter_changed)
        bar.addWidget(self.reload_button)
        bar.addWidget(self.count_label)
        bar.addStretch(0)
        self.kind_box.currentIndexChanged.connect(self._on_filter_changed)
        self.reload_button.clicked.connect(self.reload)

        self.plot = pg.PlotWidget(parent=self, axisItems={
            "bottom": pg.DateAxisItem(orientation="bottom")})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, y=False, alpha=0.2)
        view_box = self.plot.getViewBox()
        view_box.setMouseEnabled(x=True, y=False)
        view_box.setLimits(yMin=-0.2, yMax=len(LANES) + 0.2)
        view_box.invertY(True)  # pipeline order from the top
        self.plot.setYRange(0, len(LANES), padding=0)
        self.plot.getAxis("left").setTicks(
            [[(i + 0.45, name.removeprefix("memory:")) for i, name in enumerate(LANES)]])
        self.plot.getAxis("left").setWidth(130)
        self.curves = []
        for i, colour in enumerate(LANE_COLORS):  # created once, updated with setData
            fill = QColor(colour)
            fill.setAlpha(150)
            curve = pg.PlotDataItem(x=[0.0, 1.0], y=[i + _BASE], stepMode="center",
                                    fillLevel=i + _BASE, brush=fill,
                                    pen=pg.mkPen(colour, width=1))
            self.plot.addItem(curve)
            self.curves.append(curve)
        self.highlight = pg.ScatterPlotItem(size=11, pen=pg.mkPen("#d1242f", width=2),
                                            brush=None, symbol="o")
        self.plot.addItem(self.highlight)
        self.marker = pg.ScatterPlotItem(size=13, pen=pg.mkPen("#2f6feb", width=2),
                                         brush=None, symbol="s")
        self.plot.addItem(self.marker)
        self.plot.scene().sigMouseClicked.connect(self._on_clicked)
        view_box.sigXRangeChanged.connect(self._schedule_rebin)
        self._rebin_timer = QTimer(self)
        self._rebin_timer.setSingleShot(True)
        self._rebin_timer.setInterval(30)
        self._rebin_timer.timeout.connect(self.rebin)
        self._highlighted = np.zeros(0, np.intp)
        self._highlighted_id = ""

        self.detail = QPlainTextEdit(self)
        self.detail.setReadOnly(True)
        self.detail.setPlaceholderText("Click an event in a lane to see its fields.")
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.plot)
        split.addWidget(self.detail)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([900, 300])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(bar)
        layout.addWidget(split, 1)
        self.empty_state = EmptyState(split, "timeline")
        self.apply_theme(current_theme())

    # -- session and loading -----------------------------------------------------------------

    def set_session(self, session: DataSession | None) -> None:
        """Follow ``session``'s events (its history, then the live tail)."""
        self._session = session
        self.tail.attach(session.reader.event_feed if session is not None else None)
        self.data.clear()
        self._highlighted = np.zeros(0, np.intp)
        self.detail.clear()
        self.selected = None
        self.rebin()
        if session is not None:
            spawn(self._load_history(session))

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask event details with ``redact`` (None: show them as stored)."""
        self._redact = redact
        if self.selected is not None:
            self.detail.setPlainText(event_text(self.selected, redact))

    def reload(self) -> None:
        """Load the history again from the ledger."""
        if self._session is not None:
            spawn(self._load_history(self._session))

    async def _load_history(self, session: DataSession) -> None:
        token = self._tokens.next_token()
        try:  # query and column building both on the worker (50K events ≈ 1 s of Python)
            loaded = await self._runner.run(_history, session)
        except EngineError as exc:
            self.count_label.setText(f"history unavailable: {exc}")
            return
        if not self._tokens.is_current(token) or session is not self._session:
            return
        loaded.set_filter(self.data.filter)
        loaded.extend(self.data.events)  # live events that arrived meanwhile (few)
        self.data = loaded
        self.add_events([], fit=True)

    # -- events ------------------------------------------------------------------------------

    def add_events(self, events: Sequence[Event], fit: bool = False) -> None:
        """Append events (live tail or history) and redraw."""
        added = self.data.extend(events) if events else 0
        self.count_label.setText(count_of(len(self.data), "event"))
        if len(self.data):
            self.empty_state.clear()
        else:
            self.empty_state.show_message(
                "No events yet", "Every ingest, merge, review and retrieval decision shows "
                "here as an event in its lane. Ingest or import memories (File → Import, or "
                "Load Demo Data) to see the decisions.")
        if not added and not fit:
            return
        self._refresh_kind_tooltip()
        x0, x1 = self.data.span()
        if fit:
            pad = max((x1 - x0) * 0.02, 1.0)
            self.plot.setXRange(x0 - pad, x1 + pad, padding=0)
        elif self.follow.isChecked():
            v0, v1 = self.plot.getViewBox().viewRange()[0]
            width = max(v1 - v0, 10.0)
            if x1 > v1 - width * 0.02:
                self.plot.setXRange(x1 - width * 0.95, x1 + width * 0.05, padding=0)
        if self._highlighted_id:
            self.highlight_run(self._highlighted_id)
        self.rebin()

    def _refresh_kind_tooltip(self) -> None:
        choices = self.data.choices()
        self.source_edit.setToolTip("sources: " + ", ".join(choices["source"][:20]))
        self.decision_edit.setToolTip("decisions: " + ", ".join(choices["decision"][:20]))

    def highlight_run(self, incoming_id: str) -> int:
        """Mark the events of the stepper's run ``incoming_id``; returns how many."""
        self._highlighted_id = incoming_id
        self._highlighted = self.data.matching(incoming_id) if incoming_id else np.zeros(
            0, np.intp)
        idx = self._highlighted
        self.highlight.setData(x=self.data.t[idx], y=self.data.lane[idx].astype(float) + 0.45)
        return len(idx)

    # -- filters -----------------------------------------------------------------------------

    def current_filter(self) -> TimelineFilter:
        """The filter the boxes describe."""
        kind = self.kind_box.currentText()
        return TimelineFilter(
            kinds=frozenset() if kind == _ALL else frozenset({kind}),
            record_id=self.record_edit.text().strip(), source=self.source_edit.text().strip(),
            decision=self.decision_edit.text().strip())

    def _on_filter_changed(self, *_args: object) -> None:
        self.data.set_filter(self.current_filter())
        shown = int(self.data.mask.sum())
        self.count_label.setText(f"{shown:,} of {count_of(len(self.data), 'event')}")
        self.rebin()

    # -- drawing -----------------------------------------------------------------------------

    def _schedule_rebin(self, *_args: object) -> None:
        self._rebin_timer.start()

    def bin_count(self) -> int:
        """Buckets across the plot: one per 3 px."""
        return max(60, int(self.plot.getViewBox().width()) // 3)

    def rebin(self) -> None:
        """Recount the visible range and update the lane curves (no new plot items)."""
        self.rebins += 1
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        edges, counts = self.data.bins(x0, x1, self.bin_count())
        peak = float(counts.max()) if counts.size else 0.0
        scale = 0.85 / np.sqrt(peak) if peak > 0 else 0.0
        heights = np.sqrt(counts) * scale
        for i, curve in enumerate(self.curves):
            curve.setData(x=edges, y=(i + _BASE) - heights[i], fillLevel=i + _BASE)

    def lane_counts(self) -> list[int]:
        """Visible filtered events per lane (what the curves show; for tests)."""
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        _edges, counts = self.data.bins(x0, x1, self.bin_count())
        return [int(c) for c in counts.sum(axis=1)]

    def select_event(self, index: int) -> None:
        """Show the fields of event ``index``."""
        event = self.data.events[index]
        self.selected = event
        self.detail.setPlainText(event_text(event, self._redact))
        self.marker.setData(x=[self.data.t[index]], y=[float(self.data.lane[index]) + 0.45])
        self.event_selected.emit(event)

    def _on_clicked(self, mouse_event: object) -> None:
        position = mouse_event.scenePos()  # type: ignore[attr-defined]  # pyqtgraph event
        view_box = self.plot.getViewBox()
        if not view_box.sceneBoundingRect().contains(position):
            return
        point = view_box.mapSceneToView(position)
        lane = int(np.floor(point.y()))
        if not 0 <= lane < len(LANES):
            return
        (x0, x1), _ = view_box.viewRange()
        tolerance = (x1 - x0) / max(1.0, float(view_box.width())) * 6
        found = self.data.nearest(point.x(), lane, tolerance)
        if found is not None:
            self.select_event(found)

    def apply_theme(self, name: str) -> None:
        """Plot colours of theme ``name``."""
        apply_plot_theme(self.plot, name)

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme(current_theme())
        super().changeEvent(event)
