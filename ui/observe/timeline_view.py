"""The voyeur timeline: pipeline events in lanes by kind over time (pyqtgraph).

History comes from the session's reader on a worker (the ledger of a local store, or the
``/v1/events`` pages of an attached agent); while the session is open the live tail
(:class:`~ui.observe.event_tail.EventTail`) appends what its event feed delivers (the engine's bus,
or
the attached agent's follower), batched every 80 ms.

What is in view: the timeline opens fitted to all its events and stays fitted as events arrive
(so lanes are never empty after an import) until the user zooms or pans; "Fit all" (F) fits
again; "Follow live" keeps the newest events in view instead; Shift+drag zooms to a span. The
time axis reads local clock times with their unit at every zoom and names the date of the
visible span (:class:`~ui.shared.plot_items.TimeAxis`); hovering a bar says what it counts.

Drawing is binned (:class:`~ui.observe.timeline_data.TimelineData.bins`): one filled step curve
per lane, created once and updated with ``setData`` when the visible range changes (debounced)
or events arrive, so 100K events pan and zoom like 100. Clicking a lane shows the nearest
event's fields — labelled, in words (:func:`ui.shared.format.event_fields`), the records it names by
their text (fetched through the reader on a worker), the JSON one click away in the Raw tab;
the stepper highlights the events of its run (a small scatter, created once).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

import numpy as np
import pyqtgraph as pg
import shiboken6
from PySide6.QtCore import QEvent, QPointF, Qt, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction, QColor, QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QComboBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from engine import Event, ExitPolicy, Masking
from engine.errors import EngineError
from ui.observe.event_tail import EventTail
from ui.observe.timeline_data import LANES, TimelineData, TimelineFilter
from ui.records.record_links import RecordRef, fetch_texts, quoted, record_tooltip
from ui.records.record_search import RecordSearch
from ui.shared.empty_state import EmptyState
from ui.shared.fields_view import FieldsPanel
from ui.shared.format import event_fields, phrase, raw_json, record_ids_in
from ui.shared.plot_items import SpanViewBox, TimeAxis, span_caption
from ui.shared.session import DataSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.theme import apply_plot_theme, plot_colors
from ui.shared.wording import count_of

_ID_PART = re.compile(r"(?=.*[0-9-])[0-9a-fA-F-]{4,}")
"""An id, or the start of one, pasted in the record box (words are searched instead)."""

__all__ = ["HISTORY_LIMIT", "LANE_COLORS", "TimelineView"]

HISTORY_LIMIT = 200_000  # newest events loaded from the ledger when a store opens
LANE_COLORS = ("#6e7781", "#8250df", "#0969da", "#1a7f37", "#bf8700", "#8c959f", "#2da44e",
               "#54aeff", "#116329", "#cf222e", "#bc4c00", "#6639ba", "#a40e26", "#ff0000",
               "#57606a")
_ALL = "all kinds"
_BASE = 0.9  # lane baseline below the lane index (the y axis is inverted)
EMPTY_SPAN = 3600.0  # seconds shown up to now while there are no events
SELECTED_COLOUR = "#2f6feb"  # the selected event's square


def current_theme() -> str:
    """The applied theme name (``light`` / ``dark``)."""
    app = QApplication.instance()
    return "dark" if app is not None and app.property("mnemoscope_theme") == "dark" else "light"


def event_text(event: Event, redact: Callable[[str], str] | None) -> str:
    """An event's fields as indented JSON (strings redacted when ``redact`` is given)."""
    return raw_json(event.to_json(), redact)


