"""What the three layer views share: a session, loading on a worker, refreshing when shown.

A :class:`LayerTab` reads its data with one blocking :meth:`LayerTab.fetch` call on the task
runner (STYLE §3: snapshot → worker → apply, stale answers dropped by token) through the
session's :class:`~engine.reader.MemoryReader` — a local engine or an attached agent alike. It
reloads when its session says records changed, but only while visible (else on the next show),
debounced so a burst of ingests is one reload. Every tab links to the records view through
:attr:`LayerTab.record_selected`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from PySide6.QtCore import QEvent, Qt, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction, QShowEvent
from PySide6.QtWidgets import QBoxLayout, QSplitter, QTreeWidgetItem, QVBoxLayout, QWidget

from engine import MemoryReader
from engine.errors import EngineError
from ui.observe.timeline_view import current_theme
from ui.shared.empty_state import EmptyState
from ui.shared.record_tree import RecordTree
from ui.shared.session import DataSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn

__all__ = ["LayerTab"]

T = TypeVar("T")


class LayerTab(QWidget, Generic[T]):
    """Base of the social, procedural and spatial views.

    Subclasses implement :meth:`fetch` (worker), :meth:`show_data`, :meth:`show_error`,
    :meth:`clear` and :meth:`apply_theme` (GUI thread).

    Signals:
        record_selected(str): Show this record in the records view.
        message(str): A short status message.
    """

    record_selected = QtSignal(str)
    message = QtSignal(str)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: DataSession | None = None
        self._tokens = RequestTokens()
        self._redact: Callable[[str], str] | None = None
        self.record_trees: list[RecordTree] = []  # the tab's lists of records
        self.empty_state: EmptyState | None = None  # over the tab's graph and detail
        self.empty_actions: tuple[QAction, ...] = ()  # the window's ways to fill the store
        self._stale = False
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(300)
        self._debounce.timeout.connect(self.refresh)

    # -- shared construction -----------------------------------------------------------------

    def lay_out(self, bar: QBoxLayout, main: QWidget, side: QWidget, *,
                stretch: tuple[int, int], sizes: tuple[int, int]) -> QVBoxLayout:
        """The tabs' layout: ``bar`` above ``main`` beside ``side`` (a splitter); returned so a
        tab can add rows below."""
        split = QSplitter(Qt.Orientation.Horizontal, self)
        split.addWidget(main)
        split.addWidget(side)
        split.setStretchFactor(0, stretch[0])
        split.setStretchFactor(1, stretch[1])
        split.setSizes(list(sizes))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 8, 8, 8)
        layout.addLayout(bar)
        layout.addWidget(split, 1)
        self.empty_state = EmptyState(split, "layers")
        return layout

    def show_empty(self, empty: bool, title: str, text: str) -> None:
        """Cover the tab with what to do next (``title``, ``text`` and the window's actions that
        fill the store) while ``empty``; uncover it otherwise."""
        if self.empty_state is None:
            return
        if empty:
            self.empty_state.show_message(title, text, self.empty_actions)
        else:
            self.empty_state.clear()

    def record_tree(self, headers: list[str], widths: tuple[int, ...]) -> RecordTree:
        """A list of records whose last column is their text; a click on a row opens its
        record.

        The tree is also listed in :attr:`record_trees`, for the window's record context menu.
        """
        tree = RecordTree(headers, len(headers) - 1, widths, self)
        self.record_trees.append(tree)

        def open_record(item: QTreeWidgetItem, _column: int = 0) -> None:
            record_id = tree.record_id(item)
            if record_id is not None:
                self.record_selected.emit(record_id)

        tree.itemClicked.connect(open_record)
        tree.itemActivated.connect(open_record)
        return tree

    # -- what subclasses provide -------------------------------------------------------------

    @staticmethod
    def fetch(reader: MemoryReader) -> T:
        """Read the tab's data (runs on a worker; must not touch Qt)."""
        raise NotImplementedError

    def show_data(self, data: T) -> None:
        """Draw ``data`` (GUI thread)."""
        raise NotImplementedError

    def show_error(self, text: str) -> None:
        """Say that loading failed and why."""
        raise NotImplementedError

    def clear(self) -> None:
        """Show nothing (no session)."""
        raise NotImplementedError

    def apply_theme(self, name: str) -> None:
        """Colours of theme ``name`` (plots)."""
        raise NotImplementedError

    # -- session -----------------------------------------------------------------------------

    @property
    def session(self) -> DataSession | None:
        """The store or attached agent shown."""
        return self._session

    def set_session(self, session: DataSession | None) -> None:
        """Show ``session``'s layer (loaded when the tab is shown)."""
        if self._session is not None:
            self._session.records_changed.disconnect(self._on_records_changed)
        self._session = session
        self._tokens.next_token()  # drop answers for the previous session
        self.clear()
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
            self._stale = True
            if self.isVisible():
                self.refresh()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask text with ``redact`` (None: as stored); what is shown is loaded again."""
        changed = redact is not self._redact
        self._redact = redact
        if changed and self._session is not None:
            self._stale = True
            if self.isVisible():
                self.refresh()

    def _shown(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text

    def _on_records_changed(self, _ids: list[str]) -> None:
        self._stale = True
        if self.isVisible():
            self._debounce.start()

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        if self._stale:
            self.refresh()

    def refresh(self) -> None:
        """Load again (on a worker)."""
        if self._session is not None:
            self._stale = False
            spawn(self.load())

    async def load(self) -> T | None:
        """Fetch on a worker and show; returns the data (None: no session, stale or failed)."""
        session = self._session
        if session is None:
            return None
        token = self._tokens.next_token()
        try:
            data = await self._runner.run(self.fetch, session.reader)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self.show_error(str(exc))
            return None
        if not self._tokens.is_current(token) or session is not self._session:
            return None
        self.show_data(data)
        return data

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.PaletteChange:
            self.apply_theme(current_theme())
        super().changeEvent(event)
