"""Collections written by other tools, in the window (issue 22; docs/gui.md, "Collections of
other tools").

A collection mem0, LangChain or LlamaIndex wrote opens read-only with its records mapped by the
engine (:mod:`engine.store.foreign`); the window says which layout it detected
(:func:`foreign_banner`). Two actions of the Store menu work on such a collection:

* **Field Mapping…** (:func:`edit_field_mapping`): the collection's first records are read on a
  worker, and :class:`FieldMappingDialog` lists their metadata keys with sample values and lets
  the user choose which key holds the text, the agent, the times, the importance and the run,
  with a live preview of the records as the choice maps them. The window saves the choice
  where ``mnemoscope map-collection`` does (the settings file, per store and collection) and
  opens the collection again through it.
* **Adopt into a Mnemoscope Store…** (:func:`adopt_collection`): the records are copied into a
  store the user picks (a folder, created when new, or a server URL) through the ingest
  pipeline on a worker, with progress and Cancel, and the dedup report is shown in the import
  progress dialog (:class:`~ui.shared.dialogs.ImportProgressDialog`).

Every text shown (sample values, previews, the report) goes through the window's redaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine import (
    MAPPED_FIELDS,
    EngineError,
    FieldMapping,
    ForeignInfo,
    ForeignLayout,
    ForeignSample,
    MemoryEngine,
    StoreSpec,
)
from ui.imports.importing import ImportSummary, adopt_collection_into
from ui.shared.dialogs import ImportProgressDialog
from ui.shared.format import exact_time
from ui.shared.session import StoreSession
from ui.shared.tasks import CancelFlag, TaskRunner
from ui.shared.wording import count_of

__all__ = ["FieldMappingDialog", "MappingChoice", "TargetDialog", "adopt_collection",
           "edit_field_mapping", "foreign_banner"]

_LAYOUT_NAMES = {ForeignLayout.MEM0: "mem0", ForeignLayout.LANGCHAIN: "LangChain",
                 ForeignLayout.LLAMAINDEX: "LlamaIndex", ForeignLayout.PLAIN: "Plain Chroma",
                 ForeignLayout.CUSTOM: "Mapped"}
_FIELD_LABELS = {"text": "Text", "agent": "Agent (or user)", "time": "Created",
                 "updated": "Updated", "importance": "Importance (0..1)",
                 "run": "Run / session"}
_DETECTED = "(as detected)"
_PREVIEW_COLUMNS = ("Text", "Agent", "Created", "Updated", "Importance", "Run")

OpenTarget = Callable[[StoreSpec], MemoryEngine]
"""Opens the store an adoption copies into, beside the open one (blocking: a worker)."""


def foreign_banner(info: ForeignInfo, collection: str) -> str:
    """What the window says about a foreign collection it opened: the layout detected, that
    it is read-only, and what to do next (map its fields when none was recognised)."""
    name = _LAYOUT_NAMES[info.layout]
    text = f"{name} collection '{collection}' — read-only; Adopt into a Mnemoscope store… " \
           "(Store menu) copies it through the ingest pipeline."
    if info.layout is ForeignLayout.PLAIN:
        text += (" No known tool's layout was recognised: Store → Field Mapping… says which "
                 "metadata keys hold the text, agent and time.")
    if info.vector_dimension is not None and not info.vectors_used:
        text += (f" Its {info.vector_dimension}-d vectors do not fit the model: search uses "
                 "words only until it is adopted.")
    return text


@dataclass(frozen=True, slots=True)
class MappingChoice:
    """What the mapping dialog was closed with.

    Attributes:
        mapping: The mapping to save; None forgets the saved one (detection alone).
    """

    mapping: FieldMapping | None


class FieldMappingDialog(QDialog):
    """Which metadata key holds which record field, with a live preview of the mapped records.

    Args:
        sample: The collection's first records (read on a worker).
        current: The mapping saved now, if any (its choices are preselected).
        show: The window's redaction (sample values and previews are rendered through it).
        now_ms: The time a record without a readable creation time is shown with.
    """

    def __init__(self, sample: ForeignSample, current: FieldMapping | None,
                 parent: QWidget | None = None, *, show: Callable[[str], str],
                 now_ms: float) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Field mapping of '{sample.collection}'")
        self.setMinimumSize(640, 480)
        self.resize(920, 640)
        self._sample = sample
        self._show = show
        self._now_ms = now_ms
        self.choice: MappingChoice | None = None
        keys = sample.keys()
        detected = _LAYOUT_NAMES[sample.detected]
        header = QLabel(
            f"Detected layout: <b>{detected}</b> ({count_of(len(sample.ids), 'record')} read). "
            "Choose the metadata keys that hold each field; a field left "
            f"“{_DETECTED}” uses the layout's own keys and the well-known names. The "
            "choice is saved for this collection of this store (as "
            "<code>mnemoscope map-collection</code> does).", self)
        header.setWordWrap(True)
        header.setTextFormat(Qt.TextFormat.RichText)

        self.keys = QTableWidget(len(keys), 2, self)
        self.keys.setHorizontalHeaderLabels(["Metadata key", "Sample values"])
        for row, (key, values) in enumerate(keys):
            self.keys.setItem(row, 0, QTableWidgetItem(show(key)))
            self.keys.setItem(row, 1, QTableWidgetItem(" · ".join(show(v) for v in values)))
        _read_only_table(self.keys)

        self.combos: dict[str, QComboBox] = {}
        form = QFormLayout()
        for name in MAPPED_FIELDS:
            combo = QComboBox(self)
            combo.addItem("(the document, else as detected)" if name == "text" else _DETECTED,
                          None)
            for key, _values in keys:
                combo.addItem(show(key), key)
            chosen = getattr(current, name) if current is not None else None
            index = combo.findData(chosen) if chosen is not None else 0
            combo.setCurrentIndex(max(0, index))
            combo.currentIndexChanged.connect(self._on_choice_changed)
            form.addRow(_FIELD_LABELS[name], combo)
            self.combos[name] = combo

        self.preview = QTableWidget(0, len(_PREVIEW_COLUMNS), self)
        self.preview.setHorizontalHeaderLabels(list(_PREVIEW_COLUMNS))
        _read_only_table(self.preview)
        self.note = QLabel("", self)
        self.note.setWordWrap(True)

        buttons = QDialogButtonBox(self)
        self.save_button = buttons.addButton("Save", QDialogButtonBox.ButtonRole.AcceptRole)
        self.forget_button = buttons.addButton("Forget Mapping",
                                               QDialogButtonBox.ButtonRole.DestructiveRole)
        self.forget_button.setEnabled(current is not None)
        self.forget_button.setToolTip("Read the collection by its detected layout alone")
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.save_button.clicked.connect(self._on_save_clicked)
        self.forget_button.clicked.connect(self._on_forget_clicked)
        buttons.rejected.connect(self.reject)

        top = QWidget(self)
        top_layout = QHBoxLayout(top)
        top_layout.setContentsMargins(0, 0, 0, 0)
        top_layout.addWidget(self.keys, 3)
        top_layout.addLayout(form, 2)
        splitter = QSplitter(Qt.Orientation.Vertical, self)
        splitter.addWidget(top)
        bottom = QWidget(self)
        bottom_layout = QVBoxLayout(bottom)
        bottom_layout.setContentsMargins(0, 0, 0, 0)
        bottom_layout.addWidget(QLabel("Preview: the first records as this mapping reads them",
                                       bottom))
        bottom_layout.addWidget(self.preview, 1)
        bottom_layout.addWidget(self.note)
        splitter.addWidget(bottom)
        layout = QVBoxLayout(self)
        layout.addWidget(header)
        layout.addWidget(splitter, 1)
        layout.addWidget(buttons)
        self._on_choice_changed()

    def mapping(self) -> FieldMapping | None:
        """The mapping the combo boxes say (None: every field as detected)."""
        chosen = {name: combo.currentData() for name, combo in self.combos.items()
                  if combo.currentData() is not None}
        return FieldMapping(**chosen) if chosen else None

    def _on_choice_changed(self, *_args: object) -> None:
        """Map the sample again (20 records in memory: no worker needed) and show it."""
        mapping = self.mapping()
        records = self._sample.preview(mapping, now_ms=self._now_ms)
        self.preview.setRowCount(len(records))
        for row, record in enumerate(records):
            run = next((t.removeprefix("run:") for t in record.tags if t.startswith("run:")),
                       "")
            cells = (record.content, record.agent_id, exact_time(record.created_at),
                     exact_time(record.last_accessed), f"{record.importance:.2f}", run)
            for column, text in enumerate(cells):
                self.preview.setItem(row, column, QTableWidgetItem(self._show(text)))
        undated = sum(1 for r in records if r.created_at == self._now_ms)
        notes = []
        if records and all(r.content == "(no document)" for r in records):
            notes.append("No record has a text yet: choose the key that holds it.")
        if undated:
            notes.append(f"{count_of(undated, 'record')} of the preview without a readable "
                         "creation time (ISO-8601, epoch ms or epoch seconds): shown at the "
                         "time the collection was opened.")
        self.note.setText(" ".join(notes))

    def _on_save_clicked(self) -> None:
        self.choice = MappingChoice(self.mapping())
        self.accept()

    def _on_forget_clicked(self) -> None:
        self.choice = MappingChoice(None)
        self.accept()


class TargetDialog(QDialog):
    """Where an adoption copies to: a store folder (created when new) or a server URL."""

    def __init__(self, collection: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Adopt '{collection}'")
        self.location = QLineEdit(self)
        self.location.setPlaceholderText("/path/to/store or http://host:8000")
        browse = QPushButton("Browse…", self)
        browse.clicked.connect(self._on_browse_clicked)
        text = QLabel(
            f"Copy the records of '{collection}' into a Mnemoscope store through the ingest "
            "pipeline: duplicates are merged or skipped, gray-zone pairs wait for review, and "
            "each record keeps where it came from. The collection itself is only read. A new "
            "folder becomes a new store.", self)
        text.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(self.location, 1)
        row.addWidget(browse)
        buttons = QDialogButtonBox(self)
        self.adopt_button = buttons.addButton("Adopt", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        self.adopt_button.setEnabled(False)
        self.location.textChanged.connect(
            lambda text: self.adopt_button.setEnabled(bool(text.strip())))
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.target = ""
        """The location chosen (read once accepted: the dialog deletes itself when closed)."""
        layout = QVBoxLayout(self)
        layout.addWidget(text)
        layout.addLayout(row)
        layout.addWidget(buttons)
        self.resize(560, self.sizeHint().height())

    def accept(self) -> None:
        """Keep the location chosen, then close."""
        self.target = self.location.text().strip()
        super().accept()

    def _on_browse_clicked(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Store folder to adopt into")
        if folder:
            self.location.setText(folder)


def _read_only_table(table: QTableWidget) -> None:
    table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    table.horizontalHeader().setStretchLastSection(True)


async def _closed(dialog: QDialog) -> bool:
    """Open ``dialog`` window-modal and wait, without a nested event loop, until it closes;
    True when it was accepted (False also when it was destroyed with its window)."""
    done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()

    def on_finished(result: int) -> None:
        if not done.done():
            done.set_result(result == QDialog.DialogCode.Accepted)

    def on_destroyed() -> None:
        if not done.done():
            done.set_result(False)

    dialog.finished.connect(on_finished)
    dialog.destroyed.connect(on_destroyed)
    dialog.open()
    return await done


async def edit_field_mapping(
        parent: QWidget, session: StoreSession, runner: TaskRunner, *,
        show: Callable[[str], str],
        opened: Callable[[FieldMappingDialog], None] | None = None,
) -> MappingChoice | None:
    """Read the collection's first records on a worker and let the user map their keys.

    ``opened`` receives the dialog once shown (tests).

    Returns:
        The choice, or None when the user cancelled.

    Raises:
        EngineError: the sample could not be read (the caller says so).
    """
    engine = session.engine
    sample = await runner.run(engine.store.foreign_sample)
    info = engine.store.foreign_info
    dialog = FieldMappingDialog(sample, info.mapping if info is not None else None, parent,
                                show=show, now_ms=engine.clock.now())
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    waiting = asyncio.ensure_future(_closed(dialog))
    if opened is not None:
        opened(dialog)
    accepted = await waiting
    return dialog.choice if accepted else None


async def adopt_collection(
        parent: QWidget, session: StoreSession, runner: TaskRunner, open_target: OpenTarget,
        *, show: Callable[[str], str], target: str | None = None,
        opened: Callable[[QDialog], None] | None = None,
) -> ImportSummary | None:
    """Adopt the open foreign collection into a Mnemoscope store, with progress and Cancel.

    Args:
        open_target: Opens the target store beside the open one (on a worker).
        target: The store to adopt into; None asks (:class:`TargetDialog`).
        opened: Receives each dialog once shown: the target dialog, then the progress dialog.

    Returns:
        The report (also shown in the progress dialog), or None when cancelled before it
        started or when it failed (the dialog says why).
    """
    collection = session.spec.collection
    if target is None:
        ask = TargetDialog(collection, parent)
        ask.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        waiting = asyncio.ensure_future(_closed(ask))
        if opened is not None:
            opened(ask)
        if not await waiting:
            return None
        target = ask.target
    dialog = ImportProgressDialog(f"Adopt '{collection}' into {target}", parent, show=show,
                                  action="Adoption", unit="record")
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    flag = CancelFlag()
    dialog.cancel_requested.connect(flag.set)
    dialog.open()
    if opened is not None:
        opened(dialog)
    progress = runner.progress_relay(dialog.set_progress)
    try:
        summary: ImportSummary = await runner.run(
            adopt_collection_into, open_target, session.engine, StoreSpec(target),
            progress=progress, cancelled=flag.is_set)
    except EngineError as exc:
        dialog.fail(str(exc))
        return None
    dialog.finish(summary)
    if not summary.cancelled:
        dialog.label.setText(
            f"Adopted '{collection}' into {target}: {count_of(len(summary.outcomes), 'record')} "
            "decided by the ingest pipeline. Open that store and use File → Imports… to undo "
            "it.")
    return summary
