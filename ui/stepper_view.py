"""The slow-motion merge stepper: one memory through the stepped ingest pipeline, stage by stage.

The memory comes from the form (type it), a stored record (its content and fields, by id) or
the next line of a JSONL import file. ``engine.stepped(new)`` gives a
:class:`~engine.ingest.pipeline.SteppedRun`; **Step** runs its next stage on a worker,
**Continue** runs the remaining stages with the speed control's delay between them
(``asyncio.sleep`` on the GUI loop) and **Pause** stops between stages. The driver holds no lock
between steps (docs/ingest.md): only ``persist`` takes the engine's write lock, briefly, and
redoes the merge if its target changed while paused — so user think time never blocks other
work. The persist step goes through :meth:`StoreSession.run_write` so it queues behind the
window's other writes.

Each stage has a panel: its data as a field tree, plus candidate similarity bars against the
tier threshold and the gray zone, the decision with its reason and conflicts, and the resulting
record as a field-by-field diff. The threshold what-if (read-only, :mod:`ui.whatif`) lists the
stored neighbour pairs a different tier threshold would merge or split.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PySide6.QtCore import QRectF, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QBrush, QColor, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSizePolicy,
    QSlider,
    QSplitter,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.errors import EngineError
from engine.ingest.kinds import Stage
from engine.ingest.pipeline import StageReport, SteppedRun
from engine.records import Category, Layer, NewMemory, Privacy, TrustTier
from ui.empty_state import EmptyState
from ui.session import StoreSession
from ui.tasks import TaskRunner, spawn
from ui.whatif import WhatIf, threshold_what_if
from ui.wording import count_of

__all__ = ["SimilarityBars", "StagePanel", "StepperView", "memory_from_json"]

STAGES: tuple[Stage, ...] = tuple(Stage)
_SOURCES = ("Type a new memory", "A stored memory (by id)", "Next line of an import file")
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


class SimilarityBars(QWidget):
    """Candidates as horizontal similarity bars with the tier threshold and the gray zone."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.candidates: list[tuple[str, float]] = []
        self.threshold = 0.85
        self.floor = 0.70
        self.setMinimumHeight(60)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_data(self, candidates: list[tuple[str, float]], threshold: float,
                 floor: float) -> None:
        """Show ``(label, similarity)`` bars against ``threshold`` and the band [floor, t)."""
        self.candidates = candidates
        self.threshold = threshold
        self.floor = floor
        self.setMinimumHeight(40 + 24 * max(1, len(candidates)))
        self.update()

    def paintEvent(self, event: QPaintEvent) -> None:
        painter = QPainter(self)
        palette = self.palette()
        text = palette.windowText().color()
        left, right = 170.0, float(self.width() - 50)
        lo = 0.4  # similarity at the left edge

        def x_of(value: float) -> float:
            return left + (right - left) * max(0.0, min(1.0, (value - lo) / (1.0 - lo)))

        top, height = 22.0, 24.0 * max(1, len(self.candidates))
        gray = QColor("#bf8700")
        gray.setAlpha(50)
        painter.fillRect(QRectF(x_of(self.floor), top, x_of(self.threshold) - x_of(self.floor),
                                height), gray)
        painter.setPen(QPen(text))
        painter.drawText(QRectF(x_of(self.floor), 2, 160, 18), "gray zone")
        painter.setPen(QPen(QColor("#cf222e"), 2, Qt.PenStyle.DashLine))
        painter.drawLine(int(x_of(self.threshold)), int(top - 4),
                         int(x_of(self.threshold)), int(top + height))
        painter.drawText(QRectF(x_of(self.threshold) + 4, 2, 140, 18),
                         f"threshold {self.threshold:.2f}")
        if not self.candidates:
            painter.setPen(QPen(text))
            painter.drawText(QRectF(left, top, right - left, 22), "no candidates")
        for i, (label, similarity) in enumerate(self.candidates):
            y = top + 24.0 * i + 3
            colour = QColor("#1a7f37") if similarity >= self.threshold else (
                QColor("#bf8700") if similarity >= self.floor else QColor("#8c959f"))
            painter.fillRect(QRectF(left, y, x_of(similarity) - left, 16), QBrush(colour))
            painter.setPen(QPen(text))
            painter.drawText(QRectF(4, y, left - 8, 18),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             label)
            painter.drawText(QRectF(x_of(similarity) + 4, y, 60, 18),
                             Qt.AlignmentFlag.AlignVCenter, f"{similarity:.3f}")
        painter.end()


