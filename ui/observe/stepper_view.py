"""The slow-motion merge stepper: one memory through the stepped ingest pipeline, stage by stage.

The memory comes from the form (type it), a stored record (its content, agent, layer,
category, privacy and trust tier) or the next line of a JSONL import file. **Simulate** (the
default button) starts a dry run, ``engine.stepped(new, simulate=True)``: every stage with the
same numbers as a real ingest, from the same code, and nothing written or emitted. **Ingest**
starts a real run, whose write is one undoable step (Edit → Undo takes it back through
``MemoryEngine.undo_run``: the insert deleted, the merged or updated record restored, the
review item withdrawn; Edit → Redo ingests the memory again). Either gives a
:class:`~engine.ingest.pipeline.SteppedRun`; the candidate-search panel says which partition
was searched (agent, layer, privacy and its size), so a paraphrase stored under another layer
or agent is seen to be out of reach.
**Step** runs its next stage on a worker,
**Continue** runs the remaining stages with the speed control's delay between them
(``asyncio.sleep`` on the GUI loop) and **Pause** stops between stages. The driver holds no lock
between steps (docs/ingest.md): only ``persist`` takes the engine's write lock, briefly, and
redoes the merge if its target changed while paused — so user think time never blocks other
work. The persist step goes through :meth:`StoreSession.run_write` so it queues behind the
window's other writes.

Each stage has a panel: its data as labelled fields in words (:func:`ui.shared.format.stage_fields`;
records named by their text, read through the session's reader on a worker) with the raw JSON
one click away, plus candidate similarity bars against the tier threshold and the gray zone,
the decision as a sentence with its conflicts, and the resulting record as a field-by-field
diff. The threshold what-if (read-only, :func:`engine.threshold_what_if`) lists the
stored neighbour pairs a different tier threshold would merge or split.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QRectF, QSize, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import (
    QAction,
    QBrush,
    QColor,
    QHelpEvent,
    QKeyEvent,
    QKeySequence,
    QMouseEvent,
    QPainter,
    QPaintEvent,
    QPen,
    QUndoCommand,
)
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QFrame,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QScrollArea,
    QSizePolicy,
    QSlider,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from engine import (
    ApplyDetail,
    CandidatesDetail,
    DecisionDetail,
    EmbedDetail,
    EventsDetail,
    ExitPolicy,
    Masking,
    MemoryEngine,
    NormalizeDetail,
    PersistDetail,
    RunWrites,
    Stage,
    StageReport,
    SteppedRun,
    WhatIf,
    threshold_what_if,
)
from engine.errors import EngineError
from engine.records import Category, Layer, NewMemory, Privacy, TrustTier
from ui.records.record_links import RECORD_ID, RecordRef, fetch_texts, record_tooltip
from ui.records.record_search import RecordSearch
from ui.shared.choices import chosen_privacy, fill_privacy, show_privacy
from ui.shared.empty_state import EmptyState
from ui.shared.fields_view import FieldsPanel
from ui.shared.format import (
    Field,
    compare,
    diff_value,
    duration,
    elide,
    label_for,
    phrase,
    raw_json,
    reason_sentence,
    record_ids_in,
    sentence,
    stage_fields,
    stage_title,
)
from ui.shared.session import StoreSession
from ui.shared.tasks import TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = ["IngestCommand", "SimilarityBars", "StagePanel", "StepperView", "memory_from_json",
           "partition_sentence"]

STAGES: tuple[Stage, ...] = tuple(Stage)
_SOURCES = ("Type a new memory", "A stored memory", "Next line of an import file")
_DIFF_SKIP = {"embedding_model"}


def memory_from_json(line: str, source: str) -> NewMemory:
    """A :class:`NewMemory` from one JSONL import line (the fields of ``MemoryRecord.to_json``).

    Raises:
        ValidationError: a missing or bad field (from ``NewMemory``); ValueError for bad JSON.
    """
    data = json.loads(line)
    if not isinstance(data, dict):
        raise ValueError("an import line must be a JSON object")
    fields: dict[str, Any] = {"content": data.get("content", ""), "source": source,
                              "source_tier": TrustTier.AUTO}
    for name, kind in (("agent_id", str), ("layer", Layer), ("category", Category),
                       ("privacy", Privacy), ("source_tier", TrustTier)):
        if data.get(name) is not None:
            fields[name] = kind(data[name])
    for name in ("importance", "confidence"):
        if data.get(name) is not None:
            fields[name] = float(data[name])
    if isinstance(data.get("tags"), list):
        fields["tags"] = tuple(str(t) for t in data["tags"])
    return NewMemory(**fields)


def partition_sentence(start: Mapping[str, Any], candidates: Mapping[str, Any],
                       cross_category: float | None = None) -> str:
    """Where the candidate search looked, in words (the Candidates panel's note).

    Merge candidates come only from records of the same agent, layer and privacy (DESIGN 3);
    the surprise score looks at the agent's records of that privacy in every layer. Naming
    the partition and its size shows why a paraphrase stored under another layer, category or
    agent came out as new.

    Args:
        start: The ``ingest-start`` stage data (the incoming memory's fields).
        candidates: The ``candidate-search`` stage data.
        cross_category: The similarity another category must reach to merge, if known.
    """
    size = int(candidates.get("partition_size") or 0)
    wider = int(candidates.get("surprise_partition_size") or 0)
    agent, layer = start.get("agent_id", ""), start.get("layer", "")
    privacy, category = str(start.get("privacy", "")).lower(), start.get("category", "")
    text = (f"Candidates searched among {count_of(size, 'record')} in layer ‘{layer}’, "
            f"privacy ‘{privacy}’, agent ‘{agent}’.")
    if wider > size:
        text += (f" {count_of(wider - size, 'more record')} of this agent and privacy in "
                 "other layers: compared for novelty only, never merge candidates.")
    if cross_category is not None:
        text += (f" Records of a category other than ‘{category}’ merge only at similarity "
                 f"{cross_category:.2f} or above.")
    return text


class IngestCommand(QUndoCommand):
    """An Ingest from the Pipeline view, undoable and redoable.

    Undo takes the run's write back: ``MemoryEngine.undo_run`` deletes the record the run
    inserted, restores the records it merged into, updated or linked, and withdraws its review
    item and merge aliases. Redo ingests the same memory again through the same stepped
    pipeline (every stage at once, on a worker, after the window's other writes), as the
    Consolidate command's redo applies its steps again: the store being as before the run, it
    decides as the run did (the same merge, the same review item), against the store as it is
    then if it changed meanwhile; an inserted record comes back under a new id. What the redo
    wrote is what the next Undo takes back. The first :meth:`redo` (run by
    ``QUndoStack.push``) does nothing: the run wrote before the command was pushed.
    """

    def __init__(self, session: StoreSession, text: str, written: RunWrites,
                 memory: NewMemory) -> None:
        super().__init__(text)
        self._session = session
        self._written = written
        self._memory = memory
        self._applied = True

    @property
    def written(self) -> RunWrites:
        """What the run (or the last redo) wrote."""
        return self._written

    def undo(self) -> None:
        self._applied = False
        session = self._session
        what = f"Undo {self.text()}"

        def left_alone(conflicts: list[tuple[str, str]]) -> None:
            if conflicts:  # changed since the run: kept, and the person is told
                session.failed.emit(f"{what} left {count_of(len(conflicts), 'record')} alone: "
                                    + "; ".join(why for _, why in conflicts))

        # the engine when the write runs (an out-of-process import may have replaced it), and
        # the writes then: a redo queued before this undo has replaced them by its own
        session.schedule_write(lambda: session.engine.undo_run(self._written),
                               [after.id for _, after in self._written.pairs], what, left_alone)

    def redo(self) -> None:
        if self._applied:
            return  # the push: the run wrote already
        self._applied = True
        session, memory = self._session, self._memory
        what = f"Redo {self.text()}"

        def again() -> SteppedRun:
            run = _ingest_again(session.engine, memory)
            assert run.written is not None  # a real run that finished has its writes
            self._written = run.written  # before any later write (an undo) starts
            return run

        def done(run: SteppedRun) -> None:
            result = run.result
            if self._written.empty and result is not None:  # the store changed meanwhile
                session.failed.emit(f"{what} wrote nothing: " + sentence(reason_sentence(
                    result.reason.value, target=result.target_id,
                    conflicts=[c.to_json() for c in result.conflicts], texts={})))

        session.schedule_write(again, [after.id for _, after in self._written.pairs], what,
                               done)


def _ingest_again(engine: MemoryEngine, memory: NewMemory) -> SteppedRun:
    """Worker: ``memory`` through every stage of a real stepped run (an Ingest's redo)."""
    run = engine.stepped(memory)
    run.run()  # every remaining stage, no pause
    return run


class SimilarityBars(QWidget):
    """Candidates as horizontal similarity bars with the tier threshold and the gray zone.

    Each bar is labelled with the candidate's text (full text and id on hover). A click makes a
    bar current (the context menu's record), a double click or Enter opens it in Records.

    Signals:
        activated(str): The current candidate's record id (double click or Enter).
    """

    activated = QtSignal(str)
    _TOP = 22.0
    _ROW = 24.0

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.candidates: list[tuple[str, float]] = []
        self.ids: list[str] = []
        self.tips: list[str] = []
        self.current = -1
        self.threshold = 0.85
        self.floor = 0.70
        self.setMinimumHeight(60)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)

    def set_data(self, candidates: list[tuple[str, float]], threshold: float,
                 floor: float, ids: Sequence[str] = (), tips: Sequence[str] = ()) -> None:
        """Show ``(label, similarity)`` bars against ``threshold`` and the band [floor, t).

        Args:
            ids: The candidates' record ids (what a click, the menu and Enter act on).
            tips: Hover text per candidate (its full text and id).
        """
        self.candidates = candidates
        self.ids = list(ids)
        self.tips = list(tips)
        self.current = 0 if self.ids else -1
        self.threshold = threshold
        self.floor = floor
        self.setMinimumHeight(40 + 24 * max(1, len(candidates)))
        # a scroll area does not hear that its widget's size hint changed: tell the one
        # around the bars (StagePanel's), so that it grows to show every bar when it can
        area = self.parentWidget()
        while area is not None and not isinstance(area, QScrollArea):
            area = area.parentWidget()
        if area is not None:
            area.updateGeometry()
        self.update()

    def row_at(self, y: float) -> int:
        """The candidate drawn at height ``y`` (-1: none)."""
        row = int((y - self._TOP) // self._ROW)
        return row if y >= self._TOP and 0 <= row < len(self.candidates) else -1

    def mousePressEvent(self, event: QMouseEvent) -> None:
        row = self.row_at(event.position().y())
        if row >= 0:  # right clicks too: the context menu acts on the bar clicked
            self.current = row
            self.update()
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event: QMouseEvent) -> None:
        row = self.row_at(event.position().y())
        if 0 <= row < len(self.ids):
            self.activated.emit(self.ids[row])

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Up, Qt.Key.Key_Down) and self.candidates:
            step = -1 if key == Qt.Key.Key_Up else 1
            self.current = max(0, min(len(self.candidates) - 1, self.current + step))
            self.update()
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and 0 <= self.current < len(self.ids):
            self.activated.emit(self.ids[self.current])
        else:
            super().keyPressEvent(event)

    def event(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.ToolTip and isinstance(event, QHelpEvent):
            row = self.row_at(event.pos().y())
            if 0 <= row < len(self.tips):
                QToolTip.showText(event.globalPos(), self.tips[row], self)
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    def sizeHint(self) -> QSize:
        """Room for every bar (the scroll area around it shows what fits)."""
        return QSize(360, self.minimumHeight())

    def _axis(self) -> tuple[float, float]:
        """The x of similarity 0.4 (the bars' left edge, after the labels) and of 1.0."""
        # the labels (candidate texts) get a third of a narrow panel, at most 220 px
        return min(220.0, max(120.0, self.width() * 0.35)), float(self.width() - 50)

    def x_of(self, value: float) -> float:
        """The x at which similarity ``value`` is drawn."""
        left, right = self._axis()
        lo = 0.4  # similarity at the left edge
        return left + (right - left) * max(0.0, min(1.0, (value - lo) / (1.0 - lo)))

    def threshold_text(self) -> str:
        """The threshold line's label."""
        return f"merges at {self.threshold:.2f}"

    def label_rects(self) -> tuple[QRectF, QRectF]:
        """Where the "gray zone" and the threshold labels go, above the bars.

        The threshold's label starts just right of its line; when the line is near the right
        edge (a high threshold, a narrow panel) the label ends at the edge instead, crossing
        the line, and the gray zone's label gives way to it, so neither is cut off.
        """
        metrics = self.fontMetrics()
        floor, line = self.x_of(self.floor), self.x_of(self.threshold)
        wanted = metrics.horizontalAdvance(self.threshold_text()) + 2
        start = max(0.0, min(line + 4, self.width() - wanted - 2))
        threshold = QRectF(start, 2, wanted, 18)
        band = max(0.0, min(line, start) - floor - 4)  # never under the threshold's label
        return QRectF(floor, 2, band, 18), threshold

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        palette = self.palette()
        text = palette.windowText().color()
        left, right = self._axis()
        x_of = self.x_of
        top, height = self._TOP, self._ROW * max(1, len(self.candidates))
        gray = QColor("#bf8700")
        gray.setAlpha(50)
        painter.fillRect(QRectF(x_of(self.floor), top, x_of(self.threshold) - x_of(self.floor),
                                height), gray)
        painter.setPen(QPen(text))
        band_rect, threshold_rect = self.label_rects()
        painter.drawText(band_rect, painter.fontMetrics().elidedText(
            "gray zone", Qt.TextElideMode.ElideRight, int(band_rect.width())))
        painter.setPen(QPen(QColor("#cf222e"), 2, Qt.PenStyle.DashLine))
        painter.drawLine(int(x_of(self.threshold)), int(top - 4),
                         int(x_of(self.threshold)), int(top + height))
        painter.drawText(threshold_rect, self.threshold_text())
        if not self.candidates:
            painter.setPen(QPen(text))
            painter.drawText(QRectF(left, top, right - left, 22), "no candidates")
        for i, (label, similarity) in enumerate(self.candidates):
            y = top + self._ROW * i + 3
            if i == self.current:
                painter.fillRect(QRectF(0, y - 2, self.width(), self._ROW - 2),
                                 palette.highlight().color().lighter(170)
                                 if palette.window().color().lightness() > 128
                                 else palette.highlight().color().darker(150))
            colour = QColor("#1a7f37") if similarity >= self.threshold else (
                QColor("#bf8700") if similarity >= self.floor else QColor("#8c959f"))
            painter.fillRect(QRectF(left, y, x_of(similarity) - left, 16), QBrush(colour))
            painter.setPen(QPen(text))
            painter.drawText(QRectF(4, y, left - 8, 18),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             painter.fontMetrics().elidedText(
                                 label, Qt.TextElideMode.ElideRight, int(left - 8)))
            painter.drawText(QRectF(x_of(similarity) + 4, y, 60, 18),
                             Qt.AlignmentFlag.AlignVCenter, f"{similarity:.3f}")
        painter.end()


class _BarsArea(QScrollArea):
    """The bars' scroll area: it asks for the bars' current height (a QScrollArea keeps the
    size hint its widget had when set, before any candidate was shown)."""

    def sizeHint(self) -> QSize:
        hint, bars = super().sizeHint(), self.widget()
        if bars is None:
            return hint
        return QSize(hint.width(), bars.sizeHint().height() + 2 * self.frameWidth())


class StagePanel(QWidget):
    """One stage's panel: a headline, the stage data as labelled fields (with a Raw tab) and
    stage-specific widgets."""

    def __init__(self, stage: Stage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stage = stage
        self.headline = QLabel(f"{stage_title(stage.value)}: not run yet", self)
        self.headline.setWordWrap(True)
        font = self.headline.font()
        font.setBold(True)
        self.headline.setFont(font)
        self.fields = FieldsPanel("", self)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.headline)
        self.bars: SimilarityBars | None = None
        self.diff: QTableWidget | None = None
        self.note = QLabel("", self)  # the candidate search's partition, in words
        self.note.setWordWrap(True)
        self.note.setVisible(False)
        layout.addWidget(self.note)
        if stage is Stage.CANDIDATES:
            self.bars = SimilarityBars(self)
            # Scrolled when the panel is short (a small window): at their full height the
            # bars were drawn over the fields below them.
            scroll = _BarsArea(self)
            scroll.setWidget(self.bars)
            scroll.setWidgetResizable(True)
            scroll.setFrameShape(QFrame.Shape.NoFrame)
            scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
            scroll.setMinimumHeight(int(SimilarityBars._TOP + 2 * SimilarityBars._ROW))
            layout.addWidget(scroll)
        if stage is Stage.APPLY:
            self.diff = QTableWidget(0, 3, self)
            self.diff.setHorizontalHeaderLabels(["Field", "Before", "After"])
            self.diff.horizontalHeader().setStretchLastSection(True)
            self.diff.verticalHeader().hide()
            layout.addWidget(self.diff, 2)
        layout.addWidget(self.fields, 1)

    def clear(self) -> None:
        """Back to "not run yet"."""
        self.headline.setText(f"{stage_title(self.stage.value)}: not run yet")
        self.note.clear()
        self.note.setVisible(False)
        self.fields.clear()
        if self.bars is not None:
            self.bars.set_data([], self.bars.threshold, self.bars.floor)
        if self.diff is not None:
            self.diff.setRowCount(0)

    def show_data(self, headline: str, fields: Sequence[Field], raw: str) -> None:
        """Show ``headline``, the labelled ``fields`` and the ``raw`` JSON of the stage."""
        self.headline.setText(headline)
        self.fields.set_fields(fields, raw)

    def diff_rows(self) -> list[tuple[str, str, str]]:
        """The diff table's rows (field, before, after)."""
        if self.diff is None:
            return []
        table = self.diff
        cells = [[(item.text() if (item := table.item(r, c)) is not None else "")
                  for c in range(3)] for r in range(table.rowCount())]
        return [(a, b, c) for a, b, c in cells]


def record_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None,
                texts: Mapping[str, str] | None = None) -> list[tuple[str, str, str, bool]]:
    """Field-by-field ``(label, before, after, changed)`` of two record JSON forms, in words
    (times local, numbers rounded, linked records by their ``texts``)."""
    keys = list(dict.fromkeys([*(before or {}), *(after or {})]))
    rows = []
    for key in keys:
        if key in _DIFF_SKIP:
            continue
        old = (before or {}).get(key)
        new = (after or {}).get(key)
        rows.append((label_for(key), "" if before is None else diff_value(key, old, texts or {}),
                     "" if after is None else diff_value(key, new, texts or {}), old != new))
    return rows


class StepperView(QWidget):
    """Pick a memory, then Step / Continue / Pause through the pipeline with a speed control.

    Signals:
        run_started(str): A run began (its incoming id).
        open_record(str): Show this record (a candidate) in the Records view.
        stage_done(object): A :class:`StageReport` was shown.
        run_finished(str): The run's events were emitted (its incoming id; the timeline
            highlights them).
        message(str): Something to show in the status bar.
    """

    run_started = QtSignal(str)
    open_record = QtSignal(str)
    stage_done = QtSignal(object)
    run_finished = QtSignal(str)
    message = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: StoreSession | None = None
        self._redact: Callable[[str], str] | None = None
        self._shown: Masking | None = None
        self.run: SteppedRun | None = None
        self._memory: NewMemory | None = None  # the run's memory (an Ingest's redo runs it)
        self.threshold = 0.85
        self.floor = 0.70
        self._busy = False
        self._paused = True
        self._file_lines: list[str] = []
        self._file_position = 0
        self._file_name = ""
        self._policy: Any = None
        self._tier = TrustTier.HUMAN
        self._texts: dict[str, str] = {}  # record id → content, for the stage fields

        # -- input -----------------------------------------------------------------------
        self.source_box = QComboBox(self)
        self.source_box.addItems(_SOURCES)
        self.record_edit = QLineEdit(self)
        self.record_edit.setPlaceholderText("Type words of a stored memory (or paste its id)")
        self.record_edit.setClearButtonEnabled(True)
        self.record_edit.returnPressed.connect(self._on_load_record_clicked)
        self.load_record_button = QPushButton("Load", self)
        self.record_results = QListWidget(self)  # issue 19: stored memories by their words
        self.record_finder = RecordSearch(runner, self.record_edit, self.record_results,
                                          self._text, self, masking=self._search_masking)
        self.record_finder.picked.connect(self._on_record_picked)
        self.record_finder.failed.connect(self._on_record_search_failed)
        self.file_button = QPushButton("Open file…", self)
        self.next_line_button = QPushButton("Next line", self)
        self.file_label = QLabel("", self)
        self.content_edit = QPlainTextEdit(self)
        self.content_edit.setPlaceholderText("Memory text to run through the pipeline")
        self.content_edit.setMaximumHeight(64)
        self.agent_edit = QLineEdit("default", self)
        self.layer_box = QComboBox(self)
        self.layer_box.addItems([x.value for x in Layer])
        self.layer_box.setCurrentText(Layer.SEMANTIC.value)
        self.category_box = QComboBox(self)
        self.category_box.addItems([x.value for x in Category])
        self.tier_box = QComboBox(self)
        self.tier_box.addItems([x.value for x in TrustTier])
        self.privacy_box = QComboBox(self)
        fill_privacy(self.privacy_box)
        show_privacy(self.privacy_box, Privacy.PRIVATE)
        source_row = QHBoxLayout()
        source_row.addWidget(self.source_box)
        source_row.addWidget(self.record_edit, 1)
        source_row.addWidget(self.load_record_button)
        source_row.addWidget(self.file_button)
        source_row.addWidget(self.next_line_button)
        source_row.addWidget(self.file_label)
        source_row.addStretch(1)
        fields = QHBoxLayout()
        for label, widget in (("agent", self.agent_edit), ("layer", self.layer_box),
                              ("category", self.category_box), ("tier", self.tier_box),
                              ("privacy", self.privacy_box)):
            fields.addWidget(QLabel(label, self))
            fields.addWidget(widget)
        fields.addStretch(1)

        # -- controls --------------------------------------------------------------------
        # Simulate is the default (drawn as such; Ctrl+Shift+Return): trying a memory never
        # writes unless asked to. (Not Enter: a default button answers Enter only in dialogs,
        # and Enter types a new line in the memory's text.)
        self.simulate_button = QPushButton("Simulate", self)
        self.simulate_button.setDefault(True)
        self.simulate_button.setToolTip(
            "Run the memory through every stage with the same numbers as an ingest; "
            "nothing is written (Ctrl+Shift+Return)")
        self.simulate_action = QAction("Simulate", self)
        self.simulate_action.setShortcut(QKeySequence("Ctrl+Shift+Return"))
        self.simulate_action.setShortcutContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
        self.simulate_action.triggered.connect(self._on_simulate_shortcut)
        self.addAction(self.simulate_action)
        self.ingest_button = QPushButton("Ingest", self)
        self.ingest_button.setToolTip("Run the memory through the stages and store the "
                                      "outcome (Edit → Undo takes it back)")
        self.step_button = QPushButton("Step", self)
        self.continue_button = QPushButton("Continue", self)
        self.pause_button = QPushButton("Pause", self)
        self.speed = QSlider(Qt.Orientation.Horizontal, self)
        self.speed.setRange(0, 2000)
        self.speed.setValue(400)
        self.speed.setMaximumWidth(180)
        self.speed_label = QLabel("", self)
        self.status_label = QLabel("Pick a memory and press Simulate (nothing is written) "
                                   "or Ingest.", self)
        # its own line under the buttons, the view's width: beside them it was a column of
        # four or five lines at 1000 px (and cut off before it wrapped)
        self.status_label.setWordWrap(True)
        controls = QHBoxLayout()
        for button in (self.simulate_button, self.ingest_button, self.step_button,
                       self.continue_button, self.pause_button):
            controls.addWidget(button)
        controls.addWidget(QLabel("delay", self))
        controls.addWidget(self.speed)
        controls.addWidget(self.speed_label)
        controls.addStretch(1)

        # -- stages ----------------------------------------------------------------------
        self.stage_list = QListWidget(self)
        self.stage_list.setMaximumWidth(190)
        self.panels: dict[Stage, StagePanel] = {}
        self.stack = QStackedWidget(self)
        for stage in STAGES:
            self.stage_list.addItem(QListWidgetItem(f"○  {stage_title(stage.value)}"))
            panel = StagePanel(stage, self)
            self.panels[stage] = panel
            self.stack.addWidget(panel)
        self.stage_list.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.stage_list.setCurrentRow(0)
        bars = self.panels[Stage.CANDIDATES].bars
        assert bars is not None
        self.candidate_bars = bars
        self.candidate_bars.activated.connect(self.open_record)
        for panel in self.panels.values():  # stage fields naming a record open it too
            panel.fields.record_activated.connect(self.open_record)

        # -- what-if ---------------------------------------------------------------------
        self.whatif_box = QGroupBox("Threshold what-if (read-only)", self)
        self.whatif_tier = QComboBox(self.whatif_box)
        self.whatif_tier.addItems([x.value for x in TrustTier])
        self.whatif_tier.setCurrentText(TrustTier.AGENT.value)
        self.whatif_value = QDoubleSpinBox(self.whatif_box)
        self.whatif_value.setRange(0.5, 0.99)
        self.whatif_value.setSingleStep(0.01)
        self.whatif_value.setValue(0.80)
        self.whatif_button = QPushButton("Compare", self.whatif_box)
        self.whatif_summary = QLabel("", self.whatif_box)
        self.whatif_summary.setWordWrap(True)
        self.whatif_table = QTableWidget(0, 3, self.whatif_box)
        self.whatif_table.setHorizontalHeaderLabels(["Similarity", "Record A", "Record B"])
        # one line a pair, the two texts sharing the width (whole on hover): in a narrow box
        # the fixed columns wrapped each text into two cut lines and scrolled sideways
        self.whatif_table.setWordWrap(False)
        header = self.whatif_table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        for column in (1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch)
        self.whatif_table.verticalHeader().hide()
        form = QFormLayout()
        form.addRow("tier", self.whatif_tier)
        form.addRow("new threshold", self.whatif_value)
        form.addRow(self.whatif_button)
        # room for the three column titles whole: at 1000 px the box got 190 px and cut
        # "Record A" and "Record B"
        self.whatif_box.setMinimumWidth(250)
        whatif_layout = QVBoxLayout(self.whatif_box)
        whatif_layout.addLayout(form)
        whatif_layout.addWidget(self.whatif_summary)
        whatif_layout.addWidget(self.whatif_table, 1)
        self.whatif_result: WhatIf | None = None

        body = QSplitter(Qt.Orientation.Horizontal, self)
        body.addWidget(self.stage_list)
        body.addWidget(self.stack)
        body.addWidget(self.whatif_box)
        body.setStretchFactor(1, 3)
        body.setStretchFactor(2, 1)
        body.setSizes([170, 700, 300])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(source_row)
        layout.addWidget(self.record_results)
        layout.addWidget(self.content_edit)
        layout.addLayout(fields)
        layout.addLayout(controls)
        layout.addWidget(self.status_label)
        layout.addWidget(body, 1)
        self.empty_state = EmptyState(self.stack, "pipeline")
        self._show_empty_state()

        self.source_box.currentIndexChanged.connect(self._on_source_changed)
        self.load_record_button.clicked.connect(self._on_load_record_clicked)
        self.file_button.clicked.connect(self._on_file_clicked)
        self.next_line_button.clicked.connect(self._on_next_line_clicked)
        self.simulate_button.clicked.connect(self._on_simulate_clicked)
        self.ingest_button.clicked.connect(self._on_ingest_clicked)
        self.step_button.clicked.connect(self._on_step_clicked)
        self.continue_button.clicked.connect(self._on_continue_clicked)
        self.pause_button.clicked.connect(self.pause)
        self.speed.valueChanged.connect(self._on_speed_changed)
        self.whatif_button.clicked.connect(self._on_whatif_clicked)
        self._on_speed_changed(self.speed.value())
        self._on_source_changed(0)
        self._update_buttons()

    # -- state -----------------------------------------------------------------------------

    def set_session(self, session: StoreSession | None) -> None:
        """Work on ``session`` (a running step finishes on the old engine)."""
        self._session = session
        self.run = None
        self._paused = True
        self.record_finder.set_reader(session.reader if session is not None else None)
        for panel in self.panels.values():
            panel.clear()
        self._mark_stages()
        self._update_buttons()
        self._show_empty_state()

    def _show_empty_state(self) -> None:
        """Until a run starts, say how to start one where its stages will show."""
        self.empty_state.show_message(
            "Step a memory through the pipeline", "Type a memory above (or load a stored "
            "record, or a line of a JSONL file) and press Simulate, then Step: each stage's "
            "data shows here as it happens — the hash, the embedding, the candidates and their "
            "similarity, the decision and why. Simulate writes nothing; Ingest stores the "
            "outcome, and Edit → Undo takes it back.")

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask shown content with ``redact`` (None: as stored); the stages shown so far are
        drawn again, so no unmasked text stays on screen."""
        self._redact = redact
        self._shown = None if redact is None else ExitPolicy(redact).shown
        if self.run is not None and self.run.reports:
            current = self.stage_list.currentRow()
            for report in self.run.reports:
                self.show_report(report)
            self.stage_list.setCurrentRow(current)

    def _search_masking(self) -> Masking | None:
        """What the stored-record search matches against (the masked text while masking)."""
        return self._shown

    def _text(self, value: str) -> str:
        return self._redact(value) if self._redact is not None else value

    def _shown_texts(self) -> dict[str, str]:
        """The record texts known to this run, as shown (redacted when redaction is on)."""
        return {k: self._text(v) for k, v in self._texts.items()}

    def _run_name(self, run: SteppedRun) -> str:
        content = self._texts.get(run.incoming_id, "")
        return f"Run of ‘{elide(self._text(content), 40)}’" if content else "Run"

    @staticmethod
    def _next_title(run: SteppedRun) -> str:
        return stage_title(run.next_stage.value) if run.next_stage is not None else "none"

    async def _read_texts(self, session: StoreSession, report: StageReport) -> None:
        """Learn the texts of the records ``report`` names (on a worker, through the reader).

        Records the stage carries whole (a merge's before and after) need no read.
        """
        if isinstance(report.detail, ApplyDetail):
            for record in (report.detail.before, report.detail.after):
                if record is not None:
                    self._texts[record.id] = record.content
        missing = [i for i in record_ids_in(report.data) if i not in self._texts]
        if not missing:
            return
        # a record gone or unreadable stays unnamed: the fields say "no longer stored" and the
        # Raw tab has the ids
        self._texts.update(await fetch_texts(self._runner, session.reader, missing))

    def _update_buttons(self) -> None:
        has = self._session is not None
        running = self.run is not None and not self.run.done
        self.simulate_button.setEnabled(has and not self._busy)  # read-only stores too
        self.ingest_button.setEnabled(has and not self._busy and (
            self._session is not None and not self._session.read_only))
        self.step_button.setEnabled(running and not self._busy and self._paused)
        self.continue_button.setEnabled(running and self._paused)
        self.pause_button.setEnabled(running and not self._paused)
        self.whatif_button.setEnabled(has)

    def _set_thresholds(self, *, semantic: bool) -> None:
        if self._policy is not None:
            # the line is where a near duplicate merges: the tier's threshold plus the merge
            # margin on the embedding path (between the floor and it, a pair goes to review)
            self.threshold = float(self._policy.merge_point(
                self._policy.threshold(self._tier, semantic=semantic), semantic=semantic))
            self.floor = float(self._policy.review_floor(self._tier, semantic=semantic))

    def _on_speed_changed(self, value: int) -> None:
        self.speed_label.setText(f"{value} ms")

    def _on_source_changed(self, index: int) -> None:
        if index != 1:
            self.record_finder.close()
        self.record_edit.setVisible(index == 1)
        self.load_record_button.setVisible(index == 1)
        self.file_button.setVisible(index == 2)
        self.next_line_button.setVisible(index == 2)
        self.file_label.setVisible(index == 2)

    # -- inputs ----------------------------------------------------------------------------

    def new_memory(self) -> NewMemory:
        """The memory the form describes.

        Raises:
            ValidationError: a bad field.
        """
        source = "stepper" if self.source_box.currentIndex() != 2 else \
            f"import:{self._file_name or 'file'}"
        return NewMemory(
            content=self.content_edit.toPlainText(), agent_id=self.agent_edit.text().strip()
            or "default", layer=Layer(self.layer_box.currentText()),
            category=Category(self.category_box.currentText()),
            source_tier=TrustTier(self.tier_box.currentText()),
            privacy=chosen_privacy(self.privacy_box) or Privacy.PRIVATE, source=source)

    def fill_form(self, new: NewMemory) -> None:
        """Show ``new`` in the form."""
        self.content_edit.setPlainText(new.content)
        self.agent_edit.setText(new.agent_id)
        self.layer_box.setCurrentText(new.layer.value)
        self.category_box.setCurrentText(new.category.value)
        self.tier_box.setCurrentText(new.source_tier.value)
        show_privacy(self.privacy_box, new.privacy)

    def _on_load_record_clicked(self) -> None:
        text = self.record_edit.text().strip()
        if RECORD_ID.fullmatch(text):
            spawn(self.load_stored(text))
        elif not self.record_finder.pick_first():  # Enter picks the first match
            spawn(self.record_finder.search(text))

    def _on_record_picked(self, record_id: str) -> None:
        spawn(self.load_stored(record_id))

    def _on_record_search_failed(self, message: str) -> None:
        self.status_label.setText(message)

    async def load_stored(self, record_id: str) -> bool:
        """Fill the form from stored record ``record_id`` (its content and fields)."""
        session = self._session
        if session is None or not record_id:
            return False
        try:
            record = await self._runner.run(session.engine.get, record_id)
        except EngineError as exc:
            self.status_label.setText(str(exc))
            return False
        if session is not self._session:
            return False
        self.source_box.setCurrentIndex(1)
        self.record_finder.close()
        self.record_edit.clear()  # the form below shows what was loaded
        self.fill_form(NewMemory(content=record.content, agent_id=record.agent_id,
                                 layer=record.layer, category=record.category,
                                 privacy=record.privacy, source_tier=record.source_tier))
        return True

    def _on_file_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import file to step through", "",
                                              "JSON lines (*.jsonl);;All files (*)")
        if path:
            spawn(self.open_file(Path(path)))

    async def open_file(self, path: Path) -> int:
        """Read an import file (on a worker); returns its number of lines."""
        try:
            text = await self._runner.run(path.read_text, encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            self.status_label.setText(f"Could not read {path}: {exc}")
            return 0
        self._file_lines = [line for line in text.splitlines() if line.strip()]
        self._file_position = 0
        self._file_name = path.name
        self.source_box.setCurrentIndex(2)
        self.file_label.setText(f"{path.name}: line 0 of {len(self._file_lines)}")
        return len(self._file_lines)

    def _on_next_line_clicked(self) -> None:
        self.next_line()

    def next_line(self) -> bool:
        """Put the next line of the import file in the form."""
        while self._file_position < len(self._file_lines):
            line = self._file_lines[self._file_position]
            self._file_position += 1
            self.file_label.setText(f"{self._file_name}: line {self._file_position} of "
                                    f"{len(self._file_lines)}")
            try:
                new = memory_from_json(line, f"import:{self._file_name}")
            except (ValueError, EngineError) as exc:
                self.status_label.setText(f"line {self._file_position}: {exc}")
                continue
            self.fill_form(new)
            return True
        self.status_label.setText("No more lines in the file.")
        return False

    # -- running ---------------------------------------------------------------------------

    def _on_simulate_clicked(self) -> None:
        spawn(self.start(simulate=True))

    def _on_simulate_shortcut(self) -> None:
        if self.simulate_button.isEnabled():
            self._on_simulate_clicked()

    def _on_ingest_clicked(self) -> None:
        spawn(self.start(simulate=False))

    async def start(self, new: NewMemory | None = None, *, simulate: bool = True) -> bool:
        """Begin a stepped run of ``new`` (default: the form's memory).

        Args:
            simulate: A dry run (the default): every stage, nothing written. False: a real
                ingest, pushed on the undo stack once its ``persist`` stage wrote.
        """
        session = self._session
        if session is None:
            return False
        try:
            memory = new if new is not None else self.new_memory()
        except EngineError as exc:
            self.status_label.setText(str(exc))
            return False
        if new is not None:
            self.fill_form(new)
        self._busy = True
        self._update_buttons()
        try:
            run, policy = await self._runner.run(_begin, session, memory, simulate)
        except EngineError as exc:
            self.status_label.setText(f"Could not start: {exc}")
            return False
        finally:
            self._busy = False
        if session is not self._session:
            return False
        self._policy, self._tier = policy, memory.source_tier
        self._set_thresholds(semantic=True)
        self.run = run
        self._memory = memory
        self._texts = {run.incoming_id: memory.content}
        self._paused = True
        self.empty_state.clear()
        for panel in self.panels.values():
            panel.clear()
        self._mark_stages()
        kind = "simulated, nothing will be written" if run.simulated else "ingest"
        self.status_label.setText(f"{self._run_name(run)} ({kind}): next stage "
                                  f"{self._next_title(run)}")
        self._update_buttons()
        self.run_started.emit(run.incoming_id)
        return True

    def _on_step_clicked(self) -> None:
        spawn(self.step())

    async def step(self) -> StageReport | None:
        """Run the next stage on a worker and show it."""
        run, session = self.run, self._session
        if run is None or session is None or run.done or self._busy:
            return None
        self._busy = True
        self._update_buttons()
        stage = run.next_stage
        try:
            # persist is the only writing stage: it queues behind the window's other writes
            # (a simulation's persist writes nothing and need not wait)
            if stage is Stage.PERSIST and not run.simulated:
                report = await session.run_write(run.step)
            else:
                report = await self._runner.run(run.step)
        except EngineError as exc:
            self.status_label.setText(f"{stage} failed: {exc}")
            self._paused = True
            return None
        finally:
            self._busy = False
            self._update_buttons()
        if run is not self.run:
            return None
        await self._read_texts(session, report)
        if run is not self.run:
            return None
        self.show_report(report)
        if report.stage is Stage.PERSIST and run.written is not None and not run.written.empty:
            self._push_undo(session, run, run.written)
        if run.next_stage is None:
            self._paused = True
            result = run.result
            outcome = sentence(reason_sentence(
                result.reason.value, target=result.target_id,
                conflicts=[c.to_json() for c in result.conflicts], texts=self._shown_texts())
            ) if result else "done"
            if run.simulated:
                outcome += " — simulated: nothing was written. Press Ingest to store it."
            self.status_label.setText(f"{self._run_name(run)}: {outcome}")
            self.status_label.setToolTip(
                f"{result.action.value} ({result.reason.value})" if result else "")
            if not run.simulated:  # a dry run emitted no events to highlight
                self.run_finished.emit(run.incoming_id)
        else:
            self.status_label.setText(f"Next stage: {self._next_title(run)}")
        self._update_buttons()
        self.stage_done.emit(report)
        return report

    def _push_undo(self, session: StoreSession, run: SteppedRun, written: RunWrites) -> None:
        """Make the run's write one undo step and tell the views what changed."""
        content = self._texts.get(run.incoming_id, "")
        assert self._memory is not None  # set with the run
        session.undo_stack.push(IngestCommand(
            session, f"Ingest ‘{elide(content, 30)}’" if content else "Ingest", written,
            self._memory))
        session.records_changed.emit([after.id for _, after in written.pairs])
        self.message.emit("Ingested from the Pipeline view (Edit → Undo takes it back)")

    def _on_continue_clicked(self) -> None:
        spawn(self.continue_run())

    async def continue_run(self) -> None:
        """Run the remaining stages with the speed control's delay between them."""
        run = self.run
        if run is None or run.done:
            return
        self._paused = False
        self._update_buttons()
        while self.run is run and not run.done and not self._paused:
            if await self.step() is None:
                break
            if not run.done and self.speed.value():
                await asyncio.sleep(self.speed.value() / 1000.0)
        self._paused = True
        self._update_buttons()

    def pause(self) -> None:
        """Stop Continue between stages."""
        self._paused = True
        self._update_buttons()

    # -- showing stages --------------------------------------------------------------------

    def _mark_stages(self) -> None:
        done = {r.stage for r in self.run.reports} if self.run is not None else set()
        following = self.run.next_stage if self.run is not None else None
        for i, stage in enumerate(STAGES):
            mark = "●" if stage in done else ("▶" if stage == following else "○")
            self.stage_list.item(i).setText(f"{mark}  {stage_title(stage.value)}")

    def current_record(self) -> RecordRef | None:
        """The current candidate (the context menu's record), when its text is known."""
        bars = self.candidate_bars
        if not 0 <= bars.current < len(bars.ids):
            return None
        record_id = bars.ids[bars.current]
        text = self._texts.get(record_id)
        return None if text is None else RecordRef(record_id, text)

    def current_field_record(self) -> RecordRef | None:
        """The record the shown stage's current field names, when its text is known."""
        panel = self.stack.currentWidget()
        record_id = panel.fields.current_record_id() if isinstance(panel, StagePanel) else None
        text = self._texts.get(record_id) if record_id is not None else None
        return None if record_id is None or text is None else RecordRef(record_id, text)

    def show_report(self, report: StageReport) -> None:
        """Fill the panel of ``report.stage`` and bring it to the front.

        Record ids in the stage data are shown by their text when the run read it (``step``
        reads the texts of the records a stage names before showing it).
        """
        panel = self.panels[report.stage]
        data, detail = report.data, report.detail
        texts = self._shown_texts()  # record id → text, as shown
        headline = f"{stage_title(report.stage.value)} · {duration(report.latency_ms)}"
        if isinstance(detail, NormalizeDetail):
            headline += f" · hash {detail.content_hash[:12]}…"
        elif isinstance(detail, EmbedDetail):
            self._set_thresholds(semantic=detail.semantic)
            headline += (f" · by the embedding model ({detail.model})" if detail.semantic else
                         " · by word overlap (the embedding model is not ready)")
        elif isinstance(detail, CandidatesDetail):
            search = detail.search
            hit = "exact duplicate found" if search.hash_hit else "no exact duplicate"
            headline += (f" · {hit} · {count_of(len(search.candidates), 'candidate')} · "
                         f"{phrase(search.method)} search")
            assert panel.bars is not None
            start = self.run.reports[0].data if self.run is not None and self.run.reports \
                and self.run.reports[0].stage is Stage.START else {}
            cross = None if self._policy is None else \
                float(self._policy.dedup.cross_category_threshold)
            panel.note.setText(partition_sentence(start, data, cross))
            panel.note.setVisible(True)
            shown = search.candidates[:8]
            panel.bars.set_data(
                [(texts.get(c.id, "(no longer stored)"), c.similarity) for c in shown],
                self.threshold, self.floor, [c.id for c in shown],
                [record_tooltip(texts.get(c.id, ""), c.id) + f"\ncategory {c.category.value}"
                 for c in shown])
        elif isinstance(detail, DecisionDetail):
            decision = detail.decision
            conflicts = [c.to_json() for c in decision.conflicts]
            headline += " · " + reason_sentence(
                decision.reason.value, target=decision.target_id, conflicts=conflicts,
                texts=texts)
            thresholds = decision.thresholds
            limit = thresholds.get("effective", thresholds.get("threshold"))
            if decision.similarity is not None and limit is not None:
                headline += f" (similarity {compare(decision.similarity, limit)})"
            if not conflicts:
                headline += " · contradiction check: none found"
        elif isinstance(detail, ApplyDetail):
            headline += f" · {phrase(detail.action.value)}"
            assert panel.diff is not None
            rows = record_diff(None if detail.before is None else detail.before.to_json(),
                               None if detail.after is None else detail.after.to_json(), texts)
            panel.diff.setRowCount(len(rows))
            changed = QColor("#bf8700")
            changed.setAlpha(60)
            for r, (name, old, new, is_changed) in enumerate(rows):
                for c, value in enumerate((name, self._text(old) if name == "Text" else old,
                                           self._text(new) if name == "Text" else new)):
                    item = QTableWidgetItem(value)
                    item.setToolTip(value)
                    if is_changed:
                        item.setBackground(changed)
                    panel.diff.setItem(r, c, item)
            panel.diff.resizeColumnToContents(0)
        elif isinstance(detail, PersistDetail) and detail.simulated:
            headline += (" · simulated: nothing written (an ingest would write "
                         f"{count_of(len(detail.would_write), 'record')}"
                         + (" and queue a review item)" if detail.would_queue_review else ")"))
        elif isinstance(detail, EventsDetail):
            headline += f" · {', '.join(phrase(k) for k in detail.kinds)}"
            if data.get("simulated"):
                headline += " · simulated: none emitted"
        show = self._text if self._redact is not None else str
        panel.show_data(headline, stage_fields(report.stage.value, data, texts, show=show,
                                               tier=self._tier.value),
                        raw_json(data, self._redact))
        self._mark_stages()
        self.stage_list.setCurrentRow(report.index)

    # -- what-if ---------------------------------------------------------------------------

    def _on_whatif_clicked(self) -> None:
        spawn(self.what_if())

    async def what_if(self) -> WhatIf | None:
        """Compare the chosen tier's threshold with the spin box value (read-only)."""
        session = self._session
        if session is None:
            return None
        tier = TrustTier(self.whatif_tier.currentText())
        new = round(self.whatif_value.value(), 4)
        result = await self._runner.run(_what_if, session, tier, new)
        if session is not self._session:
            return None
        self.show_what_if(result)
        return result

    def show_what_if(self, result: WhatIf) -> None:
        """Show a what-if answer: its summary and the pairs that would change."""
        self.whatif_result = result
        verb = "would merge" if result.new < result.old else "would no longer merge"
        sampled = " (partitions sampled)" if result.sampled else ""
        self.whatif_summary.setText(
            f"{result.old:.2f} → {result.new:.2f}: {count_of(result.total, 'stored pair')} {verb}; "
            f"{count_of(result.rows_compared, 'record')} compared{sampled}.")
        self.whatif_table.setRowCount(len(result.pairs))
        for r, pair in enumerate(result.pairs):
            for c, value in enumerate((f"{pair.similarity:.3f}", self._text(pair.content_a),
                                       self._text(pair.content_b))):
                item = QTableWidgetItem(value)
                item.setToolTip(value)
                self.whatif_table.setItem(r, c, item)


def _begin(session: StoreSession, memory: NewMemory,
           simulate: bool) -> tuple[SteppedRun, Any]:
    engine = session.engine
    return engine.stepped(memory, simulate=simulate), engine.ingest_policy


def _what_if(session: StoreSession, tier: TrustTier, new: float) -> WhatIf:
    return threshold_what_if(session.engine, tier, new)
