"""The main window: view navigation, menus, banner, status bar, and the open store.

Only views that work are shown (each issue adds its own to :attr:`MainWindow.views`). The views
are listed in a sidebar with icons, the common actions are in a toolbar, and until a store is
open every view that needs one says so, with the ways to open one (issue 19: docs/gui.md,
"The shell").
The window never builds an engine itself and does not decide what is open: ``app`` hands it
:class:`WindowServices` (the runner, the preferences it restores) and the application controller
(``app/controller.py``, typed here as :class:`~ui.session_views.AppControl`), which opens and
closes stores, attaches, imports and runs the LLM gateway. The window keeps the menus, the
banner and the status bar, registers its views with the controller's registry, and reacts to the
controller's signals (issue 20).

It shows either a store it opened (:class:`~ui.shared.session.StoreSession`) or an agent it attached
to over ``mnemoscope serve`` (:class:`~ui.shared.session.AttachedSession`, read-only): the records,
timeline and layers views read either through the session's reader; the views that run the
engine itself are greyed out in the navigation while attached.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Protocol

import shiboken6
from PySide6.QtCore import QByteArray, QEvent, QSize, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import (
    QAction,
    QActionGroup,
    QCloseEvent,
    QKeySequence,
    QPaintEvent,
    QPalette,
    QUndoGroup,
)
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QMainWindow,
    QMenu,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSizePolicy,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from engine import (
    CollectionInfo,
    EmbedderState,
    EmbedderStatus,
    FieldMapping,
    ForeignLayout,
    LifecycleRun,
    MemoryEngine,
    MemoryReader,
    RecordState,
    SalienceCut,
    StoreSpec,
)
from engine.errors import EngineError
from engine.llm import LLMGateway, LLMSettings
from ui.imports.foreign_dialogs import adopt_collection, edit_field_mapping
from ui.imports.import_dialogs import (
    ConversationPreviewDialog,
    ImportCommand,
    ImportsDialog,
    preview_conversation_import,
)
from ui.imports.importing import ImportSummary, export_records
from ui.layers.layers_view import LayersView
from ui.observe.budget_view import BudgetView
from ui.observe.fate_view import FateView
from ui.observe.observe import ObserveViews
from ui.records.consolidate_view import ConsolidateDialog
from ui.records.record_links import RecordLinks, RecordRef, quoted
from ui.records.records_view import RecordsView
from ui.records.scan_view import ScanView
from ui.session_views import AppControl
from ui.settings.lifecycle_status import LifecycleStatus
from ui.settings.provider_dialog import LLMServices, ProviderSettingsDialog
from ui.shared.dialogs import (
    AttachDialog,
    CollectionDialog,
    ConnectDialog,
    ExportOptionsDialog,
    ImportProgressDialog,
)
from ui.shared.empty_state import EmptyState
from ui.shared.full_view import (
    FULL_VIEW_FEATURES,
    MENU_FEATURES,
    loading_sentence,
    loading_status,
    unread_message,
    waiting_message,
)
from ui.shared.icons import themed_icon
from ui.shared.redaction import Redaction
from ui.shared.session import AttachedSession, DataSession, StoreSession
from ui.shared.tasks import CancelFlag, TaskRunner, spawn
from ui.shared.theme import THEMES, apply_theme
from ui.shared.wording import count_of
from ui.tasks.task_graph_view import TaskGraphView

__all__ = ["MainWindow", "Preferences", "WindowServices"]


def _is_open(dialog: QWidget) -> bool:
    """True while ``dialog`` exists and is shown (it may be deleted once closed)."""
    return shiboken6.isValid(dialog) and dialog.isVisible()


def _copy_workspace(source: Path) -> Path:
    """Worker: ``source`` copied into a new temporary folder, without its cache."""
    target = Path(tempfile.mkdtemp(prefix="mnemoscope-demo-")) / source.name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(".mnemoscope"))
    return target


@dataclass(frozen=True, slots=True)
class Preferences:
    """What the window remembers between runs (stored by ``app`` in the settings file).

    Attributes:
        theme: system, light or dark.
        recent_stores: Most recent first (directories or server URLs).
        recent_attach: Introspection API URLs attached to, most recent first (no tokens).
        geometry: Base64 of ``QMainWindow.saveGeometry``.
        window_state: Base64 of ``QMainWindow.saveState``.
        demo_offered: The first-launch demo offer was shown.
        redaction: Redaction mode is on.
        lifecycle: The open store's lifecycle runs on its schedule (issue 23).
    """

    theme: str = "system"
    recent_stores: tuple[str, ...] = ()
    recent_attach: tuple[str, ...] = ()
    geometry: str = ""
    window_state: str = ""
    demo_offered: bool = False
    redaction: bool = False
    lifecycle: bool = True


class BulkImport(Protocol):
    """Import into a closed embedded store out of process: (spec, path, conversation agent or
    None, progress, cancelled, the conversation's salience cut) → summary. See
    :mod:`app.import_process`."""

    def __call__(self, spec: StoreSpec, path: Path, conversation_agent: str | None,
                 progress: Callable[[int, int], None], cancelled: Callable[[], bool], /, *,
                 keep: SalienceCut | None = None) -> ImportSummary: ...

Attach = Callable[[str, str, Callable[[str | None], None]], MemoryReader]
"""Connect to a running ``mnemoscope serve``: (URL, token, follower-state callback) → a
read-only reader. Raises ``EngineError`` with a message for the person attaching."""

NAVIGATION: dict[str, str] = {
    "records": "Browse, search and edit the memories",
    "timeline": "Every ingest and merge decision over time",
    "pipeline": "Step one memory through the merge pipeline",
    "review": "Merges and contradictions held for your decision",
    "retrieval": "Ask a question: what is retrieved, and why",
    "map": "The memories' embeddings in two dimensions",
    "layers": "Social, procedural and spatial layers",
    "secrets": "Find secrets and personal data in the records",
    "fate": "Follow one memory: merged, superseded, deleted",
    "budget": "LLM spend, rate limits and calls",
    "tasks": "Task workspaces and their dependency graph",
}
"""Sidebar entries: view name (also its icon in ``assets/icons/ui``) → what it is for."""
STORELESS_VIEWS = ("tasks",)
"""Views that work without an open store (the others say "No store open" until one is)."""


@dataclass(frozen=True, slots=True)
class WindowServices:
    """What ``app`` gives the window: the runner and the functions that touch the outside.

    Every callable here blocks; the window runs them through ``runner``.
    """

    runner: TaskRunner
    open_engine: Callable[[StoreSpec], MemoryEngine]
    list_collections: Callable[[StoreSpec], Sequence[CollectionInfo]]
    save_preferences: Callable[[Preferences], None]
    redactor: Callable[[str], str]
    preferences: Preferences = field(default_factory=Preferences)
    default_store: str = ""
    demo_memories: Path | None = None
    demo_conversation: Path | None = None
    demo_workspace: Path | None = None
    """The demo task workspace (opened from a copy: the shipped one stays as it is)."""
    version: str = ""
    bulk_import: BulkImport | None = None
    llm: LLMServices | None = None
    """Issue 9: the LLM provider settings, their saving, and the gateway factory."""
    attach: Attach | None = None
    """Issue 10: connects to an agent's introspection API (worker)."""
    save_mapping: Callable[[str, str, FieldMapping | None], None] | None = None
    """Issue 22: saves (None: forgets) the field mapping of a store's collection (worker);
    ``open_engine`` reads collections through the saved mappings."""
    open_target: Callable[[StoreSpec], MemoryEngine] | None = None
    """Issue 22: opens the store an adoption copies into, beside the open one (worker)."""


class MainWindow(QMainWindow):
    """Navigation of views, menus, the store banner and the status bar.

    Signals:
        first_shown(): The window painted for the first time (startup benchmark).
        store_opened(object): A :class:`StoreSession` is open and shown.
        store_failed(str): Opening a store failed; the message says why.
        attached(object): An :class:`AttachedSession` is shown.
        attach_failed(str): Attaching failed; the message says why.
    """

    first_shown = QtSignal()
    store_opened = QtSignal(object)
    store_failed = QtSignal(str)
    attached = QtSignal(object)
    attach_failed = QtSignal(str)

    def __init__(self, services: WindowServices, controller: AppControl) -> None:
        super().__init__()
        self._services = services
        self._controller = controller
        self._runner = services.runner
        self._prefs = services.preferences
        self._shown_store: StoreSession | None = None  # whose undo stack is in the group
        self._indexing_shown: StoreSession | None = None
        self._attach_dialog: AttachDialog | None = None
        self._attaching = ""  # the URL being attached to, for the banner's words
        self._last_error = ""
        self._painted = False
        self.setWindowTitle("Mnemoscope")
        self.resize(1280, 800)
        self.setMinimumSize(760, 480)

        self.undo_group = QUndoGroup(self)
        # issue 9: one app-wide redaction state; every view renders through redaction.show
        self.redaction = Redaction(self._prefs.redaction, services.redactor, self)
        # issue 19: one owner of "open this record" and of the record context menu
        self.links = RecordLinks(self.redaction, self)
        self.records = RecordsView(self._runner, self)
        self.views: dict[str, QWidget] = {"records": self.records}
        self.observe = ObserveViews.build(self._runner, self)  # issue 8
        self.views.update(self.observe.views())
        self.observe.map.record_selected.connect(self.show_record)
        self.observe.connect_messages(self._on_view_message)
        self.layers = LayersView(self._runner, self)  # issue 10
        self.views["layers"] = self.layers
        self.layers.record_selected.connect(self.show_record)
        self.layers.message.connect(self._on_view_message)
        # issue 9
        self.fate = FateView(self._runner, self.redaction, self)
        self.tasks_view = TaskGraphView(self.redaction, self)
        self.demo_workspace_action = QAction("Open the Demo Workspace", self)
        self.demo_workspace_action.setToolTip(
            "A copy of the demo task cards in a temporary folder (edits there are not kept)")
        self.demo_workspace_action.triggered.connect(
            lambda: spawn(self.open_demo_workspace()))
        if services.demo_workspace is not None:  # a new user's next step in Tasks
            self.tasks_view.set_empty_actions((self.demo_workspace_action,))
        self.scan = ScanView(self._runner, self.redaction, self)
        self.budget = BudgetView(self._runner, self)
        self.provider_dialog: ProviderSettingsDialog | None = None
        self.views.update({"secrets": self.scan, "fate": self.fate, "budget": self.budget,
                           "tasks": self.tasks_view})
        self._register_session_views()
        self.nav = QListWidget(self)
        self.nav.setObjectName("navigation")
        self.nav.setFixedWidth(150)
        self.nav.setFrameShape(QFrame.Shape.NoFrame)
        self.nav.setIconSize(QSize(20, 20))
        self.nav.setSpacing(1)
        self.nav.setUniformItemSizes(True)
        self.nav.viewport().setBackgroundRole(QPalette.ColorRole.Window)  # a sidebar, not a list
        self.stack = QStackedWidget(self)
        # Before a store is open, every view that needs one says so (and how to open one).
        self.no_store: dict[str, EmptyState] = {}
        for name, view in self.views.items():
            item = QListWidgetItem(name.capitalize())
            item.setSizeHint(QSize(0, 34))
            self.nav.addItem(item)
            self.stack.addWidget(view)
            if name not in STORELESS_VIEWS:
                self.no_store[name] = EmptyState(view, "store")
        self.nav.setCurrentRow(0)
        self.nav.currentRowChanged.connect(self.stack.setCurrentIndex)
        self.nav.currentRowChanged.connect(self._on_nav_changed)

        self.banner = QFrame(self)
        self.banner.setObjectName("banner")
        self.banner_label = QLabel("", self.banner)
        self.banner_label.setWordWrap(True)
        self.banner_button = QPushButton("", self.banner)
        self.banner_dismiss = QPushButton("Dismiss", self.banner)
        banner_layout = QHBoxLayout(self.banner)
        banner_layout.setContentsMargins(10, 6, 10, 6)
        banner_layout.addWidget(self.banner_label, 1)
        banner_layout.addWidget(self.banner_button)
        banner_layout.addWidget(self.banner_dismiss)
        self.banner_dismiss.clicked.connect(self._on_banner_dismissed)
        self.banner_button.clicked.connect(self._on_banner_button_clicked)
        self._banner_action: Callable[[], None] | None = None
        self._banner_kind = ""
        self._demo_declined: set[str] = set()  # stores whose demo offer was dismissed
        self.banner.hide()

        central = QWidget(self)
        body = QHBoxLayout()
        body.setContentsMargins(0, 0, 0, 0)
        body.setSpacing(0)
        body.addWidget(self.nav)
        edge = QWidget(self)  # a hairline between the sidebar and the view, in the theme's colour
        edge.setFixedWidth(1)
        edge.setAutoFillBackground(True)
        edge.setBackgroundRole(QPalette.ColorRole.Mid)
        body.addWidget(edge)
        body.addWidget(self.stack, 1)
        layout = QVBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        layout.addWidget(self.banner)
        layout.addLayout(body, 1)
        self.setCentralWidget(central)

        self.store_label = QLabel("No store", self)
        self.count_label = QLabel("", self)
        self.model_label = QLabel("model: —", self)
        self.redaction_label = QLabel("", self)
        self.review_label = QLabel("", self)  # review items pending (hidden when none)
        self.review_label.setToolTip("Memories held for your decision (the Review view)")
        self.review_label.hide()
        # Indexing a store opened without a usable view cache: progress and Cancel.
        self.index_label = QLabel("", self)
        self.index_bar = QProgressBar(self)
        self.index_bar.setFixedWidth(100)
        self.index_bar.setTextVisible(False)
        self.index_cancel = QPushButton("Cancel", self)
        self.index_cancel.setToolTip("Stop reading the store's records (an embedded store "
                                     "being indexed closes; a server store stays open)")
        self.index_cancel.clicked.connect(self._on_index_cancel_clicked)
        # issue 23: the open store's scheduled lifecycle, its last run and its off switch
        self.lifecycle = LifecycleStatus(self._runner, enabled=self._prefs.lifecycle,
                                         parent=self)
        self.lifecycle.toggled.connect(self._on_lifecycle_toggled)
        self.lifecycle.ran.connect(self._on_lifecycle_ran)
        # its scheduler writes: the controller starts it on each engine and stops it before
        # that engine closes (open, close, the reopen after an import)
        self._controller.add_engine_service(self.lifecycle.set_engine)
        # The store's location is the bar's one normal widget: it takes the room the others
        # leave, and a status message ("Saved content", "Deleted 1 record") is shown in its
        # place for a few seconds. As a permanent widget it left the messages no room: cut
        # after a few words at 1280 px, not shown at all at 900 px.
        self.store_label.setSizePolicy(QSizePolicy.Policy.Ignored,
                                       QSizePolicy.Policy.Preferred)
        self.statusBar().addWidget(self.store_label, 1)
        for widget in (self.index_label, self.index_bar, self.index_cancel, self.count_label,
                       self.review_label, self.model_label, self.redaction_label,
                       self.lifecycle.label):
            self.statusBar().addPermanentWidget(widget)
        self._show_indexing(None)
        self.show_redaction(self._prefs.redaction)
        self.records.message.connect(self._on_view_message)
        self._view_loaded = (0, 0)  # the full view's load: records read, total (issue 24)
        self.records.model.reloaded.connect(self._on_records_first_page)
        self.records.model.load_failed.connect(self._on_records_first_page)
        self.fate.open_record.connect(self.show_record)
        self.scan.open_record.connect(self.show_record)
        self.scan.message.connect(self._on_view_message)
        self.budget.settings_requested.connect(self._on_provider_triggered)
        self._link_views()
        self._build_menus()
        # An empty store's Records view offers what the File menu does to fill it.
        self.records.empty_actions = (self.demo_action, self.import_action,
                                      self.conversation_action)
        self.layers.set_empty_actions((self.demo_action, self.import_action))
        for view in (self.observe.retrieval, self.observe.timeline, self.observe.map):
            view.empty_actions = (self.demo_action, self.import_action)
        self.redaction.changed.connect(self._on_redaction_changed)
        controller.session_changed.connect(self._on_session_changed)
        controller.store_state_changed.connect(self._on_store_state_changed)
        controller.count_changed.connect(self._on_count_changed)
        controller.review_count_changed.connect(self._on_review_count_changed)
        controller.busy.connect(self._on_busy)
        controller.error.connect(self._on_controller_error)
        controller.notice.connect(self._on_controller_notice)
        controller.gateway_changed.connect(self._on_gateway_changed)
        self._restore_window()

    def _register_session_views(self) -> None:
        """Register every view that shows the session with the controller, once (Records
        first: it gets a store at once, the others after its first page)."""
        views = self._controller.views
        views.add_reader_view("records", self.records)
        views.add_reader_view("timeline", self.observe.timeline)
        for name, view in (("pipeline", self.observe.pipeline), ("review", self.observe.review),
                           ("retrieval", self.observe.retrieval), ("map", self.observe.map)):
            views.add_store_view(name, view)
        views.add_reader_view("layers", self.layers)
        views.add_store_view("secrets", self.scan)
        views.add_store_view("fate", self.fate)
        views.add_store_view("budget", None)  # follows the store through the LLM gateway

    # -- links between views and records (issue 19) -----------------------------------------

    def _link_views(self) -> None:
        """Give every widget that shows records the record actions (ui/records/record_links.py)."""
        links = self.links
        links.open_requested.connect(self.show_record)
        links.fate_requested.connect(self.show_fate)
        links.pipeline_requested.connect(self.run_in_pipeline)
        links.similar_requested.connect(self.find_similar)
        links.delete_requested.connect(self._on_delete_record_requested)
        links.state_requested.connect(self._on_state_requested)
        links.message.connect(self._on_view_message)
        # The table's Del and Ctrl+Alt+P/A/R are the links' (on its whole selection); the Edit
        # menu's Delete, Pause, Archive and Resume only show the keys, or a key would be
        # ambiguous while the table (or another view's record list) has focus.
        records = self.records
        own = {"delete": records.delete_action, "pause": records.pause_action,
               "archive": records.archive_action, "resume": records.resume_action}
        for made in own.values():
            made.setShortcutContext(Qt.ShortcutContext.WidgetShortcut)
        links.attach(records.table, records.current_record, own=own, open_here=False)
        links.attach(records.similar.tree, records.similar.current_record)
        observe = self.observe
        observe.timeline.open_record.connect(self.show_record)
        links.attach(observe.timeline.record_bar, observe.timeline.current_record)
        links.attach(observe.timeline.detail.fields, observe.timeline.current_detail_record)
        observe.pipeline.open_record.connect(self.show_record)
        links.attach(observe.pipeline.candidate_bars, observe.pipeline.current_record)
        for panel in observe.pipeline.panels.values():
            links.attach(panel.fields.fields, observe.pipeline.current_field_record)
        observe.review.open_record.connect(self.show_record)
        links.attach(observe.review.list, observe.review.current_record)
        observe.retrieval.open_record.connect(self.show_record)
        links.attach(observe.retrieval.live, observe.retrieval.current_record)
        links.attach(observe.map.plot, observe.map.current_record)
        links.attach(self.fate.steps, self.fate.current_step_record)
        links.attach(self.fate.record_bar, self.fate.current_record)
        links.attach(self.scan.table, self.scan.current_record)
        for tree in self.layers.record_trees():
            links.attach(tree, tree.current_record)

    def show_fate(self, record_id: str) -> None:
        """Switch to the Fate view and show what happened to ``record_id``."""
        self.nav.setCurrentRow(list(self.views).index("fate"))
        self.fate.show_fate(record_id)

    def run_in_pipeline(self, record_id: str) -> None:
        """Switch to the pipeline stepper with ``record_id``'s content and fields in its form."""
        self.nav.setCurrentRow(list(self.views).index("pipeline"))
        spawn(self.observe.pipeline.load_stored(record_id))

    def find_similar(self, record_id: str, text: str) -> None:
        """Show what is similar to record ``record_id`` (its content ``text``, masked while
        redaction is on): a retrieval with ``text`` in the Retrieval view, or before a store's
        full view is read, the server's nearest records in the Records view (issue 24)."""
        session = self._controller.session
        if session is not None and session.indexing:
            self.nav.setCurrentRow(list(self.views).index("records"))
            self.records.find_similar(record_id)
            return
        self.nav.setCurrentRow(list(self.views).index("retrieval"))
        self.observe.retrieval.query_edit.setText(text)
        spawn(self.observe.retrieval.retrieve())

    def confirm_delete(self, ref: RecordRef) -> bool:
        """Ask before deleting ``ref`` (it can be undone)."""
        answer = QMessageBox.question(
            self, "Delete", f"Delete {quoted(self.redaction.show(ref.text))}? You can undo "
            "this (Edit → Undo).",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def _on_delete_record_requested(self, ref: RecordRef) -> None:
        if self.confirm_delete(ref):
            spawn(self.delete_record(ref))

    def _on_state_requested(self, ref: RecordRef, state: RecordState) -> None:
        spawn(self.records.ask_state_of(ref, state, quoted(self.redaction.show(ref.text))))

    async def delete_record(self, ref: RecordRef) -> bool:
        """Delete ``ref`` through the store's undoable delete; False when not possible."""
        session = self._controller.session
        if session is None or session.read_only or session.indexing:
            return False
        try:
            await session.delete([ref.id])
        except EngineError as exc:
            QMessageBox.warning(self, "Delete", f"Not deleted: {exc}")
            return False
        self._on_view_message(f"Deleted {quoted(self.redaction.show(ref.text))} "
                              "(Edit → Undo brings it back)")
        return True

    # -- menus -----------------------------------------------------------------------------

    def _action(self, text: str, slot: Callable[[], None],
                shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None
                ) -> QAction:
        made = QAction(text, self)
        if shortcut is not None:
            made.setShortcut(QKeySequence(shortcut))
        made.triggered.connect(slot)
        return made

    def _build_menus(self) -> None:
        bar = self.menuBar()
        file_menu = bar.addMenu("&File")
        self.open_action = self._action("&Open Store Folder…", self._on_open_folder_triggered,
                                        QKeySequence.StandardKey.Open)
        self.connect_action = self._action("&Connect to Chroma Server…",
                                           self._on_connect_triggered, "Ctrl+Shift+O")
        self.collection_action = self._action("Open Chroma &Collection (read-only)…",
                                              self._on_open_collection_triggered, "Ctrl+Alt+O")
        self.recent_menu = QMenu("&Recent Stores", self)
        self.attach_action = self._action("&Attach to Agent (serve)…",
                                          self._on_attach_triggered, "Ctrl+Shift+A")
        self.attach_action.setToolTip("Watch an agent that runs in its own process, through "
                                      "its `mnemoscope serve` API (read-only)")
        self.attach_action.setEnabled(self._services.attach is not None)
        self.detach_action = self._action("De&tach", self._on_detach_triggered)
        self.recent_attach_menu = QMenu("Recent A&gents", self)
        self.demo_action = self._action("Load &Demo Data", self._on_load_demo_triggered)
        self.import_action = self._action("&Import JSONL…", self._on_import_triggered, "Ctrl+I")
        self.conversation_action = self._action("Import Co&nversation…",
                                                self._on_import_conversation_triggered,
                                                "Ctrl+Shift+I")
        self.imports_action = self._action("Imp&orts…", self._on_imports_triggered)
        self.imports_action.setToolTip("Past imports into this store; undo one")
        self.export_action = self._action("&Export…", self._on_export_triggered, "Ctrl+E")
        quit_action = self._action("&Quit", self._on_quit_triggered, QKeySequence.StandardKey.Quit)
        for made in (self.open_action, self.connect_action, self.collection_action):
            file_menu.addAction(made)
        file_menu.addMenu(self.recent_menu)
        file_menu.addSeparator()
        file_menu.addAction(self.attach_action)
        file_menu.addMenu(self.recent_attach_menu)
        file_menu.addAction(self.detach_action)
        file_menu.addSeparator()
        for made in (self.demo_action, self.import_action, self.conversation_action,
                     self.imports_action, self.export_action):
            file_menu.addAction(made)
        file_menu.addSeparator()
        file_menu.addAction(quit_action)

        edit_menu = bar.addMenu("&Edit")
        self.undo_action = self.undo_group.createUndoAction(self, "&Undo")
        self.undo_action.setShortcut(QKeySequence.StandardKey.Undo)
        self.redo_action = self.undo_group.createRedoAction(self, "&Redo")
        self.redo_action.setShortcuts([QKeySequence("Ctrl+Shift+Z"), QKeySequence("Ctrl+Y")])
        edit_menu.addAction(self.undo_action)
        edit_menu.addAction(self.redo_action)
        edit_menu.addSeparator()
        for made in (self.records.add_action, self.records.delete_action,
                     self.records.tag_action):
            edit_menu.addAction(made)
        edit_menu.addMenu(self.records.layer_menu)
        edit_menu.addMenu(self.records.state_menu)  # Pause / Archive / Resume (issue 20)
        self.search_action = self._action("&Search Records", self._on_search_triggered,
                                          QKeySequence.StandardKey.Find)
        edit_menu.addSeparator()
        edit_menu.addAction(self.search_action)

        store_menu = bar.addMenu("&Store")
        self.consolidate_action = self._action("&Consolidate Duplicates…",
                                               self._on_consolidate_triggered)
        self.consolidate_action.setToolTip("Find stored near-duplicates, see what merging them "
                                           "would do, then merge them pair by pair or at once")
        store_menu.addAction(self.consolidate_action)
        # issue 24: a server store's records are read into this process only when asked
        self.read_view_action = self._action("&Read Every Record",
                                             self._on_read_view_triggered)
        self.read_view_action.setToolTip(
            "Read every record of the store into this process (a server store browses without "
            f"them): {', '.join([*FULL_VIEW_FEATURES.values(), *MENU_FEATURES])} need them")
        store_menu.addAction(self.read_view_action)
        self.cancel_view_action = self._action("Cancel", self._on_index_cancel_clicked)

        view_menu = bar.addMenu("&View")
        self.view_actions: dict[str, QAction] = {}
        for number, name in enumerate(self.views):  # Ctrl+1 … Ctrl+9, Ctrl+0
            keys = f"Ctrl+{(number + 1) % 10}" if number < 10 else None
            made = self._action(f"&{name.capitalize()}", partial(self.nav.setCurrentRow, number),
                                keys)
            view_menu.addAction(made)
            self.view_actions[name] = made
        self.refresh_action = self._action("Re&fresh", self._on_refresh_triggered,
                                           QKeySequence.StandardKey.Refresh)
        view_menu.addAction(self.refresh_action)
        self.redaction_action = self._action("&Redaction Mode", self.redaction.toggle,
                                             "Ctrl+Shift+R")
        self.redaction_action.setCheckable(True)
        self.redaction_action.setChecked(self.redaction.enabled)
        view_menu.addAction(self.redaction_action)
        self._build_toolbar()
        theme_menu = view_menu.addMenu("&Theme")
        self.theme_actions = QActionGroup(self)
        for theme in THEMES:
            made = theme_menu.addAction(theme.capitalize())
            made.setCheckable(True)
            made.setChecked(theme == self._prefs.theme)
            made.triggered.connect(lambda _checked=False, chosen=theme: self.set_theme(chosen))
            self.theme_actions.addAction(made)

        store_menu.addSeparator()  # issue 22: collections of other tools
        self.mapping_action = self._action("&Field Mapping…", self._on_field_mapping_triggered)
        self.mapping_action.setToolTip("Which metadata keys of this collection (written by "
                                       "another tool) hold the text, agent, time, importance")
        self.adopt_action = self._action("&Adopt into a Mnemoscope Store…",
                                         self._on_adopt_triggered)
        self.adopt_action.setToolTip("Copy this collection (written by another tool) into a "
                                     "Mnemoscope store through the ingest pipeline")
        store_menu.addAction(self.mapping_action)
        store_menu.addAction(self.adopt_action)

        settings_menu = bar.addMenu("&Settings")
        self.provider_action = self._action("LLM &Provider…", self._on_provider_triggered)
        self.provider_action.setEnabled(self._services.llm is not None)
        settings_menu.addAction(self.provider_action)
        settings_menu.addAction(self.lifecycle.action)

        help_menu = bar.addMenu("&Help")
        help_menu.addAction(self._action("&About Mnemoscope", self._on_about_triggered))
        self._rebuild_recent_menu()
        self._update_actions()

    def _build_toolbar(self) -> None:
        """The common actions, with icons and tool tips that name their shortcuts."""
        self.main_toolbar = self.addToolBar("Main")
        self.main_toolbar.setObjectName("main_toolbar")
        self.main_toolbar.setMovable(False)
        self.main_toolbar.setIconSize(QSize(20, 20))
        self.main_toolbar.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        tips = (
            (self.open_action, "Open Store", "Open a store folder"),
            (self.import_action, "Import", "Import memories from a JSONL file"),
            (self.search_action, "Search", "Search the records' content"),
            (self.redaction_action, "Redaction", "Mask secrets and personal data in every "
                                                  "view, copy and export"),
            (self.refresh_action, "Refresh", "Reload the records and the view shown"),
        )
        for made, short, tip in tips:
            made.setIconText(short)
            keys = made.shortcut().toString(QKeySequence.SequenceFormat.NativeText)
            made.setToolTip(f"{tip} ({keys})" if keys else tip)
            self.main_toolbar.addAction(made)
        self.demo_action.setToolTip("Import the demo data set: memories of several agents "
                                    "over all six layers")
        self.conversation_action.setToolTip("Import the memories of a conversation (JSON)")
        self._paint_icons()

    def _paint_icons(self) -> None:
        """(Re)draw the sidebar's and toolbar's icons in the palette's colours."""
        palette = self.palette()
        for number, name in enumerate(self.views):
            self.nav.item(number).setIcon(themed_icon(name, palette))
        for made, icon in ((self.open_action, "open"), (self.import_action, "import"),
                           (self.search_action, "search"), (self.redaction_action, "redaction"),
                           (self.refresh_action, "refresh"), (self.demo_action, "demo"),
                           (self.conversation_action, "import")):
            made.setIcon(themed_icon(icon, palette))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and hasattr(self, "main_toolbar"):
            self._paint_icons()  # a theme change: icons follow the text colour

    def _on_search_triggered(self) -> None:
        self.nav.setCurrentRow(list(self.views).index("records"))
        self.records.focus_search()

    def _on_refresh_triggered(self) -> None:
        """F5: reload the records (the status bar's count with them) and the view shown."""
        self.records.refresh()
        spawn(self._controller.refresh_counts())
        current = self.stack.currentWidget()
        if current is self.observe.timeline:
            self.observe.timeline.reload()
        elif current is self.observe.review:
            self.observe.review.refresh()
        elif current is self.observe.map:
            self.observe.map.refresh()
        elif current is self.layers:
            self.layers.refresh()
        elif current is self.scan:
            spawn(self.scan.scan())
        elif current is self.budget:
            spawn(self.budget.refresh())

    def _on_quit_triggered(self) -> None:
        self.close()

    def _rebuild_recent_menu(self) -> None:
        self.recent_menu.clear()
        for location in self._prefs.recent_stores:
            made = self.recent_menu.addAction(location)
            made.triggered.connect(
                lambda _checked=False, where=location: self.open_location(where))
        self.recent_menu.setEnabled(bool(self._prefs.recent_stores))
        self.recent_attach_menu.clear()
        for url in self._prefs.recent_attach:  # the token is asked again: it is never stored
            made = self.recent_attach_menu.addAction(url)
            made.triggered.connect(
                lambda _checked=False, where=url: self.open_attach_dialog(where))
        self.recent_attach_menu.setEnabled(bool(self._prefs.recent_attach)
                                           and self._services.attach is not None)

    def _update_actions(self) -> None:
        session = self._controller.session
        attached = self._controller.attached
        store_only = self._controller.views.store_only
        indexed = session is not None and not session.indexing
        writable = indexed and session is not None and not session.read_only
        for made in (self.import_action, self.conversation_action, self.demo_action,
                     self.imports_action, self.consolidate_action):
            made.setEnabled(writable)
        # issue 24: on a server store these ask for every record themselves, and wait
        on_demand = session is not None and session.on_demand
        self.export_action.setEnabled(indexed or on_demand)
        self.consolidate_action.setEnabled(writable or (
            on_demand and session is not None and not session.read_only))
        self.read_view_action.setEnabled(session is not None and session.indexing
                                         and not session.view_loading)
        foreign = session is not None and session.engine.store.foreign
        self.mapping_action.setEnabled(foreign and self._services.save_mapping is not None)
        # adopting reads every record first (issue 24: a server store's, only when asked)
        self.adopt_action.setEnabled(foreign and session is not None
                                     and self._services.open_target is not None)
        # issue 24: Find similar works on a store before its full view (its index answers)
        self.links.set_available(engine=indexed, writable=writable, store=session is not None)
        self.detach_action.setEnabled(attached is not None)
        for number, name in enumerate(self.views):  # engine views are off while attached
            item = self.nav.item(number)
            usable = attached is None or name not in store_only
            flags = item.flags()
            item.setFlags(flags | Qt.ItemFlag.ItemIsEnabled if usable
                          else flags & ~Qt.ItemFlag.ItemIsEnabled)
            keys = self.view_actions[name].shortcut().toString(
                QKeySequence.SequenceFormat.NativeText)
            tip = f"{NAVIGATION.get(name, name.capitalize())}" + (f" ({keys})" if keys else "")
            item.setToolTip(tip if usable else f"{tip}. Needs an open store: not available "
                                               "while attached to an agent's API")
        if attached is not None and list(self.views)[self.nav.currentRow()] in store_only:
            self.nav.setCurrentRow(0)
        self._show_no_store()

    def _show_no_store(self, opening: str = "") -> None:
        """Cover the views that need a store while none is open (or one is opening)."""
        session = self._controller.session
        if session is not None or self._controller.attached is not None:
            # issue 24: until the full view is read, the views that need it say so.
            waiting = session is not None and session.indexing
            for name, empty in self.no_store.items():
                if not waiting or name not in FULL_VIEW_FEATURES:
                    empty.clear()
                elif session is not None and session.view_loading:
                    empty.show_message(*waiting_message(name, *self._view_loaded),
                                       [self.cancel_view_action])
                elif session is not None:
                    empty.show_message(*unread_message(
                        name, cancelled=session.indexing_cancelled,
                        error=session.indexing_error), [self.read_view_action])
            return
        for empty in self.no_store.values():
            if opening:
                empty.show_message(f"Opening {opening}…", "The records appear as soon as "
                                   "the store answers.")
            else:
                empty.show_message(
                    "No store open", "Open a store folder, connect to a Chroma server, or "
                    "attach to an agent that runs its own `mnemoscope serve`.",
                    [self.open_action, self.connect_action, self.attach_action])

    # -- preferences and window state -------------------------------------------------------

    @property
    def preferences(self) -> Preferences:
        """The current preferences (geometry as of the last save)."""
        return self._prefs

    def _restore_window(self) -> None:
        if self._prefs.geometry:
            self.restoreGeometry(QByteArray(base64.b64decode(self._prefs.geometry)))
        if self._prefs.window_state:
            self.restoreState(QByteArray(base64.b64decode(self._prefs.window_state)))

    def _store_prefs(self, prefs: Preferences) -> None:
        self._prefs = prefs
        self._runner.submit(self._services.save_preferences, prefs)

    def set_theme(self, theme: str) -> None:
        """Apply and remember a theme (system, light or dark)."""
        app = QApplication.instance()
        if isinstance(app, QApplication):
            apply_theme(app, theme)
        for made in self.theme_actions.actions():
            made.setChecked(made.text().lower() == theme)
        self._store_prefs(dataclasses.replace(self._prefs, theme=theme))

    def on_system_scheme_changed(self) -> None:
        """Re-apply the theme when following the system and its scheme changed."""
        app = QApplication.instance()
        if self._prefs.theme == "system" and isinstance(app, QApplication):
            apply_theme(app, "system")

    def closeEvent(self, event: QCloseEvent) -> None:
        # unsaved edits in the Records form: asked first (closing dropped them without a word)
        answer = self.records.ask_about_edits("closing")
        if answer == QMessageBox.StandardButton.Cancel:
            event.ignore()
            return
        if answer == QMessageBox.StandardButton.Save:
            event.ignore()  # closed once they are saved (a refused edit keeps the window)
            spawn(self._save_then_close())
            return
        geometry = base64.b64encode(bytes(self.saveGeometry().data())).decode("ascii")
        state = base64.b64encode(bytes(self.saveState().data())).decode("ascii")
        self._store_prefs(dataclasses.replace(self._prefs, geometry=geometry,
                                              window_state=state))
        self.tasks_view.shutdown()
        super().closeEvent(event)

    async def settle_edits(self, before: str) -> bool:
        """Before the store shown goes (another store, an agent, an import's reopen): ask
        what becomes of the Records form's unsaved edits (they were dropped without a word).

        Returns:
            False when the person cancelled, or the edits were refused on saving.
        """
        answer = self.records.ask_about_edits(before)
        if answer == QMessageBox.StandardButton.Cancel:
            return False
        if answer == QMessageBox.StandardButton.Save:
            return await self.records.save_form()
        return True

    async def _save_then_close(self) -> None:
        if await self.records.save_form():
            self.records.detail.show_detail(None)  # saved: nothing left to ask about
            self.close()

    def paintEvent(self, event: QPaintEvent) -> None:
        super().paintEvent(event)
        if not self._painted:
            self._painted = True
            self.first_shown.emit()

    # -- banner and status -----------------------------------------------------------------

    def show_banner(self, text: str, button: str = "",
                    action: Callable[[], None] | None = None, *, warning: bool = True,
                    kind: str = "") -> None:
        """Show a message above the views, with an optional action button.

        Args:
            kind: What the banner is about (``"demo"``: the demo offer, which Dismiss declines
                for the store and records arriving take away).
        """
        self._banner_kind = kind
        self.banner_label.setText(text)
        self._banner_action = action
        self.banner_button.setVisible(bool(button and action))
        self.banner_button.setText(button)
        colour = "#fff4ce" if warning else "#ddf4ff"
        self.banner.setStyleSheet(f"QFrame#banner {{ background: {colour}; }}"
                                  "QFrame#banner QLabel { color: #1f2328; }")
        self.banner.show()

    def _on_banner_dismissed(self) -> None:
        session = self._controller.session
        if self._banner_kind == "demo" and session is not None:
            self._demo_declined.add(session.spec.location)
        self.banner.hide()

    def _on_banner_button_clicked(self) -> None:
        action = self._banner_action
        self.banner.hide()
        if action is not None:
            action()

    def show_model_state(self, status: EmbedderStatus) -> None:
        """Show the embedding model state: loading, ready, or fallback with the reason."""
        if status.state is EmbedderState.READY:
            text = f"model: ready ({status.model_name})"
            tip = f"{status.model_name}, {status.dimension}-d" + (
                f", run by {status.backend}" if status.backend else "") + (
                f"\n{status.reason}" if status.reason else "")  # e.g. the helper failed
        elif status.state is EmbedderState.FAILED:
            text = "model: fallback (Jaccard)"
            tip = status.reason or "no model"
        elif status.reason:  # the first launch converts the model (tens of seconds)
            text, tip = "model: preparing (first launch)…", status.reason
        else:
            text, tip = "model: loading…", f"loading {status.model_name} in the background"
        self.model_label.setText(text)
        self.model_label.setToolTip(tip)

    def show_redaction(self, on: bool) -> None:
        """Show whether redaction mode is on."""
        self.redaction_label.setText("redaction: on" if on else "redaction: off")
        self.redaction_label.setToolTip(
            "Secrets and personal data are masked in views and exports" if on
            else "Content is shown as stored")
        self.records.set_redactor(self._services.redactor if on else None)
        self.observe.set_redactor(self._services.redactor if on else None)
        self.layers.set_redactor(self._services.redactor if on else None)
        self.redaction_label.setStyleSheet("color: #cf222e; font-weight: 600;" if on else "")

    def _on_redaction_changed(self, on: bool) -> None:
        self.redaction_action.setChecked(on)
        self.show_redaction(on)
        self._store_prefs(dataclasses.replace(self._prefs, redaction=on))

    def show_record(self, record_id: str) -> None:
        """Switch to the records view and select ``record_id``."""
        self.nav.setCurrentRow(list(self.views).index("records"))
        self.records.go_to_record(record_id)

    def _on_view_message(self, text: str) -> None:
        self.statusBar().showMessage(text, 5000)

    # -- stores: the controller opens and closes them; the window shows what it says --------

    @property
    def controller(self) -> AppControl:
        """The application controller (``app/controller.py``) this window shows."""
        return self._controller

    @property
    def session(self) -> StoreSession | None:
        """The open store."""
        return self._controller.session

    def open_location(self, location: str, *, read_only: bool = False,
                      token: str | None = None, collection: str | None = None) -> None:
        """Open a directory or server URL (from a menu or the command line)."""
        spec = StoreSpec(location, token=token, read_only=read_only) if collection is None \
            else StoreSpec(location, token=token, read_only=read_only, collection=collection)
        spawn(self.open_store(spec))

    async def open_store(self, spec: StoreSpec) -> StoreSession | None:
        """Open ``spec`` through the controller; a locked store opens read-only with a banner.

        Returns:
            The session, or None when the store could not be opened (the banner says why).
        """
        if not await self.settle_edits("opening another store"):
            return None
        self._show_no_store(opening=spec.location)
        self._last_error = ""
        session = await self._controller.open_store(spec)
        if session is None:
            if self._last_error:
                self.store_failed.emit(self._last_error)
            return None
        self.store_opened.emit(session)
        return session

    def _on_session_changed(self, session: DataSession | None) -> None:
        """The controller shows another session (or none): undo, labels, banner, actions."""
        store = session if isinstance(session, StoreSession) else None
        if store is not self._shown_store:
            old, self._shown_store = self._shown_store, store
            if old is not None and shiboken6.isValid(old):
                self.undo_group.removeStack(old.undo_stack)
                old.failed.disconnect(self._on_session_failed)
                old.indexing_progress.disconnect(self._on_indexing_progress)
                old.indexing_started.disconnect(self._on_view_read_changed)
                old.indexing_finished.disconnect(self._on_view_read_changed)
            if store is not None:
                self.undo_group.addStack(store.undo_stack)
                self.undo_group.setActiveStack(store.undo_stack)
                store.failed.connect(self._on_session_failed)
                store.indexing_progress.connect(self._on_indexing_progress)
                store.indexing_started.connect(self._on_view_read_changed)
                store.indexing_finished.connect(self._on_view_read_changed)
                self._show_store_banner(store)
                self.show_model_state(store.engine.embedding_status())
                self.store_label.setToolTip(store.spec.location)
                self._remember_store(store.spec.location)
                self._on_nav_changed(self.nav.currentRow())  # opened on a view that needs it
        self._show_indexing(store if store is not None and store.view_loading else None)
        if isinstance(session, AttachedSession):
            self._on_attached(session)
        elif session is None:
            self.store_label.setToolTip("")
            if self._banner_kind == "attached":
                self.banner.hide()
        self._update_actions()

    def _show_store_banner(self, store: StoreSession) -> None:
        """What the banner says about a store just shown: another tool's collection offers
        its next step (map its fields when no layout was recognised, else adopt it)."""
        foreign = store.engine.store.foreign_info
        if foreign is not None and foreign.layout is ForeignLayout.PLAIN \
                and self._services.save_mapping is not None:
            # no known tool's layout: which key holds what is the first question
            self.show_banner(store.banner, "Map Fields…", self._on_field_mapping_triggered,
                             warning=False)
        elif foreign is not None and self._services.open_target is not None:
            self.show_banner(store.banner, "Adopt…", self._on_adopt_triggered, warning=False)
        elif store.banner:
            self.show_banner(store.banner)
        else:
            self.banner.hide()  # the demo offer comes back if this store is empty

    def _remember_store(self, location: str) -> None:
        """Put ``location`` first in File → Recent Stores."""
        if self._prefs.recent_stores[:1] == (location,):
            return
        self._store_prefs(dataclasses.replace(
            self._prefs, recent_stores=tuple(
                [location, *[r for r in self._prefs.recent_stores if r != location]][:10])))
        self._rebuild_recent_menu()

    def _on_store_state_changed(self, text: str) -> None:
        self.store_label.setText(text)

    def _on_controller_error(self, message: str) -> None:
        self._last_error = message
        if self._attach_dialog is not None and _is_open(self._attach_dialog):
            self._attach_dialog.show_error(message)  # the dialog asked: it shows the answer
            return
        if self._attaching:
            message = f"Could not attach to {self._attaching}: {message}"
        self.show_banner(message)

    def _on_controller_notice(self, text: str) -> None:
        self.show_banner(text, warning=False)

    def _on_count_changed(self, count: int) -> None:
        session = self._controller.session or self._controller.attached
        self.records.set_store_count(count if count >= 0 and session is not None else None)
        if count < 0:
            self.count_label.setText("count unavailable")
            return
        self.count_label.setText(count_of(count, "record") if session is not None else "")
        self.count_label.setToolTip("")
        if self._controller.session is not None:
            self._maybe_offer_demo(self._controller.session)

    def _on_review_count_changed(self, pending: int) -> None:
        """The Review entry in the sidebar and the status bar follow the queue."""
        item = self.nav.item(list(self.views).index("review"))
        item.setText(f"Review ({pending:,})" if pending else "Review")
        self.review_label.setText(f"{count_of(pending, 'review')} pending" if pending else "")
        self.review_label.setVisible(bool(pending))
        review = self.observe.review
        if review.loads and len(review.items) != pending:
            review.refresh()  # a write that changed no record (a deferral) changed the queue

    def _on_busy(self, what: str) -> None:
        if what:
            self.statusBar().showMessage(what)
        else:
            self.statusBar().clearMessage()

    def _on_records_first_page(self, *_args: object) -> None:
        """The table's first page arrived (or failed): the controller attaches the others."""
        self._controller.first_page_shown()

    def _show_indexing(self, session: StoreSession | None) -> None:
        """Show (or hide, None) the status bar's indexing progress and Cancel."""
        for widget in (self.index_label, self.index_bar, self.index_cancel):
            widget.setVisible(session is not None)
        if session is not None and self._indexing_shown is not session:
            self._view_loaded = (0, 0)
            self._show_loading(session, 0, 0)
            self.index_bar.setRange(0, 0)  # busy until the first progress report
            self.index_cancel.setEnabled(True)
        self._indexing_shown = session

    def _on_indexing_progress(self, done: int, total: int) -> None:
        session = self._controller.session
        if session is None or not session.view_loading:
            return  # a report that arrived after the read ended
        self._view_loaded = (done, total)
        self._show_loading(session, done, total)
        self._show_no_store()  # the waiting views' counts
        self.index_bar.setRange(0, max(1, total))
        self.index_bar.setValue(done)

    def _show_loading(self, session: StoreSession, done: int, total: int) -> None:
        """The status bar's words for the read (short; the whole sentence on hover)."""
        self.index_label.setText(loading_status(session.view_wanted_by, done, total))
        self.index_label.setToolTip(loading_sentence(session.view_wanted_by, done, total))

    def _on_nav_changed(self, row: int) -> None:
        """A view that needs every record was opened: the controller reads them (issue 24)."""
        name = list(self.views)[row] if 0 <= row < len(self.views) else ""
        if name in FULL_VIEW_FEATURES:
            self._controller.need_full_view(FULL_VIEW_FEATURES[name])

    def _on_read_view_triggered(self) -> None:
        """Store → Read Every Record, or a waiting view's button: read the full view for the
        view shown (or for the menu's features when Records is shown)."""
        name = list(self.views)[self.nav.currentRow()]
        self._controller.need_full_view(FULL_VIEW_FEATURES.get(name, ""))

    def _on_view_read_changed(self, *_args: object) -> None:
        """A read of the full view started or ended: the status bar, the waiting views and
        the menu follow."""
        session = self._controller.session
        if session is None or self.sender() is not session:
            return
        if session.view_loading:
            self._indexing_shown = None  # a new read: progress from zero
        self._show_indexing(session if session.view_loading else None)
        self._update_actions()

    def _on_index_cancel_clicked(self) -> None:
        session = self._controller.session
        if session is not None and session.view_loading:
            self.index_cancel.setEnabled(False)
            self.index_label.setText("Cancelling…")
            session.cancel_indexing()

    def _on_gateway_changed(self, gateway: LLMGateway | None, engine: MemoryEngine | None,
                            problem: str) -> None:
        if gateway is None or engine is None:
            self.budget.set_gateway(None, None, None, None)
            if problem:
                self.budget.provider_label.setText(problem)
            return
        self.budget.set_gateway(gateway, engine.ledger, engine.events, engine.clock)
        if problem:
            self.budget.set_problem(problem)

    @property
    def gateway(self) -> LLMGateway | None:
        """The running LLM gateway (None without a store or provider services)."""
        return self._controller.gateway

    @property
    def llm_settings(self) -> LLMSettings:
        """The LLM provider settings in effect."""
        return self._controller.llm_settings

    def open_provider_settings(self) -> ProviderSettingsDialog | None:
        """Settings → LLM Provider… (also the Budget view's button): the dialog, window-modal.

        A test connection is recorded in the open store's ledger and events.
        """
        llm = self._services.llm
        if llm is None:
            return None
        if self.provider_dialog is not None:
            self.provider_dialog.raise_()
            return self.provider_dialog
        session = self._controller.session
        engine = session.engine if session is not None else None
        dialog = ProviderSettingsDialog(
            self._runner, self._controller.llm_settings, llm.secrets,
            ledger=engine.ledger if engine is not None else None,
            events=engine.events if engine is not None else None,
            clock=engine.clock if engine is not None else None,
            env_overrides=llm.env_overrides, parent=self)
        dialog.saved.connect(self._on_provider_saved)
        dialog.finished.connect(self._on_provider_dialog_finished)
        self.provider_dialog = dialog
        dialog.open()
        return dialog

    def _on_provider_triggered(self) -> None:
        self.open_provider_settings()

    def _on_provider_saved(self, settings: LLMSettings) -> None:
        spawn(self.apply_llm_settings(settings))

    def _on_provider_dialog_finished(self, _result: int) -> None:
        dialog, self.provider_dialog = self.provider_dialog, None
        if dialog is not None:
            dialog.deleteLater()

    async def apply_llm_settings(self, settings: LLMSettings) -> bool:
        """Persist ``settings`` and rebuild the running gateway (the controller's work).

        Returns:
            False when the settings file could not be written (the settings still apply to
            this session; the banner says so).
        """
        if self._services.llm is None:
            return False
        saved = await self._controller.apply_llm_settings(settings)
        what = f"{settings.provider} · {settings.model}" if settings.configured else "none"
        self._on_view_message(f"LLM provider settings {'saved' if saved else 'applied'}: "
                              f"{what}")
        return saved

    async def close_store(self) -> None:
        """Close the open store (after its pending writes) on a worker, or detach."""
        await self._controller.close_store()

    def _on_lifecycle_toggled(self, enabled: bool) -> None:
        self._store_prefs(dataclasses.replace(self._prefs, lifecycle=enabled))

    def _on_lifecycle_ran(self, run: LifecycleRun) -> None:
        """A scheduled run removed records: the count and the views follow."""
        if self._controller.session is not None and run.changed:
            self._on_refresh_triggered()

    def _on_session_failed(self, message: str) -> None:
        QMessageBox.warning(self, "Mnemoscope", message)

    def _maybe_offer_demo(self, session: StoreSession) -> None:
        """Offer the demo data set in the banner whenever a writable store is empty.

        Not only on the first launch: any empty store (a new folder, one emptied by deletes)
        gets the offer, unless its banner was dismissed for that store in this run. The
        offer goes away by itself once the store has records.
        """
        if self._controller.count > 0:
            if self._banner_kind == "demo":
                self.banner.hide()
            return
        if (session.read_only or self._services.demo_memories is None
                or session.spec.location in self._demo_declined
                or (self._banner_kind == "demo" and self.banner.isVisible())):
            return
        first = not self._prefs.demo_offered
        if first:
            self._store_prefs(dataclasses.replace(self._prefs, demo_offered=True))
        what = ("the demo data set (memories of several agents over all six layers, with "
                "duplicates, contradictions and a few fake secrets)")
        text = f"Welcome to Mnemoscope. This store is empty — load {what}?" if first else \
            f"This store is empty. Load {what} to explore, or import your own (Ctrl+I)?"
        self.show_banner(text, "Load demo data", self._on_load_demo_triggered, warning=False,
                         kind="demo")

    def _on_open_folder_triggered(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a store folder")
        if folder:
            self.open_location(folder)

    def _on_connect_triggered(self) -> None:
        dialog = ConnectDialog(self)
        if dialog.exec():
            self.open_location(dialog.url.text().strip(), read_only=dialog.read_only.isChecked(),
                               token=dialog.token.text().strip() or None,
                               collection=dialog.collection.text().strip())

    def _on_open_collection_triggered(self) -> None:
        location, ok = QInputDialog.getText(
            self, "Open a Chroma collection",
            "A Chroma directory or server URL (collections are listed next):")
        if ok and location.strip():
            spawn(self.choose_collection(location.strip()))

    async def choose_collection(self, location: str) -> None:
        """List the collections at ``location`` on a worker, let the user pick one, open it."""
        try:
            found = await self._runner.run(self._services.list_collections,
                                           StoreSpec(location, read_only=True))
        except EngineError as exc:
            QMessageBox.warning(self, "Open collection", f"Cannot list collections: {exc}")
            return
        if not found:
            QMessageBox.information(self, "Open collection", f"No collections in {location}.")
            return
        dialog = CollectionDialog(location, found, self)
        chosen = dialog.chosen() if dialog.exec() else None
        if chosen:
            await self.open_store(StoreSpec(location, read_only=dialog.read_only.isChecked(),
                                            collection=chosen))

    # -- collections of other tools (issue 22; ui/imports/foreign_dialogs.py) ----------------------

    def _on_field_mapping_triggered(self) -> None:
        spawn(self.edit_field_mapping())

    async def edit_field_mapping(
            self, opened: Callable[[QWidget], None] | None = None) -> StoreSession | None:
        """Map the open foreign collection's fields, save the mapping, open it again with it.

        Returns:
            The reopened session, or None when nothing was saved.
        """
        session = self._controller.session
        save = self._services.save_mapping
        if session is None or save is None or not session.engine.store.foreign:
            return None
        try:
            choice = await edit_field_mapping(self, session, self._runner,
                                              show=self.redaction.show, opened=opened)
        except EngineError as exc:
            QMessageBox.warning(self, "Field mapping", f"Cannot read the collection: {exc}")
            return None
        if choice is None or session is not self._controller.session:
            return None
        spec = session.spec
        try:
            await self._runner.run(save, spec.location, spec.collection, choice.mapping)
        except (OSError, EngineError) as exc:
            QMessageBox.warning(self, "Field mapping", f"The mapping was not saved: {exc}")
            return None
        return await self.open_store(spec)  # read again through the saved mapping

    def _on_adopt_triggered(self) -> None:
        spawn(self.adopt_collection())

    async def adopt_collection(self, target: str | None = None,
                               opened: Callable[[QWidget], None] | None = None
                               ) -> ImportSummary | None:
        """Adopt the open foreign collection into a Mnemoscope store (``target``, or asked)."""
        session = self._controller.session
        open_target = self._services.open_target
        if session is None or open_target is None or not session.engine.store.foreign:
            return None
        if not await session.read_view("Adopt"):  # the records to copy: from the view
            return None
        return await adopt_collection(self, session, self._runner, open_target,
                                      show=self.redaction.show, target=target, opened=opened)

    # -- attaching to a running agent (issue 10) -------------------------------------------

    @property
    def attached_session(self) -> AttachedSession | None:
        """The agent attached to, if any."""
        return self._controller.attached

    def _on_attach_triggered(self) -> None:
        self.open_attach_dialog()

    def open_attach_dialog(self, url: str = "") -> AttachDialog | None:
        """Ask for the URL (``url`` or the most recent) and token, then attach (non-modal)."""
        if self._services.attach is None:
            return None
        dialog = AttachDialog(self._prefs.recent_attach, self, url=url)
        dialog.attach_requested.connect(
            lambda where, token: spawn(self.attach(where, token, dialog=dialog)))
        dialog.finished.connect(dialog.deleteLater)
        dialog.open()
        return dialog

    def _on_detach_triggered(self) -> None:
        spawn(self.detach())

    async def attach(self, url: str, token: str, *,
                     dialog: AttachDialog | None = None) -> AttachedSession | None:
        """Attach to ``url`` through the controller and show the agent read-only.

        Errors (wrong token, unreachable server, not an introspection API) are shown in
        ``dialog`` when given, else in the banner.

        Returns:
            The session, or None when attaching failed.
        """
        if self._services.attach is None or not await self.settle_edits("attaching"):
            return None
        if dialog is not None:
            dialog.set_busy(True)
        self._attach_dialog, self._attaching = dialog, url
        self._last_error = ""

        def connected() -> bool:
            """Connected: close the dialog, unless the person cancelled it meanwhile."""
            if dialog is None:
                return True
            if not _is_open(dialog):
                return False
            dialog.accept()
            return True

        try:
            session = await self._controller.attach(url, token, still_wanted=connected)
        finally:
            self._attach_dialog, self._attaching = None, ""
        if session is None:
            if self._last_error:
                self.attach_failed.emit(self._last_error)
            return None
        self._store_prefs(dataclasses.replace(self._prefs, recent_attach=tuple(
            [session.location, *[u for u in self._prefs.recent_attach
                                 if u != session.location]][:10])))
        self._rebuild_recent_menu()
        self.attached.emit(session)
        return session

    def _on_attached(self, session: AttachedSession) -> None:
        """The controller shows an attached agent: its labels and banner."""
        session.relay.changed.connect(self._on_connection_changed)
        self.store_label.setToolTip(f"Introspection API of a running agent: {session.location}")
        self.model_label.setText("model: (the agent's)")
        self.model_label.setToolTip("The embedding model runs in the agent's process")
        self._show_attached_banner()

    def _show_attached_banner(self, problem: str = "") -> None:
        session = self._controller.attached
        if session is None:
            return
        text = f"Attached to {session.location} (read-only). Editing is off; the " \
               "pipeline, review, retrieval, map, secrets, fate and budget views need an " \
               "open store."
        if problem:
            text = f"Attached to {session.location} (read-only) — {problem}"
        self.show_banner(text, "Detach", self._on_detach_triggered, warning=bool(problem),
                         kind="attached")

    def _on_connection_changed(self, problem: str) -> None:
        self._show_attached_banner(problem)

    async def detach(self) -> None:
        """Stop showing the attached agent; the store shown before attaching comes back."""
        await self._controller.detach()

    # -- import / export -------------------------------------------------------------------

    async def open_demo_workspace(self) -> Path | None:
        """Copy the demo task workspace to a temporary folder (worker) and open the copy.

        A copy, because a workspace is written to (its cache, a person's edits) and the shipped
        one may be read-only. The Tasks view owns the copy's folder: it is deleted when another
        workspace (or a new copy) replaces it and when the window closes.
        """
        source = self._services.demo_workspace
        if source is None:
            return None
        try:
            copy: Path = await self._runner.run(_copy_workspace, source)
        except OSError as exc:
            QMessageBox.warning(self, "Demo workspace", f"Could not copy {source}: {exc}")
            return None
        await self.tasks_view.open_workspace(copy, scratch=copy.parent)
        return copy

    def _on_load_demo_triggered(self) -> None:
        if self._services.demo_memories is not None:
            spawn(self.run_import(self._services.demo_memories))

    def _on_import_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import memories (JSONL)", "",
                                              "JSON Lines (*.jsonl *.ndjson);;All files (*)")
        if path:
            spawn(self.run_import(Path(path)))

    def _on_import_conversation_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import a conversation", "",
                                              "JSON (*.json);;All files (*)")
        if path:
            spawn(self.import_conversation(Path(path)))

    async def import_conversation(
            self, path: Path, *,
            opened: Callable[[ConversationPreviewDialog], None] | None = None,
    ) -> ImportSummary | None:
        """Issue 20: name the file's format, preview the import (nothing written), and import
        with the agent and salience cut the user confirmed (:mod:`ui.imports.import_dialogs`).

        Returns:
            The summary, or None when nothing was imported.
        """
        session = self._controller.session
        if session is None or session.read_only:
            return None
        choice = await preview_conversation_import(self, session, self._runner, path,
                                                   show=self.redaction.show, opened=opened)
        if choice is None or session is not self._controller.session:
            return None
        return await self.run_import(path, conversation_agent=choice.agent_id,
                                     keep=choice.keep)

    def _on_imports_triggered(self) -> None:
        if (session := self._controller.session) is not None:
            dialog = ImportsDialog(session, self._runner, self)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.open()
            dialog.refresh()

    def _on_consolidate_triggered(self) -> None:
        if self._controller.session is not None and not self._controller.session.read_only:
            dialog = ConsolidateDialog(self._controller.session, self._runner, self,
                                       redaction=self.redaction)
            dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            dialog.open()
            dialog.start()

    def _push_import(self, session: StoreSession, path: Path, summary: ImportSummary) -> None:
        """Edit → Undo takes a finished import back as one step (:class:`ImportCommand`)."""
        if summary.import_id is not None and summary.written:
            session.undo_stack.push(ImportCommand(
                self, session, self._runner, summary.import_id,
                f"Import {path.name} ({count_of(summary.written, 'record')})"))

    async def run_import(self, path: Path, *, conversation_agent: str | None = None,
                         keep: SalienceCut | None = None,
                         dialog: ImportProgressDialog | None = None) -> ImportSummary | None:
        """Import ``path`` through the controller with a progress dialog (Cancel undoes the
        partial run).

        ``keep`` is a conversation's salience cut (default: the salient turns).

        Returns:
            The summary, or None when the import failed (the dialog says why).
        """
        session = self._controller.session
        if session is None or session.read_only or not await self.settle_edits("importing"):
            return None
        dialog = dialog or ImportProgressDialog(f"Import {path.name}", self,
                                                show=self.redaction.show)
        flag = CancelFlag()
        dialog.cancel_requested.connect(flag.set)
        dialog.open()
        await asyncio.sleep(0)  # let the loop paint the dialog before the views are cleared
        progress = self._runner.progress_relay(dialog.set_progress)
        try:
            summary = await self._controller.run_import(
                path, conversation_agent=conversation_agent, progress=progress,
                cancelled=flag.is_set, keep=keep)
        except EngineError as exc:
            dialog.fail(str(exc))
            return None
        dialog.finish(summary)
        self._push_import(session, path, summary)
        return summary

    def _on_export_triggered(self) -> None:
        if self._controller.session is None:
            return
        options = ExportOptionsDialog(self)
        if not options.exec():
            return
        path, _ = QFileDialog.getSaveFileName(self, "Export records", "memories.jsonl",
                                              "JSON Lines (*.jsonl)")
        if path:
            spawn(self.run_export(Path(path), redact=options.redact.isChecked()
                                  or self.redaction.enabled))

    async def run_export(self, path: Path, *, redact: bool) -> int | None:
        """Export every record to ``path`` on a worker; returns the count (None on failure)."""
        session = self._controller.session
        if session is None:
            return None
        redact = redact or self.redaction.enabled  # issue 9: redaction mode masks exports too
        if not await session.read_view("Export"):  # every record, read on demand (issue 24)
            QMessageBox.warning(self, "Export", "Nothing was exported: the store's records "
                                "were not all read.")
            return None
        try:
            count: int = await self._runner.run(
                export_records, session.engine, path,
                redact=self._services.redactor if redact else None)
        except EngineError as exc:
            QMessageBox.warning(self, "Export", f"Export failed: {exc}")
            return None
        how = "redacted" if redact else "not redacted"
        self.statusBar().showMessage(f"Exported {count_of(count, 'record')} to {path} ({how})",
                                     8000)
        return count

    def _on_about_triggered(self) -> None:
        QMessageBox.about(
            self, "About Mnemoscope",
            f"<h3>Mnemoscope {self._services.version}</h3>"
            "<p>See and steer what your LLM agents remember: browse and edit memories, "
            "watch merge decisions, ask why a memory was retrieved.</p>"
            "<p>Memories live in Chroma; edits are recorded and undoable.</p>")