def event_record_ids(event: Event) -> list[str]:
    """The records an event names (its record and the ids in its payload)."""
    return record_ids_in({"record_id": event.record_id, **event.payload})


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
        open_record(str): Show the selected event's record in the Records view.
    """

    event_selected = QtSignal(object)
    open_record = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: DataSession | None = None
        self._tokens = RequestTokens()
        self._redact: Callable[[str], str] | None = None
        self._masking: Masking | None = None  # what the record search matches while masking
        self.data = TimelineData()
        self.tail = EventTail(parent=self)
        self.tail.arrived.connect(self.add_events)
        self.selected: Event | None = None
        self.rebins = 0
        self.fitted = True  # the view shows all events and keeps doing so as events arrive

        self.follow = QCheckBox("Follow live", self)
        self.follow.setToolTip("Keep the newest events in view while the engine works")
        self.follow.toggled.connect(self._on_follow_toggled)
        self.fit_button = QPushButton("Fit all", self)
        self.fit_button.setToolTip("Show every event (F). Wheel: zoom · drag: pan · "
                                   "Shift+drag: zoom to the marked span")
        self.fit_button.clicked.connect(self.fit_all)
        self.fit_shortcut = QShortcut(QKeySequence(Qt.Key.Key_F), self, self.fit_all)
        self.kind_box = QComboBox(self)
        self.kind_box.addItem(_ALL, None)
        for kind in LANES[:-1]:  # every lane but "other": its words, the event kind as data
            self.kind_box.addItem(phrase(kind), kind)
            self.kind_box.setItemData(self.kind_box.count() - 1, kind,
                                      Qt.ItemDataRole.ToolTipRole)
        # the record filter: a memory picked by its words (issue 19: it asked for an id)
        self.record_edit = QLineEdit(self)
        self.record_edit.setPlaceholderText("record: its words or id")
        self.record_edit.setToolTip("Type words of a memory and pick it from the list to see "
                                    "only its events (a deleted record: paste its id)")
        self.record_results = QListWidget(self)
        self.record_finder = RecordSearch(runner, self.record_edit, self.record_results,
                                          self._shown_text, self, masking=self._search_masking)
        self.record_finder.picked.connect(self._on_record_picked)
        self.record_finder.failed.connect(self.count_label_message)
        self._picked: tuple[str, str] | None = None  # (record id, text in the box) when picked
        self._filtered_store: tuple[str, str] | None = None  # the store the filters were set on
        self.source_edit = QLineEdit(self)
        self.source_edit.setPlaceholderText("source")
        self.decision_edit = QLineEdit(self)
        self.decision_edit.setPlaceholderText("decision, in words")
        self.reload_button = QPushButton("Reload", self)
        self.count_label = QLabel("", self)
        bar = QHBoxLayout()
        bar.addWidget(self.fit_button)
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

        self.time_axis = TimeAxis(orientation="bottom")
        self.plot = pg.PlotWidget(parent=self, viewBox=SpanViewBox(),
                                  axisItems={"bottom": self.time_axis})
        self.plot.setMenuEnabled(False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, y=False, alpha=0.2)
        view_box = self.plot.getViewBox()
        view_box.setMouseEnabled(x=True, y=False)
        view_box.setLimits(yMin=-0.2, yMax=len(LANES) + 0.2)
        view_box.invertY(True)  # pipeline order from the top
        view_box.sigRangeChangedManually.connect(self._on_user_moved)
        view_box.span_selected.connect(self.zoom_to)
        self.plot.setYRange(0, len(LANES), padding=0)
        self.plot.getAxis("left").setTicks(
            [[(i + 0.45, phrase(name)) for i, name in enumerate(LANES)]])  # words, not kinds
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
        # the stepper's run: rings in the theme's text colour (apply_theme), which no lane has
        self.highlight = pg.ScatterPlotItem(size=11, brush=None, symbol="o")
        self.plot.addItem(self.highlight)
        self.marker = pg.ScatterPlotItem(size=13, pen=pg.mkPen(SELECTED_COLOUR, width=2),
                                         brush=None, symbol="s")
        self.plot.addItem(self.marker)
        self.plot.scene().sigMouseClicked.connect(self._on_clicked)
        self.plot.scene().sigMouseMoved.connect(self._on_hover)
        self._edges = np.zeros(0)  # what the curves show: bucket edges and counts per lane
        self._counts = np.zeros((len(LANES), 0), np.int64)
        view_box.sigXRangeChanged.connect(self._schedule_rebin)
        self._rebin_timer = QTimer(self)
        self._rebin_timer.setSingleShot(True)
        self._rebin_timer.setInterval(30)
        self._rebin_timer.timeout.connect(self.rebin)
        self._highlighted = np.zeros(0, np.intp)
        self._highlighted_id = ""
        self._texts: dict[str, str] = {}  # record id → content, for the details (per session)
        self._loading: set[str] = set()
        self._text_tokens = RequestTokens()

        self.detail = FieldsPanel("Click an event in a lane to see its fields.", self)
        self.detail.record_activated.connect(self.open_record)  # a row naming a record
        # issue 19: the selected event's record, by its text, one click from Records
        self.record_bar = QWidget(self)
        self.record_label = QLabel("", self.record_bar)
        self.record_label.setWordWrap(True)
        self.record_label.setTextFormat(Qt.TextFormat.PlainText)
        self.open_button = QPushButton("Open in Records", self.record_bar)
        self.open_button.setToolTip("Show this event's record in the Records view "
                                    "(Ctrl+Return; right-click for more)")
        self.open_button.clicked.connect(self._on_open_clicked)
        record_layout = QVBoxLayout(self.record_bar)
        record_layout.setContentsMargins(0, 0, 0, 0)
        record_layout.addWidget(self.record_label)
        record_layout.addWidget(self.open_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.record_bar.hide()
        self._record: RecordRef | None = None
        self._record_stored = True
        side = QWidget(self)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 0, 0, 0)
        side_layout.addWidget(self.record_bar)
        side_layout.addWidget(self.detail, 1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.plot)
        split.addWidget(side)
        split.setStretchFactor(0, 4)
        split.setStretchFactor(1, 1)
        split.setSizes([820, 380])  # the details are a two-column form
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        self.marks = QLabel("", self)  # the key to the square and the rings, while shown
        layout.addLayout(bar)
        layout.addWidget(self.record_results)  # the records matching the words typed
        layout.addWidget(split, 1)
        layout.addWidget(self.marks)
        self.empty_state = EmptyState(split, "timeline")
        self.empty_actions: tuple[QAction, ...] = ()  # the window's ways to fill the store
        self.apply_theme(current_theme())
        self.fit_all()

    # -- session and loading -----------------------------------------------------------------

    def set_session(self, session: DataSession | None) -> None:
        """Follow ``session``'s events (its history, then the live tail).

        The filters stay; a record picked on another store is let go (its box named a record
        of the last store over the new store's events).
        """
        self._session = session
        self.tail.attach(session.reader.event_feed if session is not None else None)
        self.record_finder.set_reader(session.reader if session is not None else None)
        if session is not None:
            if self._filtered_store is not None and session.store_key != self._filtered_store:
                self._picked = None
                self.record_edit.blockSignals(True)  # the filter is applied below, once
                self.record_edit.clear()
                self.record_edit.blockSignals(False)
                self.record_edit.setToolTip("")
            self._filtered_store = session.store_key
        self.data.clear()
        # the boxes' filter applies to the events loaded next (clearing the events let it
        # go: the boxes said "merged", "cli" over every event of the store)
        self.data.set_filter(self.current_filter())
        self._highlighted = np.zeros(0, np.intp)
        self._texts = {}
        self.detail.clear()
        self.selected = None
        self.highlight.setData(x=[], y=[])
        self.marker.setData(x=[], y=[])
        self._show_marks()
        self._show_record(None)
        self.rebin()
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
            spawn(self._load_history(session))

    def _on_records_changed(self, ids: list[str]) -> None:
        """Forget the texts of records that changed (the details read them again)."""
        if self.sender() is self._session:
            for record_id in ids:
                self._texts.pop(record_id, None)

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask event details with ``redact`` (None: show them as stored)."""
        self._redact = redact
        self._masking = None if redact is None else ExitPolicy(redact).shown
        self.show_details()

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
        self._show_count()
        if len(self.data):
            self.empty_state.clear()
        else:
            self.empty_state.show_message(
                "No events yet", "Every ingest, merge, review and retrieval decision shows "
                "here as an event in its lane. Load the demo data set or import memories to "
                "see the decisions.", self.empty_actions)
        if not added and not fit:
            return
        self._refresh_kind_tooltip()
        if self.follow.isChecked():
            self._show_newest()
        elif fit or self.fitted:
            self.fit_all()
        if self._highlighted_id:
            self.highlight_run(self._highlighted_id)
        self.rebin()

    # -- what is in view --------------------------------------------------------------------

    def fit_all(self) -> None:
        """Show every event (and keep showing all as events arrive, until the user moves)."""
        self.fitted = True
        self.follow.setChecked(False)
        if not len(self.data):  # nothing to fit: the last hour, not the epoch (1970)
            now = time.time()
            self.plot.setXRange(now - EMPTY_SPAN, now, padding=0)
            return
        x0, x1 = self.data.span()
        pad = max((x1 - x0) * 0.02, 1.0)
        self.plot.setXRange(x0 - pad, x1 + pad, padding=0)

    def zoom_to(self, x0: float, x1: float) -> None:
        """Show the span ``x0``..``x1`` (seconds), e.g. the one marked by Shift+drag."""
        self.fitted = False
        self.follow.setChecked(False)
        self.plot.setXRange(x0, x1, padding=0)

    def _show_newest(self) -> None:
        """Slide the current width of view so the newest event is near the right edge."""
        if not len(self.data):
            return
        last = self.data.span()[1]
        v0, v1 = self.plot.getViewBox().viewRange()[0]
        width = max(v1 - v0, 10.0)
        if not v0 <= last <= v1 - width * 0.02:
            self.plot.setXRange(last - width * 0.95, last + width * 0.05, padding=0)

    def _on_follow_toggled(self, on: bool) -> None:
        if on:
            self.fitted = False
            self._show_newest()

    def _on_user_moved(self, *_args: object) -> None:
        """A wheel zoom or a drag: the user's view stays put; following stops once the newest
        event is out of it (the user went back in time)."""
        self.fitted = False
        last = self.data.span()[1]
        v0, v1 = self.plot.getViewBox().viewRange()[0]
        if not v0 <= last <= v1:
            self.follow.setChecked(False)

    def _refresh_kind_tooltip(self) -> None:
        choices = self.data.choices()
        self.source_edit.setToolTip("sources: " + ", ".join(choices["source"][:20]))
        self.decision_edit.setToolTip("decisions: " + ", ".join(
            dict.fromkeys(phrase(code) for code in choices["decision"][:20])))

    def highlight_run(self, incoming_id: str) -> int:
        """Mark the events of the stepper's run ``incoming_id``; returns how many."""
        self._highlighted_id = incoming_id
        self._highlighted = self.data.matching(incoming_id) if incoming_id else np.zeros(
            0, np.intp)
        idx = self._highlighted
        self.highlight.setData(x=self.data.t[idx], y=self.data.lane[idx].astype(float) + 0.45)
        self._show_marks()
        return len(idx)

    def _show_marks(self) -> None:
        """Say what the square and the rings on the lanes are, while they are drawn."""
        ring = plot_colors(current_theme())[1]
        parts = []
        if self.selected is not None:
            parts.append(f'<span style="color:{SELECTED_COLOUR}">□</span> the selected event '
                         "(its fields on the right)")
        count = len(self._highlighted)
        if count:
            parts.append(f'<span style="color:{ring}">○</span> the '
                         f"{count_of(count, 'event')} of the Pipeline view's run")
        self.marks.setText(" · ".join(parts))
        self.marks.setVisible(bool(parts))

    # -- filters -----------------------------------------------------------------------------

    def current_filter(self) -> TimelineFilter:
        """The filter the boxes describe.

        The record box filters by the record picked from its list, or by an id (or the start
        of one) pasted in; words still being typed filter nothing until a record is picked.
        """
        kind = self.kind_box.currentData()
        text = self.record_edit.text().strip()
        if self._picked is not None and text == self._picked[1]:
            record = self._picked[0]
        else:
            record = text if _ID_PART.fullmatch(text) else ""
        return TimelineFilter(
            kinds=frozenset({kind}) if isinstance(kind, str) else frozenset(),
            record_id=record, source=self.source_edit.text().strip(),
            decision=self.decision_edit.text().strip())

    def _shown_text(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    def _search_masking(self) -> Masking | None:
        """What the record search matches against (the masked text while masking)."""
        return self._masking

    def count_label_message(self, message: str) -> None:
        """Say ``message`` where the event count is (a record search that failed)."""
        self.count_label.setText(message)

    async def pick_record(self, record_id: str) -> None:
        """Show only the events of ``record_id``, named by its text in the record box."""
        session = self._session
        texts = await fetch_texts(self._runner, session.reader, [record_id]) \
            if session is not None else {}
        if session is not self._session:
            return
        text = texts.get(record_id)
        shown = quoted(self._shown_text(text), 60) if text is not None else record_id
        self._picked = (record_id, shown)
        self.record_edit.setText(shown)  # textChanged: the filter applies
        self.record_edit.setToolTip(record_tooltip(self._shown_text(text or ""), record_id))

    def _on_record_picked(self, record_id: str) -> None:
        spawn(self.pick_record(record_id))

    def _on_filter_changed(self, *_args: object) -> None:
        self.data.set_filter(self.current_filter())
        self._show_count()
        self.rebin()

    def _show_count(self) -> None:
        """"N events", or "n of N events" while the filters hide some."""
        total = count_of(len(self.data), "event")
        if self.data.filter == TimelineFilter():
            self.count_label.setText(total)
        else:
            self.count_label.setText(f"{int(self.data.mask.sum()):,} of {total}")

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
        caption = span_caption(x0, x1)
        if caption != self.time_axis.labelText:  # a new title relays the axis: only on change
            self.time_axis.setLabel(caption)
        edges, counts = self.data.bins(x0, x1, self.bin_count())
        self._edges, self._counts = edges, counts
        peak = float(counts.max()) if counts.size else 0.0
        scale = 0.85 / np.sqrt(peak) if peak > 0 else 0.0
        heights = np.sqrt(counts) * scale
        for i, curve in enumerate(self.curves):
            curve.setData(x=edges, y=(i + _BASE) - heights[i], fillLevel=i + _BASE)

    def bucket_text(self, x: float, lane: int) -> str:
        """What the lane's bar at time ``x`` stands for ("" where it shows no events)."""
        edges, counts = self._edges, self._counts
        if not 0 <= lane < len(LANES) or len(edges) < 2 or not edges[0] <= x < edges[-1]:
            return ""
        bucket = min(int(np.searchsorted(edges, x, side="right")) - 1, counts.shape[1] - 1)
        count = int(counts[lane, bucket])
        if not count:
            return ""
        start, end = (datetime.fromtimestamp(t).astimezone()
                      for t in (edges[bucket], edges[bucket + 1]))
        fine = end - start < timedelta(seconds=2)  # milliseconds where buckets are that short

        def clock(moment: datetime) -> str:
            text = moment.strftime("%H:%M:%S")
            return f"{text}.{moment.microsecond // 1000:03d}" if fine else text

        first, last = clock(start), clock(end)
        day = start.strftime("%a %d %b")
        return (f"{count_of(count, 'event')}: {phrase(LANES[lane])} ({LANES[lane]})\n"
                f"{day}, {first} – {last}\nclick for the nearest one's fields")

    def _on_hover(self, position: QPointF) -> None:
        view_box = self.plot.getViewBox()
        text = ""
        if view_box.sceneBoundingRect().contains(position):
            point = view_box.mapSceneToView(position)
            text = self.bucket_text(point.x(), int(np.floor(point.y())))
        if text != view_box.toolTip():
            view_box.setToolTip(text)

    def lane_counts(self) -> list[int]:
        """Visible filtered events per lane (what the curves show; for tests)."""
        (x0, x1), _ = self.plot.getViewBox().viewRange()
        _edges, counts = self.data.bins(x0, x1, self.bin_count())
        return [int(c) for c in counts.sum(axis=1)]

    def select_event(self, index: int) -> None:
        """Show the fields of event ``index``."""
        event = self.data.events[index]
        self.selected = event
        missing = [i for i in event_record_ids(event) if i not in self._texts]
        if missing and self._session is not None:
            self._loading = set(missing)
            spawn(self._load_texts(self._session, event, missing))
        self.show_details()
        self.marker.setData(x=[self.data.t[index]], y=[float(self.data.lane[index]) + 0.45])
        self._show_marks()
        self.event_selected.emit(event)

    def show_details(self) -> None:
        """Show the selected event's fields with the record texts known so far."""
        event = self.selected
        if event is None:
            self.detail.clear()
            self._show_record(None)
            return
        show = self._redact if self._redact is not None else str
        texts = {i: show(self._texts[i]) for i in event_record_ids(event) if i in self._texts}
        self.detail.set_fields(event_fields(event, texts, show=show, loading=self._loading),
                               event_text(event, self._redact))
        self._show_event_record(event)

    async def _load_texts(self, session: DataSession, event: Event, ids: list[str]) -> None:
        """Fetch the texts of the records ``event`` names, then show its details again."""
        token = self._text_tokens.next_token()
        # unreadable now: absent, the rows say "no longer stored" and Raw has the ids
        found = await fetch_texts(self._runner, session.reader, ids)
        if not shiboken6.isValid(self.detail):  # the view was closed meanwhile
            return
        if session is not self._session or not self._text_tokens.is_current(token):
            return
        self._texts.update(found)
        self._loading = set()
        if self.selected is event:
            self.show_details()

    def _show_event_record(self, event: Event) -> None:
        """Name the event's record above its fields, once its text was read (or found gone)."""
        record_id = event.record_id
        if not record_id or record_id in self._loading:
            self._show_record(None)
        elif record_id in self._texts:
            self._show_record(RecordRef(record_id, self._texts[record_id]))
        else:  # merged away, skipped or deleted: the event may still carry its text
            content = (event.payload or {}).get("content")
            self._show_record(RecordRef(record_id, content if isinstance(content, str) else ""),
                              stored=False)

    def _show_record(self, ref: RecordRef | None, *, stored: bool = True) -> None:
        self._record = ref
        self._record_stored = stored
        self.record_bar.setVisible(ref is not None)
        self.open_button.setVisible(ref is not None and stored)
        if ref is None:
            self.record_label.setText("")
            self.record_label.setToolTip("")
            return
        shown = self._redact(ref.text) if self._redact is not None else ref.text
        if stored:
            self.record_label.setText(f"Record: {quoted(shown, 90)}")
        else:
            self.record_label.setText(
                (f"Record {quoted(shown, 90)} is " if shown else "Its record is ")
                + "no longer stored (merged, skipped or deleted): right-click → Show fate.")
        self.record_label.setToolTip(record_tooltip(shown, ref.id))

    def current_record(self) -> RecordRef | None:
        """The selected event's record (the context menu's target), once its text was read."""
        return self._record

    def current_detail_record(self) -> RecordRef | None:
        """The record the details' current row names, when its text was read (its menu)."""
        record_id = self.detail.current_record_id()
        text = self._texts.get(record_id) if record_id is not None else None
        return None if record_id is None or text is None else RecordRef(record_id, text)

    def _on_open_clicked(self) -> None:
        if self._record is not None:
            self.open_record.emit(self._record.id)

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
        """Plot colours of theme ``name`` (the run's rings in its text colour)."""
        apply_plot_theme(self.plot, name)
        self.highlight.setPen(pg.mkPen(plot_colors(name)[1], width=2))
        self._show_marks()

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme(current_theme())
        super().changeEvent(event)