class StagePanel(QWidget):
    """One stage's panel: a headline, the stage data as a tree and stage-specific widgets."""

    def __init__(self, stage: Stage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.stage = stage
        self.headline = QLabel(f"{stage.value}: not run yet", self)
        self.headline.setWordWrap(True)
        font = self.headline.font()
        font.setBold(True)
        self.headline.setFont(font)
        self.tree = QTreeWidget(self)
        self.tree.setHeaderLabels(["field", "value"])
        self.tree.setColumnWidth(0, 180)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.headline)
        self.bars: SimilarityBars | None = None
        self.diff: QTableWidget | None = None
        if stage is Stage.CANDIDATES:
            self.bars = SimilarityBars(self)
            layout.addWidget(self.bars)
        if stage is Stage.APPLY:
            self.diff = QTableWidget(0, 3, self)
            self.diff.setHorizontalHeaderLabels(["field", "before", "after"])
            self.diff.horizontalHeader().setStretchLastSection(True)
            self.diff.verticalHeader().hide()
            layout.addWidget(self.diff, 2)
        layout.addWidget(self.tree, 1)

    def clear(self) -> None:
        """Back to "not run yet"."""
        self.headline.setText(f"{self.stage.value}: not run yet")
        self.tree.clear()
        if self.bars is not None:
            self.bars.set_data([], self.bars.threshold, self.bars.floor)
        if self.diff is not None:
            self.diff.setRowCount(0)

    def show_data(self, headline: str, data: Mapping[str, Any]) -> None:
        """Fill the tree with ``data`` (nested mappings and lists become branches)."""
        self.headline.setText(headline)
        self.tree.clear()

        def add(parent: QTreeWidget | QTreeWidgetItem, key: str, value: object) -> None:
            if isinstance(value, Mapping):
                summary = " · ".join(_short(value[k], 40) for k in (
                    "id", "similarity", "category", "found_by", "kind") if k in value)
                item = QTreeWidgetItem([key, summary])
                for k, v in value.items():
                    add(item, str(k), v)
            elif isinstance(value, list | tuple) and value and not all(
                    isinstance(v, str | int | float) for v in value):
                item = QTreeWidgetItem([key, f"{len(value)} items"])
                for i, v in enumerate(value):
                    add(item, str(i), v)
            else:
                item = QTreeWidgetItem([key, _short(value)])
                item.setToolTip(1, str(value))
            if isinstance(parent, QTreeWidget):
                parent.addTopLevelItem(item)
            else:
                parent.addChild(item)

        for key, value in data.items():
            add(self.tree, key, value)
        self.tree.expandToDepth(0)

    def diff_rows(self) -> list[tuple[str, str, str]]:
        """The diff table's rows (field, before, after)."""
        if self.diff is None:
            return []
        table = self.diff
        cells = [[(item.text() if (item := table.item(r, c)) is not None else "")
                  for c in range(3)] for r in range(table.rowCount())]
        return [(a, b, c) for a, b, c in cells]


