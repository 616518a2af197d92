"""The Records view: filters, the lazily paged table, the detail/edit panel and bulk actions.

Filters become a :class:`~engine.query.RecordQuery` the engine answers (numpy over the columnar
view); the table model fetches pages of it on workers. Selecting a row fetches the record's
detail (:func:`engine.browse.record_detail`) on a worker, dropping stale answers by token.
Reads go through the session's :class:`~engine.reader.MemoryReader`, so an attached agent
(read-only) is browsed with the same view. While a store's view is still being read
(a Chroma server store at scale), the table pages through Chroma newest-written first and
Chroma answers its filters and text search (issue 24); a sort by another column or a tag filter
asks for every record to be read into the process and waits with a note naming it and the
read's progress, and editing is off until they are read. Find similar asks the store's HNSW
index and shows the nearest records under the table (:mod:`ui.records.similar_panel`). Writes
go through a :class:`~ui.shared.session.StoreSession` (serialized, undoable).
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any

from PySide6.QtCore import (
    QDate,
    QDateTime,
    QEvent,
    QItemSelectionModel,
    QObject,
    Qt,
    QTime,
    QTimer,
    QTimeZone,
)
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QInputDialog,
    QLabel,
    QLineEdit,
    QMenu,
    QMessageBox,
    QSplitter,
    QTableView,
    QToolBar,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from engine import (
    ALL_STATES,
    SHOWN_STATES,
    Facets,
    Masking,
    MemoryReader,
    RecordDetail,
    RecordQuery,
    RecordRow,
    SimilarRecords,
    similar_records,
)
from engine.errors import EngineError, RecordNotFound, ValidationError
from engine.records import Layer, MemoryRecord, RecordState
from ui.records.record_detail import RecordDetailPanel
from ui.records.record_links import RecordRef
from ui.records.records_model import COLUMNS, ROLE_RECORD_ID, RecordTableModel
from ui.records.similar_panel import SimilarPanel
from ui.shared.choices import chosen_privacy, fill_privacy
from ui.shared.dialogs import AddMemoryDialog
from ui.shared.empty_state import EmptyState
from ui.shared.format import quoted
from ui.shared.session import DataSession, StoreSession
from ui.shared.tasks import RequestTokens, TaskRunner, spawn
from ui.shared.wording import count_of

__all__ = ["FilterBar", "RecordsView"]

ROW_HEIGHT = 24
_ANY = "Any"
_SCAN_PAGE = 500  # the introspection API's largest page
_SCAN_LIMIT = 20_000
_ID_PAGE = 10_000  # the engine's largest page of rows
CONTENT_SHARE = 0.45
"""The Content column takes the table's spare width, and at least this share of it (the
other columns then scroll), so the text a person reads is never a fixed sliver (issue 19)."""


STATE_CHOICES: tuple[tuple[str, frozenset[RecordState]], ...] = (
    ("Active and paused", SHOWN_STATES),  # the default: archived records are hidden
    ("Active", frozenset({RecordState.ACTIVE})),
    ("Paused", frozenset({RecordState.PAUSED})),
    ("Archived", frozenset({RecordState.ARCHIVED})),
    (_ANY, ALL_STATES),
)
"""The State filter's choices (issue 20 soft states) and the states each one shows."""
_STATE_WORDS = {
    RecordState.PAUSED: ("Pause", "paused", "Paused records stay stored and listed but are not "
                         "retrieved until resumed."),
    RecordState.ARCHIVED: ("Archive", "archived", "Archived records stay stored but are hidden "
                           "from this list (the State filter shows them) and are not retrieved "
                           "until resumed."),
    RecordState.ACTIVE: ("Resume", "active", "Resumed records are retrieved again."),
}
"""Per target state: the verb, the state's word and what it means (confirmations)."""


def _day_start_ms(date: QDate) -> float:
    return float(QDateTime(date, QTime(0, 0), QTimeZone.utc()).toMSecsSinceEpoch())


class _ChoicesCombo(QComboBox):
    """A combo box that says when its list is opened (its choices may still be to read).

    Signals:
        opened(): The list is about to show.
    """

    opened = QtSignal()

    def showPopup(self) -> None:
        self.opened.emit()
        super().showPopup()


