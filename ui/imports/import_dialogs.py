"""Conversation import with a preview, the read-only import summary, and the Imports window.

Issue 20, "workflows a person can trust":

* :func:`preview_conversation_import` names the chosen file's format (an unknown one gets the
  engine's error listing the accepted formats) and shows a :class:`ConversationPreviewDialog`:
  a dry run of the import (every pipeline stage, nothing written) computed on a worker with
  progress and Stop, its counts per decision with samples of each, and the salience cut as a
  control that recomputes it. Only the user's confirmation lets the window run the import.
* :class:`OutcomeTable` is the summary of an import or preview: one read-only row per line,
  sortable, filterable by decision, each line's text beside its target's.
* :class:`ImportsDialog` lists the store's past imports and undoes one, after a confirmation
  that states the true counts (``MemoryEngine.undo_import(dry_run=True)``).

Dialogs never block the event loop: questions are window-modal message boxes that are awaited
(:func:`ask`), engine work goes through the task runner.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import (
    QAbstractTableModel,
    QModelIndex,
    QPersistentModelIndex,
    QSortFilterProxyModel,
    Qt,
)
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QUndoCommand
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QTableView,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import ImportEntry, SalienceCut, UndoPlan
from engine.errors import EngineError
from ui.imports.importing import (
    DECISIONS,
    ConversationInfo,
    ImportSummary,
    LineOutcome,
    detect_conversation,
    import_formats,
    preview_conversation,
)
from ui.records.record_links import elide, quoted
from ui.shared.format import local_time, phrase, reason_sentence, sentence, tag
from ui.shared.session import StoreSession
from ui.shared.tasks import CancelFlag, RequestTokens, TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = [
    "ConversationChoice",
    "ConversationPreviewDialog",
    "ImportCommand",
    "ImportsDialog",
    "OutcomeTable",
    "ask",
    "decision_words",
    "preview_conversation_import",
    "undo_import",
    "undo_question",
    "undo_report",
]

_DECISION_WORDS = {
    "inserted": "stored as new", "merged": "merged into a stored record",
    "updated": "updated a stored record", "deferred": "held for review",
    "not_salient": "left out (not salient)", "skipped": "not stored", "error": "refused",
}


def decision_words(decision: str) -> str:
    """An entry of :data:`ui.imports.importing.DECISIONS` in words ("held for review")."""
    return _DECISION_WORDS.get(decision) or phrase(decision)


async def ask(box: QMessageBox) -> QMessageBox.StandardButton:
    """Show ``box`` window-modal and wait, without a nested event loop, for the button pressed.

    Returns:
        The standard button clicked (``NoButton`` / the escape button when closed).
    """
    answered: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def on_finished(result: int) -> None:
        if not answered.done():
            answered.set_result(result)

    box.finished.connect(on_finished)
    box.open()
    try:
        await answered
    finally:
        box.finished.disconnect(on_finished)
    clicked = box.clickedButton()
    button = box.standardButton(clicked) if clicked is not None \
        else QMessageBox.StandardButton.NoButton
    box.deleteLater()
    return button


# -- the summary table ------------------------------------------------------------------------

_DECISION_ROLE = Qt.ItemDataRole.UserRole + 1
_SORT_ROLE = Qt.ItemDataRole.UserRole + 2
_COLUMNS = ("Line", "Decision", "Memory", "Why", "Compared with")


class OutcomeModel(QAbstractTableModel):
    """An import's lines (:class:`~ui.imports.importing.LineOutcome`) as read-only rows.

    Texts go through ``show`` (the redaction state's rendering) when the model is filled.
    """

    def __init__(self, parent: QWidget | None = None, *,
                 show: Callable[[str], str] | None = None) -> None:
        super().__init__(parent)
        self._show = show or (lambda text: text)
        self._outcomes: list[LineOutcome] = []
        # a row's words, made when the row is first shown or sorted on (an import of 10,000
        # lines would otherwise word every line on the GUI thread before the table appears)
        self._words: dict[int, tuple[str, str, str, str, str]] = {}

    def set_outcomes(self, outcomes: Sequence[LineOutcome]) -> None:
        """Show ``outcomes`` (in their order; the view sorts)."""
        self.beginResetModel()
        self._outcomes = list(outcomes)
        self._words = {}
        self.endResetModel()

    def _row(self, row: int) -> tuple[LineOutcome, tuple[str, str, str, str, str]]:
        outcome = self._outcomes[row]
        cells = self._words.get(row)
        if cells is None:
            cells = self._words[row] = self._cells(outcome)
        return outcome, cells

    def _cells(self, outcome: LineOutcome) -> tuple[str, str, str, str, str]:
        why = sentence(reason_sentence(outcome.reason)) if outcome.reason else ""
        return (str(outcome.line), sentence(decision_words(outcome.decision)),
                self._show(outcome.text), why, self._show(outcome.target_text))

    def outcome(self, row: int) -> LineOutcome:
        """The outcome shown in ``row`` (model order)."""
        return self._outcomes[row]

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._outcomes)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return _COLUMNS[section]
        return None

    def flags(self, index: QModelIndex | QPersistentModelIndex) -> Qt.ItemFlag:
        # issue 20: the summary is a record of what happened, never an editor
        return Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable

    def data(self, index: QModelIndex | QPersistentModelIndex,
             role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        column, role = index.column(), int(role)
        if role == _DECISION_ROLE:  # the decision filter: no words needed
            return self._outcomes[index.row()].decision
        if role == _SORT_ROLE and column in (0, 1):
            outcome = self._outcomes[index.row()]
            if column == 0:
                return outcome.line
            return DECISIONS.index(outcome.decision) if outcome.decision in DECISIONS \
                else len(DECISIONS)
        outcome, cells = self._row(index.row())
        if role == Qt.ItemDataRole.DisplayRole:
            text = cells[column]
            if column == 2:
                return elide(text, 90)
            if column == 4:
                return quoted(text, 70) if text else ""
            return text
        if role == Qt.ItemDataRole.ToolTipRole:
            if column == 1:
                return f"{cells[1]}\n({outcome.action})"
            if column == 3 and outcome.reason:
                return f"{cells[3]}\n({outcome.reason})"
            return cells[column] or None
        if role == _DECISION_ROLE:
            return outcome.decision
        if role == _SORT_ROLE:
            if column == 0:
                return outcome.line
            if column == 1:
                return DECISIONS.index(outcome.decision) if outcome.decision in DECISIONS \
                    else len(DECISIONS)
            return cells[column].casefold()
        return None


class OutcomeTable(QWidget):
    """The read-only summary of an import or a preview: sortable, filterable by decision.

    Each row is one input line: its number, its decision in words, its text and the text of
    the stored record it was compared with (merged into, updated, held for review against).
    Summaries are at most a file's lines (thousands), so Qt's sort/filter proxy is fine here.
    """

    def __init__(self, parent: QWidget | None = None, *,
                 show: Callable[[str], str] | None = None) -> None:
        super().__init__(parent)
        self.model = OutcomeModel(self, show=show)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(_SORT_ROLE)
        self.proxy.setFilterRole(_DECISION_ROLE)
        self.proxy.setFilterKeyColumn(1)
        self.decision = QComboBox(self)
        self.decision.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.decision.currentIndexChanged.connect(self._on_decision_changed)
        self.view = QTableView(self)
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setWordWrap(False)
        self.view.setAlternatingRowColors(True)
        self.view.verticalHeader().hide()
        self.view.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.view.verticalHeader().setDefaultSectionSize(self.fontMetrics().lineSpacing() + 8)
        header = self.view.horizontalHeader()
        header.setStretchLastSection(True)
        header.resizeSection(0, 60)
        header.resizeSection(1, 160)
        header.resizeSection(2, 320)
        header.resizeSection(3, 220)
        top = QHBoxLayout()
        top.addWidget(QLabel("Show:", self))
        top.addWidget(self.decision)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addWidget(self.view, 1)
        self.set_summary(None)

    def set_summary(self, summary: ImportSummary | None) -> None:
        """Show ``summary``'s lines (None: empty), the filter back on every decision.

        The lines arrive in line order, which is the order the header shows (Line, ascending):
        the proxy is left unsorted, so filling the table does not sort thousands of rows on the
        GUI thread (10,000 lines: ~400 ms); a click on a header sorts as usual.
        """
        header = self.view.horizontalHeader()
        self.proxy.sort(-1)  # no sort while the rows are replaced
        self.model.set_outcomes(summary.outcomes if summary is not None else ())
        blocked = header.blockSignals(True)  # the indicator alone; the view would sort again
        header.setSortIndicator(0, Qt.SortOrder.AscendingOrder)
        header.blockSignals(blocked)
        counts = summary.decisions if summary is not None else {d: 0 for d in DECISIONS}
        total = sum(counts.values())
        self.decision.blockSignals(True)
        self.decision.clear()
        self.decision.addItem(f"Every line ({total:,})", "")
        for decision in DECISIONS:
            if counts[decision]:
                self.decision.addItem(
                    f"{sentence(decision_words(decision))} ({counts[decision]:,})", decision)
        self.decision.setCurrentIndex(0)
        self.decision.blockSignals(False)
        self._on_decision_changed(0)

    def show_decision(self, decision: str) -> None:
        """Show only the lines with ``decision`` ("" for every line)."""
        index = self.decision.findData(decision)
        self.decision.setCurrentIndex(max(0, index))

    def visible_outcomes(self) -> list[LineOutcome]:
        """The lines shown, in the order shown."""
        return [self.model.outcome(self.proxy.mapToSource(self.proxy.index(row, 0)).row())
                for row in range(self.proxy.rowCount())]

    def _on_decision_changed(self, _index: int) -> None:
        decision = self.decision.currentData()
        self.proxy.setFilterFixedString(decision or "")


# -- the preview ------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ConversationChoice:
    """What the user confirmed in the preview: whose memories, and which turns to keep."""

    agent_id: str
    keep: SalienceCut


_SAMPLES = 5  # lines shown per decision in the preview
_KEEP_CHOICES = (("default", "Salient turns (the default)"), ("all", "Every turn"),
                 ("top", "The top turns by salience:"))


class ConversationPreviewDialog(QDialog):
    """What importing a conversation would do, before anything is written.

    The preview is a dry run of the very import (:func:`ui.imports.importing.preview_conversation`)
    on a worker; changing the salience cut or the agent recomputes it (an older run is
    stopped and its result dropped). Import is offered once a preview is shown, and the
    dialog is accepted with :attr:`choice` the settings that preview was made with.

    Signals:
        preview_shown(object): A finished (or stopped) preview is shown (its ImportSummary).
    """

    preview_shown = QtSignal(object)

    def __init__(self, path: Path, info: ConversationInfo, session: StoreSession,
                 runner: TaskRunner, parent: QWidget | None = None, *,
                 show: Callable[[str], str] | None = None, agent_id: str = "assistant") -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Import {path.name}")
        self.setMinimumSize(560, 420)  # explicit: the layout never grows the window
        self.resize(900, 620)
        self._path = path
        self._session = session
        self._runner = runner
        self._show = show or (lambda text: text)
        self._tokens = RequestTokens()
        self._flag = CancelFlag()
        self._running = False
        self.summary: ImportSummary | None = None
        self.choice: ConversationChoice | None = None

        self.header = QLabel(
            f"<b>{html.escape(path.name)}</b>: {html.escape(info.label)}, "
            f"{count_of(info.messages, 'message')} ({count_of(info.turns, 'turn')} to "
            "remember). Nothing is written until you press Import.", self)
        self.header.setWordWrap(True)
        self.agent = QLineEdit(agent_id, self)
        self.agent.setToolTip("The agent the imported memories belong to")
        self.agent.editingFinished.connect(self._on_settings_changed)
        self.keep = QComboBox(self)
        for mode, words in _KEEP_CHOICES:
            self.keep.addItem(words, mode)
        self.keep.setToolTip("Which turns become memories: the salient ones (the default cut "
                             "of the salience selection), every turn, or the top share by the "
                             "same salience score")
        self.percent = QSpinBox(self)
        self.percent.setRange(1, 100)
        self.percent.setValue(50)
        self.percent.setSuffix(" %")
        self.percent.setEnabled(False)
        self.keep.currentIndexChanged.connect(self._on_keep_changed)
        self.percent.valueChanged.connect(self._on_settings_changed)
        cut = QHBoxLayout()
        cut.addWidget(self.keep)
        cut.addWidget(self.percent)
        cut.addStretch(1)
        form = QFormLayout()
        form.addRow("Agent:", self.agent)
        form.addRow("Keep:", cut)

        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        self.bar = QProgressBar(self)
        self.stop_button = QPushButton("Stop preview", self)
        self.stop_button.clicked.connect(self.stop_preview)
        progress = QHBoxLayout()
        progress.addWidget(self.bar, 1)
        progress.addWidget(self.stop_button)
        self.counts = QLabel("", self)
        self.counts.setWordWrap(True)
        self.samples = QTreeWidget(self)
        self.samples.setColumnCount(4)
        self.samples.setHeaderLabels(["Decision / message", "Memory", "Why", "Compared with"])
        self.samples.setRootIsDecorated(True)
        self.samples.setUniformRowHeights(True)
        self.samples.header().resizeSection(0, 220)
        self.samples.header().resizeSection(1, 330)
        self.samples.header().resizeSection(2, 130)
        self.buttons = QDialogButtonBox(self)
        self.import_button = self.buttons.addButton("Import",
                                                    QDialogButtonBox.ButtonRole.AcceptRole)
        # room for "Import 10,000 memories" from the start: the button never jumps
        self.import_button.setMinimumWidth(
            self.import_button.fontMetrics().horizontalAdvance("Import 10,000 memories") + 24)
        self.buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._on_import_clicked)
        self.buttons.rejected.connect(self.reject)

        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addLayout(form)
        layout.addWidget(self.status)
        layout.addLayout(progress)
        layout.addWidget(self.counts)
        layout.addWidget(self.samples, 1)
        layout.addWidget(self.buttons)
        # the labels keep their room from the start: messages appearing never resize the dialog
        for label in (self.status, self.counts):
            label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
            label.setMinimumHeight(2 * label.fontMetrics().lineSpacing())
        self._set_running(False)

    @property
    def running(self) -> bool:
        """True while a preview is being computed."""
        return self._running

    def current_choice(self) -> ConversationChoice | None:
        """The agent and cut the controls show (None while the agent is empty)."""
        agent = self.agent.text().strip()
        if not agent:
            return None
        mode = str(self.keep.currentData())
        keep = SalienceCut("top", float(self.percent.value())) if mode == "top" \
            else SalienceCut(mode)
        return ConversationChoice(agent, keep)

    def start_preview(self) -> asyncio.Task[None]:
        """Compute the preview for the controls' settings (stopping one in progress)."""
        return spawn(self._preview())

    def stop_preview(self) -> None:
        """Stop the preview in progress (what it decided so far is shown)."""
        if self._running:
            self._flag.set()
            self.stop_button.setEnabled(False)
            self.status.setText("Stopping the preview…")

    async def _preview(self) -> None:
        choice = self.current_choice()
        if choice is None:
            self.status.setText("Name the agent the memories belong to.")
            self.import_button.setEnabled(False)
            return
        self._flag.set()  # an older run stops at its next memory; its result is dropped
        self._flag = flag = CancelFlag()
        token = self._tokens.next_token()
        self._set_running(True)
        self.summary = None
        self.status.setText(f"Previewing: keeping {choice.keep.describe()}…")
        self.bar.setRange(0, 0)
        session = self._session

        def on_progress(done: int, total: int) -> None:
            if self._tokens.is_current(token) and self._running:
                self.bar.setRange(0, max(1, total))
                self.bar.setValue(done)

        progress = self._runner.progress_relay(on_progress)
        try:
            if not await session.wait_indexed():
                raise EngineError(session.indexing_error or "the store's records were not read")
            summary: ImportSummary = await self._runner.run(
                preview_conversation, session.engine, self._path, agent_id=choice.agent_id,
                keep=choice.keep, progress=progress, cancelled=flag.is_set)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self._set_running(False)
                self.import_button.setEnabled(False)
                self.status.setText(f"The preview failed: {exc}")
            return
        if not self._tokens.is_current(token):
            return
        self._set_running(False)
        self._show_summary(summary, choice)

    def _show_summary(self, summary: ImportSummary, choice: ConversationChoice) -> None:
        self.summary = summary
        self.choice = choice
        counts = summary.decisions
        decided = len(summary.outcomes)
        if summary.cancelled:
            self.status.setText(f"Preview stopped after {count_of(decided, 'message')}: the "
                                "counts cover those. Nothing was written.")
        else:
            self.status.setText(f"Preview keeping {choice.keep.describe()}: what the import "
                                f"would do with {count_of(decided, 'message')}. Nothing was "
                                "written.")
            self.bar.setRange(0, 1)
            self.bar.setValue(1)
        self.counts.setText("   ".join(f"{sentence(decision_words(d))}: {counts[d]:,}"
                                       for d in DECISIONS if counts[d] or d in
                                       ("inserted", "merged", "not_salient")))
        self.samples.clear()
        for decision in DECISIONS:
            if not counts[decision]:
                continue
            group = QTreeWidgetItem(self.samples, [
                f"{sentence(decision_words(decision))} ({counts[decision]:,})"])
            group.setData(0, Qt.ItemDataRole.UserRole, decision)
            for outcome in summary.samples(decision, _SAMPLES):
                text, target = self._show(outcome.text), self._show(outcome.target_text)
                why = sentence(reason_sentence(outcome.reason)) if outcome.reason else ""
                item = QTreeWidgetItem(group, [f"Message {outcome.line}", elide(text, 80),
                                               tag(outcome.reason) if outcome.reason else "",
                                               quoted(target, 60) if target else ""])
                item.setToolTip(1, text)
                item.setToolTip(2, f"{why}\n({outcome.reason})" if why else "")
                if target:
                    item.setToolTip(3, target)
            if counts[decision] > _SAMPLES:
                QTreeWidgetItem(group, [f"… and {counts[decision] - _SAMPLES:,} more"])
            group.setExpanded(True)
        written = summary.written + counts["deferred"]
        self.import_button.setText(f"Import {count_of(written, 'memory')}" if written
                                   else "Import")
        self.import_button.setEnabled(not summary.cancelled or decided > 0)
        self.preview_shown.emit(summary)

    def _set_running(self, running: bool) -> None:
        self._running = running
        self.stop_button.setEnabled(running)
        self.import_button.setEnabled(not running and self.summary is not None)

    def _on_keep_changed(self, _index: int) -> None:
        self.percent.setEnabled(self.keep.currentData() == "top")
        self._on_settings_changed()

    def _on_settings_changed(self) -> None:
        choice = self.current_choice()
        if choice is not None and choice == self.choice and not self._running:
            return  # the shown preview is for these settings already
        self.start_preview()

    def _on_import_clicked(self) -> None:
        if self.summary is None or self.choice is None or self._running:
            return
        self.accept()

    def done(self, result: int) -> None:
        """Closing stops a preview still running (its worker ends at its next memory)."""
        self._flag.set()
        self._tokens.next_token()
        self._running = False
        super().done(result)


async def preview_conversation_import(
        parent: QWidget, session: StoreSession, runner: TaskRunner, path: Path, *,
        show: Callable[[str], str] | None = None,
        opened: Callable[[ConversationPreviewDialog], None] | None = None,
) -> ConversationChoice | None:
    """Name ``path``'s format, preview its import and wait for the user's decision.

    A file in no known format gets the engine's message (it lists the accepted formats) in a
    warning titled for what happened. ``opened`` receives the preview dialog once shown.

    Returns:
        The confirmed agent and salience cut, or None when the user cancelled or the file is
        not a conversation.
    """
    try:
        info = await runner.run(detect_conversation, path)
    except EngineError as exc:
        box = QMessageBox(QMessageBox.Icon.Warning, "Not a conversation Mnemoscope reads",
                          f"{path.name} cannot be imported as a conversation. Nothing was "
                          "written.", QMessageBox.StandardButton.Ok, parent)
        box.setInformativeText(str(exc))
        await ask(box)
        return None
    dialog = ConversationPreviewDialog(path, info, session, runner, parent, show=show)
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    closed: asyncio.Future[ConversationChoice | None] = \
        asyncio.get_running_loop().create_future()

    def on_finished(result: int) -> None:
        # read now: the dialog deletes itself once closed
        if not closed.done():
            closed.set_result(dialog.choice if result == QDialog.DialogCode.Accepted else None)

    def on_destroyed() -> None:
        # destroyed with its window, without a finished signal: nothing was confirmed
        if not closed.done():
            closed.set_result(None)

    dialog.finished.connect(on_finished)
    dialog.destroyed.connect(on_destroyed)
    dialog.open()
    if opened is not None:
        opened(dialog)
    dialog.start_preview()
    return await closed


# -- the Imports window -----------------------------------------------------------------------

_KINDS = {"conversation": "conversation", "jsonl": "JSONL memories",
          "adopt": "records of another store", "consolidation": "consolidation"}


def _undo_parts(plan: UndoPlan, *, done: bool) -> list[str]:
    counts = plan.counts
    restored = "merged or updated one" if counts["restored"] == 1 else "merged or updated ones"
    steps = (("remove", "removed", count_of(counts["deleted"], "inserted record")),
             ("restore", "restored", f"{counts['restored']:,} {restored}"),
             ("withdraw", "withdrawn", count_of(counts["withdrawn"], "pending review item")))
    return [f"{what} {verb_done}" if done else f"{verb} {what}"
            for (verb, verb_done, what), n in zip(
                steps, (counts["deleted"], counts["restored"], counts["withdrawn"]), strict=True)
            if n]


def _joined(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def undo_question(plan: UndoPlan) -> str:
    """The confirmation of an undo, with the true counts ("Remove 362 inserted records and
    restore 12 merged or updated ones?")."""
    parts = _undo_parts(plan, done=False)
    if not parts:
        return "This import left nothing to take back. Mark it undone?"
    return sentence(_joined(parts)) + "?"


def undo_report(plan: UndoPlan) -> str:
    """What an undo did ("Import undone: 362 inserted records removed.")."""
    parts = _undo_parts(plan, done=True)
    return f"Import undone: {_joined(parts)}." if parts else "Import undone: nothing to take back."


def _entry_state(entry: ImportEntry) -> str:
    if entry.undone_at is not None:
        return f"undone {local_time(entry.undone_at)}"
    if entry.finished_at is None:
        return "stopped part way"
    return "done"


def _entry_counts(entry: ImportEntry) -> str:
    found = [(action, n) for action, n in entry.counts.items() if n]
    return ", ".join(f"{phrase(action)} {n:,}" for action, n in found) or "nothing"


class ImportsDialog(QDialog):
    """The store's past imports (newest first), each undoable as one step.

    Signals:
        undone(object): An import was undone (its :class:`~engine.ingest.imports.UndoPlan`).
    """

    undone = QtSignal(object)

    def __init__(self, session: StoreSession, runner: TaskRunner,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Imports")
        self.setMinimumSize(560, 300)  # explicit: the layout never grows the window
        self.resize(900, 420)
        self._session = session
        self._runner = runner
        self.entries: list[ImportEntry] = []
        self.label = QLabel("Reading the import log…", self)
        self.label.setWordWrap(True)
        self.label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.label.setMinimumHeight(2 * self.label.fontMetrics().lineSpacing())
        self.table = QTreeWidget(self)
        self.table.setColumnCount(6)
        self.table.setHeaderLabels(["When", "File", "Format", "Agent", "Outcome", "State"])
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setAlternatingRowColors(True)
        self.table.currentItemChanged.connect(self._on_current_changed)
        self.undo_button = QPushButton("Undo import…", self)
        self.undo_button.setToolTip("Remove what the import stored and restore the records it "
                                    "merged into or updated (asks first, with the counts)")
        self.undo_button.clicked.connect(self._on_undo_clicked)
        self.refresh_button = QPushButton("Refresh", self)
        self.refresh_button.clicked.connect(lambda: self.refresh())
        close = QPushButton("Close", self)
        close.clicked.connect(self.accept)
        buttons = QHBoxLayout()
        buttons.addWidget(self.undo_button)
        buttons.addWidget(self.refresh_button)
        buttons.addStretch(1)
        buttons.addWidget(close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.label)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        self._busy = False
        self._update_buttons()

    def refresh(self) -> asyncio.Task[None]:
        """Read the import log again (on a worker)."""
        return spawn(self._load())

    async def _load(self) -> None:
        try:
            entries: list[ImportEntry] = await self._runner.run(self._session.engine.imports,
                                                                200)
        except EngineError as exc:
            self.label.setText(f"Cannot read the import log: {exc}")
            return
        formats = await self._runner.run(import_formats, entries)
        current = self.selected()
        self.entries = entries
        self.table.clear()
        for entry in entries:
            item = QTreeWidgetItem(self.table, [
                local_time(entry.started_at), Path(entry.path).name,
                formats.get(entry.id) or _KINDS.get(entry.kind, phrase(entry.kind)),
                entry.agent_id or "",
                _entry_counts(entry), _entry_state(entry)])
            item.setToolTip(1, entry.path)
            item.setData(0, Qt.ItemDataRole.UserRole, entry.id)
            if current is not None and entry.id == current.id:
                self.table.setCurrentItem(item)
        first = self.table.topLevelItem(0)
        if first is not None and self.table.currentItem() is None:
            self.table.setCurrentItem(first)
        for column in range(self.table.columnCount() - 1):
            self.table.resizeColumnToContents(column)
        self.label.setText(f"{count_of(len(entries), 'import')} into this store, newest "
                           "first. Undoing one removes what it stored and restores what it "
                           "merged into." if entries else "No imports into this store yet.")
        self._update_buttons()

    def selected(self) -> ImportEntry | None:
        """The import of the current row."""
        item = self.table.currentItem()
        if item is None:
            return None
        wanted = item.data(0, Qt.ItemDataRole.UserRole)
        return next((e for e in self.entries if e.id == wanted), None)

    def _on_current_changed(self, *_args: object) -> None:
        self._update_buttons()

    def _update_buttons(self) -> None:
        entry = self.selected()
        self.undo_button.setEnabled(not self._busy and entry is not None
                                    and entry.undone_at is None
                                    and not self._session.read_only)

    def _on_undo_clicked(self) -> None:
        entry = self.selected()
        if entry is not None:
                spawn(self.undo(entry.id))

    async def undo(self, import_id: str) -> UndoPlan | None:
        """Undo the import ``import_id`` after the confirmation (:func:`undo_import`).

        Returns:
            What was done, or None when the user declined or the undo failed (says why).
        """
        self._busy = True
        self._update_buttons()
        try:
            done = await undo_import(self, self._session, self._runner, import_id,
                                     status=self.label.setText)
        except EngineError as exc:
            self.label.setText(f"The import was not undone: {exc}")
            return None
        finally:
            self._busy = False
            self._update_buttons()
        if done is None:
            return None
        self.undone.emit(done)
        await self._load()
        self.label.setText(undo_report(done))
        return done


async def undo_import(parent: QWidget, session: StoreSession, runner: TaskRunner,
                      import_id: str, *,
                      status: Callable[[str], None] | None = None) -> UndoPlan | None:
    """Take an import back as one step, after a confirmation with the true counts.

    The plan (``undo_import(dry_run=True)``) is read on a worker, the question names what it
    removes and restores, and only a Yes writes (through the session's serialized writes).
    The views are told which records changed.

    Returns:
        What was done, or None when the user declined.

    Raises:
        EngineError: the plan or the undo failed (nothing, or the engine's own partial state,
            as ``MemoryEngine.undo_import`` says).
    """
    plan: UndoPlan = await runner.run(session.engine.undo_import, import_id, dry_run=True)
    box = QMessageBox(QMessageBox.Icon.Question, "Undo import", undo_question(plan),
                      QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No, parent)
    box.setDefaultButton(QMessageBox.StandardButton.No)
    if plan.conflicts:
        box.setInformativeText(
            f"{count_of(len(plan.conflicts), 'record')} changed since the import will be left "
            "as they are: " + "; ".join(why for _id, why in plan.conflicts[:3]))
    if await ask(box) != QMessageBox.StandardButton.Yes:
        return None
    if status is not None:
        status("Undoing the import…")
    done: UndoPlan = await session.run_write(session.engine.undo_import, import_id)
    session.records_changed.emit([r.id for r in (*done.delete, *done.restore)])
    return done


class ImportCommand(QUndoCommand):
    """Edit → Undo right after an import: the import as one step of the session's undo stack.

    Undoing it asks first with the true counts (:func:`undo_import`) and takes the import back
    through the import log, as the Imports window does. It has no redo (doing the import again
    is a new import): the command marks itself obsolete, so the stack drops it; when the user
    declines, a fresh command is pushed back (which clears the redo entries above it).
    """

    def __init__(self, parent: QWidget, session: StoreSession, runner: TaskRunner,
                 import_id: str, text: str) -> None:
        super().__init__(text)
        self._parent = parent
        self._session = session
        self._runner = runner
        self.import_id = import_id

    def undo(self) -> None:
        self.setObsolete(True)
        spawn(_undo_from_stack(self._parent, self._session, self._runner, self.import_id,
                               self.text()))

    def redo(self) -> None:
        """Nothing: the import is in the store when the command is pushed."""


async def _undo_from_stack(parent: QWidget, session: StoreSession, runner: TaskRunner,
                           import_id: str, text: str) -> None:
    try:
        done = await undo_import(parent, session, runner, import_id)
    except EngineError as exc:
        session.failed.emit(f"The import was not undone: {exc}")
        done = None
    if done is None:
        session.undo_stack.push(ImportCommand(parent, session, runner, import_id, text))
