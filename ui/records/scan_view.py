"""The Secrets view: records holding secret-shaped or personal text (issue 9).

``MemoryEngine.redaction_scan()`` runs on a worker; its previews are already redacted. It scans
every record (660 ms of GIL-bound CPU at 100K records, measured), so it runs when the view is
shown and the store changed since the last scan — not on every open or edit while hidden. Each row
can jump to its record or be redacted in place (``MemoryEngine.set_redacted`` through
:meth:`ui.shared.session.StoreSession.redact`, one undoable step on the app's undo stack).
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import MemoryEngine, RedactionHit
from engine.errors import EngineError
from ui.records.record_links import RecordRef, record_tooltip
from ui.shared.empty_state import EmptyState
from ui.shared.format import findings
from ui.shared.redaction import Redaction
from ui.shared.session import StoreSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = ["ScanView"]


def _scan(engine: MemoryEngine) -> list[RedactionHit]:
    return engine.redaction_scan()


class ScanView(QWidget):
    """Corpus scan with jump-to-record and redact-in-place.

    Signals:
        open_record(str): Show this record in the Records view.
        message(str): A status-bar message.
    """

    open_record = Signal(str)
    message = Signal(str)

    def __init__(self, runner: TaskRunner, redaction: Redaction,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._redaction = redaction
        self._session: StoreSession | None = None
        self._tokens = RequestTokens()
        self._stale = False
        self.hits: list[RedactionHit] = []
        self.scan_button = QPushButton("Scan store", self)
        self.scan_button.clicked.connect(self._on_scan_clicked)
        self.open_button = QPushButton("Go to record", self)
        self.open_button.clicked.connect(self._on_open_clicked)
        self.redact_button = QPushButton("Redact in place", self)
        self.redact_button.setToolTip("Replace the secrets of the selected records by "
                                      "placeholders (undoable with Ctrl+Z)")
        self.redact_button.clicked.connect(self._on_redact_clicked)
        self.summary = QLabel("Scan the store for secret-shaped and personal text.", self)
        self.table = QTreeWidget(self)
        # the memory by its (redacted) text first, its id on hover: a column of UUIDs took
        # half the width and told a person nothing
        self.table.setHeaderLabels(["Memory (redacted)", "Agent", "What it holds", "Secret"])
        self.table.setRootIsDecorated(False)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        header = self.table.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.table.itemDoubleClicked.connect(lambda *_: self._on_open_clicked())
        self.table.itemSelectionChanged.connect(self._update_buttons)
        top = QHBoxLayout()
        top.addWidget(self.scan_button)
        top.addWidget(self.summary, 1)
        top.addWidget(self.open_button)
        top.addWidget(self.redact_button)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.table, 1)
        self.empty_state = EmptyState(self.table, "secrets")
        self._update_buttons()

    def set_session(self, session: StoreSession | None) -> None:
        """Follow the open store; rescan when its records change."""
        if self._session is not None:
            self._session.records_changed.disconnect(self._on_records_changed)
        self._session = session
        self._tokens.next_token()
        self.hits = []
        self.table.clear()
        self.empty_state.clear()
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
            self._rescan()
        self._update_buttons()

    def _on_records_changed(self, _ids: list[str]) -> None:
        self._rescan()

    def _rescan(self) -> None:
        """Scan now if the view is shown, else when it is next shown."""
        self._stale = True
        if self.isVisible():
            self._stale = False
            spawn(self.scan())

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._stale and self._session is not None:
            self._stale = False
            spawn(self.scan())

    def _on_scan_clicked(self) -> None:
        spawn(self.scan())

    async def scan(self) -> list[RedactionHit] | None:
        """Scan the open store on a worker and list the hits."""
        session = self._session
        if session is None:
            return None
        token = self._tokens.next_token()
        self.summary.setText("Scanning…")
        try:
            hits = await self._runner.run(_scan, session.engine)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self.summary.setText(f"Scan failed: {exc}")
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        self.hits = hits
        self.table.clear()
        for hit in hits:
            kinds = findings(hit.kinds)
            item = QTreeWidgetItem([hit.preview, hit.agent_id, kinds,  # redacted by the engine
                                    "yes" if hit.secret else ""])
            item.setToolTip(0, record_tooltip(hit.preview, hit.id))
            item.setToolTip(2, ", ".join(f"{k} ×{n}" for k, n in sorted(hit.kinds.items())))
            item.setData(0, Qt.ItemDataRole.UserRole, hit.id)
            self.table.addTopLevelItem(item)
        for column in range(1, 4):
            self.table.resizeColumnToContents(column)
        secrets = sum(1 for h in hits if h.secret)
        verb = "holds" if len(hits) == 1 else "hold"
        self.summary.setText(f"{count_of(len(hits), 'record')} {verb} secret-shaped or personal "
                             f"text ({secrets:,} with secrets).")
        if hits:
            self.empty_state.clear()
        else:
            self.empty_state.show_message(
                "No secrets found", "No record holds text shaped like an API key, a token, a "
                "private key, an e-mail address, a UUID or a 16-digit number. The scan runs "
                "again whenever records change.")
        self._update_buttons()
        return hits

    def current_record(self) -> RecordRef | None:
        """The current row's record (the record context menu's): its text as the scan shows it,
        redacted, so Copy text and Find similar never carry the secret."""
        item = self.table.currentItem()
        record_id = item.data(0, Qt.ItemDataRole.UserRole) if item is not None else None
        if item is None or not isinstance(record_id, str):
            return None
        return RecordRef(record_id, item.text(0))

    def selected_ids(self) -> list[str]:
        """Ids of the selected rows."""
        return [str(i.data(0, Qt.ItemDataRole.UserRole)) for i in self.table.selectedItems()]

    def _update_buttons(self) -> None:
        chosen = bool(self.table.selectedItems())
        session = self._session
        self.open_button.setEnabled(chosen)
        self.redact_button.setEnabled(chosen and session is not None and not session.read_only)

    def _on_open_clicked(self) -> None:
        ids = self.selected_ids()
        if ids:
            self.open_record.emit(ids[0])

    def _on_redact_clicked(self) -> None:
        count = len(self.selected_ids())
        if not count:
            return
        # a bulk write: the confirmation states how many records it changes (issue 20)
        what = "this record" if count == 1 else f"these {count:,} records"
        answer = QMessageBox.question(
            self, "Redact in place", f"Replace the secrets of {what} by placeholders? You "
            "can undo this (Edit → Undo).",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        if answer == QMessageBox.StandardButton.Yes:
            spawn(self.redact_selected())

    async def redact_selected(self) -> int:
        """Redact the selected records in place (one undo step); returns how many."""
        session, ids = self._session, self.selected_ids()
        if session is None or session.read_only or not ids:
            return 0
        try:
            done = await session.redact(ids, self._redaction.redactor)
        except EngineError as exc:
            self.message.emit(f"Redaction failed: {exc}")
            return 0
        self.message.emit(f"Redacted {count_of(len(done), 'record')} in place (Ctrl+Z undoes)")
        return len(done)