def _short(value: object, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def record_diff(before: Mapping[str, Any] | None,
                after: Mapping[str, Any] | None) -> list[tuple[str, str, str, bool]]:
    """Field-by-field ``(field, before, after, changed)`` of two record JSON forms."""
    keys = list(dict.fromkeys([*(before or {}), *(after or {})]))
    rows = []
    for key in keys:
        if key in _DIFF_SKIP:
            continue
        old = (before or {}).get(key)
        new = (after or {}).get(key)
        rows.append((key, "" if before is None else _short(old),
                     "" if after is None else _short(new), old != new))
    return rows


class StepperView(QWidget):
    """Pick a memory, then Step / Continue / Pause through the pipeline with a speed control.

    Signals:
        run_started(str): A run began (its incoming id).
        stage_done(object): A :class:`StageReport` was shown.
        run_finished(str): The run's events were emitted (its incoming id; the timeline
            highlights them).
        message(str): Something to show in the status bar.
    """

    run_started = QtSignal(str)
    stage_done = QtSignal(object)
    run_finished = QtSignal(str)
    message = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: StoreSession | None = None
        self._redact: Callable[[str], str] | None = None
        self.run: SteppedRun | None = None
        self.threshold = 0.85
        self.floor = 0.70
        self._busy = False
        self._paused = True
        self._file_lines: list[str] = []
        self._file_position = 0
        self._file_name = ""
        self._policy: Any = None
        self._tier = TrustTier.HUMAN

        # -- input -----------------------------------------------------------------------
        self.source_box = QComboBox(self)
        self.source_box.addItems(_SOURCES)
        self.record_edit = QLineEdit(self)
        self.record_edit.setPlaceholderText("record id")
        self.load_record_button = QPushButton("Load", self)
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
        self.privacy_box.addItems([x.value for x in Privacy])
        self.privacy_box.setCurrentText(Privacy.PRIVATE.value)
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
        self.start_button = QPushButton("Start", self)
        self.step_button = QPushButton("Step", self)
        self.continue_button = QPushButton("Continue", self)
        self.pause_button = QPushButton("Pause", self)
        self.speed = QSlider(Qt.Orientation.Horizontal, self)
        self.speed.setRange(0, 2000)
        self.speed.setValue(400)
        self.speed.setMaximumWidth(180)
        self.speed_label = QLabel("", self)
        self.status_label = QLabel("Pick a memory and press Start.", self)
        controls = QHBoxLayout()
        for button in (self.start_button, self.step_button, self.continue_button,
                       self.pause_button):
            controls.addWidget(button)
        controls.addWidget(QLabel("delay", self))
        controls.addWidget(self.speed)
        controls.addWidget(self.speed_label)
        controls.addWidget(self.status_label, 1)

        # -- stages ----------------------------------------------------------------------
        self.stage_list = QListWidget(self)
        self.stage_list.setMaximumWidth(190)
        self.panels: dict[Stage, StagePanel] = {}
        self.stack = QStackedWidget(self)
        for stage in STAGES:
            self.stage_list.addItem(QListWidgetItem(f"○  {stage.value}"))
            panel = StagePanel(stage, self)
            self.panels[stage] = panel
            self.stack.addWidget(panel)
        self.stage_list.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.stage_list.setCurrentRow(0)

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
        self.whatif_table.setHorizontalHeaderLabels(["similarity", "record A", "record B"])
        self.whatif_table.horizontalHeader().setStretchLastSection(True)
        self.whatif_table.verticalHeader().hide()
        form = QFormLayout()
        form.addRow("tier", self.whatif_tier)
        form.addRow("new threshold", self.whatif_value)
        form.addRow(self.whatif_button)
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
        layout.addWidget(self.content_edit)
        layout.addLayout(fields)
        layout.addLayout(controls)
        layout.addWidget(body, 1)
        self.empty_state = EmptyState(self.stack, "pipeline")
        self._show_empty_state()

        self.source_box.currentIndexChanged.connect(self._on_source_changed)
        self.load_record_button.clicked.connect(self._on_load_record_clicked)
        self.file_button.clicked.connect(self._on_file_clicked)
        self.next_line_button.clicked.connect(self._on_next_line_clicked)
        self.start_button.clicked.connect(self._on_start_clicked)
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
        for panel in self.panels.values():
            panel.clear()
        self._mark_stages()
        self._update_buttons()
        self._show_empty_state()

    def _show_empty_state(self) -> None:
        """Until a run starts, say how to start one where its stages will show."""
        self.empty_state.show_message(
            "Step a memory through the pipeline", "Type a memory above (or load a stored "
            "record, or a line of a JSONL file) and press Start, then Step: each stage's data "
            "shows here as it happens — the hash, the embedding, the candidates and their "
            "similarity, the decision and why.")

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask shown content with ``redact`` (None: as stored)."""
        self._redact = redact

    def _text(self, value: str) -> str:
        return self._redact(value) if self._redact is not None else value

    def _update_buttons(self) -> None:
        has = self._session is not None
        running = self.run is not None and not self.run.done
        self.start_button.setEnabled(has and not self._busy and (
            self._session is not None and not self._session.read_only))
        self.step_button.setEnabled(running and not self._busy and self._paused)
        self.continue_button.setEnabled(running and self._paused)
        self.pause_button.setEnabled(running and not self._paused)
        self.whatif_button.setEnabled(has)

    def _set_thresholds(self, *, semantic: bool) -> None:
        if self._policy is not None:
            self.threshold = float(self._policy.threshold(self._tier, semantic=semantic))
            self.floor = float(self._policy.review_floor(self._tier, semantic=semantic))

    def _on_speed_changed(self, value: int) -> None:
        self.speed_label.setText(f"{value} ms")

    def _on_source_changed(self, index: int) -> None:
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
            privacy=Privacy(self.privacy_box.currentText()), source=source)

    def fill_form(self, new: NewMemory) -> None:
        """Show ``new`` in the form."""
        self.content_edit.setPlainText(new.content)
        self.agent_edit.setText(new.agent_id)
        self.layer_box.setCurrentText(new.layer.value)
        self.category_box.setCurrentText(new.category.value)
        self.tier_box.setCurrentText(new.source_tier.value)
        self.privacy_box.setCurrentText(new.privacy.value)

    def _on_load_record_clicked(self) -> None:
        spawn(self.load_stored(self.record_edit.text().strip()))

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
        self.record_edit.setText(record_id)
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

    def _on_start_clicked(self) -> None:
        spawn(self.start())

    async def start(self, new: NewMemory | None = None) -> bool:
        """Begin a stepped run of ``new`` (default: the form's memory)."""
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
            run, policy = await self._runner.run(_begin, session, memory)
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
        self._paused = True
        self.empty_state.clear()
        for panel in self.panels.values():
            panel.clear()
        self._mark_stages()
        self.status_label.setText(f"Run {run.incoming_id}: next stage {run.next_stage}")
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
            if stage is Stage.PERSIST:  # the only writing stage: queue behind other writes
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
        self.show_report(report)
        if report.stage is Stage.PERSIST and report.data.get("written"):
            session.records_changed.emit(list(report.data["written"]))
        if run.next_stage is None:
            self._paused = True
            result = run.result
            outcome = f"{result.action.value} ({result.reason.value})" if result else "done"
            self.status_label.setText(f"Run {run.incoming_id}: {outcome}")
            self.run_finished.emit(run.incoming_id)
        else:
            self.status_label.setText(f"Next stage: {run.next_stage}")
        self._update_buttons()
        self.stage_done.emit(report)
        return report

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
            self.stage_list.item(i).setText(f"{mark}  {stage.value}")

    def show_report(self, report: StageReport) -> None:
        """Fill the panel of ``report.stage`` and bring it to the front."""
        panel = self.panels[report.stage]
        data = dict(report.data)
        for key in ("content", "normalized"):
            if isinstance(data.get(key), str):
                data[key] = self._text(data[key])
        headline = f"{report.stage.value} · {report.latency_ms:.1f} ms"
        if report.stage is Stage.NORMALIZE:
            headline += f" · hash {str(data.get('content_hash', ''))[:16]}…"
        elif report.stage is Stage.EMBED:
            path = data.get("path")
            self._set_thresholds(semantic=path == "embedding")
            headline += f" · path {path}" + (f" ({data.get('model')})" if path == "embedding"
                                             else "")
        elif report.stage is Stage.CANDIDATES:
            candidates = data.get("candidates") or []
            hit = "hash hit (exact duplicate)" if data.get("hash_hit") else "no hash hit"
            headline += f" · {hit} · {len(candidates)} candidates · method {data.get('method')}"
            assert panel.bars is not None
            panel.bars.set_data([(f"{c['id'][:10]} {c.get('category', '')}",
                                  float(c["similarity"])) for c in candidates[:8]],
                                self.threshold, self.floor)
        elif report.stage is Stage.DECISION:
            decision = data.get("decision") or {}
            conflicts = decision.get("conflicts") or []
            headline += f" · {decision.get('action')} because {decision.get('reason')}"
            if decision.get("similarity") is not None:
                headline += f" (similarity {float(decision['similarity']):.3f})"
            if conflicts:
                headline += " · contradiction: " + "; ".join(
                    f"{c.get('kind')}: {c.get('existing')} vs {c.get('incoming')}"
                    for c in conflicts)
            else:
                headline += " · contradiction check: none found"
        elif report.stage is Stage.APPLY:
            headline += f" · {data.get('action')}"
            assert panel.diff is not None
            rows = record_diff(data.get("before"), data.get("after"))
            panel.diff.setRowCount(len(rows))
            changed = QColor("#bf8700")
            changed.setAlpha(60)
            for r, (name, old, new, is_changed) in enumerate(rows):
                for c, value in enumerate((name, self._text(old) if name == "content" else old,
                                           self._text(new) if name == "content" else new)):
                    item = QTableWidgetItem(value)
                    item.setToolTip(value)
                    if is_changed:
                        item.setBackground(changed)
                    panel.diff.setItem(r, c, item)
            panel.diff.resizeColumnToContents(0)
        elif report.stage is Stage.EVENTS:
            headline += f" · {', '.join(data.get('events') or [])}"
        panel.show_data(headline, data)
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
        return result


def _begin(session: StoreSession, memory: NewMemory) -> tuple[SteppedRun, Any]:
    engine = session.engine
    return engine.stepped(memory), engine.ingest_policy


def _what_if(session: StoreSession, tier: TrustTier, new: float) -> WhatIf:
    engine = session.engine
    old = engine.ingest_policy.threshold(tier, semantic=True)
    return threshold_what_if(engine.store.view.snapshot(), old, new)
