"""The review queue: pending gray-zone, category and contradiction pairs, decided by keyboard.

Each pending item shows the stored record and the incoming memory side by side with a word
diff, the similarity, the reason and the contradiction guard's conflicts. **A** approves (merge
into the stored record), **R** rejects (keep both, never ask again), **S** skips to the next;
several selected items are decided as one step. Every decision is one undoable command on the
store's undo stack: undo restores the target as it was (approve) or deletes the record the
reject created, then puts the item back in the queue (``engine.reopen_review``).
"""

from __future__ import annotations

import difflib
import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QKeySequence, QShortcut, QUndoCommand
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QListView,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSplitter,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from engine import MemoryEngine, ReviewItem
from engine.errors import EngineError
from engine.records import MemoryRecord
from ui.records.record_links import RecordRef, record_tooltip
from ui.shared.empty_state import EmptyState
from ui.shared.format import (
    elide,
    exact_time,
    reason_sentence,
    relative_time,
    sentence,
    similarity_phrase,
    tag,
    thresholds_phrase,
)
from ui.shared.session import StoreSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn

__all__ = ["Decision", "ReviewCommand", "ReviewView", "word_diff_html"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One applied decision, with what undo needs."""

    review_id: str
    action: str  # "approve" or "reject"
    target_before: MemoryRecord | None
    result_id: str | None  # the record a reject inserted (None: it inserted none)
    merged_away: MemoryRecord | None = None  # a consolidation item's stored record approve deleted


def word_diff_html(old: str, new: str) -> tuple[str, str]:
    """Both texts as HTML with removed words (left) and added words (right) highlighted."""
    a, b = old.split(), new.split()
    left: list[str] = []
    right: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        old_words = html.escape(" ".join(a[i1:i2]))
        new_words = html.escape(" ".join(b[j1:j2]))
        if op == "equal":
            left.append(old_words)
            right.append(new_words)
            continue
        if old_words:
            left.append(f'<span style="background:#ffcecb;color:#82071e">{old_words}</span>')
        if new_words:
            right.append(f'<span style="background:#aceebb;color:#055d20">{new_words}</span>')
    return " ".join(left), " ".join(right)


def _decide(engine: MemoryEngine, review_ids: Sequence[str], action: str) -> list[Decision]:
    done: list[Decision] = []
    for review_id in review_ids:
        if action == "approve":
            item = next((i for i in engine.review_queue() if i.id == review_id), None)
            before = engine.get(item.target_id) if item is not None else None
            # a consolidation deferral's incoming memory is a stored record the merge deletes
            stored = engine.get(item.incoming_id) if item is not None \
                and engine.stored_ids([item.incoming_id]) else None
            result = engine.approve_review(review_id)
            done.append(Decision(review_id, action, before, result.record_id, stored))
        else:
            result = engine.reject_review(review_id)
            # only a reject that stored the memory as a record of its own has one to take back
            inserted = result.record_id if result.action.value == "inserted" else None
            done.append(Decision(review_id, action, None, inserted))
    return done


def _undo(engine: MemoryEngine, decisions: Sequence[Decision]) -> None:
    for decision in reversed(decisions):
        if decision.action == "approve" and decision.target_before is not None:
            engine.restore([decision.target_before] + (
                [decision.merged_away] if decision.merged_away is not None else []))
        elif decision.action == "reject" and decision.result_id \
                and engine.stored_ids([decision.result_id]):
            engine.delete([decision.result_id], reason="undo")
        engine.reopen_review(decision.review_id)


def _redo(engine: MemoryEngine, decisions: Sequence[Decision]) -> None:
    _decide(engine, [d.review_id for d in decisions], decisions[0].action)


def _load(engine: MemoryEngine) -> list[tuple[ReviewItem, MemoryRecord | None]]:
    items = engine.review_queue()
    targets = {r.id: r for r in engine.get_many(
        engine.stored_ids(dict.fromkeys(i.target_id for i in items)))}
    return [(item, targets.get(item.target_id)) for item in items]


class ReviewCommand(QUndoCommand):
    """Approve / reject of one or more items, undoable (first redo is the decision itself)."""

    def __init__(self, view: ReviewView, session: StoreSession,
                 decisions: Sequence[Decision]) -> None:
        verb = decisions[0].action.capitalize()
        super().__init__(f"{verb} {len(decisions)} review item(s)")
        self._view = view
        self._session = session
        self._decisions = list(decisions)
        self._applied = True

    def undo(self) -> None:
        self._applied = False
        spawn(self._view.apply_history(self._session, _undo, self._decisions))

    def redo(self) -> None:
        if self._applied:
            return
        self._applied = True
        spawn(self._view.apply_history(self._session, _redo, self._decisions))


class ReviewView(QWidget):
    """Pending review pairs side by side; approve / reject / skip by keyboard, bulk, undoable.

    Signals:
        decided(list): Decisions were applied (their :class:`Decision` values).
        message(str): Something to show in the status bar.
        open_record(str): Show the current item's stored record in the Records view.
    """

    decided = QtSignal(list)
    message = QtSignal(str)
    open_record = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: StoreSession | None = None
        self._tokens = RequestTokens()
        self._redact: Callable[[str], str] | None = None
        self.items: list[tuple[ReviewItem, MemoryRecord | None]] = []
        self.loads = 0

        self.approve_button = QPushButton("Approve (A)", self)
        self.reject_button = QPushButton("Reject (R)", self)
        self.skip_button = QPushButton("Skip (S)", self)
        self.refresh_button = QPushButton("Refresh", self)
        self.open_button = QPushButton("Open stored record", self)
        self.open_button.setToolTip("Show the stored record of this pair in the Records view "
                                    "(double-click the item, or Ctrl+Return)")
        self.count_label = QLabel("", self)
        bar = QHBoxLayout()
        for button in (self.approve_button, self.reject_button, self.skip_button,
                       self.refresh_button, self.open_button):
            bar.addWidget(button)
        bar.addWidget(self.count_label, 1)

        self.list = QListWidget(self)
        self.list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.list.setMinimumWidth(240)
        self.list.setAlternatingRowColors(True)
        # an item's text wraps to the list's width (it was cut at the right edge, to be read
        # by scrolling sideways); Adjust lays the items out again when the list is resized
        self.list.setWordWrap(True)
        self.list.setResizeMode(QListView.ResizeMode.Adjust)
        self.list.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        # a gap between items: wrapped, one item's text ran into the next one's reason line
        # (in the dark theme the alternate rows are too close in tone to tell them apart)
        self.list.setSpacing(3)
        self.info = QLabel("", self)
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.RichText)
        self.stored_label = QLabel("Stored record", self)
        self.incoming_label = QLabel("Incoming memory", self)
        self.stored = QTextBrowser(self)
        self.incoming = QTextBrowser(self)
        # a grid: the two headings wrap (an agent's and a source's names are long) and the two
        # texts below them still start on the same line
        pair = QGridLayout()
        for column, (label, browser) in enumerate(((self.stored_label, self.stored),
                                                   (self.incoming_label, self.incoming))):
            label.setWordWrap(True)
            pair.addWidget(label, 0, column, Qt.AlignmentFlag.AlignBottom)
            pair.addWidget(browser, 1, column)
            pair.setColumnStretch(column, 1)
        pair.setRowStretch(1, 1)
        right = QWidget(self)
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.info)
        right_layout.addLayout(pair, 1)
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(self.list)
        split.addWidget(right)
        split.setStretchFactor(1, 3)
        split.setSizes([300, 800])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(bar)
        layout.addWidget(split, 1)
        self.empty_state = EmptyState(split, "review")
        self._queue_read = False  # the open store's queue was read at least once

        for key, slot in (("A", self.approve_selected), ("R", self.reject_selected),
                          ("S", self.skip)):
            shortcut = QShortcut(QKeySequence(key), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(slot)
        self.approve_button.clicked.connect(self.approve_selected)
        self.reject_button.clicked.connect(self.reject_selected)
        self.skip_button.clicked.connect(self.skip)
        self.refresh_button.clicked.connect(self.refresh)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.list.itemDoubleClicked.connect(self._on_open_clicked)
        self.list.currentRowChanged.connect(self._show)
        self._update_buttons()

    # -- state -----------------------------------------------------------------------------

    def set_session(self, session: StoreSession | None) -> None:
        """Show ``session``'s queue."""
        self._session = session
        self._queue_read = False
        self.items = []
        self.list.clear()
        self._show(-1)
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
            self.refresh()
        self._update_buttons()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask shown content with ``redact`` (None: as stored)."""
        self._redact = redact
        self._show(self.list.currentRow())

    def _text(self, value: str) -> str:
        return self._redact(value) if self._redact is not None else value

    def _update_buttons(self) -> None:
        writable = self._session is not None and not self._session.read_only
        has = bool(self.items)
        for button in (self.approve_button, self.reject_button):
            button.setEnabled(writable and has)
        self.skip_button.setEnabled(has)
        self.open_button.setEnabled(self.current_record() is not None)
        self.count_label.setText(f"{len(self.items):,} pending")
        if self._queue_read and not self.items:
            self.empty_state.show_message(
                "Nothing to review", "Ingest holds a memory here instead of merging it when it "
                "is almost a duplicate of a stored one (the gray zone just under the merge "
                "threshold) or may contradict it (\"standup at 9:30\" vs \"10:30\"). Approve "
                "merges the pair; reject keeps both.")
        else:
            self.empty_state.clear()

    def _on_records_changed(self, _ids: list[str]) -> None:
        if self.sender() is self._session:
            self.refresh()

    def refresh(self) -> None:
        """Reload the pending items."""
        if self._session is not None:
            spawn(self.load())

    async def load(self) -> None:
        """Fetch the queue on a worker; keep the current item selected when still pending."""
        session = self._session
        if session is None:
            return
        token = self._tokens.next_token()
        try:
            items = await self._runner.run(_load, session.engine)
        except EngineError as exc:
            self.count_label.setText(f"queue unavailable: {exc}")
            return
        if not self._tokens.is_current(token) or session is not self._session:
            return
        current = self.current_item()
        self.items = items
        self.list.blockSignals(True)
        self.list.clear()
        for item, _target in items:
            sim = f"{item.similarity:.2f} · " if item.similarity is not None else ""
            row = QListWidgetItem(f"{sim}{tag(item.reason)}\n"
                                  f"{elide(self._text(item.incoming.content), 60)}")
            row.setToolTip(self._text(item.incoming.content))
            row.setData(Qt.ItemDataRole.UserRole, item.target_id)
            self.list.addItem(row)
        self.list.blockSignals(False)
        ids = [i.id for i, _ in items]
        keep = ids.index(current.id) if current is not None and current.id in ids else 0
        self.list.setCurrentRow(keep if items else -1)
        self._show(self.list.currentRow())
        self.loads += 1
        self._queue_read = True
        self._update_buttons()

    def current_item(self) -> ReviewItem | None:
        """The item shown."""
        row = self.list.currentRow()
        return self.items[row][0] if 0 <= row < len(self.items) else None

    def current_record(self) -> RecordRef | None:
        """The current item's stored record (None when it was deleted meanwhile)."""
        row = self.list.currentRow()
        target = self.items[row][1] if 0 <= row < len(self.items) else None
        return None if target is None else RecordRef(target.id, target.content)

    def _on_open_clicked(self, *_args: object) -> None:
        ref = self.current_record()
        if ref is not None:
            self.open_record.emit(ref.id)

    def selected_ids(self) -> list[str]:
        """Ids of the selected items (the current one when nothing is selected)."""
        rows = sorted({self.list.row(i) for i in self.list.selectedItems()})
        if not rows and self.list.currentRow() >= 0:
            rows = [self.list.currentRow()]
        return [self.items[r][0].id for r in rows if 0 <= r < len(self.items)]

    def _show(self, row: int) -> None:
        self.open_button.setEnabled(self.current_record() is not None)
        if not 0 <= row < len(self.items):
            self.info.setText("No pending pairs." if not self.items else "")
            self.stored.clear()
            self.incoming.clear()
            return
        item, target = self.items[row]
        stored_text = self._text(target.content) if target is not None else "(record deleted)"
        left, right = word_diff_html(stored_text, self._text(item.incoming.content))
        self.stored.setHtml(left)
        self.incoming.setHtml(right)
        texts = {target.id: self._text(target.content)} if target is not None else {}
        why = sentence(reason_sentence(item.reason, target=item.target_id,
                                       conflicts=[c.to_json() for c in item.conflicts],
                                       texts=texts))
        self.info.setText(
            f"<b>{html.escape(why)}</b><br>similarity <b>"
            f"{html.escape(similarity_phrase(item.similarity, item.thresholds))}</b>"
            f" · {html.escape(thresholds_phrase(item.thresholds))}"
            f" · queued {html.escape(relative_time(item.created_at))}")
        self.info.setToolTip(f"{item.reason} · queued {exact_time(item.created_at)}")
        if target is not None:
            self.stored_label.setText(f"Stored record · {target.agent_id} · "
                                      f"{target.layer.value} · {target.category.value}")
            self.stored_label.setToolTip(record_tooltip(self._text(target.content), target.id))
        else:
            self.stored_label.setText("Stored record (deleted since)")
            self.stored_label.setToolTip("")
        incoming = item.incoming
        self.incoming_label.setText(f"Incoming · {incoming.agent_id} · {incoming.source} · "
                                    f"{incoming.source_tier.value} · {incoming.category.value}")

    # -- decisions -------------------------------------------------------------------------

    def skip(self) -> None:
        """Show the next item."""
        if self.items:
            self.list.setCurrentRow((self.list.currentRow() + 1) % len(self.items))

    def approve_selected(self) -> None:
        """Merge the selected items into their stored records."""
        spawn(self.decide(self.selected_ids(), "approve"))

    def reject_selected(self) -> None:
        """Keep the selected items as records of their own."""
        spawn(self.decide(self.selected_ids(), "reject"))

    async def decide(self, review_ids: Sequence[str], action: str) -> list[Decision]:
        """Apply ``action`` to ``review_ids`` as one undoable step."""
        session = self._session
        if session is None or session.read_only or not review_ids:
            return []
        try:
            decisions = await session.run_write(_decide, session.engine, list(review_ids),
                                                action)
        except EngineError as exc:
            self.message.emit(f"{action} failed: {exc}")
            await self.load()
            return []
        if decisions:
            session.undo_stack.push(ReviewCommand(self, session, decisions))
            self.decided.emit(decisions)
            self.message.emit(f"{action}d {len(decisions)} item(s)")
        session.records_changed.emit([d.result_id for d in decisions if d.result_id])
        return decisions

    async def apply_history(self, session: StoreSession,
                            fn: Callable[[MemoryEngine, Sequence[Decision]], None],
                            decisions: Sequence[Decision]) -> None:
        """Undo or redo ``decisions`` on a worker, then reload the queue."""
        try:
            await session.run_write(fn, session.engine, decisions)
        except EngineError as exc:
            self.message.emit(f"undo/redo of the review failed: {exc}")
        session.records_changed.emit([d.result_id for d in decisions if d.result_id])
