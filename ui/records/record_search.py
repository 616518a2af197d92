"""Pick a stored record by its words, not its id (issue 19): a search box and the matches.

:class:`RecordSearch` turns a view's line edit into a search over the stored memories: typing
(debounced 250 ms) lists the records whose content holds every word typed, by their text, in a
list under the box (``reader.list_rows`` on a worker, stale answers dropped by token); a click
picks one. Fate uses it to choose whose story to show, the pipeline stepper to choose the stored
memory to run again. Text that is a record id is left to the owner (a deleted or merged-away
record can only be named by its id).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtCore import Signal as QtSignal
from PySide6.QtWidgets import QLineEdit, QListWidget, QListWidgetItem

from engine import Masking, MemoryReader, RecordQuery, RecordRow
from engine.errors import EngineError
from ui.records.record_links import RECORD_ID, elide, record_tooltip
from ui.shared.tasks import RequestTokens, TaskRunner, spawn

__all__ = ["PICKER_LIMIT", "RecordSearch", "find_records"]

PICKER_LIMIT = 20
_CANDIDATES = 500  # rows the engine returns for the longest word; the other words narrow them


def find_records(reader: MemoryReader, words: str, limit: int = PICKER_LIMIT, *,
                 shown: Masking | None = None) -> list[RecordRow]:
    """Worker: stored records containing every word of ``words`` (case-insensitive).

    The engine filters by the longest word (a substring of the content); the other words
    narrow that here, over at most 500 rows. ``shown``: the masking while redaction is on;
    the words must then be in the masked text (the exit policy's rule: a search never
    confirms text the list masks).
    """
    terms = [w.casefold() for w in words.split() if w.strip()]
    if not terms:
        return []
    rows = reader.list_rows(RecordQuery(text=max(terms, key=len), limit=_CANDIDATES),
                            shown=shown).rows
    return [row for row in rows
            if all(t in (row.content if shown is None else shown(row.content)).casefold()
                   for t in terms)][:limit]


class RecordSearch(QObject):
    """Search the records of a reader by the words typed in ``edit``; list them in ``results``.

    Args:
        show: Renders a record's text for display (the redaction state's ``show``).
        masking: What the search matches against while redaction is on (None: the stored
            text), asked at each search.

    Signals:
        picked(str): The id of the record chosen in the list.
        failed(str): The search could not run (the message says why).
    """

    picked = QtSignal(str)
    failed = QtSignal(str)

    def __init__(self, runner: TaskRunner, edit: QLineEdit, results: QListWidget,
                 show: Callable[[str], str], parent: QObject | None = None, *,
                 masking: Callable[[], Masking | None] | None = None) -> None:
        super().__init__(parent)
        self._masking = masking
        self._runner = runner
        self._edit = edit
        self._results = results
        self._show = show
        self._reader: MemoryReader | None = None
        self._tokens = RequestTokens()
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(250)
        self._timer.timeout.connect(self._on_timeout)
        edit.textEdited.connect(self._on_edited)
        results.setMaximumHeight(160)
        results.itemClicked.connect(self._on_item_chosen)
        results.itemActivated.connect(self._on_item_chosen)
        results.hide()

    def set_reader(self, reader: MemoryReader | None) -> None:
        """Search ``reader``'s records (None: nothing to search)."""
        self._reader = reader
        self.close()

    def close(self) -> None:
        """Hide the matches and drop a search still running."""
        self._timer.stop()
        self._tokens.next_token()
        self._results.clear()
        self._results.hide()

    def pick_first(self) -> bool:
        """Choose the first match shown (Enter in the box); False when none is shown."""
        item = self._results.item(0) if not self._results.isHidden() else None
        record_id = item.data(Qt.ItemDataRole.UserRole) if item is not None else None
        if isinstance(record_id, str):
            self._choose(record_id)
            return True
        return False

    def _on_edited(self, _text: str) -> None:
        self._timer.start()

    def _on_timeout(self) -> None:
        spawn(self.search(self._edit.text()))

    async def search(self, words: str) -> list[RecordRow]:
        """List the stored records containing every word of ``words`` (worker query)."""
        reader = self._reader
        words = words.strip()
        token = self._tokens.next_token()
        if reader is None or not words or RECORD_ID.fullmatch(words):
            self._results.hide()
            return []
        try:
            masking = self._masking() if self._masking is not None else None
            rows = await self._runner.run(partial(find_records, shown=masking), reader, words)
        except EngineError as exc:
            if self._tokens.is_current(token):
                self.failed.emit(f"Cannot search the memories: {exc}")
            return []
        if not self._tokens.is_current(token) or reader is not self._reader:
            return []
        self._results.clear()
        for row in rows:
            shown = self._show(row.content)
            item = QListWidgetItem(f"{elide(shown, 110)}  ·  {row.agent_id}")
            item.setToolTip(record_tooltip(shown, row.id))
            item.setData(Qt.ItemDataRole.UserRole, row.id)
            self._results.addItem(item)
        if not rows:
            self._results.addItem(QListWidgetItem(
                f"No stored memory contains “{words}” — a deleted one is found by its id."))
        self._results.show()
        return rows

    def _on_item_chosen(self, item: QListWidgetItem) -> None:
        record_id = item.data(Qt.ItemDataRole.UserRole)
        if isinstance(record_id, str):
            self._choose(record_id)

    def _choose(self, record_id: str) -> None:
        self.close()
        self.picked.emit(record_id)
