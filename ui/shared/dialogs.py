"""Dialogs: connect to a server, pick a collection, add a memory, import progress, export.

Dialogs collect input and show results; the engine work they trigger runs in the records view or
the main window through the task runner, never inside a dialog.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from engine import CollectionInfo, ConversationFormat
from engine.errors import ValidationError
from engine.records import Category, Layer, NewMemory, Privacy
from ui.imports.import_dialogs import OutcomeTable, decision_words
from ui.imports.importing import ACTIONS, DECISIONS, ImportSummary
from ui.shared.choices import chosen_privacy, fill_privacy, show_privacy
from ui.shared.format import sentence
from ui.shared.wording import count_of

__all__ = [
    "MESSAGE_LINES",
    "AddMemoryDialog",
    "AttachDialog",
    "CollectionDialog",
    "ConnectDialog",
    "ExportOptionsDialog",
    "ImportProgressDialog",
    "reserve_message_area",
]

MESSAGE_LINES = 3
"""Lines of room a dialog keeps for its message (an error, "Connecting…"), shown or not."""


def reserve_message_area(label: QLabel, lines: int = MESSAGE_LINES) -> None:
    """Keep room for ``lines`` wrapped lines of ``label`` whether it says something or not.

    Issue 20: the dialogs grew (and their buttons jumped) when an error appeared and shrank when
    it went, because an empty label takes no height. A message longer than the room still shows
    whole (the dialog grows then, rather than cut it).
    """
    label.setWordWrap(True)
    label.setAlignment(Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop)
    label.setMinimumHeight(label.fontMetrics().lineSpacing() * lines)


class ConnectDialog(QDialog):
    """Chroma server URL, optional token and collection."""

    def __init__(self, parent: QWidget | None = None, url: str = "http://localhost:8000") -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to a Chroma server")
        self.setMinimumWidth(480)  # a fixed width: the message wraps instead of widening it
        form = QFormLayout(self)
        self.url = QLineEdit(url, self)
        self.token = QLineEdit(self)
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("optional bearer token")
        self.collection = QLineEdit("mnemoscope_memories", self)
        self.read_only = QCheckBox("Open read-only", self)
        self.error = QLabel("", self)
        self.error.setStyleSheet("color: #d1242f;")
        reserve_message_area(self.error)
        form.addRow("Server URL", self.url)
        form.addRow("Token", self.token)
        form.addRow("Collection", self.collection)
        form.addRow(self.read_only)
        form.addRow(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self._on_accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)

    def _on_accept(self) -> None:
        url = self.url.text().strip()
        if not url.lower().startswith(("http://", "https://")):
            self.error.setText("The URL must start with http:// or https://")
            return
        if not self.collection.text().strip():
            self.error.setText("Name a collection")
            return
        self.accept()


class AttachDialog(QDialog):
    """URL and token of a running ``mnemoscope serve``; shows why an attach failed.

    The dialog does not connect: Attach emits :attr:`attach_requested` and stays open; the
    window connects on a worker and calls :meth:`show_error` (the dialog stays, the token
    field is selected for another try) or closes it with ``accept``.

    Signals:
        attach_requested(str, str): The URL and the token to try.
    """

    attach_requested = QtSignal(str, str)

    def __init__(self, recent: Sequence[str], parent: QWidget | None = None,
                 url: str = "") -> None:
        super().__init__(parent)
        self.setWindowTitle("Attach to a running agent")
        self.setMinimumWidth(480)
        form = QFormLayout(self)
        intro = QLabel("Watch an agent that runs in its own process: start "
                       "<code>mnemoscope serve</code> beside it and enter the URL and token "
                       "it printed. Everything is read-only.", self)
        intro.setWordWrap(True)
        self.url = QComboBox(self)
        self.url.setEditable(True)
        self.url.addItems(list(recent))
        self.url.setEditText(url or (recent[0] if recent else "http://127.0.0.1:8765"))
        self.url.setToolTip("Recent attach targets (tokens are never stored)")
        self.token = QLineEdit(self)
        self.token.setEchoMode(QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("the token `mnemoscope serve` printed")
        self.error = QLabel("", self)
        self.error.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.error.setStyleSheet("color: #d1242f;")
        reserve_message_area(self.error)
        form.addRow(intro)
        form.addRow("API URL", self.url)
        form.addRow("Token", self.token)
        form.addRow(self.error)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel, self)
        self.attach_button = self.buttons.addButton("Attach",
                                                    QDialogButtonBox.ButtonRole.AcceptRole)
        self.attach_button.setDefault(True)
        self.buttons.accepted.connect(self._on_attach_clicked)
        self.buttons.rejected.connect(self.reject)
        form.addRow(self.buttons)
        if self.url.currentText():
            self.token.setFocus()

    def _on_attach_clicked(self) -> None:
        url, token = self.url.currentText().strip(), self.token.text().strip()
        if not url.lower().startswith(("http://", "https://")):
            self.show_error("The URL must start with http:// or https:// (for example "
                            "http://127.0.0.1:8765).")
            return
        if not token:
            self.show_error("Enter the token: `mnemoscope serve` prints it at start "
                            "(or it was given as $MNEMOSCOPE_API_TOKEN).")
            return
        self.error.setText("")
        self.attach_requested.emit(url, token)

    def set_busy(self, busy: bool) -> None:
        """Say that a connection is being tried (the Attach button is off meanwhile)."""
        self.attach_button.setEnabled(not busy)
        if busy:
            self.error.setStyleSheet("")
            self.error.setText("Connecting…")

    def show_error(self, message: str) -> None:
        """Show why attaching failed; the dialog stays open for another try."""
        self.error.setStyleSheet("color: #d1242f;")
        self.error.setText(message)
        self.attach_button.setEnabled(True)
        self.token.setFocus()
        self.token.selectAll()


class CollectionDialog(QDialog):
    """Pick one collection of a Chroma directory or server (opened read-only when foreign)."""

    def __init__(self, location: str, collections: Sequence[CollectionInfo],
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Open a Chroma collection")
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"Collections in {location}:", self))
        self.list = QListWidget(self)
        for info in collections:
            kind = f"Mnemoscope schema {info.schema_version}" if info.ours else "other tool"
            item = QListWidgetItem(f"{info.name}  —  {count_of(info.count, 'record')} ({kind})")
            item.setData(Qt.ItemDataRole.UserRole, info.name)
            self.list.addItem(item)
        if collections:
            self.list.setCurrentRow(0)
        layout.addWidget(self.list)
        self.read_only = QCheckBox("Open read-only", self)
        self.read_only.setChecked(True)
        layout.addWidget(self.read_only)
        layout.addWidget(QLabel("Collections written by other tools always open read-only.",
                                self))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open
                                   | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.list.itemDoubleClicked.connect(lambda _item: self.accept())
        layout.addWidget(buttons)

    def chosen(self) -> str | None:
        """The chosen collection name."""
        item = self.list.currentItem()
        return None if item is None else str(item.data(Qt.ItemDataRole.UserRole))


class AddMemoryDialog(QDialog):
    """A new memory's fields, validated inline by :class:`NewMemory` before it is accepted."""

    def __init__(self, agents: Sequence[str], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Add a memory")
        self.resize(520, 360)
        form = QFormLayout(self)
        self.content = QPlainTextEdit(self)
        self.agent = QComboBox(self)
        self.agent.setEditable(True)
        self.agent.addItems(list(agents) or ["default"])
        self.layer = QComboBox(self)
        self.layer.addItems([layer.value for layer in Layer])
        self.category = QComboBox(self)
        self.category.addItems([c.value for c in Category])
        self.privacy = QComboBox(self)
        fill_privacy(self.privacy)
        # the engine's, the CLI's and the Pipeline form's default: a memory typed here is
        # private unless the person says otherwise (the box's first item is "public")
        show_privacy(self.privacy, Privacy.PRIVATE)
        self.importance = QDoubleSpinBox(self)
        self.importance.setRange(0.0, 1.0)
        self.importance.setSingleStep(0.05)
        self.importance.setValue(0.5)
        self.confidence = QDoubleSpinBox(self)
        self.confidence.setRange(0.0, 1.0)
        self.confidence.setSingleStep(0.05)
        self.confidence.setValue(0.8)
        self.tags = QLineEdit(self)
        self.tags.setPlaceholderText("comma-separated")
        self.error = QLabel("", self)
        self.error.setObjectName("error")
        self.error.setStyleSheet("color: #d1242f;")
        reserve_message_area(self.error)
        for label, widget in (("Content", self.content), ("Agent", self.agent),
                              ("Layer", self.layer), ("Category", self.category),
                              ("Privacy", self.privacy), ("Importance", self.importance),
                              ("Confidence", self.confidence), ("Tags", self.tags)):
            form.addRow(label, widget)
        form.addRow(self.error)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self._on_accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self.memory: NewMemory | None = None

    def build(self) -> NewMemory:
        """The memory the form describes.

        Raises:
            ValidationError: naming the bad field.
        """
        return NewMemory(
            content=self.content.toPlainText(), agent_id=self.agent.currentText().strip(),
            layer=Layer(self.layer.currentText()), category=Category(self.category.currentText()),
            privacy=chosen_privacy(self.privacy) or Privacy.PRIVATE,
            importance=self.importance.value(), confidence=self.confidence.value(),
            tags=tuple(t.strip() for t in self.tags.text().split(",") if t.strip()),
            source="user")

    def _on_accept(self) -> None:
        try:
            self.memory = self.build()
        except ValidationError as exc:
            self.error.setText(str(exc))
            return
        self.accept()


class ExportOptionsDialog(QDialog):
    """Export with or without redaction of secrets and personal data."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export records")
        layout = QVBoxLayout(self)
        self.redact = QCheckBox("Redact secrets and personal data (emails, keys, tokens, …)",
                                self)
        self.redact.setChecked(True)  # safe default: exports leave the machine
        layout.addWidget(self.redact)
        layout.addWidget(QLabel("Redacted values become <REDACT:sha256-…> placeholders.", self))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel, self)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout.addWidget(buttons)


class ImportProgressDialog(QDialog):
    """Progress of an import with Cancel, then its summary (counts per decision and every line,
    read-only, sortable and filterable: :class:`~ui.imports.import_dialogs.OutcomeTable`).

    Issue 20: after a cancel the dialog keeps saying "Cancelling…" (late progress reports do
    not overwrite it), Close is enabled once the import stopped, the bar stays where the
    import stopped, and the dialog keeps its size as messages appear (labels wrap in room
    they have from the start; the summary table is there, empty, from the start).

    Signals:
        cancel_requested(): The user pressed Cancel while the import ran.
    """

    cancel_requested = QtSignal()

    def __init__(self, title: str, parent: QWidget | None = None, *,
                 show: Callable[[str], str] | None = None, action: str = "Import",
                 unit: str = "line") -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        # what the words name: "Import" of lines, or (issue 22) "Adoption" of records
        self._action, self._unit = action, unit
        # an explicit minimum: the layout then never raises it (nor resizes the window) as
        # texts and table contents change (QLayout.SetDefaultConstraint)
        self.setMinimumSize(520, 360)
        self.resize(900, 520)
        layout = QVBoxLayout(self)
        self.label = QLabel("Reading…", self)
        self.bar = QProgressBar(self)
        self.bar.setRange(0, 0)
        self.counts = QLabel("", self)
        for label, lines in ((self.label, 3), (self.counts, 2)):
            label.setWordWrap(True)
            label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
            label.setFixedHeight(lines * label.fontMetrics().lineSpacing())
        self.outcomes = OutcomeTable(self, show=show)
        self.outcomes.setEnabled(False)
        self.button = QPushButton("Cancel", self)
        self.button.clicked.connect(self._on_button_clicked)
        for widget in (self.label, self.bar, self.counts):
            layout.addWidget(widget)
        layout.addWidget(self.outcomes, 1)
        layout.addWidget(self.button, 0, Qt.AlignmentFlag.AlignRight)
        self._running = True
        self._cancelling = False
        self.summary: ImportSummary | None = None

    @property
    def running(self) -> bool:
        """True until :meth:`finish` or :meth:`fail`."""
        return self._running

    def set_progress(self, done: int, total: int) -> None:
        """Show ``done`` of ``total`` (ignored once the import ended; after Cancel the bar
        moves but the words stay "Cancelling…")."""
        if not self._running:
            return  # a report relayed after the end
        self.bar.setRange(0, max(1, total))
        self.bar.setValue(done)
        if not self._cancelling:
            self.label.setText(f"{done:,} of {count_of(total, self._unit)} decided…"
                               if self._unit != "line" else
                               f"Imported {done:,} of {count_of(total, 'line')}…")

    def finish(self, summary: ImportSummary) -> None:
        """Show the summary: counts per decision and every line with its text."""
        self._stopped()
        self.summary = summary
        if summary.cancelled:
            # the bar stays where the import stopped: it did not get to the end
            if self.bar.maximum() == 0:
                self.bar.setRange(0, 1)
                self.bar.setValue(0)
            self.label.setText(
                f"{self._action} cancelled: {count_of(len(summary.outcomes), self._unit)} "
                "decided and stored before the cancel; nothing of the batch in progress was "
                "written.")
        else:
            self.bar.setRange(0, 1)
            self.bar.setValue(1)
            if summary.format:
                what = (f"{count_of(len(summary.outcomes), 'message')} of "
                        f"{ConversationFormat(summary.format).label} decided by the ingest "
                        f"pipeline, keeping {summary.keep}")
            else:
                what = f"{count_of(len(summary.outcomes), 'line')} decided by the ingest pipeline"
            self.label.setText(f"Import finished: {what}. Edit → Undo or File → Imports… "
                               "takes it back.")
        counts = summary.decisions
        self.counts.setText("   ".join(f"{sentence(decision_words(name))}: {counts[name]:,}"
                                       for name in DECISIONS
                                       if counts[name] or name in ACTIONS[:3]))
        self.outcomes.set_summary(summary)
        self.outcomes.setEnabled(True)

    def fail(self, message: str) -> None:
        """Show that the import failed (nothing was written)."""
        self._stopped()
        if self.bar.maximum() == 0:
            self.bar.setRange(0, 1)
            self.bar.setValue(0)
        self.label.setText(f"{self._action} failed: {message}")

    def _stopped(self) -> None:
        self._running = False
        self.button.setText("Close")
        self.button.setEnabled(True)

    def _on_button_clicked(self) -> None:
        if self._running:
            self._cancelling = True
            self.button.setEnabled(False)
            self.label.setText("Cancelling… (the batch in progress is dropped)")
            self.cancel_requested.emit()
        else:
            self.accept()

    def reject(self) -> None:
        """Escape / window close: cancel while running, close when done."""
        if self._running:
            self._on_button_clicked()
            return
        super().reject()
