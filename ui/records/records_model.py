"""The records table model: a window over the engine's filtered, sorted records, paged lazily.

``rowCount`` is the engine's total for the current query; rows arrive a page at a time from
``reader.list_rows`` on a worker (STYLE §3; the reader is a local engine — the columnar view's
columns, no Chroma read — or an attached agent's API, :mod:`engine.reader`) and show a
placeholder until then. Sorting is a
new engine query (header click → :meth:`RecordTableModel.sort`), never a proxy over all rows
(STYLE §4). Every query carries a request token; a page that answers an older query is dropped.

While a local store's columnar view is still being read (opened without a usable view cache,
e.g. a Chroma server store at scale; the :class:`StoreIndex` says so), a query Chroma can answer
— the default order, newest written first, with any of the agent, layer, privacy, category,
state, importance, time and text filters — is answered by its ``server_rows``: Chroma filters and
pages, and only the page's records are read (:attr:`RecordTableModel.preview`). A sort by
another column or a tag filter asks for the view (``StoreIndex.request_view``: a server store
reads it only on demand), waits for it (:attr:`RecordTableModel.waiting`, with
:attr:`RecordTableModel.waiting_for` naming why) and runs when it is ready. While redaction is
on, the engine decides what Chroma may answer and masks the page before it leaves the engine
(``server_answers`` / ``server_rows`` with the table's ``shown``; ``RowPage.masked``).

A filtered server page found among the newest records may not know its total yet
(``RowPage.counted`` False: the rows found so far). The table shows those rows,
:attr:`RecordTableModel.counted` is False ("at least"), and the exact count comes from
``server_count`` on a worker, after the page.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from PySide6.QtCore import QAbstractTableModel, QModelIndex, QObject, QPersistentModelIndex, Qt
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtGui import QColor

from engine import ExitPolicy, Masking, MemoryReader, RecordQuery, RecordRow, RowPage, SortKey
from engine.errors import EngineError
from engine.records import RecordState
from ui.shared.format import exact_time, relative_time
from ui.shared.tasks import RequestTokens, TaskRunner

__all__ = ["COLUMNS", "PAGE_SIZE", "Column", "RecordTableModel", "StoreIndex"]

PAGE_SIZE = 200
ModelIndex = QModelIndex | QPersistentModelIndex


@dataclass(frozen=True, slots=True)
class Column:
    """One table column: the record field it shows, its header and its engine sort key."""

    key: str
    title: str
    sort: SortKey | None
    width: int
    numeric: bool = False


COLUMNS: tuple[Column, ...] = (
    Column("content", "Content", SortKey.CONTENT, 320),
    Column("layer", "Layer", SortKey.LAYER, 90),
    Column("agent_id", "Agent", SortKey.AGENT, 110),
    # issue 20: active, paused or archived (paused and archived rows are also drawn muted)
    Column("state", "State", None, 74),
    Column("importance", "Importance", SortKey.IMPORTANCE, 84, numeric=True),
    Column("decayed", "Decayed", SortKey.DECAYED_IMPORTANCE, 74, numeric=True),
    Column("confidence", "Confidence", SortKey.CONFIDENCE, 84, numeric=True),
    Column("created_at", "Created", SortKey.CREATED, 140),
    Column("last_accessed", "Last accessed", SortKey.LAST_ACCESSED, 140),
    Column("access_count", "Accesses", SortKey.ACCESS_COUNT, 70, numeric=True),
    Column("tags", "Tags", None, 150),
    Column("privacy", "Privacy", SortKey.PRIVACY, 70),
    Column("source", "Source", SortKey.SOURCE, 130),
)
_PREVIEW = 160
_WITHHELD = QColor(140, 149, 159)  # paused / archived rows: kept, not retrieved
_STATE_TIPS = {
    RecordState.PAUSED: "Paused: kept and listed, never retrieved until resumed",
    RecordState.ARCHIVED: "Archived: kept, hidden by default, never retrieved until resumed",
}
_TIMES = ("created_at", "last_accessed")  # shown relative, exact time in the tool tip
ROLE_RECORD_ID = Qt.ItemDataRole.UserRole + 1


class StoreIndex(Protocol):
    """A local store's columnar view being read in the background
    (``ui.shared.session.StoreSession``).
    """

    @property
    def indexing(self) -> bool:
        """True until the view is ready (or its reading failed)."""
        ...

    async def wait_indexed(self) -> bool:
        """Wait for the view; False when it will never be ready."""
        ...

    def request_view(self, feature: str) -> None:
        """``feature`` needs the view: read it unless it is ready or being read."""
        ...

    def server_answers(self, query: RecordQuery, *, shown: Masking | None = None
                       ) -> str | None:
        """None when Chroma can answer ``query`` itself, else what needs the view (no I/O).

        ``shown``: the table's masking while redaction is on (the engine refuses the filters
        that must match masked text)."""
        ...

    def server_rows(self, query: RecordQuery, *, shown: Masking | None = None) -> RowPage:
        """Blocking: ``query``'s page filtered and paged by Chroma, newest written first
        (its text masked by the engine when ``shown`` is given)."""
        ...

    def server_count(self, query: RecordQuery, *, shown: Masking | None = None) -> int:
        """Blocking: the exact number of records matching ``query`` (a page of
        :meth:`server_rows` with ``counted`` False gave only the matches found so far)."""
        ...


@dataclass(frozen=True, slots=True)
class _Row:
    record: RecordRow
    decayed: float
    masked: bool = False  # the engine masked the text already (a server page under redaction)




def _cell(row: _Row, key: str, redact: Callable[[str], str] | None) -> str:
    record = row.record
    if key == "content":
        text = redact(record.content) if redact is not None and not row.masked \
            else record.content
        text = " ".join(text.split())
        return text if len(text) <= _PREVIEW else text[:_PREVIEW - 1] + "…"
    if key == "decayed":
        return f"{row.decayed:.3f}"
    if key in ("importance", "confidence"):
        return f"{getattr(record, key):.2f}"
    if key in _TIMES:
        return relative_time(getattr(record, key))
    if key == "tags":
        return ", ".join(record.tags)
    value = getattr(record, key)
    return str(value.value if hasattr(value, "value") else value)


class RecordTableModel(QAbstractTableModel):
    """Records of the current query, fetched page by page from the engine.

    Signals:
        total_changed(int): The number of rows matching the query changed.
        page_loaded(int): A page (index) arrived and its rows were filled in.
        load_failed(str): The engine could not answer a query (the message says why).
        reloaded(): A new query's first page arrived and the rows were reset.
        index_state_changed(): :attr:`preview` or :attr:`waiting` changed.
    """

    total_changed = QtSignal(int)
    page_loaded = QtSignal(int)
    load_failed = QtSignal(str)
    reloaded = QtSignal()
    index_state_changed = QtSignal()

    def __init__(self, runner: TaskRunner, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._runner = runner
        self._reader: MemoryReader | None = None
        self._query = RecordQuery(limit=PAGE_SIZE)
        self._total = 0
        self._pages: dict[int, list[_Row]] = {}
        self._pending: set[int] = set()
        self._tokens = RequestTokens()
        self._token = self._tokens.next_token()
        self._redact: Callable[[str], str] | None = None
        self._shown: Masking | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._resetting = False
        self._placeholder = QColor(128, 128, 128)
        self._index: StoreIndex | None = None
        self._preview = False
        self._waiting = False
        self._waiting_for = ""
        self._counted = True

    # -- state -----------------------------------------------------------------------------

    @property
    def query(self) -> RecordQuery:
        """The current filter and order (offset/limit are per page)."""
        return self._query

    @property
    def total(self) -> int:
        """Rows matching the current query."""
        return self._total

    @property
    def counted(self) -> bool:
        """False while :attr:`total` is only the rows found so far (a filtered server page
        whose exact count is still being taken)."""
        return self._counted

    @property
    def preview(self) -> bool:
        """True while the rows are Chroma's, newest written first (the view is being read)."""
        return self._preview

    @property
    def waiting(self) -> bool:
        """True while the current filter or sort waits for the view to be read."""
        return self._waiting

    @property
    def waiting_for(self) -> str:
        """While :attr:`waiting`: what needs the view, e.g. "sorting by importance"."""
        return self._waiting_for if self._waiting else ""

    def set_reader(self, reader: MemoryReader | None, index: StoreIndex | None = None, *,
                   query: RecordQuery | None = None) -> None:
        """Show the records ``reader`` reads (None: nothing) and load the first page.

        Args:
            index: A local store whose view may still be being read: while it is, the default
                query shows its preview rows and any other waits (on the GUI loop).
            query: New filters to read it with (None: the current ones), applied in the same
                load.
        """
        self._reader = reader
        self._index = index
        if query is not None:
            self._query = dataclasses.replace(query, offset=0, limit=PAGE_SIZE)
        self.reload()

    def _set_index_state(self, *, preview: bool, waiting: bool) -> None:
        if (preview, waiting) != (self._preview, self._waiting):
            self._preview, self._waiting = preview, waiting
            self.index_state_changed.emit()

    def set_query(self, query: RecordQuery) -> None:
        """Apply new filters (keeping the current sort unless ``query`` sets another)."""
        self._query = dataclasses.replace(query, offset=0, limit=PAGE_SIZE)
        self.reload()

    def set_redactor(self, redact: Callable[[str], str] | None) -> None:
        """Mask content previews with ``redact`` (None: show content as stored).

        The filters follow: while masking, the text, agent and tag filters match the masked
        text the table shows (the exit policy's rule, :mod:`engine.exits`), so typing part of
        a secret finds nothing; a filtered table is queried again.
        """
        self._redact = redact
        self._shown = None if redact is None else ExitPolicy(redact).shown
        query = self._query
        if query.text or query.agent_id is not None or query.tags or self._preview:
            # a server page's text was masked (or not) by the engine: asked again
            self.reload()
        elif self._total:
            self.dataChanged.emit(self.index(0, 0), self.index(self._total - 1, 0))

    @property
    def shown(self) -> Masking | None:
        """What the filters match against while masking (None: the stored text)."""
        return self._shown

    @property
    def settled(self) -> bool:
        """True when the current query's first page arrived and no page is being fetched."""
        return not self._resetting and not self._pending

    def is_loaded(self, row: int) -> bool:
        """True when ``row`` holds its record (not a placeholder)."""
        page = self._pages.get(row // PAGE_SIZE)
        return page is not None and row % PAGE_SIZE < len(page)

    def record_at(self, row: int) -> RecordRow | None:
        """The record shown in ``row`` (its table columns), or None while its page is loading.

        The full record is the reader's ``get_records([record_at(row).id])``.
        """
        page = self._pages.get(row // PAGE_SIZE)
        if page is None or not 0 <= row % PAGE_SIZE < len(page):
            return None
        return page[row % PAGE_SIZE].record

    def row_of(self, record_id: str) -> int | None:
        """The row showing ``record_id`` among the loaded pages, if any."""
        for number, page in self._pages.items():
            for offset, row in enumerate(page):
                if row.record.id == record_id:
                    return number * PAGE_SIZE + offset
        return None

    # -- loading ---------------------------------------------------------------------------

    def reload(self) -> None:
        """Re-run the query from its first page (after a filter, sort or store change)."""
        self._token = self._tokens.next_token()
        self._pending.clear()
        self._resetting = True
        if self._reader is None:
            self._apply_reset(self._token, RowPage([], 0, 0))
            return
        self._spawn(self._fetch(0, self._token, reset=True))

    def ensure_rows(self, first: int, last: int) -> None:
        """Request the pages covering rows ``first..last`` (the visible ones)."""
        if self._total == 0:
            return
        first, last = max(0, first), min(self._total - 1, last)
        for page in range(first // PAGE_SIZE, last // PAGE_SIZE + 1):
            self._request(page)

    def _request(self, page: int) -> None:
        if self._reader is None or page in self._pages or page in self._pending:
            return
        self._pending.add(page)
        self._spawn(self._fetch(page, self._token, reset=False))

    def _spawn(self, coro: Any) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, reader: MemoryReader, query: RecordQuery, token: int,
                      *, reset: bool) -> RowPage | None:
        """The page of ``query``: from the reader, or while the view is read, a preview or a
        wait. None when the query went stale while it waited, or the view will never be ready.
        """
        index = self._index
        if index is None or not index.indexing:
            if reset:
                self._set_index_state(preview=False, waiting=False)
            return await self._runner.run(partial(reader.list_rows, shown=self._shown), query)
        # the engine decides what Chroma may answer under redaction, and masks the page
        needs_view = index.server_answers(query, shown=self._shown)
        if needs_view is None:
            if reset:
                self._set_index_state(preview=True, waiting=False)
            return await self._runner.run(partial(index.server_rows, shown=self._shown), query)
        self._waiting_for = needs_view
        self._set_index_state(preview=False, waiting=True)
        if reset:
            self._clear_rows()  # no preview rows under a filter they do not match
            # issue 24: the view is read when something needs it, and this query does
            index.request_view(needs_view[:1].upper() + needs_view[1:])
        ready = await index.wait_indexed()
        if not self._tokens.is_current(token):
            return None
        self._set_index_state(preview=False, waiting=False)
        if not ready:
            return None  # never indexed: the window closes the store and says why
        return await self._runner.run(partial(reader.list_rows, shown=self._shown), query)

    async def _fetch(self, page: int, token: int, *, reset: bool) -> None:
        reader = self._reader
        if reader is None:
            return
        query = dataclasses.replace(self._query, offset=page * PAGE_SIZE, limit=PAGE_SIZE)
        try:
            answer = await self._answer(reader, query, token, reset=reset)
            if answer is None:
                return
            result = answer
        except EngineError as exc:
            if self._tokens.is_current(token):
                self._pending.discard(page)
                self._resetting = self._resetting and not reset
                self.load_failed.emit(str(exc))
            return
        if not self._tokens.is_current(token):
            return  # an older query's page: drop it
        self._pending.discard(page)
        if reset:
            self._apply_reset(token, result)
            return
        if not result.counted or not self._counted:
            # still counting: more matches found on the way, or the scan reached the last one
            exact = result.counted and not self._counted
            self._counted = self._counted or result.counted
            if not self._grow(result.total) and exact:
                self.total_changed.emit(self._total)
        elif result.total != self._total:
            self.reload()  # the store changed under us: start over with the new total
            return
        self._pages[page] = self._rows(result)
        first = page * PAGE_SIZE
        last = min(self._total, first + PAGE_SIZE) - 1
        if last >= first:
            self.dataChanged.emit(self.index(first, 0), self.index(last, len(COLUMNS) - 1))
        self.page_loaded.emit(page)

    @staticmethod
    def _rows(result: RowPage) -> list[_Row]:
        decayed = list(result.decayed_importance) or [r.importance for r in result.rows]
        return [_Row(r, d, result.masked) for r, d in zip(result.rows, decayed, strict=True)]

    def _clear_rows(self) -> None:
        """Show no rows while the query waits (still resetting: not settled)."""
        self.beginResetModel()
        self._pages = {}
        changed = self._total != 0
        self._total = 0
        self.endResetModel()
        if changed:
            self.total_changed.emit(0)

    def _apply_reset(self, token: int, result: RowPage) -> None:
        self._resetting = False
        self.beginResetModel()
        self._pages = {0: self._rows(result)} if result.rows else {}
        changed = result.total != self._total or result.counted != self._counted
        self._total = result.total
        self._counted = result.counted
        self.endResetModel()
        if changed:
            self.total_changed.emit(self._total)
        self.reloaded.emit()
        if result.rows:
            self.page_loaded.emit(0)
        if not result.counted and self._index is not None:
            self._spawn(self._count(self._index, self._query, token))

    async def _count(self, index: StoreIndex, query: RecordQuery, token: int) -> None:
        """The exact total of a query whose first page gave only the rows found so far."""
        try:
            total = await self._runner.run(partial(index.server_count, shown=self._shown),
                                           query)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self.load_failed.emit(str(exc))
            return
        if self._tokens.is_current(token):
            self._counted = True
            if not self._grow(total):
                self.total_changed.emit(self._total)  # the count is exact now: say so

    def _grow(self, total: int) -> bool:
        """More rows than :attr:`total` match (found by a later page, or counted): add them.
        True when rows were added (``total_changed`` emitted)."""
        if total <= self._total:
            return False
        self.beginInsertRows(QModelIndex(), self._total, total - 1)
        self._total = total
        self.endInsertRows()
        self.total_changed.emit(self._total)
        return True

    # -- Qt model --------------------------------------------------------------------------

    def rowCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else self._total

    def columnCount(self, parent: ModelIndex = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,
                   role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation == Qt.Orientation.Horizontal and 0 <= section < len(COLUMNS):
            column = COLUMNS[section]
            if role == Qt.ItemDataRole.DisplayRole:
                return column.title
            if role == Qt.ItemDataRole.ToolTipRole:
                return "Click to sort (by the engine)" if column.sort else "Not sortable"
        if orientation == Qt.Orientation.Vertical and role == Qt.ItemDataRole.DisplayRole:
            return str(section + 1)
        return None

    def data(self, index: ModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        row, column = index.row(), COLUMNS[index.column()]
        page = self._pages.get(row // PAGE_SIZE)
        if page is None or row % PAGE_SIZE >= len(page):
            self._request(row // PAGE_SIZE)
            if role == Qt.ItemDataRole.DisplayRole:
                return "…" if index.column() == 0 else ""
            if role == Qt.ItemDataRole.ForegroundRole:
                return self._placeholder
            return None
        item = page[row % PAGE_SIZE]
        if role == Qt.ItemDataRole.DisplayRole:
            return _cell(item, column.key, self._redact)
        if role == Qt.ItemDataRole.ToolTipRole and column.key == "content":
            text = item.record.content if self._redact is None or item.masked \
                else self._redact(item.record.content)
            return text[:2000]
        if role == Qt.ItemDataRole.ToolTipRole and column.key in _TIMES:
            return exact_time(getattr(item.record, column.key))
        if role == Qt.ItemDataRole.ForegroundRole and item.record.state is not RecordState.ACTIVE:
            return _WITHHELD
        if role == Qt.ItemDataRole.ToolTipRole and column.key == "state":
            return _STATE_TIPS.get(item.record.state, "Active: retrieved")
        if role == Qt.ItemDataRole.TextAlignmentRole and column.numeric:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == ROLE_RECORD_ID:
            return item.record.id
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        """Sort by ``column`` in the engine (a new query), not in Qt."""
        key = COLUMNS[column].sort if 0 <= column < len(COLUMNS) else None
        if key is None:
            return
        self._query = dataclasses.replace(
            self._query, sort_by=key, descending=order == Qt.SortOrder.DescendingOrder)
        self.reload()

    def sort_section(self) -> int:
        """The column the current query sorts by (-1 when none shows it)."""
        for number, column in enumerate(COLUMNS):
            if column.sort is self._query.sort_by:
                return number
        return -1

    def loaded_ids(self) -> Sequence[str]:
        """Ids of the records in loaded pages (for tests and selection restore)."""
        return [row.record.id for page in self._pages.values() for row in page]
