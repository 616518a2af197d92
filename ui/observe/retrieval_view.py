"""Retrieval diagnostics: why each candidate ranked where it did, and where the budget cut fell.

A query form (text, agent, purpose, strategy, token budget, pressure) runs
``engine.retrieve(request, inspect=True)`` on a worker — inspection never counts accesses, emits
no retrieval event and records no metrics. Each candidate is a row of stacked bars, one segment
per score component (weight × value); the token-budget cut line sits above the first candidate
the budget dropped, and dropped candidates say why (budget / filter / ttl / privacy). Weight
sliders re-rank with ``engine.rescore`` (pure numpy over the bundle's component matrix, on a
worker; no store access); before the first question they show the weights it will be scored
with. **Pin** freezes the current ranking on the left so two settings can
be compared side by side. The context preview is the packed records' text in rank order, as it
would be handed to an LLM, masked by the redaction state.

A shown ranking follows the store: when records are written, deleted, paused or restored (the
session's ``records_changed``), the question it answers is asked again, with the sliders the
user set and the pinned ranking's weights kept, so no view goes on ranking (and the Map
marking) a memory that is gone or has other words now.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import shiboken6
from PySide6.QtCore import QEvent, QRectF, Qt, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import (
    QAction,
    QColor,
    QHelpEvent,
    QKeyEvent,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
)
from PySide6.QtWidgets import (
    QComboBox,
    QGridLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QSpinBox,
    QSplitter,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from engine import (
    COMPONENTS,
    DropReason,
    PressureState,
    Purpose,
    RetrievalConfig,
    RetrievalDiagnostics,
    RetrievalRequest,
    RetrievedBundle,
    ScoringWeights,
    Strategy,
    inspect_retrieval,
)
from engine.errors import EngineError
from ui.records.record_links import RecordRef, record_tooltip
from ui.shared.empty_state import EmptyState
from ui.shared.format import tag
from ui.shared.session import StoreSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = ["COMPONENT_COLORS", "RankRow", "RetrievalView", "ScoreBars", "context_text",
           "rows_from_bundle", "rows_from_ranking"]

COMPONENT_COLORS = {"importance": "#bf8700", "recency": "#8250df", "semantic": "#0969da",
                    "lexical": "#1a7f37", "layer": "#bc4c00", "access": "#6e7781",
                    "context": "#54aeff", "speaker": "#a40e26", "date": "#bf3989"}
MAX_ROWS = 60
_EXTRA_COLORS = ("#a40e26", "#116329", "#6639ba", "#57606a")


def component_color(name: str) -> str:
    """The colour of score component ``name`` (components added later get spare colours)."""
    if name in COMPONENT_COLORS:
        return COMPONENT_COLORS[name]
    index = COMPONENTS.index(name) if name in COMPONENTS else 0
    return _EXTRA_COLORS[index % len(_EXTRA_COLORS)]


_WITHHELD = frozenset({DropReason.PAUSED, DropReason.ARCHIVED})


@dataclass(frozen=True, slots=True)
class RankRow:
    """One candidate line: its weighted component parts, score, cost and fate."""

    id: str
    text: str
    parts: tuple[float, ...]  # weight × component, in COMPONENTS order
    score: float
    tokens: int
    packed: bool
    drop_reason: str | None


def _parts(diag: RetrievalDiagnostics, row: int, weights: Sequence[float],
           score: float) -> tuple[float, ...]:
    total = sum(weights) or 1.0
    values = [float(diag.components[row, j]) * w / total for j, w in enumerate(weights)]
    ctx = COMPONENTS.index("context")
    values[ctx] = max(0.0, score - (sum(values) - values[ctx]))  # recomputed by rescore
    return tuple(values)


def rows_from_bundle(bundle: RetrievedBundle, texts: dict[str, str]) -> list[RankRow]:
    """The engine's own ranking (eligible candidates first, in rank order).

    Paused and archived records are left out (issue 20): they are never retrieved, so they
    are no candidate lines; the summary counts them among the dropped.
    """
    diag = bundle.diagnostics
    weights = [diag.weights.get(name, 0.0) for name in COMPONENTS]
    rows: list[RankRow] = []
    for row in diag.order.tolist():
        code = int(diag.drop_codes[row])
        line = diag.candidate(row)
        if line.drop_reason in _WITHHELD:
            continue
        rows.append(RankRow(line.id, texts.get(line.id, ""),
                            _parts(diag, row, weights, line.score), line.score, line.tokens,
                            code < 0, line.drop_reason.value if line.drop_reason else None))
    return rows


def rows_from_ranking(bundle: RetrievedBundle, ids: Sequence[str], scores: Sequence[float],
                      packed: Sequence[bool], weights: ScoringWeights,
                      texts: dict[str, str]) -> list[RankRow]:
    """Rows of a :func:`engine.retrieval.rescore` ranking (eligible candidates only)."""
    diag = bundle.diagnostics
    index = {record_id: i for i, record_id in enumerate(diag.ids)}
    values = list(weights.as_tuple())
    return [RankRow(record_id, texts.get(record_id, ""),
                    _parts(diag, index[record_id], values, score), score,
                    int(diag.tokens[index[record_id]]), fits,
                    None if fits else "budget")
            for record_id, score, fits in zip(ids, scores, packed, strict=True)]


def cut_index(rows: Sequence[RankRow]) -> int | None:
    """Rank of the first candidate the budget dropped (where the cut line is drawn)."""
    return next((i for i, r in enumerate(rows) if r.drop_reason == "budget"), None)


def context_text(rows: Sequence[RankRow], redact: Callable[[str], str] | None) -> str:
    """The packed memories in rank order, one per line, as they go into an LLM prompt."""
    lines = [f"- {redact(r.text) if redact is not None else r.text}" for r in rows if r.packed]
    return "Relevant memories:\n" + "\n".join(lines) if lines else "(no memories packed)"


class ScoreBars(QWidget):
    """Candidates as stacked component bars, with the budget cut line.

    A click makes a row current (the context menu's record), a double click or Enter opens it
    in Records; hovering a row shows its full text and id.

    Signals:
        activated(str): The current row's record id (double click or Enter).
    """

    ROW = 22
    _TOP = 24.0
    _CUT = 20  # height of the budget cut line's band
    _BAR_MIN = 60.0  # the narrowest bar area, in pixels

    activated = QtSignal(str)

    def __init__(self, title: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = title
        self.rows: list[RankRow] = []
        self.current = -1
        self.budget = 0
        self.used = 0
        self.redact: Callable[[str], str] | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Minimum)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def row_top(self, index: int) -> float:
        """Where row ``index`` is drawn (below the cut line when the budget dropped it)."""
        cut = self.cut
        return self._TOP + self.ROW * index + (self._CUT if cut is not None and index >= cut
                                               else 0)

    def row_at(self, y: float) -> int:
        """The row drawn at height ``y`` (-1: none)."""
        for index in range(min(len(self.rows), MAX_ROWS)):
            top = self.row_top(index)
            if top <= y < top + self.ROW:
                return index
        return -1

    def mousePressEvent(self, event: QMouseEvent) -> None:
        row = self.row_at(event.position().y())
        if row >= 0:  # right clicks too: the context menu acts on the row clicked
            self.current = row
            self.update()
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        row = self.row_at(event.position().y())
        if row >= 0:
            self.activated.emit(self.rows[row].id)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        shown = min(len(self.rows), MAX_ROWS)
        if key in (Qt.Key.Key_Up, Qt.Key.Key_Down) and shown:
            step = -1 if key == Qt.Key.Key_Up else 1
            self.current = max(0, min(shown - 1, self.current + step))
            self.update()
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and 0 <= self.current < shown:
            self.activated.emit(self.rows[self.current].id)
        else:
            super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            row = self.row_at(event.pos().y())
            if row >= 0:
                text = self.rows[row].text
                shown = self.redact(text) if self.redact is not None else text
                QToolTip.showText(event.globalPos(), record_tooltip(shown, self.rows[row].id)
                                  + f"\n{self.rows[row].score:.3f} · {self.rows[row].tokens} "
                                  f"tok · {self.fate(row)}", self)
            elif event.pos().y() < self._TOP:  # the heading, whole (it is cut when narrow)
                QToolTip.showText(event.globalPos(), self.heading(), self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def set_rows(self, rows: Sequence[RankRow], budget: int) -> None:
        """Show ``rows`` (first :data:`MAX_ROWS`) against ``budget`` tokens."""
        current = self.rows[self.current].id if 0 <= self.current < len(self.rows) else None
        self.rows = list(rows)
        ids = [r.id for r in self.rows]
        self.current = ids.index(current) if current in ids else (0 if ids else -1)
        self.budget = budget
        self.used = sum(r.tokens for r in rows if r.packed)
        shown = min(len(self.rows), MAX_ROWS)
        self.setMinimumHeight(60 + self.ROW * (shown + 2))
        self.update()

    @property
    def cut(self) -> int | None:
        """Index of the first candidate dropped by the budget."""
        return cut_index(self.rows)

    def fate(self, index: int) -> str:
        """Row ``index``'s fate in words: "packed" or "✗" and why it was dropped."""
        row = self.rows[index]
        return "packed" if row.packed else f"✗ {tag(row.drop_reason)}"

    def figures(self, index: int) -> str:
        """Row ``index``'s score and cost, drawn after its bar, and its fate unless the
        budget cut line already says it (packed above the line, over budget below it): the
        row's text gets the room (the fate is on hover too)."""
        row, cut = self.rows[index], self.cut
        below = cut is not None and index >= cut
        told = (row.packed and not below) or (row.drop_reason == "budget" and below)
        figures = f"{row.score:.3f} · {row.tokens} tok"
        return figures if told else f"{figures} · {self.fate(index)}"

    def heading(self) -> str:
        """The line above the rows: the title, the tokens used, how many were packed."""
        return (f"{self.title} · {self.used}/{self.budget} tokens · "
                f"{sum(r.packed for r in self.rows)} packed of {len(self.rows)}")

    def columns(self) -> tuple[float, float, float]:
        """``(label width, bar x, bar width)``: the row's text gets what the bar (at least
        60 px) and the widest figures leave, and at least 30 % of the width.

        The texts name the records, so they take the spare width: a fixed 30 % cut them to a
        dozen characters beside a long empty bar.
        """
        width = float(self.width())
        metrics = self.fontMetrics()
        shown = range(min(len(self.rows), MAX_ROWS))
        figures = max((metrics.horizontalAdvance(self.figures(i)) for i in shown), default=0)
        label_w = max(width * 0.30, width - 12 - self._BAR_MIN - (figures + 10))
        bar_x = label_w + 12
        return label_w, bar_x, max(self._BAR_MIN, width - bar_x - (figures + 10))

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        text = self.palette().windowText().color()
        muted = self.palette().placeholderText().color()
        width = float(self.width())
        label_w, bar_x, bar_w = self.columns()
        top = 24.0
        peak = max((r.score for r in self.rows), default=1.0) or 1.0
        painter.setPen(QPen(text))
        painter.drawText(QRectF(4, 2, width - 8, 20), Qt.AlignmentFlag.AlignVCenter,
                         painter.fontMetrics().elidedText(self.heading(),
                                                          Qt.TextElideMode.ElideRight,
                                                          int(width - 8)))
        y = top
        cut = self.cut
        for i, row in enumerate(self.rows[:MAX_ROWS]):
            if i == cut:
                painter.setPen(QPen(QColor("#cf222e"), 2, Qt.PenStyle.DashLine))
                painter.drawLine(2, int(y + 2), int(width - 2), int(y + 2))
                painter.drawText(QRectF(bar_x, y + 3, width - bar_x, 16),
                                 f"budget cut ({self.budget} tok)")
                y += 20
            if i == self.current:
                highlight = self.palette().highlight().color()
                painter.fillRect(QRectF(0, y, width, self.ROW),
                                 highlight.lighter(170) if self.palette().window().color()
                                 .lightness() > 128 else highlight.darker(150))
            colour = text if row.packed else muted
            painter.setPen(QPen(colour))
            shown = self.redact(row.text) if self.redact is not None else row.text
            painter.drawText(QRectF(4, y, label_w, self.ROW),
                             Qt.AlignmentFlag.AlignVCenter,
                             painter.fontMetrics().elidedText(
                                 f"{i + 1}. {shown}", Qt.TextElideMode.ElideRight,
                                 int(label_w)))
            x = bar_x
            for j, part in enumerate(row.parts):
                w = bar_w * part / peak
                fill = QColor(component_color(COMPONENTS[j]))
                if not row.packed:
                    fill.setAlpha(90)
                painter.fillRect(QRectF(x, y + 4, max(0.0, w), self.ROW - 8), fill)
                x += max(0.0, w)
            painter.setPen(QPen(colour))
            painter.drawText(QRectF(x + 6, y, width - x - 6, self.ROW),
                             Qt.AlignmentFlag.AlignVCenter, self.figures(i))
            y += self.ROW
        if len(self.rows) > MAX_ROWS:
            painter.setPen(QPen(muted))
            painter.drawText(QRectF(4, y, width, self.ROW), Qt.AlignmentFlag.AlignVCenter,
                             f"… {len(self.rows) - MAX_ROWS} more candidates")
        painter.end()


class RetrievalView(QWidget):
    """Query form, ranked candidates with component bars, budget cut, live weights, context.

    Signals:
        retrieved(object, list): The query vector (or None) and the packed ids, for the map.
        message(str): Something to show in the status bar.
        open_record(str): Show this candidate's record in the Records view.
    """

    retrieved = QtSignal(object, list)
    message = QtSignal(str)
    open_record = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: StoreSession | None = None
        self._tokens = RequestTokens()
        self._rescore_tokens = RequestTokens()
        self._redact: Callable[[str], str] | None = None
        self.bundle: RetrievedBundle | None = None
        self.texts: dict[str, str] = {}
        self.rescores = 0
        self.requeries = 0  # rankings asked again because the store changed
        self._asked: RetrievalRequest | None = None  # the shown ranking's question
        self._vector: object = None  # its query vector (the Map's star)
        self._pinned_weights: ScoringWeights | None = None

        self.query_edit = QLineEdit(self)
        self.query_edit.setPlaceholderText("query text (empty: importance, recency, layer)")
        self.agent_edit = QLineEdit(self)
        self.agent_edit.setPlaceholderText("agent (all)")
        self.agent_edit.setMaximumWidth(120)
        self.purpose_box = QComboBox(self)
        self.purpose_box.addItems([p.value for p in Purpose])
        self.strategy_box = QComboBox(self)
        self.strategy_box.addItems([s.value for s in Strategy])
        self.pressure_box = QComboBox(self)
        self.pressure_box.addItems([p.value for p in PressureState])
        self.budget_spin = QSpinBox(self)
        self.budget_spin.setRange(1, 1_000_000)
        self.budget_spin.setValue(300)
        self.budget_spin.setSuffix(" tok")
        self.run_button = QPushButton("Retrieve", self)
        query_row = QHBoxLayout()
        query_row.addWidget(self.query_edit, 1)
        query_row.addWidget(self.run_button)
        form = QHBoxLayout()
        for caption, widget in (("agent", self.agent_edit), ("purpose", self.purpose_box),
                                ("strategy", self.strategy_box), ("budget", self.budget_spin),
                                ("pressure", self.pressure_box)):
            form.addWidget(QLabel(caption, self))
            form.addWidget(widget)
        form.addStretch(1)

        self.sliders: dict[str, QSlider] = {}
        self.slider_labels: dict[str, QLabel] = {}
        weights_box = QGroupBox("Weights (re-rank without re-querying)", self)
        grid = QGridLayout(weights_box)
        for i, name in enumerate(COMPONENTS):
            slider = QSlider(Qt.Orientation.Horizontal, weights_box)
            slider.setRange(0, 100)
            slider.valueChanged.connect(self._on_weights_changed)
            label = QLabel("", weights_box)
            label.setMinimumWidth(36)
            swatch = QLabel(name, weights_box)
            swatch.setStyleSheet(f"color: {component_color(name)}; font-weight: 600;")
            grid.addWidget(swatch, i, 0)
            grid.addWidget(slider, i, 1)
            grid.addWidget(label, i, 2)
            self.sliders[name] = slider
            self.slider_labels[name] = label
        self.reset_button = QPushButton("Engine weights", weights_box)
        self.pin_button = QPushButton("Pin for comparison", weights_box)
        grid.addWidget(self.reset_button, len(COMPONENTS), 0, 1, 2)
        grid.addWidget(self.pin_button, len(COMPONENTS) + 1, 0, 1, 2)
        self.summary = QLabel("", weights_box)
        self.summary.setWordWrap(True)
        grid.addWidget(self.summary, len(COMPONENTS) + 2, 0, 1, 3)
        self.context = QPlainTextEdit(weights_box)
        self.context.setReadOnly(True)
        self.context.setPlaceholderText("The context as it would go to the LLM")
        grid.addWidget(QLabel("Context sent to the LLM", weights_box), len(COMPONENTS) + 3, 0,
                       1, 3)
        grid.addWidget(self.context, len(COMPONENTS) + 4, 0, 1, 3)
        grid.setRowStretch(len(COMPONENTS) + 4, 1)
        weights_box.setMinimumWidth(220)
        weights_box.setMaximumWidth(360)

        self.pinned = ScoreBars("A (pinned)", self)
        self.live = ScoreBars("Ranking", self)
        self.live.activated.connect(self.open_record)
        self.pinned.activated.connect(self.open_record)
        self.pinned_area = QScrollArea(self)
        self.pinned_area.setWidgetResizable(True)
        self.pinned_area.setWidget(self.pinned)
        self.pinned_area.hide()
        live_area = QScrollArea(self)
        live_area.setWidgetResizable(True)
        live_area.setWidget(self.live)
        results = QSplitter(Qt.Orientation.Horizontal, self)
        results.addWidget(self.pinned_area)
        results.addWidget(live_area)
        body = QSplitter(Qt.Orientation.Horizontal, self)
        body.addWidget(results)
        body.addWidget(weights_box)
        body.setStretchFactor(0, 3)
        body.setStretchFactor(1, 1)
        # the rankings 3 : 1 from the start too (the weights box took its widest, 360 px, and
        # a comparison at 900 px left each ranking a few characters of text)
        body.setSizes([3000, 1000])
        self.body = body
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        legend = QLabel("  ".join(
            f'<span style="color:{component_color(n)}">■</span> {n}' for n in COMPONENTS),
            self)
        layout.addLayout(query_row)
        layout.addLayout(form)
        layout.addWidget(legend)
        layout.addWidget(body, 1)
        self.empty_state = EmptyState(results, "retrieval")
        self.empty_actions: tuple[QAction, ...] = ()  # the window's ways to fill the store

        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(40)
        self._debounce.timeout.connect(self._start_rescore)
        # a bulk write, an undo or the layer service's writes come as several changes: the
        # question is asked again once they settle
        self._requery_timer = QTimer(self)
        self._requery_timer.setSingleShot(True)
        self._requery_timer.setInterval(100)
        self._requery_timer.timeout.connect(self._start_requery)
        self._setting = False
        self.run_button.clicked.connect(self._on_run_clicked)
        self.query_edit.returnPressed.connect(self._on_run_clicked)
        self.reset_button.clicked.connect(self.reset_weights)
        self.pin_button.clicked.connect(self.pin)
        for box in (self.purpose_box, self.strategy_box, self.pressure_box):
            box.currentIndexChanged.connect(self._on_request_kind_changed)
        self._show_engine_weights()
        self._update_enabled()

    # -- state -----------------------------------------------------------------------------

    def set_session(self, session: StoreSession | None) -> None:
        """Query ``session``'s store."""
        if self._session is not None:
            self._session.records_changed.disconnect(self._on_records_changed)
        self._session = session
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
        self._requery_timer.stop()
        self._tokens.next_token()  # a question still running was asked of the old store
        self._asked = None
        self._vector = None
        self._pinned_weights = None
        self.bundle = None
        self.live.title = "Ranking"
        self.live.set_rows([], 0)
        self.pinned.set_rows([], 0)
        self.pinned_area.hide()
        self.context.clear()
        self.summary.clear()
        self._show_engine_weights()
        self._update_enabled()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask content in the bars and the context preview (None: as stored)."""
        self._redact = redact
        self.live.redact = self.pinned.redact = redact
        self.live.update()
        self.pinned.update()
        self.context.setPlainText(context_text(self.live.rows, redact) if self.bundle else "")

    def current_record(self) -> RecordRef | None:
        """The ranking's current row (the context menu's record)."""
        live = self.live
        if not 0 <= live.current < len(live.rows):
            return None
        row = live.rows[live.current]
        return RecordRef(row.id, self.texts.get(row.id, row.text))

    def _update_enabled(self) -> None:
        has = self._session is not None
        self.run_button.setEnabled(has)
        if self.bundle is None:
            self.empty_state.show_message(
                "Type a question…", "…in the box above, as your agent would ask it (\"when is "
                "the team standup?\"), and press Enter. Every candidate's score shows here, "
                "split into its parts, with the cut where the token budget ran out.")
        elif not self.bundle.diagnostics.candidate_count:  # not one record to consider
            self.empty_state.show_message(
                "Nothing to retrieve from", "The store holds no memories yet. Load the demo "
                "data set or import memories, then ask again.", self.empty_actions)
        elif not self.bundle.records:
            self.empty_state.show_message(
                "Nothing retrieved", "No record of this agent and layer policy fits the "
                "request. Try another agent, purpose or a larger budget.")
        else:
            self.empty_state.clear()
        for slider in self.sliders.values():
            slider.setEnabled(self.bundle is not None)
        self.reset_button.setEnabled(self.bundle is not None)
        self.pin_button.setEnabled(self.bundle is not None)

    def request(self) -> RetrievalRequest:
        """The request the form describes."""
        return RetrievalRequest(
            max_tokens=self.budget_spin.value(), query=self.query_edit.text() or None,
            agent_id=self.agent_edit.text().strip() or None,
            purpose=Purpose(self.purpose_box.currentText()),
            strategy=Strategy(self.strategy_box.currentText()),
            pressure_state=PressureState(self.pressure_box.currentText()))

    # -- querying --------------------------------------------------------------------------

    def _on_run_clicked(self) -> None:
        spawn(self.retrieve())

    async def retrieve(self) -> RetrievedBundle | None:
        """Run the form's request in inspection mode on a worker and show it."""
        return await self._ask(self.request(), keep_sliders=False)

    def _on_records_changed(self, _ids: list[str]) -> None:
        if self.bundle is not None:
            self._requery_timer.start()

    def _start_requery(self) -> None:
        spawn(self.requery())

    async def requery(self) -> RetrievedBundle | None:
        """Ask the shown ranking's question again (the store changed under it).

        The question is the one the ranking answers, not the form's text edited since; the
        sliders stay where the user put them (their ranking is re-scored) and a pinned ranking
        is ranked again under its own weights, so both compare the store as it is now.
        """
        if self._asked is None or self.bundle is None:
            return None
        bundle = await self._ask(self._asked, keep_sliders=self._sliders_moved())
        if bundle is not None:
            self.requeries += 1
        return bundle

    def _sliders_moved(self) -> bool:
        """Whether the sliders differ from the weights the shown ranking was scored with."""
        assert self.bundle is not None
        weights = self.bundle.diagnostics.weights
        return any(slider.value() != round(weights.get(name, 0.0) * 100)
                   for name, slider in self.sliders.items())

    async def _ask(self, request: RetrievalRequest, *,
                   keep_sliders: bool) -> RetrievedBundle | None:
        """Retrieve ``request`` on a worker and show it (``keep_sliders``: re-scored under the
        sliders' weights rather than showing the engine's)."""
        session = self._session
        if session is None:
            return None
        token = self._tokens.next_token()
        try:
            inspection = await self._runner.run(inspect_retrieval, session.engine,
                                                request, texts_for=MAX_ROWS * 3)
        except EngineError as exc:
            self.summary.setText(f"Retrieval failed: {exc}")
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        bundle, texts, vector = (inspection.bundle, dict(inspection.texts),
                                 inspection.query_vector)
        self.bundle = bundle
        self.texts = texts
        self._asked = request
        self._vector = vector
        if not keep_sliders:
            self._debounce.stop()  # the sliders now show this ranking's weights
            self._set_sliders(bundle.diagnostics.weights)
        rows = rows_from_bundle(bundle, texts)
        self._show_rows(rows)
        diag = bundle.diagnostics
        drops = ", ".join(f"{k} {v}" for k, v in diag.drop_counts().items() if v) or "none"
        self.summary.setText(
            f"{count_of(diag.candidate_count, 'candidate')}, {diag.filtered_count:,} filtered"
            " · semantic "
            f"{diag.semantic_label} · strategy {bundle.strategy_applied} · "
            f"{diag.time_ms:.1f} ms (+{diag.embed_ms:.0f} ms embed) · dropped: {drops}"
            + (" · content compressed" if diag.compression_applied else ""))
        self._update_enabled()
        self.retrieved.emit(vector, [r.id for r in bundle.records])
        if keep_sliders:
            await self.rescore()
        if self._pinned_weights is not None and bundle is self.bundle:
            await self._rank_pinned(session, bundle, self._pinned_weights)
        return bundle

    def _show_rows(self, rows: Sequence[RankRow]) -> None:
        assert self.bundle is not None
        self.live.set_rows(rows, self.bundle.diagnostics.budget)
        self.context.setPlainText(context_text(rows, self._redact))

    # -- weights ---------------------------------------------------------------------------

    def _set_sliders(self, weights: dict[str, float]) -> None:
        self._setting = True
        for name, slider in self.sliders.items():
            slider.setValue(round(weights.get(name, 0.0) * 100))
            self.slider_labels[name].setText(f"{slider.value() / 100:.2f}")
        self._setting = False

    def engine_weights(self) -> ScoringWeights:
        """The weights the engine will score the form's request with: its configured purpose
        weights, with the strategy and pressure applied as the retriever applies them
        (:meth:`engine.RetrievalConfig.weights_for`); the defaults while no store is open."""
        config = (self._session.engine.config.memory.retrieval if self._session is not None
                  else RetrievalConfig())
        request = self.request()
        return config.weights_for(request.purpose, request.strategy, request.pressure_state)

    def _show_engine_weights(self) -> None:
        """Before the first question, the sliders show the weights it will be asked with (at 0
        they read as if every weight were zero); a shown ranking keeps the weights it was
        ranked with, since the sliders re-rank it."""
        if self.bundle is None:
            self._set_sliders(dict(zip(COMPONENTS, self.engine_weights().as_tuple(),
                                       strict=True)))

    def _on_request_kind_changed(self, _index: int) -> None:
        self._show_engine_weights()

    def weights(self) -> ScoringWeights:
        """The sliders' weights (all zero falls back to equal weights)."""
        values = {name: s.value() / 100 for name, s in self.sliders.items()}
        if not any(values.values()):
            values = dict.fromkeys(COMPONENTS, 1.0)
        return ScoringWeights.from_mapping(values)

    def reset_weights(self) -> None:
        """Back to the weights the engine used."""
        if self.bundle is not None:
            self._set_sliders(self.bundle.diagnostics.weights)
            self._show_rows(rows_from_bundle(self.bundle, self.texts))
            self.retrieved.emit(self._vector, [r.id for r in self.bundle.records])

    def _on_weights_changed(self, _value: int) -> None:
        for name, slider in self.sliders.items():
            self.slider_labels[name].setText(f"{slider.value() / 100:.2f}")
        if not self._setting and self.bundle is not None:
            self._debounce.start()

    def _start_rescore(self) -> None:
        spawn(self.rescore())

    async def rescore(self) -> None:
        """Re-rank the shown bundle under the sliders' weights (worker; no store access)."""
        # this one re-ranks under the sliders as they are: a re-rank still waiting for the
        # sliders to settle has nothing left to do (it fired after a test's loop had gone)
        self._debounce.stop()
        bundle, session = self.bundle, self._session
        if bundle is None or session is None:
            return
        weights = self.weights()
        token = self._rescore_tokens.next_token()
        ranking = await self._runner.run(session.engine.rescore, bundle, weights)
        if not self._rescore_tokens.is_current(token) or bundle is not self.bundle \
                or not shiboken6.isValid(self.live):
            return  # another rescore or bundle came meanwhile, or the view was closed
        self.rescores += 1
        self._show_rows(rows_from_ranking(bundle, ranking.ids, ranking.scores, ranking.packed,
                                          weights.normalized(), self.texts))
        # the Map rings what the sliders pack now (it kept ringing the engine's packing)
        self.retrieved.emit(self._vector, [record_id for record_id, fits
                                           in zip(ranking.ids, ranking.packed, strict=True)
                                           if fits])

    async def _rank_pinned(self, session: StoreSession, bundle: RetrievedBundle,
                           weights: ScoringWeights) -> None:
        """Show ``bundle`` ranked under the pinned ``weights`` on the left (worker)."""
        ranking = await self._runner.run(session.engine.rescore, bundle, weights)
        if bundle is not self.bundle or weights is not self._pinned_weights \
                or not shiboken6.isValid(self.pinned):
            return  # another ranking or pin came meanwhile, or the view was closed
        self.pinned.set_rows(rows_from_ranking(bundle, ranking.ids, ranking.scores,
                                               ranking.packed, weights.normalized(),
                                               self.texts), bundle.diagnostics.budget)

    def pin(self) -> None:
        """Freeze the current ranking on the left for comparison."""
        if self.bundle is None:
            return
        self._pinned_weights = self.weights()
        # the weights it was ranked with, in words (they were cut to "imp", "rec", "sem")
        self.pinned.title = "A (pinned: " + ", ".join(
            f"{n} {s.value() / 100:.2f}" for n, s in self.sliders.items() if s.value()) + ")"
        self.pinned.set_rows(self.live.rows, self.live.budget)
        self.live.title = "B (live)"
        self.pinned_area.show()