class FilterBar(QWidget):
    """Filter inputs; emits the query they describe (debounced for typing).

    Signals:
        query_changed(object): A :class:`RecordQuery` with the new filters (page fields unset).
        agent_choices_wanted(): The agent list was opened (on a server store its choices need
            every record read: issue 24).
    """

    query_changed = QtSignal(object)
    agent_choices_wanted = QtSignal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._debounce = QTimer(self)
        self._debounce.setSingleShot(True)
        self._debounce.setInterval(250)
        self._debounce.timeout.connect(self._emit)
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        self.text = QLineEdit(self)
        self.text.setPlaceholderText("Search content…")
        self.text.setClearButtonEnabled(True)
        self.agent = _ChoicesCombo(self)
        self.agent.opened.connect(self.agent_choices_wanted)
        self.agent.setMinimumContentsLength(8)
        self.agent.setSizeAdjustPolicy(
            QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.agent.addItem(_ANY)
        self.layer = QComboBox(self)
        self.layer.addItems([_ANY, *(layer.value for layer in Layer)])
        self.privacy = QComboBox(self)
        fill_privacy(self.privacy, any_text=_ANY)
        self.state = QComboBox(self)
        self.state.addItems([label for label, _ in STATE_CHOICES])
        self.state.setToolTip("Paused records are kept and listed but never retrieved; archived "
                              "ones are also hidden here unless this filter shows them")
        top.addWidget(self.text, 3)
        for label, widget in (("Agent", self.agent), ("Layer", self.layer),
                              ("Privacy", self.privacy), ("State", self.state)):
            top.addWidget(QLabel(label, self))
            top.addWidget(widget, 1)
        bottom = QHBoxLayout()
        bottom.setContentsMargins(0, 0, 0, 0)
        self.tags = QLineEdit(self)
        self.tags.setPlaceholderText("Tags (all of, comma-separated)")
        self.tags.setClearButtonEnabled(True)
        self.importance_min = self._unit(0.0)
        self.importance_max = self._unit(1.0)
        self.dates = QCheckBox("Created", self)
        self.date_from = QDateEdit(self)
        self.date_to = QDateEdit(self)
        today = QDate.currentDate()
        for edit, value in ((self.date_from, today.addDays(-30)), (self.date_to, today)):
            edit.setCalendarPopup(True)
            edit.setDisplayFormat("yyyy-MM-dd")
            edit.setDate(value)
            edit.setEnabled(False)
        self.clear_button = QToolButton(self)
        self.clear_button.setText("Clear")
        self.clear_button.setToolTip("Clear all filters")
        bottom.addWidget(self.tags, 2)
        bottom.addWidget(QLabel("Importance", self))
        bottom.addWidget(self.importance_min)
        bottom.addWidget(QLabel("–", self))
        bottom.addWidget(self.importance_max)
        bottom.addWidget(self.dates)
        bottom.addWidget(self.date_from)
        bottom.addWidget(QLabel("–", self))
        bottom.addWidget(self.date_to)
        bottom.addWidget(self.clear_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(4)
        layout.addLayout(top)
        layout.addLayout(bottom)
        self.text.textChanged.connect(self._debounce.start)
        self.tags.textChanged.connect(self._debounce.start)
        for combo in (self.agent, self.layer, self.privacy, self.state):
            combo.currentIndexChanged.connect(self._emit)
        for spin in (self.importance_min, self.importance_max):
            spin.valueChanged.connect(self._debounce.start)
        self.dates.toggled.connect(self._on_dates_toggled)
        self.date_from.dateChanged.connect(self._emit)
        self.date_to.dateChanged.connect(self._emit)
        self.clear_button.clicked.connect(self.clear)

    def _unit(self, value: float) -> QDoubleSpinBox:
        spin = QDoubleSpinBox(self)
        spin.setRange(0.0, 1.0)
        spin.setSingleStep(0.05)
        spin.setDecimals(2)
        spin.setValue(value)
        return spin

    def set_agents(self, agents: Sequence[tuple[str, int]]) -> None:
        """Offer these agents, keeping the current choice.

        The choice is kept by the agent's id (the item's data), not its text, which carries a
        count that changes with every write. An agent chosen as a filter whose records are all
        gone stays listed with 0: the combo always shows the filter the table applies (a
        silent fall back to "Any" left the table filtered under an "Any" label, and the next
        filter change dropped the agent).
        """
        current = self.agent.currentData()
        self.agent.blockSignals(True)
        self.agent.clear()
        self.agent.addItem(_ANY)
        for agent, count in agents:
            self.agent.addItem(f"{agent} ({count:,})", agent)
        if isinstance(current, str) and self.agent.findData(current) < 0:
            self.agent.addItem(f"{current} (0)", current)
        index = self.agent.findData(current) if isinstance(current, str) else 0
        self.agent.setCurrentIndex(max(0, index))
        self.agent.blockSignals(False)

    def query(self) -> RecordQuery:
        """The filters as a query (sort and page left at their defaults)."""
        agent = self.agent.currentData()
        layer = self.layer.currentText()
        low, high = self.importance_min.value(), self.importance_max.value()
        dated = self.dates.isChecked()
        return RecordQuery(
            agent_id=agent if isinstance(agent, str) else None,
            layer=None if layer == _ANY else Layer(layer),
            privacy=chosen_privacy(self.privacy),
            tags=tuple(t.strip() for t in self.tags.text().split(",") if t.strip()),
            text=self.text.text().strip() or None,
            importance_min=low if low > 0.0 else None,
            importance_max=high if high < 1.0 else None,
            created_from=_day_start_ms(self.date_from.date()) if dated else None,
            created_to=_day_start_ms(self.date_to.date().addDays(1)) - 1 if dated else None,
            states=STATE_CHOICES[max(0, self.state.currentIndex())][1],
        )

    def clear(self, *, every_state: bool = False) -> None:
        """Reset every filter (one query, not one per widget).

        Args:
            every_state: Show records of every state (archived too) instead of the default.
        """
        self.reset(every_state=every_state)
        self._emit()

    def reset(self, *, every_state: bool = False) -> None:
        """Put every filter back to its default without emitting ``query_changed`` (the
        caller applies :meth:`query`)."""
        # the text boxes' signals are left on: blocked, their clear buttons stayed shown on
        # an empty box (QLineEdit updates them on its own textChanged); they only start the
        # debounce, stopped here
        widgets = (self.agent, self.layer, self.privacy, self.state,
                   self.importance_min, self.importance_max, self.dates)
        for widget in widgets:
            widget.blockSignals(True)
        self.text.clear()
        self.tags.clear()
        self._debounce.stop()
        for combo in (self.agent, self.layer, self.privacy, self.state):
            combo.setCurrentIndex(0)
        if every_state:
            self.state.setCurrentIndex(len(STATE_CHOICES) - 1)
        self.importance_min.setValue(0.0)
        self.importance_max.setValue(1.0)
        self.dates.setChecked(False)
        self._on_dates_toggled(False, emit=False)
        for widget in widgets:
            widget.blockSignals(False)

    def _on_dates_toggled(self, on: bool, emit: bool = True) -> None:
        self.date_from.setEnabled(on)
        self.date_to.setEnabled(on)
        if emit:
            self._emit()

    def _emit(self) -> None:
        self._debounce.stop()
        self.query_changed.emit(self.query())


def _scan_rows(reader: MemoryReader, query: RecordQuery, record_id: str) -> int | None:
    """Worker: the position of ``record_id`` in ``query`` by paging through its rows.

    For an attached agent, whose API has no "locate"; a local store asks its engine. Reads at
    most :data:`_SCAN_LIMIT` rows (then None: the detail is still shown).
    """
    offset = 0
    while offset < _SCAN_LIMIT:
        page = reader.list_rows(dataclasses.replace(query, offset=offset, limit=_SCAN_PAGE))
        for number, row in enumerate(page.rows):
            if row.id == record_id:
                return offset + number
        offset += _SCAN_PAGE
        if offset >= page.total:
            return None
    return None


def _rows_in_spans(reader: MemoryReader, query: RecordQuery,
                   spans: Sequence[tuple[int, int]]) -> list[RecordRow]:
    """Worker: the rows ``spans`` (first, last; inclusive) of ``query``'s result.

    What a selection means when it reaches past the loaded pages (Ctrl+A selects every row
    matching the filters, not the page shown).
    """
    rows: list[RecordRow] = []
    for first, last in spans:
        offset = first
        while offset <= last:
            limit = min(_ID_PAGE, last - offset + 1)
            page = reader.list_rows(dataclasses.replace(query, offset=offset, limit=limit))
            rows.extend(page.rows)
            if len(page.rows) < limit:
                break
            offset += limit
    return rows


def _ids_in_spans(reader: MemoryReader, query: RecordQuery,
                  spans: Sequence[tuple[int, int]]) -> list[str]:
    """Worker: the ids of the rows ``spans`` of ``query``'s result (see :func:`_rows_in_spans`)."""
    return [row.id for row in _rows_in_spans(reader, query, spans)]


def _locator(session: DataSession, shown: Masking | None
             ) -> Callable[[RecordQuery, str], int | None]:
    """Where a record is in a query: the engine's answer (its filters matching what the table
    shows, ``shown``), or a scan of an agent's pages."""
    if isinstance(session, StoreSession):
        return partial(session.engine.locate_row, shown=shown)
    return partial(_scan_rows, session.reader)


class RecordsView(QWidget):
    """Browse, filter, sort and edit the records of the open store.

    Signals:
        message(str): A short status message for the status bar.
        total_changed(int): Rows matching the filters.
    """

    message = QtSignal(str)
    total_changed = QtSignal(int)

    def __init__(self, runner: TaskRunner, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._session: DataSession | None = None
        self._details = RequestTokens()
        self._facet_tokens = RequestTokens()
        self._pending_select: str | None = None
        self._pending_row: int | None = None  # where the engine says the linked record is
        self._agents: list[str] = []
        self._indexed = (0, 0)
        self._store_count: int | None = None  # the status bar's count (set by the window)
        self._filtered_store: tuple[str, str] | None = None  # the store the filters were set on
        self._filter_changed = False
        self._content_sized_by_user = False
        self._fitting = False
        self.empty_actions: tuple[QAction, ...] = ()
        self.model = RecordTableModel(runner, self)

        self.filters = FilterBar(self)
        self.toolbar = QToolBar("Records", self)
        self.table = QTableView(self)
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.table.setAlternatingRowColors(True)
        self.table.setWordWrap(False)
        self.table.setHorizontalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        vertical = self.table.verticalHeader()
        vertical.setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        vertical.setDefaultSectionSize(ROW_HEIGHT)
        vertical.setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setHighlightSections(False)
        for number, column in enumerate(COLUMNS):
            self.table.setColumnWidth(number, column.width)
        # Indicator first: enabling sorting sorts by the indicator, which is the model's query.
        header.setSortIndicator(self.model.sort_section(), Qt.SortOrder.DescendingOrder)
        self.table.setSortingEnabled(True)
        header.sectionResized.connect(self._on_section_resized)
        self.table.viewport().installEventFilter(self)
        self.detail = RecordDetailPanel(self)
        self.count_label = QLabel("", self)

        # issue 24: Find similar before a store's full view, answered by the store's index
        self.similar = SimilarPanel(self)
        self._similar_tokens = RequestTokens()
        left = QSplitter(Qt.Orientation.Vertical, self)
        left.addWidget(self.table)
        left.addWidget(self.similar)
        left.setStretchFactor(0, 3)
        left.setStretchFactor(1, 2)
        splitter = QSplitter(Qt.Orientation.Horizontal, self)
        splitter.addWidget(left)
        splitter.addWidget(self.detail)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([720, 420])
        self.splitter = splitter
        top = QHBoxLayout()
        top.addWidget(self.toolbar, 1)
        top.addWidget(self.count_label)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 4)
        layout.addWidget(self.filters)
        layout.addLayout(top)
        layout.addWidget(splitter, 1)
        self._build_actions()
        self.empty_state = EmptyState(splitter, "records")

        self.filters.query_changed.connect(self._on_query_changed)
        self.filters.agent_choices_wanted.connect(self._on_agent_choices_wanted)
        self.model.total_changed.connect(self._on_total_changed)
        self.model.reloaded.connect(self._on_model_reloaded)
        self.model.page_loaded.connect(self._on_page_loaded)
        self.model.load_failed.connect(self.message)
        self.model.index_state_changed.connect(self._show_count)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        self.table.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self.detail.save_requested.connect(self._on_save_requested)
        self.detail.navigate.connect(self.go_to_record)
        self.similar.record_activated.connect(self.go_to_record)
        self.set_session(None)

    def _build_actions(self) -> None:
        def action(text: str, slot: Callable[[], None],
                   shortcut: QKeySequence | QKeySequence.StandardKey | str | None = None,
                   tip: str = "") -> QAction:
            made = QAction(text, self)
            if shortcut is not None:
                made.setShortcut(QKeySequence(shortcut))
                made.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
            made.setToolTip(tip or text)
            made.triggered.connect(slot)
            return made

        self.add_action = action("Add memory…", self._on_add_triggered, "Ctrl+N",
                                 "Add a memory (Ctrl+N)")
        self.delete_action = action("Delete", self._on_delete_triggered,
                                    QKeySequence.StandardKey.Delete,
                                    "Delete the selected records (Del)")
        self.tag_action = action("Tag…", self._on_tag_triggered, "Ctrl+T",
                                 "Add tags to the selected records (Ctrl+T)")
        # F5 and Ctrl+F are the window's (Refresh and Search in its toolbar), which call these.
        self.refresh_action = action("Refresh", self.refresh, None, "Reload the records")
        self.clear_filters_action = action("Clear filters", self.filters.clear, None,
                                           "Show every record again")
        self.layer_menu = QMenu("Move to layer", self)
        self.layer_actions: list[QAction] = []
        for layer in Layer:
            made = self.layer_menu.addAction(layer.value)
            made.triggered.connect(lambda _checked=False, chosen=layer: self._on_relayer(chosen))
            self.layer_actions.append(made)
        # issue 20 soft states: keep a memory without it being retrieved
        self.pause_action = action(
            "Pause", lambda: self._on_state_triggered(RecordState.PAUSED), "Ctrl+Alt+P",
            "Pause the selected records: kept and listed, not retrieved (Ctrl+Alt+P)")
        self.archive_action = action(
            "Archive", lambda: self._on_state_triggered(RecordState.ARCHIVED), "Ctrl+Alt+A",
            "Archive the selected records: kept, hidden by default, not retrieved (Ctrl+Alt+A)")
        self.resume_action = action(
            "Resume", lambda: self._on_state_triggered(RecordState.ACTIVE), "Ctrl+Alt+R",
            "Resume the selected records: retrieved again (Ctrl+Alt+R)")
        self.state_actions = (self.pause_action, self.archive_action, self.resume_action)
        self.state_menu = QMenu("State", self)
        for made in self.state_actions:
            self.state_menu.addAction(made)
        layer_button = QToolButton(self)
        layer_button.setText("Move to layer")
        layer_button.setMenu(self.layer_menu)
        layer_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.layer_button = layer_button
        for made in (self.add_action, self.delete_action, self.tag_action):
            self.toolbar.addAction(made)
        self.toolbar.addWidget(layer_button)
        for made in self.state_actions:
            self.toolbar.addAction(made)
        self.toolbar.addSeparator()
        self.toolbar.addAction(self.refresh_action)

    # -- session ---------------------------------------------------------------------------

    @property
    def session(self) -> DataSession | None:
        """The open store or attached agent."""
        return self._session

    @property
    def _writable(self) -> StoreSession | None:
        """The session, when it is a store that accepts writes."""
        session = self._session
        return session if isinstance(session, StoreSession) and not session.read_only \
            and not session.indexing else None

    def set_session(self, session: DataSession | None) -> None:
        """Show the records of ``session`` (None: no store open)."""
        old = self._session
        if old is not None:
            old.records_changed.disconnect(self._on_records_changed)
            if isinstance(old, StoreSession):
                old.indexing_started.disconnect(self._show_count)
                old.indexing_progress.disconnect(self._on_indexing_progress)
                old.indexing_finished.disconnect(self._on_indexing_finished)
        self._session = session
        self._indexed = (0, 0)
        self.detail.show_detail(None)
        self._similar_tokens.next_token()
        self.similar.clear()
        if session is not None:
            session.records_changed.connect(self._on_records_changed)
            if isinstance(session, StoreSession):
                session.indexing_started.connect(self._show_count)
                session.indexing_progress.connect(self._on_indexing_progress)
                session.indexing_finished.connect(self._on_indexing_finished)
        self._update_actions()
        query = None
        if session is not None:
            where = session.store_key
            if self._filtered_store is not None and where != self._filtered_store:
                # another store: the last one's agent, words or tags would hide its records
                # ("0 of 2 records", agent "beta (0)"); the same one reopened (after an
                # import) keeps them. The sort is a way of looking and stays.
                self.filters.reset()
                current = self.model.query
                query = dataclasses.replace(self.filters.query(), sort_by=current.sort_by,
                                            descending=current.descending)
            self._filtered_store = where
        self.model.set_reader(session.reader if session is not None else None,
                              session if isinstance(session, StoreSession) else None,
                              query=query)
        self.refresh_facets()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask content in the table and detail (redaction mode)."""
        self.model.set_redactor(redact)
        self.detail.set_redactor(redact)
        self._load_detail()
        if self.similar.record_id:  # its texts were masked (or not) by the engine: asked again
            self.find_similar(self.similar.record_id)

    def _update_actions(self) -> None:
        writable = self._writable is not None
        self.detail.set_read_only(not writable)
        selected = self.selected_count() > 0
        self.add_action.setEnabled(writable)
        for made in (self.delete_action, self.tag_action, *self.layer_actions):
            made.setEnabled(writable and selected)
        # the menu is also the Edit menu's "Move to layer": its entry follows the selection
        self.layer_menu.setEnabled(writable and selected)
        states = {row.state for row in self.selected_rows()}
        for made, state in zip(self.state_actions, (RecordState.PAUSED, RecordState.ARCHIVED,
                                                    RecordState.ACTIVE), strict=True):
            # on when some selected record would change
            made.setEnabled(writable and bool(states - {state}))
        self.layer_button.setEnabled(writable and selected)
        self.refresh_action.setEnabled(self._session is not None)

    def refresh(self) -> None:
        """Re-run the current query and refresh the filter choices."""
        self.model.reload()
        self.refresh_facets()

    def refresh_facets(self) -> None:
        """Fetch agents (with counts) for the agent filter, on a worker."""
        if self._session is None:
            self.filters.set_agents([])
            return
        spawn(self._load_facets(self._session))

    async def _load_facets(self, session: DataSession) -> None:
        token = self._facet_tokens.next_token()
        if isinstance(session, StoreSession) and not await session.wait_indexed():
            return
        try:
            found: Facets = await self._runner.run(session.reader.facets)
        except EngineError as exc:
            self.message.emit(f"Could not read the filter choices: {exc}")
            return
        if self._facet_tokens.is_current(token) and session is self._session:
            self._agents = [agent for agent, _ in found.agents]
            self.filters.set_agents(found.agents)

    # -- table -----------------------------------------------------------------------------

    def selected_spans(self) -> list[tuple[int, int]]:
        """The selected rows as (first, last) spans, merged and in order (no row indexes are
        made: Ctrl+A over 100K rows is one span)."""
        selection = self.table.selectionModel().selection()
        spans = sorted((selection.at(i).top(), selection.at(i).bottom())
                       for i in range(selection.size()))
        merged: list[tuple[int, int]] = []
        for first, last in spans:
            if merged and first <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], last))
            else:
                merged.append((first, last))
        return merged

    def selected_count(self) -> int:
        """How many rows are selected, loaded or not: the count every confirmation states."""
        return sum(last - first + 1 for first, last in self.selected_spans())

    async def selection_ids(self) -> list[str]:
        """The ids of every selected row: the loaded ones at once, else read on a worker."""
        loaded = self.selected_ids()
        session = self._session
        if len(loaded) == self.selected_count() or session is None:
            return loaded
        return await self._runner.run(_ids_in_spans, session.reader, self.model.query,
                                      self.selected_spans())

    def selected_ids(self) -> list[str]:
        """Ids of the selected rows whose records are loaded (see :meth:`selection_ids`)."""
        return [row.id for row in self.selected_rows()]

    def selected_rows(self) -> list[RecordRow]:
        """The selected rows whose records are loaded (their table columns)."""
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        return [record for row in rows if (record := self.model.record_at(row)) is not None]

    def current_record(self) -> RecordRef | None:
        """The record of the table's current row (the context menu's and shortcuts' target)."""
        index = self.table.selectionModel().currentIndex()
        record = self.model.record_at(index.row()) if index.isValid() else None
        return None if record is None else RecordRef(record.id, record.content)

    def _on_query_changed(self, query: RecordQuery) -> None:
        self._filter_changed = True
        current = self.model.query
        self.model.set_query(dataclasses.replace(query, sort_by=current.sort_by,
                                                 descending=current.descending))

    def _on_total_changed(self, total: int) -> None:
        self._show_count()
        self.total_changed.emit(total)

    def _show_count(self) -> None:
        """The number of rows, and before the store's full view is read, what the table shows
        and whether every record is being read (issue 24: a server store's only on demand)."""
        done, total = self._indexed
        session = self._session
        reading = isinstance(session, StoreSession) and session.view_loading
        progress = f"reading every record: {done:,} / {total:,}" if total \
            else "reading every record…"
        if self.model.waiting:
            text = (f"{progress.capitalize()} — {self.model.waiting_for} needs the full view; "
                    "it applies when loaded") if reading else \
                (f"{self.model.waiting_for.capitalize()} needs the full view: every record "
                 "read into this process (Store → Read Every Record)")
        elif self.model.preview:
            shown = count_of(self.model.total, 'record') if self.model.counted else \
                f"At least {count_of(self.model.total, 'record')} (counting)"
            text = (f"{shown}, newest written first, "
                    "from the store" + (f" ({progress})" if reading else ""))
        elif self._store_count is not None and self.model.total < self._store_count:
            # the filters show part of the store (the default hides archived records): say
            # so, or "201 records" here and "204 records" in the status bar disagree
            text = f"{self.model.total:,} of {count_of(self._store_count, 'record')}"
        else:
            text = count_of(self.model.total, "record")
        self.count_label.setText(text)

    def set_store_count(self, count: int | None) -> None:
        """The number of records in the store (the status bar's; None: not known), so the
        count says how many of them the filters show ("201 of 204 records")."""
        self._store_count = count
        self._show_count()
        self._show_empty_state()

    def _on_indexing_progress(self, done: int, total: int) -> None:
        self._indexed = (done, total)
        if self.model.preview or self.model.waiting:
            self._show_count()

    def _on_indexing_finished(self, _ready: bool) -> None:
        if self.model.preview:
            self.model.reload()  # from Chroma's order to the query's (waiting queries resume)
        self._update_actions()
        self._show_count()

    def _on_agent_choices_wanted(self) -> None:
        """The agent list was opened: its choices come from every record (Chroma cannot list
        distinct agents), so a server store reads them now (issue 24)."""
        session = self._session
        if isinstance(session, StoreSession) and session.indexing:
            session.request_view("The agent filter")

    def find_similar(self, record_id: str, *, again: bool = False) -> None:
        """Show the records nearest to ``record_id`` under the table, found by the store's
        HNSW index on a worker (:func:`engine.browse.similar_records`; no view needed).

        Args:
            again: The panel shows them already and the store changed: the list stays until
                the new one is in, and closes when ``record_id`` itself is gone.
        """
        session = self._session
        if not isinstance(session, StoreSession):
            return
        token = self._similar_tokens.next_token()
        if not again:
            self.similar.show_loading(record_id)
        spawn(self._find_similar(session, record_id, token, again=again))

    async def _find_similar(self, session: StoreSession, record_id: str, token: int, *,
                            again: bool = False) -> None:
        try:
            found: SimilarRecords = await self._runner.run(
                partial(similar_records, session.engine, record_id, shown=self.model.shown))
        except RecordNotFound:
            if self._similar_tokens.is_current(token) and session is self._session:
                if again:  # deleted (or merged away) since: nothing to be similar to
                    self.similar.clear()
                else:
                    self.similar.show_error(record_id, "no such record")
            return
        except EngineError as exc:
            if self._similar_tokens.is_current(token) and session is self._session:
                self.similar.show_error(record_id, str(exc))
            return
        if self._similar_tokens.is_current(token) and session is self._session:
            self.similar.show_result(found)

    def _on_model_reloaded(self) -> None:
        self._show_count()
        self._on_scrolled()
        follow, self._filter_changed = self._filter_changed, False
        if self._pending_select is not None:
            self._select_loaded(self._pending_select)
            if self._pending_select is not None and self._pending_row is not None:
                self._reveal_row(self._pending_row)
        elif self.detail.record is not None:
            row = self.model.row_of(self.detail.record.id)
            if row is not None:
                self._select_row(row)
            elif follow:
                self._show_first_row()
            else:
                self._load_detail()
        self._update_actions()
        self._show_empty_state()

    def _show_first_row(self) -> None:
        """After a filter change that left the shown record out of the rows: show the new
        current row (the first), or nothing when no record matches.

        Only the loaded pages are searched: a record that still matches but sorts past the
        first page is left for the first row too (the detail always shows a row of the table).
        """
        if self.model.record_at(0) is not None:
            self._select_row(0)
        else:
            self.table.selectionModel().clear()
            self._details.next_token()  # a detail still loading belongs to the old filter
            self.detail.show_detail(None)

    def _show_empty_state(self) -> None:
        """"No memories yet" (with the window's next steps) on an empty store, "No records
        match" (with Clear filters) when only the filters hide them; nothing while rows show."""
        session = self._session
        if session is None or self.model.total > 0 or self.model.waiting \
                or not self.model.settled:
            self.empty_state.clear()
        elif self.filters.query() != RecordQuery() and self._store_count != 0:
            # (an empty store is empty whatever the filters say: "Clear filters" would not
            # bring a record back)
            self.empty_state.show_message(
                "No records match these filters",
                "Loosen or clear the filters above to see more of the store.",
                [self.clear_filters_action])
        elif session.reader.read_only:
            self.empty_state.show_message(
                "No memories yet", "Nothing has been stored here yet. This store is open "
                "read-only, so memories come only from the agent that writes it.")
        else:
            self.empty_state.show_message(
                "No memories yet",
                "Memories appear here as your agent stores them. Load the demo data set to "
                "explore the app, or import memories from a JSONL file or a conversation.",
                self.empty_actions)

    def _on_page_loaded(self, _page: int) -> None:
        if self._pending_select is not None:
            self._select_loaded(self._pending_select)

    def _on_scrolled(self, _value: int = 0) -> None:
        viewport = self.table.viewport().rect()
        first = self.table.rowAt(viewport.top())
        last = self.table.rowAt(viewport.bottom())
        first = 0 if first < 0 else first
        last = first + max(1, viewport.height() // ROW_HEIGHT) if last < 0 else last
        self.model.ensure_rows(first, last)

    def _select_row(self, row: int) -> None:
        selection = self.table.selectionModel()
        index = self.model.index(row, 0)
        selection.setCurrentIndex(
            index, QItemSelectionModel.SelectionFlag.ClearAndSelect
            | QItemSelectionModel.SelectionFlag.Rows)
        self.table.scrollTo(index, QAbstractItemView.ScrollHint.PositionAtCenter)

    def _select_loaded(self, record_id: str) -> None:
        row = self.model.row_of(record_id)
        if row is not None:
            self._pending_select = None
            self._pending_row = None
            self._select_row(row)

    def go_to_record(self, record_id: str) -> None:
        """Show ``record_id``: its row selected and scrolled to, its detail beside it.

        The row is found by the engine (:meth:`~engine.memory_engine.MemoryEngine.locate_row`)
        and its page fetched when it is not loaded yet. When the filters hide the record they
        are cleared (the sort is kept) and the status bar says so; until the row is selected the
        table shows no selection, so the highlighted row never disagrees with the detail.
        """
        self._pending_select = record_id
        self._pending_row = None
        row = self.model.row_of(record_id)
        if row is not None:
            self._select_loaded(record_id)
            return
        selection = self.table.selectionModel()
        selection.clearCurrentIndex()  # first: clearing the selection reads the current row
        selection.clearSelection()
        spawn(self._go_to(record_id))

    async def _go_to(self, record_id: str) -> None:
        """Find the row of ``record_id`` (widening the filters if needed) and reveal it."""
        session = self._session
        if session is None:
            return
        await self._load_detail_for(record_id)
        if isinstance(session, StoreSession) and session.indexing and not session.view_loading:
            return  # issue 24: the view is not being read; the detail shows the record
        if isinstance(session, StoreSession) and not await session.wait_indexed():
            return
        if self._pending_select != record_id or session is not self._session:
            return  # another link was followed meanwhile, or the store changed
        query = self.model.query
        # every state: a link may name an archived record, which the default filter hides
        everything = RecordQuery(sort_by=query.sort_by, descending=query.descending,
                                 limit=query.limit, states=ALL_STATES)
        locate = _locator(session, self.model.shown)
        try:
            position = await self._runner.run(locate, query, record_id)
            widen = position is None and query != everything
            if widen:
                position = await self._runner.run(locate, everything, record_id)
        except EngineError as exc:
            self.message.emit(f"Could not find the record in the table: {exc}")
            return
        if self._pending_select != record_id or session is not self._session:
            return
        if position is None:
            self._pending_select = None
            shown = self.detail.record is not None and self.detail.record.id == record_id
            # shown: an agent's table too long to page through (its detail is still shown)
            self.message.emit("The record's row was not found in the table; its detail is "
                              "shown." if shown else "That record is no longer stored (see "
                              "Fate for what happened to it).")
            return
        self._pending_row = position
        if widen:
            # reloads; the row is revealed when the first page is in
            self.filters.clear(every_state=True)
            self.message.emit("Filters cleared: they hid the record you opened.")
        elif self.model.settled:
            self._reveal_row(position)

    def _reveal_row(self, row: int) -> None:
        """Scroll to ``row`` and fetch its page; it is selected when its record arrives."""
        if not 0 <= row < self.model.rowCount():
            return
        self.table.scrollTo(self.model.index(row, 0),
                            QAbstractItemView.ScrollHint.PositionAtCenter)
        self.model.ensure_rows(row, row)
        if self._pending_select is not None:
            self._select_loaded(self._pending_select)

    def _on_selection_changed(self) -> None:
        self._update_actions()
        index = self.table.selectionModel().currentIndex()
        record_id = self.model.data(index, ROLE_RECORD_ID) if index.isValid() else None
        if isinstance(record_id, str):
            self._pending_select = None
            if (self.detail.record is None or self.detail.record.id != record_id) \
                    and self._leave_detail(record_id):
                self._load_detail_for(record_id)

    def _leave_detail(self, target: str) -> bool:
        """Before the form shows another record: what becomes of its unsaved edits.

        A click on another row replaced them without a word (typed text lost). Save saves
        them first (as the Save button does; the other record shows once they are saved),
        Discard drops them, Cancel goes back to their record.

        Args:
            target: The record about to be shown.

        Returns:
            True when the form may show it now.
        """
        record = self.detail.record
        answer = self.ask_about_edits("showing another record")
        if record is None or answer is None or answer == QMessageBox.StandardButton.Discard:
            return True
        if answer == QMessageBox.StandardButton.Save:
            spawn(self._save_then_show(record.id, target))
        else:
            self._reselect(record.id)
        return False

    def ask_about_edits(self, before: str) -> QMessageBox.StandardButton | None:
        """Ask whether to save the form's unsaved edits ``before`` something ("closing").

        Returns:
            Save, Discard or Cancel; None when there is nothing unsaved.
        """
        record = self.detail.record
        changes = self.detail.changes() if record is not None and self._writable else {}
        if record is None or not changes:
            return None
        shown = quoted(self.detail.shown_text(record.content), 60)
        return QMessageBox.question(
            self, "Unsaved changes",
            f"Save your changes to {shown} ({', '.join(sorted(changes))}) before {before}?",
            QMessageBox.StandardButton.Save | QMessageBox.StandardButton.Discard
            | QMessageBox.StandardButton.Cancel, QMessageBox.StandardButton.Save)

    async def save_form(self) -> bool:
        """Save the form's unsaved edits now.

        Returns:
            True when nothing is left unsaved; False when they were refused (the form says
            why, on its field).
        """
        record, session = self.detail.record, self._writable
        changes = self.detail.changes() if record is not None and session is not None else {}
        if record is None or session is None or not changes:
            return True
        if "content" in changes and not str(changes["content"]).strip():
            self.detail.show_error("content", "content: must not be empty")
            return False
        return await self._save(session, record.id, changes)

    async def _save_then_show(self, edited: str, target: str) -> None:
        """Save the form's edits to ``edited``, then show ``target``; or come back to
        ``edited`` with the error when they were refused."""
        if not await self.save_form():
            self._reselect(edited)
            return
        self.detail.show_detail(None)  # saved: nothing left to ask about on the way
        self._pending_select = target  # (the save's reload selects it if not loaded yet)
        self._select_loaded(target)
        await self._load_detail_for(target)  # its row may be the current one already

    def _reselect(self, record_id: str) -> None:
        """Select ``record_id``'s row again (the form still shows it with its edits)."""
        row = self.model.row_of(record_id)
        if row is not None:
            self._select_row(row)
        else:
            self.table.selectionModel().clear()

    def _load_detail(self) -> None:
        if self.detail.record is not None:
            self._load_detail_for(self.detail.record.id)

    def _load_detail_for(self, record_id: str) -> asyncio.Task[None]:
        """Read ``record_id``'s detail on a worker and show it, unless a later request came.

        The request's token is taken now, not when its task first runs: a read spawned
        before an awaited one (a save's reload of the edited record, then the row clicked)
        started later and won, showing the edited record again.
        """
        return spawn(self._read_detail(record_id, self._details.next_token()))

    async def _read_detail(self, record_id: str, token: int) -> None:
        session = self._session
        if session is None:
            return
        try:
            detail: RecordDetail = await self._runner.run(session.reader.record_detail,
                                                          record_id)
        except RecordNotFound:
            if self._details.is_current(token):
                self.detail.show_detail(None)
            return
        except EngineError as exc:
            self.message.emit(f"Could not read record {record_id}: {exc}")
            return
        if self._details.is_current(token) and session is self._session:
            self.detail.show_detail(detail)

    def _on_records_changed(self, ids: list[str]) -> None:
        self.model.reload()
        self.refresh_facets()
        if self.detail.record is not None and self.detail.record.id in ids:
            self._load_detail()
        if self.similar.record_id:
            # the neighbours listed may be deleted or edited, a new one may be nearer: the
            # panel listed a deleted record until it was asked again
            self.find_similar(self.similar.record_id, again=True)

    # -- writes ----------------------------------------------------------------------------

    def _on_save_requested(self, record_id: str, changes: dict[str, object]) -> None:
        session = self._writable
        if session is not None:
            spawn(self._save(session, record_id, changes))

    async def _save(self, session: StoreSession, record_id: str,
                    changes: dict[str, object]) -> bool:
        if "expires_at" in changes and isinstance(changes["expires_at"], float) \
                and not math.isfinite(changes["expires_at"]):
            self.detail.show_error("expires_at", "expires_at: must be finite")
            return False
        try:
            await session.update(record_id, changes)
        except ValidationError as exc:
            self.detail.show_error(exc.field, str(exc))
            return False
        except EngineError as exc:
            self.detail.show_error("", f"Not saved: {exc}")
            return False
        self.detail.clear_error()
        self.message.emit(f"Saved {', '.join(sorted(changes))}")
        return True

    def _on_add_triggered(self) -> None:
        session = self._writable
        if session is None:
            return
        dialog = AddMemoryDialog(self._agents, self)
        if dialog.exec() and dialog.memory is not None:
            spawn(self._add(session, dialog))

    async def _add(self, session: StoreSession, dialog: AddMemoryDialog) -> None:
        assert dialog.memory is not None
        try:
            record = await session.add(dialog.memory)
        except EngineError as exc:
            QMessageBox.warning(self, "Add memory", f"Not added: {exc}")
            return
        self._pending_select = record.id
        self.message.emit("Memory added")

    def _selection_noun(self, count: int) -> str:
        """"this record", "these 12 records", or "all 1,035 records matching the filters"."""
        if count == 1:
            return "this record"
        if count == self.model.total:
            return f"all {count:,} records matching the filters" \
                if self.filters.query() != RecordQuery() else f"all {count:,} records"
        return f"these {count:,} records"

    def _confirm(self, title: str, question: str) -> bool:
        answer = QMessageBox.question(
            self, title, f"{question} You can undo this (Edit → Undo).",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        return answer == QMessageBox.StandardButton.Yes

    def _on_delete_triggered(self) -> None:
        count = self.selected_count()
        if not count or self._writable is None:
            return
        if self._confirm("Delete", f"Delete {self._selection_noun(count)}?"):
            spawn(self._delete_selection())

    async def _delete_selection(self) -> None:
        try:
            ids = await self.selection_ids()
        except EngineError as exc:
            QMessageBox.warning(self, "Delete", f"Not deleted: {exc}")
            return
        await self.delete_records(ids)

    async def delete_records(self, ids: Sequence[str]) -> None:
        """Delete ``ids`` (after confirmation by the caller); undoable."""
        session = self._writable
        if session is None:
            return
        try:
            deleted = await session.delete(ids)
        except EngineError as exc:
            QMessageBox.warning(self, "Delete", f"Not deleted: {exc}")
            return
        self.detail.show_detail(None)
        self.message.emit(f"Deleted {count_of(len(deleted), 'record')}")

    def _on_state_triggered(self, state: RecordState) -> None:
        rows = self.selected_rows()
        if not rows or self._writable is None:
            return
        if len(rows) < self.selected_count():
            # a selection past the loaded pages (Ctrl+A): read its rows first, so the question
            # counts every selected record and which of them would change
            spawn(self._state_of_selection(state))
            return
        self._ask_state(rows, state)

    async def _state_of_selection(self, state: RecordState) -> None:
        session = self._session
        if session is None:
            return
        try:
            rows = await self._runner.run(_rows_in_spans, session.reader, self.model.query,
                                          self.selected_spans())
        except EngineError as exc:
            QMessageBox.warning(self, _STATE_WORDS[state][0], f"Not changed: {exc}")
            return
        if rows and session is self._session:
            self._ask_state(rows, state)

    async def ask_state_of(self, ref: RecordRef, state: RecordState, name: str) -> None:
        """Pause, archive or resume one record named in another view (its record menu).

        Its state is read on a worker first, so the question (or "is paused already") is
        true; the change is undoable, as for the table's selection.

        Args:
            name: How the record is named to the person (its quoted, masked text).
        """
        session = self._session
        if session is None or self._writable is None:
            return
        try:
            found = await self._runner.run(session.reader.get_records, [ref.id])
        except EngineError as exc:
            QMessageBox.warning(self, _STATE_WORDS[state][0], f"Not changed: {exc}")
            return
        if session is not self._session:
            return
        if not found:
            self.message.emit(f"{name} is no longer stored")
            return
        self._ask_state(found, state, name=name)

    def _ask_state(self, rows: Sequence[RecordRow | MemoryRecord], state: RecordState, *,
                   name: str | None = None) -> None:
        """Confirm pausing, archiving or resuming ``rows`` with the true counts, then do it.

        ``name`` names a single record (another view's menu) instead of "this record"."""
        verb, word, meaning = _STATE_WORDS[state]
        changing = [row.id for row in rows if row.state is not state]
        if not changing:
            self.message.emit(f"{name} is {word} already" if name
                              else f"The selected records are {word} already")
            return
        noun = name or ("this record" if len(changing) == 1
                        else f"these {len(changing):,} records")
        already = len(rows) - len(changing)
        extra = f" ({already:,} of the {len(rows):,} selected {'is' if already == 1 else 'are'}" \
            f" {word} already.)" if already else ""
        answer = QMessageBox.question(
            self, verb, f"{verb} {noun}? {meaning}{extra} You can undo this (Edit → Undo).",
            QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
            QMessageBox.StandardButton.No)
        if answer == QMessageBox.StandardButton.Yes:
            spawn(self.set_state(changing, state))

    async def set_state(self, ids: Sequence[str], state: RecordState) -> int:
        """Pause, archive or resume ``ids`` (after confirmation by the caller); undoable.

        Returns:
            How many records changed.
        """
        session = self._writable
        if session is None:
            return 0
        verb = _STATE_WORDS[state][0]
        try:
            pairs = await session.set_state(ids, state)
        except EngineError as exc:
            QMessageBox.warning(self, verb, f"Not changed: {exc}")
            return 0
        done = {"Pause": "Paused", "Archive": "Archived", "Resume": "Resumed"}[verb]
        self.message.emit(f"{done} {count_of(len(pairs), 'record')} (Edit → Undo takes it "
                          "back)")
        return len(pairs)

    def _on_relayer(self, layer: Layer) -> None:
        count = self.selected_count()
        session = self._writable
        if not count or session is None:
            return
        # one record moves at once; a bulk move says how many first
        if count > 1 and not self._confirm(
                "Move to layer", f"Move {self._selection_noun(count)} to {layer.value}?"):
            return
        spawn(self._bulk(lambda ids: session.relayer(ids, layer),
                         lambda n: f"Moved {count_of(n, 'record')} to {layer.value}"))

    def _on_tag_triggered(self) -> None:
        count = self.selected_count()
        session = self._writable
        if not count or session is None:
            return
        text, ok = QInputDialog.getText(
            self, "Tag records", f"Tags to add to {count_of(count, 'record')} "
            "(comma-separated):")
        tags = [t.strip() for t in text.split(",") if t.strip()]
        if ok and tags:
            spawn(self._bulk(lambda ids: session.add_tags(ids, tags),
                             lambda n: f"Tagged {count_of(n, 'record')}"))

    async def _bulk(self, work: Callable[[list[str]], Coroutine[Any, Any, None]],
                    done: Callable[[int], str]) -> None:
        """Run ``work`` on the ids of the whole selection; ``done(n)`` is the status message."""
        try:
            ids = await self.selection_ids()
            await work(ids)
        except EngineError as exc:
            QMessageBox.warning(self, "Records", f"Not changed: {exc}")
            return
        self.message.emit(done(len(ids)))

    def focus_search(self) -> None:
        """Put the cursor in the content search box (the window's Search, Ctrl+F)."""
        self.filters.text.setFocus()
        self.filters.text.selectAll()

    # -- the Content column takes the spare width --------------------------------------------

    def fit_content_column(self) -> None:
        """Give the Content column the table's spare width (at least :data:`CONTENT_SHARE` of
        it), unless the person sized it by hand."""
        if self._content_sized_by_user:
            return
        header = self.table.horizontalHeader()
        others = sum(header.sectionSize(i) for i in range(1, header.count())
                     if not header.isSectionHidden(i))
        available = self.table.viewport().width()
        width = max(COLUMNS[0].width, available - others, int(available * CONTENT_SHARE))
        if header.sectionSize(0) != width:
            self._fitting = True  # our own resize is not the person's
            try:
                header.resizeSection(0, width)
            finally:
                self._fitting = False

    def _on_section_resized(self, section: int, _old: int, _new: int) -> None:
        if self._fitting:
            return
        if section == 0:
            self._content_sized_by_user = True  # dragged by hand: keep the person's width
        else:
            self.fit_content_column()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        table = self.__dict__.get("table")  # None once a closed window's attributes are cleared
        if table is not None and watched is table.viewport() \
                and event.type() == QEvent.Type.Resize:
            self.fit_content_column()
        return super().eventFilter(watched, event)
