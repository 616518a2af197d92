"""The Fate view: "why did this memory disappear?" for any record id (issue 9).

The story comes from :func:`engine.fate.record_fate` on a worker (stale answers dropped by
token); the last known content comes from the edit history and is rendered through
:meth:`ui.redaction.Redaction.show`, like every other text of the view.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.errors import EngineError
from engine.fate import RecordFate, mass_retirements, record_fate
from engine.memory_engine import MemoryEngine
from engine.records import format_timestamp
from ui.empty_state import EmptyState
from ui.redaction import Redaction
from ui.session import StoreSession
from ui.tasks import RequestTokens, TaskRunner, spawn

__all__ = ["FateView", "load_fate"]

_STATUS_COLOURS = {"alive": "#1a7f37", "merged": "#0969da", "compacted": "#8250df",
                   "pruned": "#bc4c00", "deleted": "#cf222e", "expired": "#bc4c00",
                   "retention": "#bc4c00", "skipped": "#0969da", "deferred": "#9a6700"}


@dataclass(frozen=True, slots=True)
class LoadedFate:
    """What the worker hands back: the fate, the last known content, global warnings."""

    fate: RecordFate
    content: str
    mass_batches: int


def load_fate(engine: MemoryEngine, record_id: str, mass_limit: int) -> LoadedFate:
    """Worker: the fate of ``record_id`` and how many mass retirements the store holds."""
    fate = record_fate(engine, record_id, mass_limit=mass_limit)
    return LoadedFate(fate, fate.content, len(mass_retirements(engine, mass_limit)))


class FateView(QWidget):
    """Enter a record id, see its story; jump to the survivor or the summary.

    Signals:
        open_record(str): The user asked to open a (live) record in the Records view.
    """

    open_record = Signal(str)

    def __init__(self, runner: TaskRunner, redaction: Redaction,
                 parent: QWidget | None = None, *, mass_limit: int = 20) -> None:
        super().__init__(parent)
        self._runner = runner
        self._redaction = redaction
        self._session: StoreSession | None = None
        self._tokens = RequestTokens()
        self._loaded: LoadedFate | None = None
        self.mass_limit = mass_limit
        self.id_edit = QLineEdit(self)
        self.id_edit.setPlaceholderText("record id (alive, merged, deleted, pruned, compacted…)")
        self.id_edit.returnPressed.connect(self._on_show_clicked)
        self.show_button = QPushButton("Show fate", self)
        self.show_button.clicked.connect(self._on_show_clicked)
        self.status_label = QLabel("Enter a record id to see what happened to it.", self)
        self.status_label.setTextFormat(Qt.TextFormat.PlainText)
        self.content_label = QLabel("", self)
        self.content_label.setWordWrap(True)
        self.content_label.setTextFormat(Qt.TextFormat.PlainText)
        self.forecast_label = QLabel("", self)
        self.warning_label = QLabel("", self)
        self.warning_label.setWordWrap(True)
        self.warning_label.setStyleSheet("color: #cf222e; font-weight: 600;")
        self.open_button = QPushButton("Open survivor", self)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.open_button.hide()
        self.steps = QTreeWidget(self)
        self.steps.setHeaderLabels(["when", "what", "story"])
        self.steps.setRootIsDecorated(False)
        self.steps.header().setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        self.steps.itemDoubleClicked.connect(self._on_step_double_clicked)
        top = QHBoxLayout()
        top.addWidget(self.id_edit, 1)
        top.addWidget(self.show_button)
        status = QHBoxLayout()
        status.addWidget(self.status_label, 1)
        status.addWidget(self.open_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addLayout(status)
        layout.addWidget(self.content_label)
        layout.addWidget(self.forecast_label)
        layout.addWidget(self.warning_label)
        layout.addWidget(self.steps, 1)
        self.empty_state = EmptyState(self.steps, "fate")
        self._show_empty_state()
        redaction.changed.connect(self._on_redaction_changed)

    @property
    def fate(self) -> RecordFate | None:
        """The fate shown, if any."""
        return None if self._loaded is None else self._loaded.fate

    def set_session(self, session: StoreSession | None) -> None:
        """Follow the open store (None: nothing open)."""
        self._session = session
        self._tokens.next_token()
        self._loaded = None
        self.steps.clear()
        self.status_label.setText("Enter a record id to see what happened to it.")
        for label in (self.content_label, self.forecast_label, self.warning_label):
            label.setText("")
        self.open_button.hide()
        self._show_empty_state()

    def _show_empty_state(self) -> None:
        if self._loaded is not None:
            self.empty_state.clear()
            return
        self.empty_state.show_message(
            "Pick a record…", "…by entering its id above (the Records view shows it in the "
            "detail title). Its story shows here step by step: created, merged into another, "
            "superseded, deleted, pruned or compacted, and where its content lives on.")

    def show_fate(self, record_id: str) -> None:
        """Look ``record_id`` up (on a worker) and show its story."""
        self.id_edit.setText(record_id)
        spawn(self.load(record_id))

    async def load(self, record_id: str) -> RecordFate | None:
        """Load and show the fate of ``record_id``; None when no store is open or stale."""
        session = self._session
        if session is None or not record_id:
            return None
        token = self._tokens.next_token()
        self.status_label.setText(f"Reading the ledger for {record_id}…")
        try:
            loaded = await self._runner.run(load_fate, session.engine, record_id,
                                            self.mass_limit)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self.status_label.setText(f"Cannot read the fate of {record_id}: {exc}")
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        self._loaded = loaded
        self._show_empty_state()
        self._render()
        return loaded.fate

    def _render(self) -> None:
        loaded = self._loaded
        if loaded is None:
            return
        fate, show = loaded.fate, self._redaction.show
        survivor = f" → {fate.survivor_id}" if fate.survivor_id else ""
        self.status_label.setText(f"{fate.record_id}: {fate.status}{survivor}")
        colour = _STATUS_COLOURS.get(fate.status, "")
        self.status_label.setStyleSheet(f"color: {colour}; font-weight: 600;" if colour else "")
        self.content_label.setText(f"Last known content: {show(loaded.content)}"
                                   if loaded.content else "")
        self.content_label.setToolTip(show(loaded.content))
        forecast = fate.forecast
        if forecast is None:
            self.forecast_label.setText("")
        else:
            when = ("already below it — the next normal prune retires it"
                    if forecast.already_below else
                    f"falls below it on {format_timestamp(forecast.below_at)}"
                    if forecast.below_at is not None else "never falls below it")
            self.forecast_label.setText(
                f"Decayed importance {forecast.decayed_now:.3f} (stored {forecast.importance:.2f})"
                f"; retrieval floor {forecast.floor}: at the current decay it {when}.")
        warnings = [f"⚠ {w.actor} retired {w.count} records at once (batch {w.batch[:12]}, "
                    f"{format_timestamp(w.ts)}) — more than {self.mass_limit}."
                    for w in fate.warnings]
        if loaded.mass_batches and not warnings:
            warnings.append(f"{loaded.mass_batches} batch(es) in this store retired more than "
                            f"{self.mass_limit} records at once.")
        self.warning_label.setText("\n".join(warnings))
        self.open_button.setVisible(fate.survivor_id is not None or fate.status == "alive")
        self.open_button.setText("Open survivor" if fate.survivor_id else "Open record")
        self.steps.clear()
        for step in fate.steps:
            item = QTreeWidgetItem([format_timestamp(step.ts) or "", step.kind, show(step.text)])
            item.setToolTip(2, show(step.text))
            item.setData(0, Qt.ItemDataRole.UserRole, step.related_id)
            self.steps.addTopLevelItem(item)
        for column in (0, 1):
            self.steps.resizeColumnToContents(column)

    def _on_redaction_changed(self, _on: bool) -> None:
        self._render()

    def _on_show_clicked(self) -> None:
        spawn(self.load(self.id_edit.text().strip()))

    def _on_open_clicked(self) -> None:
        fate = self.fate
        if fate is not None:
            self.open_record.emit(fate.survivor_id or fate.record_id)

    def _on_step_double_clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        related = item.data(0, Qt.ItemDataRole.UserRole)
        if isinstance(related, str) and related:
            self.show_fate(related)
