"""Store → Consolidate Duplicates…: the consolidation pass, seen first, then stepped (issue 23).

The engine's pass (``MemoryEngine.consolidate``, docs/ingest.md "Consolidation") merges stored
near-duplicates by the ingest rules. Run blind, it rewrites records a person never saw, so the
dialog runs it as a **dry run** first (on a worker, with progress and Cancel; nothing written)
and lists the pairs it would act on: both texts, the similarity, and the decision in words —
which text survives a merge and why (seed 004 keeps the more important text), or why a pair
goes to the review queue instead (a possible contradiction, the gray zone…).

Then the person **steps** through the list — Apply, Skip or Defer to review, one pair at a time
(keys A, S, D) — or applies every remaining pair at once. Each apply is one
``MemoryEngine.apply_consolidation`` call, written against the records as they are by then (a
record changed since the dry run is refused with the reason, nothing half-written), and one
:class:`ConsolidationCommand` on the session's undo stack: Edit → Undo takes it back through the
import log (``undo_import``), Redo applies the same steps again. Every write is followed by the
session's ``records_changed``, which refreshes the records browser and the Review queue.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from PySide6.QtCore import Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QKeySequence, QShortcut, QUndoCommand
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDialog,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import (
    Action,
    Cancelled,
    ConsolidationReport,
    ConsolidationStep,
    EngineError,
    UndoPlan,
)
from ui.shared.empty_state import EmptyState
from ui.shared.format import (
    elide,
    number,
    quoted,
    reason_sentence,
    sentence,
    similarity_phrase,
    tag,
    thresholds_phrase,
)
from ui.shared.redaction import Redaction
from ui.shared.session import UNDO_BATCH, StoreSession
from ui.shared.tasks import CancelFlag, RequestTokens, TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = ["ConsolidateDialog", "ConsolidationCommand", "decision_sentence", "decision_tag"]

PENDING, MERGED, DEFERRED, SKIPPED = "to decide", "merged", "sent to review", "skipped"
"""The states of a pair in the list (shown in its Status column)."""

_TEXT_LIMIT = 60  # characters of a record's text in a column (the full text is its tool tip)


def decision_tag(step: ConsolidationStep) -> str:
    """A few words for the Decision column: ``merge`` or ``review: may contradict``."""
    if step.action is Action.MERGED:
        return "merge"
    return f"review: {tag(step.reason.value)}"


def decision_sentence(step: ConsolidationStep, show: Callable[[str], str] = str) -> str:
    """The decision as a sentence naming both records by their text.

    A merge says which text survives and why: seed 004 keeps the higher-importance version
    (on a tie, the older record: other records more likely link to it). A deferral says why
    the pair waits for a person (:func:`~ui.shared.format.reason_sentence`).
    """
    kept, other = quoted(show(step.kept.content), 50), quoted(show(step.other.content), 50)
    if step.action is not Action.MERGED:
        held = reason_sentence(step.reason.value, target=step.kept.id,
                               conflicts=[c.to_json() for c in step.conflicts],
                               texts={step.kept.id: show(step.kept.content)})
        return sentence(f"{other}: {held}")
    if step.kept.importance > step.other.importance:
        why = (f"its importance {number(step.kept.importance, decimals=2)} is higher than "
               f"{number(step.other.importance, decimals=2)} (the more important text "
               "survives a merge)")
    elif step.kept.created_at < step.other.created_at:
        why = (f"both have importance {number(step.kept.importance, decimals=2)}: the older "
               "record is kept")
    else:
        why = (f"both have importance {number(step.kept.importance, decimals=2)} and the same "
               "age: either could be kept")
    return (f"Merge: keeps {kept} — {why}. {other} is folded into it (tags, sources, access "
            "counts) and removed.")


@dataclass(slots=True)
class _Row:
    """One pair of the dry run and what the person did with it."""

    step: ConsolidationStep
    command: ConsolidationCommand | None = None
    skipped: bool = False

    @property
    def state(self) -> str:
        if self.command is not None and self.command.applied:
            return DEFERRED if self.command.deferred(self.step) else MERGED
        return SKIPPED if self.skipped else PENDING


class ConsolidationCommand(QUndoCommand):
    """Applied steps of a dry run as one step of the session's undo stack.

    Undo takes the write back through the import log (``undo_import``: the merged-away records
    restored, the kept ones written back, its review items withdrawn); redo applies the same
    steps again (``apply_consolidation`` checks them against the store as it is then). The
    first :meth:`redo` (run by ``QUndoStack.push``) does nothing: the steps are written when
    the command is pushed.
    """

    def __init__(self, session: StoreSession, steps: Sequence[ConsolidationStep],
                 report: ConsolidationReport, text: str) -> None:
        super().__init__(text)
        self._session = session
        self.steps = tuple(steps)
        self.report = report
        self.applied = True

    def deferred(self, step: ConsolidationStep) -> bool:
        """True when ``step`` was written as a review item (not merged)."""
        return any(s.other.id == step.other.id and s.action is Action.DEFERRED
                   for s in self.report.steps)

    def undo(self) -> None:
        self.applied = False
        spawn(self._undo())

    def redo(self) -> None:
        if self.applied:
            return
        self.applied = True
        spawn(self._redo())

    async def _undo(self) -> None:
        session, batch = self._session, self.report.id
        assert batch is not None  # an applied report always has its batch id
        try:
            done: UndoPlan = await session.run_write(session.engine.undo_import, batch,
                                                     batch_size=UNDO_BATCH)
        except EngineError as exc:
            session.failed.emit(f"Undo {self.text()} failed: {exc}")
            return
        session.records_changed.emit([r.id for r in (*done.delete, *done.restore)])
        if done.conflicts:
            session.failed.emit(
                f"Undo {self.text()}: {count_of(len(done.conflicts), 'record')} changed since "
                "were left as they are: " + "; ".join(why for _id, why in done.conflicts[:3]))

    async def _redo(self) -> None:
        session = self._session
        try:
            self.report = await session.run_write(session.engine.apply_consolidation,
                                                  self.steps, batch_size=UNDO_BATCH)
        except EngineError as exc:
            session.failed.emit(f"Redo {self.text()} failed: {exc}")
            return
        session.records_changed.emit(_touched(self.report))


def _touched(report: ConsolidationReport) -> list[str]:
    return list(dict.fromkeys(i for s in report.steps for i in (s.kept.id, s.other.id)))


class ConsolidateDialog(QDialog):
    """The consolidation pass over the open store: a dry run, then stepped or applied at once.

    Call :meth:`start` (or press Dry Run Again) to plan; ``report`` holds the last dry run and
    ``rows`` its pairs with what was done to each.

    Signals:
        applied(object): Pairs were written (the :class:`ConsolidationReport` of the write).
    """

    applied = QtSignal(object)

    def __init__(self, session: StoreSession, runner: TaskRunner,
                 parent: QWidget | None = None, *,
                 redaction: Redaction | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Consolidate Duplicates")
        self.setMinimumSize(640, 360)  # explicit: the layout never grows the window
        self.resize(980, 480)
        self._session = session
        self._runner = runner
        self._show: Callable[[str], str] = redaction.show if redaction is not None else str
        self._tokens = RequestTokens()
        self._flag: CancelFlag | None = None
        self._busy = False
        self.report: ConsolidationReport | None = None
        self.rows: list[_Row] = []

        self.summary = QLabel("", self)
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.summary.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        self.progress = QProgressBar(self)
        self.progress.setTextVisible(True)
        self.cancel_button = QPushButton("Cancel", self)
        self.cancel_button.setToolTip("Stop the dry run (it writes nothing)")
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        progress_row = QHBoxLayout()
        progress_row.addWidget(self.progress, 1)
        progress_row.addWidget(self.cancel_button)

        self.table = QTreeWidget(self)
        self.table.setColumnCount(5)
        self.table.setHeaderLabels(["Decision", "Kept text", "Other text", "Similarity",
                                    "Status"])
        self.table.setRootIsDecorated(False)
        self.table.setUniformRowHeights(True)
        self.table.setAlternatingRowColors(True)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        header = self.table.header()
        header.setStretchLastSection(False)
        # both texts share the room, so every column fits. The others are sized to their
        # contents once per fill (:meth:`_fit_columns`): in ResizeToContents mode every Status
        # change measured every row again (100 rows: ~100 ms on the GUI thread per Apply All)
        for column in (1, 2):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Stretch)
        self.table.currentItemChanged.connect(self._on_current_changed)
        self.empty_state = EmptyState(self.table)
        self.detail = QLabel("", self)
        self.detail.setWordWrap(True)
        self.detail.setTextFormat(Qt.TextFormat.PlainText)
        self.detail.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.detail.setMinimumHeight(3 * self.detail.fontMetrics().lineSpacing())
        self.status = QLabel("", self)
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)

        self.apply_button = QPushButton("Apply", self)
        self.apply_button.setToolTip("Do what the decision says for this pair: merge it, or "
                                     "send it to the review queue (A)")
        self.skip_button = QPushButton("Skip", self)
        self.skip_button.setToolTip("Leave this pair as it is and go to the next (S)")
        self.defer_button = QPushButton("Defer to Review", self)
        self.defer_button.setToolTip("Send this pair to the review queue instead of merging "
                                     "it now (D)")
        self.apply_all_button = QPushButton("Apply All", self)
        self.apply_all_button.setToolTip("Apply every pair still to decide, as one undoable "
                                         "step")
        self.again_button = QPushButton("Dry Run Again", self)
        self.again_button.setToolTip("Compare the stored records again (writes nothing)")
        close = QPushButton("Close", self)
        self.apply_button.clicked.connect(self._on_apply_clicked)
        self.skip_button.clicked.connect(self._on_skip_clicked)
        self.defer_button.clicked.connect(self._on_defer_clicked)
        self.apply_all_button.clicked.connect(self._on_apply_all_clicked)
        self.again_button.clicked.connect(lambda: self.start())
        close.clicked.connect(self.reject)
        for key, slot in (("A", self._on_apply_clicked), ("S", self._on_skip_clicked),
                          ("D", self._on_defer_clicked)):
            shortcut = QShortcut(QKeySequence(key), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)
        buttons = QHBoxLayout()
        for button in (self.apply_button, self.skip_button, self.defer_button):
            buttons.addWidget(button)
        buttons.addSpacing(16)
        buttons.addWidget(self.apply_all_button)
        buttons.addStretch(1)
        buttons.addWidget(self.again_button)
        buttons.addWidget(close)

        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(progress_row)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.detail)
        layout.addWidget(self.status)
        layout.addLayout(buttons)
        # slots of this dialog: Qt disconnects them when the dialog is deleted
        session.undo_stack.indexChanged.connect(self._on_undo_index_changed)
        session.destroyed.connect(self._on_session_destroyed)  # the store was closed
        if redaction is not None:
            redaction.changed.connect(self._on_redaction_changed)
        self._set_progress_visible(False)
        self._update_buttons()

    # -- the dry run ---------------------------------------------------------------------------

    def start(self) -> asyncio.Task[None]:
        """Run the dry run on a worker (the list shows when it is done); Cancel stops it from
        the moment this returns."""
        token = self._tokens.next_token()
        if self._flag is not None:
            self._flag.set()  # a dry run still reading is stale now
        self._flag = CancelFlag()
        return spawn(self._dry_run(token, self._flag))

    async def _dry_run(self, token: int, flag: CancelFlag) -> None:
        """Plan the pass without writing; show the pairs, or why there are none."""
        session = self._session
        self._busy = True
        self.status.setText("")
        self.summary.setText("Comparing the stored records (nothing is written)…")
        self.progress.setRange(0, 0)
        self._set_progress_visible(True)
        self._update_buttons()
        relay = self._runner.progress_relay(self._on_progress)
        try:
            if not await session.read_view("Consolidate Duplicates"):
                raise Cancelled("the store's index was not read")
            report: ConsolidationReport = await self._runner.run(
                session.engine.consolidate, None, dry_run=True, progress=relay,
                cancelled=flag.is_set)
        except Cancelled:
            if self._tokens.is_current(token):
                self._finish_busy()
                self.summary.setText("Dry run cancelled: nothing was compared or written.")
            return
        except EngineError as exc:
            if self._tokens.is_current(token):
                self._finish_busy()
                self.summary.setText(f"The dry run failed: {exc}")
            return
        if not self._tokens.is_current(token):
            return
        self._finish_busy()
        self.report = report
        self.rows = [_Row(step) for step in report.steps]
        self._fill()

    def _on_progress(self, done: int, total: int) -> None:
        if done >= total:  # every record read: the pairs are compared next (no count of it)
            self.progress.setRange(0, 0)
            self.summary.setText(f"Comparing {count_of(total, 'record')} pair by pair "
                                 "(nothing is written)…")
            return
        self.progress.setRange(0, max(1, total))
        self.progress.setValue(done)
        self.progress.setFormat(f"read {done:,} of {count_of(total, 'record')}")

    def _on_cancel_clicked(self) -> None:
        if self._flag is not None:
            self._flag.set()
            self.summary.setText("Cancelling…")

    def _finish_busy(self) -> None:
        self._busy = False
        self._set_progress_visible(False)
        self._update_buttons()

    def _set_progress_visible(self, visible: bool) -> None:
        self.progress.setVisible(visible)
        self.cancel_button.setVisible(visible)

    def _on_redaction_changed(self, _on: bool) -> None:
        """Texts are shown through the redaction: render them again, keeping the selection."""
        index = self.current_index()
        self._fill()
        self._select(index)

    def _on_session_destroyed(self) -> None:
        self.reject()

    def done(self, result: int) -> None:
        """Closing stops a dry run still reading (its result would have nowhere to go)."""
        if self._flag is not None:
            self._flag.set()
        super().done(result)

    # -- the list ------------------------------------------------------------------------------

    def _fill(self) -> None:
        self.table.blockSignals(True)
        self.table.clear()
        for row in self.rows:
            step = row.step
            kept, other = self._show(step.kept.content), self._show(step.other.content)
            path = "meaning (embeddings)" if step.semantic else "shared words (model not ready)"
            item = QTreeWidgetItem([decision_tag(step), elide(kept, _TEXT_LIMIT),
                                    elide(other, _TEXT_LIMIT),
                                    similarity_phrase(step.similarity, step.thresholds),
                                    row.state])
            item.setToolTip(0, decision_sentence(step, self._show))
            item.setToolTip(1, f"{kept}\n\nimportance {number(step.kept.importance)}")
            item.setToolTip(2, f"{other}\n\nimportance {number(step.other.importance)}")
            item.setToolTip(3, f"compared by {path}; {thresholds_phrase(step.thresholds)}")
            self.table.addTopLevelItem(item)
        self.table.blockSignals(False)
        self._fit_columns()
        self._refresh_summary()
        if self.rows:
            self.empty_state.clear()
            self._select(self._next_pending(0))
        else:
            scanned = self.report.scanned if self.report is not None else 0
            self.empty_state.show_message(
                f"No near-duplicates among {count_of(scanned, 'record')}",
                "No two stored records of the same agent, privacy and layer are close enough "
                "to merge or to hold for review (pairs already waiting in the review queue, "
                "or that a person rejected there, are left out).")
            self.detail.setText("")
        self._update_buttons()

    def _fit_columns(self) -> None:
        """Decision and Similarity fit their contents; Status its longest word."""
        for column in (0, 3):
            self.table.resizeColumnToContents(column)
        metrics = self.table.fontMetrics()
        longest = max(metrics.horizontalAdvance(text) for text in
                      ("Status", PENDING, MERGED, DEFERRED, SKIPPED))
        self.table.setColumnWidth(4, longest + 4 * metrics.averageCharWidth())

    def _refresh_summary(self) -> None:
        if self.report is None:
            return
        if not self.rows:
            self.summary.setText(f"Dry run over {count_of(self.report.scanned, 'record')}: "
                                 "nothing to consolidate.")
            return
        merges = sum(r.step.action is Action.MERGED for r in self.rows)
        reviews = len(self.rows) - merges
        states = [r.state for r in self.rows]
        done = [f"{states.count(s):,} {s}" for s in (MERGED, DEFERRED, SKIPPED)
                if states.count(s)]
        self.summary.setText(
            f"{count_of(len(self.rows), 'pair')} among "
            f"{count_of(self.report.scanned, 'record')}: {merges:,} to merge, {reviews:,} to "
            "send to review (dry run: nothing written yet)"
            + (f". Done: {', '.join(done)}." if done else "."))

    def _on_undo_index_changed(self, _index: int) -> None:
        """Undo or redo of an applied pair: its Status follows."""
        for index, row in enumerate(self.rows):
            item = self.table.topLevelItem(index)
            if item is not None and item.text(4) != row.state:
                item.setText(4, row.state)
        self._refresh_summary()
        self._update_buttons()

    def _select(self, index: int) -> None:
        item = self.table.topLevelItem(index) if 0 <= index < len(self.rows) else None
        if item is not None:
            self.table.setCurrentItem(item)
        self._show_current()

    def _next_pending(self, start: int) -> int:
        order = list(range(start, len(self.rows))) + list(range(0, start))
        return next((i for i in order if self.rows[i].state == PENDING), -1)

    def current_index(self) -> int:
        """The row of the pair the buttons act on (-1: none)."""
        item = self.table.currentItem()
        return self.table.indexOfTopLevelItem(item) if item is not None else -1

    def _on_current_changed(self, *_items: object) -> None:
        self._show_current()
        self._update_buttons()

    def _show_current(self) -> None:
        index = self.current_index()
        if index < 0:
            self.detail.setText("")
            return
        row = self.rows[index]
        text = decision_sentence(row.step, self._show)
        if row.state != PENDING:
            text += f" ({row.state.capitalize()}.)"
        self.detail.setText(text)

    def _update_buttons(self) -> None:
        index = self.current_index()
        writable = not self._busy and not self._session.read_only
        pending = writable and index >= 0 and self.rows[index].state == PENDING
        for button in (self.apply_button, self.skip_button, self.defer_button):
            button.setEnabled(pending)
        self.apply_all_button.setEnabled(
            writable and any(r.state == PENDING for r in self.rows))
        self.again_button.setEnabled(not self._busy)

    # -- stepping ------------------------------------------------------------------------------

    def _on_apply_clicked(self) -> None:
        self._act_on_current(defer=False)

    def _on_defer_clicked(self) -> None:
        self._act_on_current(defer=True)

    def _on_skip_clicked(self) -> None:
        index = self.current_index()
        if not self.skip_button.isEnabled() or index < 0:
            return
        self.rows[index].skipped = True
        self._on_undo_index_changed(0)
        self._select(self._next_pending(index))

    def _act_on_current(self, *, defer: bool) -> None:
        index = self.current_index()
        if not self.apply_button.isEnabled() or index < 0:
            return
        spawn(self.apply([index], defer=defer))

    def _on_apply_all_clicked(self) -> None:
        if self.apply_all_button.isEnabled():
            spawn(self.apply([i for i, r in enumerate(self.rows) if r.state == PENDING]))

    async def apply(self, indexes: Sequence[int], *, defer: bool = False) -> bool:
        """Write the pairs at ``indexes`` (their planned decision, or held for review with
        ``defer``) as one undoable step.

        Returns:
            True when written; False when the engine refused (the status line says why).
        """
        rows = [self.rows[i] for i in indexes]
        steps = [replace(r.step, action=Action.DEFERRED) if defer else r.step for r in rows]
        self._busy = True
        self._update_buttons()
        session = self._session
        try:
            # small Chroma calls: each holds the GIL, which the GUI thread waits out
            report: ConsolidationReport = await session.run_write(
                session.engine.apply_consolidation, steps, batch_size=UNDO_BATCH)
        except EngineError as exc:
            self._busy = False
            self._update_buttons()
            self.status.setText(f"Not applied: {exc}. Dry Run Again shows the store as it is "
                                "now.")
            return False
        self._busy = False
        command = ConsolidationCommand(session, steps, report, self._command_text(steps))
        for row in rows:
            row.command = command
        session.undo_stack.push(command)  # its index change refreshes the Status column
        session.records_changed.emit(_touched(report))
        counts = report.counts
        done = ([f"merged {count_of(counts['merged'], 'pair')}"] if counts["merged"] else []) \
            + ([f"sent {count_of(counts['deferred'], 'pair')} to the review queue"]
               if counts["deferred"] else [])
        self.status.setText(sentence(" and ".join(done)) + ". Edit → Undo takes it back.")
        self._select(self._next_pending(indexes[-1]))
        self._update_buttons()
        self.applied.emit(report)
        return True

    def _command_text(self, steps: Sequence[ConsolidationStep]) -> str:
        if len(steps) > 1:
            return f"Consolidate {count_of(len(steps), 'pair')}"
        step = steps[0]
        other, kept = quoted(self._show(step.other.content), 30), \
            quoted(self._show(step.kept.content), 30)
        if step.action is Action.MERGED:
            return f"Merge {other} into {kept}"
        return f"Send {other} to review"
